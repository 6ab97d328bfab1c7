//! The I/O shell around [`LocalRun`]: performs every output of the machine with real
//! processes and pipes, and reports every fact back as an input.
//!
//! One task owns the machine. Reader tasks turn the controller's stdin and the harness's
//! stdout/stderr into bounded chunks on one bounded channel (backpressure: a slow runner
//! stops reading, the harness blocks on its pipe). Writer tasks feed the harness's stdin
//! and the runner's stdout, so the machine's timers keep running while a peer is slow.
//! Time is the monotonic milliseconds since the host started.
//!
//! Failure handling, all documented bounds:
//!
//! * SIGTERM, SIGINT or SIGHUP to the runner count as controller closure (the machine then
//!   ends the harness group: TERM → grace → KILL); a second one kills the group at once.
//! * A controller that stops reading stdout for [`HostOptions::controller_stall`] counts
//!   as closed too; the rest of the stream is dropped.
//! * A harness that leaves [`HARNESS_STDIN_QUEUE`] command lines unread is sent TERM (it
//!   cannot be driven any more).
//! * However the run ends, the harness group is killed and every process this subreaper
//!   adopted is killed and reaped.
//! * A runner killed with SIGKILL cannot do any of that: the harness is started through
//!   [`HostOptions::wrapper`] (`stapel-runner harness-exec`, see [`crate::exec`]) so that
//!   the kernel ends it with the runner (`run`, `serve` and `connect` all do).

use std::io::{self, Write};
use std::time::Duration;

use nix::sys::signal::Signal;
use stapel_runner_protocol::local::{
    CommandType, Input, LocalConfig, LocalRun, Output, SignalKind,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind as UnixSignal};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::controller::AutoController;
use crate::pretty;
use crate::supervisor::{self, GroupGuard, SpawnSpec};

/// Size of one read from a pipe. The machine's framer bounds what it keeps.
const READ_CHUNK: usize = 64 * 1024;
/// Capacity of the event channel between reader tasks and the machine.
const EVENT_QUEUE: usize = 4;
/// Lines queued for the harness stdin before the harness counts as not reading.
pub const HARNESS_STDIN_QUEUE: usize = 1024;
/// Lines queued for the runner's stdout (the controller) before writes wait.
const STDOUT_QUEUE: usize = 256;
/// After the harness leader exits, the longest the pipes are drained while they keep
/// producing bytes (a straggler may hold them open and keep writing).
pub const DRAIN_HARD_CAP: Duration = Duration::from_secs(5);

/// Where the controller commands come from.
#[derive(Debug)]
pub enum Controller {
    /// A controller process on the runner's stdin (seed 002's transport).
    Stdio,
    /// The built-in controller.
    Auto(AutoController),
}

/// How the stream is shown on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `paperclip.runner.stream.v1` JSONL, one message per line.
    Jsonl,
    /// Readable lines for a person (built-in controller only; includes the commands).
    Pretty,
}

/// Host options.
#[derive(Debug)]
pub struct HostOptions {
    /// The machine's configuration.
    pub config: LocalConfig,
    /// Controller source.
    pub controller: Controller,
    /// Output view.
    pub view: View,
    /// After the harness leader exits, keep draining its pipes until they have been quiet
    /// this long (a straggler can hold them open), at most [`DRAIN_HARD_CAP`]. Default
    /// 250 ms.
    pub drain_after_exit: Duration,
    /// A controller that accepts no stdout line for this long counts as closed. Default
    /// 10 s.
    pub controller_stall: Duration,
    /// Program and leading arguments the harness command is appended to (after `--`),
    /// e.g. `stapel-runner harness-exec --parent PID` (see [`crate::exec`]), which makes
    /// the harness die with the runner; empty: start the harness directly.
    pub wrapper: Vec<String>,
    /// Run as one task of a connected runner (`stapel-runner connect`) instead of as the
    /// whole process: see [`TaskLink`]. `None` for `run` and `serve`.
    pub task: Option<TaskLink>,
}

/// How a local run is wired into a connected runner: the stream goes to a channel
/// instead of stdout, the runner's signals are left to the connect loop, a cancel arrives
/// on a channel, and the harness runs in the task's directory.
#[derive(Debug)]
pub struct TaskLink {
    /// Every `paperclip.runner.stream.v1` line, in order (the JSONL view).
    pub lines: mpsc::Sender<String>,
    /// A cancel: the built-in controller sends `run.cancel` with this reason.
    pub cancel: mpsc::Receiver<String>,
    /// The harness's working directory (`None`: the runner's).
    pub cwd: Option<String>,
    /// Commands chosen from outside (`stapel-runner live`: a person's actions), sent by
    /// the built-in controller with its next `commandId` and `controllerSeq`. `None`
    /// for a connected runner's task.
    pub steer: Option<mpsc::Receiver<Steer>>,
}

