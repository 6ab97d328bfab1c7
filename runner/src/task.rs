//! One task of a connected runner: from a `task.assign` to its `task.report`.
//!
//! The core's [`TaskRun`] decides everything (RoleSpec, profile resolution through the
//! contract's gateway, the sandbox, the cancel rule, the failure codes, the report); this
//! module performs its outputs:
//!
//! * `CreateSandbox` / `DestroySandbox` — a fresh per-task working directory under
//!   [`Harnesses::work_root`] (mode 0700), removed at the end;
//! * `RunHarness` — the profile's rein, in the plan's working directory:
//!   * `local-run` — a harness that speaks the local-runner protocol (the built-in fake
//!     harness by default), supervised exactly as `stapel-runner run` does (the same
//!     [`host`] loop: process group, cleared environment, bounds), with the built-in
//!     controller; `Interrupt` becomes `run.cancel`, `HardStop` closes the controller
//!     (TERM → grace → KILL);
//!   * `subprocess` — a seed-000 JSONL harness (`{"type":"turn"}` in, `{"type":"result"}`
//!     out) driven by the core's [`SubprocessSession`] turn machine; `Interrupt` lets the
//!     current turn finish (no further turn: the boundary), `HardStop` closes the session
//!     (stdin close → TERM → KILL);
//! * `Report` — handed to the connect loop.
//!
//! Harness events become progress through the core's mapping. Every harness is started
//! through the `harness-exec` wrapper (see [`crate::exec`]): it dies with its task and
//! with the runner.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value as JsonValue;
use stapel_runner_protocol::adapter::{
    SignalTarget, SpawnSpec as AdapterSpawn, StopSignal, SubprocessConfig, SubprocessInput,
    SubprocessOutput, SubprocessSession,
};
use stapel_runner_protocol::contract::Catalog;
use stapel_runner_protocol::json::Object;
use stapel_runner_protocol::local::LocalConfig;
use stapel_runner_protocol::runner_task::{
    local_violation, progress_from_harness_event, progress_from_local_event, HarnessEnd,
    HarnessPlan, ProgressItem, Rein, TaskOutcome, TaskRun, TaskRunConfig, TaskRunInput,
    TaskRunOutput,
};
use stapel_runner_protocol::wire::TaskAssign;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::controller::{AutoController, OperatorPlan};
use crate::host::{self, Controller, HostOptions, TaskLink, View};
use crate::supervisor::{self, GroupGuard, SpawnSpec};

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
        /// The outcome it says.
        outcome: TaskOutcome,
    },
}

/// What the connect loop tells a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The hub cancelled it.
    Cancel(String),
    /// The runner is shutting down.
    Shutdown,
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
    /// Further variables a JSONL harness gets (the `--allow-env` ones).
    pub jsonl_env: Vec<(String, String)>,
    /// The wrapper every harness is started through (see [`crate::exec`]).
    pub wrapper: Vec<String>,
    /// Stop-escalation grace of a JSONL harness, ms.
    pub grace_ms: u64,
    /// Where the per-task working directories (the sandboxes) are made.
    pub work_root: PathBuf,
}

enum HarnessCtl {
    Interrupt(String),
    HardStop,
}

