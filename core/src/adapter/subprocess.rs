//! The subprocess session machine: seed 000's `SubprocessAdapter` protocol and the child's
//! lifecycle (spawn, turns, stop escalation), sans-IO.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::error::AdapterError;
use super::turn::TurnResult;
use super::usage::usage_from_mapping;
use crate::framing::{push_draining, FramerConfig, FramingError, LineFramer};
use crate::wire::{parse_value, DecodeError, UsageSplit};

/// Default [`SubprocessConfig::max_line_bytes`]: 1 MiB. Larger than the framer's 64 KiB
/// default because one `result` line carries the turn's whole final text.
pub const DEFAULT_TURN_MAX_LINE_BYTES: usize = 1024 * 1024;

/// Default [`SubprocessConfig::grace_ms`]: 2 s, waited after closing the child's stdin and
/// again after each signal of the stop escalation.
pub const DEFAULT_GRACE_MS: u64 = 2_000;

/// The variable that carries a role's `llm_base_url` to the child.
pub const LLM_BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// Configuration of a [`SubprocessSession`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubprocessConfig {
    /// Longest stdout line accepted from the child, in bytes before the `\n`. Default
    /// [`DEFAULT_TURN_MAX_LINE_BYTES`]. A longer line is a `line_too_long` adapter error
    /// naming the line; it is never buffered beyond this bound.
    pub max_line_bytes: usize,
    /// How long the stop escalation waits for the child to exit after closing its stdin,
    /// after `TERM` and after `KILL`, in ms. Default [`DEFAULT_GRACE_MS`].
    pub grace_ms: u64,
    /// Whether the session maps a `result` line's `usage` itself (with
    /// [`usage_from_mapping`](super::usage::usage_from_mapping); a missing or unmappable
    /// usage is then an error). Default `true`. With `false` the host maps it — say, with a
    /// caller's own mapping function: the `usage` may be absent or any JSON value, the
    /// [`TurnResult`]'s usage is all zeros, and the host reads the usage from
    /// [`result_line`](SubprocessSession::result_line).
    pub map_usage: bool,
}

impl Default for SubprocessConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_TURN_MAX_LINE_BYTES,
            grace_ms: DEFAULT_GRACE_MS,
            map_usage: true,
        }
    }
}

impl SubprocessConfig {
    /// A configuration with the given line bound (and the default grace).
    pub fn with_max_line_bytes(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes,
            ..Self::default()
        }
    }

    /// This configuration with the given grace period.
    #[must_use]
    pub fn grace_ms(mut self, grace_ms: u64) -> Self {
        self.grace_ms = grace_ms;
        self
    }

    /// This configuration with the given [`map_usage`](Self::map_usage).
    #[must_use]
    pub fn map_usage(mut self, map_usage: bool) -> Self {
        self.map_usage = map_usage;
        self
    }

    /// The keys of the JSON form: the field names.
    pub const KEYS: [&'static str; 3] = ["max_line_bytes", "grace_ms", "map_usage"];

    /// Defaults overridden by the keys present in `value` (see [`KEYS`](Self::KEYS)),
    /// read by the crate's one config reader ([`crate::config`]).
    ///
    /// ```
    /// use stapel_runner_protocol::adapter::SubprocessConfig;
    ///
    /// let c = SubprocessConfig::from_value(&serde_json::json!({"grace_ms": 10})).unwrap();
    /// assert_eq!(c.grace_ms, 10);
    /// let e = SubprocessConfig::from_value(&serde_json::json!({"grace_ms": -1})).unwrap_err();
    /// assert_eq!((e.code(), e.key()), ("out_of_range", "grace_ms"));
    /// ```
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(value: &Value) -> Result<Self, crate::config::ConfigError> {
        let r = crate::config::ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        Ok(Self {
            max_line_bytes: r.usize("max_line_bytes")?.unwrap_or(d.max_line_bytes),
            grace_ms: r.u64("grace_ms")?.unwrap_or(d.grace_ms),
            map_usage: r.bool("map_usage")?.unwrap_or(d.map_usage),
        })
    }

    /// The JSON form: every key of [`KEYS`](Self::KEYS) with its value.
    pub fn to_value(&self) -> Value {
        json!({"max_line_bytes": self.max_line_bytes, "grace_ms": self.grace_ms,
            "map_usage": self.map_usage})
    }
}

