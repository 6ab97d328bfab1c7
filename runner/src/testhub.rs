//! A minimal hub over the core's [`HubLink`] (the hub side's whole connection driver;
//! this module only pumps it), for tests and benchmarks: it accepts one
//! runner at a time on 127.0.0.1 with a bearer token (a wrong or missing token is refused
//! with HTTP 401 before the upgrade), assigns and cancels tasks on command, and records
//! every applied progress seq and report per `(task_id, attempt)` — the oracle the
//! end-to-end tests check. The reference hub for people is the Python package's
//! (`python -m stapel_runner_protocol.hub`).
//!
//! A *durable* hub ([`TestHub::start_durable`]) keeps its state — the session's
//! sequencing snapshot together with the application's log — in a file, replaced
//! atomically (write, rename) at the points where the hub's state becomes visible to the
//! runner: before any frame is written to the socket (an acknowledgement is a promise
//! that the acknowledged frames are applied for good) and when the application hands it
//! a command. [`TestHub::restart`] then crashes the hub: the connection, the session and
//! the in-memory log are thrown away, and a new hub is built from the file alone — what a
//! hub process restarted after a crash would see. Frames applied after the last save are
//! lost with the crash and must come back from the runner's replay, exactly once. (The
//! replace is not fsynced: the crash is a process crash, not a power loss.)

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stapel_runner_protocol::json::Object;
use stapel_runner_protocol::link::{HubLink, LinkConfig, LinkEvent, LinkInput, LinkOutput};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{Event, HubSession, Machine, SessionConfig};
use stapel_runner_protocol::wire::{Hello, Message, TaskAssign, TaskCancel};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::WebSocketStream;

use crate::wspump::{self, Command as PumpCommand, Report};

/// What the hub saw.
#[derive(Debug, Clone, Default)]
pub struct HubLog {
    /// Applied progress seqs per `(task_id, attempt)`, in the order applied.
    pub progress: BTreeMap<(String, u64), Vec<u64>>,
    /// Applied progress kinds per `(task_id, attempt)`.
    pub kinds: BTreeMap<(String, u64), Vec<String>>,
    /// Applied reports per `(task_id, attempt)`: `(seq, TaskReport)`.
    pub reports: BTreeMap<(String, u64), Vec<(u64, Object)>>,
    /// Upgrades refused for a bad token.
    pub rejected: u64,
    /// Upgrades accepted.
    pub accepted: u64,
    /// `hello`s received.
    pub hellos: u64,
    /// The first `hello` received (not persisted).
    pub first_hello: Option<Hello>,
    /// The latest `hello` received (not persisted).
    pub last_hello: Option<Hello>,
    /// Gaps the hub was told about (`InboundGap`): frames lost for good.
    pub gaps: u64,
    /// Restarts from the persisted state (a durable hub; the count is persisted too).
    pub restarts: u64,
    /// State saves (a durable hub; not persisted).
    pub saves: u64,
    /// Peer errors the hub's session reported, as `code: detail` (not persisted).
    pub peer_errors: Vec<String>,
    /// Commands the hub's session keeps for replay now (not persisted): bounded by the
    /// runner's acknowledgements, or a seed-only runner's pongs.
    pub kept_commands: usize,
}

impl HubLog {
    /// The JSON form persisted by a durable hub (every field but `saves`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let seqs = |m: &BTreeMap<(String, u64), Vec<u64>>| {
            m.iter()
                .map(|((t, a), v)| json!([t, a, v]))
                .collect::<Vec<_>>()
        };
        json!({
            "progress": seqs(&self.progress),
            "kinds": self.kinds.iter().map(|((t, a), v)| json!([t, a, v])).collect::<Vec<_>>(),
            "reports": self.reports.iter().map(|((t, a), v)| json!([t, a,
                v.iter().map(|(s, r)| json!([s, serde_json::Value::from(stapel_runner_protocol::json::Value::Object(r.clone()))])).collect::<Vec<_>>()])).collect::<Vec<_>>(),
            "rejected": self.rejected, "accepted": self.accepted, "hellos": self.hellos,
            "gaps": self.gaps, "restarts": self.restarts,
        })
    }

    /// Read [`to_json`](Self::to_json)'s form back (missing parts are empty).
    pub fn from_json(v: &serde_json::Value) -> Self {
        let key = |e: &serde_json::Value| {
            (
                e[0].as_str().unwrap_or("").to_string(),
                e[1].as_u64().unwrap_or(0),
            )
        };
        let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
        let mut log = HubLog::default();
        for e in list("progress") {
            let seqs = e[2]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default();
            log.progress.insert(key(&e), seqs);
        }
        for e in list("kinds") {
            let kinds = e[2]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            log.kinds.insert(key(&e), kinds);
        }
        for e in list("reports") {
            let reports = e[2]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| {
                            let obj = match stapel_runner_protocol::json::Value::from(r[1].clone())
                            {
                                stapel_runner_protocol::json::Value::Object(o) => o,
                                _ => Object::new(),
                            };
                            (r[0].as_u64().unwrap_or(0), obj)
                        })
                        .collect()
                })
                .unwrap_or_default();
            log.reports.insert(key(&e), reports);
        }
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        log.rejected = n("rejected");
        log.accepted = n("accepted");
        log.hellos = n("hellos");
        log.gaps = n("gaps");
        log.restarts = n("restarts");
        log
    }

    /// The report status of a task's attempt, when exactly one report was applied.
    pub fn status(&self, task: &str, attempt: u64) -> Option<String> {
        match self.reports.get(&(task.to_string(), attempt))?.as_slice() {
            [(_, r)] => r.get("status").and_then(|v| v.as_str()).map(str::to_owned),
            _ => None,
        }
    }
}

