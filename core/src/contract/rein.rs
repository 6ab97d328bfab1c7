//! The rules of the reference rein (`SubprocessRein`: one JSONL harness child per
//! session, driven through the adapter's subprocess turn machine), sans-IO.
//!
//! A binding's `SubprocessRein` owns the child processes (I/O); everything it decides
//! lives here, so every binding decides it the same way:
//!
//! * [`role_spec`] — the harness role of a profile: `role` = `profile_id`, `model` = the
//!   profile's model, `allowed_tools` = the tool policy's list, `session` =
//!   [`DEFAULT_SESSION`];
//! * [`initial_prompt`] — the turn `start_session` runs first: the rein input `prompt`,
//!   when present and not empty;
//! * [`session_map`] / [`SessionIds`] — the session map `start_session` returns:
//!   `{"session_id": "s-<n>", "sandbox_id": <the sandbox's id>}`, where `n` counts the
//!   rein's sessions from 1 ([`SessionIds`] hands the numbers out, one per
//!   `start_session` call, in call order; a number is never reused, also when that
//!   session's initial turn then failed);
//! * a failed initial turn fails `start_session`: when [`initial_prompt`] gives a
//!   prompt, `start_session` runs that turn before returning; if the turn fails in any
//!   way (a `harness_error` included — unlike a tool-call turn, it is not a result) the
//!   rein closes that session's child, forgets the session and raises, so the gateway
//!   records a failed `start_session` (see the gateway's transition table) and asks for
//!   no `end_session`;
//! * [`ReinSession::tool_call_prompt`] — a tool call's turn prompt: compact JSON
//!   `{"call_id","name","arguments"}` (`call_id` `null` when absent), UTF-8, no ASCII
//!   escaping; each prompt counts one tool call;
//! * [`tool_result_from_text`] / [`tool_result_from_turn_error`] — a turn's text is a
//!   successful result; a `harness_error` is an unsuccessful one (`ok: false`, `error` =
//!   the harness's message); any other turn error is no result at all (the rein raises,
//!   so the gateway records a failed dispatch);
//! * [`ReinSession::record_turn`] / [`ReinSession::record_turn_value`] (a split in JSON
//!   form, checked against the closed `UsageSplit` schema: `invalid_usage` for anything
//!   else, e.g. a negative component or one above 2^53 − 1, and nothing is added) /
//!   [`ReinSession::summary`] — the token split summed
//!   over every turn of the session (including an initial prompt turn), and the summary
//!   `end_session` reports: that split, the session's duration, the profile's model as
//!   `resolved_model`, `tool_event_visibility: complete` and the number of tool calls.
//!
//! Every number saturates at 2^53 − 1, so the summary always parses as its strict model.

use serde_json::{json, Map, Value};

use super::models::{
    ExecutionSummary, HarnessProfile, SandboxHandle, StringMap, ToolCall, ToolEventVisibility,
    ToolResult,
};
use crate::adapter::{AdapterError, RoleSpec, DEFAULT_SESSION};
use crate::wire::{UsageSplit, MAX_SAFE_INTEGER};

/// The adapter error code a harness uses to say "this turn failed" (the one turn error
/// that is a tool result, `ok: false`, instead of a failed dispatch).
pub const HARNESS_ERROR: &str = "harness_error";

/// The harness role a [`HarnessProfile`] runs as (see the [module docs](self)).
pub fn role_spec(profile: &HarnessProfile) -> RoleSpec {
    RoleSpec {
        role: profile.profile_id.clone(),
        backend: None,
        model: Some(profile.model.clone()),
        session: DEFAULT_SESSION.to_owned(),
        system_prompt_ref: None,
        allowed_tools: profile.tool_policy.allowed_tools.clone(),
        llm_base_url: None,
        budget: None,
        extra: Map::new(),
    }
}

/// The rein input key whose value `start_session` runs as a first turn.
pub const PROMPT_INPUT: &str = "prompt";

/// The prompt of the turn `start_session` runs before any tool call: `inputs["prompt"]`
/// when present and not empty, else `None` (no initial turn).
pub fn initial_prompt(inputs: &StringMap) -> Option<&str> {
    inputs
        .get(PROMPT_INPUT)
        .map(String::as_str)
        .filter(|p| !p.is_empty())
}

/// The session map of the rein's `n`-th session in `sandbox`:
/// `{"session_id": "s-<n>", "sandbox_id": …}`.
pub fn session_map(n: u64, sandbox: &SandboxHandle) -> StringMap {
    let mut m = StringMap::new();
    m.insert("session_id".to_owned(), format!("s-{n}"));
    m.insert("sandbox_id".to_owned(), sandbox.sandbox_id.clone());
    m
}

