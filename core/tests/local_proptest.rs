//! Property: whatever the start of the run (ready on time, no ready at all, spawn failure,
//! exit before ready, controller EOF while `run.prepare` is pending) and whatever the
//! interleaving of harness output, exits, timeouts and controller commands after it, a
//! prepared run ends with exactly one `run.terminal`, never a success terminal after a
//! non-zero exit, and no event or supervision action after it.

use proptest::prelude::*;
use serde_json::{json, Value};
use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output, StreamMessage};

const PID: u32 = 77;

#[derive(Debug, Clone)]
enum Act {
    Harness(u8),
    Split(u8, usize),
    Stderr(u8),
    Command(u8, bool),
    ControllerEof,
    Advance(u64),
    Exit(u8),
}

/// How the run starts (after `run.prepare`).
#[derive(Debug, Clone)]
enum Prefix {
    /// Spawned, then `ready`.
    Ready,
    /// Spawned, never `ready`: the ready deadline passes.
    ReadyTimeout,
    /// The spawn fails.
    SpawnFailed,
    /// Spawned, then the harness exits (any code) before `ready`.
    ExitBeforeReady(u8),
    /// Spawned, then the controller closes while `run.prepare` waits for `ready`; the
    /// generated actions may or may not bring `ready`.
    EofWhilePreparing,
    /// The controller closes before the spawn is even reported.
    EofBeforeSpawned,
}

fn prefix() -> impl Strategy<Value = Prefix> {
    prop_oneof![
        4 => Just(Prefix::Ready),
        1 => Just(Prefix::ReadyTimeout),
        1 => Just(Prefix::SpawnFailed),
        1 => any::<u8>().prop_map(Prefix::ExitBeforeReady),
        1 => Just(Prefix::EofWhilePreparing),
        1 => Just(Prefix::EofBeforeSpawned),
    ]
}

fn exit_of(k: u8) -> (Option<i32>, Option<i32>) {
    match k % 5 {
        0 => (Some(0), None),
        1 => (Some(1), None),
        2 => (Some(7), None),
        3 => (Some(130), None),
        _ => (None, Some(9)),
    }
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        6 => any::<u8>().prop_map(Act::Harness),
        1 => (any::<u8>(), 0usize..400).prop_map(|(k, at)| Act::Split(k, at)),
        1 => any::<u8>().prop_map(Act::Stderr),
        4 => (any::<u8>(), any::<bool>()).prop_map(|(k, reuse)| Act::Command(k, reuse)),
        1 => Just(Act::ControllerEof),
        2 => (0u64..3_000).prop_map(Act::Advance),
        1 => any::<u8>().prop_map(Act::Exit),
    ]
}

fn msg(seq: u64, ty: &str, payload: Value) -> String {
    json!({"schema": "paperclip.fake_harness.message.v1", "messageSeq": seq, "type": ty, "payload": payload}).to_string()
}

fn result(disposition: &str) -> Value {
    let mut r = json!({"schema": "paperclip.run_result.v1", "reportedWorkDisposition": disposition, "summary": "s",
        "completionClaim": {"contractRevision": "r", "objectiveSatisfied": true, "criteria": [], "remainingWork": []},
        "evidence": [], "verification": [], "attentionRequests": [], "artifacts": []});
    if disposition == "yielded" {
        r["continuation"] = json!({"kind": "retry", "summary": "s", "idempotencyKey": "k"});
    }
    r
}

fn harness_line(k: u8, seq: u64) -> String {
    let terminal = |t: &str, r: &str, d: &str| json!({"terminal": {"schema": "paperclip.prp.terminal.v1", "turnTerminalState": t, "runTerminalState": r, "reportedWorkDisposition": d}});
    match k % 16 {
        0 => msg(
            seq,
            "event",
            json!({"eventType": "turn.started", "turnId": "t1", "payload": {}}),
        ),
        1 => msg(
            seq,
            "event",
            json!({"eventType": "item.delta", "turnId": "t1", "itemId": "i1", "payload": {"text": "x"}}),
        ),
        2 => msg(
            seq,
            "event",
            json!({"eventType": "turn.completed", "turnId": "t1", "payload": {}}),
        ),
        3 => msg(
            seq,
            "event",
            json!({"eventType": "run.terminal", "payload": {}}),
        ),
        4 => msg(
            seq,
            "event",
            json!({"eventType": "no.such.event", "payload": {}}),
        ),
        5 => msg(seq, "result", json!({"result": result("done")})),
        6 => msg(seq, "result", json!({"result": result("yielded")})),
        7 => msg(
            seq,
            "result",
            json!({"result": {"schema": "paperclip.run_result.v1"}}),
        ),
        8 => msg(seq, "terminal", terminal("completed", "succeeded", "done")),
        9 => msg(seq, "terminal", terminal("failed", "failed", "yielded")),
        10 => msg(seq, "terminal", json!({"terminal": {"schema": "nope"}})),
        11 => msg(seq, "log", json!({"stream": "stdout", "text": "hello"})),
        12 => msg(
            seq,
            "request",
            json!({"request": {"schema": "paperclip.runtime_request.v1", "requestKind": "runtime",
                "requestId": format!("req_{seq}"), "type": "input", "status": "pending", "choices": []}}),
        ),
        13 => msg(seq, "ready", json!({"version": "1.0.0"})),
        14 => "this is not json".to_owned(),
        _ => "y".repeat(2000),
    }
}

