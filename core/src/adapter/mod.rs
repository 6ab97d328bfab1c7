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
//! * [`AgentOptions::from_role`] — the options of an agent-SDK session (model, tools,
//!   inline system prompt, the gateway URL as `ANTHROPIC_BASE_URL`, budget limits);
//! * [`AgentTurn`] — the fold of an agent-SDK turn: text blocks joined in order, the
//!   result message's usage (zero without one);
//! * [`TurnResult`] — `{text, usage}` whose usage is always a valid five-component
//!   [`UsageSplit`](crate::wire::UsageSplit);
//! * [`SubprocessSession`] — the subprocess session machine: the child's spawn request
//!   (command, cleared environment), the JSONL turns (`{"type":"turn"}` in, progress
//!   events and `{"type":"result"}` or `{"type":"error"}` out, bounded line reads through
//!   the [framer](crate::framing)), and the stop escalation (close stdin → TERM → KILL →
//!   group KILL, each after a grace period, as actions with deadlines);
//! * [`usage`] — mapping Anthropic- and OpenAI/Codex-shaped usage onto the split, with the
//!   arithmetic and its sources documented, the keys a host reads from SDK usage objects,
//!   and the separately reported thinking count.
//!
//! Every error is an [`AdapterError`] with a stable `code()`, the faults a host meets in
//! its own I/O included ([`AdapterError::host_fault`]).

mod agent;
mod error;
mod role;
mod subprocess;
mod turn;
pub mod usage;

pub use agent::{AgentOptions, AgentTurn, AGENT_BUDGET_KEYS};
pub use error::AdapterError;
pub use role::{
    inline_system_prompt, RoleSpec, DEFAULT_ROLE, DEFAULT_SESSION, INLINE_SYSTEM_PROMPT,
    INVOCATION_FIELDS,
};
pub use subprocess::{
    SignalTarget, SpawnRequest, SpawnSpec, StopSignal, SubprocessConfig, SubprocessInput,
    SubprocessOutput, SubprocessSession, SubprocessState, DEFAULT_GRACE_MS,
    DEFAULT_TURN_MAX_LINE_BYTES, LLM_BASE_URL_ENV,
};
pub use turn::TurnResult;
pub use usage::{
    usage_from_anthropic, usage_from_anthropic_with_thinking, usage_from_mapping,
    usage_from_openai, usage_from_shape, UsageShape,
};
