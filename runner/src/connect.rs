//! `stapel-runner connect`: the in-container runner of seed 000.
//!
//! One loop owns the [`RunnerSession`] and performs its outputs: an outbound WebSocket
//! (see [`crate::ws`]), reconnects on the core's [`Backoff`] schedule (the jitter's
//! randomness comes from here), the session's keepalive and dead-peer deadlines, and the
//! tasks (see [`crate::task`]), at most `max_tasks` at once (the core's [`admit`]).
//!
//! Durability: the session's sequencing snapshot and the set of started, unreported tasks
//! are saved atomically under the state directory (see [`crate::store`]) **before** any
//! frame is written to the socket, so every frame the hub can have seen is on disk. A
//! runner restarted from the directory resumes the session (`hello.resume`, replay of
//! unacknowledged frames) and reports every task that was running as failed
//! (`runner_restarted`): its harness died with the old runner.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use stapel_runner_protocol::contract::Catalog;
use stapel_runner_protocol::runner_task::{admit, report_object, Admission, Backoff, TaskOutcome};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{
    Event, Input, Machine, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::{Hello, Message, TaskProgress, TaskReportMessage, UsageSplit};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::store::Store;
use crate::task::{self, Harnesses, TaskEvent};
use crate::ws::{self, ConnectError, Socket, TokenSource, Trust};

/// Options of `stapel-runner connect`.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Hub URL (`ws://` or `wss://`).
    pub url: String,
    /// Where the bearer token comes from.
    pub token: TokenSource,
    /// TLS trust for `wss://`.
    pub trust: Trust,
    /// `hello.project_id`.
    pub project_id: String,
    /// `hello.capabilities`.
    pub capabilities: Vec<String>,
    /// State directory.
    pub state_dir: PathBuf,
    /// Most tasks at once.
    pub max_tasks: usize,
    /// Session configuration (keepalive, dead-peer timeout, bounds).
    pub session: SessionConfig,
    /// Reconnect schedule.
    pub backoff: Backoff,
    /// Harness profiles.
    pub catalog: Catalog,
    /// How harnesses start.
    pub harnesses: Harnesses,
    /// Longest TCP + TLS + upgrade time.
    pub connect_timeout: Duration,
}

type Connecting = Pin<Box<dyn Future<Output = Result<Socket, ConnectError>>>>;

fn log(msg: impl std::fmt::Display) {
    eprintln!("stapel-runner connect: {msg}");
}

struct Running {
    cancel: mpsc::Sender<String>,
}