/// What the caller asks to start: the input of [`SubprocessInput::Open`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SpawnSpec {
    /// Program and arguments. Empty is `no_command`.
    pub command: Vec<String>,
    /// Variables the caller gives the child, in order (a later one replaces an earlier
    /// one of the same name).
    pub env: Vec<(String, String)>,
    /// The host's `PATH` — the only variable the child inherits.
    pub path: String,
    /// The role's `llm_base_url`; when non-empty it reaches the child as
    /// [`LLM_BASE_URL_ENV`].
    pub llm_base_url: Option<String>,
    /// Working directory; `None` inherits the host's.
    pub cwd: Option<String>,
}

impl SpawnSpec {
    /// A spec for `command` with the host's `path` and nothing else.
    pub fn new(command: Vec<String>, path: impl Into<String>) -> Self {
        Self {
            command,
            path: path.into(),
            ..Self::default()
        }
    }
}

/// What the host must start (the output [`SubprocessOutput::Spawn`]): `program args…` with
/// exactly `env` (the inherited environment cleared) in `cwd`, as the leader of a new
/// process group (session), stdin and stdout piped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnRequest {
    /// Program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// The complete environment: `PATH`, then the caller's variables, then
    /// [`LLM_BASE_URL_ENV`]; one entry per name, at the position where the name first
    /// appeared, holding its last value.
    pub env: Vec<(String, String)>,
    /// Working directory; `None` inherits the host's.
    pub cwd: Option<String>,
    /// Always `true`: start the child in a new process group (pgid = pid).
    pub new_process_group: bool,
}

impl SpawnRequest {
    fn from_spec(spec: SpawnSpec) -> Result<Self, AdapterError> {
        let mut parts = spec.command.into_iter();
        let program = parts.next().ok_or(AdapterError::NoCommand)?;
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set = |name: String, value: String| {
            match env.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => env.push((name, value)),
            };
        };
        set("PATH".to_owned(), spec.path);
        for (name, value) in spec.env {
            set(name, value);
        }
        if let Some(url) = spec.llm_base_url.filter(|u| !u.is_empty()) {
            set(LLM_BASE_URL_ENV.to_owned(), url);
        }
        Ok(Self {
            program,
            args: parts.collect(),
            env,
            cwd: spec.cwd,
            new_process_group: true,
        })
    }

    /// `{"program","args","env": {name: value, …} (in order),"cwd","new_process_group"}`.
    pub fn to_value(&self) -> Value {
        let env: Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({"program": self.program, "args": self.args, "env": env, "cwd": self.cwd,
               "new_process_group": self.new_process_group})
    }
}

/// A stop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopSignal {
    /// SIGTERM: ask to stop (`terminate()`).
    Term,
    /// SIGKILL: stop (`kill()`).
    Kill,
}

impl StopSignal {
    /// `TERM` or `KILL`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopSignal::Term => "TERM",
            StopSignal::Kill => "KILL",
        }
    }
}

/// Whom a [`SubprocessOutput::Signal`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalTarget {
    /// The child process itself (`terminate()` / `kill()` on its handle).
    Process,
    /// The process group the child leads (`killpg(pid, sig)`). Where the host cannot
    /// signal that group (it no longer exists, or the child left it), it signals the
    /// child process instead — which does nothing once the child is reaped.
    Group,
}

impl SignalTarget {
    /// `process` or `group`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalTarget::Process => "process",
            SignalTarget::Group => "group",
        }
    }
}

