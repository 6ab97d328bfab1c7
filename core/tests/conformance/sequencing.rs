//! Area `sequencing`: [`ConnectionState`] through its public API.

use indexmap::IndexMap;
use serde_json::{json, Value};
use stapel_runner_protocol::sequencing::{
    ConnectionState, InboxTracker, OutboxLog, Position, Replay, Resync, Role, SequencingConfig,
    DEFAULT_INBOUND_WINDOW, DEFAULT_MAX_OUTBOX_BYTES, DEFAULT_MAX_OUTBOX_FRAMES,
};
use stapel_runner_protocol::wire::{self, Message};

use crate::common::{bytes_of, same, steps};

fn message(i: usize, v: &Value) -> Result<Message, String> {
    wire::from_value(v.into(), false).map_err(|e| format!("step {i}: bad message {v}: {e}"))
}

fn position(i: usize, v: &Value) -> Result<Position, String> {
    Position::from_value(&v.into()).map_err(|e| format!("step {i}: {e}"))
}

pub fn resync_json(r: &Resync) -> Value {
    Value::from(r.to_value())
}

fn replay_json(r: &Replay) -> Value {
    Value::from(r.to_value())
}

fn check_error(i: usize, code: &str, expect: &Value) -> Result<(), String> {
    match expect.get("error") {
        Some(want) => same(i, "error", &json!(code), want),
        None => Err(format!("step {i}: unexpected error {code}")),
    }
}

fn no_error(i: usize, expect: &Value) -> Result<(), String> {
    match expect.get("error") {
        Some(want) => Err(format!("step {i}: expected error {want}, got success")),
        None => Ok(()),
    }
}

fn config(cfg: &Value) -> Result<(Role, SequencingConfig), String> {
    let role = cfg
        .get("role")
        .and_then(Value::as_str)
        .and_then(Role::from_name)
        .ok_or("config.role must be \"hub\" or \"runner\"")?;
    // `role` is the runner's own key; the rest is the core's config.
    let mut obj = cfg.as_object().cloned().unwrap_or_default();
    obj.remove("role");
    Ok((
        role,
        SequencingConfig::from_object(&obj).map_err(|e| e.to_string())?,
    ))
}

