//! `stapel-conformance runner`: the kit is the hub. It listens on 127.0.0.1, starts the
//! runner under test itself (with `STAPEL_HUB_URL`, `STAPEL_TOKEN_FILE` and
//! `STAPEL_STATE_DIR` in its environment), and judges what the runner sends with the
//! core's `HubSession`.
//!
//! With `--url` and `--token-file` instead of a command, the runner under test is one
//! that someone else started and keeps running (see [`External`]): the kit listens on
//! the URL's address, accepts the file's token, and plays every case with that one
//! runner. The cases that restart the runner are not applicable then.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use stapel_runner_protocol::host::auth::{bearer_from_headers, constant_time_eq};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{HubSession, Machine, SessionConfig};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

use crate::driver::{Driver, Incoming};
use crate::scenario::Scenario;
use crate::socket::{self, Conn};
use crate::steps::{self, CaseResult};

/// What the listener checks and where it hands accepted sockets.
#[derive(Default)]
struct Gate {
    token: String,
    to: Option<mpsc::UnboundedSender<Incoming>>,
    /// A socket accepted between two cases (an external runner reconnecting): handed to
    /// the next case.
    pending: Option<Conn>,
}

/// A runner under test that the kit did not start (`runner --url … --token-file …`).
///
/// One runner plays every case, so the kit carries what its hub knows from one case
/// to the next (its session state: what was sent, received and acknowledged), gives
/// each case's tasks ids of their own (`<run>.<case>.<id>`: a task of an earlier case
/// is never confused with one of this case), and at the end of a case cancels the
/// case's tasks that have not reported, so they do not hold the runner's capacity.
/// Cases that kill, stop or start the runner again are not applicable.
pub struct External {
    /// The token the runner presents.
    pub token: String,
    /// The kit's hub state after the previous case.
    carried: Mutex<Option<ConnectionState>>,
    /// The run's prefix of task ids.
    run: String,
}

impl External {
    /// An external runner presenting `token`.
    pub fn new(token: String) -> Self {
        Self {
            token,
            carried: Mutex::new(None),
            run: format!("{:04x}", fastrand::u16(..)),
        }
    }
}

/// The runner-mode run: the listener, the command (or the external runner), the
/// workload's invocation.
pub struct RunnerMode {
    url: String,
    gate: Arc<Mutex<Gate>>,
    command: Vec<String>,
    external: Option<External>,
    invocation: Value,
    work: PathBuf,
}

