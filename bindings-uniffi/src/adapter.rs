//! The harness-adapter seam (seed 000): `RoleSpec`, usage mapping onto the closed
//! `UsageSplit`, `TurnResult`, the agent-SDK helpers and the subprocess JSONL turn machine.
//! Declared fields are typed records; only genuinely open values (an invocation's unknown
//! keys, a budget, a provider's raw usage mapping, a harness progress event) are JSON text.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::adapter::{
    self as core_adapter, AdapterError, AgentOptions as CoreAgentOptions, AgentTurn,
    RoleSpec as CoreRoleSpec, SignalTarget as CoreSignalTarget, SpawnSpec,
    StopSignal as CoreStopSignal, SubprocessConfig, SubprocessInput, SubprocessOutput as CoreOut,
    SubprocessSession, TurnResult as CoreTurnResult,
};
use stapel_runner_protocol::wire::UsageSplit as CoreSplit;

use crate::errors::ProtocolError;
use crate::jsontext::{object_serde, optional_value_serde, parse_serde, serde_object_text};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl From<AdapterError> for ProtocolError {
    fn from(e: AdapterError) -> Self {
        ProtocolError::Adapter {
            code: e.code().to_owned(),
            kind: "adapter".to_owned(),
            detail: e.to_string(),
            line_number: e.line_number(),
            json: e.to_value().to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// usage

/// The closed five-component token split (seed 000's `UsageSplit`): every component a
/// non-negative integer at most 2^53 − 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, uniffi::Record)]
pub struct UsageSplit {
    /// Prompt-side tokens served from the provider's prefix cache.
    pub cache_read: u64,
    /// Prompt-side tokens written into the prefix cache.
    pub cache_write: u64,
    /// Prompt-side tokens neither read from nor written to the cache.
    pub fresh_input: u64,
    /// Generated output tokens (excluding separately reported thinking).
    pub output: u64,
    /// Reasoning tokens reported separately.
    pub thinking: u64,
}

impl From<&CoreSplit> for UsageSplit {
    fn from(u: &CoreSplit) -> Self {
        Self {
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            fresh_input: u.fresh_input,
            output: u.output,
            thinking: u.thinking,
        }
    }
}

impl UsageSplit {
    /// The JSON form (the five keys), for the core's readers, which check the bounds.
    pub(crate) fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "fresh_input": self.fresh_input,
            "output": self.output,
            "thinking": self.thinking,
        })
    }

    /// The core's split, checked by the core's reader (each component ≤ 2^53 − 1).
    pub(crate) fn to_core(self) -> Result<CoreSplit, ProtocolError> {
        let v = stapel_runner_protocol::json::Value::from(&self.to_json());
        CoreSplit::from_value(&v).map_err(|e| {
            ProtocolError::from(AdapterError::InvalidUsage {
                line_number: None,
                reason: e.to_string(),
            })
        })
    }
}

/// The sum of a split's five components (the core's `total_tokens`, saturating).
#[uniffi::export]
pub fn usage_total_tokens(split: UsageSplit) -> u64 {
    CoreSplit {
        cache_read: split.cache_read,
        cache_write: split.cache_write,
        fresh_input: split.fresh_input,
        output: split.output,
        thinking: split.thinking,
    }
    .total_tokens()
}

/// Checks a split against the schema's bounds (each component ≤ 2^53 − 1).
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_usage`).
#[uniffi::export]
pub fn usage_split_validate(split: UsageSplit) -> Result<(), ProtocolError> {
    split.to_core().map(|_| ())
}

/// Provider usage shapes the core maps to a `UsageSplit` (the core's `UsageShape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum UsageShape {
    /// Anthropic's `usage` object.
    Anthropic,
    /// OpenAI's (Responses API, Codex CLI) `usage` object.
    Openai,
    /// Any supported shape, chosen by the mapping's keys.
    Mapping,
}

impl From<UsageShape> for core_adapter::UsageShape {
    fn from(s: UsageShape) -> Self {
        match s {
            UsageShape::Anthropic => core_adapter::UsageShape::Anthropic,
            UsageShape::Openai => core_adapter::UsageShape::Openai,
            UsageShape::Mapping => core_adapter::UsageShape::Mapping,
        }
    }
}

