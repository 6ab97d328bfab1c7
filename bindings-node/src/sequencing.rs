//! Area `sequencing`: the per-connection `ConnectionState` (outbound logs, inbound
//! trackers, resume maps, replay, acks, snapshot/restore), held in an `External` handle
//! and driven by free functions, and the standalone `OutboxLog` / `InboxTracker`
//! classes. Values cross as JSON text.

use indexmap::IndexMap;
use napi::bindgen_prelude::{Buffer, External, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::json::Value as CoreValue;
use stapel_runner_protocol::sequencing::{
    ConnectionState, InboxTracker, OutboxLog, Position, Replay, Role, SequencingConfig,
    SequencingError, SnapshotError, TaskChannel, DEFAULT_INBOUND_WINDOW, DEFAULT_MAX_OUTBOX_BYTES,
    DEFAULT_MAX_OUTBOX_FRAMES,
};
use stapel_runner_protocol::wire::{self, Message};

use crate::boundary::Text;
use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::{message_from_text, num};

fn seq_error(e: &SequencingError) -> napi::Error {
    fail("sequencing", e.code(), e, Value::Null)
}

/// A snapshot the core could not restore, as a thrown `ProtocolStateError`.
pub fn restore_error(e: &SnapshotError) -> napi::Error {
    fail("snapshot", e.code(), e, Value::Null)
}

fn attempt_of(attempt: Option<f64>) -> napi::Result<Option<u64>> {
    attempt.map(now_of).transpose()
}

fn replay_json(r: &Replay) -> Value {
    Value::from(r.to_value())
}

/// The replay's messages per task (the core's `Replay::messages`), as JSON text.
fn replay_messages(r: &Replay) -> String {
    let mut out = String::from("{");
    for (i, (task, msgs)) in r.messages().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(task.as_str()).to_string());
        out.push_str(":[");
        for (j, m) in msgs.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str(&wire::encode(m));
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// One outbound log as its JSON view.
fn outbox_json(log: &OutboxLog) -> Value {
    json!({
        "last_seq": log.last_seq(),
        "next_seq": log.next_seq(),
        "first_available": log.first_available(),
        "kept_bytes": log.kept_bytes(),
        "unconfirmed_from": log.unconfirmed_from(),
        "is_confirmed": log.is_confirmed(),
        "frames": log.kept().map(|f| json!([f.seq, f.frame])).collect::<Vec<_>>(),
    })
}

/// One inbound tracker as its JSON view.
fn inbox_json(t: &InboxTracker) -> Value {
    json!({
        "last_seq": t.watermark(),
        "ahead": t.ahead().collect::<Vec<_>>(),
        "has_received": t.has_received(),
    })
}

/// A task's channel as its JSON view: every stream in both directions.
fn channel_json(task_id: &str, c: &TaskChannel) -> Value {
    json!({
        "task_id": task_id,
        "outbound": c.outbound().map(|(a, l)| json!({"attempt": a, "log": outbox_json(l)})).collect::<Vec<_>>(),
        "inbound": c.inbound().map(|(a, t)| json!({"attempt": a, "tracker": inbox_json(t)})).collect::<Vec<_>>(),
        "last_received": c.last_received(),
    })
}

/// The sequencing state of one end of a hub↔runner connection.
pub struct StateHandle {
    state: ConnectionState,
}

impl StateHandle {
    /// A handle over `state`.
    pub fn of(state: ConnectionState) -> Self {
        Self { state }
    }
}

type State = External<StateHandle>;

/// A fresh state: `role` is `hub` or `runner`; `config` the JSON text of the sequencing
/// bounds (absent keys take the core's defaults).
#[napi(ts_return_type = "ExternalObject<'State'>")]
pub fn state_new(role: String, config: Option<String>) -> napi::Result<State> {
    guard(|| {
        let role = Role::from_name(&role)
            .ok_or_else(|| bad_argument("role", format!("{role:?} is not hub or runner")))?;
        let config = match config {
            Some(text) => SequencingConfig::from_value(&parse_arg("config", &text)?)
                .map_err(|e| config_error(&e))?,
            None => SequencingConfig::default(),
        };
        Ok(External::new(StateHandle::of(
            ConnectionState::with_config(role, config),
        )))
    })
}

/// A state restored from snapshot bytes.
#[napi(ts_return_type = "ExternalObject<'State'>")]
pub fn state_restore(bytes: Uint8Array) -> napi::Result<State> {
    guard(|| {
        let state = ConnectionState::restore(&bytes).map_err(|e| restore_error(&e))?;
        Ok(External::new(StateHandle::of(state)))
    })
}

/// The snapshot bytes of the state.
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_snapshot(state: &State) -> napi::Result<Buffer> {
    guard(|| Ok(state.state.snapshot().into()))
}

/// Whether two states are equal.
#[napi(ts_args_type = "a: ExternalObject<'State'>, b: ExternalObject<'State'>")]
pub fn state_equals(a: &State, b: &State) -> napi::Result<bool> {
    guard(|| Ok(a.state == b.state))
}

/// `hub` or `runner`.
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_role(state: &State) -> napi::Result<String> {
    guard(|| Ok(state.state.role().as_str().to_owned()))
}

/// The bounds the state runs with, every key (JSON text).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_config(state: &State) -> napi::Result<String> {
    guard(|| Ok(state.state.config().to_value().to_string()))
}