/// What the host feeds the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubprocessInput {
    /// Start a child: answered by [`SubprocessOutput::Spawn`] (or a `no_command` error).
    Open(SpawnSpec),
    /// The child runs: the host started it for the `Spawn` output, or started it by its
    /// own means (an injected spawn) and attaches it to a new machine.
    Spawned {
        /// Its pid, when it has one.
        pid: Option<u32>,
        /// `true` when it leads its own process group (pgid = pid): the escalation then
        /// signals the group.
        process_group: bool,
    },
    /// The `Spawn` output failed.
    SpawnFailed {
        /// The OS error text.
        message: String,
    },
    /// Start a turn with this prompt.
    StartTurn {
        /// The prompt (content: goes to the child only).
        prompt: String,
    },
    /// Bytes read from the child's stdout, in any chunking.
    Stdout(Vec<u8>),
    /// The child's stdout reached end of file.
    Eof,
    /// A `WriteStdin` output could not be written (the pipe is closed).
    StdinWriteFailed {
        /// The OS error text.
        message: String,
    },
    /// The child exited and was reaped. A host that reads stdout reports its `Eof`
    /// first.
    Exited,
    /// The caller closes the session: stop the child.
    Close,
    /// `now_ms` reached [`poll_timeout`](SubprocessSession::poll_timeout).
    Timeout,
}

/// What the machine asks of the host, or reports.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SubprocessOutput {
    /// Start the child (see [`SpawnRequest`]); report `Spawned` or `SpawnFailed`.
    Spawn(SpawnRequest),
    /// Write these bytes (one JSON line, `\n`-terminated) to the child's stdin; report
    /// `StdinWriteFailed` if the write fails.
    WriteStdin(String),
    /// Close the child's stdin (errors ignored). Wait for the child's exit from now on
    /// until [`poll_timeout`](SubprocessSession::poll_timeout): report `Exited` or
    /// `Timeout`.
    CloseStdin,
    /// Send `signal` to `target` (errors ignored); keep waiting for the exit.
    Signal {
        /// The process or its group.
        target: SignalTarget,
        /// Which signal.
        signal: StopSignal,
    },
    /// The escalation is over: close the child's stdout and release the handle. Always the
    /// last output of a session.
    CloseStdout,
    /// A progress event from the child: any line whose `type` is not `result` or `error`,
    /// as the JSON object it was.
    Progress(Map<String, Value>),
    /// The turn ended with a result.
    TurnResult(TurnResult),
    /// The turn (and, unless the code is `harness_error`, the session) ended with an
    /// adapter error.
    Error(AdapterError),
}

impl SubprocessOutput {
    /// JSON form: `{"type":"spawn","request"}`, `{"type":"write_stdin","data"}`,
    /// `{"type":"close_stdin"}`, `{"type":"signal","target","signal"}`,
    /// `{"type":"close_stdout"}`, `{"type":"progress","event"}`,
    /// `{"type":"turn_result","text","usage"}`, `{"type":"error","code","line_number"}`
    /// (plus `"message"` for `harness_error`).
    pub fn to_value(&self) -> Value {
        match self {
            SubprocessOutput::Spawn(r) => json!({"type": "spawn", "request": r.to_value()}),
            SubprocessOutput::WriteStdin(data) => json!({"type": "write_stdin", "data": data}),
            SubprocessOutput::CloseStdin => json!({"type": "close_stdin"}),
            SubprocessOutput::Signal { target, signal } => {
                json!({"type": "signal", "target": target.as_str(), "signal": signal.as_str()})
            }
            SubprocessOutput::CloseStdout => json!({"type": "close_stdout"}),
            SubprocessOutput::Progress(event) => json!({"type": "progress", "event": event}),
            SubprocessOutput::TurnResult(r) => {
                json!({"type": "turn_result", "text": r.text, "usage": r.usage.to_value()})
            }
            SubprocessOutput::Error(e) => {
                let mut out = Map::new();
                out.insert("type".into(), json!("error"));
                if let Value::Object(m) = e.to_value() {
                    out.extend(m);
                }
                Value::Object(out)
            }
        }
    }
}

/// What the machine knows of the running child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Child {
    /// It leads its own process group.
    process_group: bool,
}

impl Child {
    /// Where escalation signals go: the group when there is one.
    fn target(self) -> SignalTarget {
        if self.process_group {
            SignalTarget::Group
        } else {
            SignalTarget::Process
        }
    }
}

