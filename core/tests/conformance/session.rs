//! Area `session`: [`HubSession`] and [`RunnerSession`] through their public API.

use serde_json::{json, Map, Value};
use stapel_runner_protocol::framing::FramerConfig;
use stapel_runner_protocol::sequencing::{ConnectionState, SequencingConfig};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::{self, Hello, Message};

use crate::common::{bytes_of, same, steps};
use crate::sequencing::resync_json;

// One per vector; size does not matter.
#[allow(clippy::large_enum_variant)]
enum Side {
    Hub(HubSession),
    Runner(RunnerSession, Hello),
}

impl Side {
    fn handle(&mut self, now: u64, input: Input) -> Result<(), SessionError> {
        match self {
            Side::Hub(h) => h.handle_input(now, input),
            Side::Runner(r, _) => r.handle_input(now, input),
        }
    }
    fn poll(&mut self) -> Output {
        match self {
            Side::Hub(h) => h.poll_output(),
            Side::Runner(r, _) => r.poll_output(),
        }
    }
    fn state(&self) -> &ConnectionState {
        match self {
            Side::Hub(h) => h.state(),
            Side::Runner(r, _) => r.state(),
        }
    }
}

fn u64_of(cfg: &Value, key: &str) -> Result<Option<u64>, String> {
    match cfg.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or(format!("config.{key} must be a non-negative integer")),
    }
}

fn session_config(cfg: &Value) -> Result<SessionConfig, String> {
    let mut c = SessionConfig::default();
    if let Some(v) = cfg.get("validate").and_then(Value::as_bool) {
        c.validate = v;
    }
    if let Some(v) = u64_of(cfg, "ping_interval_ms")? {
        c.ping_interval_ms = v;
    }
    if let Some(v) = u64_of(cfg, "peer_timeout_ms")? {
        c.peer_timeout_ms = v;
    }
    if let Some(v) = u64_of(cfg, "ack_every_frames")? {
        c.ack_every_frames = v;
    }
    if let Some(v) = u64_of(cfg, "ack_delay_ms")? {
        c.ack_delay_ms = v;
    }
    if let Some(v) = u64_of(cfg, "max_ack_entries")? {
        c.max_ack_entries = v as usize;
    }
    if let Some(v) = u64_of(cfg, "max_held_frames")? {
        c.max_held_frames = v as usize;
    }
    if let Some(v) = u64_of(cfg, "max_held_bytes")? {
        c.max_held_bytes = v as usize;
    }
    if let Some(v) = u64_of(cfg, "max_control_frame_bytes")? {
        c.max_control_frame_bytes = v as usize;
    }
    if let Some(v) = u64_of(cfg, "min_protocol_version")? {
        c.min_protocol_version = v;
    }
    if let Some(v) = u64_of(cfg, "max_protocol_version")? {
        c.max_protocol_version = v;
    }
    if let Some(v) = u64_of(cfg, "max_line_bytes")? {
        c.framer = FramerConfig::with_max_line_bytes(v as usize);
    }
    if let Some(s) = cfg.get("sequencing") {
        let empty = Map::new();
        c.sequencing = SequencingConfig::from_object(s.as_object().unwrap_or(&empty))?;
    }
    Ok(c)
}

