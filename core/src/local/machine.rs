//! The local-run machine: seed 002's deterministic lifecycle as a sans-IO state machine.

use std::collections::VecDeque;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::canonical::canonical_json;
use super::error::{HarnessViolation, LocalError, ModelError};
use super::events::{EventClock, EventFactory, DEFAULT_CLOCK_START_MS, DEFAULT_CLOCK_STEP_MS};
use super::ledger::{
    CommandLedger, LedgerVerdict, DEFAULT_LEDGER_MAX_BYTES, DEFAULT_LEDGER_MAX_ENTRIES,
};
use super::logtail::{LogTail, DEFAULT_LOG_MAX_BYTES, DEFAULT_LOG_MAX_LINES};
use super::models::{
    check_id, is_known_event_type, parse_json, validate_run_result, validate_runtime_request,
    CommandEnvelope, CommandReceipt, CommandType, DiagnosticLevel, HarnessCommand, HarnessMessage,
    HarnessMessageType, ReceiptStatus, RunnerCommand, StreamMessage,
};
use super::reconcile::{reconcile_terminal, Intent, ProcessExit};
use crate::framing::{FramerConfig, FramingError, LineFramer, LineResult, DEFAULT_MAX_LINE_BYTES};

/// Receipt detail of an applied command.
pub(crate) const DETAIL_APPLIED: &str = "command applied";
/// Receipt detail of a duplicate.
pub(crate) const DETAIL_DUPLICATE: &str = "equivalent command already applied";
/// Receipt detail of a reused `commandId` with different content.
pub(crate) const DETAIL_REUSED: &str = "commandId was reused with different data";
/// Receipt detail of a `controllerSeq` gap.
pub(crate) const DETAIL_NOT_CONTIGUOUS: &str = "controllerSeq is not contiguous";
/// Receipt detail of a wrong command schema id.
pub(crate) const DETAIL_UNSUPPORTED_SCHEMA: &str = "unsupported command schema";
/// Receipt detail of any command received after the run finished.
pub(crate) const DETAIL_EXPIRED: &str =
    "This request expired because the local run already finished. Start a new run.";
/// Message of the `duplicate_terminal_ignored` harness diagnostic.
pub(crate) const DUPLICATE_TERMINAL_MESSAGE: &str =
    "Duplicate terminal event ignored; the first terminal event remains authoritative.";
/// Message of the `duplicate_semantic_result_ignored` harness diagnostic.
pub(crate) const DUPLICATE_RESULT_MESSAGE: &str =
    "Duplicate semantic result ignored; the first result remains authoritative.";
/// Receipt detail of a second `turn.interrupt` / `turn.stop` while one is accepted and the
/// harness has not yet reported the turn's end.
pub(crate) const DETAIL_INTERRUPT_PENDING: &str = "an interrupt was already accepted for this turn";
/// Working directory reported in `workspace.ready` when neither the config nor the
/// `run.prepare` payload declares one.
pub(crate) const DEFAULT_WORKING_DIRECTORY: &str = ".";

/// Receipt detail of a command type the local runner does not implement (one of the 18
/// it does not run, or a type outside them). The original runner's wording, kept for
/// wire compatibility.
pub(crate) fn detail_not_implemented(command_type: &str) -> String {
    format!("command {command_type} is not implemented in Phase 2")
}
/// Driver session id the fake harness reports in `session.started`.
pub(crate) const FAKE_DRIVER_SESSION_ID: &str = "driver_phase2_fake";
/// Transport named in `harness.starting` / `harness.ready`.
pub(crate) const HARNESS_TRANSPORT: &str = "stdio_jsonl";

/// Configuration of a [`LocalRun`]. Every bound has a documented default and a typed
/// outcome when hit. Deserializable from a JSON object with these snake_case keys (all
/// optional; unknown keys are an error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LocalConfig {
    /// `runId` of every event (1..=160 chars). Default `run_local`.
    pub run_id: String,
    /// `normalizedSessionId` of every event (1..=160 chars). Default `session_local`.
    pub normalized_session_id: String,
    /// `sourceInstanceId` of every event (1..=160 chars). Default `runner_local`.
    pub source_instance_id: String,
    /// Unix ms of the first event's `emittedAt`. Default 2026-01-01T00:00:00.000Z.
    pub clock_start_ms: u64,
    /// Ms added to `emittedAt` per event. Default 1.
    pub clock_step_ms: u64,
    /// Program in the `Spawn` output. Default `fake-harness`.
    pub harness_program: String,
    /// Arguments in the `Spawn` output. Default none.
    pub harness_args: Vec<String>,
    /// Candidate environment offered by the host. Only names listed in `env_allow` reach
    /// the `Spawn` output; the host must clear the inherited environment. Default empty.
    pub harness_env: IndexMap<String, String>,
    /// Names allowed into the harness environment. Default `["PATH"]`.
    pub env_allow: Vec<String>,
    /// `driverKind` of `harness.starting` / `harness.ready`. Default `fake`.
    pub driver_kind: String,
    /// Bound on one harness stdout or stderr line. Default 65,536. Oversized stdout is a
    /// protocol violation that fails the run; oversized stderr is drained and marked.
    pub max_line_bytes: usize,
    /// Bound on one controller line. Default 65,536. An oversized line is answered with an
    /// `error` diagnostic and skipped.
    pub max_controller_line_bytes: usize,
    /// Log-tail lines kept. Default 200; older lines are dropped and counted.
    pub log_max_lines: usize,
    /// Log-tail bytes kept. Default 16,384; older lines are dropped and counted.
    pub log_max_bytes: usize,
    /// Command-ledger entries kept. Default 1,024; the oldest are evicted (see
    /// [`CommandLedger`]).
    pub ledger_max_entries: usize,
    /// Command-ledger bytes kept. Default 1 MiB; the oldest are evicted.
    pub ledger_max_bytes: usize,
    /// Harness ready deadline after `run.prepare`. Default 2,000 ms; missing it is the
    /// `harness_ready_timeout` protocol violation.
    pub ready_timeout_ms: u64,
    /// Grace between TERM and KILL of the harness group. Default 2,000 ms.
    pub shutdown_grace_ms: u64,
    /// Lifetime of a pending runtime request. Default 300,000 ms (5 min, the original's
    /// interactive request timeout); then the runner emits `runtime_request.expired` and
    /// ends the run (intent *request expired*, reason `request_expired`: TERM → grace →
    /// KILL, then exactly one `run.terminal`).
    pub request_timeout_ms: u64,
    /// Time the harness has to exit after its terminal proposal. Default 10,000 ms (the
    /// harness command timeout); then the group is terminated.
    pub exit_timeout_ms: u64,
    /// Controller lines held while `run.prepare` waits for `ready`. Default 64; a command
    /// beyond it is rejected (not recorded) with a "command queue is full" receipt.
    pub max_queued_commands: usize,
    /// Pending runtime requests held. Default 64; one more is the
    /// `too_many_pending_requests` protocol violation.
    pub max_pending_requests: usize,
    /// `workingDirectory` of the `workspace.ready` event. Default `None`: the
    /// `run.prepare` payload's `workingDirectory` string if it declares one, else `.`.
    /// (The machine does not choose the harness's directory; the host does, and should
    /// set this to the directory it starts the harness in.)
    pub working_directory: Option<String>,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            run_id: "run_local".into(),
            normalized_session_id: "session_local".into(),
            source_instance_id: "runner_local".into(),
            clock_start_ms: DEFAULT_CLOCK_START_MS,
            clock_step_ms: DEFAULT_CLOCK_STEP_MS,
            harness_program: "fake-harness".into(),
            harness_args: Vec::new(),
            harness_env: IndexMap::new(),
            env_allow: vec!["PATH".into()],
            driver_kind: "fake".into(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_controller_line_bytes: DEFAULT_MAX_LINE_BYTES,
            log_max_lines: DEFAULT_LOG_MAX_LINES,
            log_max_bytes: DEFAULT_LOG_MAX_BYTES,
            ledger_max_entries: DEFAULT_LEDGER_MAX_ENTRIES,
            ledger_max_bytes: DEFAULT_LEDGER_MAX_BYTES,
            ready_timeout_ms: 2_000,
            shutdown_grace_ms: 2_000,
            request_timeout_ms: 300_000,
            exit_timeout_ms: 10_000,
            max_queued_commands: 64,
            max_pending_requests: 64,
            working_directory: None,
        }
    }
}

