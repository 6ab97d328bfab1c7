//! Area `host`: the connection host policy as sans-IO machines: `SocketHost` (one
//! WebSocket connection: attach, deliver, close handshake, abort) and `HubHost` (bearer
//! token check before upgrade, one session per runner, eviction of idle runners), plus
//! the bearer helpers. Inputs and outputs cross as JSON text; outputs are tagged with
//! the core's `kind()`.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::config::ConfigError;
use stapel_runner_protocol::host::{
    self, auth, HostConfig, HubHost, HubInput, HubOutput, InboundFrame, RunnerActivity, SocketHost,
    SocketInput, SocketOutput,
};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::num;

fn host_error(e: &host::HostError) -> napi::Error {
    fail("host", e.code(), e, Value::Null)
}

fn config_of(config: Option<&str>) -> napi::Result<HostConfig> {
    let v = match config {
        Some(t) => parse_arg("config", t)?,
        None => json!({}),
    };
    HostConfig::from_value(&v).map_err(|e: ConfigError| config_error(&e))
}

fn socket_output(o: &SocketOutput) -> Value {
    let kind = o.kind();
    match o {
        SocketOutput::Deliver(text) => json!({"kind": kind, "text": text}),
        SocketOutput::PeerError { code, detail } => {
            json!({"kind": kind, "code": code, "detail": detail})
        }
        SocketOutput::Send(frame) => json!({"kind": kind, "frame": frame}),
        SocketOutput::Close {
            code,
            reason,
            deadline_ms,
        } => json!({"kind": kind, "code": code, "reason": reason, "deadline_ms": deadline_ms}),
        _ => json!({"kind": kind}),
    }
}

fn hub_output(o: &HubOutput) -> Value {
    let kind = o.kind();
    match o {
        HubOutput::Authenticate { conn, token } => {
            json!({"kind": kind, "conn": conn, "token": token.as_str()})
        }
        HubOutput::Accept { conn, runner_id } => {
            json!({"kind": kind, "conn": conn, "runner_id": runner_id})
        }
        HubOutput::Reject {
            conn,
            status,
            body,
            refusal,
        } => json!({"kind": kind, "conn": conn, "status": status, "body": body,
                    "refusal": refusal.code()}),
        HubOutput::Refuse {
            conn,
            code,
            reason,
            refusal,
        } => json!({"kind": kind, "conn": conn, "code": code, "reason": reason,
                    "refusal": refusal.code()}),
        HubOutput::Attach {
            conn,
            runner_id,
            announce,
        } => json!({"kind": kind, "conn": conn, "runner_id": runner_id, "announce": announce}),
        HubOutput::Evict { runner_id } => json!({"kind": kind, "runner_id": runner_id}),
        _ => json!({"kind": kind}),
    }
}

fn headers(v: &Value) -> napi::Result<Vec<(String, String)>> {
    let Some(list) = v.get("headers") else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or_else(|| bad_argument("headers", "not a list"))?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => Err(bad_argument("headers", format!("bad header pair {pair}"))),
        })
        .collect()
}

fn conn(v: &Value) -> napi::Result<u64> {
    v.get("conn")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad_argument("conn", "missing"))
}