fn command_line(k: u8, seq: u64, reuse: bool) -> String {
    let types = [
        "session.open",
        "turn.start",
        "turn.interrupt",
        "turn.stop",
        "run.cancel",
        "session.close",
        "request.resolve",
        "turn.steer",
        "run.prepare",
    ];
    let ty = types[k as usize % types.len()];
    let id = if reuse {
        format!("cmd_{}", seq.saturating_sub(1).max(1))
    } else {
        format!("cmd_{seq}")
    };
    json!({"schema": "paperclip.prp.command.v1", "commandId": id, "controllerSeq": seq, "type": ty, "issuedAt": "t",
           "payload": {"turnId": "t1", "requestId": "req_3"}})
    .to_string()
}

struct Driver {
    run: LocalRun,
    now: u64,
    outputs: Vec<Output>,
    exit: Option<(Option<i32>, Option<i32>)>,
    next_cmd_seq: u64,
    next_msg_seq: u64,
}

impl Driver {
    fn input(&mut self, input: Input) {
        let is_exit = matches!(input, Input::HarnessExited { .. });
        let (code, signal) = match &input {
            Input::HarnessExited { code, signal } => (*code, *signal),
            _ => (None, None),
        };
        if self.run.handle_input(self.now, input).is_ok() && is_exit {
            self.exit = Some((code, signal));
        }
        while let Some(o) = self.run.poll_output() {
            self.outputs.push(o);
        }
    }
}

fn play(acts: &[Act]) -> Driver {
    play_from(&Prefix::Ready, acts)
}

