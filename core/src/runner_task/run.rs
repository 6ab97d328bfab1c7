//! [`TaskRun`]: one task of a connected runner, from its `task.assign` to its one
//! `task.report`, sans-IO.
//!
//! The machine reads the assignment (`RoleSpec`, the harness profile, the goal), drives
//! the contract's [`Gateway`] lifecycle (resolve → sandbox → session → dispatch
//! `run_task` → end → destroy), answers the gateway's session actions itself (a connected
//! runner's session is bookkeeping: the harness starts at the dispatch), and asks its host
//! only for what needs I/O: a sandbox (a per-task working directory), the harness run,
//! an interruption, the sandbox's removal. It decides how the task ended and builds the
//! report.
//!
//! # Call order
//!
//! 1. [`TaskRun::new`] with the assignment; drain [`poll_output`](TaskRun::poll_output).
//! 2. Perform each output and report its outcome with
//!    [`handle_input`](TaskRun::handle_input)`(now_ms, …)`; feed a hub's `task.cancel`
//!    (or the runner's shutdown) whenever it happens; drain again.
//! 3. While [`poll_timeout`](TaskRun::poll_timeout) is `Some(t)`, feed
//!    [`TaskRunInput::Timeout`] at `t`.
//! 4. Stop after [`TaskRunOutput::Report`] (emitted exactly once; later inputs are
//!    ignored).
//!
//! # Transitions
//!
//! | when | input | outputs |
//! |---|---|---|
//! | `new` | the invocation is not a valid `RoleSpec` | `Report` (`invalid_assignment`) |
//! | `new` | the profile is refused by resolution | `Report` (`profile_refused`, stage `resolution`) |
//! | `new` | resolved | `CreateSandbox {name, sandbox_profile}` |
//! | sandbox asked | `SandboxCreated {path}` | `RunHarness` (rein `local-run` or `subprocess`, prompt = the goal, working directory = the profile's `metadata.working_directory` or the sandbox path) |
//! | sandbox asked | `SandboxCreated`, a cancel/shutdown was recorded | `DestroySandbox`, `Report` (cancelled / runner_shutdown) |
//! | sandbox asked | `SandboxCreated`, the profile's rein is neither | `DestroySandbox`, `Report` (`unsupported_rein`, stage `session_start`) |
//! | sandbox asked | `SandboxCreateFailed` | `Report` (`sandbox_create_failed`, stage `sandbox_create`) |
//! | harness runs | `Cancel {reason}` / `Shutdown` (the first one) | `Interrupt {reason}`; the boundary deadline is armed |
//! | harness runs | `Timeout` at or after the boundary deadline | `HardStop` (once) |
//! | harness runs | `HarnessEnded(end)` | `DestroySandbox` |
//! | sandbox destroy asked | `SandboxDestroyed` / `SandboxDestroyFailed` | `Report` |
//! | any other | `Cancel` / `Shutdown` | recorded when nothing ended yet, else ignored |
//!
//! # The cancel rule (both reins)
//!
//! A cancel (or the runner's shutdown) that reaches the task **before the harness's end
//! is known** wins: the task reports `cancelled` (`runner_shutdown`), whatever the
//! harness then says (the usage it reported is kept). One that arrives after the end is
//! too late and ignored: the harness's outcome stands. The cancel interrupts at the next
//! boundary — `local-run`: `run.cancel` (the local-run machine ends the turn and the run);
//! `subprocess`: no further turn is started and the current turn's result is awaited —
//! and after [`TaskRunConfig::cancel_boundary_ms`] without an end the machine asks for a
//! hard stop (`local-run`: the controller closes, TERM → grace → KILL; `subprocess`:
//! stdin closed, TERM, KILL).
//!
//! # Outcomes
//!
//! | harness end | outcome (`failure_type`) |
//! |---|---|
//! | `local_terminal` payload (and the stream's violation, if any) | [`local_outcome`](super::local_outcome) |
//! | `turn_result` (usage known) | done |
//! | `turn_error {code}` | failed (`code`) |
//! | `lost` (the harness's stream ended without an end) | failed (`harness_lost`) |
//! | `host_error {kind}` (the runner could not drive the harness) | failed (`host_error_<kind>`) |
//!
//! The run's `run_task` tool result is [`tool_result_for`] of the outcome the report will
//! say (a stop recorded before the end wins, so evidence and report agree); a host error
//! is a failed dispatch. The session's summary carries `tokens` only when the harness
//! reported usage (`null` otherwise, as seed 001 wants), and the report's `usage` is that
//! usage or zeros (the TaskReport requires one). A failed report names the gateway's
//! `failure_stage` (an extra field of the TaskReport).