/// The step of the stop escalation the machine waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Stdin closed; `TERM` at the deadline.
    StdinClosed,
    /// `TERM` sent; `KILL` at the deadline.
    Terminated,
    /// `KILL` sent; give up waiting at the deadline.
    Killed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    New,
    Spawning,
    SpawningThenClose,
    Idle(Child),
    InTurn(Child),
    Closing {
        child: Child,
        stage: Stage,
        deadline: u64,
    },
    Closed,
}

/// The lifecycle state of a [`SubprocessSession`], as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SubprocessState {
    /// Nothing started: waiting for `Open` or `Spawned`.
    New,
    /// `Spawn` emitted; waiting for `Spawned` or `SpawnFailed` (a `Close` meanwhile is
    /// kept and applied once the child runs).
    Spawning,
    /// The child runs; no turn.
    Idle,
    /// A turn waits for its result.
    InTurn,
    /// The stop escalation runs; [`poll_timeout`](SubprocessSession::poll_timeout) is its
    /// next deadline.
    Closing,
    /// Done: the child is stopped (or was never started).
    Closed,
}

impl SubprocessState {
    /// `new`, `spawning`, `idle`, `in_turn`, `closing` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubprocessState::New => "new",
            SubprocessState::Spawning => "spawning",
            SubprocessState::Idle => "idle",
            SubprocessState::InTurn => "in_turn",
            SubprocessState::Closing => "closing",
            SubprocessState::Closed => "closed",
        }
    }
}

