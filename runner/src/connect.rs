//! `stapel-runner connect`: the in-container runner of seed 000.
//!
//! One loop owns the [`RunnerSession`] and performs its outputs: an outbound WebSocket
//! (see [`crate::ws`]), reconnects on the core's [`Reconnect`] schedule (the jitter's
//! randomness comes from here), the session's keepalive and dead-peer deadlines, and the
//! tasks (see [`crate::task`]), at most `max_tasks` at once (the core's
//! [`admit_attempt`]). Every bound and timing is the core's [`ConnectConfig`].
//!
//! Durability: the session's sequencing snapshot and the set of started, unreported tasks
//! are saved atomically under the state directory (see [`crate::store`]) **before** any
//! frame is written to the socket, so every frame the hub can have seen is on disk. A
//! runner restarted from the directory resumes the session (`hello.resume`, replay of
//! unacknowledged frames) and reports what the core's [`restart_plan`] says: every task
//! that was running, as failed (`runner_restarted`) — its harness died with the old
//! runner.
//!
//! A task's streams are forgotten (the core's `forget_task`) once its report is
//! acknowledged — for every report: a finished task's, an assignment answered
//! `runner_busy` or `attempt_in_progress`, and a restarted task's — so the state stays
//! bounded however many tasks pass.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use stapel_runner_protocol::contract::Catalog;
use stapel_runner_protocol::json::Object;
use stapel_runner_protocol::runner_task::{
    admit_attempt, report_object, restart_plan, Admission, ConnectConfig, Reconnect, SavedSnapshot,
    TaskOutcome,
};
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
use crate::task::{self, Control, Harnesses, TaskEvent};
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
    /// Session configuration (keepalive, dead-peer timeout, bounds).
    pub session: SessionConfig,
    /// The connection's bounds and timings (max tasks, backoff, timeouts).
    pub config: ConnectConfig,
    /// Harness profiles.
    pub catalog: Catalog,
    /// How harnesses start.
    pub harnesses: Harnesses,
}

type Connecting = Pin<Box<dyn Future<Output = Result<Socket, ConnectError>>>>;

fn log(msg: impl std::fmt::Display) {
    eprintln!("stapel-runner connect: {msg}");
}

