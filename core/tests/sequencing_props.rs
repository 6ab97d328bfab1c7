//! Property tests of the sequencing layer against a simple reference model, and the
//! snapshot round trip.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{Arrival, ConnectionState, Role, SequencingConfig};
use stapel_runner_protocol::wire::{self, Message, TaskCancel, TaskProgress};

fn cancel(task: &str, seq: u64) -> Message {
    let mut c = TaskCancel::new(task, "r");
    c.seq = seq;
    c.into()
}

fn progress(task: &str, attempt: u64, n: u64) -> Message {
    let mut payload = Map::new();
    payload.insert("n".into(), json!(n));
    let mut p = TaskProgress::new(task, "state", payload.into());
    p.attempt = attempt;
    p.into()
}

const TASKS: [&str; 3] = ["T-1", "T-2", "T-3"];

#[derive(Debug, Clone)]
enum InOp {
    Receive { task: usize, seq: u64 },
    Skip { task: usize, first: u64 },
}

fn in_op() -> impl Strategy<Value = InOp> {
    prop_oneof![
        6 => (0..3usize, 0..40u64).prop_map(|(task, seq)| InOp::Receive { task, seq }),
        1 => (0..3usize, 0..40u64).prop_map(|(task, first)| InOp::Skip { task, first }),
    ]
}

/// Reference model of one inbound stream: every seq ever seen plus the skip floor.
#[derive(Default, Clone)]
struct ModelStream {
    seen: BTreeSet<u64>,
    floor: u64,
}

impl ModelStream {
    fn watermark(&self) -> u64 {
        let mut w = self.floor;
        while self.seen.contains(&(w + 1)) {
            w += 1;
        }
        w
    }
}

#[derive(Debug, Clone)]
enum OutOp {
    Emit { task: usize, attempt: u64 },
    Ack { task: usize, attempt: u64, seq: u64 },
}

