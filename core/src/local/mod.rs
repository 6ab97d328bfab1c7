//! The local-runner protocol of seed 002, sans-IO.
//!
//! A local controller drives one runner over stdin/stdout JSONL
//! (`paperclip.prp.command.v1` in, `paperclip.runner.stream.v1` out); the runner drives
//! one harness process over its stdin/stdout JSONL (`paperclip.fake_harness.command.v1`
//! in, `paperclip.fake_harness.message.v1` out) and supervises its process group.
//!
//! * [`models`] — every message shape and its reader (unknown optional fields kept,
//!   unknown schema ids / required versions / enum values fail closed);
//! * [`canonical_json`] and [`CommandLedger`] — duplicate and contiguity rules for
//!   commands;
//! * [`EventFactory`] — canonical events with deterministic ids, sequence numbers and
//!   `emittedAt` from an injected [`EventClock`];
//! * [`LogTail`] — the bounded log tail reported with `harness.exited`;
//! * [`reconcile`] — the runner-owned terminal decision;
//! * [`LocalRun`] — the machine: `handle_input(now_ms, Input)` / `poll_output()` /
//!   `poll_timeout()`, emitting lines, `Spawn`, `CloseHarnessStdin`, `Signal` and `Exit`
//!   outputs;
//! * [`ScriptPlayer`] — the fake harness as a sans-IO script player.
//!
//! ```
//! use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output};
//!
//! let mut run = LocalRun::new(LocalConfig::default()).unwrap();
//! let cmd = r#"{"schema":"paperclip.prp.command.v1","commandId":"c1","controllerSeq":1,"type":"run.prepare","issuedAt":"2026-01-01T00:00:00Z","payload":{}}"#;
//! run.handle_input(0, Input::ControllerBytes(format!("{cmd}\n").into_bytes())).unwrap();
//! let mut spawned = false;
//! while let Some(output) = run.poll_output() {
//!     if let Output::Spawn(req) = output {
//!         spawned = req.new_process_group;
//!     }
//! }
//! assert!(spawned);
//! assert_eq!(run.poll_timeout(), Some(2_000)); // the harness ready deadline
//! ```

mod canonical;
mod error;
mod events;
mod ledger;
mod logtail;
mod machine;
mod models;
mod player;
mod reconcile;

pub use error::{LocalError, ModelError};
pub use events::{CanonicalEvent, EventClock, EventFactory};
pub use ledger::CommandLedger;
pub use logtail::LogTail;
pub use machine::{Input, LocalConfig, LocalRun, Output, SignalKind, SpawnRequest};
pub use models::{
    CommandEnvelope, CommandReceipt, CommandType, DiagnosticLevel, HarnessCommand, HarnessMessage,
    HarnessMessageType, ReceiptStatus, RunnerCommand, Script, ScriptStep, StreamMessage,
};
pub use player::{PlayerConfig, PlayerInput, PlayerOutput, ScriptPlayer};

pub(crate) use models::{parse_json, RunTerminalState};
