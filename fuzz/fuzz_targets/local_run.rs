//! The local-run machine driven by arbitrary harness output and controller commands
//! (any chunking, spawn results, exits, EOFs, timers): never a panic; at most one
//! `run.terminal` event, and no event after it; once the machine says `Exit`, a
//! prepared run has emitted its terminal; event `sourceSeq`s count up from 1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output, StreamMessage};
use stapel_runner_protocol_fuzz::{Bytes, MAX_CHUNK};

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
    let mut events = 0u64;
    let mut terminal = false;
    let mut prepared = false;
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
        let _ = run.handle_input(now, input);
        while let Some(out) = run.poll_output() {
            match out {
                Output::ToController(line) => {
                    let msg = StreamMessage::parse(&line).expect("the runner's own lines parse");
                    if let StreamMessage::Event(e) = msg {
                        assert!(!terminal, "event after run.terminal: {e}");
                        events += 1;
                        assert_eq!(e["sourceSeq"].as_u64(), Some(events), "sourceSeq");
                        match e["eventType"].as_str() {
                            Some("run.terminal") => terminal = true,
                            Some("run.prepared") | Some("harness.starting") => prepared = true,
                            _ => {}
                        }
                    }
                }
                Output::Exit(0) if prepared => {
                    assert!(terminal, "exit 0 without run.terminal");
                }
                _ => {}
            }
        }
    }
});
