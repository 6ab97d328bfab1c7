//! The local-run machine (seed 002) and the connection host machines. Rust enums map to
//! UniFFI enums; the local run's controller lines are also given as typed stream
//! messages (canonical events, receipts, diagnostics).

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::host::{
    self as core_host, auth::authorization_value, HostConfig, HubInput, HubOutput, InboundFrame,
    SocketInput, SocketOutput,
};
use stapel_runner_protocol::local::{self as core_local, LocalConfig, SignalKind};

use crate::errors::{state, ProtocolError};
use crate::events::{controller_item, StreamItem};
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
// Records cross UniFFI by value (no boxing across the boundary).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LocalOutput {
    /// Write this line (plus `\n`) to the controller.
    ToController {
        /// The line, exactly as the core wrote it (write it verbatim).
        line: String,
        /// The same line as a typed stream message (a canonical event, a command
        /// receipt or a diagnostic), read back by the core's stream reader.
        message: Option<StreamItem>,
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
        O::ToController(line) => LocalOutput::ToController {
            message: controller_item(&line),
            line,
        },
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
        let m = core_local::LocalRun::new(c).map_err(|e| state("local", e.code(), &e))?;
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
            .map_err(|e| state("local", e.code(), &e))
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
            .map_err(|e| state("host", e.code(), &e))
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
            .map_err(|e| state("host", e.code(), &e))
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
