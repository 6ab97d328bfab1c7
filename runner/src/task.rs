//! One task of a connected runner: from a `task.assign` to its `task.report`.
//!
//! The assignment's `RoleSpec` is read with the core's `RoleSpec::from_invocation`; the
//! harness profile (the core's [`profile_ref`]) is resolved and the whole execution runs
//! through the contract's [`Gateway`] lifecycle (resolve → sandbox → session → dispatch
//! `run_task` → end → destroy). The `run_task` dispatch drives the profile's rein:
//!
//! * `local-run` — a harness that speaks the local-runner protocol (the built-in fake
//!   harness by default), supervised exactly as `stapel-runner run` does (the same
//!   [`host`] loop: process group, cleared environment, bounds), with the built-in
//!   controller; a cancel becomes `run.cancel`;
//! * `subprocess` — a seed-000 JSONL harness (`{"type":"turn"}` in, `{"type":"result"}`
//!   out) driven by the core's [`SubprocessSession`] turn machine; a cancel closes it
//!   (stdin close → TERM → KILL).
//!
//! Harness events become progress through the core's mapping; the end becomes one report
//! through the core's [`outcome_from_gateway`] and [`report_object`]. Every harness is
//! started through the `harness-exec` wrapper so that it dies with the runner.

use std::time::Duration;

use serde_json::Value as JsonValue;
use stapel_runner_protocol::adapter::{
    RoleSpec, SignalTarget, SpawnSpec as AdapterSpawn, StopSignal, SubprocessConfig,
    SubprocessInput, SubprocessOutput, SubprocessSession,
};
use stapel_runner_protocol::contract::{
    Catalog, ExecutionRequest, ExecutionSummary, Gateway, GatewayAction, GatewayConfig,
    GatewayInput, GatewayOutput, SandboxHandle, StringMap, ToolCall, ToolResult,
};
use stapel_runner_protocol::json::{Object, Value};
use stapel_runner_protocol::local::LocalConfig;
use stapel_runner_protocol::runner_task::{
    outcome_from_gateway, outcome_from_local_terminal, profile_ref, progress_from_harness_event,
    progress_from_local_event, report_object, ProgressItem, TaskOutcome,
};
use stapel_runner_protocol::wire::{TaskAssign, UsageSplit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::controller::{AutoController, OperatorPlan};
use crate::host::{self, Controller, HostOptions, TaskLink, View};
use crate::supervisor::{self, GroupGuard, SpawnSpec};

/// The tool the gateway dispatches for a task: run the harness on it.
pub const RUN_TASK_TOOL: &str = "run_task";
/// The rein of a harness that speaks the local-runner protocol.
pub const REIN_LOCAL_RUN: &str = "local-run";
/// The rein of a seed-000 subprocess JSONL harness.
pub const REIN_SUBPROCESS: &str = "subprocess";

/// The catalog used without `--profiles`: profile `fake` (rein `local-run`, the
/// configured local harness) and profile `subprocess` (rein `subprocess`, the configured
/// JSONL harness), each allowed only the `run_task` tool.
pub fn default_catalog() -> Catalog {
    let profile = |id: &str, rein: &str| {
        serde_json::json!({"contract_version": "1.0", "profile_id": id, "rein": rein,
            "model": "local", "sandbox_profile": "process-group",
            "tool_policy": {"allowed_tools": [RUN_TASK_TOOL]}})
    };
    let v = serde_json::json!({
        "profiles": [profile("fake", REIN_LOCAL_RUN), profile("subprocess", REIN_SUBPROCESS)],
        "reins": [{"rein_id": REIN_LOCAL_RUN, "contract_version": "1.0"},
                  {"rein_id": REIN_SUBPROCESS, "contract_version": "1.0"}],
    });
    Catalog::from_value(&v).unwrap_or_default()
}

/// What a task tells the connect loop.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// A progress frame to send.
    Progress {
        /// Task id.
        task_id: String,
        /// Attempt.
        attempt: u64,
        /// Kind and payload.
        item: ProgressItem,
    },
    /// The task's one report (a TaskReport object).
    Report {
        /// Task id.
        task_id: String,
        /// Attempt.
        attempt: u64,
        /// The TaskReport.
        report: Object,
    },
}