impl RunnerMode {
    /// Listen on `listen` (`127.0.0.1:0`: any free port) for the runner that `command`
    /// starts, or for `external`'s; cases get their directories under `work`.
    ///
    /// # Errors
    /// The listener could not be bound.
    // The handshake callback's error type is tungstenite's (`ErrorResponse`).
    #[allow(clippy::result_large_err)]
    pub async fn start(
        listen: &str,
        command: Vec<String>,
        external: Option<External>,
        invocation: Value,
        work: PathBuf,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let url = format!("ws://{}/", listener.local_addr()?);
        let gate: Arc<Mutex<Gate>> = Arc::new(Mutex::new(Gate {
            token: external
                .as_ref()
                .map(|e| e.token.clone())
                .unwrap_or_default(),
            ..Gate::default()
        }));
        let g = gate.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let g = g.clone();
                tokio::spawn(async move {
                    let token = g.lock().expect("gate").token.clone();
                    if token.is_empty() {
                        return;
                    }
                    let refusal: Arc<Mutex<Option<String>>> = Arc::default();
                    let r = refusal.clone();
                    let check =
                        move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                            let headers: Vec<(String, String)> = req
                                .headers()
                                .iter()
                                .map(|(k, v)| {
                                    (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                                })
                                .collect();
                            // The core's header rules; the comparison in constant time.
                            let why = match bearer_from_headers(&headers) {
                                Ok(t) if constant_time_eq(t.as_bytes(), token.as_bytes()) => {
                                    return Ok(resp)
                                }
                                Ok(_) => "unknown_token",
                                Err(e) => e.code(),
                            };
                            *r.lock().expect("refusal") = Some(why.to_string());
                            let mut e = ErrorResponse::new(Some(why.to_string()));
                            *e.status_mut() = StatusCode::UNAUTHORIZED;
                            Err(e)
                        };
                    let accepted = tokio_tungstenite::accept_hdr_async(tcp, check).await;
                    let mut gate = g.lock().expect("gate");
                    match (accepted, gate.to.clone()) {
                        (Ok(ws), Some(to)) => {
                            let _ = to.send(Incoming::Conn(socket::spawn(ws)));
                        }
                        // Between cases: kept for the next one (a newer socket replaces
                        // an older one, which is closed).
                        (Ok(ws), None) => gate.pending = Some(socket::spawn(ws)),
                        (Err(e), Some(to)) => {
                            let why = refusal.lock().expect("refusal").clone();
                            let _ = to.send(Incoming::Refused(match why {
                                Some(w) => format!("HTTP 401 {w}"),
                                None => format!("upgrade failed: {e}"),
                            }));
                        }
                        (Err(_), None) => {}
                    }
                });
            }
        });
        Ok(Self {
            url,
            gate,
            command,
            external,
            invocation,
            work,
        })
    }

    /// The URL runners are given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Run one case.
    pub async fn run_case(&self, sc: &Scenario) -> CaseResult {
        match &self.external {
            Some(ext) => self.run_external(ext, sc).await,
            None => self.run_started(sc).await,
        }
    }

    /// A case with a runner the kit starts (and restarts) itself.
    async fn run_started(&self, sc: &Scenario) -> CaseResult {
        let started = Instant::now();
        let dir = self.work.join(sc.id.replace('/', "_"));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(dir.join("state"));
        let token = format!("kit-{:016x}", fastrand::u64(..));
        let token_file = dir.join("token");
        let _ = std::fs::write(&token_file, &token);
        let (tx, rx) = mpsc::unbounded_channel();
        let tx_exit = tx.clone();
        {
            let mut g = self.gate.lock().expect("gate");
            g.token = token;
            g.to = Some(tx);
            g.pending = None;
        }
        let config = match config_of(&sc.kit_session) {
            Ok(c) => c,
            Err(e) => return CaseResult::of(sc, &[e], false, 0, Vec::new()),
        };
        let mut d = Driver::new(HubSession::new(config));
        d.incoming = Some(rx);
        let (failures, na, mut proc) = self.play(sc, &mut d, tx_exit, &dir, &token_file).await;
        proc.kill(&mut d).await;
        d.drop_conn(true, "case ended");
        self.gate.lock().expect("gate").to = None;
        if !failures.is_empty() {
            if let Ok(log) = std::fs::read_to_string(dir.join("runner.log")) {
                let tail: String = log
                    .chars()
                    .rev()
                    .take(3000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                d.note(
                    "process",
                    &format!("the runner's output (tail):\n{tail}"),
                    None,
                );
            }
        }
        CaseResult::finish(sc, &failures, na, started, &d.log)
    }

    /// A case with the runner someone else started (see [`External`]).
    async fn run_external(&self, ext: &External, sc: &Scenario) -> CaseResult {
        let started = Instant::now();
        if let Some(why) = restarts(sc) {
            let reason =
                format!("the case {why}: only when the kit starts the runner (runner -- COMMAND)");
            return CaseResult::of(sc, &[reason], true, 0, Vec::new());
        }
        let number = sc
            .id
            .rsplit('/')
            .next()
            .and_then(|stem| stem.split('_').next())
            .unwrap_or("case");
        let prefix = format!("{}.{number}.", ext.run);
        let sc = &crate::scenario::renamed(sc, &prefix);
        let config = match config_of(&sc.kit_session) {
            Ok(c) => c,
            Err(e) => return CaseResult::of(sc, &[e], false, 0, Vec::new()),
        };
        let carried = ext.carried.lock().expect("carried").take();
        let machine = match carried {
            Some(state) => HubSession::with_state(config, state),
            None => HubSession::new(config),
        };
        let mut d = Driver::new(machine);
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut g = self.gate.lock().expect("gate");
            if let Some(c) = g.pending.take() {
                let _ = tx.send(Incoming::Conn(c));
            }
            g.to = Some(tx.clone());
        }
        d.incoming = Some(rx);
        let dir = self.work.join(sc.id.replace('/', "_"));
        let (failures, na, _) = self.play(sc, &mut d, tx, &dir, Path::new("")).await;
        end_open_tasks(&mut d, sc).await;
        d.drop_conn(true, "case ended");
        // As a hub does with a task that ended: forget the tasks that reported (their
        // tombstones still drop a late duplicate).
        for task in reported_tasks(&d) {
            d.machine.state_mut().forget_task(&task);
        }
        self.gate.lock().expect("gate").to = None;
        // The next case goes on from what this hub knows.
        *ext.carried.lock().expect("carried") = Some(d.machine.state().clone());
        CaseResult::finish(sc, &failures, na, started, &d.log)
    }

    /// Run the steps of `sc` with this mode's inputs; the runner process (if the case
    /// started one) is handed back with the failures.
    async fn play(
        &self,
        sc: &Scenario,
        d: &mut Driver<HubSession>,
        events: mpsc::UnboundedSender<Incoming>,
        dir: &Path,
        token_file: &Path,
    ) -> (Vec<String>, bool, Proc) {
        let mut proc = Proc {
            child: None,
            starts: 0,
            events,
        };
        let (failures, na) = steps::run_steps(
            &mut RunnerInputs {
                mode: self,
                proc: &mut proc,
                dir,
                token_file,
            },
            d,
            sc,
        )
        .await;
        (failures, na, proc)
    }
}