/// A command a live host asks the built-in controller to send (see [`TaskLink::steer`]).
#[derive(Debug)]
pub struct Steer {
    /// The command type.
    pub kind: CommandType,
    /// The command payload.
    pub payload: serde_json::Map<String, serde_json::Value>,
    /// Receives the command's `commandId` once it is queued for the machine.
    pub reply: tokio::sync::oneshot::Sender<String>,
}

enum Event {
    Controller(Vec<u8>),
    ControllerEof,
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exited(Option<i32>, Option<i32>),
}

struct Harness {
    pid: u32,
    stdin: Option<mpsc::Sender<String>>,
    guard: GroupGuard,
}

/// Run one local run to completion. Returns the exit code the machine decided (130 when a
/// second termination signal cut the run short).
///
/// # Errors
/// An invalid configuration.
pub async fn run(opts: HostOptions) -> io::Result<i32> {
    let task_mode = opts.task.is_some();
    let result = drive(opts).await;
    if !task_mode {
        // A task shares the process with other tasks: only the whole runner may kill
        // every adopted process (the connect loop does at exit).
        supervisor::kill_adopted(&[], 16);
    }
    result
}

/// Writes stream lines to stdout on a blocking thread, so that a slow controller never
/// stalls the machine's timers.
struct StdoutWriter {
    tx: Option<mpsc::Sender<String>>,
    stall: Duration,
    done: Option<std::thread::JoinHandle<()>>,
}

impl StdoutWriter {
    fn new(stall: Duration) -> Self {
        let (tx, mut rx) = mpsc::channel::<String>(STDOUT_QUEUE);
        let done = std::thread::spawn(move || {
            let mut out = io::BufWriter::new(io::stdout().lock());
            while let Some(line) = rx.blocking_recv() {
                if writeln!(out, "{line}").is_err() {
                    return;
                }
                if rx.is_empty() && out.flush().is_err() {
                    return;
                }
            }
            let _ = out.flush();
        });
        Self {
            tx: Some(tx),
            stall,
            done: Some(done),
        }
    }

    /// A writer that writes nothing (a task's stream goes to its channel).
    fn disabled() -> Self {
        Self {
            tx: None,
            stall: Duration::ZERO,
            done: None,
        }
    }

    /// Queue a line; `false` when the controller is gone or stalled past the bound.
    async fn write(&mut self, line: String) -> bool {
        let Some(tx) = &self.tx else { return false };
        match tokio::time::timeout(self.stall, tx.send(line)).await {
            Ok(Ok(())) => true,
            _ => {
                self.tx = None;
                false
            }
        }
    }

    /// Flush everything queued and stop the writer thread.
    async fn close(mut self) {
        self.tx = None;
        if let Some(done) = self.done.take() {
            let _ = tokio::task::spawn_blocking(move || done.join()).await;
        }
    }
}

