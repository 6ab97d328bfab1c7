//! The gateway lifecycle machine: one governed execution, sans-IO.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::error::{ContractError, GatewayError};
use super::evidence::{
    ExecutionEvidence, FailureStage, GatewayResult, Outcome, SessionEndStatus, TeardownStatus,
    ToolCallCounts,
};
use super::fields::{contract_error, string_values, type_name, Obj};
use super::models::{
    string_map, ExecutionRequest, ExecutionSummary, HarnessProfile, SandboxHandle, StringMap,
    ToolCall, ToolResult, CONTRACT_VERSION,
};
use super::resolution::{resolve, Catalog, Resolved};
use super::safety::IdentifierKind;

/// Default for [`GatewayConfig::max_tool_calls`].
pub const DEFAULT_MAX_TOOL_CALLS: usize = 256;

/// Default for [`GatewayConfig::max_evidence_refs`].
pub const DEFAULT_MAX_EVIDENCE_REFS: usize = 64;

/// Default for [`GatewayConfig::max_evidence_artifacts`].
pub const DEFAULT_MAX_EVIDENCE_ARTIFACTS: usize = 64;

/// The `failure_code` of an aborted execution.
pub const ABORTED: &str = "aborted";

/// The `failure_reasons` entry (with `failure_code` [`ABORTED`]) when the answer to
/// `create_sandbox` is not a valid [`SandboxHandle`]: the gateway cannot name the sandbox,
/// so it gives the stage up and asks the host to discard whatever the sand-boxer returned
/// ([`GatewayAction::DiscardSandbox`]).
pub const INVALID_SANDBOX_HANDLE: &str = "invalid_sandbox_handle";

/// Longest abort code, in bytes.
pub const MAX_ABORT_CODE_LEN: usize = 64;