fn emit_msg(state: &mut State, message: &Text) -> napi::Result<(Message, Option<String>)> {
    let msg = message.with(|t| message_from_text(t, false))??;
    state
        .state
        .emit_encoded(msg)
        .map(|(m, f)| (m, Some(f)))
        .map_err(|e| fail("sequencing", e.code(), &e.error, Value::Null))
}

/// Stamp a sequenced message (JSON text) with its stream's next seq and keep it for
/// replay; the stamped message's JSON text (its frame).
#[napi(ts_args_type = "state: ExternalObject<'State'>, message: string")]
pub fn state_emit(state: &mut State, message: Text) -> napi::Result<String> {
    guard(|| {
        let (_, frame) = emit_msg(state, &message)?;
        Ok(frame.unwrap_or_default())
    })
}

fn arrival(
    state: &mut State,
    message: &Text,
    how: impl FnOnce(&mut ConnectionState, &Message) -> Result<&'static str, SequencingError>,
) -> napi::Result<String> {
    let msg = message.with(|t| message_from_text(t, false))??;
    how(&mut state.state, &msg)
        .map(str::to_owned)
        .map_err(|e| seq_error(&e))
}

/// Record an inbound sequenced message (JSON text): `in_order`, `ahead` or `duplicate`.
#[napi(ts_args_type = "state: ExternalObject<'State'>, message: string")]
pub fn state_receive(state: &mut State, message: Text) -> napi::Result<String> {
    guard(|| arrival(state, &message, |s, m| s.receive(m).map(|a| a.as_str())))
}

/// How an inbound sequenced message would arrive, recording nothing.
#[napi(ts_args_type = "state: ExternalObject<'State'>, message: string")]
pub fn state_classify(state: &mut State, message: Text) -> napi::Result<String> {
    guard(|| arrival(state, &message, |s, m| s.classify(m).map(|a| a.as_str())))
}

/// Record an inbound sequenced message only when it is the next of its stream.
#[napi(ts_args_type = "state: ExternalObject<'State'>, message: string")]
pub fn state_accept_in_order(state: &mut State, message: Text) -> napi::Result<String> {
    guard(|| {
        arrival(state, &message, |s, m| {
            s.accept_in_order(m).map(|a| a.as_str())
        })
    })
}

/// Per task, the last command seq received contiguously (JSON text).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_resume_map(state: &State) -> napi::Result<String> {
    guard(|| {
        serde_json::to_string(&state.state.resume_map()).map_err(|e| bad_argument("resume", e))
    })
}