async fn drive(opts: HostOptions) -> io::Result<i32> {
    let HostOptions {
        config,
        mut controller,
        view,
        drain_after_exit,
        controller_stall,
        wrapper,
        task,
    } = opts;
    let (task_lines, mut task_cancel, cwd, mut task_steer) = match task {
        Some(t) => (Some(t.lines), Some(t.cancel), t.cwd, t.steer),
        None => (None, None, None, None),
    };
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let mut machine = LocalRun::new(config)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let (tx, mut rx) = mpsc::channel::<Event>(EVENT_QUEUE);
    let mut out = match &task_lines {
        Some(_) => StdoutWriter::disabled(),
        None => StdoutWriter::new(controller_stall),
    };
    let mut controller_gone = false;
    let mut pending: Vec<Input> = Vec::new();
    let mut signals = if task_lines.is_none() {
        Some([
            signal(UnixSignal::terminate())?,
            signal(UnixSignal::interrupt())?,
            signal(UnixSignal::hangup())?,
        ])
    } else {
        None
    };
    let mut signalled = false;

    match &mut controller {
        Controller::Stdio => {
            let tx = tx.clone();
            tokio::spawn(async move {
                pump(tokio::io::stdin(), &tx, Event::Controller).await;
                let _ = tx.send(Event::ControllerEof).await;
            });
        }
        Controller::Auto(auto) => {
            for line in auto.start() {
                if view == View::Pretty {
                    out.write(pretty::render_command(&line)).await;
                }
                pending.push(Input::ControllerBytes(line.into_bytes()));
            }
        }
    }

    let mut harness: Option<Harness> = None;
    let exit_code = 'outer: loop {
        for input in pending.drain(..) {
            feed(&mut machine, now(), input);
        }
        let mut exit = None;
        while let Some(output) = machine.poll_output() {
            match output {
                Output::ToController(line) => {
                    let mut commands = Vec::new();
                    if let Controller::Auto(auto) = &mut controller {
                        commands = auto.observe(&line);
                    }
                    if let Some(lines) = &task_lines {
                        // The connect loop gone means the runner is shutting down.
                        if lines.send(line).await.is_err() && !controller_gone {
                            controller_gone = true;
                            pending.push(Input::ControllerEof);
                        }
                        for cmd in commands {
                            pending.push(Input::ControllerBytes(cmd.into_bytes()));
                        }
                        continue;
                    }
                    let shown = match view {
                        View::Jsonl => line,
                        View::Pretty => pretty::render(&line),
                    };
                    if !controller_gone && !out.write(shown).await {
                        controller_gone = true;
                        eprintln!("stapel-runner: the controller stopped reading; ending the run");
                        pending.push(Input::ControllerEof);
                    }
                    for cmd in commands {
                        if view == View::Pretty && !controller_gone {
                            out.write(pretty::render_command(&cmd)).await;
                        }
                        pending.push(Input::ControllerBytes(cmd.into_bytes()));
                    }
                }
                Output::ToHarness(line) => {
                    if let Some(h) = harness.as_ref() {
                        if let Some(stdin) = &h.stdin {
                            if stdin.try_send(line).is_err() {
                                eprintln!(
                                    "stapel-runner: the harness left {HARNESS_STDIN_QUEUE} command lines unread; sending TERM"
                                );
                                let _ = supervisor::signal_group(h.pid as i32, Signal::SIGTERM);
                            }
                        }
                    }
                }
                Output::Spawn(req) => {
                    let (program, args) = wrap_command(&wrapper, req.program, req.args);
                    let spec = SpawnSpec {
                        program,
                        args,
                        env: req.env,
                        new_process_group: req.new_process_group,
                        cwd: cwd.clone(),
                    };
                    match supervisor::spawn(&spec) {
                        Ok(spawned) => {
                            let pid = spawned.pid as u32;
                            let stdin = start_harness_io(spawned, tx.clone(), drain_after_exit);
                            harness = Some(Harness {
                                pid,
                                stdin: Some(stdin),
                                guard: GroupGuard::new(pid as i32),
                            });
                            pending.push(Input::HarnessSpawned { pid });
                        }
                        Err(e) => pending.push(Input::HarnessSpawnFailed {
                            message: format!("{}: {e}", spec.program),
                        }),
                    }
                }
                Output::CloseHarnessStdin => {
                    if let Some(h) = harness.as_mut() {
                        h.stdin = None;
                    }
                }
                Output::Signal { group, signal } => {
                    let sig = match signal {
                        SignalKind::Term => Signal::SIGTERM,
                        SignalKind::Kill => Signal::SIGKILL,
                    };
                    if let Err(e) = supervisor::signal_group(group as i32, sig) {
                        eprintln!(
                            "stapel-runner: signal {} to group {group}: {e}",
                            signal.as_str()
                        );
                    }
                }
                Output::Exit(code) => exit = Some(code),
                _ => {}
            }
        }
        let deadline = machine.poll_timeout();
        if !pending.is_empty() {
            continue;
        }
        if let Some(code) = exit {
            break 'outer code;
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(start + Duration::from_millis(d)).await,
                None => std::future::pending().await,
            }
        };
        let mut got_signal = false;
        let signalled_now = async {
            match &mut signals {
                Some([term, int, hup]) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                        _ = hup.recv() => {}
                    }
                }
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match &mut task_cancel {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let steered = async {
            match &mut task_steer {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            steer = steered => match (steer, &mut controller) {
                (Some(s), Controller::Auto(auto)) => {
                    let (id, line) = auto.steer(s.kind, s.payload);
                    let _ = s.reply.send(id);
                    pending.push(Input::ControllerBytes(line.into_bytes()));
                }
                // Nothing steers this run any more (or no built-in controller to do it).
                _ => task_steer = None,
            },
            ev = rx.recv() => match ev {
                Some(Event::Controller(bytes)) => pending.push(Input::ControllerBytes(bytes)),
                Some(Event::ControllerEof) => pending.push(Input::ControllerEof),
                Some(Event::Stdout(bytes)) => pending.push(Input::HarnessStdout(bytes)),
                Some(Event::Stderr(bytes)) => pending.push(Input::HarnessStderr(bytes)),
                Some(Event::Exited(code, signal)) => {
                    // The leader is reaped: its pid (and group id) may be reused from now
                    // on, so the guard must not signal it any more. The machine sends the
                    // group its final KILL in response to this input.
                    if let Some(h) = harness.as_mut() {
                        h.guard.disarm();
                    }
                    pending.push(Input::HarnessExited { code, signal })
                }
                None => {}
            },
            () = sleep => pending.push(Input::Timeout),
            () = signalled_now => got_signal = true,
            reason = cancelled => match (reason, &mut controller) {
                (Some(reason), Controller::Auto(auto)) => {
                    pending.push(Input::ControllerBytes(auto.cancel(&reason).into_bytes()));
                }
                // The connect loop is gone: end the run as a closed controller would.
                _ => {
                    task_cancel = None;
                    if !controller_gone {
                        controller_gone = true;
                        pending.push(Input::ControllerEof);
                    }
                }
            },
        }
        if got_signal {
            if signalled {
                eprintln!("stapel-runner: second termination signal; killing the harness group");
                break 'outer 130; // dropping `harness` fires its guard: KILL to the group
            }
            signalled = true;
            eprintln!("stapel-runner: termination signal; ending the run (again to kill now)");
            pending.push(Input::ControllerEof);
        }
    };
    drop(harness);
    out.close().await;
    Ok(exit_code)
}