fn play_from(prefix: &Prefix, acts: &[Act]) -> Driver {
    let mut cfg = LocalConfig::default();
    cfg.max_line_bytes = 1024;
    cfg.shutdown_grace_ms = 500;
    // Short enough for generated time steps to expire runtime requests.
    cfg.request_timeout_ms = 2_500;
    let mut d = Driver {
        run: LocalRun::new(cfg).unwrap(),
        now: 0,
        outputs: Vec::new(),
        exit: None,
        next_cmd_seq: 2,
        next_msg_seq: 2,
    };
    d.input(Input::ControllerBytes(
        format!("{}\n", command_line(8, 1, false)).into_bytes(),
    ));
    let ready = |d: &mut Driver| {
        d.input(Input::HarnessStdout(
            format!("{}\n", msg(1, "ready", json!({"version": "1.0.0"}))).into_bytes(),
        ))
    };
    match prefix {
        Prefix::Ready => {
            d.input(Input::HarnessSpawned { pid: PID });
            ready(&mut d);
        }
        Prefix::ReadyTimeout => {
            d.input(Input::HarnessSpawned { pid: PID });
            d.now += 2_000;
            d.input(Input::Timeout);
        }
        Prefix::SpawnFailed => d.input(Input::HarnessSpawnFailed {
            message: "no such file".into(),
        }),
        Prefix::ExitBeforeReady(k) => {
            d.input(Input::HarnessSpawned { pid: PID });
            let (code, signal) = exit_of(*k);
            d.input(Input::HarnessExited { code, signal });
        }
        Prefix::EofWhilePreparing => {
            d.input(Input::HarnessSpawned { pid: PID });
            d.input(Input::ControllerEof);
        }
        Prefix::EofBeforeSpawned => {
            d.input(Input::ControllerEof);
            d.input(Input::HarnessSpawned { pid: PID });
        }
    }
    for a in acts {
        match a {
            Act::Harness(k) => {
                let line = harness_line(*k, d.next_msg_seq);
                d.next_msg_seq += 1;
                d.input(Input::HarnessStdout(format!("{line}\n").into_bytes()));
            }
            Act::Split(k, at) => {
                let line = format!("{}\n", harness_line(*k, d.next_msg_seq));
                d.next_msg_seq += 1;
                let at = (*at).min(line.len());
                d.input(Input::HarnessStdout(line.as_bytes()[..at].to_vec()));
                d.input(Input::HarnessStdout(line.as_bytes()[at..].to_vec()));
            }
            Act::Stderr(k) => d.input(Input::HarnessStderr(
                format!("{}\n", "e".repeat(*k as usize * 2)).into_bytes(),
            )),
            Act::Command(k, reuse) => {
                let seq = if *k % 7 == 0 {
                    d.next_cmd_seq + 3
                } else {
                    d.next_cmd_seq
                };
                let line = command_line(*k, seq, *reuse);
                d.next_cmd_seq += 1;
                d.input(Input::ControllerBytes(format!("{line}\n").into_bytes()));
            }
            Act::ControllerEof => d.input(Input::ControllerEof),
            Act::Advance(ms) => {
                d.now += ms;
                d.input(Input::Timeout);
            }
            Act::Exit(k) => {
                let (code, signal) = exit_of(*k);
                d.input(Input::HarnessExited { code, signal });
            }
        }
    }
    // Drive to the end: the controller goes away, time passes the grace, the group dies.
    d.input(Input::ControllerEof);
    d.now += 10_000;
    d.input(Input::Timeout);
    d.input(Input::HarnessExited {
        code: None,
        signal: Some(9),
    });
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn exactly_one_terminal_and_nothing_after_it(prefix in prefix(), acts in proptest::collection::vec(act(), 0..40)) {
        let d = play_from(&prefix, &acts);
        let mut events = Vec::new();
        let mut terminal_at = None;
        for (i, o) in d.outputs.iter().enumerate() {
            if let Output::ToController(line) = o {
                if let StreamMessage::Event(e) = StreamMessage::parse(line).unwrap() {
                    if e["eventType"] == "run.terminal" {
                        terminal_at.get_or_insert(i);
                    }
                    events.push(e);
                }
            }
        }
        let terminals: Vec<&Value> = events.iter().filter(|e| e["eventType"] == "run.terminal").collect();
        prop_assert_eq!(terminals.len(), 1);
        prop_assert_eq!(&events.last().unwrap()["eventType"], "run.terminal");
        for (i, e) in events.iter().enumerate() {
            prop_assert_eq!(e["sourceSeq"].as_u64(), Some(i as u64 + 1));
        }
        let t = &terminals[0]["payload"];
        let reason = t["reconciliation"]["reason"].as_str().unwrap_or_default();
        match d.exit {
            Some((code, signal)) => {
                let success = code == Some(0) && signal.is_none();
                if !success {
                    prop_assert_ne!(&t["runTerminalState"], "succeeded");
                }
                prop_assert_eq!(&t["reconciliation"]["processExit"]["success"], &json!(success));
            }
            None => {
                // Only a harness that never started has no exit fact.
                prop_assert!(matches!(prefix, Prefix::SpawnFailed), "no exit accepted");
                prop_assert_eq!(&t["reconciliation"]["processExit"], &Value::Null);
                prop_assert_eq!(&t["runTerminalState"], "failed");
            }
        }
        match prefix {
            Prefix::SpawnFailed => prop_assert_eq!(reason, "harness_process_failed"),
            Prefix::ReadyTimeout | Prefix::ExitBeforeReady(_) => {
                prop_assert_eq!(reason, "harness_protocol_violation")
            }
            _ => {}
        }
        if t["runTerminalState"] == "succeeded" {
            prop_assert_eq!(&t["reconciliation"]["semanticResultObserved"], &json!(true));
            prop_assert_eq!(&t["turnTerminalState"], "completed");
        }
        // After run.terminal only Exit and controller lines (expired receipts) may follow.
        for o in &d.outputs[terminal_at.unwrap() + 1..] {
            prop_assert!(matches!(o, Output::Exit(0) | Output::ToController(_)), "unexpected output after run.terminal: {:?}", o);
            if let Output::ToController(l) = o {
                prop_assert!(!matches!(StreamMessage::parse(l).unwrap(), StreamMessage::Event(_)));
            }
        }
        prop_assert_eq!(d.outputs.iter().filter(|o| matches!(o, Output::Exit(_))).count(), 1);
        prop_assert!(d.run.is_finished());
        // The prepare command is answered exactly once, whatever the start.
        let prepare_receipts = d.outputs.iter().filter(|o| match o {
            Output::ToController(l) => matches!(StreamMessage::parse(l).unwrap(),
                StreamMessage::CommandReceipt(r) if r.command_id == "cmd_1" && r.controller_seq == 1),
            _ => false,
        }).count();
        prop_assert_eq!(prepare_receipts, 1);
    }

    #[test]
    fn chunking_does_not_change_the_outputs(acts in proptest::collection::vec(act(), 0..25), chunk in 1usize..17) {
        // The same harness bytes delivered whole or in small chunks give the same outputs.
        let whole = play(&acts);
        let mut bytes = Vec::new();
        for a in &acts {
            if let Act::Harness(k) = a {
                bytes.push(*k);
            }
        }
        let mut cfg = LocalConfig::default();
        cfg.max_line_bytes = 1024;
        let mut a = LocalRun::new(cfg.clone()).unwrap();
        let mut b = LocalRun::new(cfg).unwrap();
        let mut outs = [Vec::new(), Vec::new()];
        let mut stream = format!("{}\n", msg(1, "ready", json!({})));
        for (i, k) in bytes.iter().enumerate() {
            stream.push_str(&harness_line(*k, i as u64 + 2));
            stream.push('\n');
        }
        for (n, run) in [&mut a, &mut b].into_iter().enumerate() {
            run.handle_input(0, Input::ControllerBytes(format!("{}\n", command_line(8, 1, false)).into_bytes())).unwrap();
            run.handle_input(0, Input::HarnessSpawned { pid: PID }).unwrap();
            if n == 0 {
                run.handle_input(0, Input::HarnessStdout(stream.clone().into_bytes())).unwrap();
            } else {
                for c in stream.as_bytes().chunks(chunk) {
                    run.handle_input(0, Input::HarnessStdout(c.to_vec())).unwrap();
                }
            }
            run.handle_input(0, Input::HarnessExited { code: Some(0), signal: None }).unwrap();
            while let Some(o) = run.poll_output() {
                outs[n].push(o);
            }
        }
        prop_assert_eq!(&outs[0], &outs[1]);
        prop_assert!(whole.run.is_finished());
    }
}

