//! An independent reference model of the sequencing rules of seed 000 (emit, receive,
//! duplicate suppression, resume map, replay, acknowledgement, provisional numbering,
//! forget / revive, tombstone eviction), written from the documented rules with plain
//! collections and no shared code, and checked against [`ConnectionState`] on random
//! operation sequences for both roles. The conformance vectors record single cases; this
//! test is their oracle.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{Arrival, ConnectionState, Role, SequencingConfig};
use stapel_runner_protocol::wire::{self, Message, TaskCancel, TaskProgress};

const TASKS: [&str; 3] = ["T-1", "T-2", "T-3"];

type Attempt = Option<u64>;

/// One outbound stream of the model: the next seq, the kept messages (unstamped), and
/// the first provisional seq (`None` = final).
#[derive(Clone, Debug)]
struct MOut {
    next: u64,
    kept: Vec<(u64, Message)>,
    provisional: Option<u64>,
}

/// One inbound stream of the model: a floor (seqs at or below it count as received) and
/// every seq received above it.
#[derive(Clone, Debug, Default)]
struct MIn {
    floor: u64,
    seen: BTreeSet<u64>,
}

impl MIn {
    fn watermark(&self) -> u64 {
        let mut w = self.floor;
        while self.seen.contains(&(w + 1)) {
            w += 1;
        }
        w
    }
    fn has_received(&self) -> bool {
        let w = self.watermark();
        w > 0 || self.seen.iter().any(|s| *s > w)
    }
}

#[derive(Clone, Debug, Default)]
struct MTask {
    out: Vec<(Attempt, MOut)>,
    inb: Vec<(Attempt, MIn)>,
}

#[derive(Clone, Debug)]
struct MTomb {
    out: Vec<(Attempt, u64)>,
    inb: Vec<(Attempt, u64)>,
}

#[derive(Clone, Debug)]
struct Model {
    role: Role,
    window: u64,
    max_tombstones: usize,
    /// Live tasks in order of first sight (or revival).
    live: Vec<(String, MTask)>,
    /// Forgotten tasks, oldest first.
    forgotten: Vec<(String, MTomb)>,
    positions_known: bool,
}

/// A stream's reconciliation with a declared position `d`: `(ahead, dropped)`.
fn reconcile(o: &mut MOut, d: u64) -> (bool, usize) {
    let first_available = o.kept.first().map_or(o.next, |(s, _)| *s);
    let collide = match o.provisional {
        None => (d >= o.next).then_some(first_available),
        Some(p) => Some(p.min(o.next)),
    };
    o.provisional = None;
    match collide {
        Some(m) if d >= m => {
            o.kept.retain(|(s, _)| *s >= m);
            let mut s = d;
            for (seq, _) in &mut o.kept {
                s += 1;
                *seq = s;
            }
            o.next = s + 1;
            (true, 0)
        }
        _ => {
            let before = o.kept.len();
            o.kept.retain(|(s, _)| *s > d);
            (false, before - o.kept.len())
        }
    }
}

impl Model {
    fn new(role: Role, window: u64, max_tombstones: usize) -> Self {
        Self {
            role,
            window,
            max_tombstones,
            live: Vec::new(),
            forgotten: Vec::new(),
            positions_known: true,
        }
    }

    fn live_mut(&mut self, task: &str) -> Option<&mut MTask> {
        self.live
            .iter_mut()
            .find(|(t, _)| t == task)
            .map(|(_, c)| c)
    }

    fn tomb(&self, task: &str) -> Option<&MTomb> {
        self.forgotten
            .iter()
            .find(|(t, _)| t == task)
            .map(|(_, t)| t)
    }

    fn new_out(&self, next: u64) -> MOut {
        MOut {
            next,
            kept: Vec::new(),
            provisional: (!self.positions_known).then_some(next),
        }
    }

    fn revive(&mut self, task: &str) {
        let Some(i) = self.forgotten.iter().position(|(t, _)| t == task) else {
            return;
        };
        let (_, tomb) = self.forgotten.remove(i);
        let mut c = MTask::default();
        for (a, last) in tomb.out {
            c.out.push((a, self.new_out(last + 1)));
        }
        for (a, w) in tomb.inb {
            c.inb.push((
                a,
                MIn {
                    floor: w,
                    seen: BTreeSet::new(),
                },
            ));
        }
        self.live.push((task.to_owned(), c));
    }

    /// The seq `emit` stamps (and keeps `msg` under it).
    fn emit(&mut self, task: &str, attempt: Attempt, msg: Message) -> u64 {
        self.revive(task);
        let fresh = self.new_out(1);
        if self.live_mut(task).is_none() {
            self.live.push((task.to_owned(), MTask::default()));
        }
        let c = self.live_mut(task).unwrap();
        if !c.out.iter().any(|(a, _)| *a == attempt) {
            c.out.push((attempt, fresh));
        }
        let o = &mut c.out.iter_mut().find(|(a, _)| *a == attempt).unwrap().1;
        let seq = o.next;
        o.kept.push((seq, msg));
        o.next += 1;
        seq
    }

