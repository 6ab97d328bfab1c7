//! The I/O shell around [`LocalRun`]: performs every output of the machine with real
//! processes and pipes, and reports every fact back as an input.
//!
//! One task owns the machine. Reader tasks turn the controller's stdin and the harness's
//! stdout/stderr into bounded chunks on one bounded channel (backpressure: a slow runner
//! stops reading, the harness blocks on its pipe). A writer task feeds the harness's
//! stdin so the machine never blocks on a harness that does not read. Time is the
//! monotonic milliseconds since the host started.

use std::io::{self, Write};
use std::time::Duration;

use nix::sys::signal::Signal;
use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output, SignalKind};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::controller::AutoController;
use crate::pretty;
use crate::supervisor::{self, GroupGuard, SpawnSpec};

/// Size of one read from a pipe. The machine's framer bounds what it keeps.
const READ_CHUNK: usize = 64 * 1024;
/// Capacity of the event channel between reader tasks and the machine.
const EVENT_QUEUE: usize = 64;
/// Lines queued for the harness stdin before the harness counts as not reading.
const HARNESS_STDIN_QUEUE: usize = 1024;

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
    /// After the harness leader exits, how long to keep draining its pipes (a straggler
    /// may hold them open) before reporting the exit. Default 250 ms.
    pub drain_after_exit: Duration,
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

/// Run one local run to completion. Returns the exit code the machine decided.
///
/// Whatever the outcome — including an error writing the stream (the controller went
/// away) — the harness's process group is killed and every process this subreaper adopted
/// is killed and reaped before this returns.
///
/// # Errors
/// An invalid configuration, or a failure to write the stream to stdout.
pub async fn run(opts: HostOptions) -> io::Result<i32> {
    let result = drive(opts).await;
    supervisor::kill_adopted(&[], 16);
    result
}

async fn drive(opts: HostOptions) -> io::Result<i32> {
    let HostOptions {
        config,
        mut controller,
        view,
        drain_after_exit,
    } = opts;
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let mut machine = LocalRun::new(config)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let (tx, mut rx) = mpsc::channel::<Event>(EVENT_QUEUE);
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    let mut pending: Vec<Input> = Vec::new();

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
                    writeln!(stdout, "{}", pretty::render_command(&line))?;
                }
                pending.push(Input::ControllerBytes(line.into_bytes()));
            }
        }
    }

    let mut harness: Option<Harness> = None;
    let mut deadline: Option<u64>;
    let exit_code = 'outer: loop {
        for input in pending.drain(..) {
            feed(&mut machine, now(), input);
        }
        let mut exit = None;
        loop {
            match machine.poll_output() {
                Output::ToController(line) => {
                    match view {
                        View::Jsonl => writeln!(stdout, "{line}")?,
                        View::Pretty => writeln!(stdout, "{}", pretty::render(&line))?,
                    }
                    if let Controller::Auto(auto) = &mut controller {
                        for cmd in auto.observe(&line) {
                            if view == View::Pretty {
                                writeln!(stdout, "{}", pretty::render_command(&cmd))?;
                            }
                            pending.push(Input::ControllerBytes(cmd.into_bytes()));
                        }
                    }
                }
                Output::ToHarness(line) => {
                    if let Some(tx) = harness.as_ref().and_then(|h| h.stdin.as_ref()) {
                        if tx.try_send(line).is_err() {
                            eprintln!(
                                "stapel-runner: harness stdin queue full or closed; line dropped"
                            );
                        }
                    }
                }
                Output::Spawn(req) => {
                    let spec = SpawnSpec {
                        program: req.program,
                        args: req.args,
                        env: req.env,
                        new_process_group: req.new_process_group,
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
                Output::Timeout(d) => {
                    deadline = d;
                    break;
                }
                _ => {}
            }
        }
        stdout.flush()?;
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
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(Event::Controller(bytes)) => pending.push(Input::ControllerBytes(bytes)),
                Some(Event::ControllerEof) => pending.push(Input::ControllerEof),
                Some(Event::Stdout(bytes)) => pending.push(Input::HarnessStdout(bytes)),
                Some(Event::Stderr(bytes)) => pending.push(Input::HarnessStderr(bytes)),
                Some(Event::Exited(code, signal)) => pending.push(Input::HarnessExited { code, signal }),
                None => {}
            },
            () = sleep => pending.push(Input::Timeout),
        }
    };
    // Teardown: the group is gone (the machine signals it after the leader's exit); kill
    // anything that escaped it and was adopted by this subreaper.
    if let Some(mut h) = harness.take() {
        h.stdin = None;
        h.guard.disarm();
        let _ = supervisor::signal_group(h.pid as i32, Signal::SIGKILL);
    }
    stdout.flush()?;
    Ok(exit_code)
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
/// bytes are all delivered before the exit is reported; once the leader has exited, the
/// pipes are drained for at most `drain` (a straggler can hold them open).
fn start_harness_io(
    spawned: supervisor::Spawned,
    tx: mpsc::Sender<Event>,
    drain: Duration,
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
            tokio::select! {
                r = read_opt(&mut out, &mut out_buf) => match r {
                    Some(n) if n > 0 => { if tx.send(Event::Stdout(out_buf[..n].to_vec())).await.is_err() { return; } }
                    _ => out = None,
                },
                r = read_opt(&mut err, &mut err_buf) => match r {
                    Some(n) if n > 0 => { if tx.send(Event::Stderr(err_buf[..n].to_vec())).await.is_err() { return; } }
                    _ => err = None,
                },
                s = child.wait(), if status.is_none() => {
                    status = Some(s);
                    drain_until = Some(Instant::now() + drain);
                },
                () = drain_sleep => break,
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