/// The replay for a peer's `hello.resume` map (JSON text in): the full report when
/// `report`, else the messages per task (JSON text).
#[napi(ts_args_type = "state: ExternalObject<'State'>, resume: string, report: boolean")]
pub fn state_replay_for(state: &mut State, resume: String, report: bool) -> napi::Result<String> {
    guard(|| {
        let resume: IndexMap<String, u64> =
            serde_json::from_str(&resume).map_err(|e| bad_argument("resume", e))?;
        let r = state.state.replay_for(&resume);
        Ok(if report {
            replay_json(&r).to_string()
        } else {
            replay_messages(&r)
        })
    })
}

/// The replay for exact per-stream declarations (JSON text of a position list).
#[napi(ts_args_type = "state: ExternalObject<'State'>, positions: string")]
pub fn state_replay_positions(state: &mut State, positions: String) -> napi::Result<String> {
    guard(|| {
        let value: CoreValue = parse_arg("positions", &positions)?.into();
        let list = Position::list_from_value(&value).map_err(|e| bad_argument("positions", e))?;
        let r = state.state.replay_positions(&list);
        Ok(replay_json(&r).to_string())
    })
}

/// Acknowledge a stream through `seq`; how many kept frames were dropped.
#[napi(
    ts_args_type = "state: ExternalObject<'State'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn state_ack(
    state: &mut State,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<f64> {
    guard(|| {
        let n = state
            .state
            .ack(&task_id, attempt_of(attempt)?, now_of(seq)?)
            .map_err(|e| seq_error(&e))?;
        Ok(num(n as u64))
    })
}

/// Drop kept frames at or below `seq`; how many.
#[napi(
    ts_args_type = "state: ExternalObject<'State'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn state_trim_through(
    state: &mut State,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<f64> {
    guard(|| {
        let n = state
            .state
            .trim_through(&task_id, attempt_of(attempt)?, now_of(seq)?);
        Ok(num(n as u64))
    })
}

/// Whether an acknowledgement of `seq` would be ahead of what the stream emitted.
#[napi(
    ts_args_type = "state: ExternalObject<'State'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn state_is_ahead(
    state: &State,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<bool> {
    guard(|| {
        Ok(state
            .state
            .is_ahead(&task_id, attempt_of(attempt)?, now_of(seq)?))
    })
}

/// Declare the inbound stream continues at `seq`: the gap `[from, to]` or `null`
/// (JSON text).
#[napi(
    ts_args_type = "state: ExternalObject<'State'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn state_skip_to(
    state: &mut State,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<String> {
    guard(|| {
        let g = state
            .state
            .skip_to(&task_id, attempt_of(attempt)?, now_of(seq)?)
            .map_err(|e| seq_error(&e))?;
        Ok(g.map_or(Value::Null, |(a, b)| json!([a, b])).to_string())
    })
}

/// Inbound watermarks above 0 (JSON text of a position list).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_ack_positions(state: &State) -> napi::Result<String> {
    guard(|| Ok(Value::from(Position::list_to_value(&state.state.ack_positions())).to_string()))
}

/// Per emitted outbound stream, the lowest seq still sendable (JSON text).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_replay_from(state: &State) -> napi::Result<String> {
    guard(|| Ok(Value::from(Position::list_to_value(&state.state.replay_from())).to_string()))
}

/// Every kept frame, stream by stream: `[{task_id, attempt, seq, frame}]` (JSON text).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_unacked(state: &State) -> napi::Result<String> {
    guard(|| {
        let list: Vec<Value> = state
            .state
            .unacked()
            .map(|(t, a, f)| json!({"task_id": t, "attempt": a, "seq": f.seq, "frame": f.frame}))
            .collect();
        Ok(Value::Array(list).to_string())
    })
}

/// Forget a task's streams (a tombstone is kept); whether it was known.
#[napi(ts_args_type = "state: ExternalObject<'State'>, taskId: string")]
pub fn state_forget_task(state: &mut State, task_id: String) -> napi::Result<bool> {
    guard(|| Ok(state.state.forget_task(&task_id)))
}