    /// `receive`: the arrival, or the error code.
    fn receive(&mut self, task: &str, attempt: Attempt, seq: u64) -> Result<Arrival, &'static str> {
        if seq == 0 {
            return Err("invalid_seq");
        }
        let stream = match self.tomb(task) {
            Some(t) => MIn {
                floor: t
                    .inb
                    .iter()
                    .find(|(a, _)| *a == attempt)
                    .map_or(0, |(_, w)| *w),
                seen: BTreeSet::new(),
            },
            None => self
                .live
                .iter()
                .find(|(t, _)| t == task)
                .and_then(|(_, c)| c.inb.iter().find(|(a, _)| *a == attempt))
                .map(|(_, s)| s.clone())
                .unwrap_or_default(),
        };
        let w = stream.watermark();
        if seq <= w || stream.seen.contains(&seq) {
            return Ok(Arrival::Duplicate);
        }
        if seq - w > self.window {
            return Err("beyond_window");
        }
        self.revive(task);
        if self.live_mut(task).is_none() {
            self.live.push((task.to_owned(), MTask::default()));
        }
        let c = self.live_mut(task).unwrap();
        if !c.inb.iter().any(|(a, _)| *a == attempt) {
            c.inb.push((attempt, MIn::default()));
        }
        let s = &mut c.inb.iter_mut().find(|(a, _)| *a == attempt).unwrap().1;
        s.seen.insert(seq);
        Ok(if seq == w + 1 {
            Arrival::InOrder
        } else {
            Arrival::Ahead
        })
    }

    /// `ack`: the number of kept frames dropped.
    fn ack(&mut self, task: &str, attempt: Attempt, seq: u64) -> usize {
        if self.tomb(task).is_some() {
            return 0;
        }
        let exists = self
            .live_mut(task)
            .is_some_and(|c| c.out.iter().any(|(a, _)| *a == attempt));
        if !exists {
            if seq > 0 {
                if self.live_mut(task).is_none() {
                    self.live.push((task.to_owned(), MTask::default()));
                }
                let c = self.live_mut(task).unwrap();
                c.out.push((
                    attempt,
                    MOut {
                        next: seq + 1,
                        kept: Vec::new(),
                        provisional: None,
                    },
                ));
            }
            return 0;
        }
        let c = self.live_mut(task).unwrap();
        let o = &mut c.out.iter_mut().find(|(a, _)| *a == attempt).unwrap().1;
        let (ahead, dropped) = reconcile(o, seq);
        if ahead {
            0
        } else {
            dropped
        }
    }

    fn forget(&mut self, task: &str) -> bool {
        let Some(i) = self.live.iter().position(|(t, _)| t == task) else {
            return false;
        };
        let (_, c) = self.live.remove(i);
        let tomb = MTomb {
            out: c.out.iter().map(|(a, o)| (*a, o.next - 1)).collect(),
            inb: c.inb.iter().map(|(a, s)| (*a, s.watermark())).collect(),
        };
        if self.max_tombstones > 0 {
            while self.forgotten.len() >= self.max_tombstones {
                self.forgotten.remove(0);
            }
            self.forgotten.push((task.to_owned(), tomb));
        }
        true
    }

    fn resume_map(&self) -> IndexMap<String, u64> {
        let mut out = IndexMap::new();
        for (t, c) in &self.live {
            if let Some((_, s)) = c
                .inb
                .iter()
                .filter(|(_, s)| s.has_received())
                .max_by_key(|(a, _)| *a)
            {
                out.insert(t.clone(), s.watermark());
            }
        }
        out
    }

    /// `replay_for`: (streams as (task, attempt, frames), resync as (task, declared,
    /// from, to), peer_ahead as (task, seq), unknown).
    #[allow(clippy::type_complexity)]
    fn replay_for(
        &mut self,
        resume: &IndexMap<String, u64>,
    ) -> (
        Vec<(String, Attempt, Vec<String>)>,
        Vec<(String, u64, u64, u64)>,
        Vec<(String, u64)>,
        Vec<String>,
    ) {
        let role = self.role;
        let (mut streams, mut resync, mut ahead, mut unknown) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (t, c) in &mut self.live {
            let declared_attempt = match role {
                Role::Hub => c.out.iter().any(|(a, _)| a.is_none()).then_some(None),
                Role::Runner => {
                    if resume.contains_key(t) {
                        c.out.iter().map(|(a, _)| *a).max()
                    } else {
                        None
                    }
                }
            };
            for (a, o) in &mut c.out {
                if declared_attempt == Some(*a) {
                    let d = resume.get(t).copied().unwrap_or(0);
                    let (was_ahead, _) = reconcile(o, d);
                    if was_ahead {
                        ahead.push((t.clone(), d));
                    } else {
                        let first = o.kept.first().map_or(o.next, |(s, _)| *s);
                        if first > d + 1 {
                            resync.push((t.clone(), d, d + 1, first - 1));
                        }
                    }
                }
                if !o.kept.is_empty() {
                    let frames = o.kept.iter().map(|(s, m)| stamp(m, *s)).collect();
                    streams.push((t.clone(), *a, frames));
                }
            }
        }
        for t in resume.keys() {
            let known = self.live.iter().any(|(x, c)| x == t && !c.out.is_empty())
                || self.tomb(t).is_some();
            if !known && !unknown.contains(t) {
                unknown.push(t.clone());
            }
        }
        (streams, resync, ahead, unknown)
    }

    fn mark_unconfirmed(&mut self) {
        for (_, c) in &mut self.live {
            for (_, o) in &mut c.out {
                if o.provisional.is_none() {
                    o.provisional = Some(o.next);
                }
            }
        }
        self.positions_known = false;
    }

    fn confirm_all(&mut self) {
        for (_, c) in &mut self.live {
            for (_, o) in &mut c.out {
                o.provisional = None;
            }
        }
        self.positions_known = true;
    }

    fn unacked(&self) -> Vec<String> {
        self.live
            .iter()
            .flat_map(|(_, c)| c.out.iter())
            .flat_map(|(_, o)| o.kept.iter().map(|(s, m)| stamp(m, *s)))
            .collect()
    }

    fn stream_counts(&self) -> (usize, usize) {
        let out = self.live.iter().map(|(_, c)| c.out.len()).sum();
        let inb = self.live.iter().map(|(_, c)| c.inb.len()).sum();
        (out, inb)
    }
}

