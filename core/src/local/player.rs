//! The fake-harness script player (documented on [`ScriptPlayer`]).

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::error::LocalError;
use super::models::{
    CommandType, HarnessCommand, HarnessMessage, HarnessMessageType, Script, ScriptStep,
};
use crate::framing::{FramerConfig, LineFramer};

/// `version` of the fake harness's `ready` message.
pub(crate) const FAKE_HARNESS_VERSION: &str = "1.0.0";
/// Turn id used when `turn.start` carries none.
pub(crate) const DEFAULT_TURN_ID: &str = "turn_phase2";
/// Default bound on waiting for `session.open`, `turn.start` and an interrupt (the
/// original's `HARNESS_COMMAND_TIMEOUT`, 10 s).
pub(crate) const DEFAULT_COMMAND_TIMEOUT_MS: u64 = 10_000;
/// Default bound on waiting for a `request.resolve` (the original's
/// `INTERACTIVE_REQUEST_TIMEOUT`, 5 min).
pub(crate) const DEFAULT_RESOLVE_TIMEOUT_MS: u64 = 300_000;
/// Exit code of the player when an awaited command did not arrive in time.
pub(crate) const AWAIT_TIMEOUT_EXIT_CODE: i32 = 1;

/// Configuration of a [`ScriptPlayer`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlayerConfig {
    /// Replace every `delay` step's milliseconds (the `--delay-ms` option). Default none.
    pub delay_override_ms: Option<u64>,
    /// Commands kept while not awaited. Default 64; past it the oldest is dropped.
    pub max_inbox: usize,
    /// Bound on one stdin line. Default 65,536; longer lines are ignored.
    pub max_line_bytes: usize,
    /// Bound on waiting for `session.open`, `turn.start` and `turn.interrupt` /
    /// `turn.stop`. Default 10,000 ms; `None`: wait forever.
    pub command_timeout_ms: Option<u64>,
    /// Bound on waiting for the `request.resolve` of an `await_resolution` step. Default
    /// 300,000 ms; `None`: wait forever.
    pub resolve_timeout_ms: Option<u64>,
}

impl Default for PlayerConfig {
    fn default() -> Self {
        Self {
            delay_override_ms: None,
            max_inbox: 64,
            max_line_bytes: crate::framing::DEFAULT_MAX_LINE_BYTES,
            command_timeout_ms: Some(DEFAULT_COMMAND_TIMEOUT_MS),
            resolve_timeout_ms: Some(DEFAULT_RESOLVE_TIMEOUT_MS),
        }
    }
}

/// An input to the player.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlayerInput {
    /// The process started.
    Start,
    /// Bytes on stdin (harness commands, any chunking).
    StdinBytes(Vec<u8>),
    /// Stdin closed.
    StdinEof,
    /// The worker requested by `SpawnWorker` runs with this pid.
    WorkerSpawned {
        /// Worker pid.
        pid: u32,
    },
    /// The deadline of [`ScriptPlayer::poll_timeout`] passed (`now_ms >= deadline`).
    Timeout,
}

/// An output of the player.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlayerOutput {
    /// Write this `paperclip.fake_harness.message.v1` line plus `\n` to stdout.
    Stdout(String),
    /// Start a worker process in the same process group, then report `WorkerSpawned`.
    SpawnWorker,
    /// Exit the process with this code.
    Exit(i32),
}

/// What the player waits for.
#[derive(Debug, Clone, PartialEq)]
enum Wait {
    /// Playing steps.
    Running,
    /// A command; the deadline of its bound once armed (`None`: not armed yet, or
    /// unbounded).
    Command(Await, Option<u64>),
    /// A `delay` step, until this instant.
    Delay(u64),
    /// `WorkerSpawned`.
    Worker,
    /// Nothing: the player has exited.
    Exited,
}

#[derive(Debug, Clone, PartialEq)]
enum Await {
    SessionOpen,
    TurnStart,
    Resolution(String),
    Interrupt,
}

impl Await {
    fn describe(&self) -> String {
        match self {
            Await::SessionOpen => "session.open".into(),
            Await::TurnStart => "turn.start".into(),
            Await::Resolution(id) => format!("request.resolve of {id}"),
            Await::Interrupt => "turn.interrupt or turn.stop".into(),
        }
    }
}

