//! Lifecycle edges of the local runner found in review against the original implementation:
//! request expiry ends the run, intent precedence, exact strings and fields, the order of
//! the command checks, interrupts while one is pending, exit before `ready`, bounded O(1)
//! eviction, and the fake-harness player's await timeouts.

#[path = "local_sim.rs"]
mod local_sim;

use local_sim::{command, script, HarnessModel, Sim};
use serde_json::{json, Value};
use stapel_runner_protocol::local::{
    CommandEnvelope, EventClock, EventFactory, HarnessMessage, Input, LocalConfig, LocalRun,
    Output, PlayerConfig, PlayerInput, PlayerOutput, ReceiptStatus, Script, ScriptPlayer,
    SignalKind, StreamMessage,
};
use stapel_runner_protocol::reducer::{Outcome, ReducerConfig, SessionReducer};

fn assert_one_terminal(sim: &Sim) -> Value {
    let types = sim.event_types();
    assert_eq!(types.last().map(String::as_str), Some("run.terminal"));
    assert_eq!(types.iter().filter(|t| *t == "harness.exited").count(), 1);
    assert_eq!(sim.runner_exit, Some(0));
    sim.terminal()
}

// ------------------------------------------------------------------------- item 1

#[test]
fn an_unanswered_runtime_request_expires_and_ends_the_run() {
    let mut c = LocalConfig::default();
    c.request_timeout_ms = 1_000;
    let mut sim = Sim::new("permission-input", c);
    sim.start_turn("turn_1");
    sim.settle();
    assert_eq!(sim.events_of("runtime_request.created").len(), 1);
    assert!(sim.events_of("run.terminal").is_empty());
    // Nobody answers: without the fix nothing ever ends the run.
    sim.run_until(60_000);
    assert_eq!(sim.events_of("runtime_request.expired").len(), 1);
    assert_eq!(sim.signals()[0], (1_000, SignalKind::Term));
    let t = assert_one_terminal(&sim);
    assert_eq!(t["reconciliation"]["reason"], "request_expired");
    assert_eq!(t["runTerminalState"], "failed");
    assert_eq!(t["turnTerminalState"], "failed");
}

#[test]
fn request_expiry_against_a_harness_that_ignores_term_ends_with_kill() {
    let mut c = LocalConfig::default();
    c.request_timeout_ms = 1_000;
    c.shutdown_grace_ms = 200;
    let model = HarnessModel {
        ignore_term: true,
        ignore_stdin_eof: true,
        silent: false,
    };
    let mut sim = Sim::with_script(
        script("permission-input"),
        c,
        PlayerConfig::default(),
        model,
    );
    sim.start_turn("turn_1");
    sim.settle();
    sim.run_until(60_000);
    assert_eq!(
        sim.signals(),
        vec![(1_000, SignalKind::Term), (1_200, SignalKind::Kill)]
    );
    assert_eq!(
        assert_one_terminal(&sim)["reconciliation"]["reason"],
        "request_expired"
    );
}

// ------------------------------------------------------------------------- item 2

#[test]
fn interrupt_then_controller_close_stays_an_interruption() {
    let model = HarnessModel {
        ignore_term: true,
        ignore_stdin_eof: true,
        silent: false,
    };
    let mut c = LocalConfig::default();
    c.shutdown_grace_ms = 100;
    // A harness that never reacts to the interrupt: the controller closes meanwhile.
    let deaf = Script::parse(
        r#"{"schema": "paperclip.fake_harness.script.v1", "name": "deaf",
            "steps": [{"kind": "await_resolution", "request_id": "never"}]}"#,
    )
    .unwrap();
    let mut sim = Sim::with_script(deaf, c, PlayerConfig::default(), model);
    sim.start_turn("turn_1");
    sim.settle();
    sim.send(&command("cmd_int", 4, "turn.interrupt", json!({})));
    assert!(sim.events_of("run.terminal").is_empty());
    sim.close_controller();
    sim.run_until(60_000);
    assert_eq!(sim.signals().len(), 2, "TERM, then KILL after the grace");
    let t = assert_one_terminal(&sim);
    assert_eq!(t["reconciliation"]["reason"], "turn_interrupted");
    assert_eq!(t["turnTerminalState"], "interrupted");
}

// ------------------------------------------------------------------------- item 3

