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
    check_id, parse_json, validate_run_result, validate_runtime_request, CommandEnvelope,
    CommandReceipt, CommandType, DiagnosticLevel, HarnessCommand, HarnessMessage,
    HarnessMessageType, ReceiptStatus, RunnerCommand, StreamMessage,
};
use super::reconcile::{reconcile_terminal, Intent, ProcessExit};
use crate::framing::{FramerConfig, FramingError, LineFramer, LineResult, DEFAULT_MAX_LINE_BYTES};

/// Receipt detail of an applied command.
pub const DETAIL_APPLIED: &str = "command applied";
/// Receipt detail of a duplicate.
pub const DETAIL_DUPLICATE: &str = "equivalent command already applied";
/// Receipt detail of a reused `commandId` with different content.
pub const DETAIL_REUSED: &str = "commandId was reused with different data";
/// Receipt detail of a `controllerSeq` gap.
pub const DETAIL_NOT_CONTIGUOUS: &str = "controllerSeq is not contiguous";
/// Receipt detail of a wrong command schema id.
pub const DETAIL_UNSUPPORTED_SCHEMA: &str = "unsupported command schema";
/// Receipt detail of any command received after the run finished.
pub const DETAIL_EXPIRED: &str =
    "This request expired because the local run already finished. Start a new run.";
/// Message of the `duplicate_terminal_ignored` harness diagnostic.
pub const DUPLICATE_TERMINAL_MESSAGE: &str =
    "Duplicate terminal event ignored; the first terminal event remains authoritative.";
/// Message of the `duplicate_semantic_result_ignored` harness diagnostic.
pub const DUPLICATE_RESULT_MESSAGE: &str =
    "Duplicate semantic result ignored; the first result remains authoritative.";
/// Receipt detail of a second `turn.interrupt` / `turn.stop` while one is accepted and the
/// harness has not yet reported the turn's end.
pub const DETAIL_INTERRUPT_PENDING: &str = "an interrupt was already accepted for this turn";
/// Working directory reported in `workspace.ready` when neither the config nor the
/// `run.prepare` payload declares one.
pub const DEFAULT_WORKING_DIRECTORY: &str = ".";

/// Receipt detail of a command type the local runner does not implement (one of the 18
/// it does not run, or a type outside them). The original runner's wording, kept for
/// wire compatibility.
pub fn detail_not_implemented(command_type: &str) -> String {
    format!("command {command_type} is not implemented in Phase 2")
}
/// Driver session id the fake harness reports in `session.started`.
pub const FAKE_DRIVER_SESSION_ID: &str = "driver_phase2_fake";
/// Transport named in `harness.starting` / `harness.ready`.
pub const HARNESS_TRANSPORT: &str = "stdio_jsonl";

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
    /// The deadline of the last `Output::Timeout` passed (`now_ms >= deadline`).
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
    /// Nothing more to do now. Call `handle_input(now, Input::Timeout)` once `now` reaches
    /// the deadline (`None`: no timer pending). Always the last output of a drain.
    Timeout(Option<u64>),
}

enum Dispatch {
    Applied,
    Deferred,
    Rejected(String),
}

