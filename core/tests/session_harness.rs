//! A two-endpoint, virtual-time harness (in the spirit of quinn-proto's
//! `tests/util.rs`): a hub and a runner session joined by a lossy link the test
//! controls frame by frame, plus proptest schedules of drops, duplicates, reorders,
//! reconnects and restarts. The invariant: every command and every progress frame is
//! applied exactly once and in order per stream, nothing is lost, and every bound holds.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{ConnectionState, SequencingConfig};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::{Hello, Message, TaskCancel, TaskProgress};

/// One direction of the link: frames in flight, in order.
#[derive(Default)]
struct Wire {
    in_flight: VecDeque<String>,
}

/// What each side's application observed.
#[derive(Default)]
struct Applied {
    /// stream key → messages delivered, in delivery order.
    streams: BTreeMap<(String, Option<u64>), Vec<Message>>,
    resyncs: usize,
    peer_errors: Vec<String>,
}

struct Pair {
    config: SessionConfig,
    hello: Hello,
    hub: HubSession,
    runner: RunnerSession,
    now: u64,
    connected: bool,
    to_runner: Wire,
    to_hub: Wire,
    hub_seen: Applied,
    runner_seen: Applied,
    /// Messages the applications want to send but the session refused (backpressure).
    hub_pending: VecDeque<Message>,
    runner_pending: VecDeque<Message>,
}

fn key(m: &Message, attempt_keyed: bool) -> (String, Option<u64>) {
    (
        m.task_id().unwrap_or_default().to_owned(),
        if attempt_keyed { m.attempt() } else { None },
    )
}

impl Pair {
    fn new(config: SessionConfig) -> Self {
        let hello = Hello::new("p-1", "0.1.0");
        Self {
            hub: HubSession::new(config.clone()),
            runner: RunnerSession::new(hello.clone(), config.clone()),
            config,
            hello,
            now: 0,
            connected: false,
            to_runner: Wire::default(),
            to_hub: Wire::default(),
            hub_seen: Applied::default(),
            runner_seen: Applied::default(),
            hub_pending: VecDeque::new(),
            runner_pending: VecDeque::new(),
        }
    }

    /// Drain both sides' outputs into the link and the application records.
    fn collect(&mut self) {
        let mut close = false;
        loop {
            match self.hub.poll_output() {
                Some(Output::Transmit(f)) => {
                    assert_seed_decodable(&f);
                    if self.connected {
                        self.to_runner.in_flight.push_back(f)
                    }
                }
                Some(Output::Event(e)) => record(&mut self.hub_seen, e, true),
                Some(Output::Close(_)) => close = true,
                None => break,
            }
        }
        loop {
            match self.runner.poll_output() {
                Some(Output::Transmit(f)) => {
                    assert_seed_decodable(&f);
                    if self.connected {
                        self.to_hub.in_flight.push_back(f)
                    }
                }
                Some(Output::Event(e)) => record(&mut self.runner_seen, e, false),
                Some(Output::Close(_)) => close = true,
                None => break,
            }
        }
        if close {
            self.disconnect();
        }
    }