/// One child process's JSONL session, from spawn to stop, driven turn by turn.
///
/// # Protocol
///
/// * `start_turn(prompt)` writes `{"type":"turn","prompt":…}` + `\n` to the child's stdin.
/// * Each stdout line is a JSON object with a string `type`:
///   `{"type":"result","text":string,"usage":object}` ends the turn with a
///   [`TurnResult`] (usage mapped by
///   [`usage_from_mapping`](super::usage::usage_from_mapping), unless
///   [`SubprocessConfig::map_usage`] leaves that to the host);
///   `{"type":"error","message":string}` ends the turn with a `harness_error`; any other
///   `type` is a progress event, passed through. Empty lines are skipped. Extra keys in
///   `result` and `error` lines are ignored.
/// * Stream-level faults close the session and stop the child (it is out of sync): a
///   line that is not JSON (`not_json`), too long (`line_too_long`), not UTF-8
///   (`invalid_utf8`), not a message (`invalid_message`), a bad result
///   (`invalid_result`, `invalid_usage`), a `result`/`error` outside a turn
///   (`unexpected_message`), end of file during a turn (`unexpected_eof`), and a failed
///   stdin write (`stdin_closed`). Errors name the 1-based stdout line number; numbering
///   runs across turns. A `harness_error` ends only the turn.
///
/// # Stop escalation
///
/// Closing (by `Close`, a stream fault, or end of stdout) runs: `CloseStdin`, wait up to
/// `grace_ms` for `Exited`; then `Signal TERM`, wait `grace_ms`; then `Signal KILL`, wait
/// `grace_ms`. TERM and KILL go to the child's group when it leads one, else to the
/// process. When the child has exited (or the last wait ran out): `Signal KILL` to the
/// group (if there is one: it reaps anything the child left behind), then `CloseStdout`,
/// and the session is closed. No TERM or process signal follows `Exited`.
///
/// # Call order
///
/// 1. Create with [`new`](Self::new) (state `new`), then feed `Open(spec)` and perform the
///    `Spawn` output, reporting `Spawned` or `SpawnFailed` — or, for a child the host
///    started itself, feed `Spawned` directly.
/// 2. Call [`handle_input`](Self::handle_input)`(now_ms, input)` for each event, then
///    drain [`poll_output`](Self::poll_output) until `None`, performing every output in
///    order (spawn, write, close, signal) and reporting failures and exits as inputs.
/// 3. While [`poll_timeout`](Self::poll_timeout) is `Some(deadline)` (only in `closing`),
///    wait for the child's exit: report `Exited` when it exits, else `Timeout` once
///    `now_ms >= deadline`. A `Timeout` before the deadline is ignored.
///
/// `now_ms` is any monotonic clock of the host's; it is read only to set deadlines.
///
/// # Transitions
///
/// | state | input | outputs | next state |
/// |---|---|---|---|
/// | `new` | `Open` with an empty command | `Error(no_command)` | `closed` |
/// | `new` | `Open` | `Spawn` | `spawning` |
/// | `new`, `spawning` | `Spawned` | — | `idle` |
/// | `spawning` | `SpawnFailed` | `Error(spawn_failed)` | `closed` |
/// | `new` | `Close` | — | `closed` |
/// | `spawning` | `Close` | — (`Spawned` then starts the escalation) | `spawning` |
/// | `new`, `spawning` | `StartTurn` | error `not_spawned` | unchanged |
/// | `idle` | `StartTurn` | `WriteStdin` | `in_turn` |
/// | `in_turn` | `StartTurn` | error `turn_in_progress` | `in_turn` |
/// | `in_turn` | `Stdout`: progress line | `Progress` | `in_turn` |
/// | `in_turn` | `Stdout`: `result` / `error` line | `TurnResult` / `Error(harness_error)` | `idle` |
/// | `idle`, `in_turn` | `Stdout`: stream fault | `Error(…)`, `CloseStdin` | `closing` (stdin closed) |
/// | `in_turn` | `Eof` | `Error(unexpected_eof)`, `CloseStdin` | `closing` (stdin closed) |
/// | `idle` | `Eof` | `CloseStdin` | `closing` (stdin closed) |
/// | `idle`, `in_turn` | `StdinWriteFailed` | `Error(stdin_closed)`, `CloseStdin` | `closing` (stdin closed) |
/// | `idle`, `in_turn` | `Close` | `CloseStdin` | `closing` (stdin closed) |
/// | `idle`, `in_turn` | `Exited` | as `Eof`, then `Signal KILL group`?, `CloseStdout` | `closed` |
/// | `closing` (stdin closed) | `Timeout` | `Signal TERM` | `closing` (terminated) |
/// | `closing` (terminated) | `Timeout` | `Signal KILL` | `closing` (killed) |
/// | `closing` (killed) | `Timeout` | `Signal KILL group`?, `CloseStdout` | `closed` |
/// | `closing` | `Exited` | `Signal KILL group`?, `CloseStdout` | `closed` |
/// | `closing`, `closed` | `StartTurn` | error `session_closed` | unchanged |
///
/// "`Signal KILL group`?" is emitted only when the child leads a process group. Every
/// other input (stdout after closing, a second `Close`, `Timeout` outside `closing`,
/// `Spawned` or `Exited` where the table has no row) is ignored.
///
/// ```
/// use stapel_runner_protocol::adapter::{SubprocessConfig, SubprocessInput, SubprocessOutput, SubprocessSession};
///
/// let mut s = SubprocessSession::new(SubprocessConfig::default());
/// s.handle_input(0, SubprocessInput::Spawned { pid: Some(42), process_group: true }).unwrap();
/// s.handle_input(0, SubprocessInput::StartTurn { prompt: "hi".into() }).unwrap();
/// assert_eq!(s.poll_output(), Some(SubprocessOutput::WriteStdin("{\"type\":\"turn\",\"prompt\":\"hi\"}\n".into())));
/// s.handle_input(0, SubprocessInput::Stdout(br#"{"type":"result","text":"ok","usage":{"input_tokens":3,"output_tokens":1}}
/// "#.to_vec())).unwrap();
/// let Some(SubprocessOutput::TurnResult(r)) = s.poll_output() else { panic!() };
/// assert_eq!((r.text.as_str(), r.usage.total_tokens()), ("ok", 4));
/// assert_eq!(s.poll_output(), None);
/// s.handle_input(10, SubprocessInput::Close).unwrap();
/// assert_eq!(s.poll_output(), Some(SubprocessOutput::CloseStdin));
/// assert_eq!(s.poll_timeout(), Some(2_010));
/// ```
#[derive(Debug, Clone)]
pub struct SubprocessSession {
    framer: LineFramer,
    grace_ms: u64,
    state: State,
    line_number: u64,
    pending: VecDeque<SubprocessOutput>,
    result_line: Option<Map<String, Value>>,
    map_usage: bool,
}

