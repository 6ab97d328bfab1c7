//! Area `sequencing`: the per-connection `ConnectionState` (outbound logs, inbound
//! trackers, resume maps, replay, acks, snapshot/restore). Values cross as JSON text.

use indexmap::IndexMap;
use napi::bindgen_prelude::{Buffer, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::json::Value as CoreValue;
use stapel_runner_protocol::sequencing::{
    ConnectionState, InboxTracker, OutboxLog, Position, Replay, Role, SequencingConfig,
    SequencingError, DEFAULT_INBOUND_WINDOW, DEFAULT_MAX_OUTBOX_BYTES, DEFAULT_MAX_OUTBOX_FRAMES,
};
use stapel_runner_protocol::wire;

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::{now_of, num};
use crate::wire::{message_from_text, message_text};

fn seq_error(e: &SequencingError) -> napi::Error {
    fail("ProtocolStateError", e.code(), e, Value::Null)
}

fn attempt_of(attempt: Option<f64>) -> napi::Result<Option<u64>> {
    attempt.map(now_of).transpose()
}

fn core_value(v: &Value) -> CoreValue {
    v.clone().into()
}

fn replay_json(r: &Replay) -> Value {
    Value::from(r.to_value())
}

/// The sequencing state of one end of a hub↔runner connection.
#[napi]
pub struct NativeConnectionState {
    state: ConnectionState,
}

#[napi]
impl NativeConnectionState {
    /// `role` is `hub` or `runner`; `config` the JSON text of the sequencing bounds
    /// (absent keys take the core's defaults).
    #[napi(constructor)]
    pub fn new(role: String, config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let role = Role::from_name(&role)
                .ok_or_else(|| bad_argument("role", format!("{role:?} is not hub or runner")))?;
            let config = match config {
                Some(text) => match parse_arg("config", &text)? {
                    Value::Object(m) => {
                        SequencingConfig::from_object(&m).map_err(|e| config_error(&e))?
                    }
                    _ => return Err(bad_argument("config", "not an object")),
                },
                None => SequencingConfig::default(),
            };
            Ok(Self {
                state: ConnectionState::with_config(role, config),
            })
        })
    }

    /// A state restored from snapshot bytes.
    #[napi(factory)]
    pub fn restore(bytes: Uint8Array) -> napi::Result<Self> {
        guard(|| {
            let state = ConnectionState::restore(&bytes)
                .map_err(|e| fail("ProtocolStateError", e.code(), &e, Value::Null))?;
            Ok(Self { state })
        })
    }

    /// The snapshot bytes of the state.
    #[napi]
    pub fn snapshot(&self) -> napi::Result<Buffer> {
        guard(|| Ok(self.state.snapshot().into()))
    }

    /// Whether two states are equal.
    #[napi]
    pub fn equals(&self, other: &NativeConnectionState) -> napi::Result<bool> {
        guard(|| Ok(self.state == other.state))
    }

    /// `hub` or `runner`.
    #[napi]
    pub fn role(&self) -> napi::Result<String> {
        guard(|| Ok(self.state.role().as_str().to_owned()))
    }

    /// Stamp a sequenced message (JSON text) with its stream's next seq and keep it for
    /// replay; the stamped message's JSON text.
    #[napi]
    pub fn emit(&mut self, message: String) -> napi::Result<String> {
        guard(|| {
            let msg = message_from_text(&message, false)?;
            let stamped = self
                .state
                .emit(msg)
                .map_err(|e| fail("ProtocolStateError", e.code(), &e, Value::Null))?;
            message_text(&stamped)
        })
    }

    /// [`emit`](Self::emit), returning the stamped frame instead.
    #[napi]
    pub fn emit_frame(&mut self, message: String) -> napi::Result<String> {
        guard(|| {
            let msg = message_from_text(&message, false)?;
            let (_, frame) = self
                .state
                .emit_encoded(msg)
                .map_err(|e| fail("ProtocolStateError", e.code(), &e, Value::Null))?;
            Ok(frame)
        })
    }

    /// Record an inbound sequenced message (JSON text): `in_order`, `ahead` or
    /// `duplicate`.
    #[napi]
    pub fn receive(&mut self, message: String) -> napi::Result<String> {
        guard(|| {
            let msg = message_from_text(&message, false)?;
            let a = self.state.receive(&msg).map_err(|e| seq_error(&e))?;
            Ok(a.as_str().to_owned())
        })
    }

    /// Like [`receive`](Self::receive), recording nothing.
    #[napi]
    pub fn classify(&self, message: String) -> napi::Result<String> {
        guard(|| {
            let msg = message_from_text(&message, false)?;
            let a = self.state.classify(&msg).map_err(|e| seq_error(&e))?;
            Ok(a.as_str().to_owned())
        })
    }

    /// Per task, the last command seq received contiguously (JSON text).
    #[napi]
    pub fn resume_map(&self) -> napi::Result<String> {
        guard(|| {
            serde_json::to_string(&self.state.resume_map()).map_err(|e| bad_argument("resume", e))
        })
    }

    /// The replay for a peer's `hello.resume` map (JSON text in and out).
    #[napi]
    pub fn replay_for(&mut self, resume: String) -> napi::Result<String> {
        guard(|| {
            let resume: IndexMap<String, u64> =
                serde_json::from_str(&resume).map_err(|e| bad_argument("resume", e))?;
            let r = self.state.replay_for(&resume);
            Ok(replay_json(&r).to_string())
        })
    }

    /// The replay for exact per-stream declarations (JSON text of a position list).
    #[napi]
    pub fn replay_positions(&mut self, positions: String) -> napi::Result<String> {
        guard(|| {
            let list = Position::list_from_value(&core_value(&parse_arg("positions", &positions)?))
                .map_err(|e| bad_argument("positions", e))?;
            let r = self.state.replay_positions(&list);
            Ok(replay_json(&r).to_string())
        })
    }

    /// Acknowledge a stream through `seq`; how many kept frames were dropped.
    #[napi]
    pub fn ack(&mut self, task_id: String, attempt: Option<f64>, seq: f64) -> napi::Result<f64> {
        guard(|| {
            let n = self
                .state
                .ack(&task_id, attempt_of(attempt)?, now_of(seq)?)
                .map_err(|e| seq_error(&e))?;
            Ok(num(n as u64))
        })
    }

    /// Drop kept frames at or below `seq`; how many.
    #[napi]
    pub fn trim_through(
        &mut self,
        task_id: String,
        attempt: Option<f64>,
        seq: f64,
    ) -> napi::Result<f64> {
        guard(|| {
            let n = self
                .state
                .trim_through(&task_id, attempt_of(attempt)?, now_of(seq)?);
            Ok(num(n as u64))
        })
    }

    /// Declare the inbound stream continues at `seq`: the gap `[from, to]` or `null`
    /// (JSON text).
    #[napi]
    pub fn skip_to(
        &mut self,
        task_id: String,
        attempt: Option<f64>,
        seq: f64,
    ) -> napi::Result<String> {
        guard(|| {
            let g = self
                .state
                .skip_to(&task_id, attempt_of(attempt)?, now_of(seq)?)
                .map_err(|e| seq_error(&e))?;
            Ok(g.map_or(Value::Null, |(a, b)| json!([a, b])).to_string())
        })
    }

    /// Inbound watermarks above 0 (JSON text of a position list).
    #[napi]
    pub fn ack_positions(&self) -> napi::Result<String> {
        guard(|| Ok(Value::from(Position::list_to_value(&self.state.ack_positions())).to_string()))
    }

    /// Per emitted outbound stream, the lowest seq still sendable (JSON text).
    #[napi]
    pub fn replay_from(&self) -> napi::Result<String> {
        guard(|| Ok(Value::from(Position::list_to_value(&self.state.replay_from())).to_string()))
    }

    /// Every kept frame, stream by stream.
    #[napi]
    pub fn unacked(&self) -> napi::Result<Vec<String>> {
        guard(|| {
            Ok(self
                .state
                .unacked()
                .map(|(_, _, f)| f.frame.clone())
                .collect())
        })
    }

    /// Forget a task's streams (a tombstone is kept); whether it was known.
    #[napi]
    pub fn forget_task(&mut self, task_id: String) -> napi::Result<bool> {
        guard(|| Ok(self.state.forget_task(&task_id)))
    }

    /// Frames emitted from now on are provisional.
    #[napi]
    pub fn mark_unconfirmed(&mut self) -> napi::Result<()> {
        guard(|| {
            self.state.mark_unconfirmed();
            Ok(())
        })
    }

    /// Every provisional frame is final.
    #[napi]
    pub fn confirm_all(&mut self) -> napi::Result<()> {
        guard(|| {
            self.state.confirm_all();
            Ok(())
        })
    }

    /// Whether no frame is provisional.
    #[napi]
    pub fn is_confirmed(&self) -> napi::Result<bool> {
        guard(|| Ok(self.state.is_confirmed()))
    }

    /// Whether every frame of the task was acknowledged.
    #[napi]
    pub fn is_fully_acknowledged(&self, task_id: String) -> napi::Result<bool> {
        guard(|| Ok(self.state.is_fully_acknowledged(&task_id)))
    }

    /// Whether the task was forgotten (a tombstone is kept).
    #[napi]
    pub fn is_forgotten(&self, task_id: String) -> napi::Result<bool> {
        guard(|| Ok(self.state.is_forgotten(&task_id)))
    }

    /// The task's channel: `{outbound, inbound, last_received}` (JSON text).
    #[napi]
    pub fn channel(&self, task_id: String) -> napi::Result<String> {
        guard(|| {
            let c = self.state.channel(&task_id).map_err(|e| seq_error(&e))?;
            Ok(json!({
                "outbound": c.outbound().count(),
                "inbound": c.inbound().count(),
                "last_received": c.last_received(),
            })
            .to_string())
        })
    }

    /// The kept frames of an outbound stream above `seq`, decoded (JSON text of an
    /// array of messages).
    #[napi]
    pub fn outbox_since(
        &self,
        task_id: String,
        attempt: Option<f64>,
        seq: f64,
    ) -> napi::Result<String> {
        guard(|| {
            let log = self
                .state
                .outbound_log(&task_id, attempt_of(attempt)?)
                .ok_or_else(|| bad_argument("stream", "no such outbound stream"))?;
            let msgs = log.since(now_of(seq)?).map_err(|e| seq_error(&e))?;
            let mut out = Vec::new();
            for m in &msgs {
                out.push(wire::to_object(m));
            }
            serde_json::to_string(&out).map_err(|e| bad_argument("frames", e))
        })
    }

    /// Frames kept for replay.
    #[napi]
    pub fn outbox_frames(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.state.outbox_frames() as u64)))
    }

    /// Encoded bytes kept for replay.
    #[napi]
    pub fn outbox_bytes(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.state.outbox_bytes() as u64)))
    }

    /// `[outbound, inbound]` stream counts.
    #[napi]
    pub fn stream_counts(&self) -> napi::Result<Vec<f64>> {
        guard(|| {
            let (o, i) = self.state.stream_counts();
            Ok(vec![num(o as u64), num(i as u64)])
        })
    }
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
                .map_err(|e| fail("ProtocolStateError", e.code(), &e.error, Value::Null))?;
            message_text(&stamped)
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
            let out: Vec<_> = msgs.iter().map(wire::to_object).collect();
            serde_json::to_string(&out).map_err(|e| bad_argument("frames", e))
        })
    }

    /// The kept frames as `[seq, frame]` pairs, ascending (JSON text).
    #[napi]
    pub fn frames(&self) -> napi::Result<String> {
        guard(|| {
            let out: Vec<Value> = self.log.kept().map(|f| json!([f.seq, f.frame])).collect();
            serde_json::to_string(&out).map_err(|e| bad_argument("frames", e))
        })
    }

    /// `[max_frames, max_bytes]`.
    #[napi]
    pub fn bounds(&self) -> napi::Result<Vec<f64>> {
        guard(|| {
            Ok(vec![
                num(self.max_frames as u64),
                num(self.max_bytes as u64),
            ])
        })
    }

    /// Highest seq assigned so far (0 before anything is emitted).
    #[napi]
    pub fn last_seq(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.log.last_seq())))
    }

    /// The seq the next emitted frame gets.
    #[napi]
    pub fn next_seq(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.log.next_seq())))
    }

    /// The lowest seq still kept (`next_seq` when nothing is kept).
    #[napi]
    pub fn first_available(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.log.first_available())))
    }

    /// Encoded bytes kept.
    #[napi]
    pub fn kept_bytes(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.log.kept_bytes() as u64)))
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

    /// Record `seq`: `in_order`, `ahead` or `duplicate`.
    #[napi]
    pub fn receive(&mut self, seq: f64) -> napi::Result<String> {
        guard(|| {
            let seq = now_of(seq).map_err(|_| {
                fail(
                    "ProtocolStateError",
                    "invalid_seq",
                    "seq is not a non-negative integer",
                    Value::Null,
                )
            })?;
            self.tracker
                .receive(seq, self.window)
                .map(|a| a.as_str().to_owned())
                .map_err(|e| fail("ProtocolStateError", e.code(), e, Value::Null))
        })
    }

    /// The window this tracker was made with.
    #[napi]
    pub fn window(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.window)))
    }

    /// Highest seq such that every seq in `1..=last_seq` was received.
    #[napi]
    pub fn last_seq(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.tracker.watermark())))
    }

    /// Seqs received above `last_seq`, ascending.
    #[napi]
    pub fn ahead(&self) -> napi::Result<Vec<f64>> {
        guard(|| Ok(self.tracker.ahead().map(num).collect()))
    }

    /// Whether anything was received.
    #[napi]
    pub fn has_received(&self) -> napi::Result<bool> {
        guard(|| Ok(self.tracker.has_received()))
    }
}
