//! A two-endpoint, virtual-time harness (in the spirit of quinn-proto's
//! `tests/util.rs`): a hub and a runner session joined by a lossy link the test
//! controls frame by frame, plus proptest schedules of drops, duplicates, reorders,
//! reconnects and restarts. The invariant: every command and every progress frame is
//! applied exactly once and in order per stream, nothing is lost, and every bound holds.

mod common;

use std::collections::BTreeMap;

use common::session::{Fate, MixedFraming, Observer, World};
use proptest::prelude::*;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{ConnectionState, SequencingConfig};
use stapel_runner_protocol::session::{Event, HubSession, Machine, RunnerSession, SessionConfig};
use stapel_runner_protocol::wire::{Message, TaskCancel, TaskProgress};

/// What one side's application observed.
#[derive(Default)]
struct Applied {
    /// stream key → messages delivered, in delivery order.
    streams: BTreeMap<(String, Option<u64>), Vec<Message>>,
    resyncs: usize,
    peer_errors: Vec<String>,
}

/// The oracle's records of both applications.
#[derive(Default)]
struct Seen {
    hub: Applied,
    runner: Applied,
}

impl Observer for Seen {
    /// Everything a session transmits is one of the seven seed types and passes full
    /// validation, so a seed-only peer (whose decoder rejects unknown types) accepts it.
    fn transmitted(&mut self, _from_hub: bool, frame: &str) {
        if let Err(e) = stapel_runner_protocol::wire::decode(frame.as_bytes(), true) {
            panic!(
                "transmitted frame does not validate ({}): {frame}",
                e.code()
            );
        }
    }

    fn event(&mut self, at_hub: bool, e: Event) {
        // Inbound streams of the hub carry an attempt, those of the runner do not.
        let seen = if at_hub {
            &mut self.hub
        } else {
            &mut self.runner
        };
        match e {
            Event::Received(m) => seen.streams.entry(key(&m, at_hub)).or_default().push(m),
            Event::InboundGap(_) | Event::OutboundResync(_) => seen.resyncs += 1,
            Event::PeerError { code, .. } => seen.peer_errors.push(code),
            _ => {}
        }
    }
}

type Pair = World<Seen, MixedFraming>;

fn key(m: &Message, attempt_keyed: bool) -> (String, Option<u64>) {
    (
        m.task_id().unwrap_or_default().to_owned(),
        if attempt_keyed { m.attempt() } else { None },
    )
}

/// Every bound of both sessions holds.
fn check_bounds(p: &Pair) {
    let cfg = &p.config;
    for s in [p.hub.state(), p.runner.state()] {
        assert!(s.outbox_frames() <= cfg.sequencing.max_outbox_frames);
        assert!(s.outbox_bytes() <= cfg.sequencing.max_outbox_bytes);
        let (o, i) = s.stream_counts();
        assert!(o <= cfg.sequencing.max_streams && i <= cfg.sequencing.max_streams);
        for (_, c) in s.tasks() {
            for (_, t) in c.inbound() {
                // Sessions deliver in order: nothing is ever recorded ahead.
                assert_eq!(t.ahead().count(), 0);
            }
        }
    }
    assert!(p.hub.stats().held_now <= cfg.max_held_frames);
    assert!(p.runner.stats().held_now <= cfg.max_held_frames);
}

#[derive(Debug, Clone)]
enum Step {
    HubCommand { task: usize },
    RunnerProgress { task: usize, new_attempt: bool },
    ToHub(Fate),
    ToRunner(Fate),
    Disconnect,
    Connect,
    RestartRunner,
    RestartHub,
    Wait(u64),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        8 => Just(Fate::Deliver),
        1 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        1 => Just(Fate::Reorder),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..12usize).prop_map(|task| Step::HubCommand { task }),
        6 => (0..12usize, prop::bool::weighted(0.1)).prop_map(|(task, new_attempt)| Step::RunnerProgress { task, new_attempt }),
        8 => fate().prop_map(Step::ToHub),
        6 => fate().prop_map(Step::ToRunner),
        1 => Just(Step::Disconnect),
        2 => Just(Step::Connect),
        1 => Just(Step::RestartRunner),
        1 => Just(Step::RestartHub),
        2 => (1..400u64).prop_map(Step::Wait),
    ]
}