fn stamp(m: &Message, seq: u64) -> String {
    let mut m = m.clone();
    m.set_seq(seq);
    wire::encode(&m)
}

fn command(task: &str, n: u64) -> Message {
    TaskCancel::new(task, format!("r{n}")).into()
}

fn progress(task: &str, attempt: u64, n: u64) -> Message {
    let mut p = Map::new();
    p.insert("n".into(), json!(n));
    let mut m = TaskProgress::new(task, "state", p.into());
    m.attempt = attempt;
    m.into()
}

#[derive(Debug, Clone)]
enum Op {
    Emit { task: usize, attempt: u64 },
    Receive { task: usize, attempt: u64, seq: u64 },
    Ack { task: usize, attempt: u64, seq: u64 },
    Forget { task: usize },
    ReplayFor { entries: Vec<(usize, u64)> },
    MarkUnconfirmed,
    ConfirmAll,
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 1..3u64).prop_map(|(task, attempt)| Op::Emit { task, attempt }),
        6 => (0..3usize, 1..3u64, 0..10u64)
            .prop_map(|(task, attempt, seq)| Op::Receive { task, attempt, seq }),
        3 => (0..3usize, 1..3u64, 0..14u64)
            .prop_map(|(task, attempt, seq)| Op::Ack { task, attempt, seq }),
        1 => (0..3usize).prop_map(|task| Op::Forget { task }),
        2 => proptest::collection::vec((0..4usize, 0..14u64), 0..3)
            .prop_map(|entries| Op::ReplayFor { entries }),
        1 => Just(Op::MarkUnconfirmed),
        1 => Just(Op::ConfirmAll),
        1 => Just(Op::Snapshot),
    ]
}

