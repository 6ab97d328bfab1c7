//! `stapel-runner live`: seed 002's browser live mode on a loopback HTTP server.
//!
//! The server is an I/O shell around two core machines: the admission machine
//! ([`stapel_runner_protocol::admission`]) decides every request — loopback sockets,
//! exact `Host` and `Origin`, Fetch Metadata, JSON-only bounded bodies, the route table,
//! the run and stream caps — before any route runs or any process starts, and each run is
//! the same local-run host loop as `stapel-runner run` ([`crate::host`]: the machine, its
//! ledger, the harness in its own process group through the kill-safe wrapper), driven by
//! the built-in controller, whose commands a person chooses on the page.
//!
//! * `GET /` (and the page's assets): the page, embedded in the binary ([`assets`]);
//! * `GET /api/scripts`: the scripts a run may play and the default one;
//! * `POST /api/runs` `{"script": NAME}`: start a run (`201 {"runId", "sessionId",
//!   "script", "events", "actions"}`);
//! * `GET /api/runs/RUN/events`: the run's stream as server-sent events, from a cursor
//!   (`Last-Event-ID` or `?cursor=N`): the retained history, then live messages, then an
//!   `end` event once the run ended; see [`stream`];
//! * `POST /api/runs/RUN/actions` (an action): the controller command it becomes goes
//!   through the ledger; the answer is its receipt.
//!
//! Every response carries the core's response headers; every refusal is the core's
//! status and JSON error body.

pub mod assets;
mod http;
mod runs;
mod stream;

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use stapel_runner_protocol::admission::{
    Admission, AdmissionConfig, AdmissionInput, AdmissionOutput, Refusal, Route,
};
use stapel_runner_protocol::local::LocalConfig;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use runs::RunState;

/// Most connections served at once; a connection beyond it is closed at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest wait for a request head on a connection (slow clients are dropped).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for an action's receipt before answering `202` without it.
pub const RECEIPT_TIMEOUT: Duration = Duration::from_secs(10);
/// A run whose retained stream passes this many bytes is cancelled; past twice this
/// many, further messages are dropped (the run's residual bound; see the README).
pub const MAX_RUN_HISTORY_BYTES: usize = 8 * 1024 * 1024;

/// Builds the local-run configuration of one run: `(script, run id, session id)`.
pub type ConfigMaker = dyn Fn(&str, &str, &str) -> LocalConfig + Send + Sync;

/// Options of the live server.
pub struct LiveOptions {
    /// Port to bind on 127.0.0.1 (0: a free one).
    pub port: u16,
    /// The script names a run may play, in the order the page offers them.
    pub scripts: Vec<String>,
    /// The script the page selects first.
    pub default_script: String,
    /// The admission machine's configuration (its `scripts` and `pages` are set here).
    pub admission: AdmissionConfig,
    /// The local-run configuration of a run.
    pub make_config: Box<ConfigMaker>,
    /// The harness wrapper prefix (`stapel-runner harness-exec …`), as for `run`.
    pub wrapper: Vec<String>,
    /// Grace of a run's end at shutdown.
    pub shutdown_grace: Duration,
}

impl std::fmt::Debug for LiveOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveOptions")
            .field("port", &self.port)
            .field("scripts", &self.scripts)
            .field("default_script", &self.default_script)
            .field("admission", &self.admission)
            .finish_non_exhaustive()
    }
}

/// What the admission machine decided for one request.
#[derive(Debug)]
pub(crate) enum Verdict {
    Refuse(Refusal),
    ReadBody,
    Admit(Route),
}

struct Inner {
    machine: Admission,
    waiters: std::collections::HashMap<u64, mpsc::UnboundedSender<Verdict>>,
    runs: std::collections::HashMap<String, Arc<RunState>>,
    next_id: u64,
}