/// A sans-IO fake-harness *script player*: given a [`Script`] and the harness commands
/// the runner writes to its stdin, it produces the harness's stdout lines and its
/// delay / spawn-worker / exit actions. The simulated-harness tests drive it without
/// processes; a `fake-harness` binary only has to perform its outputs.
///
/// # Behaviour
///
/// 1. On [`PlayerInput::Start`] it writes `ready {version:"1.0.0", script:<name>}`.
/// 2. It waits for `session.open`, then writes the events `session.started
///    {driverSessionId:"driver_phase2_fake"}` and `runtime.phase.changed
///    {phase:"executing"}`.
/// 3. It waits for `turn.start`, then writes `turn.started` (turn id from
///    `payload.turnId`, else `turn_phase2`).
/// 4. It plays the steps: `delay` waits its milliseconds (or the override)
///    until its deadline ([`ScriptPlayer::poll_timeout`], then [`PlayerInput::Timeout`]); `log`, `event`, `request`, `result`, `terminal` →
///    one message each; `await_resolution` waits for a `request.resolve` whose
///    `payload.requestId` matches and writes `runtime_request.resolved {requestId,
///    response}`; `await_interrupt` waits for `turn.interrupt` or `turn.stop` and writes
///    `turn.interrupted {reason}` (`payload.reason`, default `operator`); `spawn_worker`
///    → [`PlayerOutput::SpawnWorker`], then on [`PlayerInput::WorkerSpawned`] a
///    `diagnostic {message:"worker spawned", workerPid}`; `exit` → [`PlayerOutput::Exit`].
///    A script without an `exit` step ends with `Exit(0)`.
///
/// `turn.*` and `item.*` events without a `turn_id` get the current turn id. Commands the
/// script does not wait for are kept in a bounded inbox (oldest dropped past
/// `max_inbox`) so that an await can consume a command that arrived early; the script
/// consumes only the commands it expects. If stdin reaches EOF while the script waits for
/// a command, the player exits with code 1. Invalid stdin lines are ignored.
///
/// # Await timeouts
///
/// Every wait for a command is bounded, as in the original fake harness:
/// `session.open`, `turn.start` and `await_interrupt` by
/// [`PlayerConfig::command_timeout_ms`] (default 10 s, the original's
/// `HARNESS_COMMAND_TIMEOUT`), `await_resolution` by
/// [`PlayerConfig::resolve_timeout_ms`] (default 5 min, its
/// `INTERACTIVE_REQUEST_TIMEOUT`). The player reads no clock: when a wait begins that the
/// commands already received cannot satisfy, its deadline (the `now_ms` of that input
/// plus the bound) becomes [`ScriptPlayer::poll_timeout`]. If the wait is still current
/// when the host feeds [`PlayerInput::Timeout`] at or after it, the player writes a
/// `diagnostic {message, timeoutMs}` line and exits with code 1.
///
/// # Call order
///
/// `handle_input(now_ms, input)` with a monotonic `now_ms`, then `poll_output()` until it
/// returns `None`, then `poll_timeout()`: when `now_ms` reaches that deadline, feed
/// `handle_input(now_ms, PlayerInput::Timeout)`.
///
/// | wait | input | outputs | next |
/// |---|---|---|---|
/// | (not started) | `Start` | `ready` | command `session.open` |
/// | command | `StdinBytes` with the awaited command | its events | the next command or `Running` |
/// | command | `StdinEof` | `Exit(1)` | `Exited` |
/// | command (bounded) | `Timeout` past its deadline | diagnostic, `Exit(1)` | `Exited` |
/// | `Running` | — | the steps' messages | `Delay(until)`, command, `Worker`, `Exited` |
/// | `Delay(until)` | `Timeout` past `until` | the next steps | `Running` |
/// | `Worker` | `WorkerSpawned{pid}` | diagnostic `worker spawned` | `Running` |
/// | `Exited` | anything | `Err(unexpected_input)` | — |
#[derive(Debug)]
pub struct ScriptPlayer {
    script: Script,
    config: PlayerConfig,
    stdin: LineFramer,
    inbox: VecDeque<HarnessCommand>,
    outputs: VecDeque<PlayerOutput>,
    started: bool,
    next_step: usize,
    wait: Wait,
    message_seq: u64,
    turn_id: Option<String>,
    stdin_eof: bool,
    /// The `now_ms` of the input being handled.
    now: u64,
}

impl ScriptPlayer {
    /// A player for `script`, not started yet.
    pub fn new(script: Script, config: PlayerConfig) -> Self {
        Self {
            stdin: LineFramer::new(FramerConfig::with_max_line_bytes(config.max_line_bytes)),
            script,
            config,
            inbox: VecDeque::new(),
            outputs: VecDeque::new(),
            started: false,
            next_step: 0,
            wait: Wait::Running,
            message_seq: 0,
            turn_id: None,
            stdin_eof: false,
            now: 0,
        }
    }

    /// `true` after `Exit` was produced.
    pub fn is_exited(&self) -> bool {
        self.wait == Wait::Exited
    }