fn run(role: Role, window: u64, max_tombstones: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut cfg = SequencingConfig::default();
    cfg.inbound_window = window;
    cfg.max_tombstones = max_tombstones;
    let mut state = ConnectionState::with_config(role, cfg);
    let mut model = Model::new(role, window, max_tombstones);
    let hub = role == Role::Hub;
    let mut n = 0;
    for op in ops {
        n += 1;
        match op {
            Op::Emit { task, attempt } => {
                let t = TASKS[task];
                let (msg, a) = if hub {
                    (command(t, n), None)
                } else {
                    (progress(t, attempt, n), Some(attempt))
                };
                let stamped = state.emit(msg.clone()).expect("emit within the bounds");
                let want = model.emit(t, a, msg);
                prop_assert_eq!(stamped.seq(), Some(want));
            }
            Op::Receive { task, attempt, seq } => {
                let t = TASKS[task];
                let (mut msg, a) = if hub {
                    (progress(t, attempt, n), Some(attempt))
                } else {
                    (command(t, n), None)
                };
                msg.set_seq(seq);
                let classified = state.classify(&msg).map_err(|e| e.code());
                let got = state.receive(&msg).map_err(|e| e.code());
                let want = model.receive(t, a, seq);
                prop_assert_eq!(&classified, &want, "classify {:?}", msg);
                prop_assert_eq!(&got, &want, "receive {:?}", msg);
            }
            Op::Ack { task, attempt, seq } => {
                let t = TASKS[task];
                let a = (!hub).then_some(attempt);
                let got = state.ack(t, a, seq).expect("kept frames re-stamp");
                prop_assert_eq!(got, model.ack(t, a, seq), "ack {} {:?} {}", t, a, seq);
            }
            Op::Forget { task } => {
                let t = TASKS[task];
                prop_assert_eq!(state.forget_task(t), model.forget(t));
            }
            Op::ReplayFor { entries } => {
                let resume: IndexMap<String, u64> = entries
                    .into_iter()
                    .map(|(t, s)| (["T-1", "T-2", "T-3", "T-9"][t].to_owned(), s))
                    .collect();
                let got = state.replay_for(&resume);
                let (streams, resync, ahead, unknown) = model.replay_for(&resume);
                prop_assert!(got.failed.is_empty());
                let got_streams: Vec<(String, Attempt, Vec<String>)> = got
                    .streams
                    .iter()
                    .map(|s| {
                        (
                            s.task_id.clone(),
                            s.attempt,
                            s.frames.iter().map(|f| f.frame.clone()).collect(),
                        )
                    })
                    .collect();
                prop_assert_eq!(got_streams, streams);
                let got_resync: Vec<(String, u64, u64, u64)> = got
                    .resync
                    .iter()
                    .map(|r| (r.task_id.clone(), r.declared, r.missing_from, r.missing_to))
                    .collect();
                prop_assert_eq!(got_resync, resync);
                let got_ahead: Vec<(String, u64)> = got
                    .peer_ahead
                    .iter()
                    .map(|p| (p.task_id.clone(), p.seq))
                    .collect();
                prop_assert_eq!(got_ahead, ahead);
                prop_assert_eq!(&got.unknown, &unknown);
            }
            Op::MarkUnconfirmed => {
                state.mark_unconfirmed();
                model.mark_unconfirmed();
            }
            Op::ConfirmAll => {
                state.confirm_all();
                model.confirm_all();
            }
            Op::Snapshot => {
                let restored = ConnectionState::restore(&state.snapshot()).expect("restores");
                prop_assert_eq!(&restored, &state);
                // A restored state keeps its provisional frames; the model's positions
                // stay as they were only when no stream is provisional.
                let provisional = model
                    .live
                    .iter()
                    .flat_map(|(_, c)| c.out.iter())
                    .any(|(_, o)| o.provisional.is_some_and(|p| p < o.next));
                // (the snapshot persists provisional frames, not an empty provisional
                // range, nor "positions unknown" when nothing is provisional).
                if provisional || model.positions_known {
                    model.positions_known = !provisional;
                    for (_, c) in &mut model.live {
                        for (_, o) in &mut c.out {
                            if o.provisional.is_some_and(|p| p >= o.next) {
                                o.provisional = None;
                            }
                        }
                    }
                    state = restored;
                }
            }
        }
        // After every operation: the resume map, the kept frames, the counters, the
        // tombstones and every task's last_received agree with the model.
        prop_assert_eq!(state.resume_map(), model.resume_map());
        let unacked: Vec<String> = state.unacked().map(|(_, _, f)| f.frame.clone()).collect();
        prop_assert_eq!(unacked, model.unacked());
        prop_assert_eq!(state.stream_counts(), model.stream_counts());
        prop_assert_eq!(state.outbox_frames(), model.unacked().len());
        prop_assert_eq!(state.is_confirmed(), model.positions_known);
        let order: Vec<&str> = state.tasks().map(|(t, _)| t).collect();
        let want_order: Vec<&str> = model.live.iter().map(|(t, _)| t.as_str()).collect();
        prop_assert_eq!(order, want_order);
        let resume = model.resume_map();
        for (t, c) in state.tasks() {
            prop_assert_eq!(c.last_received(), resume.get(t).copied().unwrap_or(0));
        }
        for t in TASKS {
            prop_assert_eq!(state.is_forgotten(t), model.tomb(t).is_some(), "{}", t);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, .. ProptestConfig::default() })]

    #[test]
    fn hub_matches_reference_model(
        ops in proptest::collection::vec(op(), 1..80),
        window in 1..8u64,
        max_tombstones in 0..3usize,
    ) {
        run(Role::Hub, window, max_tombstones, ops)?;
    }

    #[test]
    fn runner_matches_reference_model(
        ops in proptest::collection::vec(op(), 1..80),
        window in 1..8u64,
        max_tombstones in 0..3usize,
    ) {
        run(Role::Runner, window, max_tombstones, ops)?;
    }
}