/// The command to start: `wrapper… -- program args…`, or `program args…` without one.
pub fn wrap_command(
    wrapper: &[String],
    program: String,
    args: Vec<String>,
) -> (String, Vec<String>) {
    match wrapper.split_first() {
        None => (program, args),
        Some((first, rest)) => {
            let mut all = rest.to_vec();
            all.push("--".into());
            all.push(program);
            all.extend(args);
            (first.clone(), all)
        }
    }
}

fn feed(machine: &mut LocalRun, now: u64, input: Input) {
    if let Err(e) = machine.handle_input(now, input) {
        // Only local misuse is reported here (the machine turns remote violations into
        // events); say so and go on — the machine's state is unchanged by a rejected input.
        eprintln!("stapel-runner: input rejected by the local-run machine: {e}");
    }
}

/// Read `reader` to EOF in bounded chunks, sending each as an event.
async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    tx: &mpsc::Sender<Event>,
    wrap: fn(Vec<u8>) -> Event,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send(wrap(buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Start the harness's stdin writer and its stdout/stderr/exit reader. Stdout and stderr
/// bytes are all delivered before the exit is reported. Once the leader has exited, the
/// pipes are drained until EOF, or until they have been quiet for `quiet`, or at most
/// [`DRAIN_HARD_CAP`] (a straggler can hold them open). Reads always win over the drain
/// deadline when both are ready.
fn start_harness_io(
    spawned: supervisor::Spawned,
    tx: mpsc::Sender<Event>,
    quiet: Duration,
) -> mpsc::Sender<String> {
    let mut child = spawned.child;
    let (stdin_tx, mut stdin_rx) = mpsc::channel::<String>(HARNESS_STDIN_QUEUE);
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            while let Some(mut line) = stdin_rx.recv().await {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
            // Sender dropped: CloseHarnessStdin (dropping `stdin` closes the pipe).
        });
    }
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    tokio::spawn(async move {
        let mut out_buf = vec![0u8; READ_CHUNK];
        let mut err_buf = vec![0u8; READ_CHUNK];
        let mut status = None;
        let mut drain_until: Option<Instant> = None;
        let mut hard_cap: Option<Instant> = None;
        loop {
            if out.is_none() && err.is_none() && status.is_some() {
                break;
            }
            let drain_sleep = async {
                match drain_until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            let mut got_bytes = false;
            tokio::select! {
                biased;
                r = read_opt(&mut out, &mut out_buf) => match r {
                    Some(n) if n > 0 => {
                        got_bytes = true;
                        if tx.send(Event::Stdout(out_buf[..n].to_vec())).await.is_err() { return; }
                    }
                    _ => out = None,
                },
                r = read_opt(&mut err, &mut err_buf) => match r {
                    Some(n) if n > 0 => {
                        got_bytes = true;
                        if tx.send(Event::Stderr(err_buf[..n].to_vec())).await.is_err() { return; }
                    }
                    _ => err = None,
                },
                s = child.wait(), if status.is_none() => {
                    status = Some(s);
                    let now = Instant::now();
                    hard_cap = Some(now + DRAIN_HARD_CAP);
                    drain_until = Some(now + quiet);
                },
                () = drain_sleep => break,
            }
            if got_bytes {
                if let (Some(_), Some(cap)) = (drain_until, hard_cap) {
                    drain_until = Some((Instant::now() + quiet).min(cap));
                }
            }
        }
        let (code, signal) = match status {
            Some(Ok(s)) => supervisor::exit_facts(s),
            _ => (None, None),
        };
        let _ = tx.send(Event::Exited(code, signal)).await;
    });
    stdin_tx
}

/// Read from an optional pipe; a closed (`None`) pipe never completes.
async fn read_opt<R: AsyncRead + Unpin>(pipe: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    match pipe {
        Some(p) => p.read(buf).await.ok(),
        None => std::future::pending().await,
    }
}