/// Run until SIGTERM/SIGINT (then cancel the tasks, send their reports, and return).
///
/// # Errors
/// The state directory cannot be used, or TLS cannot be configured.
pub async fn run(opts: ConnectOptions) -> std::io::Result<i32> {
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let mut store = Store::open(&opts.state_dir)?;
    let saved = store.load()?;
    let tls = if opts.url.starts_with("wss://") {
        Some(ws::tls_config(&opts.trust).map_err(std::io::Error::other)?)
    } else {
        None
    };
    let mut hello = Hello::new(opts.project_id.clone(), env!("CARGO_PKG_VERSION"));
    hello.capabilities = opts.capabilities.clone();
    let mut session = match saved.snapshot.as_deref().map(ConnectionState::restore) {
        Some(Ok(state)) => RunnerSession::with_state(hello, opts.session.clone(), state),
        Some(Err(e)) => {
            log(format!(
                "the saved session state is unreadable ({}); starting fresh",
                e.code()
            ));
            RunnerSession::new(hello, opts.session.clone())
        }
        None => RunnerSession::new(hello, opts.session.clone()),
    };
    let mut started: BTreeMap<String, u64> = saved.tasks;
    let mut outbox: VecDeque<Message> = VecDeque::new();
    for (task_id, attempt) in std::mem::take(&mut started) {
        log(format!(
            "task {task_id} was running when the runner stopped; reporting it failed"
        ));
        outbox.push_back(report_message(
            &task_id,
            attempt,
            &TaskOutcome::RunnerRestarted,
        ));
    }
    let (ev_tx, mut ev_rx) = mpsc::channel::<TaskEvent>(1024);
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut finished: Vec<String> = Vec::new();
    let mut socket: Option<Socket> = None;
    let mut connecting: Option<Connecting> = None;
    let mut retry_at: Option<Instant> = Some(Instant::now());
    let mut failures: u32 = 0;
    let mut got_frame = false;
    let mut shutting_down: Option<Instant> = None;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let write_timeout = Duration::from_millis(opts.session.peer_timeout_ms.clamp(1_000, 30_000));

    loop {
        // Perform the session's outputs.
        let mut frames: Vec<String> = Vec::new();
        let mut close = false;
        loop {
            // Hand queued messages (reports and progress) to the session.
            let mut progressed = false;
            while let Some(m) = outbox.pop_front() {
                match session.send(now(), m) {
                    Ok(_) => progressed = true,
                    Err(SessionError::Emit(e)) => {
                        // The kept log is full (backpressure): keep it and retry after acks.
                        outbox.push_front(e.into_message());
                        break;
                    }
                    Err(e) => log(format!("send refused: {}", e.code())),
                }
            }
            let mut any = false;
            while let Some(out) = session.poll_output() {
                any = true;
                match out {
                    Output::Transmit(f) => frames.push(f),
                    Output::Close(reason) => {
                        log(format!("closing the connection: {}", reason.code()));
                        close = true;
                    }
                    Output::Event(Event::Received(Message::TaskAssign(a))) => {
                        let task_id = a.task_id.clone();
                        match admit(
                            running.len(),
                            opts.max_tasks,
                            running.contains_key(&task_id),
                        ) {
                            Admission::Start if shutting_down.is_none() => {
                                started.insert(task_id.clone(), a.attempt);
                                let (ctx, crx) = mpsc::channel(1);
                                running.insert(task_id, Running { cancel: ctx });
                                tokio::spawn(task::run_task(
                                    a,
                                    opts.catalog.clone(),
                                    opts.harnesses.clone(),
                                    ev_tx.clone(),
                                    crx,
                                ));
                            }
                            adm => {
                                let outcome = match adm {
                                    Admission::Duplicate => TaskOutcome::Duplicate,
                                    _ => TaskOutcome::Busy {
                                        max_tasks: opts.max_tasks,
                                    },
                                };
                                outbox.push_back(report_message(&task_id, a.attempt, &outcome));
                            }
                        }
                    }
                    Output::Event(Event::Received(Message::TaskCancel(c))) => {
                        if let Some(r) = running.get(&c.task_id) {
                            let _ = r.cancel.try_send(c.reason.clone());
                        }
                    }
                    Output::Event(Event::PeerError { code, .. }) => {
                        log(format!("peer error: {code}"))
                    }
                    Output::Event(_) => {}
                }
            }
            if !progressed && !any {
                break;
            }
        }
        // Persist before anything reaches the socket.
        if !frames.is_empty() || close {
            // The fsyncs run on the blocking pool, so the tasks (harness pipes) go on
            // meanwhile; the loop itself waits: nothing is sent before it is saved.
            let (snapshot, tasks, mut st) =
                (session.state().snapshot(), started.clone(), store.clone());
            let saved = tokio::task::spawn_blocking(move || {
                let r = st.save(&snapshot, &tasks);
                (st, r)
            })
            .await;
            let result = match saved {
                Ok((st, r)) => {
                    store = st;
                    r
                }
                Err(e) => Err(std::io::Error::other(e)),
            };
            if let Err(e) = result {
                log(format!(
                    "cannot save the state ({}); dropping the connection",
                    e.kind()
                ));
                close = true;
                frames.clear();
            }
        }
        if let Some(s) = socket.as_mut() {
            if !frames.is_empty() {
                let write = async {
                    for f in frames.drain(..) {
                        s.feed(WsMessage::text(f)).await?;
                    }
                    s.flush().await
                };
                match tokio::time::timeout(write_timeout, write).await {
                    Ok(Ok(())) => {}
                    _ => close = true,
                }
            }
        }
        if close && socket.is_some() {
            if let Some(mut s) = socket.take() {
                let _ = tokio::time::timeout(Duration::from_millis(100), s.close(None)).await;
            }
            let _ = session.handle_input(now(), Input::Disconnected);
            schedule(&mut retry_at, &mut failures, got_frame, &opts.backoff);
            continue;
        }
        // Release finished tasks once the hub acknowledged their report.
        finished.retain(|t| {
            if session.state().is_fully_acknowledged(t) {
                session.state_mut().forget_task(t);
                false
            } else {
                true
            }
        });
        if let Some(deadline) = shutting_down {
            let flushed = session.state().unacked().next().is_none();
            if (running.is_empty() && outbox.is_empty() && (flushed || socket.is_none()))
                || Instant::now() >= deadline
            {
                let _ = store.save(&session.state().snapshot(), &started);
                if let Some(mut s) = socket.take() {
                    let _ = tokio::time::timeout(Duration::from_millis(200), s.close(None)).await;
                }
                crate::supervisor::kill_adopted(&[], 16);
                return Ok(0);
            }
        }

        let session_deadline = session.poll_timeout();
        let session_sleep = async {
            match session_deadline {
                Some(d) => tokio::time::sleep_until(start + Duration::from_millis(d)).await,
                None => std::future::pending().await,
            }
        };
        let idle = socket.is_none() && connecting.is_none();
        let retry_sleep = async {
            match (retry_at, idle) {
                (Some(t), true) => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        };
        let shutdown_sleep = async {
            match shutting_down {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let accept_events = outbox.len() < 64;
        tokio::select! {
            r = async { match connecting.as_mut() { Some(c) => c.await, None => std::future::pending().await } } => {
                connecting = None;
                match r {
                    Ok(s) => {
                        socket = Some(s);
                        got_frame = false;
                        retry_at = None;
                        if let Err(e) = session.handle_input(now(), Input::Connected) {
                            log(format!("session refused the connection: {}", e.code()));
                        }
                    }
                    Err(e) => {
                        log(format!("connect failed: {e}"));
                        schedule(&mut retry_at, &mut failures, false, &opts.backoff);
                    }
                }
            }
            () = retry_sleep => {
                retry_at = None;
                match opts.token.read() {
                    Ok(token) => {
                        let url = opts.url.clone();
                        let tls = tls.clone();
                        let timeout = opts.connect_timeout;
                        connecting = Some(Box::pin(async move { ws::connect(&url, &token, tls, timeout).await }));
                    }
                    Err(e) => {
                        log(format!("no token: {e}"));
                        schedule(&mut retry_at, &mut failures, false, &opts.backoff);
                    }
                }
            }
            msg = async { match socket.as_mut() { Some(s) => s.next().await, None => std::future::pending().await } } => {
                match msg {
                    Some(Ok(WsMessage::Text(t))) => {
                        got_frame = true;
                        if let Err(e) = session.handle_input(now(), Input::Frame(t.as_str().to_owned())) {
                            log(format!("frame refused: {}", e.code()));
                        }
                    }
                    Some(Ok(WsMessage::Binary(_))) => log("binary frame ignored"),
                    Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => {
                        if let Some(mut s) = socket.take() {
                            // Complete a close handshake the hub started (bounded).
                            let _ = tokio::time::timeout(Duration::from_millis(200), s.close(None)).await;
                        }
                        let _ = session.handle_input(now(), Input::Disconnected);
                        log("connection lost");
                        schedule(&mut retry_at, &mut failures, got_frame, &opts.backoff);
                    }
                    Some(Ok(_)) => {}
                }
            }
            ev = ev_rx.recv(), if accept_events => {
                // Take every event already waiting (up to a bound): one state save then
                // covers all of their frames.
                let mut next = ev;
                let mut taken = 0;
                while let Some(ev) = next {
                    take_event(ev, &mut outbox, &mut running, &mut started, &mut finished);
                    taken += 1;
                    next = if taken < 256 { ev_rx.try_recv().ok() } else { None };
                }
            }
            () = session_sleep => {
                let _ = session.handle_input(now(), Input::Timeout);
            }
            () = shutdown_sleep => {}
            _ = term.recv() => begin_shutdown(&mut shutting_down, &running),
            _ = int.recv() => begin_shutdown(&mut shutting_down, &running),
        }
    }
}

/// Queue a task's progress or report for the session.
fn take_event(
    ev: TaskEvent,
    outbox: &mut VecDeque<Message>,
    running: &mut HashMap<String, Running>,
    started: &mut BTreeMap<String, u64>,
    finished: &mut Vec<String>,
) {
    match ev {
        TaskEvent::Progress {
            task_id,
            attempt,
            item,
        } => {
            let mut p = TaskProgress::new(task_id, item.kind, item.payload);
            p.attempt = attempt;
            outbox.push_back(Message::TaskProgress(p));
        }
        TaskEvent::Report {
            task_id,
            attempt,
            report,
        } => {
            running.remove(&task_id);
            started.remove(&task_id);
            finished.push(task_id.clone());
            let mut r = TaskReportMessage::new(report);
            r.task_id = task_id;
            r.attempt = attempt;
            outbox.push_back(Message::TaskReport(r));
        }
    }
}

fn begin_shutdown(at: &mut Option<Instant>, running: &HashMap<String, Running>) {
    if at.is_some() {
        return;
    }
    log("shutting down: cancelling the running tasks");
    for r in running.values() {
        let _ = r.cancel.try_send("runner_shutdown".into());
    }
    *at = Some(Instant::now() + Duration::from_secs(5));
}

fn schedule(retry_at: &mut Option<Instant>, failures: &mut u32, was_up: bool, backoff: &Backoff) {
    if was_up {
        *failures = 0;
    }
    let delay = backoff.delay_ms(*failures, fastrand::u64(..));
    *failures = failures.saturating_add(1);
    *retry_at = Some(Instant::now() + Duration::from_millis(delay));
}

fn report_message(task_id: &str, attempt: u64, outcome: &TaskOutcome) -> Message {
    let mut r = TaskReportMessage::new(report_object(task_id, outcome, &UsageSplit::default()));
    r.attempt = attempt;
    Message::TaskReport(r)
}