impl SubprocessSession {
    /// A session in state `new`: nothing started yet.
    pub fn new(config: SubprocessConfig) -> Self {
        let mut framer_config = FramerConfig::with_max_line_bytes(config.max_line_bytes);
        // Empty lines are counted here (so line numbers match the stream) and skipped.
        framer_config.skip_empty_lines = false;
        Self {
            framer: LineFramer::new(framer_config),
            grace_ms: config.grace_ms,
            map_usage: config.map_usage,
            state: State::New,
            line_number: 0,
            pending: VecDeque::new(),
            result_line: None,
        }
    }

    /// The lifecycle state.
    pub fn state(&self) -> SubprocessState {
        match self.state {
            State::New => SubprocessState::New,
            State::Spawning | State::SpawningThenClose => SubprocessState::Spawning,
            State::Idle(_) => SubprocessState::Idle,
            State::InTurn(_) => SubprocessState::InTurn,
            State::Closing { .. } => SubprocessState::Closing,
            State::Closed => SubprocessState::Closed,
        }
    }

    /// `true` while a turn waits for its result.
    pub fn in_turn(&self) -> bool {
        matches!(self.state, State::InTurn(_))
    }

    /// The `result` line that ended the most recent turn with a
    /// [`SubprocessOutput::TurnResult`], as the JSON object the child wrote (every key,
    /// not only `text` and `usage`): what a host hands its caller as the raw answer.
    /// `None` before the first result; replaced by the next one. Bounded by the line
    /// bound ([`SubprocessConfig::max_line_bytes`]).
    pub fn result_line(&self) -> Option<&Map<String, Value>> {
        self.result_line.as_ref()
    }

