//! `stapel-conformance hub`: the kit is the runner. It connects to a running hub with
//! the token and judges what the hub sends with the core's `RunnerSession`. One runner
//! session lives across all cases of a run (the kit is one runner of the hub); a
//! `connect` with `fresh_session` starts over with a new one (a runner that lost its
//! state).

use std::time::Instant;

use serde_json::{json, Value};
use stapel_runner_protocol::host::auth::authorization_value;
use stapel_runner_protocol::session::{Machine, RunnerSession};
use stapel_runner_protocol::wire::Hello;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::driver::Driver;
use crate::runner_mode::config_of;
use crate::scenario::Scenario;
use crate::socket;
use crate::steps::{self, CaseResult};

/// The hub-mode run.
pub struct HubMode {
    url: String,
    token: String,
    session: Option<RunnerSession>,
    status_file: Option<std::path::PathBuf>,
    /// This run's prefix of the kit's task ids (`<run>.`): a second run against the
    /// same long-lived hub uses fresh streams.
    prefix: String,
}

fn fresh(config: &Value) -> Result<RunnerSession, String> {
    let mut hello = Hello::new("conformance-kit", env!("CARGO_PKG_VERSION"));
    hello.capabilities = vec!["conformance".to_string()];
    Ok(RunnerSession::new(hello, config_of(config)?))
}

impl HubMode {
    /// A run against the hub at `url` with `token`; `status_file`: the hub's status
    /// hook, if it has one (see [`crate::driver::status_records`]).
    pub fn new(url: String, token: String, status_file: Option<std::path::PathBuf>) -> Self {
        Self {
            url,
            token,
            session: None,
            status_file,
            prefix: format!("{:04x}.", fastrand::u16(..)),
        }
    }

    /// Run one case.
    pub async fn run_case(&mut self, sc: &Scenario) -> CaseResult {
        let started = Instant::now();
        let sc = &crate::scenario::renamed(sc, &self.prefix);
        let session = match self.session.take() {
            Some(s) if sc.kit_session.is_null() => s,
            _ => match fresh(&sc.kit_session) {
                Ok(s) => s,
                Err(e) => return CaseResult::of(sc, &[e], false, 0, Vec::new()),
            },
        };
        let mut d = Driver::new(session);
        d.tolerated = vec!["ack_ahead"];
        d.status_file = self.status_file.clone();
        let (failures, na) = steps::run_steps(
            &mut HubInputs {
                mode: self,
                config: &sc.kit_session,
            },
            &mut d,
            sc,
        )
        .await;
        d.drop_conn(false, "case ended");
        let result = CaseResult::finish(sc, &failures, na, started, &d.log);
        // The next case goes on with this runner's state (sessions configured by a case
        // of their own are not carried over).
        if sc.kit_session.is_null() {
            self.session = Some(d.machine);
        }
        result
    }
}

/// One case's inputs in hub mode.
struct HubInputs<'a> {
    mode: &'a HubMode,
    config: &'a Value,
}

