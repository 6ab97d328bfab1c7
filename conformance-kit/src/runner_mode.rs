//! `stapel-conformance runner`: the kit is the hub. It listens on 127.0.0.1, starts the
//! runner under test itself (with `STAPEL_HUB_URL`, `STAPEL_TOKEN_FILE` and
//! `STAPEL_STATE_DIR` in its environment), and judges what the runner sends with the
//! core's `HubSession`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use stapel_runner_protocol::host::auth::{bearer_from_headers, constant_time_eq};
use stapel_runner_protocol::session::{HubSession, SessionConfig};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

use crate::driver::{Driver, Incoming};
use crate::scenario::Scenario;
use crate::socket;
use crate::steps::{self, CaseResult};

/// What the listener checks and where it hands accepted sockets.
#[derive(Default)]
struct Gate {
    token: String,
    to: Option<mpsc::UnboundedSender<Incoming>>,
}

/// The runner-mode run: the listener, the command, the workload's invocation.
pub struct RunnerMode {
    url: String,
    gate: Arc<Mutex<Gate>>,
    command: Vec<String>,
    invocation: Value,
    work: PathBuf,
}

impl RunnerMode {
    /// Listen on 127.0.0.1 (any free port); cases get their directories under `work`.
    ///
    /// # Errors
    /// The listener could not be bound.
    // The handshake callback's error type is tungstenite's (`ErrorResponse`).
    #[allow(clippy::result_large_err)]
    pub async fn start(
        command: Vec<String>,
        invocation: Value,
        work: PathBuf,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}/", listener.local_addr()?);
        let gate: Arc<Mutex<Gate>> = Arc::default();
        let g = gate.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let g = g.clone();
                tokio::spawn(async move {
                    let (token, to) = {
                        let gate = g.lock().expect("gate");
                        (gate.token.clone(), gate.to.clone())
                    };
                    let Some(to) = to else { return };
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
                    match tokio_tungstenite::accept_hdr_async(tcp, check).await {
                        Ok(ws) => {
                            let _ = to.send(Incoming::Conn(socket::spawn(ws)));
                        }
                        Err(e) => {
                            let why = refusal.lock().expect("refusal").clone();
                            let _ = to.send(Incoming::Refused(match why {
                                Some(w) => format!("HTTP 401 {w}"),
                                None => format!("upgrade failed: {e}"),
                            }));
                        }
                    }
                });
            }
        });
        Ok(Self {
            url,
            gate,
            command,
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
        }
        let config = match config_of(&sc.kit_session) {
            Ok(c) => c,
            Err(e) => return CaseResult::of(sc, &[e], false, 0, Vec::new()),
        };
        let mut d = Driver::new(HubSession::new(config));
        d.incoming = Some(rx);
        let mut proc = Proc {
            child: None,
            starts: 0,
            events: tx_exit,
        };
        let mut failures = Vec::new();
        let mut na = false;
        for (i, step) in sc.steps.iter().enumerate() {
            let from = d.log.len();
            let dup_base = stapel_runner_protocol::session::Machine::stats(&d.machine).duplicates;
            let r = self
                .input(&mut d, &mut proc, &dir, &token_file, &step.input)
                .await;
            let mut f = match r {
                Ok(()) => d.check(from, &step.expect, dup_base).await,
                Err(e) => vec![e],
            };
            if !f.is_empty() {
                f = f
                    .into_iter()
                    .map(|x| format!("step {}: {x}", i + 1))
                    .collect();
                na = step.otherwise == "not_applicable";
                failures = f;
                break;
            }
        }
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
        let transcript = d.log.iter().map(|e| e.to_json()).collect();
        CaseResult::of(
            sc,
            &failures,
            na,
            started.elapsed().as_millis() as u64,
            transcript,
        )
    }

    async fn input(
        &self,
        d: &mut Driver<HubSession>,
        proc: &mut Proc,
        dir: &Path,
        token_file: &Path,
        input: &Value,
    ) -> Result<(), String> {
        let (key, v) = input
            .as_object()
            .and_then(|o| o.iter().next())
            .ok_or("an input must have one key")?;
        if let Some(r) = steps::common(d, key, v).await {
            return r;
        }
        match key.as_str() {
            "start" => {
                proc.kill(d).await;
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("runner.log"))
                    .map_err(|e| e.to_string())?;
                let (prog, args) = self.command.split_first().ok_or("no command")?;
                let child = Command::new(prog)
                    .args(args)
                    .env("STAPEL_HUB_URL", &self.url)
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
                let m = steps::assign(v, &self.invocation)?;
                d.send_message(m)
            }
            "assign_many" => {
                let n = v["count"].as_u64().unwrap_or(1);
                let prefix = v["prefix"].as_str().unwrap_or("T");
                for i in 1..=n {
                    let mut spec = v.clone();
                    spec["task_id"] = Value::String(format!("{prefix}-{i}"));
                    let m = steps::assign(&spec, &self.invocation)?;
                    d.send_message(m)?;
                }
                Ok(())
            }
            "cancel" => d.send_message(steps::cancel(v)?),
            "send_reversed" => {
                let mut ms = Vec::new();
                for item in v.as_array().ok_or("send_reversed: a list")? {
                    if let Some(a) = item.get("assign") {
                        ms.push(steps::assign(a, &self.invocation)?);
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