/// Everything the connections share.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    start: Instant,
    /// Woken whenever the machine's deadline may have moved.
    timer: Notify,
    opts: LiveOptions,
    /// The run tasks, to wait for at shutdown.
    run_tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A fresh request id and its verdict channel.
    pub(crate) fn register(&self) -> (u64, mpsc::UnboundedReceiver<Verdict>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        inner.next_id = inner.next_id.wrapping_add(1);
        let id = inner.next_id;
        inner.waiters.insert(id, tx);
        (id, rx)
    }

    /// Forget a request's verdict channel.
    pub(crate) fn unregister(&self, id: u64) {
        self.lock().waiters.remove(&id);
    }

    /// Feed one input and perform every output: verdicts go to their requests, evictions
    /// happen here. Misuse is a bug of this shell: said on stderr.
    pub(crate) fn feed(&self, input: AdmissionInput) {
        let now = self.now_ms();
        let mut evicted = Vec::new();
        {
            let mut inner = self.lock();
            if let Err(e) = inner.machine.handle_input(now, input) {
                eprintln!("stapel-runner live: admission input refused: {e}");
            }
            while let Some(out) = inner.machine.poll_output() {
                let (id, verdict) = match out {
                    AdmissionOutput::Refuse { id, refusal } => (id, Verdict::Refuse(refusal)),
                    AdmissionOutput::ReadBody { id, .. } => (id, Verdict::ReadBody),
                    AdmissionOutput::Admit { id, route } => (id, Verdict::Admit(route)),
                    AdmissionOutput::Evict { run } => {
                        if let Some(state) = inner.runs.remove(&run) {
                            evicted.push(state);
                        }
                        continue;
                    }
                    _ => continue,
                };
                if let Some(w) = inner.waiters.get(&id) {
                    let _ = w.send(verdict);
                }
            }
        }
        for state in evicted {
            state.evict();
        }
        self.timer.notify_one();
    }

    /// The machine's next deadline, as an instant.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.lock()
            .machine
            .poll_timeout()
            .map(|ms| self.start + Duration::from_millis(ms))
    }

    pub(crate) fn run(&self, run: &str) -> Option<Arc<RunState>> {
        self.lock().runs.get(run).cloned()
    }

    pub(crate) fn options(&self) -> &LiveOptions {
        &self.opts
    }
}

/// The first stdout line: `{"url": "http://127.0.0.1:PORT/"}`.
pub fn url_line(port: u16) -> String {
    format!("{{\"url\": \"http://127.0.0.1:{port}/\"}}")
}

/// Serve until SIGINT or SIGTERM; then cancel the runs (their harness groups end through
/// the controller's closure: TERM → grace → KILL) and return 0.
///
/// # Errors
/// The port cannot be bound.
pub async fn serve(mut opts: LiveOptions) -> io::Result<i32> {
    opts.admission.scripts = opts.scripts.clone();
    opts.admission.pages = assets::pages();
    let listener = TcpListener::bind(("127.0.0.1", opts.port)).await?;
    let port = listener.local_addr()?.port();
    {
        let mut out = io::stdout().lock();
        writeln!(out, "{}", url_line(port))?;
        out.flush()?;
    }
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            machine: Admission::new(opts.admission.clone()),
            waiters: Default::default(),
            runs: Default::default(),
            next_id: 0,
        }),
        start: Instant::now(),
        timer: Notify::new(),
        opts,
        run_tasks: Mutex::new(Vec::new()),
    });
    let timer = tokio::spawn(drive_timer(shared.clone()));
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let Ok(permit) = connections.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let local = match stream.local_addr() {
                    Ok(a) => a,
                    Err(_) => continue,
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    http::connection(shared, stream, peer, local).await;
                    drop(permit);
                });
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    eprintln!("stapel-runner live: stopping; ending the runs");
    drop(listener);
    timer.abort();
    let states: Vec<Arc<RunState>> = shared.lock().runs.values().cloned().collect();
    for s in &states {
        s.close_controller();
    }
    let tasks: Vec<_> =
        std::mem::take(&mut *shared.run_tasks.lock().unwrap_or_else(|e| e.into_inner()));
    let wait = shared.opts.shutdown_grace + Duration::from_secs(3);
    let _ = tokio::time::timeout(wait, futures_util::future::join_all(tasks)).await;
    crate::supervisor::kill_adopted(&[], 16);
    Ok(0)
}

/// Feeds `Timeout` at the machine's deadline (bodies that stall are refused even when
/// no other request comes).
async fn drive_timer(shared: Arc<Shared>) {
    loop {
        let deadline = shared.deadline();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => shared.feed(AdmissionInput::Timeout),
            () = shared.timer.notified() => {}
        }
    }
}