/// Maps a provider's usage (a JSON mapping as the provider sent it: open, so JSON text)
/// to a `UsageSplit` (the core's `usage_from_shape`). `thinking` is a separately reported
/// thinking count; the core refuses it for shapes other than Anthropic.
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_usage`); `Decode` for text that is not JSON.
#[uniffi::export(default(thinking = None))]
pub fn usage_from(
    shape: UsageShape,
    usage_json: String,
    thinking: Option<u64>,
) -> Result<UsageSplit, ProtocolError> {
    let v = parse_serde(&usage_json)?;
    Ok(UsageSplit::from(&core_adapter::usage_from_shape(
        shape.into(),
        &v,
        thinking,
    )?))
}

/// The keys the core reads from a provider's usage object (for hosts that hold usage as
/// attributes rather than a mapping); `None` for `Mapping`, whose shape is chosen by the
/// mapping's own keys.
#[uniffi::export]
pub fn usage_keys(shape: UsageShape) -> Option<Vec<String>> {
    core_adapter::UsageShape::from(shape)
        .attribute_keys()
        .map(|ks| ks.iter().map(|k| (*k).to_owned()).collect())
}

/// The keys of a usage key's nested detail object (`None`: it has none).
#[uniffi::export]
pub fn usage_detail_keys(key: String) -> Option<Vec<String>> {
    core_adapter::usage::usage_detail_keys(&key)
        .map(|ks| ks.iter().map(|k| (*k).to_owned()).collect())
}

// ---------------------------------------------------------------------------------------
// turn result

/// The result of one harness turn: the model's final text and the turn's usage.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TurnResult {
    /// The model's final text.
    pub text: String,
    /// The turn's usage.
    pub usage: UsageSplit,
}

impl From<&CoreTurnResult> for TurnResult {
    fn from(r: &CoreTurnResult) -> Self {
        Self {
            text: r.text.clone(),
            usage: UsageSplit::from(&r.usage),
        }
    }
}

/// Reads a `TurnResult` from its JSON form strictly (`{"text", "usage"}`, no other key).
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_result`, `invalid_usage`); `Decode` for text that
/// is not JSON.
#[uniffi::export]
pub fn turn_result_from_json(json: String) -> Result<TurnResult, ProtocolError> {
    Ok(TurnResult::from(&CoreTurnResult::from_value(
        &parse_serde(&json)?,
    )?))
}

/// Checks a `TurnResult` built by the host (the core's `TurnResult::try_new`).
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_usage`).
#[uniffi::export]
pub fn turn_result_validate(result: TurnResult) -> Result<(), ProtocolError> {
    let usage = result.usage.to_core()?;
    CoreTurnResult::try_new(result.text, usage)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// role spec

/// The role an adapter plays and the model↔harness pairing it runs (the core's
/// `RoleSpec`), built from a `task.assign`'s `role` and `invocation`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RoleSpec {
    /// The role (default `coder`).
    pub role: String,
    /// Harness backend (`agent-sdk`, `subprocess`, …).
    pub backend: Option<String>,
    /// Model identifier.
    pub model: Option<String>,
    /// Session policy (default `per-task`).
    pub session: String,
    /// Reference to the system prompt.
    pub system_prompt_ref: Option<String>,
    /// Tools the harness may use.
    pub allowed_tools: Vec<String>,
    /// Base URL of the LLM gateway.
    pub llm_base_url: Option<String>,
    /// Budget: any JSON value, as JSON text (open).
    pub budget: Option<String>,
    /// Invocation keys seed 000 does not name: a JSON object text, arrival order (open).
    pub extra: String,
}

impl From<&CoreRoleSpec> for RoleSpec {
    fn from(s: &CoreRoleSpec) -> Self {
        Self {
            role: s.role.clone(),
            backend: s.backend.clone(),
            model: s.model.clone(),
            session: s.session.clone(),
            system_prompt_ref: s.system_prompt_ref.clone(),
            allowed_tools: s.allowed_tools.clone(),
            llm_base_url: s.llm_base_url.clone(),
            budget: s.budget.as_ref().map(ToString::to_string),
            extra: serde_object_text(&s.extra),
        }
    }
}

impl RoleSpec {
    /// The core's spec, re-read by the core's `from_invocation` (so a record the host
    /// built meets the same rules as one read from an invocation).
    pub(crate) fn to_core(&self) -> Result<CoreRoleSpec, ProtocolError> {
        let raw = CoreRoleSpec {
            role: self.role.clone(),
            backend: self.backend.clone(),
            model: self.model.clone(),
            session: self.session.clone(),
            system_prompt_ref: self.system_prompt_ref.clone(),
            allowed_tools: self.allowed_tools.clone(),
            llm_base_url: self.llm_base_url.clone(),
            budget: optional_value_serde(self.budget.as_deref())?,
            extra: object_serde(&self.extra)?,
        };
        let serde_json::Value::Object(form) = raw.to_value() else {
            return Ok(raw);
        };
        Ok(CoreRoleSpec::from_invocation(&form, Some(&self.role))?)
    }
}

fn invocation(
    invocation_json: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, ProtocolError> {
    object_serde(invocation_json)
}

/// The `RoleSpec` of an invocation (JSON object text: the open `task.assign.invocation`)
/// for a role (`None`: the core's default role).
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_invocation`), `Decode` for text that is not a JSON
/// object.
#[uniffi::export(default(role = None))]
pub fn role_spec_from_invocation(
    invocation_json: String,
    role: Option<String>,
) -> Result<RoleSpec, ProtocolError> {
    let inv = invocation(&invocation_json)?;
    Ok(RoleSpec::from(&CoreRoleSpec::from_invocation(
        &inv,
        role.as_deref(),
    )?))
}