fn out_op() -> impl Strategy<Value = OutOp> {
    prop_oneof![
        4 => (0..3usize, 1..3u64).prop_map(|(task, attempt)| OutOp::Emit { task, attempt }),
        1 => (0..3usize, 1..3u64, 0..30u64).prop_map(|(task, attempt, seq)| OutOp::Ack { task, attempt, seq }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Inbound: arrivals, the resume map and skip_to agree with a model that keeps every
    /// seq; the tracker never holds more than the window above its watermark; snapshots
    /// round-trip at every step.
    #[test]
    fn inbound_matches_model(ops in proptest::collection::vec(in_op(), 1..120), window in 1..16u64) {
        let mut cfg = SequencingConfig::default();
        cfg.inbound_window = window;
        let mut state = ConnectionState::with_config(Role::Runner, cfg);
        let mut model: BTreeMap<usize, ModelStream> = BTreeMap::new();
        for op in ops {
            match op {
                InOp::Receive { task, seq } => {
                    let m = model.entry(task).or_default().clone();
                    let w = m.watermark();
                    let got = state.receive(&cancel(TASKS[task], seq));
                    if seq == 0 {
                        prop_assert_eq!(got.unwrap_err().code(), "invalid_seq");
                    } else if seq > w + window {
                        prop_assert_eq!(got.unwrap_err().code(), "beyond_window");
                    } else if seq <= w || m.seen.contains(&seq) {
                        prop_assert_eq!(got.unwrap(), Arrival::Duplicate);
                    } else {
                        let want = if seq == w + 1 { Arrival::InOrder } else { Arrival::Ahead };
                        prop_assert_eq!(got.unwrap(), want);
                        model.get_mut(&task).unwrap().seen.insert(seq);
                    }
                    if model.get(&task).is_some_and(|m| m.seen.is_empty() && m.floor == 0) {
                        model.remove(&task);
                    }
                }
                InOp::Skip { task, first } => {
                    let m = model.entry(task).or_default();
                    let w = m.watermark();
                    let got = state.skip_to(TASKS[task], None, first).unwrap();
                    if first > w + 1 {
                        prop_assert_eq!(got, Some((w + 1, first - 1)));
                        m.floor = first - 1;
                    } else {
                        prop_assert_eq!(got, None);
                    }
                    if m.seen.is_empty() && m.floor == 0 {
                        model.remove(&task);
                    }
                }
            }
            let resume = state.resume_map();
            let want: BTreeMap<String, u64> = model
                .iter()
                .map(|(t, m)| (TASKS[*t].to_string(), m.watermark()))
                .collect();
            let got: BTreeMap<String, u64> = resume.into_iter().collect();
            prop_assert_eq!(got, want);
            for (_, channel) in state.tasks() {
                for (_, t) in channel.inbound() {
                    prop_assert!(t.ahead().all(|s| s > t.watermark() && s <= t.watermark() + window));
                }
            }
            let restored = ConnectionState::restore(&state.snapshot()).unwrap();
            prop_assert_eq!(&restored, &state);
        }
    }

    /// Outbound: seqs are dense per (task, attempt) except where an acknowledgement
    /// ahead of them moves numbering on; kept frames are exactly the emitted frames above
    /// the acknowledged position; counters match; backpressure refuses without consuming
    /// a seq; snapshots round-trip to an equal state.
    #[test]
    fn outbound_matches_model(ops in proptest::collection::vec(out_op(), 1..120), max_frames in 1..20usize) {
        let mut cfg = SequencingConfig::default();
        cfg.max_outbox_frames = max_frames;
        let mut state = ConnectionState::with_config(Role::Runner, cfg);
        // (task, attempt) -> (next seq, kept frames by seq)
        let mut model: BTreeMap<(usize, u64), (u64, BTreeMap<u64, String>)> = BTreeMap::new();
        let mut n = 0;
        for op in ops {
            match op {
                OutOp::Emit { task, attempt } => {
                    n += 1;
                    let msg = progress(TASKS[task], attempt, n);
                    let kept: usize = model.values().map(|(_, k)| k.len()).sum();
                    match state.emit(msg.clone()) {
                        Ok(stamped) => {
                            prop_assert!(kept < max_frames);
                            let entry = model.entry((task, attempt)).or_insert((1, BTreeMap::new()));
                            prop_assert_eq!(stamped.seq(), Some(entry.0));
                            entry.1.insert(entry.0, wire::encode(&stamped));
                            entry.0 += 1;
                        }
                        Err(e) => {
                            prop_assert_eq!(kept, max_frames);
                            prop_assert_eq!(e.code(), "backpressure");
                            prop_assert_eq!(e.into_message(), msg);
                        }
                    }
                }
                OutOp::Ack { task, attempt, seq } => {
                    let dropped = state.ack(TASKS[task], Some(attempt), seq).unwrap();
                    // An ack beyond the last emitted seq re-stamps every kept frame
                    // after it (nothing is lost) and moves numbering past them; an ack
                    // of an unknown stream moves numbering past it.
                    let want = match model.get_mut(&(task, attempt)) {
                        Some((next, kept)) => {
                            if seq >= *next {
                                let old = std::mem::take(kept);
                                let mut s = seq;
                                for (_, f) in old {
                                    s += 1;
                                    let mut m = wire::decode(f.as_bytes(), false).unwrap();
                                    m.set_seq(s);
                                    kept.insert(s, wire::encode(&m));
                                }
                                *next = s + 1;
                                0
                            } else {
                                let before = kept.len();
                                kept.retain(|s, _| *s > seq);
                                before - kept.len()
                            }
                        }
                        None => {
                            if seq > 0 {
                                model.insert((task, attempt), (seq + 1, BTreeMap::new()));
                            }
                            0
                        }
                    };
                    prop_assert_eq!(dropped, want);
                }
            }
            let frames: Vec<String> = state.unacked().map(|(_, _, f)| f.frame.clone()).collect();
            let mut want_frames = Vec::new();
            // unacked() lists tasks in first-seen order, attempts in first-emit order.
            for (task, channel) in state.tasks() {
                for (attempt, log) in channel.outbound() {
                    let t = TASKS.iter().position(|x| *x == task).unwrap();
                    let (next, kept) = &model[&(t, attempt.unwrap())];
                    prop_assert_eq!(log.next_seq(), *next);
                    want_frames.extend(kept.values().cloned());
                }
            }
            prop_assert_eq!(&frames, &want_frames);
            prop_assert_eq!(state.outbox_frames(), frames.len());
            prop_assert_eq!(state.outbox_bytes(), frames.iter().map(String::len).sum::<usize>());
            let restored = ConnectionState::restore(&state.snapshot()).unwrap();
            prop_assert_eq!(&restored, &state);
            prop_assert_eq!(restored.snapshot(), state.snapshot());
        }
    }

    /// Replay after a declared position never loses a kept frame and never repeats one
    /// at or below the declaration; a declaration below the kept log is a resync.
    #[test]
    fn replay_is_exact(emits in 1..30u64, acked in 0..30u64, declared in 0..40u64) {
        let mut hub = ConnectionState::new(Role::Hub);
        let mut frames = Vec::new();
        for _ in 0..emits {
            frames.push(hub.emit(cancel("T-1", 0)).unwrap());
        }
        let acked = acked.min(emits);
        hub.ack("T-1", None, acked).unwrap();
        let mut resume = indexmap::IndexMap::new();
        resume.insert("T-1".to_string(), declared);
        let replay = hub.replay_for(&resume);
        let got: Vec<Message> = replay.messages().get("T-1").cloned().unwrap_or_default();
        if declared > emits {
            // The state is older than the peer's: the kept frames are re-stamped after
            // the declared position, in order, and replayed — none is lost.
            prop_assert_eq!(got.len() as u64, emits - acked);
            for (i, m) in got.iter().enumerate() {
                let mut orig = frames[acked as usize + i].clone();
                orig.set_seq(declared + 1 + i as u64);
                prop_assert_eq!(m, &orig);
            }
            prop_assert_eq!(replay.peer_ahead.len(), 1);
        } else {
            let from = declared.max(acked);
            let want: Vec<Message> = frames[from as usize..].to_vec();
            prop_assert_eq!(got, want);
            if declared < acked {
                prop_assert_eq!(replay.resync.len(), 1);
                prop_assert_eq!(replay.resync[0].missing_from, declared + 1);
                prop_assert_eq!(replay.resync[0].missing_to, acked);
            } else {
                prop_assert!(replay.resync.is_empty());
            }
        }
    }
}

#[test]
fn seed_example() {
    let mut hub = ConnectionState::new(Role::Hub);
    let mut runner = ConnectionState::new(Role::Runner);
    let c1 = hub.emit(TaskCancel::new("T-1", "a").into()).unwrap();
    let c2 = hub.emit(TaskCancel::new("T-1", "b").into()).unwrap();
    assert_eq!(c1.seq(), Some(1));
    assert_eq!(c2.seq(), Some(2));
    assert!(runner.receive(&c1).unwrap().is_new());
    let resume = runner.resume_map();
    assert_eq!(resume.len(), 1);
    assert_eq!(resume["T-1"], 1);
    let replay = hub.replay_for(&resume);
    assert_eq!(replay.messages()["T-1"], vec![c2]);
}

#[test]
fn snapshot_rejects_unknown_version_and_corruption() {
    let mut s = ConnectionState::new(Role::Hub);
    s.emit(TaskCancel::new("T-1", "a").into()).unwrap();
    let bytes = s.snapshot();
    assert!(bytes.starts_with(b"stapel-seq-snapshot/1\n"));
    let mut v2 = bytes.clone();
    v2[20] = b'9';
    assert_eq!(
        ConnectionState::restore(&v2).unwrap_err().code(),
        "unsupported_snapshot_version"
    );
    let truncated = &bytes[..bytes.len() - 3];
    assert_eq!(
        ConnectionState::restore(truncated).unwrap_err().code(),
        "corrupt_snapshot"
    );
    assert_eq!(
        ConnectionState::restore(b"{}").unwrap_err().code(),
        "not_a_snapshot"
    );
}

#[test]
fn extreme_seqs_are_refused_without_overflow() {
    let mut runner = ConnectionState::new(Role::Runner);
    let mut m = cancel("T-1", u64::MAX);
    assert_eq!(runner.receive(&m).unwrap_err().code(), "invalid_seq");
    m.set_seq(wire::MAX_SAFE_INTEGER + 1);
    assert_eq!(runner.classify(&m).unwrap_err().code(), "invalid_seq");
    // Skipping to the end of the seq space clamps at 2^53 − 1 and never overflows.
    assert_eq!(
        runner.skip_to("T-1", None, u64::MAX).unwrap(),
        Some((1, wire::MAX_SAFE_INTEGER))
    );
    m.set_seq(wire::MAX_SAFE_INTEGER);
    assert_eq!(runner.receive(&m).unwrap(), Arrival::Duplicate);
    assert_eq!(runner.resume_map()["T-1"], wire::MAX_SAFE_INTEGER);
    let mut hub = ConnectionState::new(Role::Hub);
    hub.emit(cancel("T-1", 0)).unwrap();
    // A declaration above 2^53 − 1 is invalid and counts as absent (declared 0).
    let mut resume = indexmap::IndexMap::new();
    resume.insert("T-1".to_string(), u64::MAX);
    let replay = hub.replay_for(&resume);
    assert!(replay.peer_ahead.is_empty());
    assert_eq!(hub.last_emitted("T-1", None), 1);
    hub.ack("T-1", None, 1).unwrap();
    resume.insert("T-1".to_string(), wire::MAX_SAFE_INTEGER);
    let replay = hub.replay_for(&resume);
    assert_eq!(replay.peer_ahead.len(), 1);
    // Numbering would continue past 2^53 − 1: emit refuses instead of overflowing.
    assert_eq!(
        hub.emit(cancel("T-1", 0)).unwrap_err().code(),
        "seq_exhausted"
    );
}
