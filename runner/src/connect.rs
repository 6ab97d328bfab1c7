//! `stapel-runner connect`: the in-container runner of seed 000.
//!
//! The connection is the core's [`RunnerLink`]: when to connect and reconnect (the core's
//! backoff, jitter seeded here once), the connect and close deadlines, the session on the
//! one socket that serves it, what a frame is (binary frames decoded strictly as UTF-8),
//! a dead peer aborted, the error codes. This loop only pumps it: each socket is a tokio
//! task ([`socket`]) that connects, reads and writes when told, and reports back with the
//! socket's id; one timer for the link's deadline; the link's events are the hub's
//! commands, handed to the tasks (see [`crate::task`]), at most `max_tasks` at once (the
//! core's [`admit_attempt`]).
//!
//! Durability: the session's sequencing snapshot and the set of started, unreported tasks
//! are saved atomically under the state directory (see [`crate::store`]) **before** any
//! frame is handed to a socket, so every frame the hub can have seen is on disk. A runner
//! restarted from the directory resumes the session (`hello.resume`, replay of
//! unacknowledged frames) and reports what the core's [`restart_plan`] says: every task
//! that was running, as failed (`runner_restarted`) — its harness died with the old
//! runner.
//!
//! A task's streams are forgotten (the core's `forget_task`) once its report is
//! acknowledged — for every report: a finished task's, an assignment answered
//! `runner_busy` or `attempt_in_progress`, and a restarted task's — so the state stays
//! bounded however many tasks pass. Against a hub that never acknowledges (a seed-only
//! 0.1.1 hub), the session's implied acknowledgements (a plain `pong` to a ping sent after
//! the frames) trim the kept log; if it fills anyway, the link's `stalled` event is logged
//! with the bound and what the hub must do, and task events wait (their harnesses block
//! on their pipes) until `unstalled`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use stapel_runner_protocol::contract::Catalog;
use stapel_runner_protocol::json::Object;
use stapel_runner_protocol::link::{
    ConnectFailure, LinkError, LinkEvent, LinkInput, LinkOutput, RunnerLink,
};
use stapel_runner_protocol::runner_task::{
    admit_attempt, report_object, restart_plan, Admission, ConnectConfig, SavedSnapshot,
    TaskOutcome,
};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{Event, RunnerSession, SessionConfig, SessionError};
use stapel_runner_protocol::wire::{Hello, Message, TaskProgress, TaskReportMessage, UsageSplit};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::store::Store;
use crate::task::{self, Control, Harnesses, TaskEvent};
use crate::ws::{self, ConnectError, TokenSource, Trust};
use crate::wspump::{self, Command, Report};

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

/// One socket's task, as the loop sees it.
struct SocketHandle {
    commands: mpsc::UnboundedSender<Command>,
    task: tokio::task::JoinHandle<()>,
}

/// The loop's state besides the link.
struct Runner {
    opts: ConnectOptions,
    cfg: ConnectConfig,
    link: RunnerLink,
    store: Store,
    started: BTreeMap<String, u64>,
    outbox: VecDeque<Message>,
    finished: Vec<String>,
    running: HashMap<String, Running>,
    sockets: HashMap<u64, SocketHandle>,
    ev_tx: mpsc::Sender<TaskEvent>,
    sock_tx: mpsc::Sender<Report>,
    tls: Option<Arc<rustls::ClientConfig>>,
    shutting_down: Option<Instant>,
    stop_requested: bool,
    stopped: bool,
    start: Instant,
}