/// The spec's inline system prompt, as the core resolves it.
///
/// # Errors
/// As [`role_spec_from_invocation`], for a record the core refuses.
#[uniffi::export]
pub fn role_spec_system_prompt(spec: RoleSpec) -> Result<Option<String>, ProtocolError> {
    Ok(spec.to_core()?.system_prompt().map(str::to_owned))
}

/// The spec with its inline system prompt set (`Some`) or removed (`None`), by the core's
/// rule (the explicit value wins over the invocation's).
///
/// # Errors
/// As [`role_spec_system_prompt`].
#[uniffi::export]
pub fn role_spec_with_system_prompt(
    spec: RoleSpec,
    prompt: Option<String>,
) -> Result<RoleSpec, ProtocolError> {
    let mut s = spec.to_core()?;
    s.set_system_prompt(prompt);
    Ok(RoleSpec::from(&s))
}

/// The spec's JSON form (the core's `RoleSpec::to_value`).
///
/// # Errors
/// As [`role_spec_system_prompt`].
#[uniffi::export]
pub fn role_spec_to_json(spec: RoleSpec) -> Result<String, ProtocolError> {
    Ok(spec.to_core()?.to_value().to_string())
}

/// The agent-SDK options the core derives from a role.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct AgentOptions {
    /// The model (`None`: the SDK's default).
    pub model: Option<String>,
    /// Tools the agent may use.
    pub allowed_tools: Vec<String>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// Environment for the agent, in order.
    pub env: Vec<crate::machines::EnvVar>,
    /// `max_turns` from the budget (any JSON value, as given: JSON text).
    pub max_turns: Option<String>,
    /// `max_budget_usd` from the budget (any JSON value, as given: JSON text).
    pub max_budget_usd: Option<String>,
}

