//! The gateway lifecycle machine: one governed execution, sans-IO.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::error::GatewayError;
use super::evidence::{
    ExecutionEvidence, FailureStage, GatewayResult, Outcome, SessionEndStatus, TeardownStatus,
};
use super::fields::{type_name, Obj};
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
            GatewayInput::Abort { .. } => "abort",
        }
    }

    /// Parse the JSON form `{"type": "<type_name>", …}`: `execute` takes `request`
    /// (required), `inputs` (string map) and `tool_calls` (array); `sandbox_created` takes
    /// `sandbox`; `session_started` takes `session` (string map); `tool_dispatched` takes
    /// `result`; `session_ended` takes `summary`; the `*_failed` inputs take an optional
    /// `message` (string or `null`); `abort` takes `code` (required, see
    /// [`GatewayInput::Abort`]); `sandbox_destroyed` takes nothing. Unknown keys are
    /// rejected.
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
            | "sandbox_destroy_failed" => &["type", "message"],
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
                    Some(Value::Array(items)) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| ToolCall::parse_at(v, &format!("tool_calls/{i}")))
                        .collect::<Result<_, _>>()?,
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

/// Something the host must do, then report back as a [`GatewayInput`].
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
}

/// One item drained from [`Gateway::poll_output`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GatewayOutput {
    /// Perform this action, then report its outcome.
    Action(GatewayAction),
    /// The execution is over. Emitted exactly once.
    Result(Box<GatewayResult>),
    /// Nothing more until the next input (the gateway has no timers, so this is
    /// `Timeout(None)` in the other machines' vocabulary).
    Waiting,
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
    /// "end_session" | "destroy_sandbox" | "result" | "waiting", …}` with the action's
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
            GatewayOutput::Result(r) => json!({"type": "result", "result": r.to_value()}),
            GatewayOutput::Waiting => json!({"type": "waiting"}),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Idle,
    CreatingSandbox,
    StartingSession,
    Dispatching,
    EndingSession,
    Destroying,
    Finished,
}

impl Stage {
    fn waiting_for(self) -> &'static str {
        match self {
            Stage::Idle => "execute",
            Stage::CreatingSandbox => "sandbox_create",
            Stage::StartingSession => "session_start",
            Stage::Dispatching => "tool_dispatch",
            Stage::EndingSession => "session_end",
            Stage::Destroying => "sandbox_destroy",
            Stage::Finished => "nothing",
        }
    }
}