#[test]
fn wire_fields_follow_the_original() {
    let mut sim = Sim::new("happy-path", LocalConfig::default());
    sim.start_turn("turn_1");
    sim.settle();
    assert_eq!(
        sim.events_of("workspace.ready")[0]["payload"],
        json!({"workingDirectory": "."})
    );
    assert_eq!(
        sim.events_of("turn.submitted")[0]["payload"],
        json!({"text": "Run the fake driver."})
    );

    let mut c = LocalConfig::default();
    c.working_directory = Some("/work/space".into());
    let mut sim = Sim::new("happy-path", c);
    sim.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
    sim.send(&command("cmd_open", 2, "session.open", json!({})));
    sim.send(&command(
        "cmd_turn",
        3,
        "turn.start",
        json!({"turnId": "t"}),
    ));
    sim.settle();
    assert_eq!(
        sim.events_of("workspace.ready")[0]["payload"]["workingDirectory"],
        "/work/space"
    );
    assert_eq!(
        sim.events_of("turn.submitted")[0]["payload"],
        json!({"text": null})
    );
}

// ------------------------------------------------------------------------- item 4

#[test]
fn unknown_types_and_seq_zero_meet_the_ledger() {
    let mut sim = Sim::new("happy-path", LocalConfig::default());
    sim.send(&command("cmd_zero", 0, "run.prepare", json!({})));
    sim.send(&command("cmd_fly", 1, "turn.fly", json!({})));
    sim.send(&command("cmd_steer", 2, "turn.steer", json!({})));
    sim.send(&command("cmd_prepare", 3, "run.prepare", json!({})));
    let r = sim.receipts();
    let got: Vec<(&str, ReceiptStatus, &str)> = r
        .iter()
        .map(|r| (r.command_id.as_str(), r.status, r.detail.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "cmd_zero",
                ReceiptStatus::Rejected,
                "controllerSeq is not contiguous"
            ),
            (
                "cmd_fly",
                ReceiptStatus::Rejected,
                "command turn.fly is not implemented in Phase 2"
            ),
            (
                "cmd_steer",
                ReceiptStatus::Rejected,
                "command turn.steer is not implemented in Phase 2"
            ),
            ("cmd_prepare", ReceiptStatus::Accepted, "command applied"),
        ]
    );
}

#[test]
fn the_envelope_reads_what_the_strict_command_refuses() {
    let v = json!({"schema": "paperclip.prp.command.v1", "commandId": "c", "controllerSeq": 0,
        "type": "turn.fly", "issuedAt": "t", "payload": {"a": 1}, "zz": true, "deadlineAt": "d"});
    let env = CommandEnvelope::from_value(&v).unwrap();
    assert_eq!(
        (env.controller_seq, env.type_text.as_str()),
        (0, "turn.fly")
    );
    assert_eq!(env.command_type(), None);
    assert_eq!(
        env.ledger_value(),
        json!({"schema": "paperclip.prp.command.v1", "commandId": "c", "controllerSeq": 0,
            "type": "turn.fly", "issuedAt": "t", "payload": {"a": 1}})
    );
    assert_eq!(
        env.clone().into_command().unwrap_err().code(),
        "invalid_field"
    );
    let mut typed = v.clone();
    typed["controllerSeq"] = json!(1);
    assert_eq!(
        CommandEnvelope::from_value(&typed)
            .unwrap()
            .into_command()
            .unwrap_err()
            .code(),
        "unknown_value"
    );
    let mut not_text = v;
    not_text["type"] = json!(7);
    assert_eq!(
        CommandEnvelope::from_value(&not_text).unwrap_err().code(),
        "unknown_value"
    );
}

// ------------------------------------------------------------------------- item 6

#[test]
fn turn_stop_satisfies_await_interrupt() {
    let mut sim = Sim::new("interrupted", LocalConfig::default());
    sim.start_turn("turn_1");
    sim.settle();
    sim.send(&command(
        "cmd_stop",
        4,
        "turn.stop",
        json!({"reason": "operator_stop"}),
    ));
    sim.settle();
    let interrupted = sim.events_of("turn.interrupted");
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0]["payload"]["reason"], "operator_stop");
    assert_eq!(
        sim.events_of("harness.exited")[0]["payload"]["processExit"]["exitCode"],
        130
    );
    assert_eq!(
        assert_one_terminal(&sim)["reconciliation"]["reason"],
        "turn_interrupted"
    );
}

fn drain(p: &mut ScriptPlayer) -> Vec<PlayerOutput> {
    let mut out = Vec::new();
    while let Some(o) = p.poll_output() {
        out.push(o);
    }
    out
}

fn harness_cmd(ty: &str, payload: Value) -> PlayerInput {
    let line = json!({"schema": "paperclip.fake_harness.command.v1", "commandId": "c", "type": ty, "payload": payload});
    PlayerInput::StdinBytes(format!("{line}\n").into_bytes())
}