fn small_config() -> SessionConfig {
    let mut cfg = SessionConfig::default();
    let mut seq = SequencingConfig::default();
    seq.max_outbox_frames = 24;
    seq.max_outbox_bytes = 64 * 1024;
    seq.inbound_window = 32;
    cfg.sequencing = seq;
    cfg.ack_every_frames = 4;
    cfg.ack_delay_ms = 50;
    cfg.max_held_frames = 8;
    cfg.ping_interval_ms = 300;
    cfg.peer_timeout_ms = 1_000;
    cfg
}

struct Driver {
    pair: Pair,
    attempts: [u64; 12],
    n: u64,
}

impl Driver {
    fn new(config: SessionConfig) -> Self {
        Self {
            pair: World::new(config, Seen::default(), MixedFraming),
            attempts: [1; 12],
            n: 0,
        }
    }

    fn command(&mut self, task: usize) {
        self.n += 1;
        let m: Message = TaskCancel::new(format!("T-{task}"), format!("r{}", self.n)).into();
        self.pair.hub_send(m);
    }

    fn progress(&mut self, task: usize, new_attempt: bool) {
        if new_attempt {
            self.attempts[task] += 1;
        }
        self.n += 1;
        let mut payload = Map::new();
        payload.insert("n".into(), json!(self.n));
        let mut p = TaskProgress::new(format!("T-{task}"), "state", payload.into());
        p.attempt = self.attempts[task];
        self.pair.runner_send(p.into());
    }

    fn run(&mut self, steps: &[Step]) {
        for s in steps {
            match s {
                Step::HubCommand { task } => self.command(*task),
                Step::RunnerProgress { task, new_attempt } => self.progress(*task, *new_attempt),
                Step::ToHub(f) => self.pair.deliver(true, *f),
                Step::ToRunner(f) => self.pair.deliver(false, *f),
                Step::Disconnect => self.pair.disconnect(),
                Step::Connect => self.pair.connect(),
                Step::RestartRunner => self.pair.restart_runner(),
                Step::RestartHub => self.pair.restart_hub(),
                Step::Wait(ms) => self.pair.advance(*ms),
            }
            check_bounds(&self.pair);
        }
        self.pair.settle(None, 100_000);
        check_bounds(&self.pair);
    }
}

/// Every stream's deliveries are exactly seq 1..=n, in order, and equal to what the
/// sender emitted (reconstructed from the seqs: the sender numbers densely).
fn assert_exactly_once(seen: &Applied, emitted: &BTreeMap<(String, Option<u64>), u64>) {
    assert_eq!(
        seen.resyncs, 0,
        "no state was lost, so no resync may happen"
    );
    // Every transmitted frame is valid and travels the right way; the only peer errors
    // a lossy link can cause are a frame arriving beyond the window after many drops and
    // a duplicated `hello` (`unexpected_message`).
    assert!(
        seen.peer_errors
            .iter()
            .all(|c| c == "beyond_window" || c == "unexpected_message"),
        "unexpected peer errors {:?}",
        seen.peer_errors
    );
    let got: BTreeMap<_, _> = seen
        .streams
        .iter()
        .map(|(k, v)| (k.clone(), v.len() as u64))
        .collect();
    assert_eq!(&got, emitted, "per-stream delivery counts");
    for (k, msgs) in &seen.streams {
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(m.seq(), Some(i as u64 + 1), "stream {k:?} out of order");
        }
    }
}

/// The application-level record of what was accepted for sending: counted from the
/// sequencing state, which numbers each stream densely from 1.
fn next_seqs(state: &ConnectionState) -> BTreeMap<(String, Option<u64>), u64> {
    let mut out = BTreeMap::new();
    for (task, c) in state.tasks() {
        for (a, log) in c.outbound() {
            if log.last_seq() > 0 {
                out.insert((task.to_owned(), a), log.last_seq());
            }
        }
    }
    out
}