use std::collections::VecDeque;

use serde_json::{json, Value as JsonValue};

use super::{
    profile_ref, report_object, TaskOutcome, REIN_LOCAL_RUN, REIN_SUBPROCESS, RUN_TASK_TOOL,
};
use crate::adapter::RoleSpec;
use crate::contract::{
    Catalog, ExecutionEvidence, ExecutionRequest, ExecutionSummary, FailureStage, Gateway,
    GatewayAction, GatewayConfig, GatewayInput, GatewayOutput, GatewayResult, Outcome,
    SandboxHandle, StringMap, ToolCall, ToolResult,
};
use crate::json::{Object, Value};
use crate::wire::{TaskAssign, UsageSplit};

/// Default [`TaskRunConfig::cancel_boundary_ms`]: 5 s.
pub const DEFAULT_CANCEL_BOUNDARY_MS: u64 = 5_000;

/// The profile `metadata` key naming the harness's working directory (an absolute path)
/// instead of the task's sandbox directory.
pub const WORKING_DIRECTORY_KEY: &str = "working_directory";

/// The repository of a task whose TaskSpec names none.
pub const DEFAULT_REPOSITORY: &str = "local";

/// The gateway abort code of a cancelled task.
pub const ABORT_CANCELLED: &str = "cancelled";
/// The gateway abort code of a task stopped by the runner's shutdown.
pub const ABORT_SHUTDOWN: &str = "runner_shutdown";

/// `failure_type` of a profile whose rein this runner cannot drive.
pub const UNSUPPORTED_REIN: &str = "unsupported_rein";
/// `failure_type` of a harness whose stream ended without an end (result, terminal).
pub const HARNESS_LOST: &str = "harness_lost";
/// Prefix of the `failure_type` of a host error (`host_error_<kind>`).
pub const HOST_ERROR_PREFIX: &str = "host_error_";
/// `failure_type` of a sandbox the host could not create.
pub const SANDBOX_CREATE_FAILED: &str = "sandbox_create_failed";

/// Configuration of a [`TaskRun`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskRunConfig {
    /// After a cancel, how long the harness may take to reach its next boundary before
    /// the machine asks for a hard stop, ms. Default [`DEFAULT_CANCEL_BOUNDARY_MS`].
    pub cancel_boundary_ms: u64,
}

impl Default for TaskRunConfig {
    fn default() -> Self {
        Self {
            cancel_boundary_ms: DEFAULT_CANCEL_BOUNDARY_MS,
        }
    }
}

/// Which harness protocol a rein speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rein {
    /// A local-runner-protocol harness (seed 002), driven by the local-run machine.
    LocalRun,
    /// A subprocess JSONL harness (seed 000), driven by the subprocess turn machine.
    Subprocess,
}

impl Rein {
    /// The rein id: `local-run` or `subprocess`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rein::LocalRun => REIN_LOCAL_RUN,
            Rein::Subprocess => REIN_SUBPROCESS,
        }
    }

    /// The rein of a rein id this runner can drive.
    pub fn from_id(id: &str) -> Option<Self> {
        match id {
            REIN_LOCAL_RUN => Some(Rein::LocalRun),
            REIN_SUBPROCESS => Some(Rein::Subprocess),
            _ => None,
        }
    }
}

/// What the harness run needs ([`TaskRunOutput::RunHarness`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HarnessPlan {
    /// The protocol.
    pub rein: Rein,
    /// The resolved profile's id.
    pub profile_id: String,
    /// The resolved profile's model.
    pub model: String,
    /// The prompt of the (one) turn: the TaskSpec's `goal`.
    pub prompt: String,
    /// The role's `llm_base_url`.
    pub llm_base_url: Option<String>,
    /// Where the harness runs: the profile's `metadata.working_directory`, else the
    /// sandbox path.
    pub working_directory: String,
}