impl steps::Inputs<RunnerSession> for HubInputs<'_> {
    async fn input(&mut self, d: &mut Driver<RunnerSession>, input: &Value) -> Result<(), String> {
        let config = self.config;
        let (key, v) = input
            .as_object()
            .and_then(|o| o.iter().next())
            .ok_or("an input must have one key")?;
        if let Some(r) = steps::common(d, key, v).await {
            return r;
        }
        match key.as_str() {
            "connect" => {
                let mode = self.mode;
                if v["fresh_session"] == Value::Bool(true) {
                    d.drop_conn(true, "a fresh session replaces the old one");
                    d.machine = fresh(config)?;
                    d.note("note", "a fresh runner session (no state)", None);
                }
                let token = match v["token"].as_str().unwrap_or("right") {
                    "right" => mode.token.clone(),
                    "none" => String::new(),
                    // Unrelated to the real token (a hub that logs refused tokens must
                    // not learn a prefix of it), and of the same length.
                    _ => loop {
                        let t: String = std::iter::repeat_with(fastrand::alphanumeric)
                            .take(mode.token.chars().count().max(1))
                            .collect();
                        if t != mode.token {
                            break t;
                        }
                    },
                };
                let mut req = mode
                    .url
                    .as_str()
                    .into_client_request()
                    .map_err(|e| format!("--url: {e}"))?;
                if let Some(h) = authorization_value(&token) {
                    let mut hv = HeaderValue::from_str(&h).map_err(|e| e.to_string())?;
                    hv.set_sensitive(true);
                    req.headers_mut().insert("authorization", hv);
                }
                match tokio_tungstenite::connect_async(req).await {
                    Ok((ws, _)) => {
                        let conn = socket::spawn(ws);
                        if v["hello"] == Value::Bool(false) {
                            // The kit's session is not told: the frames go raw.
                            d.drop_conn(true, "replaced");
                            d.conn = Some(conn);
                            d.note(
                                "connected",
                                "a WebSocket connection is up (no hello: raw frames)",
                                None,
                            );
                        } else {
                            let from = d.log.len();
                            d.attach(conn);
                            wait_for_barrier(d, from).await;
                        }
                        Ok(())
                    }
                    Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                        d.note("refused", &format!("HTTP {}", resp.status().as_u16()), None);
                        Ok(())
                    }
                    Err(e) => {
                        d.note("refused", &format!("connect failed: {e}"), None);
                        Ok(())
                    }
                }
            }
            "hello" => {
                // A raw hello (e.g. another protocol_version) on a connection opened
                // with `hello: false`.
                let mut h = json!({"schema_version": 1, "type": "hello", "protocol_version": 1,
                                   "project_id": "conformance-kit", "runner_version": env!("CARGO_PKG_VERSION")});
                if let Some(o) = v.as_object() {
                    for (k, x) in o {
                        h[k] = x.clone();
                    }
                }
                d.send_text(h.to_string());
                Ok(())
            }
            "progress" => d.send_message(progress(v)?),
            "send_reversed" => {
                // Progress frames stamped in order, transmitted in reverse.
                let mut ms = Vec::new();
                for item in v.as_array().ok_or("send_reversed: a list")? {
                    let p = item.get("progress").ok_or("send_reversed: {progress}")?;
                    ms.push(progress(p)?);
                }
                d.send_reversed(ms)
            }
            "ack" => {
                // An explicit acknowledgement of every command received so far (the
                // session's resume map: per task the last seq received contiguously).
                let ack: Vec<Value> = d
                    .machine
                    .state()
                    .resume_map()
                    .iter()
                    .map(|(t, s)| json!({"task_id": t, "seq": s}))
                    .collect();
                let p =
                    json!({"schema_version": 1, "type": "ping", "nonce": "kit-ack", "ack": ack});
                d.send_text(p.to_string());
                Ok(())
            }
            other => Err(format!("unknown input {other:?} in hub mode")),
        }
    }
}

/// A `task.progress` (a `state` event, attempt 1) with the members of `v` over it.
fn progress(v: &Value) -> Result<stapel_runner_protocol::wire::Message, String> {
    let mut m = json!({"schema_version": 1, "type": "task.progress", "kind": "state",
                       "attempt": 1, "payload": {"state": "conformance"}});
    if let Some(o) = v.as_object() {
        for (k, x) in o {
            m[k] = x.clone();
        }
    }
    steps::message(m)
}

/// After a connect: when the kit's session sent the post-hello barrier ping (a session
/// whose state the hub may be ahead of), wait up to 10 s for its pong, so that what a
/// case sends next goes out at once, in the order the case sends it (the session holds
/// sequenced frames until then). A hub that never answers is judged by the case's own
/// expectations.
async fn wait_for_barrier(d: &mut Driver<RunnerSession>, from: usize) {
    let nonce = d.log[from..]
        .iter()
        .filter(|e| e.kind == "out")
        .filter_map(|e| serde_json::from_str::<Value>(&e.text).ok())
        .find(|j| j["type"] == "ping" && j["barrier"] == true)
        .map(|j| j["nonce"].clone());
    let Some(nonce) = nonce else { return };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    d.pump(deadline, |d| {
        d.log[from..].iter().any(|e| {
            e.kind == "in"
                && e.json
                    .as_ref()
                    .is_some_and(|j| j["type"] == "pong" && j["nonce"] == nonce)
        })
    })
    .await;
}