fn stdout_types(out: &[PlayerOutput]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            PlayerOutput::Stdout(l) => {
                Some(HarnessMessage::parse(l).unwrap().message_type.to_string())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn player_await_timer_expires_with_a_diagnostic_and_exit_1() {
    let mut p = ScriptPlayer::new(script("happy-path"), PlayerConfig::default());
    p.handle_input(0, PlayerInput::Start).unwrap();
    let out = drain(&mut p);
    assert_eq!(stdout_types(&out), ["ready"]);
    assert_eq!(p.poll_timeout(), Some(10_000));
    // An early timer input changes nothing.
    p.handle_input(9_999, PlayerInput::Timeout).unwrap();
    assert!(drain(&mut p).is_empty());
    p.handle_input(10_000, PlayerInput::Timeout).unwrap();
    let out = drain(&mut p);
    let PlayerOutput::Stdout(line) = &out[0] else {
        panic!("{out:?}")
    };
    let m = HarnessMessage::parse(line).unwrap();
    assert_eq!(m.payload["message"], "timed out waiting for session.open");
    assert_eq!(m.payload["timeoutMs"], 10_000);
    assert_eq!(out[1], PlayerOutput::Exit(1));
    assert!(p.is_exited());
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn player_satisfied_waits_disarm_their_timer() {
    let mut p = ScriptPlayer::new(script("interrupted"), PlayerConfig::default());
    p.handle_input(0, PlayerInput::Start).unwrap();
    drain(&mut p);
    p.handle_input(5_000, harness_cmd("session.open", json!({})))
        .unwrap();
    let out = drain(&mut p);
    assert_eq!(stdout_types(&out), ["event", "event"]);
    // The turn.start wait has its own bound from now.
    assert_eq!(p.poll_timeout(), Some(15_000));
    // The session.open deadline passes: its wait is over, nothing happens.
    p.handle_input(10_000, PlayerInput::Timeout).unwrap();
    assert!(drain(&mut p).is_empty());
    assert!(!p.is_exited());
    p.handle_input(12_000, harness_cmd("turn.start", json!({"turnId": "t"})))
        .unwrap();
    let out = drain(&mut p);
    // turn.started, item.started, the log line, then the interrupt wait is armed.
    assert_eq!(stdout_types(&out), ["event", "event", "log"]);
    assert_eq!(p.poll_timeout(), Some(22_000));
    p.handle_input(15_000, PlayerInput::Timeout).unwrap();
    assert!(drain(&mut p).is_empty());
    p.handle_input(22_000, PlayerInput::Timeout).unwrap();
    assert_eq!(drain(&mut p).last(), Some(&PlayerOutput::Exit(1)));
}

#[test]
fn request_resolve_waits_are_bounded_by_the_resolve_timeout() {
    let mut pc = PlayerConfig::default();
    pc.command_timeout_ms = None;
    let mut p = ScriptPlayer::new(script("permission-input"), pc.clone());
    p.handle_input(0, PlayerInput::Start).unwrap();
    // No command timer (disabled).
    assert_eq!(p.poll_timeout(), None);
    p.handle_input(0, harness_cmd("session.open", json!({})))
        .unwrap();
    p.handle_input(7, harness_cmd("turn.start", json!({})))
        .unwrap();
    drain(&mut p);
    // One resolve timer of 5 min from the input that began the wait.
    assert_eq!(p.poll_timeout(), Some(300_007));

    pc.resolve_timeout_ms = None;
    let mut p = ScriptPlayer::new(script("permission-input"), pc);
    p.handle_input(0, PlayerInput::Start).unwrap();
    p.handle_input(0, harness_cmd("session.open", json!({})))
        .unwrap();
    p.handle_input(0, harness_cmd("turn.start", json!({})))
        .unwrap();
    drain(&mut p);
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn a_harness_waiting_for_session_open_gives_up_after_the_command_timeout() {
    let mut sim = Sim::new("happy-path", LocalConfig::default());
    sim.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
    sim.run_until(60_000);
    let exited = &sim.events_of("harness.exited")[0]["payload"];
    assert_eq!(exited["processExit"]["exitCode"], 1);
    assert!(exited["logs"]["lines"].as_array().unwrap().iter().any(|l| l
        .as_str()
        .unwrap()
        .contains("timed out waiting for session.open")));
    let t = assert_one_terminal(&sim);
    assert_eq!(t["reconciliation"]["reason"], "harness_process_failed");
}

// ------------------------------------------------------------------------- item 7

#[test]
fn a_second_interrupt_is_rejected_and_not_forwarded() {
    let mut run = LocalRun::new(LocalConfig::default()).unwrap();
    let mut outputs = Vec::new();
    let mut feed = |run: &mut LocalRun, input: Input| {
        run.handle_input(0, input).unwrap();
        while let Some(o) = run.poll_output() {
            outputs.push(o);
        }
    };
    let line = |v: Value| Input::ControllerBytes(format!("{v}\n").into_bytes());
    feed(&mut run, line(command("p", 1, "run.prepare", json!({}))));
    feed(&mut run, Input::HarnessSpawned { pid: 7 });
    feed(
        &mut run,
        Input::HarnessStdout(
            b"{\"schema\":\"paperclip.fake_harness.message.v1\",\"messageSeq\":1,\"type\":\"ready\",\"payload\":{}}\n"
                .to_vec(),
        ),
    );
    feed(&mut run, line(command("o", 2, "session.open", json!({}))));
    feed(&mut run, line(command("t", 3, "turn.start", json!({}))));
    feed(
        &mut run,
        line(command("i1", 4, "turn.interrupt", json!({}))),
    );
    feed(&mut run, line(command("i2", 5, "turn.stop", json!({}))));
    feed(
        &mut run,
        line(command("i3", 6, "turn.interrupt", json!({}))),
    );
    let forwarded = outputs
        .iter()
        .filter(|o| matches!(o, Output::ToHarness(l) if l.contains("\"turn.")))
        .count();
    assert_eq!(forwarded, 2, "turn.start and one interrupt");
    let details: Vec<String> = outputs
        .iter()
        .filter_map(|o| match o {
            Output::ToController(l) => match StreamMessage::parse(l).unwrap() {
                StreamMessage::CommandReceipt(r) if r.command_id.starts_with('i') => Some(r.detail),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        details,
        [
            "command applied",
            "an interrupt was already accepted for this turn",
            "an interrupt was already accepted for this turn"
        ]
    );
}

// ------------------------------------------------------------------------- item 8

#[test]
fn exit_before_ready_is_a_protocol_violation_whatever_the_code() {
    for code in [Some(0), Some(1), None] {
        let mut run = LocalRun::new(LocalConfig::default()).unwrap();
        let prepare = command("p", 1, "run.prepare", json!({}));
        run.handle_input(
            0,
            Input::ControllerBytes(format!("{prepare}\n").into_bytes()),
        )
        .unwrap();
        run.handle_input(0, Input::HarnessSpawned { pid: 9 })
            .unwrap();
        run.handle_input(
            0,
            Input::HarnessExited {
                code,
                signal: code.is_none().then_some(9),
            },
        )
        .unwrap();
        let mut terminal = None;
        let mut codes = Vec::new();
        while let Some(o) = run.poll_output() {
            if let Output::ToController(l) = o {
                if let StreamMessage::Event(e) = StreamMessage::parse(&l).unwrap() {
                    if let Some(c) = e["payload"]["code"].as_str() {
                        codes.push(c.to_owned());
                    }
                    if e["eventType"] == "run.terminal" {
                        terminal = Some(e["payload"].clone());
                    }
                }
            }
        }
        assert_eq!(codes, ["harness_exited_before_ready"]);
        assert_eq!(
            terminal.unwrap()["reconciliation"]["reason"],
            "harness_protocol_violation",
            "{code:?}"
        );
    }
}

// ------------------------------------------------------------------------- item 9

#[test]
fn reducer_id_eviction_is_bounded_and_never_reapplies() {
    // 200,000 events through a 100,000-id window: 100,000 evictions. With the former
    // front removal from an IndexSet each eviction moved the whole window.
    let mut cfg = ReducerConfig::for_run("r");
    cfg.max_tracked_event_ids = 100_000;
    let mut r = SessionReducer::new(cfg);
    let mut f = EventFactory::new("r", "s", "i", EventClock::default());
    let first = f.next("item.delta", json!({}), None, None);
    assert_eq!(r.apply(&first).unwrap(), Outcome::Applied);
    let mut last = first.clone();
    for _ in 1..200_000 {
        last = f.next("item.delta", json!({}), None, None);
        assert_eq!(r.apply(&last).unwrap(), Outcome::Applied);
    }
    assert_eq!(r.apply(&last).unwrap(), Outcome::Duplicate);
    // The first id was evicted: it is behind the cursor, never applied again.
    assert!(matches!(
        r.apply(&first).unwrap(),
        Outcome::OutOfOrder { .. }
    ));
    assert_eq!(r.snapshot()["appliedEvents"], 200_000);
}

#[test]
fn ledger_eviction_keeps_the_bound_over_many_commands() {
    let mut c = LocalConfig::default();
    c.ledger_max_entries = 4;
    let mut run = LocalRun::new(c).unwrap();
    for seq in 1..=2_000u64 {
        let v = command(&format!("c{seq}"), seq, "turn.steer", json!({}));
        run.handle_input(0, Input::ControllerBytes(format!("{v}\n").into_bytes()))
            .unwrap();
        while run.poll_output().is_some() {}
    }
    assert_eq!(run.ledger().len(), 4);
    assert_eq!(run.ledger().evicted(), 1_996);
    assert_eq!(run.ledger().next_seq(), 2_001);
}

#[test]
fn scripts_still_load() {
    // Guard for the helpers above: the fixtures parse as scripts.
    let s: Script = script("linger");
    assert_eq!(s.name, "linger");
}