/// How a harness run ended, as the host saw it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HarnessEnd {
    /// A local run's `run.terminal` payload.
    LocalTerminal {
        /// The `run.terminal` payload.
        payload: JsonValue,
        /// The run's harness violation, when the stream reported one (see
        /// [`local_violation`](super::local_violation)).
        violation: Option<String>,
    },
    /// A subprocess turn's result, with its usage.
    TurnResult {
        /// The turn's usage.
        usage: UsageSplit,
    },
    /// A subprocess session's adapter error (its stable code).
    TurnError {
        /// The adapter error's code.
        code: String,
    },
    /// The harness's stream ended without an end.
    Lost,
    /// The host could not drive the harness (`kind`: a snake_case I/O error kind).
    HostError {
        /// The error kind.
        kind: String,
    },
}

/// What the host tells a [`TaskRun`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskRunInput {
    /// The sandbox (the task's working directory) exists at `path`.
    SandboxCreated {
        /// Its path.
        path: String,
    },
    /// The sandbox could not be created.
    SandboxCreateFailed {
        /// Optional explanation (never in the report).
        message: Option<String>,
    },
    /// The harness run ended.
    HarnessEnded(HarnessEnd),
    /// The hub cancelled the task.
    Cancel {
        /// The cancel's reason.
        reason: String,
    },
    /// The runner is shutting down.
    Shutdown,
    /// The sandbox was removed.
    SandboxDestroyed,
    /// The sandbox could not be removed.
    SandboxDestroyFailed {
        /// Optional explanation (never in the report).
        message: Option<String>,
    },
    /// The deadline of [`TaskRun::poll_timeout`] was reached (harmless at any time).
    Timeout,
}

/// What a [`TaskRun`] asks of its host, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskRunOutput {
    /// Create the task's sandbox (a fresh working directory named `name`); answer
    /// `SandboxCreated` or `SandboxCreateFailed`.
    CreateSandbox {
        /// A file-name-safe name, unique per `(task_id, attempt)` (see [`sandbox_name`]).
        name: String,
        /// The profile's sandbox template.
        sandbox_profile: String,
    },
    /// Run the harness; answer `HarnessEnded`.
    RunHarness(HarnessPlan),
    /// Interrupt the harness at its next boundary (`local-run`: `run.cancel` with the
    /// reason; `subprocess`: start no further turn).
    Interrupt {
        /// The reason (the hub's, or `runner_shutdown`).
        reason: String,
    },
    /// Stop the harness now (the boundary wait ran out).
    HardStop,
    /// Remove the sandbox; answer `SandboxDestroyed` or `SandboxDestroyFailed`.
    DestroySandbox {
        /// The name given in `CreateSandbox`.
        name: String,
        /// The path given in `SandboxCreated`.
        path: String,
    },
    /// The task's one report (a TaskReport object), the outcome it says, and the
    /// execution's compact evidence (`None` when the assignment could not be read).
    Report {
        /// The TaskReport.
        report: Object,
        /// The outcome.
        outcome: TaskOutcome,
        /// The gateway's evidence (seed 001's compact, content-free record).
        evidence: Option<Box<ExecutionEvidence>>,
    },
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Sandbox,
    Harness,
    Teardown,
    Done,
}

/// One task, sans-IO. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct TaskRun {
    config: TaskRunConfig,
    task_id: String,
    gateway: Option<Gateway>,
    role: Option<RoleSpec>,
    goal: String,
    name: String,
    path: String,
    rein: Option<Rein>,
    profile_id: String,
    model: String,
    working_directory: Option<String>,
    phase: Phase,
    /// The first cancel or shutdown, before the harness's end was known.
    stop: Option<TaskOutcome>,
    boundary_deadline: Option<u64>,
    hard_stopped: bool,
    harness: Option<TaskOutcome>,
    usage: Option<UsageSplit>,
    out: VecDeque<TaskRunOutput>,
}