/// `true` when `code` is a valid abort code: `[a-z][a-z0-9_]*`, at most
/// [`MAX_ABORT_CODE_LEN`] bytes.
pub fn is_abort_code(code: &str) -> bool {
    let mut chars = code.chars();
    code.len() <= MAX_ABORT_CODE_LEN
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Configuration of a [`Gateway`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// Profiles and rein descriptors to resolve against.
    pub catalog: Catalog,
    /// Most tool calls one `execute` may carry. Default [`DEFAULT_MAX_TOOL_CALLS`] (256).
    /// More is rejected with `too_many_tool_calls` before anything happens.
    pub max_tool_calls: usize,
    /// Most entries evidence keeps of each of the request's `goal_refs` and
    /// `resource_envelope_refs`. Default [`DEFAULT_MAX_EVIDENCE_REFS`] (64). Entries
    /// beyond are dropped and one final `[truncated:N]` entry says how many.
    pub max_evidence_refs: usize,
    /// Most entries evidence keeps of the summary's `artifacts`. Default
    /// [`DEFAULT_MAX_EVIDENCE_ARTIFACTS`] (64); truncated like `max_evidence_refs`.
    pub max_evidence_artifacts: usize,
}

impl GatewayConfig {
    /// A configuration with `catalog` and the default bounds.
    pub fn new(catalog: Catalog) -> Self {
        Self {
            catalog,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            max_evidence_refs: DEFAULT_MAX_EVIDENCE_REFS,
            max_evidence_artifacts: DEFAULT_MAX_EVIDENCE_ARTIFACTS,
        }
    }

    /// The keys of the JSON form: `catalog` (a [`Catalog`], parsed by the caller with
    /// [`Catalog::from_value`], whose errors are contract errors) and the bounds.
    pub const KEYS: [&'static str; 4] = [
        "catalog",
        "max_tool_calls",
        "max_evidence_refs",
        "max_evidence_artifacts",
    ];

    /// A configuration with `catalog` and the bounds present in `value` (the other keys
    /// keep their defaults; `value`'s own `catalog` key is allowed and not read here),
    /// read by the crate's one config reader ([`crate::config`]).
    ///
    /// ```
    /// use stapel_runner_protocol::contract::{Catalog, GatewayConfig};
    ///
    /// let v = serde_json::json!({"catalog": {}, "max_tool_calls": 2});
    /// let catalog = Catalog::from_value(&v["catalog"]).unwrap();
    /// assert_eq!(GatewayConfig::from_value(catalog.clone(), &v).unwrap().max_tool_calls, 2);
    /// let e = GatewayConfig::from_value(catalog, &serde_json::json!({"max": 1})).unwrap_err();
    /// assert_eq!((e.code(), e.key()), ("unknown_key", "max"));
    /// ```
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(catalog: Catalog, value: &Value) -> Result<Self, crate::config::ConfigError> {
        let r = crate::config::ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::new(catalog);
        Ok(Self {
            max_tool_calls: r.usize("max_tool_calls")?.unwrap_or(d.max_tool_calls),
            max_evidence_refs: r.usize("max_evidence_refs")?.unwrap_or(d.max_evidence_refs),
            max_evidence_artifacts: r
                .usize("max_evidence_artifacts")?
                .unwrap_or(d.max_evidence_artifacts),
            catalog: d.catalog,
        })
    }
}

/// What the host tells the gateway: the request that starts the execution, then the
/// outcome of each action it performed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GatewayInput {
    /// Start the execution. `inputs` go to the rein's `start_session`; `tool_calls` are
    /// dispatched in order.
    Execute {
        /// The consumer's request.
        request: ExecutionRequest,
        /// Rein inputs (content: never in evidence).
        inputs: StringMap,
        /// Calls to dispatch, in order (at most [`GatewayConfig::max_tool_calls`]).
        tool_calls: Vec<ToolCall>,
    },
    /// Answer to [`GatewayAction::CreateSandbox`]: the sandbox exists.
    SandboxCreated {
        /// The sand-boxer's handle.
        sandbox: SandboxHandle,
    },
    /// Answer to [`GatewayAction::CreateSandbox`]: no sandbox was created.
    SandboxCreateFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// Answer to [`GatewayAction::StartSession`]: the rein's session map.
    SessionStarted {
        /// Rein-local session state, passed back verbatim (never in evidence).
        session: StringMap,
    },
    /// Answer to [`GatewayAction::StartSession`]: the rein could not start.
    SessionStartFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// Answer to [`GatewayAction::DispatchTool`]: the rein's result.
    ToolDispatched {
        /// The result; `ok: false` fails the execution stage.
        result: ToolResult,
    },
    /// Answer to [`GatewayAction::DispatchTool`]: the call could not be dispatched (the
    /// rein raised, or its result could not be parsed strictly).
    ToolDispatchFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// Answer to [`GatewayAction::EndSession`]: the rein's normalized facts.
    SessionEnded {
        /// The summary.
        summary: ExecutionSummary,
    },
    /// Answer to [`GatewayAction::EndSession`]: the rein could not end its session.
    SessionEndFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// Answer to [`GatewayAction::DestroySandbox`]: destroyed.
    SandboxDestroyed,
    /// Answer to [`GatewayAction::DestroySandbox`]: destruction failed.
    SandboxDestroyFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// The host performed the outstanding action and its callback returned `value`. The
    /// gateway reads it as the action's answer model — `create_sandbox`: a
    /// [`SandboxHandle`]; `start_session`: a session map (string → string object);
    /// `dispatch_tool`: a [`ToolResult`]; `end_session`: an [`ExecutionSummary`];
    /// `destroy_sandbox` / `discard_sandbox`: ignored. A value that is not a valid model
    /// is not an error of `handle_input`: it fails the stage exactly like
    /// [`GatewayInput::AnswerInvalid`] with the model error's text as `message`.
    Answer {
        /// The callback's return value as JSON (`null` for callbacks returning nothing).
        value: Value,
    },
    /// The host performed the outstanding action but could not even turn the callback's
    /// return value into JSON (a non-finite number, a non-string key, an object JSON
    /// cannot hold). Fails the stage: `create_sandbox` → the handle is given up
    /// ([`INVALID_SANDBOX_HANDLE`], then [`GatewayAction::DiscardSandbox`]); every other
    /// action → as its `*_failed` input.
    AnswerInvalid {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// The host's callback for the outstanding action raised (or was interrupted). The
    /// same as the action's `*_failed` input, so a binding needs no action → input
    /// table. After any failure the gateway emits only cleanup actions (`end_session` of
    /// a started session, `destroy_sandbox` / `discard_sandbox`), so a host that was
    /// interrupted can keep performing actions until the result and then re-raise.
    ActionFailed {
        /// Optional explanation for the direct caller (`tool_error`); never in evidence.
        message: Option<String>,
    },
    /// The host gives up on the outstanding action (a timeout, a cancellation, a
    /// shutdown). Valid whenever an action is outstanding, i.e. after `execute` and
    /// before the result; see [`Gateway`] for what happens in each stage. `code` is the
    /// host's reason as a stable code (`[a-z][a-z0-9_]*`, at most 64 bytes, e.g.
    /// `cancelled`, `deadline_exceeded`); it becomes the evidence's `failure_reasons`.
    Abort {
        /// The host's reason code.
        code: String,
    },
}

impl GatewayInput {
    /// The input's `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            GatewayInput::Execute { .. } => "execute",
            GatewayInput::SandboxCreated { .. } => "sandbox_created",
            GatewayInput::SandboxCreateFailed { .. } => "sandbox_create_failed",
            GatewayInput::SessionStarted { .. } => "session_started",
            GatewayInput::SessionStartFailed { .. } => "session_start_failed",
            GatewayInput::ToolDispatched { .. } => "tool_dispatched",
            GatewayInput::ToolDispatchFailed { .. } => "tool_dispatch_failed",
            GatewayInput::SessionEnded { .. } => "session_ended",
            GatewayInput::SessionEndFailed { .. } => "session_end_failed",
            GatewayInput::SandboxDestroyed => "sandbox_destroyed",
            GatewayInput::SandboxDestroyFailed { .. } => "sandbox_destroy_failed",
            GatewayInput::Answer { .. } => "answer",
            GatewayInput::AnswerInvalid { .. } => "answer_invalid",
            GatewayInput::ActionFailed { .. } => "action_failed",
            GatewayInput::Abort { .. } => "abort",
        }
    }

    /// Parse the JSON form `{"type": "<type_name>", …}`: `execute` takes `request`
    /// (required), `inputs` (string map) and `tool_calls` (array); `sandbox_created` takes
    /// `sandbox`; `session_started` takes `session` (string map); `tool_dispatched` takes
    /// `result`; `session_ended` takes `summary`; the `*_failed` inputs take an optional
    /// `message` (string or `null`); `abort` takes `code` (required, see
    /// [`GatewayInput::Abort`]); `sandbox_destroyed` takes nothing; `answer` takes
    /// `value` (any JSON, default `null`); `answer_invalid` and `action_failed` take an
    /// optional `message`. Unknown keys are rejected.
    ///
    /// # Errors
    /// [`GatewayError::InvalidInput`] for a bad envelope, [`GatewayError::Model`] for a bad
    /// embedded model.
    pub fn from_value(value: &Value) -> Result<Self, GatewayError> {
        let invalid = |reason: String| GatewayError::InvalidInput { reason };
        let Value::Object(map) = value else {
            return Err(invalid(format!(
                "expected an object, found {}",
                type_name(value)
            )));
        };
        let ty = map
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("`type` must be a string".into()))?;
        let fields: &[&str] = match ty {
            "execute" => &["type", "request", "inputs", "tool_calls"],
            "sandbox_created" => &["type", "sandbox"],
            "session_started" => &["type", "session"],
            "tool_dispatched" => &["type", "result"],
            "session_ended" => &["type", "summary"],
            "sandbox_create_failed"
            | "session_start_failed"
            | "tool_dispatch_failed"
            | "session_end_failed"
            | "sandbox_destroy_failed"
            | "answer_invalid"
            | "action_failed" => &["type", "message"],
            "answer" => &["type", "value"],
            "abort" => &["type", "code"],
            "sandbox_destroyed" => &["type"],
            other => return Err(invalid(format!("unknown input type {other:?}"))),
        };
        if let Some(k) = map.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(invalid(format!("unknown key {k:?} for input {ty:?}")));
        }
        let o = Obj::open("GatewayInput", "", value, fields)?;
        let strings = |key: &str| string_map(&o, key);
        let message = || match map.get("message") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(m)) => Ok(Some(m.clone())),
            Some(other) => Err(invalid(format!(
                "`message` must be a string, found {}",
                type_name(other)
            ))),
        };
        Ok(match ty {
            "execute" => {
                let request = o.nested("request", ExecutionRequest::parse_at)?;
                let tool_calls = match o.get("tool_calls") {
                    None => Vec::new(),
                    Some(Value::Array(items)) => {
                        crate::fields::each(items, "tool_calls", ToolCall::parse_at)?
                    }
                    Some(other) => {
                        return Err(invalid(format!(
                            "`tool_calls` must be an array, found {}",
                            type_name(other)
                        )))
                    }
                };
                GatewayInput::Execute {
                    request,
                    inputs: strings("inputs")?,
                    tool_calls,
                }
            }
            "sandbox_created" => GatewayInput::SandboxCreated {
                sandbox: o.nested("sandbox", SandboxHandle::parse_at)?,
            },
            "session_started" => GatewayInput::SessionStarted {
                session: strings("session")?,
            },
            "tool_dispatched" => GatewayInput::ToolDispatched {
                result: o.nested("result", ToolResult::parse_at)?,
            },
            "session_ended" => GatewayInput::SessionEnded {
                summary: o.nested("summary", ExecutionSummary::parse_at)?,
            },
            "sandbox_create_failed" => GatewayInput::SandboxCreateFailed {
                message: message()?,
            },
            "session_start_failed" => GatewayInput::SessionStartFailed {
                message: message()?,
            },
            "tool_dispatch_failed" => GatewayInput::ToolDispatchFailed {
                message: message()?,
            },
            "session_end_failed" => GatewayInput::SessionEndFailed {
                message: message()?,
            },
            "sandbox_destroy_failed" => GatewayInput::SandboxDestroyFailed {
                message: message()?,
            },
            "answer" => GatewayInput::Answer {
                value: map.get("value").cloned().unwrap_or(Value::Null),
            },
            "answer_invalid" => GatewayInput::AnswerInvalid {
                message: message()?,
            },
            "action_failed" => GatewayInput::ActionFailed {
                message: message()?,
            },
            "abort" => match map.get("code") {
                Some(Value::String(code)) if is_abort_code(code) => {
                    GatewayInput::Abort { code: code.clone() }
                }
                _ => {
                    return Err(invalid(
                        "`code` must be a string matching [a-z][a-z0-9_]* (at most 64 bytes)"
                            .into(),
                    ))
                }
            },
            _ => GatewayInput::SandboxDestroyed,
        })
    }
}