    /// Feed one input at the host's monotonic `now_ms`.
    pub fn handle_input(&mut self, now_ms: u64, input: PlayerInput) -> Result<(), LocalError> {
        if self.wait == Wait::Exited {
            return Err(LocalError::UnexpectedInput("the player has exited".into()));
        }
        self.now = now_ms;
        match input {
            PlayerInput::Start => {
                if self.started {
                    return Err(LocalError::UnexpectedInput("already started".into()));
                }
                self.started = true;
                let name = self.script.name.clone();
                self.message(
                    HarnessMessageType::Ready,
                    json!({"version": FAKE_HARNESS_VERSION, "script": name}),
                );
                self.wait = Wait::Command(Await::SessionOpen, None);
            }
            PlayerInput::StdinBytes(b) => {
                if self.stdin_eof {
                    return Err(LocalError::UnexpectedInput("stdin bytes after EOF".into()));
                }
                let mut lines = Vec::new();
                // `stdin` is finished only together with `stdin_eof`, checked above.
                self.stdin
                    .push_all(&b, |item| lines.push(item))
                    .map_err(|e| LocalError::UnexpectedInput(e.to_string()))?;
                for line in lines {
                    if let Ok(cmd) = line
                        .map_err(|_| ())
                        .and_then(|l| HarnessCommand::parse(&l).map_err(|_| ()))
                    {
                        if self.inbox.len() >= self.config.max_inbox.max(1) {
                            self.inbox.pop_front();
                        }
                        self.inbox.push_back(cmd);
                    }
                }
            }
            PlayerInput::StdinEof => {
                self.stdin_eof = true;
                self.stdin.finish();
            }
            PlayerInput::WorkerSpawned { pid } => {
                if self.wait != Wait::Worker {
                    return Err(LocalError::UnexpectedInput(
                        "no worker spawn pending".into(),
                    ));
                }
                self.message(
                    HarnessMessageType::Diagnostic,
                    json!({"message": "worker spawned", "workerPid": pid}),
                );
                self.wait = Wait::Running;
            }
            PlayerInput::Timeout => match self.wait.clone() {
                Wait::Delay(until) if until <= now_ms => self.wait = Wait::Running,
                Wait::Command(a, Some(deadline)) if deadline <= now_ms => {
                    let ms = self.timeout_of(&a).unwrap_or_default();
                    self.message(
                        HarnessMessageType::Diagnostic,
                        json!({"message": format!("timed out waiting for {}", a.describe()), "timeoutMs": ms}),
                    );
                    self.wait = Wait::Exited;
                    self.outputs
                        .push_back(PlayerOutput::Exit(AWAIT_TIMEOUT_EXIT_CODE));
                    return Ok(());
                }
                _ => {}
            },
        }
        if self.started {
            self.advance();
        }
        Ok(())
    }

    /// The next output, or `None` when drained (nothing to do until the next input).
    pub fn poll_output(&mut self) -> Option<PlayerOutput> {
        self.outputs.pop_front()
    }