/// The sandbox name of `(task_id, attempt)`: the id's `[A-Za-z0-9_-]` characters (others,
/// `.` included, become `_`; at most 48), `-<attempt>`, and `-` + the id's FNV-1a 32-bit
/// hash in hex, so that distinct ids never share a name and no name can climb out of its
/// directory.
pub fn sandbox_name(task_id: &str, attempt: u64) -> String {
    let safe: String = task_id
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut hash: u32 = 0x811c_9dc5;
    for b in task_id.as_bytes() {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{safe}-{attempt}-{hash:08x}")
}

/// The goal of a TaskSpec object (`goal`, a string; `""` when absent).
pub fn task_goal(task: &Object) -> String {
    task.get("goal")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The contract request of an assignment: profile [`profile_ref`] of the role,
/// repository = the TaskSpec's `repository` (default [`DEFAULT_REPOSITORY`]), title = the
/// task id, description = the goal, `role_ref` = the assignment's role.
pub fn execution_request(assign: &TaskAssign, role: &RoleSpec) -> ExecutionRequest {
    let repository = assign
        .task
        .get("repository")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_REPOSITORY)
        .to_owned();
    let mut request = ExecutionRequest::new(
        profile_ref(role),
        repository,
        assign.task_id.clone(),
        task_goal(&assign.task),
    );
    if !assign.role.is_empty() {
        request.role_ref = Some(assign.role.clone());
    }
    request
}

/// The `run_task` tool result for a harness outcome: `done` and `blocked` are successful
/// results (`{"status": …}`), everything else an unsuccessful one whose error is the
/// `failure_type`.
pub fn tool_result_for(outcome: &TaskOutcome) -> ToolResult {
    match outcome {
        TaskOutcome::Done | TaskOutcome::Blocked => {
            ToolResult::success(json!({"status": outcome.status()}))
        }
        other => ToolResult::failure(other.failure_type().unwrap_or("failed")),
    }
}

/// The outcome of a harness end (see the table in the [module docs](self)).
pub fn outcome_of_end(end: &HarnessEnd) -> TaskOutcome {
    match end {
        HarnessEnd::LocalTerminal { payload, violation } => {
            super::local_outcome(payload, violation.as_deref())
        }
        HarnessEnd::TurnResult { .. } => TaskOutcome::Done,
        HarnessEnd::TurnError { code } => TaskOutcome::Failed {
            failure_type: code.clone(),
        },
        HarnessEnd::Lost => TaskOutcome::Failed {
            failure_type: HARNESS_LOST.into(),
        },
        HarnessEnd::HostError { kind } => TaskOutcome::Failed {
            failure_type: format!("{HOST_ERROR_PREFIX}{kind}"),
        },
    }
}

impl TaskRun {
    /// Start the task of `assign` against `catalog` at `now_ms`.
    pub fn new(now_ms: u64, config: TaskRunConfig, catalog: Catalog, assign: &TaskAssign) -> Self {
        let mut run = Self {
            config,
            task_id: assign.task_id.clone(),
            gateway: None,
            role: None,
            goal: task_goal(&assign.task),
            name: sandbox_name(&assign.task_id, assign.attempt),
            path: String::new(),
            rein: None,
            profile_id: String::new(),
            model: String::new(),
            working_directory: None,
            phase: Phase::Sandbox,
            stop: None,
            boundary_deadline: None,
            hard_stopped: false,
            harness: None,
            usage: None,
            out: VecDeque::new(),
        };
        let invocation = match JsonValue::from(Value::Object(assign.invocation.clone())) {
            JsonValue::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let role = match RoleSpec::from_invocation(&invocation, Some(assign.role.as_str())) {
            Ok(r) => r,
            Err(e) => {
                run.finish(
                    TaskOutcome::InvalidAssignment {
                        code: e.code().to_owned(),
                    },
                    None,
                    None,
                );
                return run;
            }
        };
        let request = execution_request(assign, &role);
        run.role = Some(role);
        let mut gw = Gateway::new(GatewayConfig::new(catalog));
        let execute = GatewayInput::Execute {
            request,
            inputs: StringMap::new(),
            tool_calls: vec![ToolCall::new(RUN_TASK_TOOL)],
        };
        // `execute` with one call is always accepted (the bound is 256 calls).
        let _ = gw.handle_input(now_ms, execute);
        run.gateway = Some(gw);
        run.pump(now_ms);
        run
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// `true` once the report was emitted.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next output; `None` when there is nothing to do until the next input.
    pub fn poll_output(&mut self) -> Option<TaskRunOutput> {
        self.out.pop_front()
    }

    /// When to feed [`TaskRunInput::Timeout`]: the cancel's boundary deadline while the
    /// harness runs and no hard stop was asked.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Harness if !self.hard_stopped => self.boundary_deadline,
            _ => None,
        }
    }

    /// Feed one input at `now_ms`. Inputs that do not fit the current phase are ignored
    /// (the machine never fails: every fault becomes the report).
    pub fn handle_input(&mut self, now_ms: u64, input: TaskRunInput) {
        if self.phase == Phase::Done {
            return;
        }
        match input {
            TaskRunInput::Cancel { reason } => self.stop_with(
                now_ms,
                TaskOutcome::Cancelled {
                    reason: reason.clone(),
                },
                reason,
            ),
            TaskRunInput::Shutdown => {
                self.stop_with(now_ms, TaskOutcome::Shutdown, ABORT_SHUTDOWN.into())
            }
            TaskRunInput::Timeout => {
                if let (Phase::Harness, Some(d), false) =
                    (self.phase, self.boundary_deadline, self.hard_stopped)
                {
                    if now_ms >= d {
                        self.hard_stopped = true;
                        self.out.push_back(TaskRunOutput::HardStop);
                    }
                }
            }
            TaskRunInput::SandboxCreated { path } if self.phase == Phase::Sandbox => {
                self.path = path.clone();
                self.feed(
                    now_ms,
                    GatewayInput::SandboxCreated {
                        sandbox: SandboxHandle::new(self.name.clone()),
                    },
                );
            }
            TaskRunInput::SandboxCreateFailed { message } if self.phase == Phase::Sandbox => {
                self.feed(now_ms, GatewayInput::SandboxCreateFailed { message });
            }
            TaskRunInput::HarnessEnded(end) if self.phase == Phase::Harness => {
                let outcome = outcome_of_end(&end);
                if let HarnessEnd::TurnResult { usage } = &end {
                    self.usage = Some(*usage);
                }
                let answer = match &end {
                    HarnessEnd::HostError { kind } => GatewayInput::ToolDispatchFailed {
                        message: Some(format!("{HOST_ERROR_PREFIX}{kind}")),
                    },
                    // The tool result says what the report will say: a stop recorded
                    // before the end wins (the cancel rule), so evidence and report agree.
                    _ => GatewayInput::ToolDispatched {
                        result: tool_result_for(self.stop.as_ref().unwrap_or(&outcome)),
                    },
                };
                self.harness = Some(outcome);
                self.phase = Phase::Teardown;
                self.feed(now_ms, answer);
            }
            TaskRunInput::SandboxDestroyed if self.phase == Phase::Teardown => {
                self.feed(now_ms, GatewayInput::SandboxDestroyed);
            }
            TaskRunInput::SandboxDestroyFailed { message } if self.phase == Phase::Teardown => {
                self.feed(now_ms, GatewayInput::SandboxDestroyFailed { message });
            }
            _ => {}
        }
    }

    fn stop_with(&mut self, now_ms: u64, outcome: TaskOutcome, reason: String) {
        // Too late once the harness's end is known (teardown), and only the first counts.
        if self.stop.is_some() || matches!(self.phase, Phase::Teardown | Phase::Done) {
            return;
        }
        self.stop = Some(outcome);
        if self.phase == Phase::Harness {
            self.out.push_back(TaskRunOutput::Interrupt { reason });
            self.boundary_deadline = Some(now_ms.saturating_add(self.config.cancel_boundary_ms));
        }
    }

    fn feed(&mut self, now_ms: u64, input: GatewayInput) {
        if let Some(gw) = self.gateway.as_mut() {
            // Every input fed here answers the outstanding action (the phases follow the
            // gateway's stages), so it is accepted.
            let _ = gw.handle_input(now_ms, input);
        }
        self.pump(now_ms);
    }

    /// Drain the gateway: answer the actions the machine answers itself, turn the
    /// others into outputs, and the result into the report.
    fn pump(&mut self, now_ms: u64) {
        loop {
            let Some(gw) = self.gateway.as_mut() else {
                return;
            };
            let Some(out) = gw.poll_output() else { return };
            let answer = match out {
                GatewayOutput::Result(r) => {
                    self.conclude(&r);
                    return;
                }
                GatewayOutput::Action(GatewayAction::CreateSandbox {
                    sandbox_profile, ..
                }) => {
                    self.out.push_back(TaskRunOutput::CreateSandbox {
                        name: self.name.clone(),
                        sandbox_profile,
                    });
                    return;
                }
                GatewayOutput::Action(GatewayAction::StartSession { profile, .. }) => {
                    self.profile_id = profile.profile_id.clone();
                    self.model = profile.model.clone();
                    self.working_directory = profile
                        .metadata
                        .get(WORKING_DIRECTORY_KEY)
                        .and_then(JsonValue::as_str)
                        .map(str::to_owned);
                    self.rein = Rein::from_id(&profile.rein);
                    match (&self.stop, self.rein) {
                        (Some(_), _) => GatewayInput::Abort {
                            code: self.abort_code().into(),
                        },
                        (None, None) => GatewayInput::SessionStartFailed {
                            message: Some(UNSUPPORTED_REIN.into()),
                        },
                        (None, Some(rein)) => {
                            let mut session = StringMap::new();
                            session.insert("rein".into(), rein.as_str().into());
                            GatewayInput::SessionStarted { session }
                        }
                    }
                }
                GatewayOutput::Action(GatewayAction::DispatchTool { .. }) => {
                    let Some(rein) = self.rein else {
                        // Unreachable: the session start failed for an unknown rein.
                        if let Some(gw) = self.gateway.as_mut() {
                            let _ = gw.handle_input(
                                now_ms,
                                GatewayInput::ToolDispatchFailed {
                                    message: Some(UNSUPPORTED_REIN.into()),
                                },
                            );
                        }
                        continue;
                    };
                    self.phase = Phase::Harness;
                    let role = self.role.as_ref();
                    self.out.push_back(TaskRunOutput::RunHarness(HarnessPlan {
                        rein,
                        profile_id: self.profile_id.clone(),
                        model: self.model.clone(),
                        prompt: self.goal.clone(),
                        llm_base_url: role.and_then(|r| r.llm_base_url.clone()),
                        working_directory: self
                            .working_directory
                            .clone()
                            .unwrap_or_else(|| self.path.clone()),
                    }));
                    return;
                }
                GatewayOutput::Action(GatewayAction::EndSession { .. }) => {
                    GatewayInput::SessionEnded {
                        summary: ExecutionSummary {
                            tokens: self.usage,
                            ..ExecutionSummary::default()
                        },
                    }
                }
                GatewayOutput::Action(GatewayAction::DestroySandbox { .. })
                | GatewayOutput::Action(GatewayAction::DiscardSandbox) => {
                    self.phase = Phase::Teardown;
                    self.out.push_back(TaskRunOutput::DestroySandbox {
                        name: self.name.clone(),
                        path: self.path.clone(),
                    });
                    return;
                }
            };
            if let Some(gw) = self.gateway.as_mut() {
                let _ = gw.handle_input(now_ms, answer);
            }
        }
    }

    fn abort_code(&self) -> &'static str {
        match self.stop {
            Some(TaskOutcome::Shutdown) => ABORT_SHUTDOWN,
            _ => ABORT_CANCELLED,
        }
    }

    fn conclude(&mut self, result: &GatewayResult) {
        let outcome = settle(result, self.stop.clone(), self.harness.clone(), self.rein);
        let stage = match outcome {
            TaskOutcome::Done | TaskOutcome::Blocked => None,
            _ => result.evidence.failure_stage,
        };
        self.finish(outcome, stage, Some(Box::new(result.evidence.clone())));
    }

    fn finish(
        &mut self,
        outcome: TaskOutcome,
        stage: Option<FailureStage>,
        evidence: Option<Box<ExecutionEvidence>>,
    ) {
        let usage = self.usage.unwrap_or_default();
        let mut report = report_object(&self.task_id, &outcome, &usage);
        if let Some(stage) = stage {
            report.insert(FAILURE_STAGE_KEY, stage.as_str());
        }
        self.phase = Phase::Done;
        self.out.push_back(TaskRunOutput::Report {
            report,
            outcome,
            evidence,
        });
    }
}