    /// `true` once no turn can start any more: the session is closing or closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closing { .. } | State::Closed)
    }

    /// The deadline at which the host feeds [`SubprocessInput::Timeout`] unless the child
    /// exits first; `None` outside the stop escalation.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Closing { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Feed one input. See the [type docs](Self).
    ///
    /// # Errors
    /// Local misuse only: `turn_in_progress` (a turn is running), `session_closed`
    /// (`StartTurn` once closing or closed) or `not_spawned` (`StartTurn` before the child
    /// runs). Harness faults are reported as [`SubprocessOutput::Error`].
    pub fn handle_input(
        &mut self,
        now_ms: u64,
        input: SubprocessInput,
    ) -> Result<(), AdapterError> {
        match input {
            SubprocessInput::Open(spec) => {
                if self.state == State::New {
                    match SpawnRequest::from_spec(spec) {
                        Ok(request) => {
                            self.state = State::Spawning;
                            self.pending.push_back(SubprocessOutput::Spawn(request));
                        }
                        Err(e) => {
                            self.state = State::Closed;
                            self.pending.push_back(SubprocessOutput::Error(e));
                        }
                    }
                }
            }
            SubprocessInput::Spawned { process_group, .. } => {
                let child = Child { process_group };
                match self.state {
                    State::New | State::Spawning => self.state = State::Idle(child),
                    State::SpawningThenClose => self.begin_close(now_ms, child),
                    _ => {}
                }
            }
            SubprocessInput::SpawnFailed { message } => {
                if matches!(self.state, State::Spawning | State::SpawningThenClose) {
                    self.state = State::Closed;
                    self.pending
                        .push_back(SubprocessOutput::Error(AdapterError::SpawnFailed {
                            message,
                        }));
                }
            }
            SubprocessInput::StartTurn { prompt } => match self.state {
                State::New | State::Spawning | State::SpawningThenClose => {
                    return Err(AdapterError::NotSpawned)
                }
                State::InTurn(_) => return Err(AdapterError::TurnInProgress),
                State::Closing { .. } | State::Closed => return Err(AdapterError::SessionClosed),
                State::Idle(child) => {
                    let mut line = json!({"type": "turn", "prompt": prompt}).to_string();
                    line.push('\n');
                    self.state = State::InTurn(child);
                    self.pending.push_back(SubprocessOutput::WriteStdin(line));
                }
            },
            SubprocessInput::Stdout(bytes) => {
                if self.running().is_some() {
                    self.push_stdout(now_ms, &bytes);
                    self.drain_lines(now_ms);
                }
            }
            SubprocessInput::Eof => {
                self.stdout_ended(now_ms);
            }
            SubprocessInput::StdinWriteFailed { message } => {
                if let Some(child) = self.running() {
                    self.fault(now_ms, child, AdapterError::StdinClosed { message });
                }
            }
            SubprocessInput::Exited => match self.state {
                State::Idle(_) | State::InTurn(_) => {
                    self.stdout_ended(now_ms);
                    if let State::Closing { child, .. } = self.state {
                        self.finish(child);
                    }
                }
                State::Closing { child, .. } => self.finish(child),
                _ => {}
            },
            SubprocessInput::Close => match self.state {
                State::New => self.state = State::Closed,
                State::Spawning => self.state = State::SpawningThenClose,
                State::Idle(child) | State::InTurn(child) => self.begin_close(now_ms, child),
                _ => {}
            },
            SubprocessInput::Timeout => {
                if let State::Closing {
                    child,
                    stage,
                    deadline,
                } = self.state
                {
                    if now_ms >= deadline {
                        self.escalate(now_ms, child, stage);
                    }
                }
            }
        }
        Ok(())
    }

    /// Next output; `None` when nothing more is ready.
    pub fn poll_output(&mut self) -> Option<SubprocessOutput> {
        self.pending.pop_front()
    }

    /// The child, while the session runs (idle or in a turn).
    fn running(&self) -> Option<Child> {
        match self.state {
            State::Idle(child) | State::InTurn(child) => Some(child),
            _ => None,
        }
    }

    /// The one place stdout bytes enter the framer: it takes what fits in its bounded
    /// queue, the lines ready so far are handled to make room, then the rest is taken.
    fn push_stdout(&mut self, now_ms: u64, bytes: &[u8]) {
        // The framer only refuses bytes after `finish`, which happens only when stdout
        // ended, after which the session no longer runs and never calls this.
        let _ = push_draining(self, |s| &mut s.framer, bytes, |s| s.drain_lines(now_ms));
    }

    fn stdout_ended(&mut self, now_ms: u64) {
        if self.running().is_none() {
            return;
        }
        self.framer.finish();
        self.drain_lines(now_ms);
        match self.state {
            State::InTurn(child) => self.fault(now_ms, child, AdapterError::UnexpectedEof),
            State::Idle(child) => self.begin_close(now_ms, child),
            _ => {}
        }
    }

    fn deadline(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.grace_ms)
    }

    fn begin_close(&mut self, now_ms: u64, child: Child) {
        self.pending.push_back(SubprocessOutput::CloseStdin);
        self.state = State::Closing {
            child,
            stage: Stage::StdinClosed,
            deadline: self.deadline(now_ms),
        };
    }

    fn escalate(&mut self, now_ms: u64, child: Child, stage: Stage) {
        let (signal, next) = match stage {
            Stage::StdinClosed => (StopSignal::Term, Stage::Terminated),
            Stage::Terminated => (StopSignal::Kill, Stage::Killed),
            Stage::Killed => return self.finish(child),
        };
        self.pending.push_back(SubprocessOutput::Signal {
            target: child.target(),
            signal,
        });
        self.state = State::Closing {
            child,
            stage: next,
            deadline: self.deadline(now_ms),
        };
    }

    fn finish(&mut self, child: Child) {
        if child.process_group {
            self.pending.push_back(SubprocessOutput::Signal {
                target: SignalTarget::Group,
                signal: StopSignal::Kill,
            });
        }
        self.pending.push_back(SubprocessOutput::CloseStdout);
        self.state = State::Closed;
    }

    fn fault(&mut self, now_ms: u64, child: Child, e: AdapterError) {
        self.pending.push_back(SubprocessOutput::Error(e));
        self.begin_close(now_ms, child);
    }

    fn drain_lines(&mut self, now_ms: u64) {
        while let Some(item) = self.framer.poll_line() {
            let Some(child) = self.running() else {
                continue;
            };
            match item {
                Ok(line) => {
                    self.line_number = self.line_number.saturating_add(1);
                    if let Err(e) = self.handle_line(&line) {
                        self.fault(now_ms, child, e);
                    }
                }
                Err(FramingError::LineTooLong {
                    line_number,
                    max_line_bytes,
                }) => {
                    self.line_number = line_number;
                    self.fault(
                        now_ms,
                        child,
                        AdapterError::LineTooLong {
                            line_number,
                            max_line_bytes,
                        },
                    );
                }
                Err(FramingError::InvalidUtf8 { line_number, .. }) => {
                    self.line_number = line_number;
                    self.fault(now_ms, child, AdapterError::InvalidUtf8 { line_number });
                }
                Err(_) => {}
            }
        }
    }

    /// One stdout line of a running session; `Err` is a stream-level fault.
    fn handle_line(&mut self, line: &str) -> Result<(), AdapterError> {
        let n = self.line_number;
        if line.trim().is_empty() {
            return Ok(());
        }
        let value = match parse_value(line.as_bytes()) {
            Ok(v) => v,
            Err(DecodeError::DuplicateKey { message }) => {
                return Err(AdapterError::InvalidMessage {
                    line_number: n,
                    reason: message,
                })
            }
            Err(e) => {
                return Err(AdapterError::NotJson {
                    line_number: n,
                    reason: e.to_string(),
                })
            }
        };
        let Value::Object(obj) = value else {
            return Err(AdapterError::InvalidMessage {
                line_number: n,
                reason: "a message must be a JSON object".into(),
            });
        };
        let Some(ty) = obj.get("type").and_then(Value::as_str) else {
            return Err(AdapterError::InvalidMessage {
                line_number: n,
                reason: "`type` must be a string".into(),
            });
        };
        let child = match self.state {
            State::InTurn(child) => child,
            _ if ty == "result" || ty == "error" => {
                return Err(AdapterError::UnexpectedMessage {
                    line_number: n,
                    message_type: ty.to_owned(),
                })
            }
            _ => {
                self.pending.push_back(SubprocessOutput::Progress(obj));
                return Ok(());
            }
        };
        match ty {
            "result" => {
                let r = Self::result(&obj, self.map_usage).map_err(|e| e.with_line(n))?;
                self.state = State::Idle(child);
                self.result_line = Some(obj);
                self.pending.push_back(SubprocessOutput::TurnResult(r));
            }
            "error" => {
                let message = obj.get("message").and_then(Value::as_str).ok_or_else(|| {
                    AdapterError::InvalidMessage {
                        line_number: n,
                        reason: "an error message needs a string `message`".into(),
                    }
                })?;
                self.state = State::Idle(child);
                self.pending
                    .push_back(SubprocessOutput::Error(AdapterError::HarnessError {
                        line_number: n,
                        message: message.to_owned(),
                    }));
            }
            _ => self.pending.push_back(SubprocessOutput::Progress(obj)),
        }
        Ok(())
    }

    fn result(obj: &Map<String, Value>, map_usage: bool) -> Result<TurnResult, AdapterError> {
        let bad = |reason: &str| AdapterError::InvalidResult {
            line_number: None,
            reason: reason.to_owned(),
        };
        let text = obj
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`text` must be a string"))?;
        if !map_usage {
            return TurnResult::try_new(text, UsageSplit::default());
        }
        let usage = obj
            .get("usage")
            .filter(|u| !u.is_null())
            .ok_or_else(|| bad("`usage` is required"))?;
        TurnResult::try_new(text, usage_from_mapping(usage)?)
    }
}