    /// The deadline (in the host's `now_ms` clock) of the current delay or bounded wait,
    /// at which the host feeds [`PlayerInput::Timeout`]; `None` when no timer is pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.wait {
            Wait::Delay(until) => Some(until),
            Wait::Command(_, deadline) => deadline,
            Wait::Running | Wait::Worker | Wait::Exited => None,
        }
    }

    fn message(&mut self, t: HarnessMessageType, payload: Value) {
        self.message_seq = self.message_seq.saturating_add(1);
        let payload = match payload {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.outputs.push_back(PlayerOutput::Stdout(
            HarnessMessage::new(self.message_seq, t, payload).to_line(),
        ));
    }

    fn event(
        &mut self,
        event_type: &str,
        turn_id: Option<String>,
        item_id: Option<String>,
        payload: Value,
    ) {
        let mut p = Map::new();
        p.insert("eventType".into(), event_type.into());
        if let Some(t) = turn_id {
            p.insert("turnId".into(), t.into());
        }
        if let Some(i) = item_id {
            p.insert("itemId".into(), i.into());
        }
        p.insert("payload".into(), payload);
        self.message(HarnessMessageType::Event, Value::Object(p));
    }

    fn take(&mut self, pred: impl Fn(&HarnessCommand) -> bool) -> Option<HarnessCommand> {
        let pos = self.inbox.iter().position(pred)?;
        self.inbox.remove(pos)
    }

    /// Try to satisfy the awaited command; `true` when it was consumed.
    fn satisfy(&mut self, a: &Await) -> bool {
        match a {
            Await::SessionOpen => {
                if self
                    .take(|c| c.command_type == CommandType::SessionOpen)
                    .is_none()
                {
                    return false;
                }
                self.event(
                    "session.started",
                    None,
                    None,
                    json!({"driverSessionId": super::machine::FAKE_DRIVER_SESSION_ID}),
                );
                self.event(
                    "runtime.phase.changed",
                    None,
                    None,
                    json!({"phase": "executing"}),
                );
                true
            }
            Await::TurnStart => {
                let Some(cmd) = self.take(|c| c.command_type == CommandType::TurnStart) else {
                    return false;
                };
                let turn = cmd
                    .payload
                    .get("turnId")
                    .and_then(Value::as_str)
                    .unwrap_or(DEFAULT_TURN_ID)
                    .to_owned();
                self.turn_id = Some(turn.clone());
                self.event("turn.started", Some(turn), None, json!({}));
                true
            }
            Await::Resolution(id) => {
                let Some(cmd) = self.take(|c| {
                    c.command_type == CommandType::RequestResolve
                        && c.payload.get("requestId").and_then(Value::as_str) == Some(id.as_str())
                }) else {
                    return false;
                };
                let response = cmd.payload.get("response").cloned().unwrap_or(Value::Null);
                let turn = self.turn_id.clone();
                self.event(
                    "runtime_request.resolved",
                    turn,
                    None,
                    json!({"requestId": id, "response": response}),
                );
                true
            }
            Await::Interrupt => {
                let Some(cmd) = self.take(|c| {
                    matches!(
                        c.command_type,
                        CommandType::TurnInterrupt | CommandType::TurnStop
                    )
                }) else {
                    return false;
                };
                let reason = cmd
                    .payload
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("operator")
                    .to_owned();
                let turn = self.turn_id.clone();
                self.event("turn.interrupted", turn, None, json!({"reason": reason}));
                true
            }
        }
    }

    fn timeout_of(&self, a: &Await) -> Option<u64> {
        match a {
            Await::Resolution(_) => self.config.resolve_timeout_ms,
            _ => self.config.command_timeout_ms,
        }
    }

    fn advance(&mut self) {
        loop {
            match self.wait.clone() {
                Wait::Exited | Wait::Delay(_) | Wait::Worker => return,
                Wait::Command(a, deadline) => {
                    if self.satisfy(&a) {
                        if a == Await::SessionOpen {
                            self.wait = Wait::Command(Await::TurnStart, None);
                        } else {
                            self.wait = Wait::Running;
                        }
                        continue;
                    }
                    if self.stdin_eof {
                        self.wait = Wait::Exited;
                        self.outputs.push_back(PlayerOutput::Exit(1));
                    } else if deadline.is_none() {
                        let deadline = self.timeout_of(&a).map(|ms| self.now.saturating_add(ms));
                        self.wait = Wait::Command(a, deadline);
                    }
                    return;
                }
                Wait::Running => {}
            }
            let Some(step) = self.script.steps.get(self.next_step).cloned() else {
                self.wait = Wait::Exited;
                self.outputs.push_back(PlayerOutput::Exit(0));
                return;
            };
            self.next_step = self.next_step.saturating_add(1);
            match step {
                ScriptStep::Delay { milliseconds } => {
                    let ms = self.config.delay_override_ms.unwrap_or(milliseconds);
                    self.wait = Wait::Delay(self.now.saturating_add(ms));
                }
                ScriptStep::Log { stream, text } => self.message(
                    HarnessMessageType::Log,
                    json!({"stream": stream, "text": text}),
                ),
                ScriptStep::Event {
                    event_type,
                    turn_id,
                    item_id,
                    payload,
                } => {
                    let turn = turn_id.or_else(|| {
                        (event_type.starts_with("turn.") || event_type.starts_with("item."))
                            .then(|| self.turn_id.clone())
                            .flatten()
                    });
                    self.event(&event_type, turn, item_id, payload);
                }
                ScriptStep::Request { request } => {
                    self.message(HarnessMessageType::Request, json!({"request": request}))
                }
                ScriptStep::AwaitResolution { request_id } => {
                    self.wait = Wait::Command(Await::Resolution(request_id), None)
                }
                ScriptStep::AwaitInterrupt => self.wait = Wait::Command(Await::Interrupt, None),
                ScriptStep::Result { payload } => {
                    self.message(HarnessMessageType::Result, json!({"result": payload}))
                }
                ScriptStep::Terminal { payload } => {
                    self.message(HarnessMessageType::Terminal, json!({"terminal": payload}))
                }
                ScriptStep::SpawnWorker => {
                    self.outputs.push_back(PlayerOutput::SpawnWorker);
                    self.wait = Wait::Worker;
                }
                ScriptStep::Exit { code } => {
                    self.outputs.push_back(PlayerOutput::Exit(code));
                    self.wait = Wait::Exited;
                }
            }
        }
    }
}
