//! Interoperation with peers that implement only seed 000: their decoder rejects unknown
//! message *types* but keeps unknown *fields* in `extra`; they never send `ack` or
//! `replay_from`. The seed-only peers here are built from the seed's own API
//! (`ConnectionState` + `decode`/`encode`), as a pure-Python peer would be.

mod common;

use common::session::Observer;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{ConnectionState, Role};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, RunnerSession, SessionConfig,
};
use stapel_runner_protocol::wire::{self, Hello, Message, Pong, TaskCancel, TaskProgress};

/// The events of one side (the shared harness's observer for one session).
#[derive(Default)]
struct Events(Vec<Event>);

impl Observer for Events {
    fn event(&mut self, _at_hub: bool, e: Event) {
        self.0.push(e);
    }
}

/// Every output a session has now: its frames and its events (a close fails the test).
fn drain(machine: &mut dyn Machine) -> (Vec<String>, Vec<Event>) {
    let mut events = Events::default();
    let d = common::session::drain(machine, false, &mut events);
    assert!(!d.close, "unexpected close");
    (d.frames, events.0)
}

fn progress(n: u64) -> Message {
    let mut payload = Map::new();
    payload.insert("n".into(), json!(n));
    let mut p = TaskProgress::new("T-1", "state", payload.into());
    p.attempt = 1;
    p.into()
}

/// A seed-only hub: decodes with validation, dedupes with `ConnectionState`, answers
/// pings with plain pongs, never acknowledges.
struct SeedHub {
    state: ConnectionState,
    applied: Vec<u64>,
}

impl SeedHub {
    fn take(&mut self, frame: &str) -> Option<String> {
        let msg = wire::decode(frame.as_bytes(), true).expect("seed hub decodes every frame");
        match msg {
            Message::Hello(h) => {
                // The extension is kept as an unknown field and ignored.
                assert!(h.extra.contains_key("replay_from") || h.extra.is_empty());
                None
            }
            Message::Ping(p) => Some(wire::encode(&Message::Pong(Pong::answering(&p)))),
            m => {
                if self.state.receive(&m).unwrap().is_new() {
                    self.applied.push(m.seq().unwrap());
                }
                None
            }
        }
    }
}

#[test]
fn runner_against_seed_only_hub_loses_nothing_and_duplicates_nothing() {
    let mut cfg = SessionConfig::default();
    cfg.ping_interval_ms = 100;
    let mut runner = RunnerSession::new(Hello::new("p-1", "0.1.0"), cfg);
    let mut hub = SeedHub {
        state: ConnectionState::new(Role::Hub),
        applied: Vec::new(),
    };
    runner.handle_input(0, Input::Connected).unwrap();
    for n in 1..=10 {
        runner.handle_input(0, Input::Send(progress(n))).unwrap();
    }
    let (frames, _) = drain(&mut runner);
    // A fresh runner does not know the hub's positions yet: its progress is provisional
    // until the pong of the barrier ping that follows the hello. A seed-only hub answers
    // it with a plain pong, which releases the frames unchanged.
    assert_eq!(frames.len(), 2, "hello + barrier ping");
    assert!(hub.take(&frames[0]).is_none());
    let pong = hub.take(&frames[1]).expect("the seed hub answers the ping");
    runner.handle_input(1, Input::Frame(pong)).unwrap();
    let (frames, _) = drain(&mut runner);
    assert_eq!(frames.len(), 10, "10 progress frames");
    // Only the first five arrive; the connection drops.
    for f in &frames[..5] {
        assert!(hub.take(f).is_none());
    }
    runner.handle_input(10, Input::Disconnected).unwrap();
    runner.handle_input(20, Input::Connected).unwrap();
    // A keepalive ping goes out and is answered with a plain pong (no ack).
    runner.handle_input(120, Input::Timeout).unwrap();
    let (frames, _) = drain(&mut runner);
    // hello, all ten kept frames again (nothing was ever acknowledged), then the ping.
    assert_eq!(frames.len(), 12);
    for f in &frames {
        if let Some(pong) = hub.take(f) {
            runner.handle_input(121, Input::Frame(pong)).unwrap();
        }
    }
    assert_eq!(hub.applied, (1..=10).collect::<Vec<_>>());
    // The seed hub never acknowledges, but its plain pong answers a ping sent after all
    // ten frames on an ordered connection: the runner drops them (implied acknowledgement).
    assert_eq!(runner.state().outbox_frames(), 0);
    assert_eq!(runner.stats().implied_acked, 10);
}

/// A seed-only runner: decodes with validation (unknown types would be errors), dedupes
/// commands, declares `hello.resume`, never acknowledges otherwise.
#[test]
fn hub_against_seed_only_runner_replays_exactly_the_tail() {
    let mut hub = HubSession::new(SessionConfig::default());
    let mut seed = ConnectionState::new(Role::Runner);
    let mut applied = Vec::new();
    let hello = |resume: &ConnectionState| {
        let mut h = Hello::new("p-1", "0.1.0");
        h.resume = resume.resume_map();
        wire::encode(&Message::Hello(h))
    };
    hub.handle_input(0, Input::Connected).unwrap();
    hub.handle_input(0, Input::Frame(hello(&seed))).unwrap();
    for i in 0..6 {
        let c = TaskCancel::new("T-1", format!("r{i}"));
        hub.handle_input(1, Input::Send(c.into())).unwrap();
    }
    // Keepalive and ack pings of the hub must decode in a seed-only runner.
    hub.handle_input(15_000, Input::Timeout).unwrap();
    let (frames, events) = drain(&mut hub);
    assert!(matches!(events[0], Event::Hello(_)));
    assert_eq!(frames.len(), 7, "six commands and one ping");
    for f in &frames[..4] {
        let m = wire::decode(f.as_bytes(), true).unwrap();
        if seed.receive(&m).unwrap().is_new() {
            applied.push(m.seq().unwrap());
        }
    }
    let ping = wire::decode(frames[6].as_bytes(), true).unwrap();
    assert!(matches!(ping, Message::Ping(_)));
    hub.handle_input(15_001, Input::Disconnected).unwrap();
    hub.handle_input(15_002, Input::Connected).unwrap();
    hub.handle_input(15_002, Input::Frame(hello(&seed)))
        .unwrap();
    let (frames, _) = drain(&mut hub);
    for f in &frames {
        let m = wire::decode(f.as_bytes(), true).expect("every hub frame decodes");
        if m.message_type().is_sequenced() && seed.receive(&m).unwrap().is_new() {
            applied.push(m.seq().unwrap());
        }
    }
    assert_eq!(applied, (1..=6).collect::<Vec<_>>());
    // The resume declared 4, so only 5 and 6 were replayed (plus nothing else sequenced).
    let replayed: Vec<u64> = frames
        .iter()
        .filter_map(|f| wire::decode(f.as_bytes(), true).ok()?.seq())
        .collect();
    assert_eq!(replayed, vec![5, 6]);
    assert_eq!(hub.state().outbox_frames(), 2);
}