    fn deadline(&mut self) -> Option<u64> {
        assert!(!self.hub.has_output(), "collect drained the hub");
        assert!(!self.runner.has_output(), "collect drained the runner");
        match (self.hub.poll_timeout(), self.runner.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn connect(&mut self) {
        if self.connected {
            return;
        }
        self.connected = true;
        self.hub.handle_input(self.now, Input::Connected).unwrap();
        self.runner
            .handle_input(self.now, Input::Connected)
            .unwrap();
        self.collect();
    }

    fn disconnect(&mut self) {
        if !self.connected {
            return;
        }
        self.connected = false;
        self.to_hub.in_flight.clear();
        self.to_runner.in_flight.clear();
        self.hub
            .handle_input(self.now, Input::Disconnected)
            .unwrap();
        self.runner
            .handle_input(self.now, Input::Disconnected)
            .unwrap();
        self.collect();
    }

    /// Deliver (or drop, or duplicate) the next frame in one direction.
    fn deliver(&mut self, to_hub: bool, fate: Fate) {
        let wire = if to_hub {
            &mut self.to_hub
        } else {
            &mut self.to_runner
        };
        let Some(frame) = wire.in_flight.pop_front() else {
            return;
        };
        match fate {
            Fate::Drop => return,
            Fate::Duplicate => wire.in_flight.push_front(frame.clone()),
            Fate::Reorder => {
                if let Some(next) = wire.in_flight.pop_front() {
                    wire.in_flight.push_front(frame);
                    wire.in_flight.push_front(next);
                    return;
                }
            }
            Fate::Deliver => {}
        }
        // Half the frames travel as JSONL bytes (framer path), half as whole frames.
        let input = if frame.len() % 2 == 0 {
            Input::Frame(frame)
        } else {
            Input::Bytes(format!("{frame}\n").into_bytes())
        };
        let r = if to_hub {
            self.hub.handle_input(self.now, input)
        } else {
            self.runner.handle_input(self.now, input)
        };
        r.unwrap();
        self.collect();
    }

    fn hub_send(&mut self, msg: Message) {
        self.hub_pending.push_back(msg);
        self.flush_pending();
    }

    fn runner_send(&mut self, msg: Message) {
        self.runner_pending.push_back(msg);
        self.flush_pending();
    }

    /// Retry refused sends, in order, until one is refused again.
    fn flush_pending(&mut self) {
        while let Some(m) = self.hub_pending.pop_front() {
            match self.hub.handle_input(self.now, Input::Send(m)) {
                Ok(()) => {}
                Err(SessionError::Emit(e)) if e.code() == "backpressure" => {
                    self.hub_pending.push_front(e.into_message());
                    break;
                }
                Err(e) => panic!("hub send: {e}"),
            }
        }
        while let Some(m) = self.runner_pending.pop_front() {
            match self.runner.handle_input(self.now, Input::Send(m)) {
                Ok(()) => {}
                Err(SessionError::Emit(e)) if e.code() == "backpressure" => {
                    self.runner_pending.push_front(e.into_message());
                    break;
                }
                Err(e) => panic!("runner send: {e}"),
            }
        }
        self.collect();
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.hub.handle_input(self.now, Input::Timeout).unwrap();
        self.runner.handle_input(self.now, Input::Timeout).unwrap();
        self.collect();
        self.flush_pending();
    }

    /// Advance to the next deadline of either side.
    fn advance_to_deadline(&mut self) {
        if let Some(d) = self.deadline() {
            let step = d.saturating_sub(self.now);
            self.advance(step);
        } else {
            self.advance(1);
        }
    }

    fn restart_runner(&mut self) {
        assert!(!self.connected);
        let state = ConnectionState::restore(&self.runner.state().snapshot()).unwrap();
        assert_eq!(&state, self.runner.state());
        self.runner = RunnerSession::with_state(self.hello.clone(), self.config.clone(), state);
    }

    fn restart_hub(&mut self) {
        assert!(!self.connected);
        let state = ConnectionState::restore(&self.hub.state().snapshot()).unwrap();
        assert_eq!(&state, self.hub.state());
        self.hub = HubSession::with_state(self.config.clone(), state);
    }

    /// Reconnect cleanly and run with a perfect link until both applications have
    /// everything and nothing is pending.
    fn settle(&mut self) {
        self.disconnect();
        self.connect();
        for _ in 0..100_000 {
            if !self.connected {
                self.connect();
            }
            if !self.to_hub.in_flight.is_empty() {
                self.deliver(true, Fate::Deliver);
                continue;
            }
            if !self.to_runner.in_flight.is_empty() {
                self.deliver(false, Fate::Deliver);
                continue;
            }
            self.flush_pending();
            if self.to_hub.in_flight.is_empty()
                && self.to_runner.in_flight.is_empty()
                && self.hub_pending.is_empty()
                && self.runner_pending.is_empty()
                && self.hub.state().outbox_frames() == 0
                && self.runner.state().outbox_frames() == 0
            {
                return;
            }
            self.advance_to_deadline();
        }
        panic!("link did not settle");
    }

    fn check_bounds(&self) {
        let cfg = &self.config;
        for s in [self.hub.state(), self.runner.state()] {
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
        assert!(self.hub.stats().held_now <= cfg.max_held_frames);
        assert!(self.runner.stats().held_now <= cfg.max_held_frames);
    }
}

/// Everything a session transmits is one of the seven seed types and passes full
/// validation, so a seed-only peer (whose decoder rejects unknown types) accepts it.
fn assert_seed_decodable(frame: &str) {
    if let Err(e) = stapel_runner_protocol::wire::decode(frame.as_bytes(), true) {
        panic!(
            "transmitted frame does not validate ({}): {frame}",
            e.code()
        );
    }
}

fn record(seen: &mut Applied, e: Event, attempt_keyed: bool) {
    match e {
        Event::Received(m) => seen
            .streams
            .entry(key(&m, attempt_keyed))
            .or_default()
            .push(m),
        Event::InboundGap(_) | Event::OutboundResync(_) => seen.resyncs += 1,
        Event::PeerError { code, .. } => seen.peer_errors.push(code),
        _ => {}
    }
}

#[derive(Debug, Clone, Copy)]
enum Fate {
    Deliver,
    Drop,
    Duplicate,
    Reorder,
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
            pair: Pair::new(config),
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
                Step::RestartRunner => {
                    self.pair.disconnect();
                    self.pair.restart_runner();
                }
                Step::RestartHub => {
                    self.pair.disconnect();
                    self.pair.restart_hub();
                }
                Step::Wait(ms) => self.pair.advance(*ms),
            }
            self.pair.check_bounds();
        }
        self.pair.settle();
        self.pair.check_bounds();
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
    for msgs in p.hub_seen.streams.values() {
        let ns: Vec<u64> = msgs
            .iter()
            .map(|m| match m {
                Message::TaskProgress(p) => p.payload["n"].as_u64().unwrap(),
                other => panic!("hub received {other:?}"),
            })
            .collect();
        assert!(ns.windows(2).all(|w| w[0] < w[1]));
    }
    assert_exactly_once(&p.hub_seen, &next_seqs(p.runner.state()));
    assert_exactly_once(&p.runner_seen, &next_seqs(p.hub.state()));
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
    while !d.pair.to_hub.in_flight.is_empty() {
        d.pair.deliver(true, Fate::Deliver);
    }
    while !d.pair.to_runner.in_flight.is_empty() {
        d.pair.deliver(false, Fate::Deliver);
    }
    for _ in 0..5 {
        d.progress(0, false);
    }
    // Three accepted, two waiting.
    assert_eq!(d.pair.runner.state().outbox_frames(), 3);
    assert_eq!(d.pair.runner_pending.len(), 2);
    // Deliver the three frames; no ack yet (delay 500 ms).
    while !d.pair.to_hub.in_flight.is_empty() {
        d.pair.deliver(true, Fate::Deliver);
    }
    assert_eq!(d.pair.runner_pending.len(), 2);
    // The ack delay passes; the hub's ack ping reaches the runner, which trims and sends.
    d.pair.advance(499);
    assert!(d
        .pair
        .to_runner
        .in_flight
        .iter()
        .all(|f| !f.contains("\"ack\"")));
    d.pair.advance(1);
    assert!(d
        .pair
        .to_runner
        .in_flight
        .iter()
        .any(|f| f.contains("\"ack\"")));
    while !d.pair.to_runner.in_flight.is_empty() {
        d.pair.deliver(false, Fate::Deliver);
    }
    d.pair.flush_pending();
    assert!(d.pair.runner_pending.is_empty());
    assert_eq!(d.pair.runner.state().outbox_frames(), 2);
    d.pair.settle();
    let got = &d.pair.hub_seen.streams[&("T-0".to_string(), Some(1))];
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
    d.pair.settle();
    assert_eq!(d.pair.runner.state().outbox_frames(), 0);
    d.pair.disconnect();
    d.pair.hub = HubSession::new(d.pair.config.clone());
    d.progress(0, false);
    d.pair.settle();
    assert_eq!(d.pair.hub_seen.resyncs, 1);
    let got = &d.pair.hub_seen.streams[&("T-0".to_string(), Some(1))];
    assert_eq!(got.last().and_then(Message::seq), Some(7));
}

#[test]
fn runner_restart_without_snapshot_gets_outbound_resync() {
    let mut d = Driver::new(small_config());
    d.pair.connect();
    for _ in 0..5 {
        d.command(2);
    }
    d.pair.settle();
    d.pair.disconnect();
    d.pair.runner = RunnerSession::new(d.pair.hello.clone(), d.pair.config.clone());
    d.pair.runner_seen = Applied::default();
    d.command(2);
    d.pair.settle();
    assert_eq!(
        d.pair.hub_seen.resyncs, 1,
        "hub reports the outbound resync"
    );
    assert_eq!(
        d.pair.runner_seen.resyncs, 1,
        "runner reports the inbound gap"
    );
    let got = &d.pair.runner_seen.streams[&("T-2".to_string(), None)];
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
    d.pair.settle();
    d.pair.disconnect();
    d.pair.runner = RunnerSession::new(d.pair.hello.clone(), d.pair.config.clone());
    d.pair.connect();
    while !d.pair.to_hub.in_flight.is_empty() || !d.pair.to_runner.in_flight.is_empty() {
        if !d.pair.to_hub.in_flight.is_empty() {
            d.pair.deliver(true, Fate::Deliver);
        } else {
            d.pair.deliver(false, Fate::Deliver);
        }
    }
    assert_eq!(
        d.pair.runner_seen.peer_errors,
        vec!["ack_ahead".to_string()]
    );
    d.progress(0, false);
    d.pair.settle();
    let got = &d.pair.hub_seen.streams[&("T-0".to_string(), Some(1))];
    assert_eq!(
        got.iter().map(|m| m.seq().unwrap()).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
}
