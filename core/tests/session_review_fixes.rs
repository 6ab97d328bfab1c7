//! Regression tests for the review of the sequencing and session layers: frames that
//! were lost (peer ahead on either side), `forget_task`, byte-bounded control frames,
//! stale outputs after a disconnect, corrupt snapshots, the hold buffer's byte bound,
//! invalid resume values, per-entry extension parsing and the seed-only checkpoint trim.

mod common;

use common::session::{outputs, pump, Observer};
use serde_json::{json, Map};
use stapel_runner_protocol::framing::DEFAULT_MAX_LINE_BYTES;
use stapel_runner_protocol::sequencing::{ConnectionState, Role};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig,
};
use stapel_runner_protocol::wire::{self, Hello, Message, Pong, TaskCancel, TaskProgress};

fn prog(task: &str, attempt: u64, n: u64) -> Message {
    let mut p = Map::new();
    p.insert("n".into(), json!(n));
    let mut m = TaskProgress::new(task, "state", p.into());
    m.attempt = attempt;
    m.into()
}

fn n_of(m: &Message) -> u64 {
    match m {
        Message::TaskProgress(p) => p.payload["n"].as_u64().unwrap(),
        _ => panic!("not progress"),
    }
}

/// What each side's application saw.
#[derive(Default)]
struct Seen {
    /// Commands the runner applied.
    rc: Vec<Message>,
    /// Progress the hub applied.
    hp: Vec<Message>,
    hub_events: Vec<String>,
    run_events: Vec<String>,
    /// Largest frame transmitted either way.
    max_frame: usize,
}

impl Observer for Seen {
    fn transmitted(&mut self, _from_hub: bool, frame: &str) {
        self.max_frame = self.max_frame.max(frame.len());
    }

    fn event(&mut self, at_hub: bool, e: Event) {
        let (applied, events) = if at_hub {
            (&mut self.hp, &mut self.hub_events)
        } else {
            (&mut self.rc, &mut self.run_events)
        };
        match e {
            Event::Received(m) => applied.push(m),
            Event::PeerError { code, .. } => events.push(code),
            e => events.push(format!("{e:?}")),
        }
    }
}

fn connect(hub: &mut HubSession, run: &mut RunnerSession, now: u64) {
    hub.handle_input(now, Input::Connected).unwrap();
    run.handle_input(now, Input::Connected).unwrap();
}

fn disconnect(hub: &mut HubSession, run: &mut RunnerSession, now: u64) {
    hub.handle_input(now, Input::Disconnected).unwrap();
    run.handle_input(now, Input::Disconnected).unwrap();
}

fn pair() -> (HubSession, RunnerSession, SessionConfig) {
    let cfg = SessionConfig::default();
    (
        HubSession::new(cfg.clone()),
        RunnerSession::new(Hello::new("p", "0"), cfg.clone()),
        cfg,
    )
}

/// Item 1: a hub that lost its state keeps (re-stamps and replays) a command the
/// application sent before the runner's hello.
#[test]
fn hub_lost_state_keeps_command_sent_before_hello() {
    let (mut hub, mut run, cfg) = pair();
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    for i in 0..3 {
        hub.handle_input(
            0,
            Input::Send(TaskCancel::new("T-1", format!("c{i}")).into()),
        )
        .unwrap();
    }
    pump(&mut hub, &mut run, 0, &mut seen);
    assert_eq!(seen.rc.len(), 3);
    hub = HubSession::new(cfg.clone());
    run.handle_input(1, Input::Disconnected).unwrap();
    hub.handle_input(1, Input::Send(TaskCancel::new("T-1", "NEW").into()))
        .unwrap();
    connect(&mut hub, &mut run, 2);
    pump(&mut hub, &mut run, 2, &mut seen);
    assert_eq!(seen.rc.len(), 4, "command NEW was lost");
    assert_eq!(seen.rc[3].seq(), Some(4));
    assert!(seen.hub_events.contains(&"resume_ahead".to_string()));
    // Numbering continues after the re-stamped command.
    hub.handle_input(3, Input::Send(TaskCancel::new("T-1", "NEXT").into()))
        .unwrap();
    pump(&mut hub, &mut run, 3, &mut seen);
    assert_eq!(seen.rc.len(), 5);
    assert_eq!(seen.rc[4].seq(), Some(5));
}