struct Running {
    attempt: u64,
    control: mpsc::Sender<Control>,
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Run until SIGTERM/SIGINT (then stop the tasks, send their reports, and return).
///
/// # Errors
/// The state directory cannot be used (or another runner holds it), or TLS cannot be
/// configured.
pub async fn run(opts: ConnectOptions) -> std::io::Result<i32> {
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let cfg = opts.config.clone();
    let mut store = Store::open(&opts.state_dir)?;
    let saved = store.load()?;
    std::fs::create_dir_all(&opts.harnesses.work_root)?;
    let tls = if opts.url.starts_with("wss://") {
        Some(ws::tls_config(&opts.trust).map_err(std::io::Error::other)?)
    } else {
        None
    };
    let mut hello = Hello::new(opts.project_id.clone(), env!("CARGO_PKG_VERSION"));
    hello.capabilities = opts.capabilities.clone();
    let restored = saved.snapshot.as_deref().map(ConnectionState::restore);
    let snapshot = match &restored {
        None => SavedSnapshot::Absent,
        Some(Ok(_)) => SavedSnapshot::Readable,
        Some(Err(e)) => {
            log(format!(
                "the saved session state is unreadable ({}); starting fresh",
                e.code()
            ));
            SavedSnapshot::Unreadable
        }
    };
    let plan = restart_plan(snapshot, &saved.tasks);
    let mut session = match restored {
        Some(Ok(state)) if !plan.fresh_state => {
            RunnerSession::with_state(hello, opts.session.clone(), state)
        }
        _ => RunnerSession::new(hello, opts.session.clone()),
    };
    let mut started: BTreeMap<String, u64> = BTreeMap::new();
    let mut outbox: VecDeque<Message> = VecDeque::new();
    let mut finished: Vec<String> = Vec::new();
    for (task_id, attempt, report) in plan.reports {
        log(format!(
            "task {task_id} was running when the runner stopped; reporting it failed"
        ));
        outbox.push_back(report_message(&task_id, attempt, report));
        finished.push(task_id);
    }
    let (ev_tx, mut ev_rx) = mpsc::channel::<TaskEvent>(1024);
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut socket: Option<Socket> = None;
    let mut connecting: Option<Connecting> = None;
    let mut retry_at: Option<Instant> = Some(Instant::now());
    let mut reconnect = Reconnect::new(cfg.backoff);
    let mut got_frame = false;
    let mut shutting_down: Option<Instant> = None;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let write_timeout = ms(cfg.write_timeout_ms(opts.session.peer_timeout_ms));
    let close_timeout = ms(cfg.close_timeout_ms);
    let max_batch = cfg.max_event_batch.max(1);

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
                        let running_attempt = running.get(&task_id).map(|r| r.attempt);
                        let admission = if shutting_down.is_some() {
                            Admission::Busy
                        } else {
                            admit_attempt(running.len(), cfg.max_tasks, running_attempt, a.attempt)
                        };
                        match admission {
                            Admission::Start => {
                                started.insert(task_id.clone(), a.attempt);
                                let (ctx, crx) = mpsc::channel(2);
                                running.insert(
                                    task_id,
                                    Running {
                                        attempt: a.attempt,
                                        control: ctx,
                                    },
                                );
                                tokio::spawn(task::run_task(
                                    a,
                                    opts.catalog.clone(),
                                    cfg.task.clone(),
                                    opts.harnesses.clone(),
                                    ev_tx.clone(),
                                    crx,
                                ));
                            }
                            Admission::Ignore => log(format!(
                                "task {task_id} attempt {} is running already; assignment ignored",
                                a.attempt
                            )),
                            adm => {
                                let outcome = match adm {
                                    Admission::Duplicate => TaskOutcome::Duplicate,
                                    _ => TaskOutcome::Busy {
                                        max_tasks: cfg.max_tasks.max(1),
                                    },
                                };
                                let report =
                                    report_object(&task_id, &outcome, &UsageSplit::default());
                                outbox.push_back(report_message(&task_id, a.attempt, report));
                                // Its stream is forgotten once the report is acknowledged
                                // (unless the task runs: a running one is forgotten after
                                // its own report).
                                if !running.contains_key(&task_id) {
                                    finished.push(task_id);
                                }
                            }
                        }
                    }
                    Output::Event(Event::Received(Message::TaskCancel(c))) => {
                        if let Some(r) = running.get(&c.task_id) {
                            let _ = r.control.try_send(Control::Cancel(c.reason.clone()));
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
                let _ = tokio::time::timeout(close_timeout, s.close(None)).await;
            }
            let _ = session.handle_input(now(), Input::Disconnected);
            retry_at =
                Some(Instant::now() + ms(reconnect.connection_lost(got_frame, fastrand::u64(..))));
            continue;
        }
        // Release reported tasks once the hub acknowledged their report.
        finished.retain(|t| {
            if running.contains_key(t) {
                return false; // a new attempt runs: forgotten after its own report
            }
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
                    let _ = tokio::time::timeout(close_timeout, s.close(None)).await;
                }
                crate::supervisor::kill_adopted(&[], 16);
                return Ok(0);
            }
        }

        let session_deadline = session.poll_timeout();
        let session_sleep = async {
            match session_deadline {
                Some(d) => tokio::time::sleep_until(start + ms(d)).await,
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
        let accept_events = outbox.len() < cfg.max_queued_messages.max(1);
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
                        retry_at = Some(Instant::now() + ms(reconnect.connect_failed(fastrand::u64(..))));
                    }
                }
            }
            () = retry_sleep => {
                retry_at = None;
                match opts.token.read() {
                    Ok(token) => {
                        let url = opts.url.clone();
                        let tls = tls.clone();
                        let timeout = ms(cfg.connect_timeout_ms);
                        connecting = Some(Box::pin(async move { ws::connect(&url, &token, tls, timeout).await }));
                    }
                    Err(e) => {
                        log(format!("no token: {e}"));
                        retry_at = Some(Instant::now() + ms(reconnect.connect_failed(fastrand::u64(..))));
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
                            let _ = tokio::time::timeout(close_timeout, s.close(None)).await;
                        }
                        let _ = session.handle_input(now(), Input::Disconnected);
                        log("connection lost");
                        retry_at = Some(Instant::now() + ms(reconnect.connection_lost(got_frame, fastrand::u64(..))));
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
                    next = if taken < max_batch { ev_rx.try_recv().ok() } else { None };
                }
            }
            () = session_sleep => {
                let _ = session.handle_input(now(), Input::Timeout);
            }
            () = shutdown_sleep => {}
            _ = term.recv() => begin_shutdown(&mut shutting_down, &running, cfg.shutdown_grace_ms),
            _ = int.recv() => begin_shutdown(&mut shutting_down, &running, cfg.shutdown_grace_ms),
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
            ..
        } => {
            running.remove(&task_id);
            started.remove(&task_id);
            finished.push(task_id.clone());
            outbox.push_back(report_message(&task_id, attempt, report));
        }
    }
}

fn begin_shutdown(at: &mut Option<Instant>, running: &HashMap<String, Running>, grace_ms: u64) {
    if at.is_some() {
        return;
    }
    log("shutting down: stopping the running tasks");
    for r in running.values() {
        let _ = r.control.try_send(Control::Shutdown);
    }
    *at = Some(Instant::now() + ms(grace_ms));
}

fn report_message(task_id: &str, attempt: u64, report: Object) -> Message {
    let mut r = TaskReportMessage::new(report);
    r.task_id = task_id.to_owned();
    r.attempt = attempt;
    Message::TaskReport(r)
}