fn activity(v: &Value) -> napi::Result<RunnerActivity> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Ok(RunnerActivity {
        runner_id: v
            .get("runner_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_argument("runner_id", "missing"))?
            .to_owned(),
        sockets: n("sockets"),
        kept_frames: n("kept_frames"),
        queued_events: n("queued_events"),
        waiting_readers: n("waiting_readers"),
        awaiting_accept: v
            .get("awaiting_accept")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// The host configuration as the core reads it (JSON text in and out).
#[napi]
pub fn host_config(config: Option<String>) -> napi::Result<String> {
    guard(|| Ok(config_of(config.as_deref())?.to_value().to_string()))
}

/// The `Authorization` header value for a bearer token, or `null` for a token the
/// header cannot carry.
#[napi]
pub fn bearer_authorization(token: String) -> napi::Result<Option<String>> {
    guard(|| Ok(auth::authorization_value(&token)))
}

/// The token of an `Authorization` header value, or `null`.
#[napi]
pub fn bearer_token(value: String) -> napi::Result<Option<String>> {
    guard(|| Ok(auth::bearer_token(&value).ok().map(str::to_owned)))
}

/// The refusal code of an upgrade request's headers (JSON text of `[name, value]`
/// pairs), or `null` when they present a bearer token.
#[napi]
pub fn bearer_refusal(headers_json: String) -> napi::Result<Option<String>> {
    guard(|| {
        let v = json!({"headers": parse_arg("headers", &headers_json)?});
        let h = headers(&v)?;
        Ok(auth::bearer_from_headers(&h)
            .err()
            .map(|r| r.code().to_owned()))
    })
}

/// The core's idle rule for one runner's activity (JSON text).
#[napi]
pub fn runner_is_idle(activity_json: String) -> napi::Result<bool> {
    guard(|| Ok(activity(&parse_arg("activity", &activity_json)?)?.is_idle()))
}

/// The host constants an I/O shell needs: `{replaced_reason, close_normal,
/// close_timeout_ms, max_idle_runners, max_queued_events, max_backlog_bytes,
/// max_pending_connections, close_policy_violation, status_unauthorized, peer_timeout}`
/// as JSON text.
#[napi]
pub fn host_constants() -> napi::Result<String> {
    guard(|| {
        Ok(json!({
            "replaced_reason": host::REPLACED_REASON,
            "close_normal": host::CLOSE_NORMAL,
            "close_timeout_ms": host::DEFAULT_CLOSE_TIMEOUT_MS,
            "max_idle_runners": host::DEFAULT_MAX_IDLE_RUNNERS,
            "max_queued_events": host::DEFAULT_MAX_QUEUED_EVENTS,
            "max_backlog_bytes": host::DEFAULT_MAX_BACKLOG_BYTES,
            "max_pending_connections": host::DEFAULT_MAX_PENDING_CONNECTIONS,
            "close_policy_violation": host::CLOSE_POLICY_VIOLATION,
            "status_unauthorized": host::STATUS_UNAUTHORIZED,
            "peer_timeout": host::PEER_TIMEOUT,
        })
        .to_string())
    })
}

/// One WebSocket connection's host policy.
#[napi]
pub struct NativeSocketHost {
    host: SocketHost,
}

#[napi]
impl NativeSocketHost {
    /// `config`: JSON text of the host configuration.
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                host: SocketHost::new(&config_of(config.as_deref())?),
            })
        })
    }

    /// Feed one input: `kind` is `opened`, `text` (with `text`), `binary` (with
    /// `bytes`), `transmit` (with `text`), `session_close` (with `text`: the reason),
    /// `close` (with `code` and `text`: the reason), `failed`, `socket_closed` or
    /// `timeout`.
    #[napi]
    pub fn handle(
        &mut self,
        now_ms: f64,
        kind: String,
        text: Option<String>,
        bytes: Option<Uint8Array>,
        code: Option<u32>,
    ) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let text_arg = || {
                text.clone()
                    .ok_or_else(|| bad_argument(&kind, "missing text"))
            };
            let input = match kind.as_str() {
                "opened" => SocketInput::Opened,
                "text" => SocketInput::Frame(InboundFrame::Text(text_arg()?)),
                "binary" => SocketInput::Frame(InboundFrame::Binary(
                    bytes
                        .as_ref()
                        .map(|b| b.to_vec())
                        .ok_or_else(|| bad_argument("binary", "missing bytes"))?,
                )),
                "transmit" => SocketInput::Transmit(text_arg()?),
                "session_close" => SocketInput::SessionClose(text_arg()?),
                "close" => SocketInput::Close {
                    code: u16::try_from(code.unwrap_or(u32::from(host::CLOSE_NORMAL)))
                        .map_err(|e| bad_argument("code", e))?,
                    reason: text.clone().unwrap_or_default(),
                },
                "failed" => SocketInput::Failed,
                "socket_closed" => SocketInput::SocketClosed,
                "timeout" => SocketInput::Timeout,
                other => return Err(bad_argument("input", format!("{other:?}"))),
            };
            self.host
                .handle_input(now, input)
                .map_err(|e| host_error(&e))
        })
    }

    /// The next output as JSON text, or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| {
            Ok(self
                .host
                .poll_output()
                .map(|o| socket_output(&o).to_string()))
        })
    }

    /// The absolute deadline for the next `timeout` input, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.host.poll_timeout().map(num)))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.host.poll_output() {
                out.push(socket_output(&o));
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The connection state's name.
    #[napi]
    pub fn state(&self) -> napi::Result<String> {
        guard(|| Ok(self.host.state().as_str().to_owned()))
    }

    /// Whether the socket is open and the session attached.
    #[napi]
    pub fn is_open(&self) -> napi::Result<bool> {
        guard(|| Ok(self.host.is_open()))
    }
}