/// Item 1, stale snapshot: commands kept in the snapshot that the runner already has
/// are not re-applied; commands sent after the restore are re-stamped.
#[test]
fn hub_stale_snapshot_restamps_only_new_commands() {
    let (mut hub, mut run, cfg) = pair();
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    pump(&mut hub, &mut run, 0, &mut seen); // the runner's positions are known
    hub.handle_input(0, Input::Send(TaskCancel::new("T-1", "a").into()))
        .unwrap();
    // Kept: a#1. (A snapshot taken while frames are provisional is the documented
    // ambiguous case; this one is not.)
    let snap = hub.state().snapshot();
    for r in ["b", "c"] {
        hub.handle_input(0, Input::Send(TaskCancel::new("T-1", r).into()))
            .unwrap();
    }
    pump(&mut hub, &mut run, 0, &mut seen);
    assert_eq!(seen.rc.len(), 3);
    run.handle_input(1, Input::Disconnected).unwrap();
    hub = HubSession::with_state(cfg.clone(), ConnectionState::restore(&snap).unwrap());
    hub.handle_input(1, Input::Send(TaskCancel::new("T-1", "d").into()))
        .unwrap(); // stamped 2, provisional
    connect(&mut hub, &mut run, 2);
    pump(&mut hub, &mut run, 2, &mut seen);
    let reasons: Vec<String> = seen
        .rc
        .iter()
        .map(|m| match m {
            Message::TaskCancel(c) => c.reason.clone(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(reasons, ["a", "b", "c", "d"]);
    assert_eq!(seen.rc[3].seq(), Some(4));
    run.handle_input(300, Input::Timeout).unwrap();
    pump(&mut hub, &mut run, 300, &mut seen);
    assert_eq!(hub.state().outbox_frames(), 0);
}

/// Item 2: a runner restored from an older snapshot keeps progress emitted while down.
#[test]
fn runner_stale_snapshot_keeps_progress_emitted_while_down() {
    let (mut hub, mut run, cfg) = pair();
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    pump(&mut hub, &mut run, 0, &mut seen); // the barrier completed
    run.handle_input(0, Input::Send(prog("T-1", 1, 1))).unwrap();
    let snap = run.state().snapshot();
    run.handle_input(0, Input::Send(prog("T-1", 1, 2))).unwrap();
    run.handle_input(0, Input::Send(prog("T-1", 1, 3))).unwrap();
    pump(&mut hub, &mut run, 0, &mut seen);
    assert_eq!(seen.hp.len(), 3);
    hub.handle_input(1, Input::Disconnected).unwrap();
    let st = ConnectionState::restore(&snap).unwrap();
    run = RunnerSession::with_state(Hello::new("p", "0"), cfg.clone(), st);
    run.handle_input(1, Input::Send(prog("T-1", 1, 4))).unwrap();
    connect(&mut hub, &mut run, 2);
    pump(&mut hub, &mut run, 2, &mut seen);
    let ns: Vec<u64> = seen.hp.iter().map(n_of).collect();
    assert_eq!(ns, [1, 2, 3, 4], "no loss, no double apply");
    assert_eq!(seen.run_events, ["ack_ahead"]);
    hub.handle_input(300, Input::Timeout).unwrap();
    pump(&mut hub, &mut run, 300, &mut seen);
    assert_eq!(run.state().outbox_frames(), 0);
}

/// Item 2: a runner restarted without state emits on an old stream before the hub's
/// position is known (before and after connecting): nothing is dropped as a duplicate,
/// and the order of emission is kept.
#[test]
fn runner_lost_state_progress_before_first_ack_is_never_dropped() {
    for emit_before_connect in [false, true] {
        let (mut hub, mut run, cfg) = pair();
        let mut seen = Seen::default();
        connect(&mut hub, &mut run, 0);
        for n in 1..=5 {
            run.handle_input(0, Input::Send(prog("T-1", 1, n))).unwrap();
        }
        pump(&mut hub, &mut run, 0, &mut seen);
        disconnect(&mut hub, &mut run, 1);
        run = RunnerSession::new(Hello::new("p", "0"), cfg.clone());
        if emit_before_connect {
            run.handle_input(1, Input::Send(prog("T-1", 1, 6))).unwrap();
            connect(&mut hub, &mut run, 2);
        } else {
            connect(&mut hub, &mut run, 2);
            run.handle_input(2, Input::Send(prog("T-1", 1, 6))).unwrap();
        }
        run.handle_input(2, Input::Send(prog("T-1", 1, 7))).unwrap();
        pump(&mut hub, &mut run, 2, &mut seen);
        let ns: Vec<u64> = seen.hp.iter().map(n_of).collect();
        assert_eq!(
            ns,
            [1, 2, 3, 4, 5, 6, 7],
            "emit_before_connect={emit_before_connect}"
        );
        let seqs: Vec<u64> = seen.hp.iter().filter_map(Message::seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7]);
    }
}

/// Item 3: forgetting before the delayed ack went out does not apply a command twice.
#[test]
fn forget_before_ack_then_reconnect_applies_once() {
    let (mut hub, mut run, _) = pair();
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    pump(&mut hub, &mut run, 0, &mut seen);
    hub.handle_input(0, Input::Send(TaskCancel::new("T-1", "x").into()))
        .unwrap();
    pump(&mut hub, &mut run, 0, &mut seen);
    assert_eq!(seen.rc.len(), 1);
    assert!(run.state_mut().forget_task("T-1"));
    disconnect(&mut hub, &mut run, 1);
    connect(&mut hub, &mut run, 2);
    pump(&mut hub, &mut run, 2, &mut seen);
    assert_eq!(seen.rc.len(), 1, "command applied twice after forget");
    // The runner re-acknowledged the replayed duplicate from its tombstone: the hub's
    // log is empty and the forgotten task was not recreated on either side.
    for now in [300, 600] {
        hub.handle_input(now, Input::Timeout).unwrap();
        run.handle_input(now, Input::Timeout).unwrap();
        pump(&mut hub, &mut run, now, &mut seen);
    }
    assert_eq!(hub.state().outbox_frames(), 0);
    assert!(hub.state().is_fully_acknowledged("T-1"));
    assert_eq!(run.state().stream_counts(), (0, 0));
    assert!(run.state().is_forgotten("T-1"));
}

/// Item 3: the hub never re-applies re-sent progress of a forgotten stream, and a
/// runner's `replay_from` for it creates no state and no gap.
#[test]
fn hub_forgotten_stream_is_not_reapplied_nor_recreated() {
    let (mut hub, mut run, _) = pair();
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    for n in 1..=3 {
        run.handle_input(0, Input::Send(prog("T-1", 1, n))).unwrap();
    }
    pump(&mut hub, &mut run, 0, &mut seen);
    assert_eq!(seen.hp.len(), 3);
    // The hub forgets before its ack went out; the runner still keeps 1..3.
    assert!(hub.state_mut().forget_task("T-1"));
    assert_eq!(run.state().outbox_frames(), 3);
    disconnect(&mut hub, &mut run, 1);
    connect(&mut hub, &mut run, 2);
    pump(&mut hub, &mut run, 2, &mut seen);
    hub.handle_input(300, Input::Timeout).unwrap();
    pump(&mut hub, &mut run, 300, &mut seen);
    assert_eq!(seen.hp.len(), 3, "re-sent progress re-applied");
    assert!(!seen.hub_events.iter().any(|e| e.contains("InboundGap")));
    assert_eq!(hub.state().stream_counts(), (0, 0));
    // The runner's log was trimmed by the hub's ack from the tombstone.
    assert_eq!(run.state().outbox_frames(), 0);
    // Forgetting both sides, again and again, never piles up streams.
    assert!(run.state_mut().forget_task("T-1"));
    for i in 0..3u64 {
        disconnect(&mut hub, &mut run, 400 + i);
        connect(&mut hub, &mut run, 401 + i);
        pump(&mut hub, &mut run, 401 + i, &mut seen);
    }
    assert_eq!(hub.state().stream_counts(), (0, 0));
    assert_eq!(run.state().stream_counts(), (0, 0));
}

/// Item 3: with forget, tasks never pile up to `max_streams`; tombstones are bounded.
#[test]
fn forget_keeps_stream_tables_bounded() {
    let mut cfg = SessionConfig::default();
    cfg.sequencing.max_streams = 4;
    cfg.sequencing.max_tombstones = 3;
    let mut hub = HubSession::new(cfg.clone());
    let mut run = RunnerSession::new(Hello::new("p", "0"), cfg.clone());
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    for t in 0..50u64 {
        let task = format!("T-{t}");
        let now = t * 1000;
        hub.handle_input(now, Input::Send(TaskCancel::new(&task, "go").into()))
            .unwrap();
        pump(&mut hub, &mut run, now, &mut seen);
        run.handle_input(now, Input::Send(prog(&task, 1, t)))
            .unwrap();
        pump(&mut hub, &mut run, now, &mut seen);
        // Acks flow (ack delay), then both sides forget the finished task.
        hub.handle_input(t * 1000 + 500, Input::Timeout).unwrap();
        run.handle_input(t * 1000 + 500, Input::Timeout).unwrap();
        pump(&mut hub, &mut run, t * 1000 + 500, &mut seen);
        assert!(hub.state().is_fully_acknowledged(&task));
        assert!(run.state().is_fully_acknowledged(&task));
        hub.state_mut().forget_task(&task);
        run.state_mut().forget_task(&task);
        assert!(hub.state().forgotten_count() <= 3);
        if t % 7 == 0 {
            disconnect(&mut hub, &mut run, t * 1000 + 600);
            connect(&mut hub, &mut run, t * 1000 + 600);
            pump(&mut hub, &mut run, t * 1000 + 600, &mut seen);
        }
    }
    assert_eq!(seen.rc.len(), 50);
    assert_eq!(seen.hp.len(), 50);
    assert_eq!(hub.state().stream_counts(), (0, 0));
    assert_eq!(run.state().stream_counts(), (0, 0));
}

/// Item 3: emitting on a forgotten task continues its numbering (a new attempt after
/// the hub forgot the old one is not taken for a duplicate by the runner).
#[test]
fn emit_on_forgotten_task_continues_numbering() {
    let mut hub = ConnectionState::new(Role::Hub);
    let mut runner = ConnectionState::new(Role::Runner);
    for r in ["a", "b"] {
        let m = hub.emit(TaskCancel::new("T-1", r).into()).unwrap();
        assert!(runner.receive(&m).unwrap().is_new());
    }
    hub.ack("T-1", None, 2).unwrap();
    assert!(hub.forget_task("T-1"));
    let m = hub.emit(TaskCancel::new("T-1", "c").into()).unwrap();
    assert_eq!(m.seq(), Some(3));
    assert!(runner.receive(&m).unwrap().is_new());
    // A replayed old frame of a forgotten inbound stream is a duplicate, a later one
    // revives the stream.
    assert!(runner.forget_task("T-1"));
    let old = hub.emit(TaskCancel::new("T-1", "d").into()).unwrap();
    let mut dup = old.clone();
    dup.set_seq(2);
    assert!(!runner.receive(&dup).unwrap().is_new());
    assert!(runner.is_forgotten("T-1"));
    assert!(runner.receive(&old).unwrap().is_new());
    assert!(!runner.is_forgotten("T-1"));
    assert_eq!(runner.inbound_watermark("T-1", None), Some(4));
}

fn uuid(i: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", i, i * 7919)
}

/// Item 4: 10,000 streams with 36-character task ids in both directions: the hello, its
/// resume continuation, the full acks and `replay_from` all fit the peer's line bound,
/// and everything is applied exactly once.
#[test]
fn ten_thousand_streams_fit_the_line_bound() {
    let mut cfg = SessionConfig::default();
    cfg.sequencing.max_outbox_frames = 20_000;
    cfg.ack_delay_ms = 100;
    let mut hub = HubSession::new(cfg.clone());
    let mut run = RunnerSession::new(Hello::new("p", "0"), cfg.clone());
    let mut seen = Seen::default();
    connect(&mut hub, &mut run, 0);
    pump(&mut hub, &mut run, 0, &mut seen);
    for t in 0..10_000 {
        let id = uuid(t);
        assert_eq!(id.len(), 36);
        hub.handle_input(0, Input::Send(TaskCancel::new(&id, "x").into()))
            .unwrap();
        run.handle_input(0, Input::Send(prog(&id, 1, t as u64)))
            .unwrap();
    }
    pump(&mut hub, &mut run, 0, &mut seen);
    for now in [200u64, 400] {
        hub.handle_input(now, Input::Timeout).unwrap();
        run.handle_input(now, Input::Timeout).unwrap();
        pump(&mut hub, &mut run, now, &mut seen);
    }
    assert_eq!(
        run.state().outbox_frames(),
        0,
        "acks never trimmed the runner log"
    );
    assert_eq!(hub.state().outbox_frames(), 0);
    // Reconnect twice: the runner's hello declares 10,000 tasks, the hub's full ack
    // covers 10,000 streams.
    for k in 0..2u64 {
        disconnect(&mut hub, &mut run, 1000 + k);
        connect(&mut hub, &mut run, 1001 + k);
        pump(&mut hub, &mut run, 1001 + k, &mut seen);
        assert!(hub.is_open());
    }
    // A runner that lost its state (resume empty, 10,000 streams acknowledged to it).
    disconnect(&mut hub, &mut run, 2000);
    run = RunnerSession::new(Hello::new("p", "0"), cfg.clone());
    connect(&mut hub, &mut run, 2001);
    pump(&mut hub, &mut run, 2001, &mut seen);
    assert!(seen.max_frame <= cfg.max_control_frame_bytes);
    assert!(seen.max_frame < DEFAULT_MAX_LINE_BYTES);
    assert_eq!(seen.rc.len(), 10_000);
    assert_eq!(seen.hp.len(), 10_000);
    assert!(!seen
        .hub_events
        .iter()
        .chain(&seen.run_events)
        .any(|e| e == "line_too_long" || e == "invalid_extension"));
}

/// Item 4: a seed-only hub reads only `hello.resume` (the part that fits) and ignores
/// the continuation; tasks missing from it are replayed in full and deduplicated by the
/// runner, so nothing is applied twice.
#[test]
fn split_resume_against_a_seed_only_hub_is_harmless() {
    let mut cfg = SessionConfig::default();
    cfg.max_control_frame_bytes = 600;
    let mut run = RunnerSession::new(Hello::new("p", "0"), cfg.clone());
    let mut seed_hub = ConnectionState::new(Role::Hub);
    run.handle_input(0, Input::Connected).unwrap();
    let mut applied = 0;
    let mut feed = |run: &mut RunnerSession, frames: Vec<String>| {
        for f in frames {
            run.handle_input(0, Input::Frame(f)).unwrap();
        }
        for o in outputs(run) {
            if let Output::Event(Event::Received(_)) = o {
                applied += 1;
            }
        }
    };
    let frames: Vec<String> = (0..40)
        .map(|t| wire::encode(&seed_hub.emit(TaskCancel::new(uuid(t), "x").into()).unwrap()))
        .collect();
    outputs(&mut run);
    feed(&mut run, frames);
    run.handle_input(1, Input::Disconnected).unwrap();
    run.handle_input(2, Input::Connected).unwrap();
    let out: Vec<String> = outputs(&mut run)
        .into_iter()
        .filter_map(|o| match o {
            Output::Transmit(f) => Some(f),
            _ => None,
        })
        .collect();
    let hello = match wire::decode(out[0].as_bytes(), true).unwrap() {
        Message::Hello(h) => h,
        m => panic!("first frame {m:?}"),
    };
    assert!(out.iter().all(|f| f.len() <= 600));
    assert!(hello.resume.len() < 40 && hello.extra.contains_key("resume_more"));
    let replay = seed_hub.replay_for(&hello.resume);
    let frames: Vec<String> = replay
        .streams
        .iter()
        .flat_map(|s| s.frames.iter().map(|f| f.frame.clone()))
        .collect();
    assert!(!frames.is_empty());
    feed(&mut run, frames);
    assert_eq!(applied, 40);
}

/// Item 5: outputs queued for a dead connection are dropped on `Disconnected`.
#[test]
fn stale_outputs_do_not_survive_a_disconnect() {
    let (mut hub, mut run, _) = pair();
    hub.handle_input(0, Input::Connected).unwrap();
    hub.handle_input(45_000, Input::Timeout).unwrap(); // Close(peer_timeout) queued
    hub.handle_input(45_001, Input::Disconnected).unwrap();
    hub.handle_input(45_002, Input::Connected).unwrap();
    let outs = outputs(&mut hub);
    assert!(!outs.iter().any(|o| matches!(o, Output::Close(_))));
    assert!(hub.is_connected());
    run.handle_input(0, Input::Connected).unwrap();
    run.handle_input(0, Input::Send(prog("T-1", 1, 1))).unwrap();
    run.handle_input(1, Input::Disconnected).unwrap();
    run.handle_input(2, Input::Connected).unwrap();
    let hellos = outputs(&mut run)
        .iter()
        .filter(|o| matches!(o, Output::Transmit(f) if f.contains("\"hello\"")))
        .count();
    assert_eq!(hellos, 1);
}

/// Item 11: the hold buffer is bounded by bytes too.
#[test]
fn hold_buffer_is_bounded_by_bytes() {
    let mut cfg = SessionConfig::default();
    cfg.max_held_bytes = 300;
    let mut hub = HubSession::new(cfg);
    hub.handle_input(0, Input::Connected).unwrap();
    hub.handle_input(
        0,
        Input::Frame(wire::encode(&Message::Hello(Hello::new("p", "0")))),
    )
    .unwrap();
    outputs(&mut hub);
    for seq in 2..=10 {
        let mut m = prog("T-1", 1, seq);
        m.set_seq(seq);
        hub.handle_input(0, Input::Frame(wire::encode(&m))).unwrap();
    }
    let st = hub.stats();
    assert!(st.held_now >= 1 && st.held_now < 9);
    assert_eq!(st.held_now as u64 + st.held_dropped, 9);
}

/// Item 12: a resume value above 2^53 − 1 never moves numbering to the end of the seq
/// space: the wire decoder refuses such a hello even without validation (a peer error),
/// and the sequencing layer ignores such a value (it counts as absent).
#[test]
fn huge_resume_value_is_ignored() {
    let mut cfg = SessionConfig::default();
    cfg.validate = false;
    let mut hub = HubSession::new(cfg);
    hub.handle_input(0, Input::Send(TaskCancel::new("T-1", "a").into()))
        .unwrap();
    hub.handle_input(0, Input::Connected).unwrap();
    let hello = r#"{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"0","resume":{"T-1":18446744073709551615}}"#;
    hub.handle_input(1, Input::Frame(hello.into())).unwrap();
    let outs = outputs(&mut hub);
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Event(Event::PeerError { .. }))));
    hub.handle_input(2, Input::Send(TaskCancel::new("T-1", "b").into()))
        .unwrap();
    assert_eq!(hub.state().last_emitted("T-1", None), 2);
    // The sequencing layer: the entry counts as absent (declared 0), nothing moves.
    let mut state = ConnectionState::new(Role::Hub);
    state.emit(TaskCancel::new("T-1", "a").into()).unwrap();
    let mut resume = indexmap::IndexMap::new();
    resume.insert("T-1".to_string(), u64::MAX);
    let replay = state.replay_for(&resume);
    assert!(replay.peer_ahead.is_empty());
    assert_eq!(replay.messages()["T-1"].len(), 1);
    assert_eq!(
        state
            .emit(TaskCancel::new("T-1", "b").into())
            .unwrap()
            .seq(),
        Some(2)
    );
}