/// The TaskReport extra field naming the gateway stage a failed task failed in
/// (`resolution`, `sandbox_create`, `session_start`, `execution`, `session_end`,
/// `teardown`).
pub const FAILURE_STAGE_KEY: &str = "failure_stage";

/// The task's outcome from the gateway's result, the first cancel/shutdown recorded before
/// the harness's end (`stop`), the harness's own outcome, and the rein: a refusal →
/// [`TaskOutcome::Refused`]; a recorded stop wins next (the cancel rule); then a harness
/// outcome other than done (it says why); then an unsupported rein
/// ([`UNSUPPORTED_REIN`]); a succeeded lifecycle → done; otherwise failed with the
/// evidence's `failure_code` (e.g. `sandbox_create_failed`, `teardown_failed`).
pub fn settle(
    result: &GatewayResult,
    stop: Option<TaskOutcome>,
    harness: Option<TaskOutcome>,
    rein: Option<Rein>,
) -> TaskOutcome {
    let ev = &result.evidence;
    if ev.outcome == Outcome::Refused {
        return TaskOutcome::Refused {
            code: ev.failure_code.clone().unwrap_or_default(),
            reasons: ev.failure_reasons.clone(),
        };
    }
    if let Some(s) = stop {
        return s;
    }
    match harness {
        Some(h) if h != TaskOutcome::Done => return h,
        _ => {}
    }
    if rein.is_none() && ev.failure_stage == Some(FailureStage::SessionStart) {
        return TaskOutcome::Failed {
            failure_type: UNSUPPORTED_REIN.into(),
        };
    }
    if ev.outcome == Outcome::Succeeded {
        return TaskOutcome::Done;
    }
    TaskOutcome::Failed {
        failure_type: ev
            .failure_code
            .clone()
            .unwrap_or_else(|| "gateway_failed".into()),
    }
}