/// How harnesses are started.
#[derive(Debug, Clone)]
pub struct Harnesses {
    /// The local-run machine's configuration (its harness program and arguments, the
    /// environment allow-list, bounds).
    pub local: LocalConfig,
    /// The JSONL harness command (program and arguments); empty: none configured.
    pub jsonl: Vec<String>,
    /// The runner's `PATH` (the only variable a JSONL harness inherits).
    pub path: String,
    /// The wrapper every harness is started through (see [`crate::exec`]).
    pub wrapper: Vec<String>,
    /// Stop-escalation grace of a JSONL harness, ms.
    pub grace_ms: u64,
}

/// Run one task to its report. Never fails: every fault becomes the report.
pub async fn run_task(
    assign: TaskAssign,
    catalog: Catalog,
    harnesses: Harnesses,
    events: mpsc::Sender<TaskEvent>,
    mut cancel: mpsc::Receiver<String>,
) {
    let task_id = assign.task_id.clone();
    let attempt = assign.attempt;
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let (outcome, usage) = execute(&assign, catalog, &harnesses, &events, &mut cancel, &now).await;
    let report = report_object(&task_id, &outcome, &usage);
    let _ = events
        .send(TaskEvent::Report {
            task_id,
            attempt,
            report,
        })
        .await;
}