/// Item 13: one bad entry in a `replay_from` list is skipped, the rest applies.
#[test]
fn bad_replay_from_entry_is_skipped_alone() {
    let (mut hub, _, _) = pair();
    hub.handle_input(0, Input::Connected).unwrap();
    let hello = r#"{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"0","replay_from":[{"task_id":"T-1","seq":3},{"task_id":"T-2","attempt":1,"seq":4}]}"#;
    hub.handle_input(0, Input::Frame(hello.into())).unwrap();
    let outs = outputs(&mut hub);
    let codes: Vec<String> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::PeerError { code, .. }) => Some(code.clone()),
            Output::Event(Event::InboundGap(r)) => {
                Some(format!("gap {} {}", r.task_id, r.missing_to))
            }
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["invalid_extension", "gap T-2 3"]);
}

/// Item 9: against a seed-only hub that deduplicates by `(task_id, seq)` only and never
/// acknowledges, the runner trims its log at application checkpoints
/// (`trim_through`) and never stalls on backpressure.
#[test]
fn checkpoint_trim_against_a_seed_only_hub() {
    let mut cfg = SessionConfig::default();
    cfg.sequencing.max_outbox_frames = 64;
    let mut run = RunnerSession::new(Hello::new("p", "0"), cfg);
    let mut seen: std::collections::HashSet<(String, u64)> = Default::default();
    let mut applied = 0u64;
    let mut hub_take = |f: &str| -> Option<String> {
        match wire::decode(f.as_bytes(), true).unwrap() {
            Message::Ping(p) => Some(wire::encode(&Message::Pong(Pong::answering(&p)))),
            Message::Hello(_) => None,
            m => {
                // The seed's rule, literally: idempotent by (task_id, seq).
                if seen.insert((m.task_id().unwrap().to_owned(), m.seq().unwrap())) {
                    applied += 1;
                }
                None
            }
        }
    };
    run.handle_input(0, Input::Connected).unwrap();
    for n in 1..=5_000u64 {
        let now = n;
        match run.handle_input(now, Input::Send(prog("T-1", 1, n))) {
            Ok(()) => {}
            Err(e) => panic!("stalled at {n}: {}", e.code()),
        }
        loop {
            let outs = outputs(&mut run);
            if outs.is_empty() {
                break;
            }
            for o in outs {
                if let Output::Transmit(f) = o {
                    if let Some(pong) = hub_take(&f) {
                        run.handle_input(now, Input::Frame(pong)).unwrap();
                    }
                }
            }
        }
        // Checkpoint every 32 frames: the app knows the hub has them (e.g. the hub
        // reported a commit), so the runner may stop keeping them.
        if n % 32 == 0 {
            run.state_mut().trim_through("T-1", Some(1), n);
        }
    }
    assert_eq!(applied, 5_000);
    assert!(run.state().outbox_frames() < 32);
}