/// Why a case cannot run with a runner the kit did not start: it kills, stops or
/// starts the runner again (`None`: it can).
fn restarts(sc: &Scenario) -> Option<&'static str> {
    let mut starts = 0;
    for step in &sc.steps {
        let Some(key) = step.input.as_object().and_then(|o| o.keys().next()) else {
            continue;
        };
        match key.as_str() {
            "kill" => return Some("kills the runner"),
            "stop" => return Some("stops the runner"),
            "start" => starts += 1,
            _ => {}
        }
    }
    (starts > 1).then_some("starts the runner again")
}

/// After a case with an external runner: cancel the case's tasks that did not report
/// (waiting for the runner to come back if the case ended cut off), and wait a little
/// for their reports, so they do not hold the runner's capacity in the next case. Not
/// judged; the transcript shows it.
async fn end_open_tasks(d: &mut Driver<HubSession>, sc: &Scenario) {
    let mut assigned = Vec::new();
    for step in &sc.steps {
        let i = &step.input;
        if let Some(t) = i["assign"]["task_id"].as_str() {
            assigned.push(t.to_string());
        }
        if let Some(p) = i["assign_many"]["prefix"].as_str() {
            for n in 1..=i["assign_many"]["count"].as_u64().unwrap_or(1) {
                assigned.push(format!("{p}-{n}"));
            }
        }
        for item in i["send_reversed"].as_array().into_iter().flatten() {
            if let Some(t) = item["assign"]["task_id"].as_str() {
                assigned.push(t.to_string());
            }
        }
    }
    let done = reported_tasks(d);
    let open: Vec<String> = assigned.into_iter().filter(|t| !done.contains(t)).collect();
    if open.is_empty() {
        return;
    }
    d.note(
        "note",
        &format!("end of case: cancelling the case's open tasks {open:?} (not judged)"),
        None,
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    d.pump(deadline, |d| d.conn.is_some()).await;
    for t in &open {
        if let Ok(m) = steps::cancel(&serde_json::json!({"task_id": t, "reason": "end of case"})) {
            let _ = d.send_message(m);
        }
    }
    d.pump(deadline, |d| {
        let done = reported_tasks(d);
        open.iter().all(|t| done.contains(t))
    })
    .await;
}

/// The tasks whose report the kit received in this case.
fn reported_tasks(d: &Driver<HubSession>) -> Vec<String> {
    d.log
        .iter()
        .filter_map(|e| e.json.as_ref())
        .filter(|j| j["event"] == "received" && j["message"]["type"] == "task.report")
        .filter_map(|j| j["message"]["task_id"].as_str().map(str::to_string))
        .collect()
}

/// One case's inputs in runner mode.
struct RunnerInputs<'a> {
    mode: &'a RunnerMode,
    proc: &'a mut Proc,
    dir: &'a Path,
    token_file: &'a Path,
}

