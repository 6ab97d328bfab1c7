//! The local-run machine driven by arbitrary harness output and controller commands
//! (any chunking, spawn results, exits, EOFs, timers), then driven to its end: the
//! controller closes, every `Spawn` is answered, every timer fires and the harness exits,
//! until the machine says `Exit`.
//!
//! Checks: never a panic; event `sourceSeq`s count up from 1; exactly one `Exit`; a run
//! that emitted any event (it was prepared) emits exactly one `run.terminal` and exits 0,
//! a run that never was prepared emits no terminal and exits 1 (the controller closed
//! before `run.prepare`); no event after `run.terminal`, and after `Exit` nothing but
//! `rejected` receipts (commands answered as expired); the runner's own lines parse; the
//! drive ends within a few rounds (a run cannot hang once its controller is gone).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::local::{
    Input, LocalConfig, LocalRun, Output, ReceiptStatus, StreamMessage,
};
use stapel_runner_protocol_fuzz::{Bytes, MAX_CHUNK};

#[derive(Default)]
struct Seen {
    events: u64,
    terminals: u64,
    exits: Vec<i32>,
    /// A `Spawn` not yet answered.
    spawn_pending: bool,
}

fn drain(run: &mut LocalRun, seen: &mut Seen) {
    while let Some(out) = run.poll_output() {
        let after_exit = !seen.exits.is_empty();
        match out {
            Output::ToController(line) => {
                let msg = StreamMessage::parse(&line).expect("the runner's own lines parse");
                match msg {
                    StreamMessage::Event(e) => {
                        assert!(seen.terminals == 0, "event after run.terminal: {e}");
                        assert!(!after_exit, "event after Exit: {e}");
                        seen.events += 1;
                        assert_eq!(e["sourceSeq"].as_u64(), Some(seen.events), "sourceSeq");
                        if e["eventType"].as_str() == Some("run.terminal") {
                            seen.terminals += 1;
                        }
                    }
                    StreamMessage::CommandReceipt(r) if after_exit => {
                        assert_eq!(r.status, ReceiptStatus::Rejected, "after Exit: {r:?}");
                    }
                    _ => {}
                }
            }
            Output::Exit(code) => {
                assert!(!after_exit, "a second Exit({code})");
                seen.exits.push(code);
            }
            Output::Spawn(_) => {
                assert!(!after_exit, "Spawn after Exit");
                seen.spawn_pending = true;
            }
            other => assert!(!after_exit, "{other:?} after Exit"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let mut config = LocalConfig::default();
    config.max_line_bytes = 2048;
    config.max_controller_line_bytes = 2048;
    config.log_max_lines = 16;
    config.log_max_bytes = 2048;
    config.ledger_max_entries = 16;
    config.ready_timeout_ms = 500;
    let Ok(mut run) = LocalRun::new(config) else {
        return;
    };
    let mut now: u64 = 0;
    let mut seen = Seen::default();
    let mut steps = 0;
    while !b.is_empty() && steps < 256 {
        steps += 1;
        let input = match b.byte() % 10 {
            0 | 1 => Input::ControllerBytes(b.chunk(MAX_CHUNK).to_vec()),
            2 => Input::ControllerEof,
            3 | 4 => Input::HarnessStdout(b.chunk(MAX_CHUNK).to_vec()),
            5 => Input::HarnessStderr(b.chunk(MAX_CHUNK).to_vec()),
            6 => Input::HarnessSpawned {
                pid: 1 + u32::from(b.u16()),
            },
            7 => {
                let k = b.byte();
                match k % 4 {
                    0 => Input::HarnessExited {
                        code: Some(0),
                        signal: None,
                    },
                    1 => Input::HarnessExited {
                        code: Some(i32::from(k)),
                        signal: None,
                    },
                    2 => Input::HarnessExited {
                        code: None,
                        signal: Some(i32::from(k % 32)),
                    },
                    _ => Input::HarnessSpawnFailed {
                        message: "no such file".into(),
                    },
                }
            }
            8 => {
                if let Some(t) = run.poll_timeout() {
                    now = now.max(t);
                }
                Input::Timeout
            }
            _ => {
                now = now.saturating_add(u64::from(b.u16()));
                continue;
            }
        };
        let spawn_answer = matches!(
            input,
            Input::HarnessSpawned { .. } | Input::HarnessSpawnFailed { .. }
        );
        if run.handle_input(now, input).is_ok() && spawn_answer {
            seen.spawn_pending = false;
        }
        drain(&mut run, &mut seen);
    }

    // Drive the run to its end, as a host does when the controller goes away: close the
    // controller, answer the spawn, fire the timers, let the harness exit.
    let _ = run.handle_input(now, Input::ControllerEof);
    drain(&mut run, &mut seen);
    let mut rounds = 0;
    while !run.is_finished() {
        rounds += 1;
        assert!(rounds <= 16, "the run does not end");
        if seen.spawn_pending {
            run.handle_input(now, Input::HarnessSpawned { pid: 4242 })
                .expect("a pending spawn is answered");
            seen.spawn_pending = false;
        } else if let Some(t) = run.poll_timeout().filter(|_| rounds % 2 == 1) {
            now = now.max(t);
            run.handle_input(now, Input::Timeout)
                .expect("timeouts are harmless");
        } else {
            let _ = run.handle_input(
                now,
                Input::HarnessExited {
                    code: None,
                    signal: Some(15),
                },
            );
        }
        drain(&mut run, &mut seen);
    }
    drain(&mut run, &mut seen);
    assert_eq!(seen.exits.len(), 1, "exactly one Exit: {:?}", seen.exits);
    if seen.events > 0 {
        assert_eq!(
            seen.terminals, 1,
            "a prepared run emits exactly one run.terminal"
        );
        assert_eq!(seen.exits, [0], "a run with a terminal exits 0");
    } else {
        assert_eq!(seen.terminals, 0);
        assert_eq!(seen.exits, [1], "a run never prepared exits 1");
    }
});