/// `send` returns what it stamped: the runner's progress streams are keyed by attempt,
/// the hub's command streams are not; a refused send stamps nothing.
#[test]
fn send_returns_the_stamped_stream_and_seq() {
    let (mut hub, mut run, _) = pair();
    let a = run.send(0, prog("T-1", 2, 1)).unwrap();
    let b = run.send(0, prog("T-1", 2, 2)).unwrap();
    let c = run.send(0, prog("T-1", 3, 3)).unwrap();
    assert_eq!(
        [a.seq, b.seq, c.seq],
        [1, 2, 1],
        "per (task, attempt) stream"
    );
    assert_eq!((a.task_id.as_str(), a.attempt), ("T-1", Some(2)));
    assert_eq!(c.attempt, Some(3));
    assert_eq!(b.message.seq(), Some(2));
    let s = hub.send(0, TaskCancel::new("T-9", "x").into()).unwrap();
    assert_eq!((s.task_id.as_str(), s.attempt, s.seq), ("T-9", None, 1));
    // A message that is not sequenced on this side is refused, nothing is stamped.
    assert!(hub.send(0, prog("T-1", 1, 4)).is_err());
    assert_eq!(
        hub.state().outbound_log("T-9", None).map(|l| l.last_seq()),
        Some(1)
    );
}

/// `poll_timeout` is the earliest timer of the live connection and `None` without one.
#[test]
fn poll_timeout_follows_the_connection() {
    let (mut hub, mut run, cfg) = pair();
    assert_eq!(hub.poll_timeout(), None, "down: no timer");
    connect(&mut hub, &mut run, 100);
    let mut seen = Seen::default();
    pump(&mut hub, &mut run, 100, &mut seen);
    assert_eq!(hub.poll_timeout(), Some(100 + cfg.ping_interval_ms));
    // A peer timeout closes: no timer while closing.
    hub.handle_input(100 + cfg.peer_timeout_ms, Input::Timeout)
        .unwrap();
    let closed = outputs(&mut hub)
        .into_iter()
        .any(|o| matches!(o, Output::Close(_)));
    assert!(closed);
    assert_eq!(hub.poll_timeout(), None, "closing: no timer");
    assert!(!hub.is_connected());
}
