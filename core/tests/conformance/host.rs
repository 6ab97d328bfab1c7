//! Area `host`: the connection host policy (`SocketHost`, `HubHost`) through the public
//! API. See conformance/README.md, "Area `host`".

use serde_json::{json, Map, Value};
use stapel_runner_protocol::host::auth::authorization_value;
use stapel_runner_protocol::host::{
    HostConfig, HubHost, HubInput, HubOutput, InboundFrame, RunnerActivity, SocketHost,
    SocketInput, SocketOutput,
};

use crate::common::{bytes_of, same, steps};

const INPUT_KEYS: &[&str] = &[
    "opened",
    "text",
    "binary",
    "binary_hex",
    "transmit",
    "session_close",
    "close",
    "failed",
    "socket_closed",
    "timeout",
    "request",
    "upgraded",
    "authenticated",
    "runner_added",
    "parse_config",
    "authorization_for",
];
const EXPECT_KEYS: &[&str] = &[
    "outputs",
    "error",
    "timeout",
    "state",
    "runners",
    "pending",
    "value",
    "config",
    "config_error",
];

enum Machine {
    Socket(SocketHost),
    Hub(HubHost),
}

fn socket_output(o: SocketOutput) -> Value {
    match o {
        SocketOutput::Attach => json!({"attach": true}),
        SocketOutput::Deliver(t) => json!({ "deliver": t }),
        SocketOutput::PeerError { code, .. } => json!({ "peer_error": code }),
        SocketOutput::Send(f) => json!({ "send": f }),
        SocketOutput::Detach => json!({"detach": true}),
        SocketOutput::Close {
            code,
            reason,
            deadline_ms,
        } => json!({"close": {"code": code, "reason": reason, "deadline": deadline_ms}}),
        SocketOutput::Abort => json!({"abort": true}),
        other => json!({ "unknown": format!("{other:?}") }),
    }
}

fn hub_output(o: HubOutput) -> Value {
    match o {
        HubOutput::Authenticate { conn, token } => {
            json!({"authenticate": {"conn": conn, "token": token.as_str()}})
        }
        HubOutput::Accept { conn, runner_id } => {
            json!({"accept": {"conn": conn, "runner_id": runner_id}})
        }
        HubOutput::Reject {
            conn,
            status,
            body,
            refusal,
        } => json!({"reject": {"conn": conn, "status": status, "body": body,
                               "refusal": refusal.code()}}),
        HubOutput::Refuse {
            conn,
            code,
            reason,
            refusal,
        } => json!({"refuse": {"conn": conn, "code": code, "reason": reason,
                               "refusal": refusal.code()}}),
        HubOutput::Attach {
            conn,
            runner_id,
            announce,
        } => json!({"attach": {"conn": conn, "runner_id": runner_id, "announce": announce}}),
        HubOutput::Evict { runner_id } => json!({ "evict": runner_id }),
        other => json!({ "unknown": format!("{other:?}") }),
    }
}

fn headers(v: &Value) -> Result<Vec<(String, String)>, String> {
    let Some(list) = v.get("headers") else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or("headers must be a list")?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => Err(format!("bad header pair {pair}")),
        })
        .collect()
}

fn conn(v: &Value) -> Result<u64, String> {
    v.get("conn")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("no conn in {v}"))
}

fn activity(v: &Value) -> Result<RunnerActivity, String> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Ok(RunnerActivity {
        runner_id: v
            .get("runner_id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no runner_id in {v}"))?
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

fn socket_input(input: &Value) -> Result<SocketInput, String> {
    if input.get("opened").is_some() {
        return Ok(SocketInput::Opened);
    }
    if let Some(t) = input.get("text").and_then(Value::as_str) {
        return Ok(SocketInput::Frame(InboundFrame::Text(t.to_owned())));
    }
    if let Some(b) = bytes_of(input, "binary")? {
        return Ok(SocketInput::Frame(InboundFrame::Binary(b)));
    }
    if let Some(t) = input.get("transmit").and_then(Value::as_str) {
        return Ok(SocketInput::Transmit(t.to_owned()));
    }
    if let Some(r) = input.get("session_close").and_then(Value::as_str) {
        return Ok(SocketInput::SessionClose(r.to_owned()));
    }
    if let Some(c) = input.get("close") {
        let code = c.get("code").and_then(Value::as_u64).unwrap_or(1000);
        return Ok(SocketInput::Close {
            code: u16::try_from(code).map_err(|e| e.to_string())?,
            reason: c
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        });
    }
    if input.get("failed").is_some() {
        return Ok(SocketInput::Failed);
    }
    if input.get("socket_closed").is_some() {
        return Ok(SocketInput::SocketClosed);
    }
    if input.get("timeout").is_some() {
        return Ok(SocketInput::Timeout);
    }
    Err(format!("unknown socket input {input}"))
}

fn hub_input(input: &Value) -> Result<HubInput, String> {
    if let Some(r) = input.get("request") {
        return Ok(HubInput::Request {
            conn: conn(r)?,
            headers: headers(r)?,
        });
    }
    if let Some(r) = input.get("upgraded") {
        return Ok(HubInput::Upgraded {
            conn: conn(r)?,
            headers: headers(r)?,
        });
    }
    if let Some(r) = input.get("authenticated") {
        return Ok(HubInput::Authenticated {
            conn: conn(r)?,
            runner_id: match r.get("runner_id") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => None,
                Some(other) => return Err(format!("bad runner_id {other}")),
            },
        });
    }
    if let Some(r) = input.get("runner_added") {
        return Ok(HubInput::RunnerAdded {
            runner_id: r
                .get("runner_id")
                .and_then(Value::as_str)
                .ok_or("runner_added needs runner_id")?
                .to_owned(),
            activity: r
                .get("activity")
                .and_then(Value::as_array)
                .ok_or("runner_added needs activity")?
                .iter()
                .map(activity)
                .collect::<Result<_, _>>()?,
        });
    }
    if input.get("timeout").is_some() {
        return Ok(HubInput::Timeout);
    }
    Err(format!("unknown hub input {input}"))
}

