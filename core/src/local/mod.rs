//! The local-runner protocol of seed 002, sans-IO.
//!
//! A local controller drives one runner over stdin/stdout JSONL
//! (`paperclip.prp.command.v1` in, `paperclip.runner.stream.v1` out); the runner drives
//! one harness process over its stdin/stdout JSONL (`paperclip.fake_harness.command.v1`
//! in, `paperclip.fake_harness.message.v1` out) and supervises its process group.
//!
//! * the message shapes ([`RunnerCommand`], [`HarnessMessage`], [`StreamMessage`], …) and
//!   their readers (unknown optional fields kept, unknown schema ids / required versions /
//!   enum values fail closed with a [`ModelError`]);
//! * [`CommandLedger`] — duplicate and contiguity rules for commands (compared by their
//!   canonical JSON: keys sorted recursively, compact);
//! * [`EventFactory`] — canonical events with deterministic ids, sequence numbers and
//!   `emittedAt` from an injected [`EventClock`];
//! * [`LogTail`] — the bounded log tail reported with `harness.exited`;
//! * the runner-owned terminal decision (below);
//! * [`LocalRun`] — the machine: `handle_input(now_ms, Input)` / `poll_output()` /
//!   `poll_timeout()`, emitting lines, `Spawn`, `CloseHarnessStdin`, `Signal` and `Exit`
//!   outputs;
//! * [`ScriptPlayer`] — the fake harness as a sans-IO script player.
//!
//! # Terminal reconciliation
//!
//! The harness `terminal` message is only a proposal. The runner keeps it
//! (`harnessTerminalProposal`), validates it (`proposalValid`) and derives the turn and run
//! terminal states from its own facts — the process exit, whether a semantic result was
//! observed, an accepted interrupt/cancel, controller closure and protocol violations:
//!
//! | intent | turn | run | `reason` |
//! |---|---|---|---|
//! | interrupted (`turn.interrupt`/`turn.stop` accepted) | interrupted | cancelled | `turn_interrupted` |
//! | cancelled (`run.cancel` accepted) | cancelled | cancelled | `run_cancelled` |
//! | controller closed | cancelled | cancelled | `controller_closed` |
//! | request expired (a runtime request outlived `request_timeout_ms`) | failed | failed | `request_expired` |
//! | protocol violation | failed | failed | `harness_protocol_violation` |
//! | natural, exit succeeded and result observed | completed | succeeded | `successful_process_and_result` |
//! | natural, exit not successful (or no process) | failed | failed | `harness_process_failed` |
//! | natural, exit succeeded, no result | failed | failed | `semantic_result_missing` |
//!
//! `reportedWorkDisposition`: when the run succeeded, the result's disposition, else the
//! (valid) proposal's, else `done`; otherwise the result's unless it is `done`, else the
//! (valid) proposal's unless it is `done`, else `yielded`. `proposalContradicted` is
//! `proposalValid && (turn or run state differs from the derived one)`.
//!
//! # Intent precedence
//!
//! The runner may learn several reasons to end a run (an interrupt, then the controller
//! closing; a cancel after an interrupt; a protocol violation while shutting down). The
//! intent in force is the one of highest rank; a later intent replaces it
//! only when its rank is strictly higher, so among equals the first wins:
//!
//! | rank | intent |
//! |---|---|
//! | 4 | protocol violation — the harness's output can no longer be trusted, whatever else happened |
//! | 3 | cancelled — the operator's explicit cancel overrides an earlier interrupt |
//! | 2 | interrupted |
//! | 1 | controller closed, request expired — passive endings; they never hide an operator's interrupt or cancel |
//! | 0 | natural |
//!
//! The original runner assigns the intent on every event (last wins). The precedence
//! differs from it only where "last wins" loses information: an operator who interrupted
//! and then closed the controller still gets `turn_interrupted` (not
//! `controller_closed`), and a violation found after a cancel still fails the run.
//!
//! # Example
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

pub use canonical::canonical_json;
pub use error::{LocalError, ModelError, HARNESS_VIOLATION_CODES};
pub use events::{CanonicalEvent, EventClock, EventFactory};
pub use ledger::CommandLedger;
pub use logtail::LogTail;
pub use machine::{Input, LocalConfig, LocalRun, Output, SignalKind, SpawnRequest};
pub use models::{
    CommandEnvelope, CommandReceipt, CommandType, DiagnosticLevel, HarnessCommand, HarnessMessage,
    HarnessMessageType, ReceiptStatus, RunnerCommand, Script, ScriptStep, StreamMessage,
};
pub use player::{PlayerConfig, PlayerInput, PlayerOutput, ScriptPlayer};
pub use reconcile::{
    FAILED_RUN_REASONS, REASON_PROCESS_FAILED, REASON_PROTOCOL_VIOLATION, REASON_REQUEST_EXPIRED,
    REASON_RESULT_MISSING,
};

pub(crate) use models::{parse_json, RunTerminalState};
