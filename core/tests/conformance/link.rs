//! Area `link`: [`RunnerLink`] and [`HubLink`] through their public API. See
//! conformance/README.md, "Area `link`".

use serde_json::{json, Value};
use stapel_runner_protocol::config::ConfigError;
use stapel_runner_protocol::host::InboundFrame;
use stapel_runner_protocol::link::{
    ConnectFailure, HubLink, LinkConfig, LinkError, LinkEvent, LinkInput, LinkOutput, RunnerLink,
};
use stapel_runner_protocol::session::{Event, HubSession, RunnerSession};
use stapel_runner_protocol::wire::{self, Hello, Message};

use crate::common::{bytes_of, check_config, same, steps};
use crate::sequencing::resync_json;

// Both links are large; one lives per vector.
#[allow(clippy::large_enum_variant)]
enum Side {
    Runner(RunnerLink),
    Hub(HubLink),
}

impl Side {
    fn handle(&mut self, now: u64, input: LinkInput) -> Result<(), LinkError> {
        match self {
            Side::Runner(l) => l.handle_input(now, input),
            Side::Hub(l) => l.handle_input(now, input),
        }
    }
    fn send(&mut self, now: u64, m: Message, resend: bool) -> Result<(), LinkError> {
        match (self, resend) {
            (Side::Runner(l), false) => l.send(now, m).map(drop),
            (Side::Runner(l), true) => l.resend(now, m).map(drop),
            (Side::Hub(l), _) => l.send(now, m).map(drop),
        }
    }
    fn poll(&mut self) -> Option<LinkOutput> {
        match self {
            Side::Runner(l) => l.poll_output(),
            Side::Hub(l) => l.poll_output(),
        }
    }
    fn timeout(&self) -> Option<u64> {
        match self {
            Side::Runner(l) => l.poll_timeout(),
            Side::Hub(l) => l.poll_timeout(),
        }
    }
}

/// The link configuration of a vector: its `config` without the vector's own keys
/// (`side`, `hello`, `seed`), read by the core's [`LinkConfig::from_value`].
fn link_config(cfg: &Value) -> Result<LinkConfig, ConfigError> {
    let mut object = cfg.as_object().cloned().unwrap_or_default();
    for k in ["side", "hello", "seed"] {
        object.remove(k);
    }
    LinkConfig::from_value(&Value::Object(object))
}

pub fn event_json(e: &LinkEvent) -> Value {
    match e {
        LinkEvent::Session(e) => match e {
            Event::Hello(h) => json!({"hello": wire::encode(&Message::Hello(h.clone()))}),
            Event::Received(m) => json!({"received": wire::encode(m)}),
            Event::InboundGap(r) => json!({"inbound_gap": resync_json(r)}),
            Event::OutboundResync(r) => json!({"outbound_resync": resync_json(r)}),
            Event::PeerError { code, .. } => json!({"peer_error": code}),
            other => json!({"unknown_event": format!("{other:?}")}),
        },
        LinkEvent::Connected => json!({"connected": true}),
        LinkEvent::Disconnected { reason } => json!({ "disconnected": reason }),
        LinkEvent::Reconnecting { delay_ms, failures } => {
            json!({"reconnecting": {"delay_ms": delay_ms, "failures": failures}})
        }
        LinkEvent::Error { code, status, .. } => match status {
            Some(s) => json!({"error": {"code": code, "status": s}}),
            None => json!({"error": {"code": code}}),
        },
        LinkEvent::Stalled {
            bound,
            kept_frames,
            kept_bytes,
            ..
        } => json!({"stalled": {"bound": bound, "kept_frames": kept_frames,
                                "kept_bytes": kept_bytes}}),
        LinkEvent::Unstalled => json!({"unstalled": true}),
        LinkEvent::Stopped => json!({"stopped": true}),
        other => json!({"unknown_event": format!("{other:?}")}),
    }
}