impl From<&CoreAgentOptions> for AgentOptions {
    fn from(o: &CoreAgentOptions) -> Self {
        Self {
            model: o.model.clone(),
            allowed_tools: o.allowed_tools.clone(),
            system_prompt: o.system_prompt.clone(),
            env: o
                .env
                .iter()
                .map(|(name, value)| crate::machines::EnvVar {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            max_turns: o.max_turns.as_ref().map(ToString::to_string),
            max_budget_usd: o.max_budget_usd.as_ref().map(ToString::to_string),
        }
    }
}

/// The agent-SDK options for a role spec (the core's `AgentOptions::from_role`).
///
/// # Errors
/// As [`role_spec_system_prompt`].
#[uniffi::export]
pub fn agent_options(spec: RoleSpec) -> Result<AgentOptions, ProtocolError> {
    Ok(AgentOptions::from(&CoreAgentOptions::from_role(
        &spec.to_core()?,
    )))
}

/// Folds an agent-SDK turn: its text blocks and, when the result message arrived, the
/// provider's usage mapping (JSON text, open; `None`: no usage).
///
/// # Errors
/// `ProtocolError::Adapter`.
#[uniffi::export]
pub fn agent_turn(
    text_blocks: Vec<String>,
    result_seen: bool,
    usage_json: Option<String>,
) -> Result<TurnResult, ProtocolError> {
    let mut t = AgentTurn::new();
    for b in &text_blocks {
        t.text_block(b);
    }
    if result_seen {
        t.result(usage_json.map(|u| parse_serde(&u)).transpose()?);
    }
    Ok(TurnResult::from(&t.finish()?))
}

/// The adapter error a host fault maps to (`None`: the code is not a host fault).
#[uniffi::export]
pub fn adapter_host_fault(code: String, message: String) -> Option<ProtocolError> {
    AdapterError::host_fault(&code, message).map(ProtocolError::from)
}

// ---------------------------------------------------------------------------------------
// subprocess machine

/// How to start a subprocess harness.
#[derive(Debug, Clone, uniffi::Record)]
pub struct SubprocessSpawn {
    /// Command and arguments.
    pub command: Vec<String>,
    /// `PATH` for the child.
    pub path: String,
    /// Extra environment, in order.
    #[uniffi(default = [])]
    pub env: Vec<crate::machines::EnvVar>,
    /// The LLM base URL to hand the child.
    #[uniffi(default = None)]
    pub llm_base_url: Option<String>,
    /// Working directory.
    #[uniffi(default = None)]
    pub cwd: Option<String>,
}

/// What happened, fed to the subprocess turn machine.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SubprocessEvent {
    /// Open a session: the machine asks to spawn.
    Open {
        /// The spawn request.
        spawn: SubprocessSpawn,
    },
    /// The child started (or was attached).
    Spawned {
        /// Its pid, when known.
        pid: Option<u32>,
        /// `true` when it leads its own process group.
        process_group: bool,
    },
    /// The child could not be started.
    SpawnFailed {
        /// Why.
        message: String,
    },
    /// Start a turn with this prompt.
    StartTurn {
        /// The prompt.
        prompt: String,
    },
    /// Bytes from the child's stdout.
    Stdout {
        /// The bytes.
        data: Vec<u8>,
    },
    /// The child's stdout ended.
    Eof,
    /// Writing the child's stdin failed.
    StdinWriteFailed {
        /// Why.
        message: String,
    },
    /// The child exited.
    Exited,
    /// Close the session.
    Close,
    /// The deadline of `poll_timeout()` was reached.
    Timeout,
}

/// What the host must start: `program args…` with exactly `env`, in `cwd`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SubprocessSpawnRequest {
    /// Program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// The complete environment, in order.
    pub env: Vec<crate::machines::EnvVar>,
    /// Working directory (`None`: the host's).
    pub cwd: Option<String>,
    /// Start the child in a new process group.
    pub new_process_group: bool,
}

/// Whom a stop signal is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum SignalTarget {
    /// The child process itself.
    Process,
    /// The process group the child leads.
    Group,
}

/// A stop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum StopSignal {
    /// SIGTERM.
    Term,
    /// SIGKILL.
    Kill,
}

/// What the subprocess machine asks of the host, or reports.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SubprocessOutput {
    /// Start the child; report `Spawned` or `SpawnFailed`.
    Spawn {
        /// What to start.
        request: SubprocessSpawnRequest,
    },
    /// Write this line (`\n`-terminated) to the child's stdin.
    WriteStdin {
        /// The bytes, as text.
        data: String,
    },
    /// Close the child's stdin and wait for its exit.
    CloseStdin,
    /// Send a stop signal.
    Signal {
        /// The process or its group.
        target: SignalTarget,
        /// Which signal.
        signal: StopSignal,
    },
    /// Close the child's stdout and release the handle (always last).
    CloseStdout,
    /// A progress event from the child (the JSON object it wrote: open, so JSON text).
    Progress {
        /// The event's JSON object text.
        event: String,
    },
    /// The turn ended with a result.
    TurnResult {
        /// The result.
        result: TurnResult,
    },
    /// The turn (and, unless the code is `harness_error`, the session) ended with an
    /// adapter error.
    Error {
        /// Stable code.
        code: String,
        /// The 1-based stdout line the error is about (`None`: no line).
        line_number: Option<u64>,
        /// The core's text.
        detail: String,
        /// The error's JSON form (`{"code", "line_number", …}`), as the core gives it.
        json: String,
    },
    /// An output this binding does not know yet (a newer core).
    Unknown {
        /// The core's JSON form of the output.
        json: String,
    },
}