/// Run one task to its report. Never fails: every fault becomes the report.
pub async fn run_task(
    assign: TaskAssign,
    catalog: Catalog,
    config: TaskRunConfig,
    harnesses: Harnesses,
    events: mpsc::Sender<TaskEvent>,
    mut control: mpsc::Receiver<Control>,
) {
    let task_id = assign.task_id.clone();
    let attempt = assign.attempt;
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let mut run = TaskRun::new(now(), config, catalog, &assign);
    let mut pending: Vec<TaskRunInput> = Vec::new();
    let mut harness: Option<tokio::task::JoinHandle<HarnessEnd>> = None;
    let mut ctl: Option<mpsc::Sender<HarnessCtl>> = None;
    let mut control_open = true;
    loop {
        for i in pending.drain(..) {
            run.handle_input(now(), i);
        }
        while let Some(out) = run.poll_output() {
            match out {
                TaskRunOutput::CreateSandbox { name, .. } => {
                    let path = harnesses.work_root.join(&name);
                    pending.push(match create_sandbox(&path) {
                        Ok(()) => TaskRunInput::SandboxCreated {
                            path: path.display().to_string(),
                        },
                        Err(e) => TaskRunInput::SandboxCreateFailed {
                            message: Some(e.kind().to_string()),
                        },
                    });
                }
                TaskRunOutput::RunHarness(plan) => {
                    let (tx, rx) = mpsc::channel(4);
                    ctl = Some(tx);
                    harness = Some(tokio::spawn(run_harness(
                        plan,
                        harnesses.clone(),
                        events.clone(),
                        task_id.clone(),
                        attempt,
                        rx,
                    )));
                }
                TaskRunOutput::Interrupt { reason } => {
                    if let Some(c) = &ctl {
                        let _ = c.try_send(HarnessCtl::Interrupt(reason));
                    }
                }
                TaskRunOutput::HardStop => {
                    if let Some(c) = &ctl {
                        let _ = c.try_send(HarnessCtl::HardStop);
                    }
                }
                TaskRunOutput::DestroySandbox { path, .. } => {
                    pending.push(match remove_sandbox(&path) {
                        Ok(()) => TaskRunInput::SandboxDestroyed,
                        Err(e) => TaskRunInput::SandboxDestroyFailed {
                            message: Some(e.kind().to_string()),
                        },
                    });
                }
                TaskRunOutput::Report {
                    report, outcome, ..
                } => {
                    let _ = events
                        .send(TaskEvent::Report {
                            task_id,
                            attempt,
                            report,
                            outcome,
                        })
                        .await;
                    return;
                }
                _ => {}
            }
        }
        if !pending.is_empty() {
            continue;
        }
        let deadline = run.poll_timeout();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(start + Duration::from_millis(d)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = async { match harness.as_mut() { Some(h) => h.await, None => std::future::pending().await } } => {
                harness = None;
                ctl = None;
                let end = r.unwrap_or(HarnessEnd::HostError { kind: "task_failed".into() });
                pending.push(TaskRunInput::HarnessEnded(end));
            }
            c = control.recv(), if control_open => pending.push(match c {
                Some(Control::Cancel(reason)) => TaskRunInput::Cancel { reason },
                Some(Control::Shutdown) => TaskRunInput::Shutdown,
                None => {
                    // The connect loop is gone: the runner is going away.
                    control_open = false;
                    TaskRunInput::Shutdown
                }
            }),
            () = sleep => pending.push(TaskRunInput::Timeout),
        }
    }
}

/// A fresh, empty directory at `path` (mode 0700); a leftover of an earlier runner is
/// replaced.
fn create_sandbox(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

fn remove_sandbox(path: &str) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

async fn run_harness(
    plan: HarnessPlan,
    harnesses: Harnesses,
    events: mpsc::Sender<TaskEvent>,
    task_id: String,
    attempt: u64,
    ctl: mpsc::Receiver<HarnessCtl>,
) -> HarnessEnd {
    let progress = move |item: ProgressItem| TaskEvent::Progress {
        task_id: task_id.clone(),
        attempt,
        item,
    };
    match plan.rein {
        Rein::LocalRun => run_local(&plan, &harnesses, &events, &progress, ctl).await,
        Rein::Subprocess => run_jsonl(&plan, &harnesses, &events, &progress, ctl).await,
    }
}

/// Drive a local-run harness through the same host loop as `stapel-runner run`.
async fn run_local(
    plan: &HarnessPlan,
    harnesses: &Harnesses,
    events: &mpsc::Sender<TaskEvent>,
    progress: &impl Fn(ProgressItem) -> TaskEvent,
    mut ctl: mpsc::Receiver<HarnessCtl>,
) -> HarnessEnd {
    let (lines_tx, mut lines_rx) = mpsc::channel::<String>(64);
    let (cancel_tx, cancel_rx) = mpsc::channel::<String>(1);
    let mut cancel_tx = Some(cancel_tx);
    let controller = OperatorPlan {
        turn_text: plan.prompt.clone(),
        ..OperatorPlan::default()
    };
    let mut config = harnesses.local.clone();
    config.working_directory = Some(plan.working_directory.clone());
    let opts = HostOptions {
        config,
        controller: Controller::Auto(AutoController::new(controller)),
        view: View::Jsonl,
        drain_after_exit: Duration::from_millis(250),
        controller_stall: Duration::from_secs(10),
        wrapper: harnesses.wrapper.clone(),
        task: Some(TaskLink {
            lines: lines_tx,
            cancel: cancel_rx,
            cwd: Some(plan.working_directory.clone()),
            steer: None,
        }),
    };
    let mut host = Box::pin(host::run(opts));
    let mut terminal: Option<JsonValue> = None;
    let mut violation: Option<String> = None;
    let mut host_error: Option<String> = None;
    let mut host_done = false;
    let mut lines_open = true;
    let mut ctl_open = true;
    while !host_done || lines_open {
        tokio::select! {
            line = lines_rx.recv(), if lines_open => match line {
                Some(line) => {
                    let Ok(v) = serde_json::from_str::<JsonValue>(&line) else { continue };
                    let message = &v["message"];
                    if message["event"]["eventType"] == "run.terminal" {
                        terminal.get_or_insert_with(|| message["event"]["payload"].clone());
                        continue;
                    }
                    if let Some(code) = local_violation(message) {
                        violation.get_or_insert_with(|| code.to_owned());
                    }
                    if let Some(item) = progress_from_local_event(message) {
                        if events.send(progress(item)).await.is_err() {
                            // The connect loop is gone: stop now.
                            cancel_tx = None;
                        }
                    }
                }
                None => lines_open = false,
            },
            r = &mut host, if !host_done => {
                host_done = true;
                if let Err(e) = r {
                    host_error = Some(io_kind(&e));
                }
            }
            c = ctl.recv(), if ctl_open => match c {
                Some(HarnessCtl::Interrupt(reason)) => {
                    if let Some(tx) = &cancel_tx {
                        let _ = tx.try_send(reason);
                    }
                }
                // Closing the cancel channel closes the controller: TERM → grace → KILL.
                Some(HarnessCtl::HardStop) => cancel_tx = None,
                None => ctl_open = false,
            },
        }
    }
    match (terminal, host_error) {
        (Some(payload), _) => HarnessEnd::LocalTerminal { payload, violation },
        (None, Some(kind)) => HarnessEnd::HostError { kind },
        (None, None) => HarnessEnd::Lost,
    }
}

/// A snake_case name of an I/O error's kind (`broken_pipe`, `invalid_input`, …).
fn io_kind(e: &std::io::Error) -> String {
    let debug = format!("{:?}", e.kind());
    let mut out = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        }
    }
    out
}