fn check_run(steps: &[Step]) {
    let mut d = Driver::new(small_config());
    d.run(steps);
    let p = &d.pair;
    // Payload integrity: the n values delivered per stream are strictly increasing.
    for msgs in p.obs.hub.streams.values() {
        let ns: Vec<u64> = msgs
            .iter()
            .map(|m| match m {
                Message::TaskProgress(p) => p.payload["n"].as_u64().unwrap(),
                other => panic!("hub received {other:?}"),
            })
            .collect();
        assert!(ns.windows(2).all(|w| w[0] < w[1]));
    }
    assert_exactly_once(&p.obs.hub, &next_seqs(p.runner.state()));
    assert_exactly_once(&p.obs.runner, &next_seqs(p.hub.state()));
    // Every message the applications asked to send was accepted in the end.
    let hub_total: u64 = next_seqs(p.hub.state()).values().sum();
    let runner_total: u64 = next_seqs(p.runner.state()).values().sum();
    let asked = steps
        .iter()
        .filter(|s| matches!(s, Step::HubCommand { .. } | Step::RunnerProgress { .. }))
        .count() as u64;
    assert_eq!(hub_total + runner_total, asked);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn lossy_schedules_apply_everything_exactly_once(steps in proptest::collection::vec(step(), 1..250)) {
        check_run(&steps);
    }
}

#[test]
fn many_tasks_and_attempts_with_periodic_reconnects() {
    // A long deterministic schedule: 6 tasks, several attempts each, a reconnect every
    // 97 steps, a duplicate every 13th frame and a drop every 29th.
    let mut steps = Vec::new();
    for i in 0..3_000usize {
        steps.push(match i % 7 {
            0 => Step::HubCommand { task: i % 6 },
            1..=3 => Step::RunnerProgress {
                task: (i / 7) % 6,
                new_attempt: i % 211 == 1,
            },
            4..=5 => Step::ToHub(if i % 29 == 4 {
                Fate::Drop
            } else if i % 13 == 5 {
                Fate::Duplicate
            } else {
                Fate::Deliver
            }),
            _ => Step::ToRunner(if i % 31 == 6 {
                Fate::Reorder
            } else {
                Fate::Deliver
            }),
        });
        if i % 97 == 96 {
            steps.push(Step::Disconnect);
            steps.push(Step::Connect);
        }
        if i % 401 == 400 {
            steps.push(Step::RestartRunner);
            steps.push(Step::Connect);
        }
        if i % 50 == 49 {
            steps.push(Step::Wait(60));
        }
    }
    check_run(&steps);
}

#[test]
fn backpressure_blocks_until_acknowledged() {
    let mut cfg = small_config();
    cfg.sequencing.max_outbox_frames = 3;
    cfg.ack_every_frames = 1000;
    cfg.ack_delay_ms = 500;
    cfg.peer_timeout_ms = 10_000;
    cfg.ping_interval_ms = 5_000;
    let mut d = Driver::new(cfg);
    d.pair.connect();
    // The hello and the barrier ping reach the hub; its pong confirms the fresh runner.
    while !d.pair.to_hub.is_empty() {
        d.pair.deliver(true, Fate::Deliver);
    }
    while !d.pair.to_runner.is_empty() {
        d.pair.deliver(false, Fate::Deliver);
    }
    for _ in 0..5 {
        d.progress(0, false);
    }
    // Three accepted, two waiting; the refusal sent one probe ping after the three.
    assert_eq!(d.pair.runner.state().outbox_frames(), 3);
    assert_eq!(d.pair.runner_pending.len(), 2);
    assert_eq!(d.pair.runner.stats().probes, 1);
    assert!(d
        .pair
        .to_hub
        .back()
        .is_some_and(|f| f.contains("\"type\":\"ping\"")));
    // Deliver the three frames and the probe: the hub answers the probe at once with a
    // pong carrying its owed acknowledgement (its ack delay of 500 ms has not passed).
    while !d.pair.to_hub.is_empty() {
        d.pair.deliver(true, Fate::Deliver);
    }
    assert_eq!(d.pair.runner_pending.len(), 2);
    assert!(d
        .pair
        .to_runner
        .iter()
        .any(|f| f.contains("\"type\":\"pong\"") && f.contains("\"ack\":[{")));
    while !d.pair.to_runner.is_empty() {
        d.pair.deliver(false, Fate::Deliver);
    }
    d.pair.flush_pending();
    assert!(d.pair.runner_pending.is_empty());
    assert_eq!(d.pair.runner.state().outbox_frames(), 2);
    d.pair.settle(None, 100_000);
    let got = &d.pair.obs.hub.streams[&("T-0".to_string(), Some(1))];
    assert_eq!(got.len(), 5);
}