pub fn run(vector: &Value) -> Result<(), String> {
    let mut config_value = vector["config"].as_object().cloned().unwrap_or_default();
    let machine = config_value
        .remove("machine")
        .and_then(|m| m.as_str().map(str::to_owned))
        .ok_or("config.machine must be \"socket\" or \"hub\"")?;
    let config = HostConfig::from_value(&Value::Object(config_value))
        .map_err(|e| format!("config refused: {} (key {:?})", e.code(), e.key()))?;
    let mut m = match machine.as_str() {
        "socket" => Machine::Socket(SocketHost::new(&config)),
        "hub" => Machine::Hub(HubHost::new(&config)),
        other => return Err(format!("unknown machine {other:?}")),
    };
    let mut now = 0u64;
    for (i, input, expect) in steps(vector) {
        let obj: &Map<String, Value> = input.as_object().ok_or("input is not an object")?;
        for k in obj.keys() {
            if k != "now" && k != "poll" && !INPUT_KEYS.contains(&k.as_str()) {
                return Err(format!("step {i}: unknown input key {k:?}"));
            }
        }
        for k in expect.as_object().into_iter().flatten().map(|(k, _)| k) {
            if !EXPECT_KEYS.contains(&k.as_str()) {
                return Err(format!("step {i}: unknown expect key {k:?}"));
            }
        }
        if let Some(n) = input.get("now").and_then(Value::as_u64) {
            now = n;
        }
        let poll = input.get("poll").and_then(Value::as_bool).unwrap_or(true);
        if let Some(token) = input.get("authorization_for") {
            let token = token.as_str().ok_or("authorization_for takes a string")?;
            let want = expect
                .get("value")
                .ok_or("authorization_for needs expect.value")?;
            same(i, "value", &json!(authorization_value(token)), want)?;
            continue;
        }
        if expect.get("value").is_some() {
            return Err(format!(
                "step {i}: value is an authorization_for expectation"
            ));
        }
        if let Some(cfg) = input.get("parse_config") {
            // The parsed config as the core describes it, or the refusal's code and key;
            // nothing is fed to the machine.
            match HostConfig::from_value(cfg) {
                Ok(c) => {
                    let want = expect.get("config").ok_or(format!(
                        "step {i}: parse_config succeeded, expected {expect}"
                    ))?;
                    same(i, "config", &c.to_value(), want)?;
                }
                Err(e) => {
                    let want = expect.get("config_error").ok_or(format!(
                        "step {i}: unexpected config error {} (key {:?})",
                        e.code(),
                        e.key()
                    ))?;
                    same(
                        i,
                        "config_error",
                        &json!({"code": e.code(), "key": e.key()}),
                        want,
                    )?;
                }
            }
            if let Some(k) = expect
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k)
                .find(|k| *k != "config" && *k != "config_error")
            {
                return Err(format!("step {i}: {k} is not a parse_config expectation"));
            }
            continue;
        }
        for k in ["config", "config_error"] {
            if expect.get(k).is_some() {
                return Err(format!("step {i}: {k} is a parse_config expectation"));
            }
        }
        let (error, outputs) = match &mut m {
            Machine::Socket(s) => {
                let error = s.handle_input(now, socket_input(input)?).err();
                let mut out = Vec::new();
                if poll {
                    while let Some(o) = s.poll_output() {
                        out.push(socket_output(o));
                    }
                }
                (error.map(|e| e.code()), out)
            }
            Machine::Hub(h) => {
                let error = h.handle_input(now, hub_input(input)?).err();
                let mut out = Vec::new();
                if poll {
                    while let Some(o) = h.poll_output() {
                        out.push(hub_output(o));
                    }
                }
                (error.map(|e| e.code()), out)
            }
        };
        same(
            i,
            "error",
            &json!(error),
            &expect.get("error").cloned().unwrap_or(Value::Null),
        )?;
        if poll {
            let want = expect.get("outputs").cloned().unwrap_or_else(|| json!([]));
            same(i, "outputs", &Value::Array(outputs), &want)?;
        } else if expect.get("outputs").is_some() {
            return Err(format!(
                "step {i}: outputs expected on a step with poll: false"
            ));
        }
        if let Some(want) = expect.get("timeout") {
            let got = match &m {
                Machine::Socket(s) => s.poll_timeout(),
                Machine::Hub(h) => h.poll_timeout(),
            };
            same(i, "timeout", &json!(got), want)?;
        }
        if let Some(want) = expect.get("state") {
            let Machine::Socket(s) = &m else {
                return Err(format!("step {i}: state is a socket expectation"));
            };
            same(i, "state", &json!(s.state().as_str()), want)?;
        }
        if let Some(want) = expect.get("runners") {
            let Machine::Hub(h) = &m else {
                return Err(format!("step {i}: runners is a hub expectation"));
            };
            same(i, "runners", &json!(h.runners().collect::<Vec<_>>()), want)?;
        }
        if let Some(want) = expect.get("pending") {
            let Machine::Hub(h) = &m else {
                return Err(format!("step {i}: pending is a hub expectation"));
            };
            same(i, "pending", &json!(h.pending_connections()), want)?;
        }
    }
    Ok(())
}