async fn execute(
    assign: &TaskAssign,
    catalog: Catalog,
    harnesses: &Harnesses,
    events: &mpsc::Sender<TaskEvent>,
    cancel: &mut mpsc::Receiver<String>,
    now: &impl Fn() -> u64,
) -> (TaskOutcome, UsageSplit) {
    let zero = UsageSplit::default();
    let invocation = match JsonValue::from(Value::Object(assign.invocation.clone())) {
        JsonValue::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let role = match RoleSpec::from_invocation(&invocation, Some(assign.role.as_str())) {
        Ok(r) => r,
        Err(e) => {
            return (
                TaskOutcome::InvalidAssignment {
                    code: e.code().to_string(),
                },
                zero,
            )
        }
    };
    let goal = assign
        .task
        .get("goal")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let repository = assign
        .task
        .get("repository")
        .and_then(Value::as_str)
        .unwrap_or("local")
        .to_string();
    let request = ExecutionRequest::new(
        profile_ref(&role),
        repository,
        assign.task_id.clone(),
        goal.clone(),
    );
    let mut gw = Gateway::new(GatewayConfig::new(catalog));
    let mut harness_outcome: Option<TaskOutcome> = None;
    let mut usage = zero;
    let mut rein = String::new();
    let mut input = Some(GatewayInput::Execute {
        request,
        inputs: StringMap::new(),
        tool_calls: vec![ToolCall::new(RUN_TASK_TOOL)],
    });
    let progress = |item: ProgressItem| TaskEvent::Progress {
        task_id: assign.task_id.clone(),
        attempt: assign.attempt,
        item,
    };
    loop {
        if let Some(i) = input.take() {
            if let Err(e) = gw.handle_input(now(), i) {
                return (
                    TaskOutcome::Failed {
                        failure_type: e.code().to_string(),
                    },
                    usage,
                );
            }
        }
        // A cancel that arrived while no harness runs aborts the outstanding action.
        if harness_outcome.is_none() {
            if let Ok(reason) = cancel.try_recv() {
                harness_outcome = Some(TaskOutcome::Cancelled { reason });
                input = Some(GatewayInput::Abort {
                    code: "cancelled".into(),
                });
                continue;
            }
        }
        let Some(out) = gw.poll_output() else {
            return (
                harness_outcome.unwrap_or(TaskOutcome::Failed {
                    failure_type: "gateway_stalled".into(),
                }),
                usage,
            );
        };
        input = Some(match out {
            GatewayOutput::Result(r) => return (outcome_from_gateway(&r, harness_outcome), usage),
            GatewayOutput::Action(GatewayAction::CreateSandbox { .. }) => {
                // The sandbox of a connected runner is the harness's process group.
                GatewayInput::SandboxCreated {
                    sandbox: SandboxHandle::new("process-group"),
                }
            }
            GatewayOutput::Action(GatewayAction::StartSession { profile, .. }) => {
                rein = profile.rein.clone();
                let mut session = StringMap::new();
                session.insert("rein".into(), rein.clone());
                GatewayInput::SessionStarted { session }
            }
            GatewayOutput::Action(GatewayAction::DispatchTool { .. }) => {
                let (outcome, u) = match rein.as_str() {
                    REIN_LOCAL_RUN => run_local(&goal, harnesses, events, cancel, &progress).await,
                    REIN_SUBPROCESS => {
                        run_jsonl(&goal, &role, harnesses, events, cancel, &progress, now).await
                    }
                    _ => (
                        TaskOutcome::Failed {
                            failure_type: "unsupported_rein".into(),
                        },
                        UsageSplit::default(),
                    ),
                };
                usage = u;
                let result = if outcome == TaskOutcome::Done || outcome == TaskOutcome::Blocked {
                    ToolResult::success(serde_json::json!({"status": outcome.status()}))
                } else {
                    ToolResult::failure(outcome.failure_type().unwrap_or("failed"))
                };
                harness_outcome = Some(outcome);
                GatewayInput::ToolDispatched { result }
            }
            GatewayOutput::Action(GatewayAction::EndSession { .. }) => GatewayInput::SessionEnded {
                summary: ExecutionSummary {
                    tokens: Some(usage),
                    ..ExecutionSummary::default()
                },
            },
            GatewayOutput::Action(GatewayAction::DestroySandbox { .. })
            | GatewayOutput::Action(GatewayAction::DiscardSandbox) => {
                GatewayInput::SandboxDestroyed
            }
            _ => GatewayInput::ActionFailed { message: None },
        });
    }
}

/// Drive a local-run harness through the same host loop as `stapel-runner run`.
async fn run_local(
    goal: &str,
    harnesses: &Harnesses,
    events: &mpsc::Sender<TaskEvent>,
    cancel: &mut mpsc::Receiver<String>,
    progress: &impl Fn(ProgressItem) -> TaskEvent,
) -> (TaskOutcome, UsageSplit) {
    let (lines_tx, mut lines_rx) = mpsc::channel::<String>(64);
    let (cancel_tx, cancel_rx) = mpsc::channel::<String>(1);
    let plan = OperatorPlan {
        turn_text: goal.to_string(),
        ..OperatorPlan::default()
    };
    let opts = HostOptions {
        config: harnesses.local.clone(),
        controller: Controller::Auto(AutoController::new(plan)),
        view: View::Jsonl,
        drain_after_exit: Duration::from_millis(250),
        controller_stall: Duration::from_secs(10),
        task: Some(TaskLink {
            lines: lines_tx,
            cancel: cancel_rx,
            wrapper: harnesses.wrapper.clone(),
        }),
    };
    let mut host = Box::pin(host::run(opts));
    let mut terminal: Option<TaskOutcome> = None;
    let mut cancelled: Option<String> = None;
    let mut host_done = false;
    let mut lines_open = true;
    while !host_done || lines_open {
        tokio::select! {
            line = lines_rx.recv(), if lines_open => match line {
                Some(line) => {
                    let Ok(v) = serde_json::from_str::<JsonValue>(&line) else { continue };
                    let message = &v["message"];
                    if message["event"]["eventType"] == "run.terminal" {
                        terminal = Some(outcome_from_local_terminal(&message["event"]["payload"]));
                    } else if let Some(item) = progress_from_local_event(message) {
                        if events.send(progress(item)).await.is_err() {
                            let _ = cancel_tx.try_send("runner_shutdown".into());
                        }
                    }
                }
                None => lines_open = false,
            },
            r = &mut host, if !host_done => {
                host_done = true;
                if let Err(e) = r {
                    terminal.get_or_insert(TaskOutcome::Failed { failure_type: format!("host_error_{:?}", e.kind()).to_lowercase() });
                }
            }
            reason = cancel.recv(), if cancelled.is_none() => {
                let reason = reason.unwrap_or_else(|| "runner_shutdown".into());
                cancelled = Some(reason.clone());
                let _ = cancel_tx.try_send(reason);
            }
        }
    }
    let outcome = match (cancelled, terminal) {
        (Some(reason), _) => TaskOutcome::Cancelled { reason },
        (None, Some(t)) => t,
        (None, None) => TaskOutcome::Failed {
            failure_type: "harness_lost".into(),
        },
    };
    (outcome, UsageSplit::default())
}

enum Pipe {
    Stdout(Vec<u8>),
    Eof,
    Exited,
}

/// Drive a seed-000 subprocess JSONL harness with the core's turn machine: one turn with
/// the task's goal as the prompt.
async fn run_jsonl(
    goal: &str,
    role: &RoleSpec,
    harnesses: &Harnesses,
    events: &mpsc::Sender<TaskEvent>,
    cancel: &mut mpsc::Receiver<String>,
    progress: &impl Fn(ProgressItem) -> TaskEvent,
    now: &impl Fn() -> u64,
) -> (TaskOutcome, UsageSplit) {
    let mut s = SubprocessSession::new(SubprocessConfig::default().grace_ms(harnesses.grace_ms));
    let mut spec = AdapterSpawn::new(harnesses.jsonl.clone(), harnesses.path.clone());
    spec.llm_base_url = role.llm_base_url.clone();
    let _ = s.handle_input(now(), SubprocessInput::Open(spec));
    let (pipe_tx, mut pipe_rx) = mpsc::channel::<Pipe>(8);
    let mut stdin: Option<mpsc::Sender<String>> = None;
    let mut pid: Option<i32> = None;
    let mut guard: Option<GroupGuard> = None;
    let mut outcome: Option<TaskOutcome> = None;
    let mut usage = UsageSplit::default();
    let mut cancelled: Option<String> = None;
    let mut pending: Vec<SubprocessInput> = Vec::new();
    loop {
        for i in pending.drain(..) {
            let _ = s.handle_input(now(), i);
        }
        while let Some(out) = s.poll_output() {
            match out {
                SubprocessOutput::Spawn(req) => {
                    let (program, args) =
                        host::wrap_command(&harnesses.wrapper, req.program, req.args);
                    let spec = SpawnSpec {
                        program,
                        args,
                        env: req.env,
                        new_process_group: req.new_process_group,
                    };
                    match supervisor::spawn(&spec) {
                        Ok(sp) => {
                            let child_pid = sp.pid;
                            pid = Some(child_pid);
                            guard = Some(GroupGuard::new(child_pid));
                            stdin = Some(start_jsonl_io(sp, pipe_tx.clone()));
                            pending.push(SubprocessInput::Spawned {
                                pid: u32::try_from(child_pid).ok(),
                                process_group: true,
                            });
                            pending.push(SubprocessInput::StartTurn {
                                prompt: goal.to_string(),
                            });
                        }
                        Err(e) => pending.push(SubprocessInput::SpawnFailed {
                            message: e.kind().to_string(),
                        }),
                    }
                }
                SubprocessOutput::WriteStdin(data) => {
                    let ok = stdin.as_ref().is_some_and(|tx| tx.try_send(data).is_ok());
                    if !ok {
                        pending.push(SubprocessInput::StdinWriteFailed {
                            message: "stdin closed or full".into(),
                        });
                    }
                }
                SubprocessOutput::CloseStdin => stdin = None,
                SubprocessOutput::Signal { target, signal } => {
                    if let Some(p) = pid {
                        let sig = match signal {
                            StopSignal::Term => nix::sys::signal::Signal::SIGTERM,
                            StopSignal::Kill => nix::sys::signal::Signal::SIGKILL,
                        };
                        match target {
                            SignalTarget::Group => {
                                let _ = supervisor::signal_group(p, sig);
                            }
                            _ => {
                                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
                            }
                        }
                    }
                }
                SubprocessOutput::CloseStdout => {
                    if let Some(g) = guard.as_mut() {
                        g.disarm();
                    }
                }
                SubprocessOutput::Progress(event) => {
                    let item = progress_from_harness_event(&JsonValue::Object(event));
                    let _ = events.send(progress(item)).await;
                }
                SubprocessOutput::TurnResult(r) => {
                    usage = r.usage;
                    outcome.get_or_insert(TaskOutcome::Done);
                    pending.push(SubprocessInput::Close);
                }
                SubprocessOutput::Error(e) => {
                    outcome.get_or_insert(TaskOutcome::Failed {
                        failure_type: e.code().to_string(),
                    });
                    pending.push(SubprocessInput::Close);
                }
                _ => {}
            }
        }
        if !pending.is_empty() {
            continue;
        }
        if s.is_closed() && s.poll_timeout().is_none() {
            break;
        }
        let deadline = s.poll_timeout();
        let sleep = async {
            match deadline {
                Some(d) => {
                    let wait = d.saturating_sub(now());
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            p = pipe_rx.recv() => match p {
                Some(Pipe::Stdout(b)) => pending.push(SubprocessInput::Stdout(b)),
                Some(Pipe::Eof) => pending.push(SubprocessInput::Eof),
                Some(Pipe::Exited) | None => pending.push(SubprocessInput::Exited),
            },
            () = sleep => pending.push(SubprocessInput::Timeout),
            reason = cancel.recv(), if cancelled.is_none() => {
                cancelled = Some(reason.unwrap_or_else(|| "runner_shutdown".into()));
                pending.push(SubprocessInput::Close);
            }
        }
    }
    drop(guard);
    let outcome = match (cancelled, outcome) {
        (Some(reason), None | Some(TaskOutcome::Failed { .. })) => {
            TaskOutcome::Cancelled { reason }
        }
        (_, Some(o)) => o,
        (None, None) => TaskOutcome::Failed {
            failure_type: "harness_lost".into(),
        },
    };
    (outcome, usage)
}

/// Writer of the child's stdin, reader of its stdout (stderr is drained and dropped);
/// `Eof` comes before `Exited`. After the leader exits, stdout is drained until it is
/// quiet for 250 ms (a straggler may hold it open).
fn start_jsonl_io(sp: supervisor::Spawned, tx: mpsc::Sender<Pipe>) -> mpsc::Sender<String> {
    let mut child = sp.child;
    let (in_tx, mut in_rx) = mpsc::channel::<String>(64);
    if let Some(mut w) = child.stdin.take() {
        tokio::spawn(async move {
            while let Some(line) = in_rx.recv().await {
                if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
                    return;
                }
            }
        });
    }
    if let Some(mut err) = child.stderr.take() {
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            while matches!(err.read(&mut buf).await, Ok(n) if n > 0) {}
        });
    }
    let mut out = child.stdout.take();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut exited = false;
        let mut quiet_until: Option<Instant> = None;
        loop {
            let quiet = async {
                match quiet_until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                r = async { match &mut out { Some(o) => o.read(&mut buf).await.ok(), None => std::future::pending().await } } => match r {
                    Some(n) if n > 0 => {
                        if exited { quiet_until = Some(Instant::now() + Duration::from_millis(250)); }
                        if tx.send(Pipe::Stdout(buf[..n].to_vec())).await.is_err() { return; }
                    }
                    _ => {
                        out = None;
                        let _ = tx.send(Pipe::Eof).await;
                        if exited { break; }
                    }
                },
                _ = child.wait(), if !exited => {
                    exited = true;
                    if out.is_none() { break; }
                    quiet_until = Some(Instant::now() + Duration::from_millis(250));
                },
                () = quiet => {
                    if out.take().is_some() { let _ = tx.send(Pipe::Eof).await; }
                    break;
                }
            }
        }
        if !exited {
            let _ = child.wait().await;
        }
        let _ = tx.send(Pipe::Exited).await;
    });
    in_tx
}