fn output_json(o: &LinkOutput) -> Value {
    match o {
        LinkOutput::Connect { socket } => json!({ "connect": socket }),
        LinkOutput::Send { socket, frame } => json!({"send": {"socket": socket, "frame": frame}}),
        LinkOutput::Pause { socket } => json!({ "pause": socket }),
        LinkOutput::Resume { socket } => json!({ "resume": socket }),
        LinkOutput::Close {
            socket,
            code,
            reason,
        } => json!({"close": {"socket": socket, "code": code, "reason": reason}}),
        LinkOutput::Abort { socket } => json!({ "abort": socket }),
        LinkOutput::Event(e) => json!({ "event": event_json(e) }),
        other => json!({ "unknown": format!("{other:?}") }),
    }
}

fn socket_of(v: &Value, i: usize) -> Result<u64, String> {
    v.get("socket")
        .and_then(Value::as_u64)
        .ok_or(format!("step {i}: no socket in {v}"))
}

fn close_args(v: &Value) -> (u16, String) {
    let code = v
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(1000);
    let reason = v
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    (code, reason)
}

fn input_of(input: &Value, i: usize) -> Result<Option<LinkInput>, String> {
    Ok(Some(if input.get("start").is_some() {
        LinkInput::Start
    } else if let Some(v) = input.get("stop") {
        let (code, reason) = close_args(v);
        LinkInput::Stop { code, reason }
    } else if let Some(s) = input.get("opened").and_then(Value::as_u64) {
        LinkInput::Opened { socket: s }
    } else if let Some(v) = input.get("connect_failed") {
        let failure = match v.get("failure").and_then(Value::as_str) {
            Some("refused") => ConnectFailure::Refused {
                status: v
                    .get("status")
                    .and_then(Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok())
                    .ok_or(format!("step {i}: refused needs a status"))?,
            },
            Some("no_token") => ConnectFailure::NoToken,
            Some("failed") => ConnectFailure::Failed,
            other => return Err(format!("step {i}: unknown failure {other:?}")),
        };
        LinkInput::ConnectFailed {
            socket: socket_of(v, i)?,
            failure,
            detail: v
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }
    } else if let Some(s) = input.get("attach").and_then(Value::as_u64) {
        LinkInput::Attach { socket: s }
    } else if let Some(v) = input.get("close") {
        let (code, reason) = close_args(v);
        LinkInput::Close { code, reason }
    } else if let Some(v) = input.get("frame") {
        let socket = socket_of(v, i)?;
        let frame = if let Some(t) = v.get("text").and_then(Value::as_str) {
            InboundFrame::Text(t.to_owned())
        } else if let Some(b) = bytes_of(v, "binary")? {
            InboundFrame::Binary(b)
        } else {
            return Err(format!("step {i}: frame needs text, binary or binary_hex"));
        };
        LinkInput::Frame { socket, frame }
    } else if let Some(s) = input.get("socket_closed").and_then(Value::as_u64) {
        LinkInput::SocketClosed { socket: s }
    } else if let Some(v) = input.get("failed") {
        LinkInput::Failed {
            socket: socket_of(v, i)?,
            detail: v
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }
    } else if let Some(n) = input.get("events_taken").and_then(Value::as_u64) {
        LinkInput::EventsTaken(n)
    } else if let Some(c) = input.get("confirm") {
        LinkInput::Confirm {
            task_id: c
                .get("task_id")
                .and_then(Value::as_str)
                .ok_or(format!("step {i}: confirm.task_id"))?
                .to_owned(),
            attempt: c.get("attempt").and_then(Value::as_u64),
            seq: c
                .get("seq")
                .and_then(Value::as_u64)
                .ok_or(format!("step {i}: confirm.seq"))?,
        }
    } else if input.get("tick").is_some() {
        LinkInput::Timeout
    } else {
        return Ok(None);
    }))
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let config = link_config(cfg);
    if check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let seed = cfg.get("seed").and_then(Value::as_u64).unwrap_or(0);
    let mut side = match cfg.get("side").and_then(Value::as_str) {
        Some("runner") => {
            let hello = match cfg.get("hello") {
                Some(h) => match wire::from_value(h.into(), false) {
                    Ok(Message::Hello(h)) => h,
                    _ => return Err("config.hello must be a hello message".into()),
                },
                None => Hello::new("p-1", "0.1.0"),
            };
            let session = RunnerSession::new(hello, config.session.clone());
            Side::Runner(RunnerLink::new(session, config.clone(), seed))
        }
        Some("hub") => Side::Hub(HubLink::new(
            HubSession::new(config.session.clone()),
            config.clone(),
        )),
        _ => return Err("config.side must be \"hub\" or \"runner\"".into()),
    };
    let mut now = 0u64;
    for (i, input, expect) in steps(vector) {
        if let Some(t) = input.get("now").and_then(Value::as_u64) {
            now = t;
        }
        let result = if input.get("configure").is_some() {
            Ok(())
        } else if let Some(m) = input.get("send").or_else(|| input.get("resend")) {
            let msg = wire::from_value(m.into(), false)
                .map_err(|e| format!("step {i}: bad message: {e}"))?;
            side.send(now, msg, input.get("resend").is_some())
        } else if let Some(t) = input.get("forget_task").and_then(Value::as_str) {
            match &mut side {
                Side::Runner(l) => l.state_mut().forget_task(t),
                Side::Hub(l) => l.state_mut().forget_task(t),
            };
            Ok(())
        } else {
            match input_of(input, i)? {
                Some(li) => side.handle(now, li),
                None => return Err(format!("step {i}: unknown input {input}")),
            }
        };
        match (&result, expect.get("error")) {
            (Ok(()), None) => {}
            (Err(e), Some(want)) => same(i, "error", &json!(e.code()), want)?,
            (Ok(()), Some(want)) => {
                return Err(format!("step {i}: expected error {want}, got success"))
            }
            (Err(e), None) => return Err(format!("step {i}: unexpected error {}", e.code())),
        }
        let mut outputs = Vec::new();
        while let Some(o) = side.poll() {
            outputs.push(output_json(&o));
            if outputs.len() > 10_000 {
                break;
            }
        }
        outputs.push(json!({ "timeout": side.timeout() }));
        if let Some(want) = expect.get("outputs") {
            same(i, "outputs", &Value::Array(outputs), want)?;
        }
        if let Some(want) = expect.get("config") {
            let got = match &side {
                Side::Runner(l) => l.config().to_value(),
                Side::Hub(l) => l.config().to_value(),
            };
            same(i, "config", &got, want)?;
        }
        if let Some(want) = expect.get("phase") {
            let Side::Runner(l) = &side else {
                return Err(format!("step {i}: phase is a runner expectation"));
            };
            same(i, "phase", &json!(l.phase().as_str()), want)?;
        }
        if let Some(want) = expect.get("queued_events") {
            let got = match &side {
                Side::Runner(l) => l.queued_events(),
                Side::Hub(l) => l.queued_events(),
            };
            same(i, "queued_events", &json!(got), want)?;
        }
        if let Some(want) = expect.get("outbox_frames") {
            let got = match &side {
                Side::Runner(l) => l.state().outbox_frames(),
                Side::Hub(l) => l.state().outbox_frames(),
            };
            same(i, "outbox_frames", &json!(got), want)?;
        }
        if let Some(want) = expect.get("stats") {
            let (s, connected) = match &side {
                Side::Runner(l) => (l.stats().clone(), l.is_connected()),
                Side::Hub(l) => (l.stats().clone(), l.is_connected()),
            };
            let got = json!({
                "dropped_events": s.dropped_events,
                "connections": s.connections,
                "backlog_overflows": s.backlog_overflows,
                "connected": connected,
            });
            same(i, "stats", &got, want)?;
        }
    }
    Ok(())
}