/// The hub's connection policy: token check before upgrade, one session per runner.
#[napi]
pub struct NativeHubHost {
    host: HubHost,
}

#[napi]
impl NativeHubHost {
    /// `config`: JSON text of the host configuration (with its token table).
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                host: HubHost::new(&config_of(config.as_deref())?),
            })
        })
    }

    /// Feed one input: `kind` is `request`, `upgraded` (`{conn, headers}`),
    /// `authenticated` (`{conn, runner_id}`), `runner_added` (`{runner_id, activity}`)
    /// or `timeout`; `fields` its JSON text.
    #[napi]
    pub fn handle(
        &mut self,
        now_ms: f64,
        kind: String,
        fields: Option<String>,
    ) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let v = match fields {
                Some(t) => parse_arg("fields", &t)?,
                None => json!({}),
            };
            let input = match kind.as_str() {
                "request" => HubInput::Request {
                    conn: conn(&v)?,
                    headers: headers(&v)?,
                },
                "upgraded" => HubInput::Upgraded {
                    conn: conn(&v)?,
                    headers: headers(&v)?,
                },
                "authenticated" => HubInput::Authenticated {
                    conn: conn(&v)?,
                    runner_id: match v.get("runner_id") {
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(Value::Null) | None => None,
                        Some(other) => return Err(bad_argument("runner_id", other)),
                    },
                },
                "runner_added" => HubInput::RunnerAdded {
                    runner_id: v
                        .get("runner_id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad_argument("runner_id", "missing"))?
                        .to_owned(),
                    activity: v
                        .get("activity")
                        .and_then(Value::as_array)
                        .ok_or_else(|| bad_argument("activity", "missing"))?
                        .iter()
                        .map(activity)
                        .collect::<napi::Result<_>>()?,
                },
                "timeout" => HubInput::Timeout,
                other => return Err(bad_argument("input", format!("{other:?}"))),
            };
            self.host
                .handle_input(now, input)
                .map_err(|e| host_error(&e))
        })
    }

    /// The next output as JSON text, or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.host.poll_output().map(|o| hub_output(&o).to_string())))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.host.poll_output() {
                out.push(hub_output(&o));
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The absolute deadline for the next `timeout` input, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.host.poll_timeout().map(num)))
    }

    /// Whether the hub checks tokens against a configured table (else it asks the
    /// host's authenticator: `authenticate` outputs).
    #[napi]
    pub fn has_token_table(&self) -> napi::Result<bool> {
        guard(|| Ok(self.host.has_token_table()))
    }

    /// The runner ids with a session.
    #[napi]
    pub fn runners(&self) -> napi::Result<Vec<String>> {
        guard(|| Ok(self.host.runners().map(str::to_owned).collect()))
    }

    /// Connections waiting for authentication or acceptance.
    #[napi]
    pub fn pending_connections(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.host.pending_connections() as u64)))
    }

    /// The runner id a full `Authorization` header value maps to in the token table.
    #[napi]
    pub fn runner_id_for(&self, authorization: String) -> napi::Result<Option<String>> {
        guard(|| Ok(self.host.runner_id_for(&authorization).map(str::to_owned)))
    }
}
