//! The local-run machine (seed 002), the subprocess turn machine and adapter helpers
//! (seed 000's harness seam), and the connection host machines. Rust enums map to UniFFI
//! enums; values the core gives in JSON form (adapter outputs and errors, role specs,
//! usage splits, turn results, host configs) cross as JSON text.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::adapter::{
    self as core_adapter, AdapterError, AgentOptions, AgentTurn, RoleSpec, SpawnSpec,
    SubprocessConfig, SubprocessInput, SubprocessSession, TurnResult,
};
use stapel_runner_protocol::host::{
    self as core_host, auth::authorization_value, HostConfig, HubInput, HubOutput, InboundFrame,
    SocketInput, SocketOutput,
};
use stapel_runner_protocol::local::{self as core_local, LocalConfig, SignalKind};

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// local

/// A signal the local-run machine sends to the harness's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Signal {
    /// SIGTERM.
    Term,
    /// SIGKILL.
    Kill,
}

/// What happened, fed to the local-run machine.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LocalInput {
    /// Bytes from the controller (stdin).
    ControllerBytes {
        /// The bytes.
        data: Vec<u8>,
    },
    /// The controller closed its stream.
    ControllerEof,
    /// Bytes from the harness's stdout.
    HarnessStdout {
        /// The bytes.
        data: Vec<u8>,
    },
    /// Bytes from the harness's stderr.
    HarnessStderr {
        /// The bytes.
        data: Vec<u8>,
    },
    /// The harness process started.
    HarnessSpawned {
        /// Its pid (and process group).
        pid: u32,
    },
    /// The harness process could not be started.
    HarnessSpawnFailed {
        /// Why.
        message: String,
    },
    /// The harness process exited.
    HarnessExited {
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Signal, if it was killed.
        signal: Option<i32>,
    },
    /// The deadline of `poll_timeout()` was reached.
    Timeout,
}

/// What the local-run machine asks the host to do.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LocalOutput {
    /// Write this line (plus `\n`) to the controller.
    ToController {
        /// The line.
        line: String,
    },
    /// Write this line (plus `\n`) to the harness's stdin.
    ToHarness {
        /// The line.
        line: String,
    },
    /// Start the harness.
    Spawn {
        /// Program.
        program: String,
        /// Arguments.
        args: Vec<String>,
        /// The whole environment, as `[name, value]` pairs in order.
        env: Vec<EnvVar>,
        /// Start it in a new process group.
        new_process_group: bool,
    },
    /// Close the harness's stdin.
    CloseHarnessStdin,
    /// Signal the harness's process group.
    Signal {
        /// The group (the harness's pid).
        group: u32,
        /// Which signal.
        signal: Signal,
    },
    /// Exit the runner with this code.
    Exit {
        /// The exit code.
        code: i32,
    },
    /// An output this binding does not know yet (a newer core).
    Unknown {
        /// The core's debug text.
        debug: String,
    },
}

/// One environment variable.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

fn local_output(o: core_local::Output) -> LocalOutput {
    use core_local::Output as O;
    match o {
        O::ToController(line) => LocalOutput::ToController { line },
        O::ToHarness(line) => LocalOutput::ToHarness { line },
        O::Spawn(s) => LocalOutput::Spawn {
            program: s.program,
            args: s.args,
            env: s
                .env
                .into_iter()
                .map(|(name, value)| EnvVar { name, value })
                .collect(),
            new_process_group: s.new_process_group,
        },
        O::CloseHarnessStdin => LocalOutput::CloseHarnessStdin,
        O::Signal { group, signal } => LocalOutput::Signal {
            group,
            signal: match signal {
                SignalKind::Term => Signal::Term,
                SignalKind::Kill => Signal::Kill,
            },
        },
        O::Exit(code) => LocalOutput::Exit { code },
        #[allow(unreachable_patterns)]
        other => LocalOutput::Unknown {
            debug: format!("{other:?}"),
        },
    }
}

/// The local-run machine (seed 002): the host owns processes, pipes and clock; the
/// machine owns every decision. Feed inputs, drain `poll_output()`, honour
/// `poll_timeout()`.
#[derive(uniffi::Object)]
pub struct LocalRun {
    inner: Mutex<core_local::LocalRun>,
}