enum Command {
    Send(Message),
    Drop,
    Restart,
}

/// A running test hub (its own thread and runtime).
pub struct TestHub {
    /// Where it listens.
    pub addr: SocketAddr,
    log: Arc<Mutex<HubLog>>,
    cmd: mpsc::UnboundedSender<Command>,
    token: Arc<Mutex<String>>,
}

impl TestHub {
    /// Start a hub on 127.0.0.1 (a free port) accepting `token`.
    ///
    /// # Panics
    /// When the listener cannot be bound (test code).
    pub fn start(token: &str, config: SessionConfig) -> Self {
        Self::start_with(token, config, None)
    }

    /// [`start`](Self::start) a durable hub whose state lives in `state_file` (see the
    /// module docs); an existing file is resumed from.
    ///
    /// # Panics
    /// When the listener cannot be bound (test code).
    pub fn start_durable(token: &str, config: SessionConfig, state_file: PathBuf) -> Self {
        Self::launch(token, config, None, Some(state_file))
    }

    /// [`start`](Self::start) serving `wss://` with this TLS configuration (`None`:
    /// plain `ws://`).
    ///
    /// # Panics
    /// When the listener cannot be bound (test code).
    pub fn start_with(
        token: &str,
        config: SessionConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        Self::launch(token, config, tls, None)
    }

    fn launch(
        token: &str,
        config: SessionConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
        state_file: Option<PathBuf>,
    ) -> Self {
        let log = Arc::new(Mutex::new(HubLog::default()));
        let token = Arc::new(Mutex::new(token.to_string()));
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (l, t) = (log.clone(), token.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("addr");
                serve(listener, config, l, t, cmd_rx, tls, state_file).await;
            });
        });
        let addr = addr_rx.recv().expect("hub address");
        Self {
            addr,
            log,
            cmd: cmd_tx,
            token,
        }
    }

    /// `ws://127.0.0.1:PORT/` (use `wss://localhost:PORT/` for a TLS hub).
    pub fn url(&self) -> String {
        format!("ws://{}/", self.addr)
    }

    /// Accept another token from now on.
    pub fn set_token(&self, token: &str) {
        *self.token.lock().expect("token") = token.to_string();
    }

    /// Assign a task (stamped and kept by the hub's session; replayed after reconnects).
    pub fn assign(&self, task_id: &str, attempt: u64, invocation: serde_json::Value) {
        self.assign_goal(task_id, attempt, invocation, "exercise the runner");
    }

    /// [`assign`](Self::assign) with this TaskSpec `goal` (the harness's prompt).
    pub fn assign_goal(
        &self,
        task_id: &str,
        attempt: u64,
        invocation: serde_json::Value,
        goal: &str,
    ) {
        let task = serde_json::json!({"schema_version": 1, "id": task_id, "type": "code",
            "goal": goal, "criteria": [{"id": "c1", "text": "it runs"}], "budget": {"iterations": 3}});
        let task: Object = match stapel_runner_protocol::json::Value::from(task) {
            stapel_runner_protocol::json::Value::Object(o) => o,
            _ => Object::new(),
        };
        let inv = match stapel_runner_protocol::json::Value::from(invocation) {
            stapel_runner_protocol::json::Value::Object(o) => o,
            _ => Object::new(),
        };
        let mut a = TaskAssign::new(task, "coder", inv);
        a.attempt = attempt;
        let _ = self.cmd.send(Command::Send(Message::TaskAssign(a)));
    }

    /// Cancel a task.
    pub fn cancel(&self, task_id: &str, reason: &str) {
        let _ = self
            .cmd
            .send(Command::Send(Message::TaskCancel(TaskCancel::new(
                task_id, reason,
            ))));
    }

    /// Drop the current connection (the runner reconnects).
    pub fn drop_connection(&self) {
        let _ = self.cmd.send(Command::Drop);
    }

    /// Crash and restart a durable hub (see the module docs): the connection, the session
    /// and the in-memory log are dropped; the session is rebuilt with
    /// `HubSession::with_state` over `ConnectionState::restore` of the persisted
    /// snapshot, and the log is the persisted one. A hub started without a state file
    /// ignores this.
    pub fn restart(&self) {
        let _ = self.cmd.send(Command::Restart);
    }

    /// A copy of the log.
    pub fn log(&self) -> HubLog {
        self.log.lock().expect("log").clone()
    }

    /// Wait until `done(log)` holds, at most `timeout`; the last log either way.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&HubLog) -> bool) -> (bool, HubLog) {
        let until = std::time::Instant::now() + timeout;
        loop {
            let log = self.log();
            if done(&log) {
                return (true, log);
            }
            if std::time::Instant::now() >= until {
                return (false, log);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A plain or TLS stream.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Ws = WebSocketStream<Box<dyn Io>>;

/// The durable state of a hub: its file (see the module docs).
struct Durable {
    path: PathBuf,
}

impl Durable {
    fn save(&self, hub: &HubSession, log: &Mutex<HubLog>) {
        let snapshot = hub.state().snapshot();
        let mut l = log.lock().expect("log");
        l.saves += 1;
        let body = serde_json::json!({
            "snapshot": String::from_utf8_lossy(&snapshot),
            "log": l.to_json(),
        });
        drop(l);
        let tmp = self.path.with_extension("tmp");
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &self.path))
        {
            eprintln!(
                "test hub: cannot save its state to {}: {e}",
                self.path.display()
            );
        }
    }

    /// The persisted session and log (`None`: no file yet).
    fn load(&self, config: &SessionConfig) -> Option<(HubSession, HubLog)> {
        let bytes = std::fs::read(&self.path).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("hub state json");
        let snapshot = v["snapshot"].as_str().unwrap_or("").as_bytes().to_vec();
        let state = ConnectionState::restore(&snapshot).expect("restore the hub snapshot");
        Some((
            HubSession::with_state(config.clone(), state),
            HubLog::from_json(&v["log"]),
        ))
    }
}