impl LocalConfig {
    /// Read a config from a JSON object (see the field docs for keys and defaults) with
    /// the crate's one config reader ([`crate::config`]).
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(v: &Value) -> Result<Self, crate::config::ConfigError> {
        crate::config::from_serde(v)
    }

    fn validate(&self) -> Result<(), LocalError> {
        for (f, v) in [
            ("run_id", &self.run_id),
            ("normalized_session_id", &self.normalized_session_id),
            ("source_instance_id", &self.source_instance_id),
        ] {
            check_id(f, v).map_err(|e| LocalError::InvalidConfig(e.to_string()))?;
        }
        if self.harness_program.is_empty() {
            return Err(LocalError::InvalidConfig(
                "harness_program must not be empty".into(),
            ));
        }
        Ok(())
    }
}

/// A signal for the harness process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SignalKind {
    /// SIGTERM: ask the group to stop.
    #[serde(rename = "TERM")]
    Term,
    /// SIGKILL: stop the group.
    #[serde(rename = "KILL")]
    Kill,
}

impl SignalKind {
    /// `TERM` or `KILL`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalKind::Term => "TERM",
            SignalKind::Kill => "KILL",
        }
    }
}

/// What the host must start: `program args…` with exactly `env` (the inherited
/// environment cleared) as the leader of a new process group, stdin/stdout/stderr piped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// Program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// The complete environment, sorted by name.
    pub env: Vec<(String, String)>,
    /// Always `true`: start the child in a new process group (pgid = pid).
    pub new_process_group: bool,
}

/// An input the host reports to [`LocalRun::handle_input`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// Bytes read from the controller (runner stdin), any chunking.
    ControllerBytes(Vec<u8>),
    /// The controller closed its stream (runner stdin EOF).
    ControllerEof,
    /// Bytes read from the harness stdout, any chunking.
    HarnessStdout(Vec<u8>),
    /// Bytes read from the harness stderr, any chunking.
    HarnessStderr(Vec<u8>),
    /// The `Spawn` output succeeded; `pid` is also the process group id.
    HarnessSpawned {
        /// Child pid (= pgid).
        pid: u32,
    },
    /// The `Spawn` output failed.
    HarnessSpawnFailed {
        /// The OS error text.
        message: String,
    },
    /// The harness leader was reaped. The host must first deliver all of its stdout and
    /// stderr bytes (read both pipes to EOF, then wait).
    HarnessExited {
        /// Exit code, `None` when ended by a signal.
        code: Option<i32>,
        /// Signal number, if any.
        signal: Option<i32>,
    },
    /// The deadline of [`LocalRun::poll_timeout`] passed (`now_ms >= deadline`).
    Timeout,
}

/// An action or line for the host, pulled from [`LocalRun::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// Write this `paperclip.runner.stream.v1` line plus `\n` to the controller.
    ToController(String),
    /// Write this `paperclip.fake_harness.command.v1` line plus `\n` to the harness stdin.
    ToHarness(String),
    /// Start the harness (see [`SpawnRequest`]); report `HarnessSpawned` or
    /// `HarnessSpawnFailed`.
    Spawn(SpawnRequest),
    /// Close the harness stdin.
    CloseHarnessStdin,
    /// Send `signal` to the whole process group `group` (`kill(-group, sig)`); a group
    /// that no longer exists (ESRCH) is success.
    Signal {
        /// Process group id (the harness pid).
        group: u32,
        /// Which signal.
        signal: SignalKind,
    },
    /// The runner is done: exit with this code (0 after `run.terminal`; 1 when the
    /// controller closed before `run.prepare`). Controller lines may still be fed after
    /// it; each is answered as expired.
    Exit(i32),
}

impl Output {
    /// The output's stable name, the tag every binding uses for it: `to_controller`,
    /// `to_harness`, `spawn`, `close_harness_stdin`, `signal`, `exit`.
    pub fn kind(&self) -> &'static str {
        match self {
            Output::ToController(_) => "to_controller",
            Output::ToHarness(_) => "to_harness",
            Output::Spawn(_) => "spawn",
            Output::CloseHarnessStdin => "close_harness_stdin",
            Output::Signal { .. } => "signal",
            Output::Exit(_) => "exit",
        }
    }
}

/// The outcome of dispatching one recorded command.
enum Dispatch {
    /// Receipt `accepted` now.
    Applied,
    /// The receipt waits (`run.prepare` until the harness is ready).
    Deferred,
    /// Receipt `rejected` with this detail.
    Rejected(String),
}

/// The deferred receipt of `run.prepare`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingReceipt {
    command_id: String,
    controller_seq: u64,
}

/// Where the run is. Process, readiness and shutdown exist only while the harness is ours.
#[derive(Debug)]
enum Phase {
    /// Waiting for `run.prepare`.
    Unprepared,
    /// `run.prepare` was applied and the harness process is ours.
    Live(Live),
    /// `run.terminal` was emitted (or the controller closed before `run.prepare`); every
    /// later command is answered as expired.
    Finished,
}

/// The supervised harness, between `run.prepare` and its exit.
#[derive(Debug)]
struct Live {
    process: Process,
    readiness: Readiness,
    shutdown: Shutdown,
}

/// The harness process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Process {
    /// `Spawn` was output; waiting for `HarnessSpawned` / `HarnessSpawnFailed`.
    Spawning,
    /// Running as the leader of process group `pid`.
    Running {
        /// Pid = process group id.
        pid: u32,
    },
    /// Reaped or never started; the run finishes within the same input.
    Gone,
}

/// The harness's `ready` handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Readiness {
    /// Waiting for `ready`; the `run.prepare` receipt is deferred and controller lines
    /// are queued. Missing `deadline` is the `harness_ready_timeout` violation.
    Awaiting {
        receipt: PendingReceipt,
        deadline: u64,
    },
    /// `ready` arrived (`harness.ready` emitted, `run.prepare` accepted).
    Ready,
    /// `run.prepare` was rejected before `ready` (a violation, the ready deadline, an
    /// early exit or a failed spawn); the harness never becomes ready.
    Failed,
}

/// Termination and its escalation (TERM → grace → KILL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    /// Not terminating; harness stdin is open. `exit_deadline`: the harness's terminal
    /// proposal arrived and it must exit by then.
    Open { exit_deadline: Option<u64> },
    /// Stdin closed; TERM waits for `HarnessSpawned` (terminated while spawning).
    TermPending,
    /// Stdin closed and TERM sent; KILL at `kill_deadline`.
    Grace { kill_deadline: u64 },
    /// KILL sent (at the grace deadline or as the sweep after the exit).
    Killed,
}

/// The conversation the controller drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Session {
    /// No `session.open` yet.
    Closed,
    /// `session.open` applied (it stays open: `session.close` is only forwarded).
    Open(Turn),
}

/// The single turn of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// No `turn.start` yet.
    NotStarted,
    /// `turn.start` applied and the harness has not reported the turn's end.
    Active(Interrupt),
    /// The harness reported `turn.completed`/`failed`/`interrupted`/`cancelled`.
    Ended,
}