#[uniffi::export]
impl LocalRun {
    /// A machine from the core's local configuration (JSON text).
    ///
    /// # Errors
    /// `ProtocolError::Config`, or `State` with the local error's code.
    #[uniffi::constructor]
    pub fn new(config_json: String) -> Result<Self, ProtocolError> {
        let c = LocalConfig::from_value(&parse_serde(&config_json)?)?;
        let m = core_local::LocalRun::new(c).map_err(|e| state(e.code(), &e))?;
        Ok(Self {
            inner: Mutex::new(m),
        })
    }

    /// Feeds one input.
    ///
    /// # Errors
    /// `ProtocolError::State` with the local error's code.
    pub fn handle_input(&self, now_ms: u64, input: LocalInput) -> Result<(), ProtocolError> {
        use core_local::Input as I;
        let input = match input {
            LocalInput::ControllerBytes { data } => I::ControllerBytes(data),
            LocalInput::ControllerEof => I::ControllerEof,
            LocalInput::HarnessStdout { data } => I::HarnessStdout(data),
            LocalInput::HarnessStderr { data } => I::HarnessStderr(data),
            LocalInput::HarnessSpawned { pid } => I::HarnessSpawned { pid },
            LocalInput::HarnessSpawnFailed { message } => I::HarnessSpawnFailed { message },
            LocalInput::HarnessExited { code, signal } => I::HarnessExited { code, signal },
            LocalInput::Timeout => I::Timeout,
        };
        locked(&self.inner)
            .handle_input(now_ms, input)
            .map_err(|e| state(e.code(), &e))
    }

    /// The next output, or `None`.
    pub fn poll_output(&self) -> Option<LocalOutput> {
        locked(&self.inner).poll_output().map(local_output)
    }

    /// The deadline at which to feed `Timeout` (`None`: no timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        locked(&self.inner).poll_timeout()
    }
}

// ---------------------------------------------------------------------------------------
// adapter

impl From<AdapterError> for ProtocolError {
    fn from(e: AdapterError) -> Self {
        ProtocolError::Adapter {
            code: e.code().to_owned(),
            detail: e.to_string(),
            json: e.to_value().to_string(),
        }
    }
}

/// The `RoleSpec` (JSON form) of an invocation (JSON object text) for a role; with
/// `system_prompt` set, that prompt replaces the invocation's.
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_invocation`), `Decode` for text that is not a JSON
/// object.
#[uniffi::export(default(role = None))]
pub fn role_spec_from_invocation(
    invocation_json: String,
    role: Option<String>,
) -> Result<String, ProtocolError> {
    Ok(role_spec(&invocation_json, role, None)?
        .to_value()
        .to_string())
}

fn role_spec(
    invocation_json: &str,
    role: Option<String>,
    system_prompt: Option<Option<String>>,
) -> Result<RoleSpec, ProtocolError> {
    let inv = match parse_serde(invocation_json)? {
        serde_json::Value::Object(m) => m,
        other => {
            return Err(stapel_runner_protocol::wire::DecodeError::NotObject {
                found: stapel_runner_protocol::json::Value::from(other).type_name(),
            }
            .into())
        }
    };
    let mut s = RoleSpec::from_invocation(&inv, role.as_deref())?;
    if let Some(p) = system_prompt {
        s.set_system_prompt(p);
    }
    Ok(s)
}

/// The role spec's system prompt, as the core resolves it.
///
/// # Errors
/// As [`role_spec_from_invocation`].
#[uniffi::export(default(role = None))]
pub fn role_spec_system_prompt(
    invocation_json: String,
    role: Option<String>,
) -> Result<Option<String>, ProtocolError> {
    Ok(role_spec(&invocation_json, role, None)?
        .system_prompt()
        .map(str::to_owned))
}

/// The agent-SDK options (JSON form) for an invocation and role; `system_prompt`
/// (when `set_system_prompt`) overrides the role's prompt (`None`: no prompt).
///
/// # Errors
/// As [`role_spec_from_invocation`].
#[uniffi::export(default(role = None, set_system_prompt = false, system_prompt = None))]
pub fn agent_options(
    invocation_json: String,
    role: Option<String>,
    set_system_prompt: bool,
    system_prompt: Option<String>,
) -> Result<String, ProtocolError> {
    let s = role_spec(
        &invocation_json,
        role,
        set_system_prompt.then_some(system_prompt),
    )?;
    Ok(AgentOptions::from_role(&s).to_value().to_string())
}

/// Folds an agent-SDK turn: its text blocks and, when the result message arrived, its
/// usage (JSON text, `None`: no usage); returns the `TurnResult` (JSON form).
///
/// # Errors
/// `ProtocolError::Adapter`.
#[uniffi::export]
pub fn agent_turn(
    text_blocks: Vec<String>,
    result_seen: bool,
    usage_json: Option<String>,
) -> Result<String, ProtocolError> {
    let mut t = AgentTurn::new();
    for b in &text_blocks {
        t.text_block(b);
    }
    if result_seen {
        t.result(usage_json.map(|u| parse_serde(&u)).transpose()?);
    }
    Ok(t.finish()?.to_value().to_string())
}

/// The adapter error a host fault maps to (`None`: the code is not a host fault).
#[uniffi::export]
pub fn adapter_host_fault(code: String, message: String) -> Option<ProtocolError> {
    AdapterError::host_fault(&code, message).map(ProtocolError::from)
}

/// Provider usage shapes the core maps to a `UsageSplit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum UsageShape {
    /// Anthropic's `usage` object.
    Anthropic,
    /// OpenAI's `usage` object.
    Openai,
    /// A plain mapping of the five split keys.
    Mapping,
}