fn output_json(o: &Output) -> Value {
    match o {
        Output::Transmit(f) => json!({ "transmit": f }),
        Output::Close(r) => json!({ "close": r.code() }),
        Output::Timeout(t) => json!({ "timeout": t }),
        Output::Event(e) => json!({
            "event": match e {
                Event::Hello(h) => json!({"hello": wire::encode(&Message::Hello(h.clone()))}),
                Event::Received(m) => json!({"received": wire::encode(m)}),
                Event::InboundGap(r) => json!({"inbound_gap": resync_json(r)}),
                Event::OutboundResync(r) => json!({"outbound_resync": resync_json(r)}),
                Event::PeerError { code, .. } => json!({"peer_error": code}),
                other => json!({"unknown_event": format!("{other:?}")}),
            }
        }),
    }
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let config = session_config(cfg)?;
    let mut side = match cfg.get("side").and_then(Value::as_str) {
        Some("hub") => Side::Hub(HubSession::new(config.clone())),
        Some("runner") => {
            let hello = match cfg.get("hello") {
                Some(h) => match wire::from_value(h.into(), false) {
                    Ok(Message::Hello(h)) => h,
                    _ => return Err("config.hello must be a hello message".into()),
                },
                None => Hello::new("p-1", "0.1.0"),
            };
            Side::Runner(RunnerSession::new(hello.clone(), config.clone()), hello)
        }
        _ => return Err("config.side must be \"hub\" or \"runner\"".into()),
    };
    let mut now = 0u64;
    let mut saved: Option<Vec<u8>> = None;
    for (i, input, expect) in steps(vector) {
        if let Some(t) = input.get("now").and_then(Value::as_u64) {
            now = t;
        }
        let result = if input.get("connected").is_some() {
            side.handle(now, Input::Connected)
        } else if input.get("disconnected").is_some() {
            side.handle(now, Input::Disconnected)
        } else if input.get("tick").is_some() {
            side.handle(now, Input::Tick)
        } else if let Some(f) = input.get("frame").and_then(Value::as_str) {
            side.handle(now, Input::Frame(f.to_owned()))
        } else if let Some(b) = bytes_of(input, "bytes")? {
            side.handle(now, Input::Bytes(b))
        } else if let Some(m) = input.get("send") {
            let msg = wire::from_value(m.into(), false)
                .map_err(|e| format!("step {i}: bad message: {e}"))?;
            side.handle(now, Input::Send(msg))
        } else if input.get("save_snapshot").is_some() {
            saved = Some(side.state().snapshot());
            Ok(())
        } else if let Some(t) = input.get("forget_task").and_then(Value::as_str) {
            match &mut side {
                Side::Hub(h) => h.state_mut().forget_task(t),
                Side::Runner(r, _) => r.state_mut().forget_task(t),
            };
            Ok(())
        } else if let Some(how) = input.get("restart") {
            // Persist, drop and restore the sequencing state into a new session:
            // `true` the current snapshot, "saved" the one from `save_snapshot`,
            // "fresh" no state at all (a restart that lost it).
            let state = match how.as_str() {
                Some("fresh") => {
                    let role = match side {
                        Side::Hub(_) => stapel_runner_protocol::sequencing::Role::Hub,
                        Side::Runner(..) => stapel_runner_protocol::sequencing::Role::Runner,
                    };
                    ConnectionState::with_config(role, config.sequencing.clone())
                }
                Some("saved") => {
                    let bytes = saved
                        .as_ref()
                        .ok_or(format!("step {i}: restart \"saved\" without save_snapshot"))?;
                    ConnectionState::restore(bytes)
                        .map_err(|e| format!("step {i}: restore failed: {}", e.code()))?
                }
                _ => {
                    let bytes = side.state().snapshot();
                    ConnectionState::restore(&bytes)
                        .map_err(|e| format!("step {i}: restore failed: {}", e.code()))?
                }
            };
            side = match side {
                Side::Hub(_) => Side::Hub(HubSession::with_state(config.clone(), state)),
                Side::Runner(_, h) => Side::Runner(
                    RunnerSession::with_state(h.clone(), config.clone(), state),
                    h,
                ),
            };
            Ok(())
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        };
        match (&result, expect.get("error")) {
            (Ok(()), None) => {}
            (Err(e), Some(want)) => same(i, "error", &json!(e.code()), want)?,
            (Ok(()), Some(want)) => {
                return Err(format!("step {i}: expected error {want}, got success"))
            }
            (Err(e), None) => return Err(format!("step {i}: unexpected error {}", e.code())),
        }
        if input.get("poll") == Some(&Value::Bool(false)) {
            // Outputs stay queued for a later step.
            continue;
        }
        let mut outputs = Vec::new();
        loop {
            let o = side.poll();
            let done = matches!(o, Output::Timeout(_));
            outputs.push(output_json(&o));
            if done || outputs.len() > 10_000 {
                break;
            }
        }
        if let Some(want) = expect.get("outputs") {
            same(i, "outputs", &Value::Array(outputs), want)?;
        }
        if let Some(want) = expect.get("resume_map") {
            let got = serde_json::to_value(side.state().resume_map()).map_err(|e| e.to_string())?;
            same(i, "resume_map", &got, want)?;
        }
        if let Some(want) = expect.get("outbox_frames") {
            same(
                i,
                "outbox_frames",
                &json!(side.state().outbox_frames()),
                want,
            )?;
        }
    }
    Ok(())
}