fn terminal_of(d: &Driver) -> Value {
    d.outputs
        .iter()
        .filter_map(|o| match o {
            Output::ToController(l) => match StreamMessage::parse(l).unwrap() {
                StreamMessage::Event(e) if e["eventType"] == "run.terminal" => {
                    Some(e["payload"].clone())
                }
                _ => None,
            },
            _ => None,
        })
        .next()
        .unwrap()
}

#[test]
fn the_driver_reaches_each_kind_of_terminal() {
    // Guards the property above against vacuity: the generated vocabulary can produce
    // success, failure and cancellation.
    let success = play(&[Act::Harness(5), Act::Harness(8), Act::Exit(0)]);
    assert_eq!(
        terminal_of(&success)["runTerminalState"],
        "succeeded",
        "{}",
        terminal_of(&success)
    );
    let failed = play(&[Act::Harness(5), Act::Harness(8), Act::Exit(2)]);
    assert_eq!(terminal_of(&failed)["runTerminalState"], "failed");
    let violation = play(&[Act::Harness(15)]);
    assert_eq!(
        terminal_of(&violation)["reconciliation"]["reason"],
        "harness_protocol_violation"
    );
    let cancelled = play(&[Act::Command(4, false), Act::Exit(0)]);
    assert_eq!(
        terminal_of(&cancelled)["reconciliation"]["reason"],
        "run_cancelled"
    );
    for (prefix, reason) in [
        (Prefix::ReadyTimeout, "harness_protocol_violation"),
        (Prefix::SpawnFailed, "harness_process_failed"),
        (Prefix::ExitBeforeReady(0), "harness_protocol_violation"),
        (Prefix::EofWhilePreparing, "harness_protocol_violation"),
    ] {
        let d = play_from(&prefix, &[]);
        assert_eq!(
            terminal_of(&d)["reconciliation"]["reason"],
            reason,
            "{prefix:?}"
        );
    }
    // EOF while preparing, then ready: the queued EOF closes the run after ready.
    let eof_then_ready = play_from(&Prefix::EofWhilePreparing, &[Act::Harness(13)]);
    assert_eq!(
        terminal_of(&eof_then_ready)["reconciliation"]["reason"],
        "controller_closed"
    );
    let expired = play(&[Act::Harness(12), Act::Advance(2_500)]);
    assert_eq!(
        terminal_of(&expired)["reconciliation"]["reason"],
        "request_expired"
    );
    let closed = play(&[Act::ControllerEof, Act::Advance(600)]);
    assert_eq!(
        terminal_of(&closed)["reconciliation"]["reason"],
        "controller_closed"
    );
    assert!(closed.outputs.iter().any(|o| matches!(
        o,
        Output::Signal {
            signal: stapel_runner_protocol::local::SignalKind::Kill,
            ..
        }
    )));
}