/// Frames emitted from now on are provisional.
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_mark_unconfirmed(state: &mut State) -> napi::Result<()> {
    guard(|| {
        state.state.mark_unconfirmed();
        Ok(())
    })
}

/// Every provisional frame is final.
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_confirm_all(state: &mut State) -> napi::Result<()> {
    guard(|| {
        state.state.confirm_all();
        Ok(())
    })
}

/// Counters and flags as JSON text: `is_confirmed`, `outbox_frames`, `outbox_bytes`,
/// `outbound_streams`, `inbound_streams`, `forgotten_count`, `memory_footprint`.
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_counts(state: &State) -> napi::Result<String> {
    guard(|| {
        let s = &state.state;
        let (o, i) = s.stream_counts();
        Ok(json!({
            "is_confirmed": s.is_confirmed(),
            "outbox_frames": s.outbox_frames(),
            "outbox_bytes": s.outbox_bytes(),
            "outbound_streams": o,
            "inbound_streams": i,
            "forgotten_count": s.forgotten_count(),
            "memory_footprint": s.memory_footprint(),
        })
        .to_string())
    })
}

/// Whether every frame of the task was acknowledged.
#[napi(ts_args_type = "state: ExternalObject<'State'>, taskId: string")]
pub fn state_is_fully_acknowledged(state: &State, task_id: String) -> napi::Result<bool> {
    guard(|| Ok(state.state.is_fully_acknowledged(&task_id)))
}

/// Whether the task was forgotten (a tombstone is kept).
#[napi(ts_args_type = "state: ExternalObject<'State'>, taskId: string")]
pub fn state_is_forgotten(state: &State, task_id: String) -> napi::Result<bool> {
    guard(|| Ok(state.state.is_forgotten(&task_id)))
}

/// The task's channel: every stream of it (JSON text); an empty task id is the core's
/// `missing_task_id`.
#[napi(ts_args_type = "state: ExternalObject<'State'>, taskId: string")]
pub fn state_channel(state: &State, task_id: String) -> napi::Result<String> {
    guard(|| {
        let c = state.state.channel(&task_id).map_err(|e| seq_error(&e))?;
        Ok(channel_json(&task_id, &c).to_string())
    })
}

/// Every known task's channel, in first-seen order (JSON text of an array).
#[napi(ts_args_type = "state: ExternalObject<'State'>")]
pub fn state_channels(state: &State) -> napi::Result<String> {
    guard(|| {
        let list: Vec<Value> = state
            .state
            .tasks()
            .map(|(t, c)| channel_json(t, c))
            .collect();
        Ok(Value::Array(list).to_string())
    })
}

/// The kept frames of an outbound stream above `seq`, decoded (JSON text of an
/// array of messages).
#[napi(
    ts_args_type = "state: ExternalObject<'State'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn state_outbox_since(
    state: &State,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<String> {
    guard(|| {
        let log = state
            .state
            .outbound_log(&task_id, attempt_of(attempt)?)
            .ok_or_else(|| bad_argument("stream", "no such outbound stream"))?;
        let msgs = log.since(now_of(seq)?).map_err(|e| seq_error(&e))?;
        Ok(messages_json(&msgs))
    })
}

fn messages_json(msgs: &[Message]) -> String {
    let mut out = String::from("[");
    for (i, m) in msgs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&wire::encode(m));
    }
    out.push(']');
    out
}

fn bound(what: &str, n: Option<f64>, default: usize) -> napi::Result<usize> {
    match n {
        None => Ok(default),
        Some(n) => usize::try_from(now_of(n)?).map_err(|e| bad_argument(what, e)),
    }
}

/// A standalone, bounded log of one outbound stream (the core's `OutboxLog`): `emit`
/// stamps the next seq and keeps the frame, `since` gives the replay tail, `ack` drops
/// what the peer holds.
#[napi]
pub struct NativeOutboxLog {
    log: OutboxLog,
    max_frames: usize,
    max_bytes: usize,
}