/// Something the host must do, then report back as a [`GatewayInput`]: the action's own
/// answer inputs, or the generic ones every action accepts (`answer` with the callback's
/// return value, `answer_invalid`, `action_failed`, `abort`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GatewayAction {
    /// Ask the sand-boxer for a sandbox. Report `sandbox_created` or
    /// `sandbox_create_failed`.
    CreateSandbox {
        /// The resolved profile's id.
        harness_profile_ref: String,
        /// The sand-boxer template of the profile.
        sandbox_profile: String,
        /// The request's repository.
        repository: String,
    },
    /// Call the rein's `start_session(profile, inputs, sandbox)`. Report
    /// `session_started` or `session_start_failed`.
    StartSession {
        /// The resolved profile.
        profile: Box<HarnessProfile>,
        /// The request's rein inputs.
        inputs: StringMap,
        /// The sandbox.
        sandbox: SandboxHandle,
    },
    /// Call the rein's `dispatch_tool(session, call)`. Report `tool_dispatched` or
    /// `tool_dispatch_failed`.
    DispatchTool {
        /// The session map from `session_started`.
        session: StringMap,
        /// The call (its tool is listed by the profile's policy).
        call: ToolCall,
    },
    /// Call the rein's `end_session(session)`. Report `session_ended` or
    /// `session_end_failed`.
    EndSession {
        /// The session map.
        session: StringMap,
    },
    /// Ask the sand-boxer to destroy the sandbox. Report `sandbox_destroyed` or
    /// `sandbox_destroy_failed`.
    DestroySandbox {
        /// The sandbox to destroy.
        sandbox: SandboxHandle,
    },
    /// The answer to `create_sandbox` was not a valid handle
    /// ([`INVALID_SANDBOX_HANDLE`]): pass whatever the sand-boxer returned to its
    /// `destroy`, best effort. Every answer (also a failure) leads to the result, whose
    /// evidence keeps `teardown: abandoned` — the gateway could not name the sandbox.
    DiscardSandbox,
}

/// One item drained from [`Gateway::poll_output`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GatewayOutput {
    /// Perform this action, then report its outcome.
    Action(GatewayAction),
    /// The execution is over. Emitted exactly once.
    Result(Box<GatewayResult>),
}

fn map_json(m: &StringMap) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

impl GatewayOutput {
    /// The JSON form: `{"type": "create_sandbox" | "start_session" | "dispatch_tool" |
    /// "end_session" | "destroy_sandbox" | "discard_sandbox" | "result", …}` with the action's
    /// fields, or `result` holding the [`GatewayResult`].
    pub fn to_value(&self) -> Value {
        match self {
            GatewayOutput::Action(GatewayAction::CreateSandbox {
                harness_profile_ref,
                sandbox_profile,
                repository,
            }) => json!({
                "type": "create_sandbox",
                "harness_profile_ref": harness_profile_ref,
                "sandbox_profile": sandbox_profile,
                "repository": repository,
            }),
            GatewayOutput::Action(GatewayAction::StartSession {
                profile,
                inputs,
                sandbox,
            }) => json!({
                "type": "start_session",
                "profile": profile.to_value(),
                "inputs": map_json(inputs),
                "sandbox": sandbox.to_value(),
            }),
            GatewayOutput::Action(GatewayAction::DispatchTool { session, call }) => json!({
                "type": "dispatch_tool",
                "session": map_json(session),
                "call": call.to_value(),
            }),
            GatewayOutput::Action(GatewayAction::EndSession { session }) => json!({
                "type": "end_session",
                "session": map_json(session),
            }),
            GatewayOutput::Action(GatewayAction::DestroySandbox { sandbox }) => json!({
                "type": "destroy_sandbox",
                "sandbox": sandbox.to_value(),
            }),
            GatewayOutput::Action(GatewayAction::DiscardSandbox) => {
                json!({"type": "discard_sandbox"})
            }
            GatewayOutput::Result(r) => json!({"type": "result", "result": r.to_value()}),
        }
    }
}