/// Run until SIGTERM/SIGINT (then stop the tasks, send their reports, and return).
///
/// # Errors
/// The state directory cannot be used (or another runner holds it), or TLS cannot be
/// configured.
pub async fn run(opts: ConnectOptions) -> std::io::Result<i32> {
    let start = Instant::now();
    let cfg = opts.config.clone();
    let store = Store::open(&opts.state_dir)?;
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
    let session = match restored {
        Some(Ok(state)) if !plan.fresh_state => {
            RunnerSession::with_state(hello, opts.session.clone(), state)
        }
        _ => RunnerSession::new(hello, opts.session.clone()),
    };
    let link = RunnerLink::new(
        session,
        cfg.link_config(opts.session.clone()),
        fastrand::u64(..),
    );
    let (ev_tx, mut ev_rx) = mpsc::channel::<TaskEvent>(1024);
    let (sock_tx, mut sock_rx) = mpsc::channel::<Report>(256);
    let mut r = Runner {
        opts,
        cfg: cfg.clone(),
        link,
        store,
        started: BTreeMap::new(),
        outbox: VecDeque::new(),
        finished: Vec::new(),
        running: HashMap::new(),
        sockets: HashMap::new(),
        ev_tx,
        sock_tx,
        tls,
        shutting_down: None,
        stop_requested: false,
        stopped: false,
        start,
    };
    for (task_id, attempt, report) in plan.reports {
        log(format!(
            "task {task_id} was running when the runner stopped; reporting it failed"
        ));
        r.outbox
            .push_back(report_message(&task_id, attempt, report));
        r.finished.push(task_id);
    }
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let max_batch = cfg.max_event_batch.max(1);
    r.input(LinkInput::Start);

    loop {
        r.pump().await;
        if r.stopped {
            let _ = r.store.save(&r.link.state().snapshot(), &r.started);
            crate::supervisor::kill_adopted(&[], 16);
            return Ok(0);
        }
        if let Some(deadline) = r.shutting_down {
            let flushed = r.link.state().unacked().next().is_none();
            let idle = r.running.is_empty() && r.outbox.is_empty();
            // Once: the link's outputs of the stop (its `stopped`, or the close) are
            // performed at the top of the loop.
            if ((idle && (flushed || !r.link.is_connected())) || Instant::now() >= deadline)
                && r.stop()
            {
                continue;
            }
        }
        let link_deadline = r.link.poll_timeout();
        let link_sleep = async {
            match link_deadline {
                Some(d) => tokio::time::sleep_until(start + ms(d)).await,
                None => std::future::pending().await,
            }
        };
        let shutdown_sleep = async {
            match r.shutting_down {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        // Task events wait while the kept log is full (their harnesses then block on
        // their pipes) or enough messages are queued.
        let accept_events =
            !r.link.is_stalled() && r.outbox.len() < r.cfg.max_queued_messages.max(1);
        tokio::select! {
            Some(report) = sock_rx.recv() => {
                let mut next = Some(report);
                while let Some(report) = next {
                    r.socket_report(report);
                    next = sock_rx.try_recv().ok();
                }
            }
            ev = ev_rx.recv(), if accept_events => {
                // Take every event already waiting (up to a bound): one state save then
                // covers all of their frames.
                let mut next = ev;
                let mut taken = 0;
                while let Some(ev) = next {
                    r.take_event(ev);
                    taken += 1;
                    next = if taken < max_batch { ev_rx.try_recv().ok() } else { None };
                }
            }
            () = link_sleep => r.input(LinkInput::Timeout),
            () = shutdown_sleep => {}
            _ = term.recv() => r.begin_shutdown(),
            _ = int.recv() => r.begin_shutdown(),
        }
    }
}

impl Runner {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Feed the link one input (its errors are local misuse: logged).
    fn input(&mut self, input: LinkInput) {
        let now = self.now();
        if let Err(e) = self.link.handle_input(now, input) {
            log(format!("link refused an input: {}", e.code()));
        }
    }

    /// Hand queued messages to the link, perform its outputs, persist before frames go
    /// out, release acknowledged tasks; until nothing changes.
    async fn pump(&mut self) {
        loop {
            // Queued reports and progress go to the session while it takes them.
            while !self.link.is_stalled() {
                let Some(m) = self.outbox.pop_front() else {
                    break;
                };
                let now = self.now();
                match self.link.send(now, m) {
                    Ok(_) => {}
                    Err(LinkError::Session(SessionError::Emit(e))) => {
                        // The kept log is full: keep it; the link says `unstalled` later.
                        self.outbox.push_front(e.into_message());
                        break;
                    }
                    Err(e) => log(format!("send refused: {}", e.code())),
                }
            }
            let mut commands: Vec<(u64, Command)> = Vec::new();
            let mut aborts: Vec<u64> = Vec::new();
            let mut taken = 0u64;
            let mut any = false;
            while let Some(out) = self.link.poll_output() {
                any = true;
                match out {
                    LinkOutput::Connect { socket } => self.connect(socket),
                    LinkOutput::Send { socket, frame } => {
                        commands.push((socket, Command::Send(frame)));
                    }
                    LinkOutput::Pause { socket } => commands.push((socket, Command::Pause)),
                    LinkOutput::Resume { socket } => commands.push((socket, Command::Resume)),
                    LinkOutput::Close {
                        socket,
                        code,
                        reason,
                    } => commands.push((socket, Command::Close(code, reason))),
                    LinkOutput::Abort { socket } => aborts.push(socket),
                    LinkOutput::Event(e) => {
                        taken += 1;
                        self.event(e);
                    }
                    _ => {}
                }
            }
            if !commands.is_empty() {
                self.perform(commands).await;
            }
            // A socket the link gave up: its task (and its TCP connection, or its connect
            // attempt) ends now.
            for id in aborts {
                if let Some(h) = self.sockets.remove(&id) {
                    h.task.abort();
                }
            }
            if taken > 0 {
                self.input(LinkInput::EventsTaken(taken));
            }
            self.release_acknowledged();
            if !any && (self.outbox.is_empty() || self.link.is_stalled()) {
                return;
            }
        }
    }

    /// Persist (when frames go out), then hand the commands to their sockets in order.
    async fn perform(&mut self, commands: Vec<(u64, Command)>) {
        if commands.iter().any(|(_, c)| matches!(c, Command::Send(_))) {
            // The fsyncs run on the blocking pool, so the tasks (harness pipes) go on
            // meanwhile; the loop itself waits: nothing is sent before it is saved.
            let (snapshot, tasks, mut st) = (
                self.link.state().snapshot(),
                self.started.clone(),
                self.store.clone(),
            );
            let saved = tokio::task::spawn_blocking(move || {
                let r = st.save(&snapshot, &tasks);
                (st, r)
            })
            .await;
            let result = match saved {
                Ok((st, r)) => {
                    self.store = st;
                    r
                }
                Err(e) => Err(std::io::Error::other(e)),
            };
            if let Err(e) = result {
                log(format!(
                    "cannot save the state ({}); dropping the connection",
                    e.kind()
                ));
                // Nothing unsaved goes out: the sockets fail and the link reconnects.
                let ids: Vec<u64> = self.sockets.keys().copied().collect();
                for id in ids {
                    self.input(LinkInput::Failed {
                        socket: id,
                        detail: "the runner could not save its state".into(),
                    });
                }
                return;
            }
        }
        for (id, c) in commands {
            if let Some(h) = self.sockets.get(&id) {
                let _ = h.commands.send(c);
            }
        }
    }

    /// Start socket `id`'s task: read the token, connect, then pump the socket.
    fn connect(&mut self, id: u64) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (url, token, tls, reports) = (
            self.opts.url.clone(),
            self.opts.token.clone(),
            self.tls.clone(),
            self.sock_tx.clone(),
        );
        let write_timeout = ms(self.cfg.write_timeout_ms(self.opts.session.peer_timeout_ms));
        let task = tokio::spawn(async move {
            let token = match token.read() {
                Ok(t) => t,
                Err(e) => {
                    let _ = reports
                        .send(Report::ConnectFailed(id, ConnectFailure::NoToken, e))
                        .await;
                    return;
                }
            };
            let socket = match ws::connect(&url, &token, tls).await {
                Ok(s) => s,
                Err(e) => {
                    let failure = match e {
                        ConnectError::Rejected(status) => ConnectFailure::Refused { status },
                        ConnectError::Other(_) => ConnectFailure::Failed,
                    };
                    let _ = reports
                        .send(Report::ConnectFailed(id, failure, e.to_string()))
                        .await;
                    return;
                }
            };
            drop(token);
            if reports.send(Report::Opened(id)).await.is_ok() {
                wspump::pump(id, socket, rx, reports, write_timeout).await;
            }
        });
        self.sockets.insert(id, SocketHandle { commands: tx, task });
    }

    fn socket_report(&mut self, report: Report) {
        let input = match report {
            Report::Opened(socket) => LinkInput::Opened { socket },
            Report::ConnectFailed(socket, failure, detail) => {
                self.sockets.remove(&socket);
                LinkInput::ConnectFailed {
                    socket,
                    failure,
                    detail,
                }
            }
            Report::Frame(socket, frame) => LinkInput::Frame { socket, frame },
            Report::Closed(socket) => {
                self.sockets.remove(&socket);
                LinkInput::SocketClosed { socket }
            }
            Report::Failed(socket, detail) => {
                self.sockets.remove(&socket);
                LinkInput::Failed { socket, detail }
            }
        };
        self.input(input);
    }

    /// One event of the link: a command of the hub, or news to log.
    fn event(&mut self, e: LinkEvent) {
        match e {
            LinkEvent::Session(Event::Received(Message::TaskAssign(a))) => self.assign(a),
            LinkEvent::Session(Event::Received(Message::TaskCancel(c))) => {
                if let Some(r) = self.running.get(&c.task_id) {
                    let _ = r.control.try_send(Control::Cancel(c.reason.clone()));
                }
            }
            LinkEvent::Session(Event::PeerError { code, .. }) => log(format!("peer error: {code}")),
            LinkEvent::Session(_) | LinkEvent::Connected | LinkEvent::Reconnecting { .. } => {}
            LinkEvent::Disconnected { reason } => log(format!("connection lost: {reason}")),
            LinkEvent::Error {
                code,
                detail,
                status,
            } => match status {
                Some(s) => log(format!("{code} (HTTP {s}): {detail}")),
                None => log(format!("{code}: {detail}")),
            },
            LinkEvent::Stalled { detail, .. } => log(format!("waiting: {detail}")),
            LinkEvent::Unstalled => log("the kept log has room again; sending resumes"),
            LinkEvent::Stopped => self.stopped = true,
            _ => {}
        }
    }

    fn assign(&mut self, a: stapel_runner_protocol::wire::TaskAssign) {
        let task_id = a.task_id.clone();
        let running_attempt = self.running.get(&task_id).map(|r| r.attempt);
        let admission = if self.shutting_down.is_some() {
            Admission::Busy
        } else {
            admit_attempt(
                self.running.len(),
                self.cfg.max_tasks,
                running_attempt,
                a.attempt,
            )
        };
        match admission {
            Admission::Start => {
                self.started.insert(task_id.clone(), a.attempt);
                let (ctx, crx) = mpsc::channel(2);
                self.running.insert(
                    task_id,
                    Running {
                        attempt: a.attempt,
                        control: ctx,
                    },
                );
                tokio::spawn(task::run_task(
                    a,
                    self.opts.catalog.clone(),
                    self.cfg.task.clone(),
                    self.opts.harnesses.clone(),
                    self.ev_tx.clone(),
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
                        max_tasks: self.cfg.max_tasks.max(1),
                    },
                };
                let report = report_object(&task_id, &outcome, &UsageSplit::default());
                self.outbox
                    .push_back(report_message(&task_id, a.attempt, report));
                // Its stream is forgotten once the report is acknowledged (unless the task
                // runs: a running one is forgotten after its own report).
                if !self.running.contains_key(&task_id) {
                    self.finished.push(task_id);
                }
            }
        }
    }

    /// Queue a task's progress or report for the session.
    fn take_event(&mut self, ev: TaskEvent) {
        match ev {
            TaskEvent::Progress {
                task_id,
                attempt,
                item,
            } => {
                let mut p = TaskProgress::new(task_id, item.kind, item.payload);
                p.attempt = attempt;
                self.outbox.push_back(Message::TaskProgress(p));
            }
            TaskEvent::Report {
                task_id,
                attempt,
                report,
                ..
            } => {
                self.running.remove(&task_id);
                self.started.remove(&task_id);
                self.finished.push(task_id.clone());
                self.outbox
                    .push_back(report_message(&task_id, attempt, report));
            }
        }
    }

    /// Forget reported tasks once the hub acknowledged their report.
    fn release_acknowledged(&mut self) {
        let (running, outbox, link) = (&self.running, &self.outbox, &mut self.link);
        self.finished.retain(|t| {
            if running.contains_key(t) {
                return false; // a new attempt runs: forgotten after its own report
            }
            // A report still queued for the session is not even sent yet.
            if outbox.iter().any(|m| m.task_id() == Some(t.as_str())) {
                return true;
            }
            if link.state().is_fully_acknowledged(t) {
                link.state_mut().forget_task(t);
                false
            } else {
                true
            }
        });
    }

    fn begin_shutdown(&mut self) {
        if self.shutting_down.is_some() {
            return;
        }
        log("shutting down: stopping the running tasks");
        for r in self.running.values() {
            let _ = r.control.try_send(Control::Shutdown);
        }
        self.shutting_down = Some(Instant::now() + ms(self.cfg.shutdown_grace_ms));
    }

    /// Close the connection for good; the loop ends at the link's `stopped`. `true` when
    /// this call asked for it (the first one).
    fn stop(&mut self) -> bool {
        if self.stop_requested {
            return false;
        }
        self.stop_requested = true;
        self.input(LinkInput::Stop {
            code: stapel_runner_protocol::host::CLOSE_NORMAL,
            reason: "runner shutting down".into(),
        });
        true
    }
}

fn report_message(task_id: &str, attempt: u64, report: Object) -> Message {
    let mut r = TaskReportMessage::new(report);
    r.task_id = task_id.to_owned();
    r.attempt = attempt;
    Message::TaskReport(r)
}