async fn serve(
    listener: TcpListener,
    config: SessionConfig,
    log: Arc<Mutex<HubLog>>,
    token: Arc<Mutex<String>>,
    mut cmd: mpsc::UnboundedReceiver<Command>,
    tls: Option<Arc<rustls::ServerConfig>>,
    state_file: Option<PathBuf>,
) {
    let durable = state_file.map(|path| Durable { path });
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let (sock_tx, mut sock_rx) = mpsc::channel::<Ws>(4);
    let (l2, t2) = (log.clone(), token.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (tx, l, t) = (sock_tx.clone(), l2.clone(), t2.clone());
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let tcp: Box<dyn Io> = match acceptor {
                    None => Box::new(tcp),
                    Some(a) => match a.accept(tcp).await {
                        Ok(s) => Box::new(s),
                        Err(_) => return,
                    },
                };
                let expected = format!("Bearer {}", t.lock().expect("token"));
                // The callback's type is fixed by tungstenite.
                #[allow(clippy::result_large_err)]
                let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                    let ok = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        == Some(expected.as_str());
                    if ok {
                        Ok(resp)
                    } else {
                        let mut e = ErrorResponse::new(Some("bad token".into()));
                        *e.status_mut() = StatusCode::UNAUTHORIZED;
                        Err(e)
                    }
                };
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio_tungstenite::accept_hdr_async(tcp, check),
                )
                .await
                {
                    Ok(Ok(ws)) => {
                        l.lock().expect("log").accepted += 1;
                        let _ = tx.send(ws).await;
                    }
                    Ok(Err(_)) => l.lock().expect("log").rejected += 1,
                    Err(_) => {}
                }
            });
        }
    });
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as u64;
    let new_link = |session: HubSession| {
        let mut c = LinkConfig::default();
        c.session = config.clone();
        HubLink::new(session, c)
    };
    let mut link = new_link(HubSession::new(config.clone()));
    if let Some((h, l)) = durable.as_ref().and_then(|d| d.load(&config)) {
        link = new_link(h);
        *log.lock().expect("log") = l;
    }
    let (report_tx, mut report_rx) = mpsc::channel::<Report>(256);
    let mut sockets: HashMap<u64, (mpsc::UnboundedSender<PumpCommand>, JoinHandle<()>)> =
        HashMap::new();
    let mut next_socket = 0u64;
    loop {
        let mut sends: Vec<(u64, PumpCommand)> = Vec::new();
        let mut taken = 0;
        while let Some(out) = link.poll_output() {
            match out {
                LinkOutput::Send { socket, frame } => {
                    sends.push((socket, PumpCommand::Send(frame)))
                }
                LinkOutput::Pause { socket } => sends.push((socket, PumpCommand::Pause)),
                LinkOutput::Resume { socket } => sends.push((socket, PumpCommand::Resume)),
                LinkOutput::Close {
                    socket,
                    code,
                    reason,
                } => sends.push((socket, PumpCommand::Close(code, reason))),
                LinkOutput::Abort { socket } => {
                    if let Some((_, task)) = sockets.remove(&socket) {
                        task.abort();
                    }
                }
                LinkOutput::Event(e) => {
                    taken += 1;
                    record(&log, e);
                }
                _ => {}
            }
        }
        if sends.iter().any(|(_, c)| matches!(c, PumpCommand::Send(_))) {
            // Durable before anything (an acknowledgement above all) reaches the runner.
            if let Some(d) = &durable {
                d.save(link.session(), &log);
            }
        }
        for (id, c) in sends {
            if let Some((tx, _)) = sockets.get(&id) {
                let _ = tx.send(c);
            }
        }
        log.lock().expect("log").kept_commands = link.state().outbox_frames();
        if taken > 0 {
            let _ = link.handle_input(now(), LinkInput::EventsTaken(taken));
            continue;
        }
        let deadline = link.poll_timeout();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(start + Duration::from_millis(d)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            s = sock_rx.recv() => if let Some(ws) = s {
                next_socket += 1;
                let id = next_socket;
                let (tx, rx) = mpsc::unbounded_channel();
                let reports = report_tx.clone();
                let task = tokio::spawn(wspump::pump(id, ws, rx, reports, Duration::from_secs(2)));
                sockets.insert(id, (tx, task));
                let _ = link.handle_input(now(), LinkInput::Attach { socket: id });
            },
            r = report_rx.recv() => if let Some(r) = r {
                let input = match r {
                    Report::Frame(socket, frame) => LinkInput::Frame { socket, frame },
                    Report::Closed(socket) => {
                        sockets.remove(&socket);
                        LinkInput::SocketClosed { socket }
                    }
                    Report::Failed(socket, detail) => {
                        sockets.remove(&socket);
                        LinkInput::Failed { socket, detail }
                    }
                    Report::Opened(_) | Report::ConnectFailed(..) => continue,
                };
                let _ = link.handle_input(now(), input);
            },
            c = cmd.recv() => match c {
                Some(Command::Send(m)) => {
                    let _ = link.send(now(), m);
                    // The application's command is durable once accepted.
                    if let Some(d) = &durable {
                        d.save(link.session(), &log);
                    }
                }
                Some(Command::Drop) => {
                    // An abrupt drop: the socket fails (the link aborts it).
                    if let Some(socket) = link.socket() {
                        let _ = link.handle_input(now(), LinkInput::Failed {
                            socket,
                            detail: "dropped by the test".into(),
                        });
                    }
                }
                Some(Command::Restart) => if let Some(d) = &durable {
                    // A crash: everything in memory is gone; only the file remains.
                    for (_, (_, task)) in sockets.drain() {
                        task.abort();
                    }
                    let (h, mut l) = d.load(&config).unwrap_or_else(|| (HubSession::new(config.clone()), HubLog::default()));
                    l.restarts += 1;
                    l.saves = log.lock().expect("log").saves;
                    link = new_link(h);
                    *log.lock().expect("log") = l;
                    d.save(link.session(), &log);
                },
                None => return,
            },
            () = sleep => { let _ = link.handle_input(now(), LinkInput::Timeout); }
        }
    }
}

/// Record one event of the link in the hub's log.
fn record(log: &Mutex<HubLog>, e: LinkEvent) {
    let mut l = log.lock().expect("log");
    match e {
        LinkEvent::Session(Event::Hello(h)) => {
            l.hellos += 1;
            if l.first_hello.is_none() {
                l.first_hello = Some(h.clone());
            }
            l.last_hello = Some(h);
        }
        LinkEvent::Session(Event::InboundGap(_)) => l.gaps += 1,
        LinkEvent::Session(Event::PeerError { code, detail }) if l.peer_errors.len() < 100 => {
            l.peer_errors.push(format!("{code}: {detail}"));
        }
        LinkEvent::Session(Event::Received(Message::TaskProgress(p))) => {
            let key = (p.task_id.to_string(), p.attempt);
            l.progress.entry(key.clone()).or_default().push(p.seq);
            l.kinds.entry(key).or_default().push(p.kind.to_string());
        }
        LinkEvent::Session(Event::Received(Message::TaskReport(r))) => {
            l.reports
                .entry((r.task_id.clone(), r.attempt))
                .or_default()
                .push((r.seq, r.report.clone()));
        }
        _ => {}
    }
}