// ---- JSON forms (for `call` and the conformance vectors) --------------------------

impl TaskRunConfig {
    /// The keys of the JSON form.
    pub const KEYS: [&'static str; 1] = ["cancel_boundary_ms"];

    /// Defaults overridden by the keys present in `value`.
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(value: &JsonValue) -> Result<Self, crate::config::ConfigError> {
        let r = crate::config::ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        Ok(Self {
            cancel_boundary_ms: r.u64("cancel_boundary_ms")?.unwrap_or(d.cancel_boundary_ms),
        })
    }
}

impl HarnessEnd {
    /// Parse `{"type": "local_terminal", "payload", "violation"?} | {"type": "turn_result", "usage"} |
    /// {"type": "turn_error", "code"} | {"type": "lost"} | {"type": "host_error",
    /// "kind"}`.
    ///
    /// # Errors
    /// A text naming the bad field.
    pub fn from_value(v: &JsonValue) -> Result<Self, String> {
        let s = |k: &str| {
            v.get(k)
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("end.{k} must be a string"))
        };
        Ok(match v.get("type").and_then(JsonValue::as_str) {
            Some("local_terminal") => HarnessEnd::LocalTerminal {
                payload: v.get("payload").cloned().unwrap_or(JsonValue::Null),
                violation: match v.get("violation") {
                    None | Some(JsonValue::Null) => None,
                    Some(_) => Some(s("violation")?),
                },
            },
            Some("turn_result") => HarnessEnd::TurnResult {
                usage: UsageSplit::from_value(&Value::from(
                    v.get("usage").cloned().unwrap_or(JsonValue::Null),
                ))
                .map_err(|e| format!("end.usage: {e}"))?,
            },
            Some("turn_error") => HarnessEnd::TurnError { code: s("code")? },
            Some("lost") => HarnessEnd::Lost,
            Some("host_error") => HarnessEnd::HostError { kind: s("kind")? },
            _ => return Err("end.type is not a known harness end".into()),
        })
    }
}

