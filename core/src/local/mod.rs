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
//! * [`LocalRun`] — the machine: `handle_input(now_ms, Input)` / `poll_output()`, emitting
//!   lines, `Spawn`, `CloseHarnessStdin`, `Signal`, `Timeout` and `Exit` outputs;
//! * [`ScriptPlayer`] — the fake harness as a sans-IO script player.
//!
//! ```
//! use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output};
//!
//! let mut run = LocalRun::new(LocalConfig::default()).unwrap();
//! let cmd = r#"{"schema":"paperclip.prp.command.v1","commandId":"c1","controllerSeq":1,"type":"run.prepare","issuedAt":"2026-01-01T00:00:00Z","payload":{}}"#;
//! run.handle_input(0, Input::ControllerBytes(format!("{cmd}\n").into_bytes())).unwrap();
//! let mut spawned = false;
//! loop {
//!     match run.poll_output() {
//!         Output::Spawn(req) => spawned = req.new_process_group,
//!         Output::Timeout(deadline) => {
//!             assert_eq!(deadline, Some(2_000)); // the harness ready deadline
//!             break;
//!         }
//!         _ => {}
//!     }
//! }
//! assert!(spawned);
//! ```

pub mod canonical;
pub mod error;
pub mod events;
pub mod ledger;
pub mod logtail;
pub mod machine;
pub mod models;
pub mod player;
pub mod reconcile;

pub use canonical::canonical_json;
pub use error::{HarnessViolation, LocalError, ModelError};
pub use events::{format_rfc3339_ms, CanonicalEvent, EventClock, EventFactory};
pub use ledger::{CommandLedger, LedgerVerdict};
pub use logtail::LogTail;
pub use machine::{Input, LocalConfig, LocalRun, Output, SignalKind, SpawnRequest};
pub use models::{
    event_priority, is_known_event_type, terminal_proposal_is_valid, validate_run_result,
    validate_runtime_request, validate_terminal, CommandEnvelope, CommandReceipt, CommandType,
    DiagnosticLevel, HarnessCommand, HarnessMessage, HarnessMessageType, ReceiptStatus,
    RunTerminalState, RunnerCommand, RuntimeRequestType, Script, ScriptStep, StreamMessage,
    TurnTerminalState, WorkDisposition, EVENT_TYPES,
};
pub use player::{PlayerConfig, PlayerInput, PlayerOutput, ScriptPlayer};
pub use reconcile::{reconcile_terminal, Intent, ProcessExit};