pub fn run(vector: &Value) -> Result<(), String> {
    let (role, cfg) = config(&vector["config"])?;
    let mut state = ConnectionState::with_config(role, cfg);
    for (i, input, expect) in steps(vector) {
        if let Some(v) = input.get("emit") {
            let msg = message(i, v)?;
            match state.emit(msg.clone()) {
                Ok(stamped) => {
                    no_error(i, expect)?;
                    if let Some(f) = expect.get("frame") {
                        same(i, "frame", &json!(wire::encode(&stamped)), f)?;
                    }
                }
                Err(e) => {
                    check_error(i, e.code(), expect)?;
                    if *e.message != msg {
                        return Err(format!(
                            "step {i}: emit error did not hand the message back unchanged"
                        ));
                    }
                }
            }
        } else if let Some(v) = input.get("receive").or_else(|| input.get("classify")) {
            let msg = message(i, v)?;
            let r = if input.get("receive").is_some() {
                state.receive(&msg)
            } else {
                state.classify(&msg)
            };
            match r {
                Ok(a) => {
                    no_error(i, expect)?;
                    if let Some(want) = expect.get("arrival") {
                        same(i, "arrival", &json!(a.as_str()), want)?;
                    }
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else if input.get("resume_map").is_some() {
            let got = serde_json::to_value(state.resume_map()).map_err(|e| e.to_string())?;
            same(i, "resume_map", &got, &expect["resume_map"])?;
        } else if let Some(v) = input.get("replay_for") {
            let resume: IndexMap<String, u64> = serde_json::from_value(v.clone())
                .map_err(|e| format!("step {i}: replay_for must map task ids to seqs: {e}"))?;
            let r = state.replay_for(&resume);
            same(i, "replay", &replay_json(&r), &expect["replay"])?;
        } else if let Some(v) = input.get("replay_positions") {
            let list =
                Position::list_from_value(&v.into()).map_err(|e| format!("step {i}: {e}"))?;
            let r = state.replay_positions(&list);
            same(i, "replay", &replay_json(&r), &expect["replay"])?;
        } else if let Some(v) = input.get("ack") {
            let p = position(i, v)?;
            match state.ack(&p.task_id, p.attempt, p.seq) {
                Ok(n) => {
                    no_error(i, expect)?;
                    same(i, "dropped", &json!(n), &expect["dropped"])?;
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else if let Some(v) = input.get("last_received") {
            let t = v.as_str().ok_or(format!("step {i}: needs a task id"))?;
            let got = state
                .tasks()
                .find(|(task, _)| *task == t)
                .map_or(0, |(_, c)| c.last_received());
            same(i, "value", &json!(got), &expect["value"])?;
        } else if let Some(v) = input.get("skip_to") {
            let p = position(i, v)?;
            match state.skip_to(&p.task_id, p.attempt, p.seq) {
                Ok(g) => {
                    no_error(i, expect)?;
                    let got = g.map_or(Value::Null, |(a, b)| json!([a, b]));
                    same(i, "gap", &got, expect.get("gap").unwrap_or(&Value::Null))?;
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else if input.get("ack_positions").is_some() {
            let got = Value::from(Position::list_to_value(&state.ack_positions()));
            same(i, "positions", &got, &expect["positions"])?;
        } else if input.get("replay_from").is_some() {
            let got = Value::from(Position::list_to_value(&state.replay_from()));
            same(i, "positions", &got, &expect["positions"])?;
        } else if input.get("unacked").is_some() {
            let got: Vec<String> = state.unacked().map(|(_, _, f)| f.frame.clone()).collect();
            same(i, "frames", &json!(got), &expect["frames"])?;
        } else if let Some(v) = input.get("forget_task") {
            let t = v
                .as_str()
                .ok_or(format!("step {i}: forget_task needs a string"))?;
            same(i, "known", &json!(state.forget_task(t)), &expect["known"])?;
        } else if input.get("mark_unconfirmed").is_some() {
            state.mark_unconfirmed();
        } else if input.get("confirm_all").is_some() {
            state.confirm_all();
        } else if let Some(v) = input.get("trim_through") {
            let p = position(i, v)?;
            let n = state.trim_through(&p.task_id, p.attempt, p.seq);
            same(i, "dropped", &json!(n), &expect["dropped"])?;
        } else if let Some(v) = input.get("is_fully_acknowledged") {
            let t = v.as_str().ok_or(format!("step {i}: needs a task id"))?;
            same(
                i,
                "value",
                &json!(state.is_fully_acknowledged(t)),
                &expect["value"],
            )?;
        } else if let Some(v) = input.get("is_forgotten") {
            let t = v.as_str().ok_or(format!("step {i}: needs a task id"))?;
            same(i, "value", &json!(state.is_forgotten(t)), &expect["value"])?;
        } else if let Some(v) = input.get("channel") {
            let t = v
                .as_str()
                .ok_or(format!("step {i}: channel needs a task id"))?;
            match state.channel(t) {
                Ok(c) => {
                    no_error(i, expect)?;
                    let got = json!({
                        "outbound": c.outbound().count(),
                        "inbound": c.inbound().count(),
                        "last_received": c.last_received(),
                    });
                    same(i, "channel", &got, &expect["channel"])?;
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else if let Some(v) = input.get("outbox_since") {
            let p = position(i, v)?;
            let log = state
                .outbound_log(&p.task_id, p.attempt)
                .ok_or(format!("step {i}: no outbound stream {v}"))?;
            match log.since(p.seq) {
                Ok(msgs) => {
                    no_error(i, expect)?;
                    let got: Vec<String> = msgs.iter().map(wire::encode).collect();
                    same(i, "frames", &json!(got), &expect["frames"])?;
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else if let Some(v) = input.get("outbox_log") {
            let got = standalone_outbox(i, v)?;
            same(i, "results", &got, &expect["results"])?;
        } else if let Some(v) = input.get("inbox_tracker") {
            let (arrivals, last_seq) = standalone_inbox(v);
            same(i, "arrivals", &arrivals, &expect["arrivals"])?;
            same(i, "last_seq", &json!(last_seq), &expect["last_seq"])?;
        } else if input.get("snapshot_roundtrip").is_some() {
            let bytes = state.snapshot();
            let restored = ConnectionState::restore(&bytes)
                .map_err(|e| format!("step {i}: restore failed: {}", e.code()))?;
            if restored != state || restored.snapshot() != bytes {
                return Err(format!("step {i}: snapshot round trip changed the state"));
            }
            state = restored;
        } else if let Some(bytes) = bytes_of(input, "restore")? {
            match ConnectionState::restore(&bytes) {
                Ok(s) => {
                    no_error(i, expect)?;
                    state = s;
                }
                Err(e) => check_error(i, e.code(), expect)?,
            }
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        }
        if let Some(o) = expect.get("outbox") {
            let got = json!({"frames": state.outbox_frames(), "bytes": state.outbox_bytes()});
            same(i, "outbox", &got, o)?;
        }
        if let Some(o) = expect.get("streams") {
            let (out, inb) = state.stream_counts();
            same(i, "streams", &json!({"outbound": out, "inbound": inb}), o)?;
        }
        if let Some(c) = expect.get("confirmed") {
            same(i, "confirmed", &json!(state.is_confirmed()), c)?;
        }
    }
    Ok(())
}

/// A number of a standalone input (`default` when absent).
fn num(v: &Value, key: &str, default: u64) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(default)
}

/// `{"outbox_log": {"max_frames"?, "max_bytes"?, "ops": [...]}}`: one standalone
/// [`OutboxLog`], the result of every op in order.
fn standalone_outbox(i: usize, v: &Value) -> Result<Value, String> {
    let max_frames = usize::try_from(num(v, "max_frames", DEFAULT_MAX_OUTBOX_FRAMES as u64))
        .map_err(|e| e.to_string())?;
    let max_bytes = usize::try_from(num(v, "max_bytes", DEFAULT_MAX_OUTBOX_BYTES as u64))
        .map_err(|e| e.to_string())?;
    let mut log = OutboxLog::new();
    let mut results = Vec::new();
    for op in v["ops"]
        .as_array()
        .ok_or(format!("step {i}: ops must be a list"))?
    {
        let result = if let Some(m) = op.get("emit") {
            let msg = message(i, m)?;
            match log.emit(msg.clone(), max_frames, max_bytes) {
                Ok(stamped) => json!({"frame": wire::encode(&stamped)}),
                Err(e) => {
                    if *e.message != msg {
                        return Err(format!("step {i}: emit error changed the message"));
                    }
                    json!({"error": e.code()})
                }
            }
        } else if let Some(seq) = op.get("ack").and_then(Value::as_u64) {
            json!({"dropped": log.ack(seq)})
        } else if let Some(seq) = op.get("since").and_then(Value::as_u64) {
            match log.since(seq) {
                Ok(msgs) => json!({"frames": msgs.iter().map(wire::encode).collect::<Vec<_>>()}),
                Err(e) => json!({"error": e.code()}),
            }
        } else if op.get("last_seq").is_some() {
            json!({"value": log.last_seq()})
        } else {
            return Err(format!("step {i}: unknown outbox_log op {op}"));
        };
        results.push(result);
    }
    Ok(Value::Array(results))
}

/// `{"inbox_tracker": {"window"?, "receive": [seq…]}}`: one standalone [`InboxTracker`];
/// every arrival (or `{"error": code}`) and the final watermark.
fn standalone_inbox(v: &Value) -> (Value, u64) {
    let window = num(v, "window", DEFAULT_INBOUND_WINDOW);
    let mut tracker = InboxTracker::new();
    let arrivals = v["receive"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| match tracker.receive(s.as_u64().unwrap_or(0), window) {
            Ok(a) => json!(a.as_str()),
            Err(e) => json!({"error": e.code()}),
        })
        .collect();
    (Value::Array(arrivals), tracker.watermark())
}
