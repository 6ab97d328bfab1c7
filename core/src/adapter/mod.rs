//! The harness-adapter seam of seed 000, as data.
//!
//! A harness adapter drives one concrete model↔harness backend for the runner:
//! `adapter.open_session(role_spec) -> Session`, `Session.turn(prompt) -> TurnResult`.
//! The I/O (spawning the child, the claude-agent-sdk client) belongs to the hosts; the
//! core owns the parts every host must agree on:
//!
//! * [`RoleSpec::from_invocation`] — the role and the `task.assign` invocation fields
//!   (`backend`, `model`, `session`, `system_prompt_ref`, `allowed_tools`,
//!   `llm_base_url`, `budget`), defaults `role = "coder"`, `session = "per-task"`, unknown
//!   keys kept in `extra` (an invocation `role` must agree with the assign's role);
//! * [`TurnResult`] — `{text, usage}` whose usage is always a valid five-component
//!   [`UsageSplit`](crate::wire::UsageSplit);
//! * [`SubprocessSession`] — the subprocess JSONL turn machine (`{"type":"turn"}` in,
//!   progress events and `{"type":"result"}` or `{"type":"error"}` out), with bounded line
//!   reads through the [framer](crate::framing);
//! * [`usage`] — mapping Anthropic- and OpenAI/Codex-shaped usage onto the split, with the
//!   arithmetic and its sources documented.
//!
//! Every error is an [`AdapterError`] with a stable `code()`.

mod error;
mod role;
mod subprocess;
mod turn;
pub mod usage;

pub use error::AdapterError;
pub use role::{RoleSpec, DEFAULT_ROLE, DEFAULT_SESSION, INVOCATION_FIELDS};
pub use subprocess::{
    SubprocessConfig, SubprocessInput, SubprocessOutput, SubprocessSession,
    DEFAULT_TURN_MAX_LINE_BYTES,
};
pub use turn::TurnResult;
pub use usage::{usage_from_anthropic, usage_from_mapping, usage_from_openai};