/// A pending interrupt of the active turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupt {
    /// No `turn.interrupt` / `turn.stop` accepted.
    None,
    /// One was accepted; another is rejected ([`DETAIL_INTERRUPT_PENDING`]).
    Accepted,
}

/// The controller's input stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ControllerStream {
    /// Bytes may still arrive.
    Open,
    /// EOF arrived while `run.prepare` waited for `ready`; it takes effect after the
    /// queued lines.
    EofQueued,
    /// EOF handled.
    Closed,
}

/// The local-run machine (seed 002).
///
/// The host owns the processes, pipes and clock; the machine owns every decision.
///
/// # Call order
///
/// 1. Create it with [`LocalRun::new`].
/// 2. Whenever something happens, call [`handle_input`](Self::handle_input)`(now_ms,
///    input)` with a monotonic `now_ms` of the host's choosing.
/// 3. Then call [`poll_output`](Self::poll_output) until it returns `None`; perform every
///    output in order (write lines, spawn, close stdin, signal, exit) and report the
///    results as new inputs (`HarnessSpawned`, output bytes, `HarnessExited`).
/// 4. Ask [`poll_timeout`](Self::poll_timeout) for the next deadline; when `now_ms`
///    reaches it, call `handle_input(now_ms, Input::Timeout)` and drain again. Timers are
///    only checked on `Input::Timeout`.
///
/// # States
///
/// The run's state is a handful of small enums, so that no illegal combination can be
/// represented: the *phase* (`Unprepared` → `Live` → `Finished`, or `Unprepared` →
/// `Finished` when the controller closes first); while `Live`, the harness *process*
/// (`Spawning` → `Running{pid}` → `Gone`), its *readiness* (`Awaiting{receipt,
/// deadline}` → `Ready` | `Failed`) and the *shutdown* (`Open{exit_deadline}` →
/// `TermPending` → `Grace{kill_deadline}` → `Killed`); the *session* (`Closed` →
/// `Open(turn)`, turn `NotStarted` → `Active(interrupt)` → `Ended`, interrupt `None` →
/// `Accepted`); the *controller stream* (`Open` → `EofQueued` → `Closed`); and the
/// recorded intent (see the [intent precedence](super#intent-precedence); a protocol
/// violation outranks all).
///
/// # Transitions
///
/// | state | input / event | outputs | next state |
/// |---|---|---|---|
/// | `Unprepared` | command `run.prepare` | `runtime.phase.changed{workspace_preparing}`, `workspace.ready`, `harness.starting`, `Spawn` | `Live{Spawning, Awaiting{deadline = now + ready_timeout_ms}, Open}` |
/// | `Unprepared` | other implemented command | receipt `rejected` "run.prepare has not been applied" | — |
/// | `Unprepared` | `ControllerEof` | diagnostic "controller closed before run.prepare", `Exit(1)` | `Finished` |
/// | `Unprepared`, `Finished` | harness input | `Err(no_harness_running)` | — |
/// | any | `HarnessSpawned` / `HarnessSpawnFailed` outside `Spawning` | `Err(no_spawn_pending)` | — |
/// | any | `ControllerBytes` after `ControllerEof` | `Err(controller_input_after_eof)` | — |
/// | `Live`, `Awaiting` | controller line | queued (a line beyond `max_queued_commands` is rejected) | — |
/// | `Live`, `Awaiting` | `ControllerEof` | — | stream `EofQueued` |
/// | `Spawning` | `HarnessSpawned{pid}` | `Signal TERM` if `TermPending` | `Running{pid}`; `TermPending` → `Grace` |
/// | `Spawning` | `HarnessSpawnFailed` | diagnostic, receipt `rejected`, `run.terminal`, `Exit(0)`, queued lines | `Gone`, `Finished` |
/// | `Awaiting` | harness `ready` | `harness.ready`, receipt `accepted`, queued lines | `Ready` |
/// | `Awaiting` | `Timeout` past the deadline | violation (below) | `Failed` |
/// | `Awaiting` | any other harness message | violation `harness_message_before_ready` | — |
/// | `Ready` | harness `ready` | diagnostic warning (ignored) | — |
/// | `Ready`, `Open` | `session.open` | `session.starting`, forward, receipt | session `Open(NotStarted)` |
/// | `Ready`, `Open` | `turn.start` (session open, no turn yet) | `turn.submitted`, forward, receipt | turn `Active(None)` |
/// | `Ready`, `Open` | `turn.interrupt` / `turn.stop` (turn `Active(None)`) | forward, receipt | interrupt `Accepted`, intent *interrupted* |
/// | `Ready`, `Open` | `request.resolve` (request pending), `session.close` (session open) | forward, receipt | request no longer pending |
/// | `Live` (not `Gone`) | `run.cancel` | forward (if `Open`), terminate, receipt | intent *cancelled* |
/// | `Live`, not `Open` | any other command | receipt `rejected` "the harness is shutting down" | — |
/// | `Ready` | harness `event` turn end | the event | turn `Ended` |
/// | `Ready` | harness `request` | `runtime_request.created` | request pending until now + `request_timeout_ms` |
/// | `Ready` | first harness `result` / `terminal` (later ones: `harness.diagnostic`) | `run.result.proposed` / — (kept as the proposal) | a terminal while `Open`: `Open{exit_deadline = now + exit_timeout_ms}` |
/// | `Live` | violation (bad line, frame, message, timeout) | `runner.diagnostic{code}`, prepare receipt `rejected`, terminate, queued lines | intent *protocol violation*, `Awaiting` → `Failed`; later stdout ignored |
/// | `Live` | `ControllerEof` (after the queue) | terminate | intent *controller closed*, stream `Closed` |
/// | `Live` | `Timeout` past a request's deadline | `runtime_request.expired`, terminate | intent *request expired* |
/// | `Open{exit_deadline}` | `Timeout` past it | terminate | — |
/// | `Open` | terminate | `CloseHarnessStdin`, `Signal TERM` (or none while `Spawning`) | `Grace{kill_deadline = now + shutdown_grace_ms}` (`TermPending`) |
/// | `Grace` | `Timeout` past `kill_deadline` | `Signal KILL` | `Killed` |
/// | `Awaiting` (no violation yet) | `HarnessExited` | `runner.diagnostic{harness_exited_before_ready}`, receipt `rejected`, then as below | intent *protocol violation* |
/// | `Live` | `HarnessExited` | last stdout/stderr lines, `Signal KILL` unless `Killed`, `harness.exited`, `run.terminal`, `Exit(0)`, queued lines | `Gone`, `Finished` |
/// | `Finished` | any command | receipt `rejected` "This request expired because the local run already finished. Start a new run." | — |
///
/// Commands are checked in the original's order: schema (the [`CommandEnvelope`]; `type`
/// read as text) → duplicate → contiguity → record → dispatch, so an unknown type or
/// `controllerSeq` 0 meets the ledger and an unknown type uses up its `controllerSeq`
/// before it is rejected. The terminal decision is the
/// [terminal reconciliation](super#terminal-reconciliation). No event follows `run.terminal`.
#[derive(Debug)]
pub struct LocalRun {
    config: LocalConfig,
    controller: LineFramer,
    stdout: LineFramer,
    stderr: LineFramer,
    ledger: CommandLedger,
    events: EventFactory,
    logs: LogTail,
    outputs: VecDeque<Output>,

    phase: Phase,
    stream: ControllerStream,
    session: Session,
    intent: Intent,
    /// Controller lines held while `run.prepare` waits for `ready` (answered once it is
    /// resolved).
    queued: VecDeque<LineResult>,
    /// The first semantic result.
    result: Option<Value>,
    /// The first terminal proposal.
    proposal: Option<Value>,
    /// Pending runtime requests and their expiry deadlines.
    pending_requests: IndexMap<String, u64>,
}