/// The gateway lifecycle of seed 001 for one governed execution, as a sans-IO state
/// machine.
///
/// # Call order
///
/// 1. Create one `Gateway` per execution with [`Gateway::new`].
/// 2. Call [`handle_input`](Self::handle_input)`(now_ms, GatewayInput::Execute{..})`.
/// 3. Drain [`poll_output`](Self::poll_output) until it returns
///    [`GatewayOutput::Waiting`]. Each [`GatewayOutput::Action`] is work for the host;
///    at most one action is outstanding at a time.
/// 4. Perform the action and report its outcome with `handle_input(now_ms, …)` (the
///    matching `*_created` / `*_started` / `tool_dispatched` / `session_ended` /
///    `sandbox_destroyed` input, or the matching `*_failed` input), then drain again.
/// 5. Repeat until a [`GatewayOutput::Result`] is drained. After it, every input is
///    rejected with `unexpected_input` and `poll_output` returns `Waiting`.
///
/// `now_ms` is the host's monotonic clock; the gateway never reads one. The evidence's
/// `duration_ms` is the `now_ms` of the input that produced the result minus the `now_ms`
/// of `execute` (saturating at 0, and at 2^53 − 1 like every evidence integer).
///
/// # Lifecycle
///
/// ```text
/// execute ─ resolve ─┬─ refused ───────────────────────────────────────────────▶ result (refused, resolution)
///                    └─ CreateSandbox ─┬─ failed ──────────────────────────────▶ result (failed, sandbox_create)
///                                      └─ StartSession ─┬─ failed ───────────────────────────┐
///                                                       └─ DispatchTool × n ─ EndSession ─┐  │
///                                                                                        DestroySandbox ─▶ result
/// ```
///
/// * Resolution happens before any sandbox exists; a refusal creates nothing
///   (`refused`).
/// * Tool calls are dispatched in order. A call whose tool the profile's policy does not
///   list is not dispatched (`tool_not_allowed`); a result with `ok: false`
///   (`rein_reported_failure`) or a `tool_dispatch_failed` report
///   (`tool_dispatch_failed`) ends the execution stage: the remaining calls are skipped,
///   and the session is still ended so its facts are collected.
/// * A denied call leaves the direct caller no tool output (`tool_output` is `null`), so
///   the previous call's output is never mistaken for the denied call's.
/// * Once a sandbox exists, `DestroySandbox` is emitted on every path.
/// * The first failing stage is the evidence's `failure_stage`; later failures (for
///   example a failed session end after a failed execution, or a failed teardown) show
///   in `session_end` and `teardown` but do not replace it. Any failure after
///   resolution is `failed`.
/// * A `*_failed` report may carry a `message` for the direct caller: the first one
///   becomes `tool_error` unless a tool result's error text is there. It never reaches
///   evidence.
///
/// # Abort
///
/// [`GatewayInput::Abort`] gives up on the outstanding action. It is accepted in every
/// stage that has one (after `execute`, before the result); before `execute` there is no
/// execution to abort and after the result nothing is left, so both are
/// `unexpected_input`. Because resolution runs inside `execute`, an abort always comes
/// after a successful resolution — the lifecycle was attempted — so its outcome is
/// `failed`, never `refused`. Unperformed queued actions are discarded. The failure
/// stage is the stage whose action was outstanding, the failure code `aborted`, and the
/// host's code is the only `failure_reasons` entry (when the abort is the first failure;
/// otherwise the earlier failure stays and the abort shows in `session_end` /
/// `teardown`):
///
/// | outstanding action | failure stage | then | statuses |
/// |---|---|---|---|
/// | CreateSandbox | `sandbox_create` | result | `teardown: abandoned` (a sandbox may still appear; the host owns its cleanup) |
/// | StartSession | `session_start` | DestroySandbox | `session_end: not_attempted` |
/// | DispatchTool | `execution` | EndSession, DestroySandbox | the call counts as `abandoned`, the rest as `skipped`; `tool_output` is `null` |
/// | EndSession | `session_end` | DestroySandbox | `session_end: abandoned` |
/// | DestroySandbox | `teardown` | result | `teardown: abandoned` |
///
/// A later abort gives up on the next outstanding action in the same way, so a host can
/// always finish in at most three aborts.
///
/// # Errors
///
/// Misuse by the host ([`GatewayError`]) leaves the state unchanged.
#[derive(Debug, Clone)]
pub struct Gateway {
    config: GatewayConfig,
    stage: Stage,
    started_ms: u64,
    resolved: Option<Resolved>,
    inputs: StringMap,
    calls: VecDeque<ToolCall>,
    session: Option<StringMap>,
    sandbox: Option<SandboxHandle>,
    last_result: Option<ToolResult>,
    failure_message: Option<String>,
    failure: Option<(FailureStage, &'static str)>,
    evidence: ExecutionEvidence,
    pending: VecDeque<GatewayOutput>,
}

impl Gateway {
    /// A gateway waiting for [`GatewayInput::Execute`].
    pub fn new(config: GatewayConfig) -> Self {
        Self {
            config,
            stage: Stage::Idle,
            started_ms: 0,
            resolved: None,
            inputs: StringMap::new(),
            calls: VecDeque::new(),
            session: None,
            sandbox: None,
            last_result: None,
            failure_message: None,
            failure: None,
            evidence: ExecutionEvidence::blank(CONTRACT_VERSION),
            pending: VecDeque::new(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// `true` once the result has been produced.
    pub fn is_finished(&self) -> bool {
        self.stage == Stage::Finished
    }

    /// Feed one input at host time `now_ms`. See the [type docs](Self) for the order.
    ///
    /// # Errors
    /// [`GatewayError::UnexpectedInput`] when the input does not answer the outstanding
    /// action; [`GatewayError::TooManyToolCalls`] when `execute` exceeds the bound. The
    /// state is unchanged on error.
    pub fn handle_input(&mut self, now_ms: u64, input: GatewayInput) -> Result<(), GatewayError> {
        let unexpected = GatewayError::UnexpectedInput {
            expected: self.stage.waiting_for(),
            got: input.type_name(),
        };
        match (self.stage, input) {
            (
                Stage::Idle,
                GatewayInput::Execute {
                    request,
                    inputs,
                    tool_calls,
                },
            ) => {
                if tool_calls.len() > self.config.max_tool_calls {
                    return Err(GatewayError::TooManyToolCalls {
                        count: tool_calls.len(),
                        max: self.config.max_tool_calls,
                    });
                }
                self.execute(now_ms, request, inputs, tool_calls);
            }
            (Stage::Idle | Stage::Finished, GatewayInput::Abort { .. }) => return Err(unexpected),
            (_, GatewayInput::Abort { code }) => {
                if !is_abort_code(&code) {
                    return Err(GatewayError::InvalidInput {
                        reason: "abort code must match [a-z][a-z0-9_]* (at most 64 bytes)".into(),
                    });
                }
                self.abort(now_ms, code);
            }
            (Stage::CreatingSandbox, GatewayInput::SandboxCreated { sandbox }) => {
                self.evidence.sandbox_id = Some(self.evidence.ident(
                    "sandbox_id",
                    IdentifierKind::Ref,
                    &sandbox.sandbox_id,
                ));
                self.sandbox = Some(sandbox.clone());
                let profile = self.resolved.as_ref().map(|r| r.profile.clone());
                if let Some(profile) = profile {
                    self.stage = Stage::StartingSession;
                    let inputs = std::mem::take(&mut self.inputs);
                    self.emit(GatewayAction::StartSession {
                        profile: Box::new(profile),
                        inputs,
                        sandbox,
                    });
                }
            }
            (Stage::CreatingSandbox, GatewayInput::SandboxCreateFailed { message }) => {
                self.note(message);
                self.fail(FailureStage::SandboxCreate, "sandbox_create_failed");
                self.finish(now_ms);
            }
            (Stage::StartingSession, GatewayInput::SessionStarted { session }) => {
                self.session = Some(session);
                self.next_call();
            }
            (Stage::StartingSession, GatewayInput::SessionStartFailed { message }) => {
                self.note(message);
                self.fail(FailureStage::SessionStart, "session_start_failed");
                self.destroy(now_ms);
            }
            (Stage::Dispatching, GatewayInput::ToolDispatched { result }) => {
                let ok = result.ok;
                self.last_result = Some(result);
                if ok {
                    self.evidence.tool_calls.succeeded += 1;
                    self.next_call();
                } else {
                    self.evidence.tool_calls.unsuccessful += 1;
                    self.fail(FailureStage::Execution, "rein_reported_failure");
                    self.end_execution();
                }
            }
            (Stage::Dispatching, GatewayInput::ToolDispatchFailed { message }) => {
                self.evidence.tool_calls.dispatch_failed += 1;
                self.last_result = None;
                self.note(message);
                self.fail(FailureStage::Execution, "tool_dispatch_failed");
                self.end_execution();
            }
            (Stage::EndingSession, GatewayInput::SessionEnded { summary }) => {
                let declared = self
                    .resolved
                    .as_ref()
                    .map(|r| r.rein.tool_event_visibility)
                    .unwrap_or_default();
                self.evidence.session_end = SessionEndStatus::Ended;
                self.evidence.absorb_summary(
                    &summary,
                    declared,
                    self.config.max_evidence_artifacts,
                );
                self.destroy(now_ms);
            }
            (Stage::EndingSession, GatewayInput::SessionEndFailed { message }) => {
                self.evidence.session_end = SessionEndStatus::Failed;
                self.note(message);
                self.fail(FailureStage::SessionEnd, "session_end_failed");
                self.destroy(now_ms);
            }
            (Stage::Destroying, GatewayInput::SandboxDestroyed) => {
                self.evidence.teardown = TeardownStatus::Destroyed;
                self.finish(now_ms);
            }
            (Stage::Destroying, GatewayInput::SandboxDestroyFailed { message }) => {
                self.evidence.teardown = TeardownStatus::Failed;
                self.note(message);
                self.fail(FailureStage::Teardown, "teardown_failed");
                self.finish(now_ms);
            }
            _ => return Err(unexpected),
        }
        Ok(())
    }

    /// Next output, in order; [`GatewayOutput::Waiting`] when there is nothing more until
    /// the next input.
    pub fn poll_output(&mut self) -> GatewayOutput {
        self.pending.pop_front().unwrap_or(GatewayOutput::Waiting)
    }

    fn emit(&mut self, action: GatewayAction) {
        self.pending.push_back(GatewayOutput::Action(action));
    }

    /// Record a failure; `true` when it is the first (the one evidence names).
    fn fail(&mut self, stage: FailureStage, code: &'static str) -> bool {
        if self.failure.is_none() {
            self.failure = Some((stage, code));
            true
        } else {
            false
        }
    }

    /// Keep the first caller-only failure message.
    fn note(&mut self, message: Option<String>) {
        if self.failure_message.is_none() {
            self.failure_message = message;
        }
    }

    /// Give up on the outstanding action (see the type docs, "Abort").
    fn abort(&mut self, now_ms: u64, code: String) {
        self.pending.clear();
        let stage = match self.stage {
            Stage::CreatingSandbox => FailureStage::SandboxCreate,
            Stage::StartingSession => FailureStage::SessionStart,
            Stage::Dispatching => FailureStage::Execution,
            Stage::EndingSession => FailureStage::SessionEnd,
            _ => FailureStage::Teardown,
        };
        if self.fail(stage, ABORTED) {
            self.evidence.failure_reasons = vec![code];
        }
        match self.stage {
            Stage::CreatingSandbox => {
                self.evidence.teardown = TeardownStatus::Abandoned;
                self.finish(now_ms);
            }
            Stage::StartingSession => self.destroy(now_ms),
            Stage::Dispatching => {
                self.evidence.tool_calls.abandoned += 1;
                self.last_result = None;
                self.end_execution();
            }
            Stage::EndingSession => {
                self.evidence.session_end = SessionEndStatus::Abandoned;
                self.destroy(now_ms);
            }
            _ => {
                self.evidence.teardown = TeardownStatus::Abandoned;
                self.finish(now_ms);
            }
        }
    }

    fn execute(
        &mut self,
        now_ms: u64,
        request: ExecutionRequest,
        inputs: StringMap,
        tool_calls: Vec<ToolCall>,
    ) {
        self.started_ms = now_ms;
        let max_refs = self.config.max_evidence_refs;
        let ev = &mut self.evidence;
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
        ev.tool_calls.requested = tool_calls.len() as u64;
        match resolve(&request.harness_profile_ref, &self.config.catalog) {
            Err(refusal) => {
                self.evidence.failure_reasons =
                    refusal.reasons.iter().map(|r| (*r).to_owned()).collect();
                self.fail(FailureStage::Resolution, refusal.kind.code());
                self.finish(now_ms);
            }
            Ok(resolved) => {
                let ev = &mut self.evidence;
                let r = IdentifierKind::Ref;
                ev.rein_id = Some(ev.ident("rein_id", r, &resolved.rein.rein_id));
                ev.model = Some(ev.ident("model", r, &resolved.profile.model));
                self.inputs = inputs;
                self.calls = tool_calls.into();
                self.stage = Stage::CreatingSandbox;
                let action = GatewayAction::CreateSandbox {
                    harness_profile_ref: resolved.profile.profile_id.clone(),
                    sandbox_profile: resolved.profile.sandbox_profile.clone(),
                    repository: request.repository,
                };
                self.resolved = Some(resolved);
                self.emit(action);
            }
        }
    }

    /// Dispatch the next allowed call, or end the session when none is left.
    fn next_call(&mut self) {
        let Some(call) = self.calls.pop_front() else {
            self.end_session();
            return;
        };
        let allowed = self
            .resolved
            .as_ref()
            .is_some_and(|r| r.profile.tool_policy.allows(&call.name));
        if !allowed {
            self.evidence.tool_calls.denied += 1;
            self.last_result = None;
            self.fail(FailureStage::Execution, "tool_not_allowed");
            self.end_execution();
            return;
        }
        let name = self
            .evidence
            .ident("tools_used", IdentifierKind::Ref, &call.name);
        if !self.evidence.tools_used.contains(&name) {
            self.evidence.tools_used.push(name);
        }
        self.evidence.tool_calls.dispatched += 1;
        self.stage = Stage::Dispatching;
        let session = self.session.clone().unwrap_or_default();
        self.emit(GatewayAction::DispatchTool { session, call });
    }

    /// The execution stage failed: skip the remaining calls and end the session.
    fn end_execution(&mut self) {
        self.evidence.tool_calls.skipped += self.calls.len() as u64;
        self.calls.clear();
        self.end_session();
    }

    fn end_session(&mut self) {
        self.stage = Stage::EndingSession;
        let session = self.session.clone().unwrap_or_default();
        self.emit(GatewayAction::EndSession { session });
    }

    /// Tear the sandbox down (every path reaches this once a sandbox exists).
    fn destroy(&mut self, now_ms: u64) {
        match self.sandbox.clone() {
            Some(sandbox) => {
                self.stage = Stage::Destroying;
                self.emit(GatewayAction::DestroySandbox { sandbox });
            }
            None => self.finish(now_ms),
        }
    }

    fn finish(&mut self, now_ms: u64) {
        self.stage = Stage::Finished;
        let mut evidence = std::mem::take(&mut self.evidence);
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
        let tool_error = tool_error.or_else(|| self.failure_message.take());
        self.pending
            .push_back(GatewayOutput::Result(Box::new(GatewayResult {
                ok: evidence.outcome == Outcome::Succeeded,
                evidence,
                tool_output,
                tool_error,
            })));
    }
}
