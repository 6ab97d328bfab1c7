//! Area `session`: [`HubSession`] and [`RunnerSession`] through their public API.

use serde_json::{json, Value};
use stapel_runner_protocol::config::ConfigError;
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig,
};
use stapel_runner_protocol::wire::{self, Hello, Message};

use stapel_runner_protocol::store::{close_for, RowTracker, RowWrite, RunnerRows};

use crate::common::{bytes_of, check_config, same, steps};
use crate::sequencing::resync_json;

/// One session machine of either side, driven through the shared [`Machine`] trait;
/// the runner's hello template is kept for restarts. A hub also keeps its concrete
/// session (area `store`: its rows and the writes of a [`RowTracker`]).
struct Side {
    machine: Either,
    hello: Option<Hello>,
}

enum Either {
    Hub(HubSession),
    Runner(RunnerSession),
}

impl Either {
    fn m(&mut self) -> &mut dyn Machine {
        match self {
            Either::Hub(h) => h,
            Either::Runner(r) => r,
        }
    }

    fn r(&self) -> &dyn Machine {
        match self {
            Either::Hub(h) => h,
            Either::Runner(r) => r,
        }
    }

    /// The hub session (`None` on the runner side).
    fn hub(&self) -> Option<&HubSession> {
        match self {
            Either::Hub(h) => Some(h),
            Either::Runner(_) => None,
        }
    }
}

impl Side {
    fn new(config: &SessionConfig, hello: Option<Hello>, state: Option<ConnectionState>) -> Self {
        let machine = match (&hello, state) {
            (None, None) => Either::Hub(HubSession::new(config.clone())),
            (None, Some(s)) => Either::Hub(HubSession::with_state(config.clone(), s)),
            (Some(h), None) => Either::Runner(RunnerSession::new(h.clone(), config.clone())),
            (Some(h), Some(s)) => {
                Either::Runner(RunnerSession::with_state(h.clone(), config.clone(), s))
            }
        };
        Self { machine, hello }
    }
}

/// The session configuration of a vector: its `config` without the runner's own keys
/// (`side`, `hello`), read by the core's [`SessionConfig::from_value`].
fn session_config(cfg: &Value) -> Result<SessionConfig, ConfigError> {
    let mut object = cfg.as_object().cloned().unwrap_or_default();
    object.remove("side");
    object.remove("hello");
    SessionConfig::from_value(&Value::Object(object))
}