/// Where a [`Gateway`] is in its lifecycle: the state column of the transition table on
/// [`Gateway`]. Each stage but `Idle` and `Finished` has exactly one outstanding action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GatewayStage {
    /// Waiting for `execute`.
    Idle,
    /// `create_sandbox` is outstanding.
    CreatingSandbox,
    /// `start_session` is outstanding.
    StartingSession,
    /// `dispatch_tool` is outstanding.
    Dispatching,
    /// `end_session` is outstanding.
    EndingSession,
    /// `destroy_sandbox` is outstanding.
    DestroyingSandbox,
    /// `discard_sandbox` is outstanding (the sand-boxer's answer was not a valid handle).
    DiscardingSandbox,
    /// The result was emitted; every input is `unexpected_input`.
    Finished,
}

impl GatewayStage {
    /// The stage's snake_case name (`idle`, `creating_sandbox`, `starting_session`,
    /// `dispatching`, `ending_session`, `destroying_sandbox`, `discarding_sandbox`,
    /// `finished`).
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayStage::Idle => "idle",
            GatewayStage::CreatingSandbox => "creating_sandbox",
            GatewayStage::StartingSession => "starting_session",
            GatewayStage::Dispatching => "dispatching",
            GatewayStage::EndingSession => "ending_session",
            GatewayStage::DestroyingSandbox => "destroying_sandbox",
            GatewayStage::DiscardingSandbox => "discarding_sandbox",
            GatewayStage::Finished => "finished",
        }
    }

    /// What the stage waits for, as named by [`GatewayError::UnexpectedInput`].
    fn waiting_for(self) -> &'static str {
        match self {
            GatewayStage::Idle => "execute",
            GatewayStage::CreatingSandbox => "sandbox_create",
            GatewayStage::StartingSession => "session_start",
            GatewayStage::Dispatching => "tool_dispatch",
            GatewayStage::EndingSession => "session_end",
            GatewayStage::DestroyingSandbox => "sandbox_destroy",
            GatewayStage::DiscardingSandbox => "sandbox_discard",
            GatewayStage::Finished => "nothing",
        }
    }
}

/// What one execution accumulates from `execute` to the result.
#[derive(Debug, Clone)]
struct Record {
    started_ms: u64,
    evidence: ExecutionEvidence,
    /// The first failure: the one evidence names.
    failure: Option<(FailureStage, &'static str)>,
    /// The first caller-only failure message.
    failure_message: Option<String>,
    /// The last reported tool result (cleared when a later call has no result).
    last_result: Option<ToolResult>,
}

impl Record {
    /// Record a failure; `true` when it is the first (the one evidence names).
    fn fail(&mut self, stage: FailureStage, code: &'static str) -> bool {
        if self.failure.is_none() {
            self.failure = Some((stage, code));
            true
        } else {
            false
        }
    }

    /// An abort (or an invalid handle) at `stage`: `aborted`, with `reason` as the only
    /// `failure_reasons` entry when it is the first failure.
    fn abort(&mut self, stage: FailureStage, reason: String) {
        if self.fail(stage, ABORTED) {
            self.evidence.failure_reasons = vec![reason];
        }
    }

    /// Keep the first caller-only failure message.
    fn note(&mut self, message: Option<String>) {
        if self.failure_message.is_none() {
            self.failure_message = message;
        }
    }

    fn counts(&mut self) -> &mut ToolCallCounts {
        &mut self.evidence.tool_calls
    }