impl TaskRunInput {
    /// Parse the JSON form: `{"type": "sandbox_created", "path"} |
    /// {"type": "sandbox_create_failed", "message"?} | {"type": "harness_ended", "end"} |
    /// {"type": "cancel", "reason"} | {"type": "shutdown"} | {"type":
    /// "sandbox_destroyed"} | {"type": "sandbox_destroy_failed", "message"?} |
    /// {"type": "timeout"}`.
    ///
    /// # Errors
    /// A text naming the bad field.
    pub fn from_value(v: &JsonValue) -> Result<Self, String> {
        let s = |k: &str| {
            v.get(k)
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("input.{k} must be a string"))
        };
        let message = || {
            v.get("message")
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
        };
        Ok(match v.get("type").and_then(JsonValue::as_str) {
            Some("sandbox_created") => TaskRunInput::SandboxCreated { path: s("path")? },
            Some("sandbox_create_failed") => {
                TaskRunInput::SandboxCreateFailed { message: message() }
            }
            Some("harness_ended") => TaskRunInput::HarnessEnded(HarnessEnd::from_value(
                v.get("end").unwrap_or(&JsonValue::Null),
            )?),
            Some("cancel") => TaskRunInput::Cancel {
                reason: s("reason")?,
            },
            Some("shutdown") => TaskRunInput::Shutdown,
            Some("sandbox_destroyed") => TaskRunInput::SandboxDestroyed,
            Some("sandbox_destroy_failed") => {
                TaskRunInput::SandboxDestroyFailed { message: message() }
            }
            Some("timeout") => TaskRunInput::Timeout,
            _ => return Err("input.type is not a known task-run input".into()),
        })
    }
}