enum Pipe {
    Stdout(Vec<u8>),
    Eof,
    Exited,
}

/// Drive a seed-000 subprocess JSONL harness with the core's turn machine: one turn with
/// the task's goal as the prompt.
async fn run_jsonl(
    plan: &HarnessPlan,
    harnesses: &Harnesses,
    events: &mpsc::Sender<TaskEvent>,
    progress: &impl Fn(ProgressItem) -> TaskEvent,
    mut ctl: mpsc::Receiver<HarnessCtl>,
) -> HarnessEnd {
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let mut s = SubprocessSession::new(SubprocessConfig::default().grace_ms(harnesses.grace_ms));
    let mut spec = AdapterSpawn::new(harnesses.jsonl.clone(), harnesses.path.clone());
    spec.llm_base_url = plan.llm_base_url.clone();
    spec.cwd = Some(plan.working_directory.clone());
    spec.env = harnesses.jsonl_env.clone();
    let _ = s.handle_input(now(), SubprocessInput::Open(spec));
    let (pipe_tx, mut pipe_rx) = mpsc::channel::<Pipe>(8);
    let mut stdin: Option<mpsc::Sender<String>> = None;
    let mut pid: Option<i32> = None;
    let mut guard: Option<GroupGuard> = None;
    let mut end: Option<HarnessEnd> = None;
    let mut in_turn = false;
    let mut interrupted = false;
    let mut closing = false;
    let mut ctl_open = true;
    let mut pending: Vec<SubprocessInput> = Vec::new();
    loop {
        for i in pending.drain(..) {
            if matches!(i, SubprocessInput::Close) {
                closing = true;
            }
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
                        cwd: req.cwd,
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
                            if interrupted {
                                // Cancelled before the first turn: none is started.
                                pending.push(SubprocessInput::Close);
                            } else {
                                in_turn = true;
                                pending.push(SubprocessInput::StartTurn {
                                    prompt: plan.prompt.clone(),
                                });
                            }
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
                    if events.send(progress(item)).await.is_err() && !closing {
                        pending.push(SubprocessInput::Close);
                    }
                }
                SubprocessOutput::TurnResult(r) => {
                    in_turn = false;
                    end.get_or_insert(HarnessEnd::TurnResult { usage: r.usage });
                    if !closing {
                        pending.push(SubprocessInput::Close);
                    }
                }
                SubprocessOutput::Error(e) => {
                    in_turn = false;
                    end.get_or_insert(HarnessEnd::TurnError {
                        code: e.code().to_string(),
                    });
                    if !closing {
                        pending.push(SubprocessInput::Close);
                    }
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
            c = ctl.recv(), if ctl_open => match c {
                // The boundary of a JSONL harness is the end of its turn: let the current
                // turn finish (its result ends the session), start no other.
                Some(HarnessCtl::Interrupt(_)) => {
                    interrupted = true;
                    if !in_turn && pid.is_some() && !closing {
                        pending.push(SubprocessInput::Close);
                    }
                }
                Some(HarnessCtl::HardStop) => {
                    if !closing {
                        pending.push(SubprocessInput::Close);
                    }
                }
                None => ctl_open = false,
            },
        }
    }
    drop(guard);
    end.unwrap_or(HarnessEnd::Lost)
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