    fn into_result(mut self, now_ms: u64) -> GatewayResult {
        let mut evidence = self.evidence;
        evidence.duration_ms = now_ms.saturating_sub(self.started_ms);
        evidence.clamp_integers();
        match self.failure {
            None => evidence.outcome = Outcome::Succeeded,
            Some((stage, code)) => {
                evidence.outcome = if stage == FailureStage::Resolution {
                    Outcome::Refused
                } else {
                    Outcome::Failed
                };
                evidence.failure_stage = Some(stage);
                evidence.failure_code = Some(code.to_owned());
            }
        }
        let (tool_output, tool_error) = match self.last_result.take() {
            Some(r) => (r.output, r.error),
            None => (Value::Null, None),
        };
        GatewayResult {
            ok: evidence.outcome == Outcome::Succeeded,
            evidence,
            tool_output,
            // Error details reach the caller, and hosts log them: secrets in them are
            // redacted (the key stays readable).
            tool_error: tool_error
                .or(self.failure_message)
                .map(|e| super::safety::redact_secrets(&e).0),
        }
    }
}

/// A resolved execution: its record, the resolution, and the calls not yet dispatched.
#[derive(Debug, Clone)]
struct Run {
    record: Record,
    resolved: Resolved,
    calls: VecDeque<ToolCall>,
}

/// The lifecycle state with exactly the data each stage has (no session before it was
/// started, no sandbox before it was created).
#[derive(Debug, Clone)]
enum State {
    Idle,
    CreatingSandbox {
        run: Box<Run>,
        inputs: StringMap,
    },
    StartingSession {
        run: Box<Run>,
        sandbox: SandboxHandle,
    },
    Dispatching {
        run: Box<Run>,
        sandbox: SandboxHandle,
        session: StringMap,
    },
    EndingSession {
        run: Box<Run>,
        sandbox: SandboxHandle,
    },
    DestroyingSandbox {
        run: Box<Run>,
    },
    DiscardingSandbox {
        run: Box<Run>,
    },
    Finished,
}

impl State {
    fn stage(&self) -> GatewayStage {
        match self {
            State::Idle => GatewayStage::Idle,
            State::CreatingSandbox { .. } => GatewayStage::CreatingSandbox,
            State::StartingSession { .. } => GatewayStage::StartingSession,
            State::Dispatching { .. } => GatewayStage::Dispatching,
            State::EndingSession { .. } => GatewayStage::EndingSession,
            State::DestroyingSandbox { .. } => GatewayStage::DestroyingSandbox,
            State::DiscardingSandbox { .. } => GatewayStage::DiscardingSandbox,
            State::Finished => GatewayStage::Finished,
        }
    }
}

/// An input normalized against the outstanding action: which answer it is.
enum Answer {
    Created(SandboxHandle),
    Started(StringMap),
    Dispatched(ToolResult),
    Ended(Box<ExecutionSummary>),
    Destroyed,
    /// The action failed (`*_failed`, `action_failed`, or an invalid answer).
    Failed(Option<String>),
    /// The answer to `create_sandbox` is not a handle the gateway can name.
    InvalidHandle(Option<String>),
    Abort(String),
}

/// A session map answered as a bare value: a JSON object of strings.
fn session_map(value: &Value) -> Result<StringMap, ContractError> {
    let map = crate::fields::object(value)
        .and_then(|map| string_values(map).map(|()| map))
        .map_err(|e| contract_error("SessionMap", "", &e))?;
    Ok(map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect())
}

/// Which answer `input` is while `stage` is outstanding; `None` when it answers nothing
/// outstanding (`unexpected_input`). `execute` is handled before.
fn answer_of(stage: GatewayStage, input: GatewayInput) -> Option<Answer> {
    use GatewayInput as I;
    use GatewayStage as S;
    let invalid = |e: ContractError| Answer::Failed(Some(e.to_string()));
    Some(match (stage, input) {
        (S::Idle | S::Finished, _) | (_, I::Execute { .. }) => return None,
        (_, I::Abort { code }) => Answer::Abort(code),
        (_, I::ActionFailed { message }) => Answer::Failed(message),
        (S::CreatingSandbox, I::AnswerInvalid { message }) => Answer::InvalidHandle(message),
        (_, I::AnswerInvalid { message }) => Answer::Failed(message),
        (S::CreatingSandbox, I::SandboxCreated { sandbox }) => Answer::Created(sandbox),
        (S::CreatingSandbox, I::SandboxCreateFailed { message }) => Answer::Failed(message),
        (S::CreatingSandbox, I::Answer { value }) => match SandboxHandle::from_value(&value) {
            Ok(sandbox) => Answer::Created(sandbox),
            Err(e) => Answer::InvalidHandle(Some(e.to_string())),
        },
        (S::StartingSession, I::SessionStarted { session }) => Answer::Started(session),
        (S::StartingSession, I::SessionStartFailed { message }) => Answer::Failed(message),
        (S::StartingSession, I::Answer { value }) => {
            session_map(&value).map_or_else(invalid, Answer::Started)
        }
        (S::Dispatching, I::ToolDispatched { result }) => Answer::Dispatched(result),
        (S::Dispatching, I::ToolDispatchFailed { message }) => Answer::Failed(message),
        (S::Dispatching, I::Answer { value }) => {
            ToolResult::from_value(&value).map_or_else(invalid, Answer::Dispatched)
        }
        (S::EndingSession, I::SessionEnded { summary }) => Answer::Ended(Box::new(summary)),
        (S::EndingSession, I::SessionEndFailed { message }) => Answer::Failed(message),
        (S::EndingSession, I::Answer { value }) => ExecutionSummary::from_value(&value)
            .map_or_else(invalid, |s| Answer::Ended(Box::new(s))),
        (S::DestroyingSandbox | S::DiscardingSandbox, I::SandboxDestroyed | I::Answer { .. }) => {
            Answer::Destroyed
        }
        (S::DestroyingSandbox | S::DiscardingSandbox, I::SandboxDestroyFailed { message }) => {
            Answer::Failed(message)
        }
        _ => return None,
    })
}

/// The gateway lifecycle of seed 001 for one governed execution, as a sans-IO state
/// machine.
///
/// # Call order
///
/// 1. Create one `Gateway` per execution with [`Gateway::new`].
/// 2. Call [`handle_input`](Self::handle_input)`(now_ms, GatewayInput::Execute{..})`.
/// 3. Drain [`poll_output`](Self::poll_output) until it returns `None`. Each
///    [`GatewayOutput::Action`] is work for the host; at most one action is outstanding
///    at a time. [`poll_timeout`](Self::poll_timeout) is always `None`: the gateway has
///    no timers (a host deadline is an [`GatewayInput::Abort`]).
/// 4. Perform the action and report its outcome with `handle_input(now_ms, …)`, then
///    drain again. A host that calls user code reports the callback's return value as
///    `answer` (the gateway validates it), a value it cannot turn into JSON as
///    `answer_invalid`, and a callback that raised as `action_failed` — no binding
///    needs its own action → input table. The typed inputs (`sandbox_created`,
///    `session_started`, `tool_dispatched`, `session_ended`, `sandbox_destroyed` and the
///    matching `*_failed`) are the same answers, already parsed.
/// 5. Repeat until a [`GatewayOutput::Result`] is drained. After it, every input is
///    rejected with `unexpected_input` and `poll_output` returns `None`.
///
/// `now_ms` is the host's monotonic clock; the gateway never reads one. The evidence's
/// `duration_ms` is the `now_ms` of the input that produced the result minus the `now_ms`
/// of `execute` (saturating at 0, and at 2^53 − 1 like every evidence integer).
///
/// # Transitions
///
/// The whole machine. "ok" is the stage's successful answer (its typed input, or
/// `answer` with a valid model); "failed" is its `*_failed` input, `action_failed`, or
/// `answer` / `answer_invalid` with an invalid value (the model error's text becomes the
/// `message`); "abort" is [`GatewayInput::Abort`]. Any input not listed for the current
/// [`GatewayStage`] is `unexpected_input` and changes nothing.
///
/// | stage | input | emits | next stage | evidence |
/// |---|---|---|---|---|
/// | `idle` | `execute`, refused | Result | `finished` | `refused`, stage `resolution`, code = refusal kind, reasons = refusal reasons |
/// | `idle` | `execute`, resolved | CreateSandbox | `creating_sandbox` | |
/// | `creating_sandbox` | ok | StartSession | `starting_session` | `sandbox_id` |
/// | `creating_sandbox` | failed | Result | `finished` | `sandbox_create` / `sandbox_create_failed`; `teardown: not_needed` |
/// | `creating_sandbox` | `answer` with an invalid handle, `answer_invalid` | DiscardSandbox | `discarding_sandbox` | `sandbox_create` / `aborted`, reasons `[invalid_sandbox_handle]`; `teardown: abandoned` |
/// | `creating_sandbox` | abort | Result | `finished` | `sandbox_create` / `aborted`; `teardown: abandoned` |
/// | `starting_session` | ok | (next call) | see "next call" | |
/// | `starting_session` | failed | DestroySandbox | `destroying_sandbox` | `session_start` / `session_start_failed` |
/// | `starting_session` | abort | DestroySandbox | `destroying_sandbox` | `session_start` / `aborted` |
/// | `dispatching` | ok, `ok: true` | (next call) | see "next call" | `succeeded` + 1 |
/// | `dispatching` | ok, `ok: false` | EndSession | `ending_session` | `execution` / `rein_reported_failure`; `unsuccessful` + 1; rest `skipped` |
/// | `dispatching` | failed | EndSession | `ending_session` | `execution` / `tool_dispatch_failed`; `dispatch_failed` + 1; rest `skipped` |
/// | `dispatching` | abort | EndSession | `ending_session` | `execution` / `aborted`; `abandoned` + 1; rest `skipped` |
/// | `ending_session` | ok | DestroySandbox | `destroying_sandbox` | `session_end: ended`; the summary's facts |
/// | `ending_session` | failed | DestroySandbox | `destroying_sandbox` | `session_end` / `session_end_failed`; `session_end: failed` |
/// | `ending_session` | abort | DestroySandbox | `destroying_sandbox` | `session_end` / `aborted`; `session_end: abandoned` |
/// | `destroying_sandbox` | ok (any `answer` value) | Result | `finished` | `teardown: destroyed` |
/// | `destroying_sandbox` | failed | Result | `finished` | `teardown` / `teardown_failed`; `teardown: failed` |
/// | `destroying_sandbox` | abort | Result | `finished` | `teardown` / `aborted`; `teardown: abandoned` |
/// | `discarding_sandbox` | ok, failed or abort | Result | `finished` | unchanged (`teardown: abandoned`) |
/// | `finished` | anything | — | `finished` | (`unexpected_input`) |
///
/// "Next call": the next tool call is dispatched (DispatchTool, `dispatching`;
/// `dispatched` + 1) when the profile's policy lists its tool; a call it does not list is
/// not dispatched (`execution` / `tool_not_allowed`, `denied` + 1, the rest `skipped`,
/// EndSession, `ending_session`); with no call left the session is ended (EndSession,
/// `ending_session`).
///
/// Only the first failure names `failure_stage` / `failure_code` / `failure_reasons`;
/// later failures show in `session_end` and `teardown`. Consequences of the table:
///
/// * Resolution happens before any sandbox exists; a refusal creates nothing.
/// * Once a valid sandbox handle exists, `DestroySandbox` is emitted on every path,
///   exactly once; an invalid one gets `DiscardSandbox` instead.
/// * After any failure only cleanup follows (EndSession of a started session, then
///   DestroySandbox / DiscardSandbox): a host interrupted inside a callback reports
///   `action_failed`, keeps performing actions until the result, then re-raises.
/// * A call that produced no result (denied, failed, abandoned) leaves the direct caller
///   no tool output, so an earlier call's output is never passed off as it.
/// * A `*_failed` / `action_failed` / `answer_invalid` `message` (or an invalid answer's
///   model error) is for the direct caller: the first one becomes `tool_error` unless a
///   tool result's error text is there. It never reaches evidence.
/// * An abort always follows a successful resolution, so its outcome is `failed`, never
///   `refused`; queued, unperformed actions are discarded; a host can finish with at
///   most three aborts. `abort` before `execute` or after the result is
///   `unexpected_input`.
///
/// # Errors
///
/// Misuse by the host ([`GatewayError`]) leaves the state unchanged.
#[derive(Debug, Clone)]
pub struct Gateway {
    config: GatewayConfig,
    state: State,
    pending: VecDeque<GatewayOutput>,
}

impl Gateway {
    /// A gateway waiting for [`GatewayInput::Execute`].
    pub fn new(config: GatewayConfig) -> Self {
        Self {
            config,
            state: State::Idle,
            pending: VecDeque::new(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// The current stage (the state column of the transition table).
    pub fn stage(&self) -> GatewayStage {
        self.state.stage()
    }

    /// `true` once the result has been produced.
    pub fn is_finished(&self) -> bool {
        self.stage() == GatewayStage::Finished
    }

    /// Feed one input at host time `now_ms`. See the [type docs](Self) for the order.
    ///
    /// # Errors
    /// [`GatewayError::UnexpectedInput`] when the input does not answer the outstanding
    /// action; [`GatewayError::TooManyToolCalls`] when `execute` exceeds the bound;
    /// [`GatewayError::InvalidInput`] for an abort code that is not
    /// `[a-z][a-z0-9_]*` of at most 64 bytes. The state is unchanged on error.
    pub fn handle_input(&mut self, now_ms: u64, input: GatewayInput) -> Result<(), GatewayError> {
        let stage = self.stage();
        let unexpected = GatewayError::UnexpectedInput {
            expected: stage.waiting_for(),
            got: input.type_name(),
        };
        let input = match input {
            GatewayInput::Execute {
                request,
                inputs,
                tool_calls,
            } if stage == GatewayStage::Idle => {
                if tool_calls.len() > self.config.max_tool_calls {
                    return Err(GatewayError::TooManyToolCalls {
                        count: tool_calls.len(),
                        max: self.config.max_tool_calls,
                    });
                }
                self.state = self.execute(now_ms, request, inputs, tool_calls);
                return Ok(());
            }
            GatewayInput::Abort { code }
                if !matches!(stage, GatewayStage::Idle | GatewayStage::Finished)
                    && !is_abort_code(&code) =>
            {
                return Err(GatewayError::InvalidInput {
                    reason: "abort code must match [a-z][a-z0-9_]* (at most 64 bytes)".into(),
                });
            }
            other => other,
        };
        let answer = answer_of(stage, input).ok_or(unexpected)?;
        if matches!(answer, Answer::Abort(_)) {
            self.pending.clear();
        }
        let state = std::mem::replace(&mut self.state, State::Finished);
        self.state = self.step(now_ms, state, answer);
        Ok(())
    }

    /// The next output, in order; `None` when there is nothing more until the next input.
    pub fn poll_output(&mut self) -> Option<GatewayOutput> {
        self.pending.pop_front()
    }

    /// Always `None`: the gateway has no timers. (Present so every machine has one
    /// shape; a host deadline reaches the gateway as [`GatewayInput::Abort`].)
    pub fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn emit(&mut self, action: GatewayAction) {
        self.pending.push_back(GatewayOutput::Action(action));
    }

    /// One row of the transition table (`answer` was normalized for `state`'s stage by
    /// [`answer_of`], so every other combination leaves the state as it is).
    fn step(&mut self, now_ms: u64, state: State, answer: Answer) -> State {
        match (state, answer) {
            (State::CreatingSandbox { mut run, inputs }, answer) => match answer {
                Answer::Created(sandbox) => {
                    let ev = &mut run.record.evidence;
                    ev.sandbox_id =
                        Some(ev.ident("sandbox_id", IdentifierKind::Ref, &sandbox.sandbox_id));
                    self.emit(GatewayAction::StartSession {
                        profile: Box::new(run.resolved.profile.clone()),
                        inputs,
                        sandbox: sandbox.clone(),
                    });
                    State::StartingSession { run, sandbox }
                }
                Answer::InvalidHandle(message) => {
                    run.record.note(message);
                    run.record.abort(
                        FailureStage::SandboxCreate,
                        INVALID_SANDBOX_HANDLE.to_owned(),
                    );
                    run.record.evidence.teardown = TeardownStatus::Abandoned;
                    self.emit(GatewayAction::DiscardSandbox);
                    State::DiscardingSandbox { run }
                }
                Answer::Abort(code) => {
                    run.record.abort(FailureStage::SandboxCreate, code);
                    run.record.evidence.teardown = TeardownStatus::Abandoned;
                    self.finish(now_ms, run.record)
                }
                Answer::Failed(message) => {
                    run.record.note(message);
                    run.record
                        .fail(FailureStage::SandboxCreate, "sandbox_create_failed");
                    self.finish(now_ms, run.record)
                }
                _ => State::CreatingSandbox { run, inputs },
            },
            (State::StartingSession { mut run, sandbox }, answer) => match answer {
                Answer::Started(session) => self.next_call(run, sandbox, session),
                Answer::Failed(message) => {
                    run.record.note(message);
                    run.record
                        .fail(FailureStage::SessionStart, "session_start_failed");
                    self.destroy(run, sandbox)
                }
                Answer::Abort(code) => {
                    run.record.abort(FailureStage::SessionStart, code);
                    self.destroy(run, sandbox)
                }
                _ => State::StartingSession { run, sandbox },
            },
            (
                State::Dispatching {
                    mut run,
                    sandbox,
                    session,
                },
                answer,
            ) => match answer {
                Answer::Dispatched(result) if result.ok => {
                    let c = run.record.counts();
                    c.succeeded = c.succeeded.saturating_add(1);
                    run.record.last_result = Some(result);
                    self.next_call(run, sandbox, session)
                }
                Answer::Dispatched(result) => {
                    let c = run.record.counts();
                    c.unsuccessful = c.unsuccessful.saturating_add(1);
                    run.record.last_result = Some(result);
                    run.record
                        .fail(FailureStage::Execution, "rein_reported_failure");
                    self.end_execution(run, sandbox, session)
                }
                Answer::Failed(message) => {
                    let c = run.record.counts();
                    c.dispatch_failed = c.dispatch_failed.saturating_add(1);
                    run.record.last_result = None;
                    run.record.note(message);
                    run.record
                        .fail(FailureStage::Execution, "tool_dispatch_failed");
                    self.end_execution(run, sandbox, session)
                }
                Answer::Abort(code) => {
                    run.record.abort(FailureStage::Execution, code);
                    let c = run.record.counts();
                    c.abandoned = c.abandoned.saturating_add(1);
                    run.record.last_result = None;
                    self.end_execution(run, sandbox, session)
                }
                _ => State::Dispatching {
                    run,
                    sandbox,
                    session,
                },
            },
            (State::EndingSession { mut run, sandbox }, answer) => match answer {
                Answer::Ended(summary) => {
                    let declared = run.resolved.rein.tool_event_visibility;
                    let ev = &mut run.record.evidence;
                    ev.session_end = SessionEndStatus::Ended;
                    ev.absorb_summary(&summary, declared, self.config.max_evidence_artifacts);
                    self.destroy(run, sandbox)
                }
                Answer::Failed(message) => {
                    run.record.evidence.session_end = SessionEndStatus::Failed;
                    run.record.note(message);
                    run.record
                        .fail(FailureStage::SessionEnd, "session_end_failed");
                    self.destroy(run, sandbox)
                }
                Answer::Abort(code) => {
                    run.record.abort(FailureStage::SessionEnd, code);
                    run.record.evidence.session_end = SessionEndStatus::Abandoned;
                    self.destroy(run, sandbox)
                }
                _ => State::EndingSession { run, sandbox },
            },
            (State::DestroyingSandbox { mut run }, answer) => match answer {
                Answer::Destroyed => {
                    run.record.evidence.teardown = TeardownStatus::Destroyed;
                    self.finish(now_ms, run.record)
                }
                Answer::Failed(message) => {
                    run.record.evidence.teardown = TeardownStatus::Failed;
                    run.record.note(message);
                    run.record.fail(FailureStage::Teardown, "teardown_failed");
                    self.finish(now_ms, run.record)
                }
                Answer::Abort(code) => {
                    run.record.abort(FailureStage::Teardown, code);
                    run.record.evidence.teardown = TeardownStatus::Abandoned;
                    self.finish(now_ms, run.record)
                }
                _ => State::DestroyingSandbox { run },
            },
            (State::DiscardingSandbox { run }, answer) => match answer {
                Answer::Destroyed | Answer::Failed(_) | Answer::Abort(_) => {
                    self.finish(now_ms, run.record)
                }
                _ => State::DiscardingSandbox { run },
            },
            (state, _) => state,
        }
    }

    fn execute(
        &mut self,
        now_ms: u64,
        request: ExecutionRequest,
        inputs: StringMap,
        tool_calls: Vec<ToolCall>,
    ) -> State {
        let max_refs = self.config.max_evidence_refs;
        let mut ev = ExecutionEvidence::blank(CONTRACT_VERSION);
        let r = IdentifierKind::Ref;
        ev.harness_profile_ref = ev.ident("harness_profile_ref", r, &request.harness_profile_ref);
        ev.repository = ev.ident(
            "repository",
            IdentifierKind::Repository,
            &request.repository,
        );
        ev.assignment_ref = request
            .assignment_ref
            .as_deref()
            .map(|s| ev.ident("assignment_ref", r, s));
        ev.role_ref = request
            .role_ref
            .as_deref()
            .map(|s| ev.ident("role_ref", r, s));
        ev.duty_ref = request
            .duty_ref
            .as_deref()
            .map(|s| ev.ident("duty_ref", r, s));
        ev.goal_refs = ev.ident_list("goal_refs", r, &request.goal_refs, max_refs);
        ev.resource_envelope_refs = ev.ident_list(
            "resource_envelope_refs",
            r,
            &request.resource_envelope_refs,
            max_refs,
        );
        ev.tool_calls.requested = u64::try_from(tool_calls.len()).unwrap_or(u64::MAX);
        let mut record = Record {
            started_ms: now_ms,
            evidence: ev,
            failure: None,
            failure_message: None,
            last_result: None,
        };
        match resolve(&request.harness_profile_ref, &self.config.catalog) {
            Err(refusal) => {
                record.evidence.failure_reasons =
                    refusal.reasons.iter().map(|r| (*r).to_owned()).collect();
                record.fail(FailureStage::Resolution, refusal.kind.code());
                self.finish(now_ms, record)
            }
            Ok(resolved) => {
                let ev = &mut record.evidence;
                ev.rein_id = Some(ev.ident("rein_id", r, &resolved.rein.rein_id));
                ev.model = Some(ev.ident("model", r, &resolved.profile.model));
                self.emit(GatewayAction::CreateSandbox {
                    harness_profile_ref: resolved.profile.profile_id.clone(),
                    sandbox_profile: resolved.profile.sandbox_profile.clone(),
                    repository: request.repository,
                });
                State::CreatingSandbox {
                    run: Box::new(Run {
                        record,
                        resolved,
                        calls: tool_calls.into(),
                    }),
                    inputs,
                }
            }
        }
    }

    /// Dispatch the next allowed call, or end the session when none is left.
    fn next_call(
        &mut self,
        mut run: Box<Run>,
        sandbox: SandboxHandle,
        session: StringMap,
    ) -> State {
        let Some(call) = run.calls.pop_front() else {
            return self.end_session(run, sandbox, session);
        };
        if !run.resolved.profile.tool_policy.allows(&call.name) {
            let c = run.record.counts();
            c.denied = c.denied.saturating_add(1);
            run.record.last_result = None;
            run.record.fail(FailureStage::Execution, "tool_not_allowed");
            return self.end_execution(run, sandbox, session);
        }
        let ev = &mut run.record.evidence;
        let name = ev.ident("tools_used", IdentifierKind::Ref, &call.name);
        if !ev.tools_used.contains(&name) {
            ev.tools_used.push(name);
        }
        let c = run.record.counts();
        c.dispatched = c.dispatched.saturating_add(1);
        self.emit(GatewayAction::DispatchTool {
            session: session.clone(),
            call,
        });
        State::Dispatching {
            run,
            sandbox,
            session,
        }
    }

    /// The execution stage failed: skip the remaining calls and end the session.
    fn end_execution(
        &mut self,
        mut run: Box<Run>,
        sandbox: SandboxHandle,
        session: StringMap,
    ) -> State {
        let left = u64::try_from(run.calls.len()).unwrap_or(u64::MAX);
        run.calls.clear();
        let c = run.record.counts();
        c.skipped = c.skipped.saturating_add(left);
        self.end_session(run, sandbox, session)
    }

    fn end_session(&mut self, run: Box<Run>, sandbox: SandboxHandle, session: StringMap) -> State {
        self.emit(GatewayAction::EndSession { session });
        State::EndingSession { run, sandbox }
    }

    /// Tear the sandbox down (every path reaches this once a sandbox exists).
    fn destroy(&mut self, run: Box<Run>, sandbox: SandboxHandle) -> State {
        self.emit(GatewayAction::DestroySandbox { sandbox });
        State::DestroyingSandbox { run }
    }

    fn finish(&mut self, now_ms: u64, record: Record) -> State {
        self.pending
            .push_back(GatewayOutput::Result(Box::new(record.into_result(now_ms))));
        State::Finished
    }
}