#[napi]
impl NativeOutboxLog {
    /// Bounds default to the core's `max_outbox_frames` / `max_outbox_bytes` defaults.
    #[napi(constructor)]
    pub fn new(max_frames: Option<f64>, max_bytes: Option<f64>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                log: OutboxLog::new(),
                max_frames: bound("max_frames", max_frames, DEFAULT_MAX_OUTBOX_FRAMES)?,
                max_bytes: bound("max_bytes", max_bytes, DEFAULT_MAX_OUTBOX_BYTES)?,
            })
        })
    }

    /// Stamp the next seq on a sequenced message (JSON text) and keep its frame; the
    /// stamped message's JSON text. Nothing is recorded on error.
    #[napi]
    pub fn emit(&mut self, message: String) -> napi::Result<String> {
        guard(|| {
            let msg = message_from_text(&message, false)?;
            let stamped = self
                .log
                .emit(msg, self.max_frames, self.max_bytes)
                .map_err(|e| fail("sequencing", e.code(), &e.error, Value::Null))?;
            Ok(wire::encode(&stamped))
        })
    }

    /// Drop the kept frames at or below `seq`; how many were dropped.
    #[napi]
    pub fn ack(&mut self, seq: f64) -> napi::Result<f64> {
        guard(|| Ok(num(self.log.ack(now_of(seq)?) as u64)))
    }

    /// The kept messages with a seq above `seq`, ascending (JSON text of an array).
    #[napi]
    pub fn since(&self, seq: f64) -> napi::Result<String> {
        guard(|| {
            let msgs = self.log.since(now_of(seq)?).map_err(|e| seq_error(&e))?;
            Ok(messages_json(&msgs))
        })
    }

    /// The log's view as JSON text: `last_seq`, `next_seq`, `first_available`,
    /// `kept_bytes`, `unconfirmed_from`, `is_confirmed`, `frames` (`[seq, frame]`
    /// pairs), plus `max_frames` and `max_bytes`.
    #[napi]
    pub fn view(&self) -> napi::Result<String> {
        guard(|| {
            let mut v = outbox_json(&self.log);
            if let Value::Object(m) = &mut v {
                m.insert("max_frames".into(), json!(self.max_frames));
                m.insert("max_bytes".into(), json!(self.max_bytes));
            }
            Ok(v.to_string())
        })
    }
}

/// A standalone tracker of one inbound stream (the core's `InboxTracker`).
#[napi]
pub struct NativeInboxTracker {
    tracker: InboxTracker,
    window: u64,
}

#[napi]
impl NativeInboxTracker {
    /// `window` defaults to the core's `inbound_window` default (clamped by the core).
    #[napi(constructor)]
    pub fn new(window: Option<f64>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                tracker: InboxTracker::new(),
                window: window
                    .map(now_of)
                    .transpose()?
                    .unwrap_or(DEFAULT_INBOUND_WINDOW),
            })
        })
    }

    /// Record `seq` (a non-negative integer): `in_order`, `ahead` or `duplicate`, or the
    /// core's refusal (`invalid_seq` for 0, `beyond_window`).
    #[napi]
    pub fn receive(&mut self, seq: f64) -> napi::Result<String> {
        guard(|| {
            let seq = now_of(seq)?;
            self.tracker
                .receive(seq, self.window)
                .map(|a| a.as_str().to_owned())
                .map_err(|e| fail("sequencing", e.code(), e, Value::Null))
        })
    }

    /// The tracker's view as JSON text: `window`, `last_seq`, `ahead`, `has_received`.
    #[napi]
    pub fn view(&self) -> napi::Result<String> {
        guard(|| {
            let mut v = inbox_json(&self.tracker);
            if let Value::Object(m) = &mut v {
                m.insert("window".into(), json!(self.window));
            }
            Ok(v.to_string())
        })
    }
}