#[test]
fn hub_restart_without_snapshot_is_an_explicit_resync() {
    // The hub loses its state entirely; the runner's hello declares replay_from for its
    // trimmed stream, and the fresh hub reports the gap instead of waiting forever.
    let mut d = Driver::new(small_config());
    d.pair.connect();
    for _ in 0..6 {
        d.progress(0, false);
    }
    d.pair.settle(None, 100_000);
    assert_eq!(d.pair.runner.state().outbox_frames(), 0);
    d.pair.disconnect();
    d.pair.hub = HubSession::new(d.pair.config.clone());
    d.progress(0, false);
    d.pair.settle(None, 100_000);
    assert_eq!(d.pair.obs.hub.resyncs, 1);
    let got = &d.pair.obs.hub.streams[&("T-0".to_string(), Some(1))];
    assert_eq!(got.last().and_then(Message::seq), Some(7));
}

#[test]
fn runner_restart_without_snapshot_gets_outbound_resync() {
    let mut d = Driver::new(small_config());
    d.pair.connect();
    for _ in 0..5 {
        d.command(2);
    }
    d.pair.settle(None, 100_000);
    d.pair.disconnect();
    d.pair.runner = RunnerSession::new(d.pair.hello.clone(), d.pair.config.clone());
    d.pair.obs.runner = Applied::default();
    d.command(2);
    d.pair.settle(None, 100_000);
    assert_eq!(d.pair.obs.hub.resyncs, 1, "hub reports the outbound resync");
    assert_eq!(
        d.pair.obs.runner.resyncs, 1,
        "runner reports the inbound gap"
    );
    let got = &d.pair.obs.runner.streams[&("T-2".to_string(), None)];
    assert_eq!(
        got.iter().map(|m| m.seq().unwrap()).collect::<Vec<_>>(),
        vec![6]
    );
}

#[test]
fn runner_restart_without_snapshot_continues_after_the_hubs_position() {
    // The runner loses its state after the hub applied 1..=6 of (T-0, 1). The hub's
    // acknowledgement after the new hello is ahead of the fresh runner: it is reported
    // (ack_ahead) and the runner numbers new progress after it, so the hub applies it
    // instead of dropping it as a duplicate.
    let mut d = Driver::new(small_config());
    d.pair.connect();
    for _ in 0..6 {
        d.progress(0, false);
    }
    d.pair.settle(None, 100_000);
    d.pair.disconnect();
    d.pair.runner = RunnerSession::new(d.pair.hello.clone(), d.pair.config.clone());
    d.pair.connect();
    while !d.pair.to_hub.is_empty() || !d.pair.to_runner.is_empty() {
        if !d.pair.to_hub.is_empty() {
            d.pair.deliver(true, Fate::Deliver);
        } else {
            d.pair.deliver(false, Fate::Deliver);
        }
    }
    assert_eq!(d.pair.obs.runner.peer_errors, vec!["ack_ahead".to_string()]);
    d.progress(0, false);
    d.pair.settle(None, 100_000);
    let got = &d.pair.obs.hub.streams[&("T-0".to_string(), Some(1))];
    assert_eq!(
        got.iter().map(|m| m.seq().unwrap()).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
}