/// The local-run machine (seed 002).
///
/// # Call order
///
/// The host owns the processes, pipes and clock; the machine owns every decision.
///
/// 1. Create it with [`LocalRun::new`].
/// 2. Whenever something happens, call [`handle_input`](Self::handle_input)`(now_ms,
///    input)` with a monotonic `now_ms` of the host's choosing.
/// 3. Then call [`poll_output`](Self::poll_output) until it returns
///    [`Output::Timeout`]; perform every output in order (write lines, spawn, close
///    stdin, signal, exit) and report the results as new inputs (`HarnessSpawned`,
///    output bytes, `HarnessExited`).
/// 4. When `now_ms` reaches the last `Timeout(Some(deadline))`, call
///    `handle_input(now_ms, Input::Timeout)` and drain again. Timers are only checked on
///    `Input::Timeout`.
///
/// # Lifecycle
///
/// Commands are checked in the original's order: schema (the
/// [`CommandEnvelope`]; `type` read as text) → duplicate → contiguity → record →
/// dispatch, so an unknown type or `controllerSeq` 0 meets the ledger and an unknown type
/// uses up its `controllerSeq` before it is rejected.
///
/// `run.prepare` → `runtime.phase.changed{workspace_preparing}`,
/// `workspace.ready{workingDirectory}`, `harness.starting`, `Spawn`; the receipt waits
/// until the harness sends `ready` (→ `harness.ready`, receipt `accepted`), the ready
/// deadline passes (protocol violation, receipt `rejected`) or the harness exits first
/// (the `harness_exited_before_ready` violation); controller lines arriving meanwhile are
/// queued.
/// `session.open` → `session.starting` + forward; `turn.start` → `turn.submitted` +
/// forward; `request.resolve`, `session.close` → forward; `turn.interrupt`/`turn.stop` →
/// intent *interrupted* + forward (a second one while the first is pending is rejected);
/// `run.cancel` → intent *cancelled*, forward, terminate. An expired runtime request sets
/// the intent *request expired* and terminates. Intents follow the precedence of
/// [`Intent::rank`].
/// Harness messages become canonical events (`event`), `runtime_request.created`
/// (`request`), `run.result.proposed` (first `result`), the kept terminal proposal (first
/// `terminal`), or log-tail lines (`log`, `diagnostic`, stderr). Controller EOF, cancel,
/// request expiry and protocol violations terminate: `CloseHarnessStdin`, `Signal TERM`,
/// and `Signal KILL` after `shutdown_grace_ms`. When the harness exits: `Signal KILL` to
/// the group unless already sent (reaps stragglers such as a lingering worker),
/// `harness.exited` (with the log tail), exactly one `run.terminal` (see
/// [`reconcile`](super::reconcile)), `Exit(0)`. No event follows `run.terminal`.
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

    prepared: bool,
    spawn_pending: bool,
    pid: Option<u32>,
    harness_gone: bool,
    ready: bool,
    prepare_receipt: Option<(String, u64)>,
    ready_deadline: Option<u64>,
    queued: VecDeque<LineResult>,
    eof_queued: bool,
    controller_eof: bool,

    session_open: bool,
    turn_started: bool,
    turn_active: bool,
    interrupt_accepted: bool,
    stdin_closed: bool,
    terminating: bool,
    term_pending: bool,
    kill_sent: bool,
    kill_deadline: Option<u64>,
    exit_deadline: Option<u64>,

    intent: Option<Intent>,
    violated: bool,
    result: Option<Value>,
    proposal: Option<Value>,
    pending_requests: IndexMap<String, u64>,
    terminal_emitted: bool,
    finished: bool,
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
            prepared: false,
            spawn_pending: false,
            pid: None,
            harness_gone: false,
            ready: false,
            prepare_receipt: None,
            ready_deadline: None,
            queued: VecDeque::new(),
            eof_queued: false,
            controller_eof: false,
            session_open: false,
            turn_started: false,
            turn_active: false,
            interrupt_accepted: false,
            stdin_closed: false,
            terminating: false,
            term_pending: false,
            kill_sent: false,
            kill_deadline: None,
            exit_deadline: None,
            intent: None,
            violated: false,
            result: None,
            proposal: None,
            pending_requests: IndexMap::new(),
            terminal_emitted: false,
            finished: false,
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
        self.finished
    }

    /// Number of canonical events emitted.
    pub fn events_emitted(&self) -> u64 {
        self.events.emitted()
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
            Input::ControllerBytes(bytes) => {
                if self.controller_eof {
                    return Err(LocalError::ControllerInputAfterEof);
                }
                self.controller
                    .push(&bytes)
                    .map_err(|_| LocalError::ControllerInputAfterEof)?;
                self.drain_controller(now_ms);
            }
            Input::ControllerEof => {
                if self.controller_eof {
                    return Ok(());
                }
                self.controller_eof = true;
                self.controller.finish();
                self.drain_controller(now_ms);
                if self.prepare_receipt.is_some() {
                    self.eof_queued = true;
                } else {
                    self.on_controller_closed(now_ms);
                }
            }
            Input::HarnessStdout(bytes) => {
                self.require_harness()?;
                let _ = self.stdout.push(&bytes);
                self.drain_stdout(now_ms);
            }
            Input::HarnessStderr(bytes) => {
                self.require_harness()?;
                let _ = self.stderr.push(&bytes);
                self.drain_stderr();
            }
            Input::HarnessSpawned { pid } => {
                if !self.spawn_pending {
                    return Err(LocalError::NoSpawnPending);
                }
                self.spawn_pending = false;
                self.pid = Some(pid);
                if self.term_pending {
                    self.term_pending = false;
                    self.send_term(now_ms, pid);
                }
            }
            Input::HarnessSpawnFailed { message } => {
                if !self.spawn_pending {
                    return Err(LocalError::NoSpawnPending);
                }
                self.spawn_pending = false;
                self.harness_gone = true;
                self.term_pending = false;
                let detail = format!("harness could not be started: {message}");
                self.diagnostic(DiagnosticLevel::Error, detail.clone());
                self.resolve_prepare(Some(detail));
                self.finalize(None);
                self.flush_queue(now_ms);
            }
            Input::HarnessExited { code, signal } => {
                self.require_harness()?;
                // The process is gone: a violation found in its last output must not
                // signal the (possibly reused) group again.
                self.spawn_pending = false;
                self.harness_gone = true;
                self.stdout.finish();
                self.drain_stdout(now_ms);
                self.stderr.finish();
                self.drain_stderr();
                let exit = ProcessExit {
                    exit_code: code,
                    signal,
                };
                if !self.ready && !self.violated {
                    // Exiting before `ready` breaks the protocol (the original: "exited
                    // before ready"), whatever the exit code. No flush here: queued
                    // commands are answered after run.terminal.
                    let v = HarnessViolation::ExitedBeforeReady;
                    self.violated = true;
                    self.set_intent(Intent::ProtocolViolation);
                    self.emit(
                        "runner.diagnostic",
                        json!({"level": "error", "code": v.code(), "message": v.to_string()}),
                        None,
                        None,
                    );
                    self.resolve_prepare(Some(v.to_string()));
                } else if self.prepare_receipt.is_some() {
                    self.resolve_prepare(Some(HarnessViolation::ExitedBeforeReady.to_string()));
                }
                if !self.kill_sent {
                    if let Some(pid) = self.pid {
                        self.kill_sent = true;
                        self.outputs.push_back(Output::Signal {
                            group: pid,
                            signal: SignalKind::Kill,
                        });
                    }
                }
                self.kill_deadline = None;
                self.exit_deadline = None;
                self.emit(
                    "harness.exited",
                    json!({"processExit": exit.to_value(), "semanticResultObserved": self.result.is_some(), "logs": self.logs.to_value()}),
                    None,
                    None,
                );
                self.finalize(Some(exit));
                self.flush_queue(now_ms);
            }
            Input::Timeout => self.on_timeout(now_ms),
        }
        Ok(())
    }

    /// The next output; [`Output::Timeout`] when nothing else is pending (see the call
    /// order on the type).
    pub fn poll_output(&mut self) -> Output {
        self.outputs
            .pop_front()
            .unwrap_or_else(|| Output::Timeout(self.next_deadline()))
    }

    fn next_deadline(&self) -> Option<u64> {
        if self.finished {
            return None;
        }
        let ready = self
            .ready_deadline
            .filter(|_| self.prepare_receipt.is_some());
        [
            ready,
            self.kill_deadline,
            self.exit_deadline,
            self.pending_requests.values().min().copied(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn require_harness(&self) -> Result<(), LocalError> {
        if self.prepared && !self.harness_gone {
            Ok(())
        } else {
            Err(LocalError::NoHarnessRunning)
        }
    }

    // ------------------------------------------------------------------ emitting

    fn emit(
        &mut self,
        event_type: &str,
        payload: Value,
        turn_id: Option<&str>,
        item_id: Option<&str>,
    ) {
        if self.terminal_emitted {
            return;
        }
        if event_type == "run.terminal" {
            self.terminal_emitted = true;
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

    /// Record an intent under the precedence of [`Intent::rank`] (see
    /// [`reconcile`](super::reconcile)).
    fn set_intent(&mut self, intent: Intent) {
        self.intent = Some(Intent::merge(self.intent, intent));
    }

    // ------------------------------------------------------------------ controller

    fn drain_controller(&mut self, now: u64) {
        while let Some(item) = self.controller.poll_line() {
            if self.prepare_receipt.is_some() {
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
        if let Ok(line) = &item {
            if let Ok(v) = parse_json(line.as_bytes()) {
                if let (Some(id), Some(seq)) = (
                    v.get("commandId").and_then(Value::as_str),
                    v.get("controllerSeq").and_then(Value::as_u64),
                ) {
                    let id = id.to_owned();
                    self.receipt(&id, seq, ReceiptStatus::Rejected, detail);
                    return;
                }
            }
        }
        self.diagnostic(DiagnosticLevel::Error, detail.into());
    }

    fn flush_queue(&mut self, now: u64) {
        while self.prepare_receipt.is_none() {
            let Some(item) = self.queued.pop_front() else {
                break;
            };
            self.controller_item(now, item);
        }
        if self.prepare_receipt.is_none() && self.eof_queued {
            self.eof_queued = false;
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
            Err(e) => {
                let id = v
                    .get("commandId")
                    .and_then(Value::as_str)
                    .filter(|s| check_id("commandId", s).is_ok())
                    .map(str::to_owned);
                let seq = v.get("controllerSeq").and_then(Value::as_u64);
                let detail = match &e {
                    ModelError::UnsupportedSchema { .. } => DETAIL_UNSUPPORTED_SCHEMA.to_owned(),
                    ModelError::UnknownValue { field, value } if field == "type" => {
                        format!("unsupported command type {value:?}")
                    }
                    other => format!("invalid command: {other}"),
                };
                match (id, seq) {
                    (Some(id), Some(seq)) => {
                        self.receipt(&id, seq, ReceiptStatus::Rejected, detail)
                    }
                    _ => self.diagnostic(DiagnosticLevel::Error, detail),
                }
                return;
            }
        };
        let (id, seq) = (env.command_id.clone(), env.controller_seq);
        if self.finished {
            self.receipt(&id, seq, ReceiptStatus::Rejected, DETAIL_EXPIRED);
            return;
        }
        if env.controller_epoch.is_some() {
            self.receipt(
                &id,
                seq,
                ReceiptStatus::Rejected,
                "controllerEpoch requires the negotiated transport.command_epochs.v1 capability",
            );
            return;
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

    fn can_forward(&self) -> Result<(), String> {
        if !self.prepared {
            Err("run.prepare has not been applied".into())
        } else if self.harness_gone || !self.ready {
            Err("the harness is not running".into())
        } else if self.stdin_closed || self.terminating {
            Err("the harness is shutting down".into())
        } else {
            Ok(())
        }
    }

    fn dispatch(&mut self, now: u64, cmd: &RunnerCommand) -> Dispatch {
        use CommandType as T;
        if !cmd.command_type.is_implemented_locally() {
            return Dispatch::Rejected(detail_not_implemented(cmd.command_type.as_str()));
        }
        if cmd.command_type == T::RunPrepare {
            if self.prepared {
                return Dispatch::Rejected("run is already prepared".into());
            }
            self.prepared = true;
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
            let mut env: Vec<(String, String)> = self
                .config
                .harness_env
                .iter()
                .filter(|(k, _)| self.config.env_allow.iter().any(|a| a == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            env.sort();
            self.outputs.push_back(Output::Spawn(SpawnRequest {
                program: self.config.harness_program.clone(),
                args: self.config.harness_args.clone(),
                env,
                new_process_group: true,
            }));
            self.spawn_pending = true;
            self.prepare_receipt = Some((cmd.command_id.clone(), cmd.controller_seq));
            self.ready_deadline = Some(now.saturating_add(self.config.ready_timeout_ms));
            return Dispatch::Deferred;
        }
        if cmd.command_type == T::RunCancel {
            if !self.prepared || self.harness_gone {
                return Dispatch::Rejected(if self.prepared {
                    "the harness is not running".into()
                } else {
                    "run.prepare has not been applied".into()
                });
            }
            self.set_intent(Intent::Cancelled);
            if !self.stdin_closed {
                self.forward(cmd);
            }
            self.terminate(now);
            return Dispatch::Applied;
        }
        if let Err(e) = self.can_forward() {
            return Dispatch::Rejected(e);
        }
        match cmd.command_type {
            T::SessionOpen => {
                if self.session_open {
                    return Dispatch::Rejected("a session is already open".into());
                }
                self.session_open = true;
                self.emit("session.starting", json!({}), None, None);
            }
            T::TurnStart => {
                if !self.session_open {
                    return Dispatch::Rejected("no session is open".into());
                }
                if self.turn_started {
                    return Dispatch::Rejected("a turn was already started".into());
                }
                let turn_id = match cmd.payload.get("turnId") {
                    None => None,
                    Some(Value::String(s)) if check_id("payload/turnId", s).is_ok() => {
                        Some(s.clone())
                    }
                    Some(_) => {
                        return Dispatch::Rejected(
                            "payload.turnId must be a string of 1 to 160 characters".into(),
                        )
                    }
                };
                // The payload's text, or null when absent or not a string.
                let text = cmd
                    .payload
                    .get("text")
                    .filter(|t| t.is_string())
                    .cloned()
                    .unwrap_or(Value::Null);
                self.turn_started = true;
                self.turn_active = true;
                self.emit(
                    "turn.submitted",
                    json!({"text": text}),
                    turn_id.as_deref(),
                    None,
                );
            }
            T::RequestResolve => {
                let Some(rid) = cmd.payload.get("requestId").and_then(Value::as_str) else {
                    return Dispatch::Rejected("request.resolve needs payload.requestId".into());
                };
                if self.pending_requests.shift_remove(rid).is_none() {
                    return Dispatch::Rejected(format!("request {rid} is not pending"));
                }
            }
            T::TurnInterrupt | T::TurnStop => {
                if !self.turn_active {
                    return Dispatch::Rejected("no turn is active".into());
                }
                if self.interrupt_accepted {
                    return Dispatch::Rejected(DETAIL_INTERRUPT_PENDING.into());
                }
                self.interrupt_accepted = true;
                self.set_intent(Intent::Interrupted);
            }
            T::SessionClose => {
                if !self.session_open {
                    return Dispatch::Rejected("no session is open".into());
                }
            }
            _ => return Dispatch::Rejected(detail_not_implemented(cmd.command_type.as_str())),
        }
        self.forward(cmd);
        Dispatch::Applied
    }

    /// Answer the deferred `run.prepare` receipt: accepted (`None`) or rejected.
    fn resolve_prepare(&mut self, rejection: Option<String>) {
        if let Some((id, seq)) = self.prepare_receipt.take() {
            self.ready_deadline = None;
            match rejection {
                None => self.receipt(&id, seq, ReceiptStatus::Accepted, DETAIL_APPLIED),
                Some(d) => self.receipt(&id, seq, ReceiptStatus::Rejected, d),
            }
        }
    }

    fn on_controller_closed(&mut self, now: u64) {
        if self.finished {
            return;
        }
        if !self.prepared {
            self.diagnostic(
                DiagnosticLevel::Error,
                "controller closed before run.prepare".into(),
            );
            self.finished = true;
            self.outputs.push_back(Output::Exit(1));
            return;
        }
        self.set_intent(Intent::ControllerClosed);
        self.terminate(now);
    }

    // ------------------------------------------------------------------ supervision

    fn terminate(&mut self, now: u64) {
        if self.terminating || self.harness_gone || !self.prepared {
            return;
        }
        self.terminating = true;
        self.exit_deadline = None;
        if !self.stdin_closed {
            self.stdin_closed = true;
            self.outputs.push_back(Output::CloseHarnessStdin);
        }
        match self.pid {
            Some(pid) => self.send_term(now, pid),
            None => self.term_pending = true,
        }
    }

    fn send_term(&mut self, now: u64, pid: u32) {
        self.outputs.push_back(Output::Signal {
            group: pid,
            signal: SignalKind::Term,
        });
        self.kill_deadline = Some(now.saturating_add(self.config.shutdown_grace_ms));
    }

    fn on_timeout(&mut self, now: u64) {
        if self.finished {
            return;
        }
        if self.prepare_receipt.is_some() && self.ready_deadline.is_some_and(|d| d <= now) {
            let ms = self.config.ready_timeout_ms;
            self.violation(
                now,
                HarnessViolation::ReadyTimeout {
                    ready_timeout_ms: ms,
                },
            );
        }
        if self.kill_deadline.is_some_and(|d| d <= now) {
            self.kill_deadline = None;
            if let Some(pid) = self.pid {
                if !self.kill_sent {
                    self.kill_sent = true;
                    self.outputs.push_back(Output::Signal {
                        group: pid,
                        signal: SignalKind::Kill,
                    });
                }
            }
        }
        if self.exit_deadline.is_some_and(|d| d <= now) {
            self.exit_deadline = None;
            self.terminate(now);
        }
        let expired: Vec<String> = self
            .pending_requests
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let any_expired = !expired.is_empty();
        for id in expired {
            self.pending_requests.shift_remove(&id);
            self.emit(
                "runtime_request.expired",
                json!({"requestId": id, "reason": "timeout"}),
                None,
                None,
            );
        }
        if any_expired {
            // The original's interactive request timeout fails the run: end it with the
            // `request_expired` intent (TERM → grace → KILL), so that exactly one
            // run.terminal follows.
            self.set_intent(Intent::RequestExpired);
            self.terminate(now);
        }
    }

    fn violation(&mut self, now: u64, v: HarnessViolation) {
        if self.violated || self.finished {
            return;
        }
        self.violated = true;
        self.set_intent(Intent::ProtocolViolation);
        self.emit(
            "runner.diagnostic",
            json!({"level": "error", "code": v.code(), "message": v.to_string()}),
            None,
            None,
        );
        if self.prepare_receipt.is_some() {
            self.resolve_prepare(Some(v.to_string()));
        }
        self.terminate(now);
        self.flush_queue(now);
    }

    // ------------------------------------------------------------------ harness

    fn drain_stdout(&mut self, now: u64) {
        while let Some(item) = self.stdout.poll_line() {
            if self.violated || self.finished {
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
                Ok(line) => self.harness_line(now, &line),
            }
        }
    }

    fn drain_stderr(&mut self) {
        while let Some(item) = self.stderr.poll_line() {
            if self.finished {
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

    fn harness_line(&mut self, now: u64, line: &str) {
        let msg = match HarnessMessage::parse(line) {
            Ok(m) => m,
            Err(e) => return self.violation(now, HarnessViolation::InvalidMessage(e)),
        };
        if !self.ready && msg.message_type != HarnessMessageType::Ready {
            return self.violation(
                now,
                HarnessViolation::MessageBeforeReady {
                    message_type: msg.message_type.as_str().into(),
                },
            );
        }
        let p = &msg.payload;
        match msg.message_type {
            HarnessMessageType::Ready => {
                if self.ready {
                    self.diagnostic(
                        DiagnosticLevel::Warning,
                        "duplicate harness ready message ignored".into(),
                    );
                    return;
                }
                self.ready = true;
                let version = p.get("version").cloned().unwrap_or(Value::Null);
                let kind = self.config.driver_kind.clone();
                self.emit("harness.ready", json!({"driverKind": kind, "driverVersion": version, "transport": HARNESS_TRANSPORT}), None, None);
                self.resolve_prepare(None);
                self.flush_queue(now);
            }
            HarnessMessageType::Event => {
                let et = p.get("eventType").cloned().unwrap_or(Value::Null);
                let Some(event_type) = et
                    .as_str()
                    .filter(|t| super::models::is_known_event_type(t))
                    .map(str::to_owned)
                else {
                    return self.violation(
                        now,
                        HarnessViolation::InvalidMessage(ModelError::unknown(
                            "payload/eventType",
                            &et,
                        )),
                    );
                };
                if event_type.starts_with("harness.")
                    || event_type.starts_with("runner.")
                    || event_type == "run.terminal"
                    || event_type == "run.result.proposed"
                {
                    return self.violation(now, HarnessViolation::ReservedEventType { event_type });
                }
                let mut ids = [None, None];
                for (slot, f) in ids.iter_mut().zip(["turnId", "itemId"]) {
                    match p.get(f) {
                        None | Some(Value::Null) => {}
                        Some(Value::String(s)) if check_id(f, s).is_ok() => *slot = Some(s.clone()),
                        Some(_) => {
                            return self.violation(
                                now,
                                HarnessViolation::InvalidMessage(ModelError::invalid(
                                    format!("payload/{f}"),
                                    "expected a string of 1 to 160 characters",
                                )),
                            )
                        }
                    }
                }
                let inner = match p.get("payload") {
                    None => json!({}),
                    Some(v @ Value::Object(_)) => v.clone(),
                    Some(_) => {
                        return self.violation(
                            now,
                            HarnessViolation::InvalidMessage(ModelError::invalid(
                                "payload/payload",
                                "expected an object",
                            )),
                        )
                    }
                };
                if matches!(
                    event_type.as_str(),
                    "turn.completed" | "turn.failed" | "turn.interrupted" | "turn.cancelled"
                ) {
                    self.turn_active = false;
                }
                let [turn, item] = ids;
                self.emit(&event_type, inner, turn.as_deref(), item.as_deref());
            }
            HarnessMessageType::Request => {
                let request = p.get("request").cloned().unwrap_or(Value::Null);
                let (rid, _) = match validate_runtime_request(&request) {
                    Ok(x) => x,
                    Err(e) => return self.violation(now, HarnessViolation::InvalidRequest(e)),
                };
                if self.pending_requests.contains_key(&rid) {
                    return self.violation(
                        now,
                        HarnessViolation::InvalidRequest(ModelError::invalid(
                            "requestId",
                            "a request with this id is already pending",
                        )),
                    );
                }
                if self.pending_requests.len() >= self.config.max_pending_requests {
                    return self.violation(
                        now,
                        HarnessViolation::TooManyPendingRequests {
                            max_pending_requests: self.config.max_pending_requests,
                        },
                    );
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
            }
            HarnessMessageType::Result => {
                let result = p.get("result").cloned().unwrap_or(Value::Null);
                if self.result.is_some() {
                    self.emit("harness.diagnostic", json!({"code": "duplicate_semantic_result_ignored", "message": DUPLICATE_RESULT_MESSAGE}), None, None);
                    return;
                }
                if let Err(e) = validate_run_result(&result) {
                    return self.violation(now, HarnessViolation::InvalidResult(e));
                }
                self.result = Some(result.clone());
                self.emit("run.result.proposed", result, None, None);
            }
            HarnessMessageType::Terminal => {
                let Some(terminal) = p.get("terminal").cloned() else {
                    return self.violation(
                        now,
                        HarnessViolation::InvalidMessage(ModelError::missing("payload/terminal")),
                    );
                };
                if self.proposal.is_some() {
                    self.emit("harness.diagnostic", json!({"code": "duplicate_terminal_ignored", "message": DUPLICATE_TERMINAL_MESSAGE}), None, None);
                    return;
                }
                self.proposal = Some(terminal);
                if !self.terminating {
                    self.exit_deadline = Some(now.saturating_add(self.config.exit_timeout_ms));
                }
            }
            HarnessMessageType::Log => {
                let (Some(stream), Some(text)) = (
                    p.get("stream").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) else {
                    return self.violation(
                        now,
                        HarnessViolation::InvalidMessage(ModelError::invalid(
                            "payload",
                            "log needs string stream and text",
                        )),
                    );
                };
                let line = format!("{stream}: {text}");
                self.logs.push(&line);
            }
            HarnessMessageType::Diagnostic => {
                let text = canonical_json(&Value::Object(p.clone()));
                self.logs.push(&format!("diagnostic: {text}"));
            }
        }
    }

    fn finalize(&mut self, exit: Option<ProcessExit>) {
        if self.terminal_emitted {
            return;
        }
        let intent = self.intent.unwrap_or(Intent::Natural);
        let terminal = reconcile_terminal(
            self.proposal.as_ref(),
            exit.as_ref(),
            self.result.as_ref(),
            intent,
        );
        self.emit("run.terminal", terminal, None, None);
        self.pending_requests.clear();
        self.ready_deadline = None;
        self.kill_deadline = None;
        self.exit_deadline = None;
        self.finished = true;
        self.outputs.push_back(Output::Exit(0));
    }
}