fn subprocess_output(o: CoreOut) -> SubprocessOutput {
    match o {
        CoreOut::Spawn(r) => SubprocessOutput::Spawn {
            request: SubprocessSpawnRequest {
                program: r.program,
                args: r.args,
                env: r
                    .env
                    .into_iter()
                    .map(|(name, value)| crate::machines::EnvVar { name, value })
                    .collect(),
                cwd: r.cwd,
                new_process_group: r.new_process_group,
            },
        },
        CoreOut::WriteStdin(data) => SubprocessOutput::WriteStdin { data },
        CoreOut::CloseStdin => SubprocessOutput::CloseStdin,
        CoreOut::Signal { target, signal } => SubprocessOutput::Signal {
            target: match target {
                CoreSignalTarget::Process => SignalTarget::Process,
                CoreSignalTarget::Group => SignalTarget::Group,
            },
            signal: match signal {
                CoreStopSignal::Term => StopSignal::Term,
                CoreStopSignal::Kill => StopSignal::Kill,
            },
        },
        CoreOut::CloseStdout => SubprocessOutput::CloseStdout,
        CoreOut::Progress(event) => SubprocessOutput::Progress {
            event: serde_object_text(&event),
        },
        CoreOut::TurnResult(r) => SubprocessOutput::TurnResult {
            result: TurnResult::from(&r),
        },
        CoreOut::Error(e) => SubprocessOutput::Error {
            code: e.code().to_owned(),
            line_number: e.line_number(),
            detail: e.to_string(),
            json: e.to_value().to_string(),
        },
        #[allow(unreachable_patterns)]
        other => SubprocessOutput::Unknown {
            json: other.to_value().to_string(),
        },
    }
}

/// The subprocess JSONL turn machine with its stop escalation.
#[derive(uniffi::Object)]
pub struct SubprocessTurnMachine {
    inner: Mutex<SubprocessSession>,
}

#[uniffi::export]
impl SubprocessTurnMachine {
    /// A machine; `None` bounds take the core's defaults. `map_usage` `false` leaves a
    /// result line's usage to the host (the turn result's usage is zeros; `resultLine()`
    /// carries it); `None` is the core's default, `true`.
    #[uniffi::constructor(default(max_line_bytes = None, grace_ms = None, map_usage = None))]
    pub fn new(
        max_line_bytes: Option<u64>,
        grace_ms: Option<u64>,
        map_usage: Option<bool>,
    ) -> Self {
        let mut c = SubprocessConfig::default();
        if let Some(m) = map_usage {
            c = c.map_usage(m);
        }
        if let Some(n) = max_line_bytes {
            c.max_line_bytes = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(g) = grace_ms {
            c = c.grace_ms(g);
        }
        Self {
            inner: Mutex::new(SubprocessSession::new(c)),
        }
    }

    /// Feeds one event.
    ///
    /// # Errors
    /// `ProtocolError::Adapter` with the adapter error's JSON form.
    pub fn handle_input(&self, now_ms: u64, event: SubprocessEvent) -> Result<(), ProtocolError> {
        use SubprocessEvent as E;
        let input = match event {
            E::Open { spawn } => {
                let mut s = SpawnSpec::new(spawn.command, spawn.path);
                s.env = spawn.env.into_iter().map(|e| (e.name, e.value)).collect();
                s.llm_base_url = spawn.llm_base_url;
                s.cwd = spawn.cwd;
                SubprocessInput::Open(s)
            }
            E::Spawned { pid, process_group } => SubprocessInput::Spawned { pid, process_group },
            E::SpawnFailed { message } => SubprocessInput::SpawnFailed { message },
            E::StartTurn { prompt } => SubprocessInput::StartTurn { prompt },
            E::Stdout { data } => SubprocessInput::Stdout(data),
            E::Eof => SubprocessInput::Eof,
            E::StdinWriteFailed { message } => SubprocessInput::StdinWriteFailed { message },
            E::Exited => SubprocessInput::Exited,
            E::Close => SubprocessInput::Close,
            E::Timeout => SubprocessInput::Timeout,
        };
        Ok(locked(&self.inner).handle_input(now_ms, input)?)
    }

    /// The next output, or `None`.
    pub fn poll_output(&self) -> Option<SubprocessOutput> {
        locked(&self.inner).poll_output().map(subprocess_output)
    }

    /// The deadline at which to feed `Timeout` (`None`: no timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        locked(&self.inner).poll_timeout()
    }

    /// `true` during a turn.
    pub fn in_turn(&self) -> bool {
        locked(&self.inner).in_turn()
    }

    /// `true` once the session closed.
    pub fn is_closed(&self) -> bool {
        locked(&self.inner).is_closed()
    }

    /// The process lifecycle state's name (the core's).
    pub fn lifecycle(&self) -> String {
        locked(&self.inner).state().as_str().to_owned()
    }

    /// The `result` line that ended the latest turn, as JSON object text (every key the
    /// child wrote: the raw answer), or `null` before the first result (the core's
    /// `result_line`).
    pub fn result_line(&self) -> Option<String> {
        locked(&self.inner).result_line().map(serde_object_text)
    }
}