impl TaskRunOutput {
    /// The JSON form: `{"type": "create_sandbox", "name", "sandbox_profile"} |
    /// {"type": "run_harness", "rein", "profile_id", "model", "prompt", "llm_base_url",
    /// "working_directory"} | {"type": "interrupt", "reason"} | {"type": "hard_stop"} |
    /// {"type": "destroy_sandbox", "name", "path"} | {"type": "report", "report",
    /// "outcome", "evidence"}` (`evidence` `null` when the assignment could not be read).
    pub fn to_value(&self) -> JsonValue {
        match self {
            TaskRunOutput::CreateSandbox {
                name,
                sandbox_profile,
            } => {
                json!({"type": "create_sandbox", "name": name, "sandbox_profile": sandbox_profile})
            }
            TaskRunOutput::RunHarness(p) => json!({"type": "run_harness", "rein": p.rein.as_str(),
                "profile_id": p.profile_id, "model": p.model, "prompt": p.prompt,
                "llm_base_url": p.llm_base_url, "working_directory": p.working_directory}),
            TaskRunOutput::Interrupt { reason } => json!({"type": "interrupt", "reason": reason}),
            TaskRunOutput::HardStop => json!({"type": "hard_stop"}),
            TaskRunOutput::DestroySandbox { name, path } => {
                json!({"type": "destroy_sandbox", "name": name, "path": path})
            }
            TaskRunOutput::Report {
                report,
                outcome,
                evidence,
            } => json!({"type": "report",
                "report": JsonValue::from(Value::Object(report.clone())), "outcome": outcome.to_value(),
                "evidence": evidence.as_ref().map(|e| e.to_value())}),
        }
    }
}

/// Run a whole scenario (the `task_run` call): `{"assign": {"task_id", "attempt"?,
/// "role"?, "task"?, "invocation"?}, "catalog"?: <Catalog> (default
/// [`default_catalog`](super::default_catalog)), "config"?: <TaskRunConfig>, "inputs":
/// [{"at"?: ms, "input": <input>}…]}` → `[{"outputs": [...], "timeout": ms | null}…]`,
/// one entry after `new` (at 0) and one per input.
///
/// # Errors
/// A text naming the bad field.
pub fn scenario(arg: &JsonValue) -> Result<JsonValue, String> {
    let a = arg
        .get("assign")
        .and_then(JsonValue::as_object)
        .ok_or("task_run.assign must be an object")?;
    let obj = |k: &str| -> Result<Object, String> {
        match a.get(k) {
            None => Ok(Object::new()),
            Some(v @ JsonValue::Object(_)) => match Value::from(v.clone()) {
                Value::Object(o) => Ok(o),
                _ => Ok(Object::new()),
            },
            Some(_) => Err(format!("task_run.assign.{k} must be an object")),
        }
    };
    let mut assign = TaskAssign::new(
        obj("task")?,
        a.get("role").and_then(JsonValue::as_str).unwrap_or("coder"),
        obj("invocation")?,
    );
    assign.task_id = a
        .get("task_id")
        .and_then(JsonValue::as_str)
        .ok_or("task_run.assign.task_id must be a string")?
        .to_owned();
    assign.attempt = a.get("attempt").and_then(JsonValue::as_u64).unwrap_or(1);
    let catalog = match arg.get("catalog") {
        None => super::default_catalog(),
        Some(c) => Catalog::from_value(c).map_err(|e| format!("task_run.catalog: {e}"))?,
    };
    let config = match arg.get("config") {
        None => TaskRunConfig::default(),
        Some(c) => TaskRunConfig::from_value(c).map_err(|e| format!("task_run.config: {e}"))?,
    };
    let inputs = arg
        .get("inputs")
        .and_then(JsonValue::as_array)
        .ok_or("task_run.inputs must be an array")?;
    let mut run = TaskRun::new(0, config, catalog, &assign);
    let mut steps = Vec::new();
    let drain = |run: &mut TaskRun| {
        let mut outs = Vec::new();
        while let Some(o) = run.poll_output() {
            outs.push(o.to_value());
        }
        json!({"outputs": outs, "timeout": run.poll_timeout()})
    };
    steps.push(drain(&mut run));
    for step in inputs {
        let at = step.get("at").and_then(JsonValue::as_u64).unwrap_or(0);
        let input = TaskRunInput::from_value(step.get("input").unwrap_or(&JsonValue::Null))?;
        run.handle_input(at, input);
        steps.push(drain(&mut run));
    }
    Ok(JsonValue::Array(steps))
}