fn output_json(o: &Output) -> Value {
    match o {
        Output::Transmit(f) => json!({ "transmit": f }),
        Output::Close(r) => json!({ "close": r.code() }),
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
    let config = session_config(cfg);
    if check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let mut side = match cfg.get("side").and_then(Value::as_str) {
        Some("hub") => Side::new(&config, None, None),
        Some("runner") => {
            let hello = match cfg.get("hello") {
                Some(h) => match wire::from_value(h.into(), false) {
                    Ok(Message::Hello(h)) => h,
                    _ => return Err("config.hello must be a hello message".into()),
                },
                None => Hello::new("p-1", "0.1.0"),
            };
            Side::new(&config, Some(hello), None)
        }
        _ => return Err("config.side must be \"hub\" or \"runner\"".into()),
    };
    let mut now = 0u64;
    let mut saved: Option<Vec<u8>> = None;
    // Area `store`: what the store holds of the hub (the rows it was built from, then
    // every committed batch of writes).
    let mut tracker = RowTracker::new(&RunnerRows::default());
    let mut writes: Option<Value> = None;
    for (i, input, expect) in steps(vector) {
        if let Some(t) = input.get("now").and_then(Value::as_u64) {
            now = t;
        }
        let result = if input.get("connected").is_some() {
            side.machine.m().handle_input(now, Input::Connected)
        } else if input.get("disconnected").is_some() {
            side.machine.m().handle_input(now, Input::Disconnected)
        } else if input.get("tick").is_some() {
            side.machine.m().handle_input(now, Input::Timeout)
        } else if let Some(f) = input.get("frame").and_then(Value::as_str) {
            side.machine
                .m()
                .handle_input(now, Input::Frame(f.to_owned()))
        } else if let Some(b) = bytes_of(input, "bytes")? {
            side.machine.m().handle_input(now, Input::Bytes(b))
        } else if let Some(m) = input.get("send") {
            let msg = wire::from_value(m.into(), false)
                .map_err(|e| format!("step {i}: bad message: {e}"))?;
            side.machine.m().handle_input(now, Input::Send(msg))
        } else if let Some(m) = input.get("resend") {
            let msg = wire::from_value(m.into(), false)
                .map_err(|e| format!("step {i}: bad message: {e}"))?;
            side.machine.m().resend(now, msg).map(drop)
        } else if let Some(c) = input.get("confirm") {
            let task_id = c
                .get("task_id")
                .and_then(Value::as_str)
                .ok_or(format!("step {i}: confirm.task_id"))?
                .to_owned();
            let attempt = c.get("attempt").and_then(Value::as_u64);
            let seq = c
                .get("seq")
                .and_then(Value::as_u64)
                .ok_or(format!("step {i}: confirm.seq"))?;
            side.machine.m().handle_input(
                now,
                Input::Confirm {
                    task_id,
                    attempt,
                    seq,
                },
            )
        } else if input.get("rows").is_some() {
            Ok(())
        } else if let Some(how) = input.get("writes") {
            // The tracker's writes for the session as it is; then committed, or
            // rolled back ("failed": the next `writes` lists them again).
            let hub = side
                .machine
                .hub()
                .ok_or(format!("step {i}: writes on a runner"))?;
            let w = tracker.writes(hub);
            writes = Some(Value::Array(w.iter().map(RowWrite::to_json).collect()));
            if how.as_str() == Some("failed") {
                tracker.failed();
            } else {
                tracker.committed();
            }
            Ok(())
        } else if input.get("close_for").is_some() {
            // Checked with `expect.close` below.
            Ok(())
        } else if let Some(r) = input.get("from_rows") {
            // A takeover: a new hub session over these rows (or, `true`, over the rows
            // of the current one); the store holds them.
            let rows = if r == &Value::Bool(true) {
                Ok(side
                    .machine
                    .hub()
                    .ok_or(format!("step {i}: from_rows on a runner"))?
                    .rows())
            } else {
                RunnerRows::from_json(r)
            };
            match rows
                .and_then(|rows| HubSession::from_rows(config.clone(), &rows).map(|h| (h, rows)))
            {
                Ok((h, rows)) => {
                    tracker = RowTracker::new(&rows);
                    side.machine = Either::Hub(h);
                    Ok(())
                }
                Err(e) => {
                    let want = expect.get("error");
                    same(i, "error", &json!(e.code()), want.unwrap_or(&Value::Null))?;
                    continue;
                }
            }
        } else if input.get("save_snapshot").is_some() {
            saved = Some(side.machine.r().state().snapshot());
            Ok(())
        } else if let Some(t) = input.get("forget_task").and_then(Value::as_str) {
            side.machine.m().state_mut().forget_task(t);
            Ok(())
        } else if let Some(how) = input.get("restart") {
            // Persist, drop and restore the sequencing state into a new session:
            // `true` the current snapshot, "saved" the one from `save_snapshot`,
            // "fresh" no state at all (a restart that lost it).
            let state = match how.as_str() {
                Some("fresh") => {
                    let role = side.machine.r().state().role();
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
                    let bytes = side.machine.r().state().snapshot();
                    ConnectionState::restore(&bytes)
                        .map_err(|e| format!("step {i}: restore failed: {}", e.code()))?
                }
            };
            side = Side::new(&config, side.hello, Some(state));
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
            // Outputs stay queued for a later step: nothing to compare them with here,
            // but every other expectation of the step is still checked.
            if expect.get("outputs").is_some() {
                return Err(format!(
                    "step {i}: outputs expected on a step with poll: false"
                ));
            }
        } else {
            // Every output until `None`, then the timer as the last entry
            // (`{"timeout": poll_timeout()}`).
            let mut outputs = Vec::new();
            while let Some(o) = side.machine.m().poll_output() {
                outputs.push(output_json(&o));
                if outputs.len() > 10_000 {
                    break;
                }
            }
            outputs.push(json!({ "timeout": side.machine.m().poll_timeout() }));
            if let Some(want) = expect.get("outputs") {
                same(i, "outputs", &Value::Array(outputs), want)?;
            }
        }
        if let Some(want) = expect.get("resume_map") {
            let got = serde_json::to_value(side.machine.r().state().resume_map())
                .map_err(|e| e.to_string())?;
            same(i, "resume_map", &got, want)?;
        }
        if let Some(want) = expect.get("rows") {
            let hub = side
                .machine
                .hub()
                .ok_or(format!("step {i}: rows on a runner"))?;
            same(i, "rows", &hub.rows().to_json(), want)?;
        }
        if let Some(want) = expect.get("writes") {
            let got = writes
                .take()
                .ok_or(format!("step {i}: writes expected without a writes input"))?;
            same(i, "writes", &got, want)?;
        }
        if let Some(want) = expect.get("close") {
            let code = input
                .get("close_for")
                .and_then(Value::as_str)
                .ok_or(format!("step {i}: close without close_for"))?;
            let (c, r) = close_for(code);
            same(i, "close", &json!([c, r]), want)?;
        }
        if let Some(want) = expect.get("outbox_frames") {
            same(
                i,
                "outbox_frames",
                &json!(side.machine.r().state().outbox_frames()),
                want,
            )?;
        }
    }
    Ok(())
}
