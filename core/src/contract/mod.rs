//! The harness-execution contract of seed 001 (contract version `1.0`), sans-IO.
//!
//! * [`parse_model`] / [`MODEL_NAMES`] — any of those models by name (the table a
//!   binding exposes), `unknown_model` for another name.
//! * [`models`] — the strict contract-1.0 models: [`ExecutionRequest`],
//!   [`HarnessProfile`], [`ReinDescriptor`], [`SandboxHandle`], [`ToolCall`],
//!   [`ToolResult`], [`ExecutionSummary`]; plus [`ExecutionEvidence`] and
//!   [`GatewayResult`] in [`evidence`] (also strict, for readers of evidence).
//! * [`resolution`] — profile resolution against a [`Catalog`] and its refusals
//!   `unknown`, `disabled`, `ambiguous`, `incompatible`, `unsafe`.
//! * [`Gateway`] — the lifecycle machine: resolve → create sandbox → start session →
//!   dispatch tools → end session → destroy sandbox → [`GatewayResult`].
//! * [`rein`] — the rules of the reference rein (`SubprocessRein`): role, tool-call
//!   prompt, turn outcome → tool result, usage sum and summary.
//! * [`safety`] — the one definition of sensitive keys and credential-shaped values, and
//!   the identifier shapes evidence enforces ([`IdentifierKind`]).
//!
//! # Forward compatibility
//!
//! Contract models forbid unknown fields (`unknown_field`); the declared `metadata`
//! objects are the only open place, and they may not carry sensitive values. Adding a
//! required field, changing a meaning, or removing a field needs a new contract version;
//! profiles and rein descriptors must declare exactly [`CONTRACT_VERSION`].
//!
//! # Refused vs failed
//!
//! `refused`: governed execution did not proceed — resolution refused, nothing was
//! created. `failed`: an attempted lifecycle did not complete successfully — any failure
//! from sandbox creation on, including a rein-declared unsuccessful result, a failed
//! teardown after an otherwise successful run, and a host abort (which can only arrive
//! after resolution succeeded, see [`Gateway`]).
//!
//! ```
//! use stapel_runner_protocol::contract::*;
//! use serde_json::json;
//!
//! let catalog = Catalog::from_value(&json!({
//!     "profiles": [{"contract_version": "1.0", "profile_id": "coder-default", "rein": "fake",
//!                   "model": "claude-sonnet-4", "sandbox_profile": "repo-rw",
//!                   "tool_policy": {"allowed_tools": ["run_task"]}}],
//!     "reins": [{"rein_id": "fake", "contract_version": "1.0"}],
//! })).unwrap();
//! let mut gw = Gateway::new(GatewayConfig::new(catalog));
//! let request = ExecutionRequest::new("coder-default", "org/repo", "Fix", "Fix the bug");
//! gw.handle_input(0, GatewayInput::Execute {
//!     request, inputs: StringMap::new(), tool_calls: vec![ToolCall::new("run_task")],
//! }).unwrap();
//! assert!(matches!(gw.poll_output(), Some(GatewayOutput::Action(GatewayAction::CreateSandbox { .. }))));
//! assert_eq!(gw.poll_output(), None);
//! assert_eq!(gw.poll_timeout(), None);
//! gw.handle_input(5, GatewayInput::SandboxCreated { sandbox: SandboxHandle::new("sb-1") }).unwrap();
//! # let _ = gw.poll_output();
//! gw.handle_input(6, GatewayInput::SessionStarted { session: StringMap::new() }).unwrap();
//! # let _ = gw.poll_output();
//! gw.handle_input(9, GatewayInput::ToolDispatched { result: ToolResult::success(json!("done")) }).unwrap();
//! # let _ = gw.poll_output();
//! gw.handle_input(10, GatewayInput::SessionEnded { summary: ExecutionSummary::default() }).unwrap();
//! # let _ = gw.poll_output();
//! gw.handle_input(12, GatewayInput::SandboxDestroyed).unwrap();
//! let Some(GatewayOutput::Result(result)) = gw.poll_output() else { panic!() };
//! assert!(result.ok);
//! assert_eq!(result.evidence.duration_ms, 12);
//! assert_eq!(result.tool_output, json!("done"));
//! ```

mod error;
pub mod evidence;
mod fields;
mod gateway;
pub mod models;
mod named;
pub mod rein;
pub mod resolution;
pub mod safety;

pub use error::{ContractError, GatewayError};
pub use evidence::{
    safe_identifier, truncation_marker, ExecutionEvidence, FailureStage, GatewayResult, Outcome,
    SessionEndStatus, TeardownStatus, ToolCallCounts,
};
pub use gateway::{
    is_abort_code, Gateway, GatewayAction, GatewayConfig, GatewayInput, GatewayOutput,
    GatewayStage, ABORTED, DEFAULT_MAX_EVIDENCE_ARTIFACTS, DEFAULT_MAX_EVIDENCE_REFS,
    DEFAULT_MAX_TOOL_CALLS, INVALID_SANDBOX_HANDLE, MAX_ABORT_CODE_LEN,
};
pub use models::{
    ExecutionRequest, ExecutionSummary, HarnessProfile, ReinDescriptor, SandboxHandle, StringMap,
    ToolCall, ToolEventVisibility, ToolPolicy, ToolResult, CONTRACT_VERSION,
};
pub use named::{parse_model, MODEL_NAMES};
pub use rein::{ReinSession, SessionIds, HARNESS_ERROR};
pub use resolution::{resolve, unsafe_reasons, Catalog, Refusal, RefusalKind, Resolved};
pub use safety::{safe_identifier_as, IdentifierKind};