/// The session numbers of one rein: hands out 1, 2, 3, … (one per `start_session`
/// call) and builds each session's map (see the [module docs](self)).
///
/// ```
/// use stapel_runner_protocol::contract::{SandboxHandle, SessionIds};
///
/// let mut ids = SessionIds::new();
/// let first = ids.open(&SandboxHandle::new("sb-1"));
/// assert_eq!(first["session_id"], "s-1");
/// assert_eq!(ids.open(&SandboxHandle::new("sb-1"))["session_id"], "s-2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIds {
    next: u64,
}

impl Default for SessionIds {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionIds {
    /// A rein that has started no session yet (its first session is `s-1`).
    pub const fn new() -> Self {
        Self { next: 1 }
    }

    /// The number the next session gets.
    pub const fn next_number(&self) -> u64 {
        self.next
    }

    /// Take the next number and return that session's map in `sandbox`:
    /// `{"session_id": "s-<n>", "sandbox_id": …}`. The count saturates at `u64::MAX`
    /// (more sessions than one process can start).
    pub fn open(&mut self, sandbox: &SandboxHandle) -> StringMap {
        let n = self.next;
        self.next = n.saturating_add(1);
        session_map(n, sandbox)
    }
}

/// The successful result of a tool-call turn whose text is `text`.
pub fn tool_result_from_text(text: impl Into<String>) -> ToolResult {
    ToolResult::success(Value::String(text.into()))
}

/// The result of a tool-call turn that failed with adapter error `code`: for
/// [`HARNESS_ERROR`], an unsuccessful result carrying `message` (the harness's words);
/// for any other code `None` — no result, the rein raises and the dispatch fails.
pub fn tool_result_from_turn_error(code: &str, message: &str) -> Option<ToolResult> {
    (code == HARNESS_ERROR).then(|| ToolResult {
        ok: false,
        output: Value::Null,
        error: Some(message.to_owned()),
        metadata: Map::new(),
    })
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b).min(MAX_SAFE_INTEGER)
}

/// One session of the reference rein: what it counts between `start_session` and
/// `end_session`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReinSession {
    model: String,
    started_ms: u64,
    tool_calls: u64,
    usage: UsageSplit,
}

impl ReinSession {
    /// A session of `profile` started at host time `now_ms`.
    pub fn new(profile: &HarnessProfile, now_ms: u64) -> Self {
        Self {
            model: profile.model.clone(),
            started_ms: now_ms,
            tool_calls: 0,
            usage: UsageSplit::default(),
        }
    }

    /// The turn prompt for `call` (see the [module docs](self)); counts one tool call.
    pub fn tool_call_prompt(&mut self, call: &ToolCall) -> String {
        self.tool_calls = add(self.tool_calls, 1);
        json!({
            "call_id": call.call_id,
            "name": call.name,
            "arguments": Value::Object(call.arguments.clone()),
        })
        .to_string()
    }

    /// Add one completed turn's token split.
    pub fn record_turn(&mut self, usage: &UsageSplit) {
        let u = &mut self.usage;
        u.cache_read = add(u.cache_read, usage.cache_read);
        u.cache_write = add(u.cache_write, usage.cache_write);
        u.fresh_input = add(u.fresh_input, usage.fresh_input);
        u.output = add(u.output, usage.output);
        u.thinking = add(u.thinking, usage.thinking);
    }

    /// Add one completed turn's token split given in JSON form: exactly the five
    /// components, each an integer in 0..=2^53 − 1 (the closed `UsageSplit` schema, the
    /// same check as everywhere else a split is read).
    ///
    /// # Errors
    /// `invalid_usage` (no line number) for anything else; nothing is added.
    pub fn record_turn_value(&mut self, usage: &Value) -> Result<(), AdapterError> {
        let split = UsageSplit::from_value(&crate::json::Value::from(usage)).map_err(|e| {
            AdapterError::InvalidUsage {
                line_number: None,
                reason: e.to_string(),
            }
        })?;
        self.record_turn(&split);
        Ok(())
    }

    /// Tool calls counted so far.
    pub fn tool_calls(&self) -> u64 {
        self.tool_calls
    }

    /// The token split summed so far.
    pub fn usage(&self) -> UsageSplit {
        self.usage
    }

    /// The summary `end_session` reports at host time `now_ms`.
    pub fn summary(&self, now_ms: u64) -> ExecutionSummary {
        ExecutionSummary {
            tokens: Some(self.usage),
            duration_ms: Some(now_ms.saturating_sub(self.started_ms).min(MAX_SAFE_INTEGER)),
            resolved_model: Some(self.model.clone()),
            commit: None,
            artifacts: None,
            tool_event_visibility: ToolEventVisibility::Complete,
            tool_event_count: Some(self.tool_calls),
            metadata: Map::new(),
        }
    }
}