/// A mapped usage split.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Usage {
    /// The split (JSON form: the five keys).
    pub json: String,
    /// Its total tokens.
    pub total_tokens: u64,
}

/// Maps a provider's usage (JSON text) to a `UsageSplit`; `thinking` (Anthropic only)
/// is the thinking-token count reported apart.
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_usage`).
#[uniffi::export(default(thinking = None))]
pub fn usage_from(
    shape: UsageShape,
    usage_json: String,
    thinking: Option<u64>,
) -> Result<Usage, ProtocolError> {
    let v = parse_serde(&usage_json)?;
    let split = match (shape, thinking) {
        (UsageShape::Anthropic, Some(t)) => core_adapter::usage_from_anthropic_with_thinking(&v, t),
        (UsageShape::Anthropic, None) => core_adapter::usage_from_anthropic(&v),
        (UsageShape::Openai, _) => core_adapter::usage_from_openai(&v),
        (UsageShape::Mapping, _) => core_adapter::usage_from_mapping(&v),
    }?;
    Ok(Usage {
        json: split.to_value().to_string(),
        total_tokens: split.total_tokens(),
    })
}

/// The keys the core reads from a provider's usage object (for hosts that hold usage as
/// attributes rather than a mapping), and, per key, the keys of its nested detail object.
#[uniffi::export]
pub fn usage_keys(shape: UsageShape) -> Vec<String> {
    let keys: &[&str] = match shape {
        UsageShape::Anthropic => &core_adapter::usage::ANTHROPIC_USAGE_KEYS,
        UsageShape::Openai => &core_adapter::usage::OPENAI_USAGE_KEYS,
        UsageShape::Mapping => &[],
    };
    keys.iter().map(|k| (*k).to_owned()).collect()
}

/// The keys of a usage key's nested detail object (`None`: it has none).
#[uniffi::export]
pub fn usage_detail_keys(key: String) -> Option<Vec<String>> {
    core_adapter::usage::usage_detail_keys(&key)
        .map(|ks| ks.iter().map(|k| (*k).to_owned()).collect())
}

/// Validates a `TurnResult` (JSON text) strictly; returns its JSON form.
///
/// # Errors
/// `ProtocolError::Adapter` (`invalid_result`, `invalid_usage`).
#[uniffi::export]
pub fn turn_result_from_json(json: String) -> Result<String, ProtocolError> {
    Ok(TurnResult::from_value(&parse_serde(&json)?)?
        .to_value()
        .to_string())
}

/// How to start a subprocess harness.
#[derive(Debug, Clone, uniffi::Record)]
pub struct SubprocessSpawn {
    /// Command and arguments.
    pub command: Vec<String>,
    /// `PATH` for the child.
    pub path: String,
    /// Extra environment, in order.
    #[uniffi(default = [])]
    pub env: Vec<EnvVar>,
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

/// The subprocess JSONL turn machine with its stop escalation. Outputs are the core's
/// JSON forms (`{"spawn": …}`, `{"write_stdin": …}`, `{"turn_result": …}`, …).
#[derive(uniffi::Object)]
pub struct SubprocessTurnMachine {
    inner: Mutex<SubprocessSession>,
}

#[uniffi::export]
impl SubprocessTurnMachine {
    /// A machine; `None` bounds take the core's defaults.
    #[uniffi::constructor(default(max_line_bytes = None, grace_ms = None))]
    pub fn new(max_line_bytes: Option<u64>, grace_ms: Option<u64>) -> Self {
        let mut c = SubprocessConfig::default();
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

    /// The next output (JSON form), or `None`.
    pub fn poll_output(&self) -> Option<String> {
        locked(&self.inner)
            .poll_output()
            .map(|o| o.to_value().to_string())
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
}

// ---------------------------------------------------------------------------------------
// host

/// The host configuration the core parsed, in its JSON form (tokens counted, never shown).
///
/// # Errors
/// `ProtocolError::Config`.
#[uniffi::export]
pub fn host_config(config_json: String) -> Result<String, ProtocolError> {
    Ok(HostConfig::from_value(&parse_serde(&config_json)?)?
        .to_value()
        .to_string())
}

/// The `Authorization` header value a runner sends for a token (`None` for an empty one).
#[uniffi::export]
pub fn bearer_authorization(token: String) -> Option<String> {
    authorization_value(&token)
}

/// A WebSocket frame as the transport received it.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SocketEvent {
    /// The socket opened.
    Opened,
    /// A text frame.
    Text {
        /// The text.
        text: String,
    },
    /// A binary frame.
    Binary {
        /// The bytes.
        data: Vec<u8>,
    },
    /// The session asks to send a frame.
    Transmit {
        /// The frame.
        frame: String,
    },
    /// The session closed, with its reason code.
    SessionClose {
        /// The reason.
        reason: String,
    },
    /// The application or hub closes the socket.
    Close {
        /// Close code.
        code: u16,
        /// Close reason.
        reason: String,
    },
    /// A read, send or timer failed.
    Failed,
    /// The socket is closed.
    SocketClosed,
    /// The deadline of `poll_timeout()` was reached.
    Timeout,
}

/// What the socket host asks the transport to do.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SocketAction {
    /// Attach the session.
    Attach,
    /// Deliver this text to the session.
    Deliver {
        /// The text.
        text: String,
    },
    /// The peer sent something invalid (dropped).
    PeerError {
        /// Stable code.
        code: String,
        /// The core's text.
        detail: String,
    },
    /// Send this frame.
    Send {
        /// The frame.
        frame: String,
    },
    /// Detach the session.
    Detach,
    /// Start the close handshake.
    Close {
        /// Close code.
        code: u16,
        /// Close reason.
        reason: String,
        /// Abort if not closed by then.
        deadline_ms: u64,
    },
    /// Abort the socket.
    Abort,
    /// An output this binding does not know yet.
    Unknown {
        /// The core's debug text.
        debug: String,
    },
}

/// The host policy of one WebSocket (either side).
#[derive(uniffi::Object)]
pub struct SocketHost {
    inner: Mutex<core_host::SocketHost>,
}

#[uniffi::export]
impl SocketHost {
    /// A socket host from the core's host configuration (JSON text).
    ///
    /// # Errors
    /// `ProtocolError::Config`.
    #[uniffi::constructor]
    pub fn new(config_json: String) -> Result<Self, ProtocolError> {
        let c = HostConfig::from_value(&parse_serde(&config_json)?)?;
        Ok(Self {
            inner: Mutex::new(core_host::SocketHost::new(&c)),
        })
    }

    /// Feeds one event.
    ///
    /// # Errors
    /// `ProtocolError::State` with the host's code.
    pub fn handle_input(&self, now_ms: u64, event: SocketEvent) -> Result<(), ProtocolError> {
        let input = match event {
            SocketEvent::Opened => SocketInput::Opened,
            SocketEvent::Text { text } => SocketInput::Frame(InboundFrame::Text(text)),
            SocketEvent::Binary { data } => SocketInput::Frame(InboundFrame::Binary(data)),
            SocketEvent::Transmit { frame } => SocketInput::Transmit(frame),
            SocketEvent::SessionClose { reason } => SocketInput::SessionClose(reason),
            SocketEvent::Close { code, reason } => SocketInput::Close { code, reason },
            SocketEvent::Failed => SocketInput::Failed,
            SocketEvent::SocketClosed => SocketInput::SocketClosed,
            SocketEvent::Timeout => SocketInput::Timeout,
        };
        locked(&self.inner)
            .handle_input(now_ms, input)
            .map_err(|e| state(e.code(), &e))
    }

    /// The next action, or `None`.
    pub fn poll_output(&self) -> Option<SocketAction> {
        locked(&self.inner).poll_output().map(|o| match o {
            SocketOutput::Attach => SocketAction::Attach,
            SocketOutput::Deliver(text) => SocketAction::Deliver { text },
            SocketOutput::PeerError { code, detail } => SocketAction::PeerError {
                code: code.to_owned(),
                detail,
            },
            SocketOutput::Send(frame) => SocketAction::Send { frame },
            SocketOutput::Detach => SocketAction::Detach,
            SocketOutput::Close {
                code,
                reason,
                deadline_ms,
            } => SocketAction::Close {
                code,
                reason,
                deadline_ms,
            },
            SocketOutput::Abort => SocketAction::Abort,
            #[allow(unreachable_patterns)]
            other => SocketAction::Unknown {
                debug: format!("{other:?}"),
            },
        })
    }

    /// The deadline at which to feed `Timeout`.
    pub fn poll_timeout(&self) -> Option<u64> {
        locked(&self.inner).poll_timeout()
    }

    /// The socket's state name (`idle`, `open`, `closing`, `closed`).
    pub fn state(&self) -> String {
        locked(&self.inner).state().as_str().to_owned()
    }
}

/// One header.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Header {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// What a runner is doing, as the hub's host reports it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RunnerActivity {
    /// Runner id.
    pub runner_id: String,
    /// Open sockets.
    #[uniffi(default = 0)]
    pub sockets: u64,
    /// Frames kept for replay.
    #[uniffi(default = 0)]
    pub kept_frames: u64,
    /// Application events queued.
    #[uniffi(default = 0)]
    pub queued_events: u64,
    /// Readers waiting.
    #[uniffi(default = 0)]
    pub waiting_readers: u64,
    /// Awaiting `accept`.
    #[uniffi(default = false)]
    pub awaiting_accept: bool,
}

/// What happened at the hub's door and registry.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum HubEvent {
    /// An upgrade request (before the upgrade).
    Request {
        /// Connection id.
        conn: u64,
        /// Request headers.
        headers: Vec<Header>,
    },
    /// An upgraded socket.
    Upgraded {
        /// Connection id.
        conn: u64,
        /// Request headers.
        headers: Vec<Header>,
    },
    /// The host's authenticator answered.
    Authenticated {
        /// Connection id.
        conn: u64,
        /// The runner, or `None`: unknown token.
        runner_id: Option<String>,
    },
    /// A runner was registered.
    RunnerAdded {
        /// Runner id.
        runner_id: String,
        /// Every registered runner's activity.
        activity: Vec<RunnerActivity>,
    },
    /// The deadline of `poll_timeout()` was reached.
    Timeout,
}

/// What the hub host asks the transport to do.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum HubAction {
    /// Ask the authenticator about this token.
    Authenticate {
        /// Connection id.
        conn: u64,
        /// The bearer token.
        token: String,
    },
    /// Accept the connection for this runner.
    Accept {
        /// Connection id.
        conn: u64,
        /// Runner id.
        runner_id: String,
    },
    /// Reject the upgrade request (HTTP).
    Reject {
        /// Connection id.
        conn: u64,
        /// HTTP status.
        status: u16,
        /// Response body.
        body: String,
        /// The refusal's code.
        refusal: String,
    },
    /// Refuse the socket (close code).
    Refuse {
        /// Connection id.
        conn: u64,
        /// Close code.
        code: u16,
        /// Close reason.
        reason: String,
        /// The refusal's code.
        refusal: String,
    },
    /// Attach the socket to the runner.
    Attach {
        /// Connection id.
        conn: u64,
        /// Runner id.
        runner_id: String,
        /// First socket since the runner was registered.
        announce: bool,
    },
    /// Evict an idle runner.
    Evict {
        /// Runner id.
        runner_id: String,
    },
    /// An output this binding does not know yet.
    Unknown {
        /// The core's debug text.
        debug: String,
    },
}

fn headers(h: Vec<Header>) -> Vec<(String, String)> {
    h.into_iter().map(|h| (h.name, h.value)).collect()
}

/// The hub's door (bearer-token check) and runner registry (announce, idle eviction).
#[derive(uniffi::Object)]
pub struct HubHost {
    inner: Mutex<core_host::HubHost>,
}

#[uniffi::export]
impl HubHost {
    /// A hub host from the core's host configuration (JSON text).
    ///
    /// # Errors
    /// `ProtocolError::Config`.
    #[uniffi::constructor]
    pub fn new(config_json: String) -> Result<Self, ProtocolError> {
        let c = HostConfig::from_value(&parse_serde(&config_json)?)?;
        Ok(Self {
            inner: Mutex::new(core_host::HubHost::new(&c)),
        })
    }

    /// Feeds one event.
    ///
    /// # Errors
    /// `ProtocolError::State` with the host's code.
    pub fn handle_input(&self, now_ms: u64, event: HubEvent) -> Result<(), ProtocolError> {
        let input = match event {
            HubEvent::Request { conn, headers: h } => HubInput::Request {
                conn,
                headers: headers(h),
            },
            HubEvent::Upgraded { conn, headers: h } => HubInput::Upgraded {
                conn,
                headers: headers(h),
            },
            HubEvent::Authenticated { conn, runner_id } => {
                HubInput::Authenticated { conn, runner_id }
            }
            HubEvent::RunnerAdded {
                runner_id,
                activity,
            } => HubInput::RunnerAdded {
                runner_id,
                activity: activity
                    .into_iter()
                    .map(|a| core_host::RunnerActivity {
                        runner_id: a.runner_id,
                        sockets: a.sockets,
                        kept_frames: a.kept_frames,
                        queued_events: a.queued_events,
                        waiting_readers: a.waiting_readers,
                        awaiting_accept: a.awaiting_accept,
                    })
                    .collect(),
            },
            HubEvent::Timeout => HubInput::Timeout,
        };
        locked(&self.inner)
            .handle_input(now_ms, input)
            .map_err(|e| state(e.code(), &e))
    }

    /// The next action, or `None`.
    pub fn poll_output(&self) -> Option<HubAction> {
        locked(&self.inner).poll_output().map(|o| match o {
            HubOutput::Authenticate { conn, token } => HubAction::Authenticate {
                conn,
                token: token.as_str().to_owned(),
            },
            HubOutput::Accept { conn, runner_id } => HubAction::Accept { conn, runner_id },
            HubOutput::Reject {
                conn,
                status,
                body,
                refusal,
            } => HubAction::Reject {
                conn,
                status,
                body: body.to_owned(),
                refusal: refusal.code().to_owned(),
            },
            HubOutput::Refuse {
                conn,
                code,
                reason,
                refusal,
            } => HubAction::Refuse {
                conn,
                code,
                reason: reason.to_owned(),
                refusal: refusal.code().to_owned(),
            },
            HubOutput::Attach {
                conn,
                runner_id,
                announce,
            } => HubAction::Attach {
                conn,
                runner_id,
                announce,
            },
            HubOutput::Evict { runner_id } => HubAction::Evict { runner_id },
            #[allow(unreachable_patterns)]
            other => HubAction::Unknown {
                debug: format!("{other:?}"),
            },
        })
    }

    /// The deadline at which to feed `Timeout`.
    pub fn poll_timeout(&self) -> Option<u64> {
        locked(&self.inner).poll_timeout()
    }

    /// Registered runner ids, oldest first.
    pub fn runners(&self) -> Vec<String> {
        locked(&self.inner).runners().map(str::to_owned).collect()
    }

    /// Connections pending between the token check and the upgraded socket.
    pub fn pending_connections(&self) -> u64 {
        locked(&self.inner).pending_connections() as u64
    }
}