impl LocalRun {
    /// A machine in its initial state (waiting for `run.prepare`).
    pub fn new(config: LocalConfig) -> Result<Self, LocalError> {
        config.validate()?;
        let framer = |n: usize| LineFramer::new(FramerConfig::with_max_line_bytes(n));
        Ok(Self {
            controller: framer(config.max_controller_line_bytes),
            stdout: framer(config.max_line_bytes),
            stderr: framer(config.max_line_bytes),
            ledger: CommandLedger::new(config.ledger_max_entries, config.ledger_max_bytes),
            events: EventFactory::new(
                config.run_id.clone(),
                config.normalized_session_id.clone(),
                config.source_instance_id.clone(),
                EventClock {
                    start_ms: config.clock_start_ms,
                    step_ms: config.clock_step_ms,
                },
            ),
            logs: LogTail::new(config.log_max_lines, config.log_max_bytes),
            outputs: VecDeque::new(),
            phase: Phase::Unprepared,
            stream: ControllerStream::Open,
            session: Session::Closed,
            intent: Intent::Natural,
            queued: VecDeque::new(),
            result: None,
            proposal: None,
            pending_requests: IndexMap::new(),
            config,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// `true` once the run is over (`run.terminal` emitted, or the controller closed
    /// before `run.prepare`).
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished)
    }

    /// The command ledger.
    pub fn ledger(&self) -> &CommandLedger {
        &self.ledger
    }

    /// The log tail.
    pub fn log_tail(&self) -> &LogTail {
        &self.logs
    }

    /// Feed one input. On `Err` (local misuse) the input was ignored and nothing changed.
    pub fn handle_input(&mut self, now_ms: u64, input: Input) -> Result<(), LocalError> {
        match input {
            Input::ControllerBytes(bytes) => self.on_controller_bytes(now_ms, &bytes)?,
            Input::ControllerEof => self.on_controller_eof(now_ms),
            Input::HarnessStdout(bytes) => {
                self.require_harness()?;
                self.push_stdout(now_ms, &bytes)?;
                self.drain_stdout(now_ms);
            }
            Input::HarnessStderr(bytes) => {
                self.require_harness()?;
                self.push_stderr(&bytes)?;
                self.drain_stderr();
            }
            Input::HarnessSpawned { pid } => self.on_spawned(now_ms, pid)?,
            Input::HarnessSpawnFailed { message } => self.on_spawn_failed(now_ms, &message)?,
            Input::HarnessExited { code, signal } => {
                self.require_harness()?;
                self.on_exited(
                    now_ms,
                    ProcessExit {
                        exit_code: code,
                        signal,
                    },
                );
            }
            Input::Timeout => self.on_timeout(now_ms),
        }
        Ok(())
    }

    /// The next output, or `None` when drained (see the call order on the type).
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The earliest pending deadline (in the host's `now_ms` clock) at which the host
    /// feeds [`Input::Timeout`]; `None` when no timer is pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        let Phase::Live(live) = &self.phase else {
            return None;
        };
        let ready = match &live.readiness {
            Readiness::Awaiting { deadline, .. } => Some(*deadline),
            Readiness::Ready | Readiness::Failed => None,
        };
        let shutdown = match live.shutdown {
            Shutdown::Open { exit_deadline } => exit_deadline,
            Shutdown::Grace { kill_deadline } => Some(kill_deadline),
            Shutdown::TermPending | Shutdown::Killed => None,
        };
        [
            ready,
            shutdown,
            self.pending_requests.values().min().copied(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ------------------------------------------------------------------ state queries

    fn live(&self) -> Option<&Live> {
        match &self.phase {
            Phase::Live(live) => Some(live),
            Phase::Unprepared | Phase::Finished => None,
        }
    }

    fn live_mut(&mut self) -> Option<&mut Live> {
        match &mut self.phase {
            Phase::Live(live) => Some(live),
            Phase::Unprepared | Phase::Finished => None,
        }
    }

    fn is_ready(&self) -> bool {
        self.live()
            .is_some_and(|l| matches!(l.readiness, Readiness::Ready))
    }

    fn awaiting_ready(&self) -> bool {
        self.live()
            .is_some_and(|l| matches!(l.readiness, Readiness::Awaiting { .. }))
    }

    fn violated(&self) -> bool {
        self.intent == Intent::ProtocolViolation
    }

    fn require_harness(&self) -> Result<(), LocalError> {
        match self.live() {
            Some(live) if live.process != Process::Gone => Ok(()),
            _ => Err(LocalError::NoHarnessRunning),
        }
    }

    // ------------------------------------------------------------------ framers

    // The one place each stream's bytes enter its framer. A push takes what fits in the
    // framer's bounded queue; the lines ready so far are handled to make room, then the
    // rest is taken, so no byte is lost and the queue stays bounded.

    fn push_controller(&mut self, now: u64, bytes: &[u8]) -> Result<(), LocalError> {
        crate::framing::push_draining(
            self,
            |m| &mut m.controller,
            bytes,
            |m| m.drain_controller(now),
        )
        .map(drop)
        .map_err(|_| LocalError::ControllerInputAfterEof)
    }

    fn push_stdout(&mut self, now: u64, bytes: &[u8]) -> Result<(), LocalError> {
        // The harness framers are finished only once the harness is gone, and the
        // caller checked that it is not.
        crate::framing::push_draining(self, |m| &mut m.stdout, bytes, |m| m.drain_stdout(now))
            .map(drop)
            .map_err(|_| LocalError::NoHarnessRunning)
    }

    fn push_stderr(&mut self, bytes: &[u8]) -> Result<(), LocalError> {
        crate::framing::push_draining(self, |m| &mut m.stderr, bytes, Self::drain_stderr)
            .map(drop)
            .map_err(|_| LocalError::NoHarnessRunning)
    }

    // ------------------------------------------------------------------ emitting

    fn emit(
        &mut self,
        event_type: &str,
        payload: Value,
        turn_id: Option<&str>,
        item_id: Option<&str>,
    ) {
        if self.is_finished() {
            return;
        }
        let ev = self.events.next(event_type, payload, turn_id, item_id);
        self.outputs
            .push_back(Output::ToController(StreamMessage::Event(ev).to_line()));
    }

    fn receipt(
        &mut self,
        command_id: &str,
        controller_seq: u64,
        status: ReceiptStatus,
        detail: impl Into<String>,
    ) {
        let r = CommandReceipt {
            command_id: command_id.into(),
            controller_seq,
            status,
            detail: detail.into(),
        };
        self.outputs.push_back(Output::ToController(
            StreamMessage::CommandReceipt(r).to_line(),
        ));
    }

    fn diagnostic(&mut self, level: DiagnosticLevel, message: String) {
        self.outputs.push_back(Output::ToController(
            StreamMessage::Diagnostic { level, message }.to_line(),
        ));
    }

    fn forward(&mut self, cmd: &RunnerCommand) {
        let hc = HarnessCommand {
            command_id: cmd.command_id.clone(),
            command_type: cmd.command_type,
            payload: cmd.payload.clone(),
            extra: Map::new(),
        };
        self.outputs.push_back(Output::ToHarness(hc.to_line()));
    }

    fn signal(&mut self, group: u32, signal: SignalKind) {
        self.outputs.push_back(Output::Signal { group, signal });
    }

    /// Record an intent under the precedence of [`Intent::rank`] (see
    /// [`reconcile`](super::reconcile)).
    fn set_intent(&mut self, intent: Intent) {
        self.intent = Intent::merge(Some(self.intent), intent);
    }

    // ------------------------------------------------------------------ controller

    fn on_controller_bytes(&mut self, now: u64, bytes: &[u8]) -> Result<(), LocalError> {
        if self.stream != ControllerStream::Open {
            return Err(LocalError::ControllerInputAfterEof);
        }
        self.push_controller(now, bytes)?;
        self.drain_controller(now);
        Ok(())
    }

    fn on_controller_eof(&mut self, now: u64) {
        if self.stream != ControllerStream::Open {
            return;
        }
        self.controller.finish();
        self.drain_controller(now);
        if self.awaiting_ready() {
            self.stream = ControllerStream::EofQueued;
        } else {
            self.stream = ControllerStream::Closed;
            self.on_controller_closed(now);
        }
    }

    fn drain_controller(&mut self, now: u64) {
        while let Some(item) = self.controller.poll_line() {
            if self.awaiting_ready() {
                if self.queued.len() >= self.config.max_queued_commands {
                    self.reject_queue_full(item);
                } else {
                    self.queued.push_back(item);
                }
            } else {
                self.controller_item(now, item);
            }
        }
    }

    fn reject_queue_full(&mut self, item: LineResult) {
        let detail = "runner is busy starting the harness; command queue is full";
        let key = item.ok().and_then(|line| {
            let v = parse_json(line.as_bytes()).ok()?;
            let id = v.get("commandId").and_then(Value::as_str)?.to_owned();
            let seq = v.get("controllerSeq").and_then(Value::as_u64)?;
            Some((id, seq))
        });
        match key {
            Some((id, seq)) => self.receipt(&id, seq, ReceiptStatus::Rejected, detail),
            None => self.diagnostic(DiagnosticLevel::Error, detail.into()),
        }
    }

    /// Answer the queued lines once `run.prepare` is resolved, then a queued EOF.
    fn flush_queue(&mut self, now: u64) {
        while !self.awaiting_ready() {
            let Some(item) = self.queued.pop_front() else {
                break;
            };
            self.controller_item(now, item);
        }
        if !self.awaiting_ready() && self.stream == ControllerStream::EofQueued {
            self.stream = ControllerStream::Closed;
            self.on_controller_closed(now);
        }
    }

    fn controller_item(&mut self, now: u64, item: LineResult) {
        match item {
            Err(FramingError::LineTooLong { max_line_bytes, .. }) => {
                self.diagnostic(
                    DiagnosticLevel::Error,
                    format!("controller line exceeded {max_line_bytes} bytes"),
                );
            }
            Err(e) => self.diagnostic(DiagnosticLevel::Error, format!("invalid command JSON: {e}")),
            Ok(line) => self.command_line(now, &line),
        }
    }

    fn command_line(&mut self, now: u64, line: &str) {
        let v = match parse_json(line.as_bytes()) {
            Ok(v) => v,
            Err(e) => {
                let msg = match e {
                    ModelError::NotJson { message } => message,
                    other => other.to_string(),
                };
                self.diagnostic(
                    DiagnosticLevel::Error,
                    format!("invalid command JSON: {msg}"),
                );
                return;
            }
        };
        // 1. schema: the schema id and the shape; `type` is read as text.
        let env = match CommandEnvelope::from_value(&v) {
            Ok(c) => c,
            Err(e) => return self.reject_envelope(&v, &e),
        };
        let (id, seq) = (env.command_id.clone(), env.controller_seq);
        if self.is_finished() {
            return self.receipt(&id, seq, ReceiptStatus::Rejected, DETAIL_EXPIRED);
        }
        if env.controller_epoch.is_some() {
            return self.receipt(
                &id,
                seq,
                ReceiptStatus::Rejected,
                "controllerEpoch requires the negotiated transport.command_epochs.v1 capability",
            );
        }
        // 2. duplicate, 3. contiguity (controllerSeq 0 is never contiguous).
        let canonical = canonical_json(&env.ledger_value());
        match self.ledger.check(&id, &canonical, seq) {
            LedgerVerdict::Fresh => {}
            LedgerVerdict::Duplicate => {
                return self.receipt(&id, seq, ReceiptStatus::Duplicate, DETAIL_DUPLICATE)
            }
            LedgerVerdict::Conflict => {
                return self.receipt(&id, seq, ReceiptStatus::Rejected, DETAIL_REUSED)
            }
            _ => return self.receipt(&id, seq, ReceiptStatus::Rejected, DETAIL_NOT_CONTIGUOUS),
        }
        // 4. record: the command uses up its controllerSeq whatever dispatch says.
        self.ledger.record(&id, &canonical);
        // 5. dispatch.
        let type_text = env.type_text.clone();
        let outcome = match env.into_command() {
            Ok(cmd) => self.dispatch(now, &cmd),
            Err(_) => Dispatch::Rejected(detail_not_implemented(&type_text)),
        };
        match outcome {
            Dispatch::Applied => self.receipt(&id, seq, ReceiptStatus::Accepted, DETAIL_APPLIED),
            Dispatch::Rejected(d) => self.receipt(&id, seq, ReceiptStatus::Rejected, d),
            Dispatch::Deferred => {}
        }
    }

    /// A command that fails the envelope check: a receipt when it names a usable
    /// `commandId` and `controllerSeq`, else a diagnostic.
    fn reject_envelope(&mut self, v: &Value, e: &ModelError) {
        let id = v
            .get("commandId")
            .and_then(Value::as_str)
            .filter(|s| check_id("commandId", s).is_ok())
            .map(str::to_owned);
        let seq = v.get("controllerSeq").and_then(Value::as_u64);
        let detail = match e {
            ModelError::UnsupportedSchema { .. } => DETAIL_UNSUPPORTED_SCHEMA.to_owned(),
            ModelError::UnknownValue { field, value } if field == "type" => {
                format!("unsupported command type {value:?}")
            }
            other => format!("invalid command: {other}"),
        };
        match (id, seq) {
            (Some(id), Some(seq)) => self.receipt(&id, seq, ReceiptStatus::Rejected, detail),
            _ => self.diagnostic(DiagnosticLevel::Error, detail),
        }
    }

    // ------------------------------------------------------------------ dispatch

    fn dispatch(&mut self, now: u64, cmd: &RunnerCommand) -> Dispatch {
        use CommandType as T;
        if !cmd.command_type.is_implemented_locally() {
            return Dispatch::Rejected(detail_not_implemented(cmd.command_type.as_str()));
        }
        match cmd.command_type {
            T::RunPrepare => self.cmd_run_prepare(now, cmd),
            T::RunCancel => self.cmd_run_cancel(now, cmd),
            other => {
                if let Err(e) = self.can_forward() {
                    return Dispatch::Rejected(e.into());
                }
                let outcome = match other {
                    T::SessionOpen => self.cmd_session_open(),
                    T::TurnStart => self.cmd_turn_start(cmd),
                    T::RequestResolve => self.cmd_request_resolve(cmd),
                    T::TurnInterrupt | T::TurnStop => self.cmd_turn_interrupt(),
                    T::SessionClose => self.cmd_session_close(),
                    _ => Err(detail_not_implemented(other.as_str())),
                };
                match outcome {
                    Ok(()) => {
                        self.forward(cmd);
                        Dispatch::Applied
                    }
                    Err(detail) => Dispatch::Rejected(detail),
                }
            }
        }
    }

    /// Why a forwarded command cannot reach the harness now, if it cannot.
    fn can_forward(&self) -> Result<(), &'static str> {
        let Some(live) = self.live() else {
            return Err("run.prepare has not been applied");
        };
        if live.process == Process::Gone || live.readiness != Readiness::Ready {
            Err("the harness is not running")
        } else if !matches!(live.shutdown, Shutdown::Open { .. }) {
            Err("the harness is shutting down")
        } else {
            Ok(())
        }
    }

    /// `run.prepare`: the first three events and the `Spawn`; the receipt waits for
    /// `ready`.
    fn cmd_run_prepare(&mut self, now: u64, cmd: &RunnerCommand) -> Dispatch {
        if !matches!(self.phase, Phase::Unprepared) {
            return Dispatch::Rejected("run is already prepared".into());
        }
        self.emit(
            "runtime.phase.changed",
            json!({"phase": "workspace_preparing"}),
            None,
            None,
        );
        let working_directory = self
            .config
            .working_directory
            .clone()
            .or_else(|| {
                cmd.payload
                    .get("workingDirectory")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| DEFAULT_WORKING_DIRECTORY.to_owned());
        self.emit(
            "workspace.ready",
            json!({"workingDirectory": working_directory}),
            None,
            None,
        );
        let kind = self.config.driver_kind.clone();
        self.emit(
            "harness.starting",
            json!({"driverKind": kind, "transport": HARNESS_TRANSPORT}),
            None,
            None,
        );
        let spawn = self.spawn_request();
        self.outputs.push_back(Output::Spawn(spawn));
        self.phase = Phase::Live(Live {
            process: Process::Spawning,
            readiness: Readiness::Awaiting {
                receipt: PendingReceipt {
                    command_id: cmd.command_id.clone(),
                    controller_seq: cmd.controller_seq,
                },
                deadline: now.saturating_add(self.config.ready_timeout_ms),
            },
            shutdown: Shutdown::Open {
                exit_deadline: None,
            },
        });
        Dispatch::Deferred
    }

    /// The `Spawn` request: the configured program and arguments, the allowed
    /// environment sorted by name.
    fn spawn_request(&self) -> SpawnRequest {
        let mut env: Vec<(String, String)> = self
            .config
            .harness_env
            .iter()
            .filter(|(k, _)| self.config.env_allow.iter().any(|a| a == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.sort();
        SpawnRequest {
            program: self.config.harness_program.clone(),
            args: self.config.harness_args.clone(),
            env,
            new_process_group: true,
        }
    }

    /// `run.cancel`: intent *cancelled*, forward while stdin is open, terminate.
    fn cmd_run_cancel(&mut self, now: u64, cmd: &RunnerCommand) -> Dispatch {
        let Some(live) = self.live() else {
            return Dispatch::Rejected("run.prepare has not been applied".into());
        };
        if live.process == Process::Gone {
            return Dispatch::Rejected("the harness is not running".into());
        }
        let stdin_open = matches!(live.shutdown, Shutdown::Open { .. });
        self.set_intent(Intent::Cancelled);
        if stdin_open {
            self.forward(cmd);
        }
        self.terminate(now);
        Dispatch::Applied
    }

    fn cmd_session_open(&mut self) -> Result<(), String> {
        if self.session != Session::Closed {
            return Err("a session is already open".into());
        }
        self.session = Session::Open(Turn::NotStarted);
        self.emit("session.starting", json!({}), None, None);
        Ok(())
    }

    fn cmd_turn_start(&mut self, cmd: &RunnerCommand) -> Result<(), String> {
        match self.session {
            Session::Closed => return Err("no session is open".into()),
            Session::Open(Turn::NotStarted) => {}
            Session::Open(_) => return Err("a turn was already started".into()),
        }
        let turn_id = match cmd.payload.get("turnId") {
            None => None,
            Some(Value::String(s)) if check_id("payload/turnId", s).is_ok() => Some(s.clone()),
            Some(_) => return Err("payload.turnId must be a string of 1 to 160 characters".into()),
        };
        // The payload's text, or null when absent or not a string.
        let text = cmd
            .payload
            .get("text")
            .filter(|t| t.is_string())
            .cloned()
            .unwrap_or(Value::Null);
        self.session = Session::Open(Turn::Active(Interrupt::None));
        self.emit(
            "turn.submitted",
            json!({"text": text}),
            turn_id.as_deref(),
            None,
        );
        Ok(())
    }

    fn cmd_request_resolve(&mut self, cmd: &RunnerCommand) -> Result<(), String> {
        let Some(rid) = cmd.payload.get("requestId").and_then(Value::as_str) else {
            return Err("request.resolve needs payload.requestId".into());
        };
        if self.pending_requests.shift_remove(rid).is_none() {
            return Err(format!("request {rid} is not pending"));
        }
        Ok(())
    }

    fn cmd_turn_interrupt(&mut self) -> Result<(), String> {
        match self.session {
            Session::Open(Turn::Active(Interrupt::None)) => {}
            Session::Open(Turn::Active(Interrupt::Accepted)) => {
                return Err(DETAIL_INTERRUPT_PENDING.into())
            }
            _ => return Err("no turn is active".into()),
        }
        self.session = Session::Open(Turn::Active(Interrupt::Accepted));
        self.set_intent(Intent::Interrupted);
        Ok(())
    }

    fn cmd_session_close(&mut self) -> Result<(), String> {
        if self.session == Session::Closed {
            return Err("no session is open".into());
        }
        Ok(())
    }

    /// Answer the deferred `run.prepare` receipt: accepted (`None`) or rejected. The
    /// readiness becomes `Ready` or `Failed`.
    fn resolve_prepare(&mut self, rejection: Option<String>) {
        let Some(live) = self.live_mut() else {
            return;
        };
        if !matches!(live.readiness, Readiness::Awaiting { .. }) {
            return;
        }
        let next = if rejection.is_none() {
            Readiness::Ready
        } else {
            Readiness::Failed
        };
        let Readiness::Awaiting { receipt, .. } = std::mem::replace(&mut live.readiness, next)
        else {
            return;
        };
        let PendingReceipt {
            command_id,
            controller_seq,
        } = receipt;
        match rejection {
            None => self.receipt(
                &command_id,
                controller_seq,
                ReceiptStatus::Accepted,
                DETAIL_APPLIED,
            ),
            Some(d) => self.receipt(&command_id, controller_seq, ReceiptStatus::Rejected, d),
        }
    }

    fn on_controller_closed(&mut self, now: u64) {
        match self.phase {
            Phase::Finished => {}
            Phase::Unprepared => {
                self.diagnostic(
                    DiagnosticLevel::Error,
                    "controller closed before run.prepare".into(),
                );
                self.phase = Phase::Finished;
                self.outputs.push_back(Output::Exit(1));
            }
            Phase::Live(_) => {
                self.set_intent(Intent::ControllerClosed);
                self.terminate(now);
            }
        }
    }

    // ------------------------------------------------------------------ supervision

    fn on_spawned(&mut self, now: u64, pid: u32) -> Result<(), LocalError> {
        let live = match self.live_mut() {
            Some(live) if live.process == Process::Spawning => live,
            _ => return Err(LocalError::NoSpawnPending),
        };
        live.process = Process::Running { pid };
        if live.shutdown == Shutdown::TermPending {
            self.send_term(now, pid);
        }
        Ok(())
    }

    fn on_spawn_failed(&mut self, now: u64, message: &str) -> Result<(), LocalError> {
        match self.live_mut() {
            Some(live) if live.process == Process::Spawning => live.process = Process::Gone,
            _ => return Err(LocalError::NoSpawnPending),
        }
        let detail = format!("harness could not be started: {message}");
        self.diagnostic(DiagnosticLevel::Error, detail.clone());
        self.resolve_prepare(Some(detail));
        self.finalize(None);
        self.flush_queue(now);
        Ok(())
    }

    fn on_exited(&mut self, now: u64, exit: ProcessExit) {
        // The process is gone: a violation found in its last output must not signal the
        // (possibly reused) group again.
        let Some(live) = self.live_mut() else {
            return;
        };
        let pid = match std::mem::replace(&mut live.process, Process::Gone) {
            Process::Running { pid } => Some(pid),
            Process::Spawning | Process::Gone => None,
        };
        let killed = live.shutdown == Shutdown::Killed;
        self.stdout.finish();
        self.drain_stdout(now);
        self.stderr.finish();
        self.drain_stderr();
        if !self.is_ready() && !self.violated() {
            // Exiting before `ready` breaks the protocol (the original: "exited before
            // ready"), whatever the exit code. No flush here: queued commands are
            // answered after run.terminal.
            let v = HarnessViolation::ExitedBeforeReady;
            self.set_intent(Intent::ProtocolViolation);
            self.emit_violation(&v);
            self.resolve_prepare(Some(v.to_string()));
        }
        if let (false, Some(pid)) = (killed, pid) {
            // The KILL sweep reaps stragglers such as a lingering worker.
            self.signal(pid, SignalKind::Kill);
        }
        if let Some(live) = self.live_mut() {
            live.shutdown = Shutdown::Killed;
        }
        let payload = json!({"processExit": exit.to_value(), "semanticResultObserved": self.result.is_some(), "logs": self.logs.to_value()});
        self.emit("harness.exited", payload, None, None);
        self.finalize(Some(exit));
        self.flush_queue(now);
    }

    /// Close the harness stdin and TERM the group (once, while the harness is ours).
    fn terminate(&mut self, now: u64) {
        let Some(live) = self.live_mut() else {
            return;
        };
        if live.process == Process::Gone || !matches!(live.shutdown, Shutdown::Open { .. }) {
            return;
        }
        live.shutdown = Shutdown::TermPending;
        let pid = match live.process {
            Process::Running { pid } => Some(pid),
            Process::Spawning | Process::Gone => None,
        };
        self.outputs.push_back(Output::CloseHarnessStdin);
        if let Some(pid) = pid {
            self.send_term(now, pid);
        }
    }

    fn send_term(&mut self, now: u64, pid: u32) {
        self.signal(pid, SignalKind::Term);
        let kill_deadline = now.saturating_add(self.config.shutdown_grace_ms);
        if let Some(live) = self.live_mut() {
            live.shutdown = Shutdown::Grace { kill_deadline };
        }
    }

    fn on_timeout(&mut self, now: u64) {
        if !matches!(self.phase, Phase::Live(_)) {
            return;
        }
        self.check_ready_deadline(now);
        self.check_kill_deadline(now);
        self.check_exit_deadline(now);
        self.expire_requests(now);
    }

    fn check_ready_deadline(&mut self, now: u64) {
        let due = self.live().is_some_and(
            |l| matches!(l.readiness, Readiness::Awaiting { deadline, .. } if deadline <= now),
        );
        if due {
            let ready_timeout_ms = self.config.ready_timeout_ms;
            self.violation(now, HarnessViolation::ReadyTimeout { ready_timeout_ms });
        }
    }

    fn check_kill_deadline(&mut self, now: u64) {
        let Some(live) = self.live_mut() else {
            return;
        };
        let Shutdown::Grace { kill_deadline } = live.shutdown else {
            return;
        };
        if kill_deadline > now {
            return;
        }
        live.shutdown = Shutdown::Killed;
        if let Process::Running { pid } = live.process {
            self.signal(pid, SignalKind::Kill);
        }
    }

    fn check_exit_deadline(&mut self, now: u64) {
        let Some(live) = self.live_mut() else {
            return;
        };
        if let Shutdown::Open {
            exit_deadline: Some(d),
        } = live.shutdown
        {
            if d <= now {
                live.shutdown = Shutdown::Open {
                    exit_deadline: None,
                };
                self.terminate(now);
            }
        }
    }

    fn expire_requests(&mut self, now: u64) {
        let expired: Vec<String> = self
            .pending_requests
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(k, _)| k.clone())
            .collect();
        if expired.is_empty() {
            return;
        }
        for id in expired {
            self.pending_requests.shift_remove(&id);
            self.emit(
                "runtime_request.expired",
                json!({"requestId": id, "reason": "timeout"}),
                None,
                None,
            );
        }
        // The original's interactive request timeout fails the run: end it with the
        // `request_expired` intent (TERM → grace → KILL), so that exactly one
        // run.terminal follows.
        self.set_intent(Intent::RequestExpired);
        self.terminate(now);
    }

    fn emit_violation(&mut self, v: &HarnessViolation) {
        self.emit(
            "runner.diagnostic",
            json!({"level": "error", "code": v.code(), "message": v.to_string()}),
            None,
            None,
        );
    }

    fn violation(&mut self, now: u64, v: HarnessViolation) {
        if self.violated() || self.is_finished() {
            return;
        }
        self.set_intent(Intent::ProtocolViolation);
        self.emit_violation(&v);
        self.resolve_prepare(Some(v.to_string()));
        self.terminate(now);
        self.flush_queue(now);
    }

    // ------------------------------------------------------------------ harness

    fn drain_stdout(&mut self, now: u64) {
        while let Some(item) = self.stdout.poll_line() {
            if self.violated() || self.is_finished() {
                continue;
            }
            match item {
                Err(FramingError::LineTooLong { max_line_bytes, .. }) => {
                    self.logs.push(&format!(
                        "stdout: [harness stdout frame exceeded {max_line_bytes} bytes]"
                    ));
                    self.violation(now, HarnessViolation::StdoutFrameTooLong { max_line_bytes });
                }
                Err(_) => self.violation(now, HarnessViolation::StdoutInvalidUtf8),
                Ok(line) => {
                    if let Err(v) = self.harness_line(now, &line) {
                        self.violation(now, v);
                    }
                }
            }
        }
    }

    fn drain_stderr(&mut self) {
        while let Some(item) = self.stderr.poll_line() {
            if self.is_finished() {
                continue;
            }
            let line = match item {
                Ok(l) => format!("stderr: {l}"),
                Err(FramingError::LineTooLong { max_line_bytes, .. }) => {
                    format!("stderr: [harness stderr frame exceeded {max_line_bytes} bytes]")
                }
                Err(_) => "stderr: [harness stderr frame was not valid UTF-8]".to_owned(),
            };
            self.logs.push(&line);
        }
    }

    /// One harness stdout line; `Err` is the protocol violation it commits.
    fn harness_line(&mut self, now: u64, line: &str) -> Result<(), HarnessViolation> {
        let msg = HarnessMessage::parse(line).map_err(HarnessViolation::InvalidMessage)?;
        // The runner re-emits harness content up to three levels deeper than it arrived
        // (stream envelope, message, event, payload, `request` / `harnessTerminalProposal`):
        // a message that could not be re-emitted within the decoders' nesting bound is
        // refused here, so every line the runner writes parses again.
        if nesting_depth_object(&msg.payload).saturating_add(1) > MAX_HARNESS_DEPTH {
            return Err(HarnessViolation::InvalidMessage(ModelError::invalid(
                "payload",
                format!(
                    "nested deeper than {MAX_HARNESS_DEPTH} levels (the runner re-emits it up to 3 levels deeper, within {})",
                    crate::json::MAX_DEPTH
                ),
            )));
        }
        let ready = self.is_ready();
        if !ready && msg.message_type != HarnessMessageType::Ready {
            return Err(HarnessViolation::MessageBeforeReady {
                message_type: msg.message_type.as_str().into(),
            });
        }
        let p = &msg.payload;
        match msg.message_type {
            HarnessMessageType::Ready => {
                self.msg_ready(now, p);
                Ok(())
            }
            HarnessMessageType::Event => self.msg_event(p),
            HarnessMessageType::Request => self.msg_request(now, p),
            HarnessMessageType::Result => self.msg_result(p),
            HarnessMessageType::Terminal => self.msg_terminal(now, p),
            HarnessMessageType::Log => self.msg_log(p),
            HarnessMessageType::Diagnostic => {
                let text = canonical_json(&Value::Object(p.clone()));
                self.logs.push(&format!("diagnostic: {text}"));
                Ok(())
            }
        }
    }

    /// `ready`: `harness.ready`, the `run.prepare` receipt, the queued lines; a second one
    /// is a warning.
    fn msg_ready(&mut self, now: u64, p: &Map<String, Value>) {
        if self.is_ready() {
            self.diagnostic(
                DiagnosticLevel::Warning,
                "duplicate harness ready message ignored".into(),
            );
            return;
        }
        let version = p.get("version").cloned().unwrap_or(Value::Null);
        let kind = self.config.driver_kind.clone();
        self.emit(
            "harness.ready",
            json!({"driverKind": kind, "driverVersion": version, "transport": HARNESS_TRANSPORT}),
            None,
            None,
        );
        self.resolve_prepare(None);
        self.flush_queue(now);
    }

    /// `event`: a known, non-reserved event type passes through as a canonical event.
    fn msg_event(&mut self, p: &Map<String, Value>) -> Result<(), HarnessViolation> {
        let et = p.get("eventType").cloned().unwrap_or(Value::Null);
        let Some(event_type) = et
            .as_str()
            .filter(|t| is_known_event_type(t))
            .map(str::to_owned)
        else {
            return Err(HarnessViolation::InvalidMessage(ModelError::unknown(
                "payload/eventType",
                &et,
            )));
        };
        if event_type.starts_with("harness.")
            || event_type.starts_with("runner.")
            || event_type == "run.terminal"
            || event_type == "run.result.proposed"
        {
            return Err(HarnessViolation::ReservedEventType { event_type });
        }
        let turn = optional_id(p, "turnId")?;
        let item = optional_id(p, "itemId")?;
        let inner = match p.get("payload") {
            None => json!({}),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return Err(HarnessViolation::InvalidMessage(ModelError::invalid(
                    "payload/payload",
                    "expected an object",
                )))
            }
        };
        if matches!(
            event_type.as_str(),
            "turn.completed" | "turn.failed" | "turn.interrupted" | "turn.cancelled"
        ) {
            if let Session::Open(Turn::Active(_)) = self.session {
                self.session = Session::Open(Turn::Ended);
            }
        }
        self.emit(&event_type, inner, turn.as_deref(), item.as_deref());
        Ok(())
    }

    /// `request`: a valid, new runtime request becomes pending.
    fn msg_request(&mut self, now: u64, p: &Map<String, Value>) -> Result<(), HarnessViolation> {
        let request = p.get("request").cloned().unwrap_or(Value::Null);
        let (rid, _) =
            validate_runtime_request(&request).map_err(HarnessViolation::InvalidRequest)?;
        if self.pending_requests.contains_key(&rid) {
            return Err(HarnessViolation::InvalidRequest(ModelError::invalid(
                "requestId",
                "a request with this id is already pending",
            )));
        }
        if self.pending_requests.len() >= self.config.max_pending_requests {
            return Err(HarnessViolation::TooManyPendingRequests {
                max_pending_requests: self.config.max_pending_requests,
            });
        }
        self.pending_requests
            .insert(rid, now.saturating_add(self.config.request_timeout_ms));
        let turn = request
            .get("turnId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.emit(
            "runtime_request.created",
            json!({"request": request}),
            turn.as_deref(),
            None,
        );
        Ok(())
    }

    /// `result`: the first valid one is `run.result.proposed`; later ones are diagnosed.
    fn msg_result(&mut self, p: &Map<String, Value>) -> Result<(), HarnessViolation> {
        let result = p.get("result").cloned().unwrap_or(Value::Null);
        if self.result.is_some() {
            self.emit(
                "harness.diagnostic",
                json!({"code": "duplicate_semantic_result_ignored", "message": DUPLICATE_RESULT_MESSAGE}),
                None,
                None,
            );
            return Ok(());
        }
        validate_run_result(&result).map_err(HarnessViolation::InvalidResult)?;
        self.result = Some(result.clone());
        self.emit("run.result.proposed", result, None, None);
        Ok(())
    }

    /// `terminal`: the first one is kept as the proposal and starts the exit deadline;
    /// later ones are diagnosed.
    fn msg_terminal(&mut self, now: u64, p: &Map<String, Value>) -> Result<(), HarnessViolation> {
        let Some(terminal) = p.get("terminal").cloned() else {
            return Err(HarnessViolation::InvalidMessage(ModelError::missing(
                "payload/terminal",
            )));
        };
        if self.proposal.is_some() {
            self.emit(
                "harness.diagnostic",
                json!({"code": "duplicate_terminal_ignored", "message": DUPLICATE_TERMINAL_MESSAGE}),
                None,
                None,
            );
            return Ok(());
        }
        self.proposal = Some(terminal);
        let exit_deadline = now.saturating_add(self.config.exit_timeout_ms);
        if let Some(live) = self.live_mut() {
            if let Shutdown::Open { .. } = live.shutdown {
                live.shutdown = Shutdown::Open {
                    exit_deadline: Some(exit_deadline),
                };
            }
        }
        Ok(())
    }

    /// `log`: a log-tail line `<stream>: <text>`.
    fn msg_log(&mut self, p: &Map<String, Value>) -> Result<(), HarnessViolation> {
        let (Some(stream), Some(text)) = (
            p.get("stream").and_then(Value::as_str),
            p.get("text").and_then(Value::as_str),
        ) else {
            return Err(HarnessViolation::InvalidMessage(ModelError::invalid(
                "payload",
                "log needs string stream and text",
            )));
        };
        let line = format!("{stream}: {text}");
        self.logs.push(&line);
        Ok(())
    }

    /// Emit exactly one `run.terminal` (the [`reconcile`](super::reconcile) decision) and
    /// `Exit(0)`; the run is `Finished`.
    fn finalize(&mut self, exit: Option<ProcessExit>) {
        if self.is_finished() {
            return;
        }
        let terminal = reconcile_terminal(
            self.proposal.as_ref(),
            exit.as_ref(),
            self.result.as_ref(),
            self.intent,
        );
        self.emit("run.terminal", terminal, None, None);
        self.pending_requests.clear();
        self.phase = Phase::Finished;
        self.outputs.push_back(Output::Exit(0));
    }
}

/// Deepest a harness message may nest (the message's own object is level 1): the
/// decoders' [`MAX_DEPTH`](crate::json::MAX_DEPTH) less the three levels the runner's
/// stream lines wrap around re-emitted content.
pub(crate) const MAX_HARNESS_DEPTH: usize = crate::json::MAX_DEPTH - 3;

/// Nesting depth of an object (itself level 1), counted without recursion.
fn nesting_depth_object(o: &Map<String, Value>) -> usize {
    let mut max = 1;
    let mut stack: Vec<(&Value, usize)> = o.values().map(|v| (v, 2)).collect();
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Object(m) => {
                max = max.max(d);
                stack.extend(m.values().map(|x| (x, d.saturating_add(1))));
            }
            Value::Array(a) => {
                max = max.max(d);
                stack.extend(a.iter().map(|x| (x, d.saturating_add(1))));
            }
            _ => {}
        }
    }
    max
}

/// An optional `turnId` / `itemId` of a harness event: absent, null or a valid id.
fn optional_id(p: &Map<String, Value>, field: &str) -> Result<Option<String>, HarnessViolation> {
    match p.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if check_id(field, s).is_ok() => Ok(Some(s.clone())),
        Some(_) => Err(HarnessViolation::InvalidMessage(ModelError::invalid(
            format!("payload/{field}"),
            "expected a string of 1 to 160 characters",
        ))),
    }
}
