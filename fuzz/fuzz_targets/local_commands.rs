//! Local-runner command parsing and the command ledger: every model parser on arbitrary
//! lines (never a panic; what parses re-parses from its own encoding to the same value),
//! then the lines as controller input of a local run: a `controllerSeq` is accepted at
//! most once and accepted seqs strictly increase (nothing applied twice), the ledger
//! stays within its bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::local::{
    CommandEnvelope, HarnessCommand, HarnessMessage, Input, LocalConfig, LocalRun, Output,
    ReceiptStatus, Script, StreamMessage,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let parsed = serde_json::from_str::<serde_json::Value>(line).ok();
        if let Some(Ok(env)) = parsed.as_ref().map(CommandEnvelope::from_value) {
            let canonical = env.ledger_value();
            assert_eq!(
                canonical,
                env.ledger_value(),
                "canonical form is deterministic"
            );
            let _ = env.into_command();
        }
        if let Ok(m) = HarnessMessage::parse(line) {
            assert_eq!(HarnessMessage::parse(&m.to_line()).ok(), Some(m));
        }
        if let Ok(c) = HarnessCommand::parse(line) {
            assert_eq!(HarnessCommand::parse(&c.to_line()).ok(), Some(c));
        }
        if let Ok(s) = StreamMessage::parse(line) {
            assert_eq!(StreamMessage::parse(&s.to_line()).ok(), Some(s));
        }
    }
    let _ = Script::parse(&text);

    let mut config = LocalConfig::default();
    config.max_line_bytes = 4096;
    config.max_controller_line_bytes = 4096;
    config.ledger_max_entries = 8;
    config.ledger_max_bytes = 4096;
    let Ok(mut run) = LocalRun::new(config.clone()) else {
        return;
    };
    let _ = run.handle_input(0, Input::ControllerBytes(data.to_vec()));
    let _ = run.handle_input(1, Input::HarnessSpawned { pid: 42 });
    let _ = run.handle_input(2, Input::ControllerBytes(data.to_vec()));
    let mut last_accepted: Option<u64> = None;
    while let Some(out) = run.poll_output() {
        if let Output::ToController(line) = out {
            if let Ok(StreamMessage::CommandReceipt(r)) = StreamMessage::parse(&line) {
                if r.status == ReceiptStatus::Accepted {
                    if let Some(prev) = last_accepted {
                        assert!(
                            r.controller_seq > prev,
                            "seq {} accepted after {prev}",
                            r.controller_seq
                        );
                    }
                    last_accepted = Some(r.controller_seq);
                }
            }
        }
    }
    assert!(run.ledger().len() <= config.ledger_max_entries.max(1));
    assert!(run.ledger().bytes() <= config.ledger_max_bytes.max(1) + 4096 + 512);
});