impl steps::Inputs<HubSession> for RunnerInputs<'_> {
    async fn input(&mut self, d: &mut Driver<HubSession>, input: &Value) -> Result<(), String> {
        let (proc, dir, token_file, mode) = (&mut *self.proc, self.dir, self.token_file, self.mode);
        let (key, v) = input
            .as_object()
            .and_then(|o| o.iter().next())
            .ok_or("an input must have one key")?;
        if let Some(r) = steps::common(d, key, v).await {
            return r;
        }
        match key.as_str() {
            "start" if mode.external.is_some() => {
                d.note(
                    "process",
                    "the runner under test runs outside the kit (--url): waiting for it",
                    None,
                );
                Ok(())
            }
            "start" => {
                proc.kill(d).await;
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("runner.log"))
                    .map_err(|e| e.to_string())?;
                let (prog, args) = mode.command.split_first().ok_or("no command")?;
                let child = Command::new(prog)
                    .args(args)
                    .env("STAPEL_HUB_URL", &mode.url)
                    .env("STAPEL_TOKEN_FILE", token_file)
                    .env("STAPEL_STATE_DIR", dir.join("state"))
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().map_err(|e| e.to_string())?)
                    .stderr(log)
                    .process_group(0)
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("cannot start {prog}: {e}"))?;
                proc.starts += 1;
                d.note(
                    "process",
                    &format!(
                        "started the runner (start #{}, pid {:?})",
                        proc.starts,
                        child.id()
                    ),
                    None,
                );
                d.peer_exited = None;
                proc.watch(child);
                Ok(())
            }
            "kill" => {
                proc.kill(d).await;
                Ok(())
            }
            "stop" => {
                proc.stop(d).await;
                Ok(())
            }
            "assign" => {
                let m = steps::assign(v, &mode.invocation)?;
                d.send_message(m)
            }
            "assign_many" => {
                let n = v["count"].as_u64().unwrap_or(1);
                let prefix = v["prefix"].as_str().unwrap_or("T");
                for i in 1..=n {
                    let mut spec = v.clone();
                    spec["task_id"] = Value::String(format!("{prefix}-{i}"));
                    let m = steps::assign(&spec, &mode.invocation)?;
                    d.send_message(m)?;
                }
                Ok(())
            }
            "cancel" => d.send_message(steps::cancel(v)?),
            "send_reversed" => {
                let mut ms = Vec::new();
                for item in v.as_array().ok_or("send_reversed: a list")? {
                    if let Some(a) = item.get("assign") {
                        ms.push(steps::assign(a, &mode.invocation)?);
                    } else if let Some(c) = item.get("cancel") {
                        ms.push(steps::cancel(c)?);
                    } else {
                        return Err(format!("send_reversed: {item}"));
                    }
                }
                d.send_reversed(ms)
            }
            other => Err(format!("unknown input {other:?} in runner mode")),
        }
    }
}

/// The session configuration of the kit's machine for a case.
pub fn config_of(v: &Value) -> Result<SessionConfig, String> {
    if v.is_null() {
        return Ok(SessionConfig::default());
    }
    SessionConfig::from_value(v).map_err(|e| format!("kit_session: {e}"))
}

/// The runner process under test (its own process group), watched by a task that
/// tells the case's driver when it ends.
struct Proc {
    child: Option<Running>,
    starts: u32,
    events: mpsc::UnboundedSender<Incoming>,
}

/// A started runner process.
struct Running {
    pid: Option<u32>,
    /// Set before the kit ends the process itself.
    ending: Arc<AtomicBool>,
    /// Resolves with the exit status once the process ended.
    ended: oneshot::Receiver<String>,
}

impl Proc {
    fn watch(&mut self, mut child: Child) {
        let ending = Arc::new(AtomicBool::new(false));
        let (done, ended) = oneshot::channel();
        let pid = child.id();
        let events = self.events.clone();
        let flag = ending.clone();
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(st) => st.to_string(),
                Err(e) => format!("cannot wait for it: {e}"),
            };
            let _ = done.send(status.clone());
            let _ = events.send(Incoming::Exited {
                status,
                expected: flag.load(Ordering::SeqCst),
            });
        });
        self.child = Some(Running { pid, ending, ended });
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(pid) = self.child.as_ref().and_then(|r| r.pid) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), sig);
        }
    }

    async fn kill(&mut self, d: &mut Driver<HubSession>) {
        if let Some(r) = self.child.as_ref() {
            r.ending.store(true, Ordering::SeqCst);
        }
        self.signal(nix::sys::signal::Signal::SIGKILL);
        if let Some(r) = self.child.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), r.ended).await;
            d.note(
                "process",
                "killed the runner (SIGKILL to its process group)",
                None,
            );
        }
    }

    async fn stop(&mut self, d: &mut Driver<HubSession>) {
        if let Some(r) = self.child.as_ref() {
            r.ending.store(true, Ordering::SeqCst);
        }
        self.signal(nix::sys::signal::Signal::SIGTERM);
        if let Some(mut r) = self.child.take() {
            let ended = tokio::time::timeout(Duration::from_secs(8), &mut r.ended).await;
            d.note(
                "process",
                &format!("stopped the runner (SIGTERM): {ended:?}"),
                None,
            );
            if ended.is_err() {
                // Still running after the grace: kill its group.
                self.child = Some(r);
                self.kill(d).await;
            } else {
                // Its group may still hold processes the runner left behind.
                if let Some(pid) = r.pid {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}
