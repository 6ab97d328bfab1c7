//! `ConnectionState`: the per-(task, attempt) streams of seed 000 (stamping, dedupe,
//! resume, replay, acks, bounded windows, snapshots).

use std::sync::{Mutex, MutexGuard};

use indexmap::IndexMap;
use stapel_runner_protocol::sequencing::{self as core_seq, Arrival as CoreArrival};

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;
use crate::wire::{resume_in, Message, ResumeEntry};

/// Which end of the connection a state belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Role {
    /// The hub (orchestrator).
    Hub,
    /// The runner (in the container).
    Runner,
}

impl From<Role> for core_seq::Role {
    fn from(r: Role) -> Self {
        match r {
            Role::Hub => core_seq::Role::Hub,
            Role::Runner => core_seq::Role::Runner,
        }
    }
}

/// How a received message relates to its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Arrival {
    /// New, exactly the next seq.
    InOrder,
    /// New, above the next seq (kept in the out-of-order window).
    Ahead,
    /// Seen before.
    Duplicate,
}

impl From<CoreArrival> for Arrival {
    fn from(a: CoreArrival) -> Self {
        match a {
            CoreArrival::InOrder => Arrival::InOrder,
            CoreArrival::Ahead => Arrival::Ahead,
            CoreArrival::Duplicate => Arrival::Duplicate,
        }
    }
}

/// A stream position: `attempt` is `None` for hub→runner command streams.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Position {
    /// Task id.
    pub task_id: String,
    /// Attempt (runner→hub streams only).
    #[uniffi(default = None)]
    pub attempt: Option<u64>,
    /// Sequence number.
    pub seq: u64,
}

impl From<&core_seq::Position> for Position {
    fn from(p: &core_seq::Position) -> Self {
        Self {
            task_id: p.task_id.clone(),
            attempt: p.attempt,
            seq: p.seq,
        }
    }
}

impl From<&Position> for core_seq::Position {
    fn from(p: &Position) -> Self {
        core_seq::Position::new(p.task_id.clone(), p.attempt, p.seq)
    }
}

/// A gap the peer can no longer fill: seqs `missing_from..=missing_to` are gone.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Resync {
    /// Task id.
    pub task_id: String,
    /// Attempt (runner→hub streams only).
    pub attempt: Option<u64>,
    /// The position the peer declared.
    pub declared: u64,
    /// First missing seq.
    pub missing_from: u64,
    /// Last missing seq.
    pub missing_to: u64,
}

impl From<&core_seq::Resync> for Resync {
    fn from(r: &core_seq::Resync) -> Self {
        Self {
            task_id: r.task_id.clone(),
            attempt: r.attempt,
            declared: r.declared,
            missing_from: r.missing_from,
            missing_to: r.missing_to,
        }
    }
}

/// The frames of one stream to re-send.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct StreamReplay {
    /// Task id.
    pub task_id: String,
    /// Attempt (runner→hub streams only).
    pub attempt: Option<u64>,
    /// Encoded frames, ascending by seq.
    pub frames: Vec<String>,
}

/// What to re-send after the peer declared its positions.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Replay {
    /// Frames to re-send, per stream.
    pub streams: Vec<StreamReplay>,
    /// Gaps the peer cannot fill any more.
    pub resync: Vec<Resync>,
    /// Positions the peer declared beyond what this side emitted.
    pub peer_ahead: Vec<Position>,
    /// Declared task ids this side does not know.
    pub unknown: Vec<String>,
}

impl From<&core_seq::Replay> for Replay {
    fn from(r: &core_seq::Replay) -> Self {
        Self {
            streams: r
                .streams
                .iter()
                .map(|s| StreamReplay {
                    task_id: s.task_id.clone(),
                    attempt: s.attempt,
                    frames: s.frames.iter().map(|f| f.frame.clone()).collect(),
                })
                .collect(),
            resync: r.resync.iter().map(Resync::from).collect(),
            peer_ahead: r.peer_ahead.iter().map(Position::from).collect(),
            unknown: r.unknown.clone(),
        }
    }
}

/// A stamped message and its encoded frame.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Emitted {
    /// The message with its `seq` (and `attempt`) stamped.
    pub message: Message,
    /// The exact frame to send.
    pub frame: String,
}

/// A task's channel counts.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ChannelInfo {
    /// Outbound streams of the task.
    pub outbound: u64,
    /// Inbound streams of the task.
    pub inbound: u64,
    /// Last seq received in order on the task's command stream.
    pub last_received: u64,
}

/// A skipped range `from..=to`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Gap {
    /// First skipped seq.
    pub from: u64,
    /// Last skipped seq.
    pub to: u64,
}

/// The sequencing state of one connection end (seed 000, "Idempotency and resume").
#[derive(uniffi::Object)]
pub struct ConnectionState {
    inner: Mutex<core_seq::ConnectionState>,
}

pub(crate) fn resume_entries(m: &IndexMap<String, u64>) -> Vec<ResumeEntry> {
    m.iter()
        .map(|(t, s)| ResumeEntry {
            task_id: t.clone(),
            seq: *s,
        })
        .collect()
}

impl ConnectionState {
    fn lock(&self) -> MutexGuard<'_, core_seq::ConnectionState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn wrap(s: core_seq::ConnectionState) -> Self {
        Self {
            inner: Mutex::new(s),
        }
    }
}

fn seq_err(e: &core_seq::SequencingError) -> ProtocolError {
    state("sequencing", e.code(), e)
}

#[uniffi::export]
impl ConnectionState {
    /// A fresh state for `role`; `config_json` is the core's sequencing configuration
    /// object as JSON text (`null` or `{}`: the defaults).
    ///
    /// # Errors
    /// `ProtocolError::Config` for a refused configuration.
    #[uniffi::constructor(default(config_json = None))]
    pub fn new(role: Role, config_json: Option<String>) -> Result<Self, ProtocolError> {
        let config = match config_json {
            None => core_seq::SequencingConfig::default(),
            Some(t) => core_seq::SequencingConfig::from_value(&parse_serde(&t)?)?,
        };
        Ok(Self::wrap(core_seq::ConnectionState::with_config(
            role.into(),
            config,
        )))
    }

    /// Restores a state from [`snapshot`](Self::snapshot) bytes.
    ///
    /// # Errors
    /// `ProtocolError::State` with the snapshot error's code.
    #[uniffi::constructor]
    pub fn restore(bytes: Vec<u8>) -> Result<Self, ProtocolError> {
        core_seq::ConnectionState::restore(&bytes)
            .map(Self::wrap)
            .map_err(|e| state("snapshot", e.code(), &e))
    }

    /// The state as bytes, for persistence.
    pub fn snapshot(&self) -> Vec<u8> {
        self.lock().snapshot()
    }

    /// `true` when both states are equal.
    pub fn same_as(&self, other: &ConnectionState) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        *self.lock() == *other.lock()
    }

    /// Stamps the next `seq` (and, runner side, the attempt) on a sequenced message, keeps
    /// its frame for replay and returns it with its frame.
    ///
    /// # Errors
    /// The sequencing code (the caller's record is untouched).
    pub fn emit(&self, message: Message) -> Result<Emitted, ProtocolError> {
        let m = message.to_core()?;
        let (stamped, frame) = self
            .lock()
            .emit_encoded(m)
            .map_err(|e| state("sequencing", e.code(), &e))?;
        Ok(Emitted {
            message: Message::from(&stamped),
            frame,
        })
    }

    /// Records a received message.
    ///
    /// # Errors
    /// The sequencing code.
    pub fn receive(&self, message: Message) -> Result<Arrival, ProtocolError> {
        let m = message.to_core()?;
        self.lock()
            .receive(&m)
            .map(Arrival::from)
            .map_err(|e| seq_err(&e))
    }

    /// Like [`receive`](Self::receive), recording nothing.
    ///
    /// # Errors
    /// The sequencing code.
    pub fn classify(&self, message: Message) -> Result<Arrival, ProtocolError> {
        let m = message.to_core()?;
        self.lock()
            .classify(&m)
            .map(Arrival::from)
            .map_err(|e| seq_err(&e))
    }

    /// The `hello.resume` declaration: task id → last seq received in order.
    pub fn resume_map(&self) -> Vec<ResumeEntry> {
        resume_entries(&self.lock().resume_map())
    }

    /// What to re-send for the peer's `hello.resume`.
    ///
    /// # Errors
    /// `ProtocolError::Decode` (`duplicate_key`) for a task declared twice.
    pub fn replay_for(&self, resume: Vec<ResumeEntry>) -> Result<Replay, ProtocolError> {
        let map = resume_in(resume)?;
        Ok(Replay::from(&self.lock().replay_for(&map)))
    }

    /// What to re-send for exact per-stream declarations.
    pub fn replay_positions(&self, positions: Vec<Position>) -> Replay {
        let list: Vec<core_seq::Position> = positions.iter().map(Into::into).collect();
        Replay::from(&self.lock().replay_positions(&list))
    }

    /// The peer acknowledged a stream through `seq`; returns the frames dropped.
    ///
    /// # Errors
    /// The sequencing code.
    pub fn ack(
        &self,
        task_id: String,
        attempt: Option<u64>,
        seq: u64,
    ) -> Result<u64, ProtocolError> {
        self.lock()
            .ack(&task_id, attempt, seq)
            .map(|n| n as u64)
            .map_err(|e| seq_err(&e))
    }

    /// Drops kept frames through `seq`; returns how many.
    pub fn trim_through(&self, task_id: String, attempt: Option<u64>, seq: u64) -> u64 {
        self.lock().trim_through(&task_id, attempt, seq) as u64
    }

    /// The peer can only offer from `first_available`: the skipped range, if any.
    ///
    /// # Errors
    /// The sequencing code.
    pub fn skip_to(
        &self,
        task_id: String,
        attempt: Option<u64>,
        first_available: u64,
    ) -> Result<Option<Gap>, ProtocolError> {
        self.lock()
            .skip_to(&task_id, attempt, first_available)
            .map(|g| g.map(|(from, to)| Gap { from, to }))
            .map_err(|e| seq_err(&e))
    }

    /// Inbound positions to acknowledge.
    pub fn ack_positions(&self) -> Vec<Position> {
        self.lock()
            .ack_positions()
            .iter()
            .map(Position::from)
            .collect()
    }

    /// Per-stream positions to declare on reconnect.
    pub fn replay_from(&self) -> Vec<Position> {
        self.lock()
            .replay_from()
            .iter()
            .map(Position::from)
            .collect()
    }

    /// Every kept, unacknowledged frame.
    pub fn unacked(&self) -> Vec<String> {
        self.lock()
            .unacked()
            .map(|(_, _, f)| f.frame.clone())
            .collect()
    }

    /// The last seq received in order on a task's command stream (0: none).
    pub fn last_received(&self, task_id: String) -> u64 {
        self.lock()
            .tasks()
            .find(|(t, _)| *t == task_id)
            .map_or(0, |(_, c)| c.last_received())
    }

    /// A task's channel counts.
    ///
    /// # Errors
    /// The sequencing code (e.g. an unknown task).
    pub fn channel(&self, task_id: String) -> Result<ChannelInfo, ProtocolError> {
        let s = self.lock();
        let c = s.channel(&task_id).map_err(|e| seq_err(&e))?;
        Ok(ChannelInfo {
            outbound: c.outbound().count() as u64,
            inbound: c.inbound().count() as u64,
            last_received: c.last_received(),
        })
    }

    /// The kept frames of one outbound stream after `seq`, encoded; `None` when the
    /// stream does not exist.
    ///
    /// # Errors
    /// The sequencing code.
    pub fn outbox_since(
        &self,
        task_id: String,
        attempt: Option<u64>,
        seq: u64,
    ) -> Result<Option<Vec<String>>, ProtocolError> {
        let s = self.lock();
        let Some(log) = s.outbound_log(&task_id, attempt) else {
            return Ok(None);
        };
        let msgs = log.since(seq).map_err(|e| seq_err(&e))?;
        Ok(Some(
            msgs.iter()
                .map(stapel_runner_protocol::wire::encode)
                .collect(),
        ))
    }

    /// Forgets a task (tombstoned); `true` when it was known.
    pub fn forget_task(&self, task_id: String) -> bool {
        self.lock().forget_task(&task_id)
    }

    /// Marks every stream unconfirmed (after a restore or reconnect).
    pub fn mark_unconfirmed(&self) {
        self.lock().mark_unconfirmed();
    }

    /// Confirms every stream.
    pub fn confirm_all(&self) {
        self.lock().confirm_all();
    }

    /// `true` when every stream is confirmed.
    pub fn is_confirmed(&self) -> bool {
        self.lock().is_confirmed()
    }

    /// `true` when every frame of the task was acknowledged.
    pub fn is_fully_acknowledged(&self, task_id: String) -> bool {
        self.lock().is_fully_acknowledged(&task_id)
    }

    /// `true` when the task was forgotten.
    pub fn is_forgotten(&self, task_id: String) -> bool {
        self.lock().is_forgotten(&task_id)
    }

    /// Frames kept for replay.
    pub fn outbox_frames(&self) -> u64 {
        self.lock().outbox_frames() as u64
    }

    /// Encoded bytes kept for replay.
    pub fn outbox_bytes(&self) -> u64 {
        self.lock().outbox_bytes() as u64
    }

    /// Outbound streams.
    pub fn outbound_streams(&self) -> u64 {
        self.lock().stream_counts().0 as u64
    }

    /// Inbound streams.
    pub fn inbound_streams(&self) -> u64 {
        self.lock().stream_counts().1 as u64
    }
}

/// A standalone, bounded outbox (stapel-runner-protocol 0.1.1's `OutboxLog()`), not
/// part of any [`ConnectionState`]: `emit` stamps the next seq and keeps the frame,
/// `since` gives the replay tail, `ack` drops what the peer holds.
#[derive(uniffi::Object)]
pub struct OutboxLog {
    inner: Mutex<core_seq::OutboxLog>,
    max_frames: usize,
    max_bytes: usize,
}

impl OutboxLog {
    fn lock(&self) -> MutexGuard<'_, core_seq::OutboxLog> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sequencing configuration with only the given keys set, read by the core's one
/// config reader (so a refused bound carries the core's code and key).
fn bounds(keys: &[(&str, Option<u64>)]) -> Result<core_seq::SequencingConfig, ProtocolError> {
    let mut m = serde_json::Map::new();
    for (k, v) in keys {
        if let Some(v) = v {
            m.insert((*k).to_owned(), (*v).into());
        }
    }
    Ok(core_seq::SequencingConfig::from_value(
        &serde_json::Value::Object(m),
    )?)
}

#[uniffi::export]
impl OutboxLog {
    /// An empty log holding at most `max_frames` frames and `max_bytes` bytes (absent:
    /// the defaults of `max_outbox_frames` / `max_outbox_bytes`), read by the core's
    /// config reader as those two keys.
    ///
    /// # Errors
    /// `ProtocolError::Config` with the core's code and key.
    #[uniffi::constructor(default(max_frames = None, max_bytes = None))]
    pub fn new(max_frames: Option<u64>, max_bytes: Option<u64>) -> Result<Self, ProtocolError> {
        let c = bounds(&[
            ("max_outbox_frames", max_frames),
            ("max_outbox_bytes", max_bytes),
        ])?;
        Ok(Self {
            inner: Mutex::new(core_seq::OutboxLog::new()),
            max_frames: c.max_outbox_frames,
            max_bytes: c.max_outbox_bytes,
        })
    }

    /// Stamps the next seq on a sequenced message, keeps its frame and returns the
    /// stamped message with its frame.
    ///
    /// # Errors
    /// `ProtocolError::State`: `not_sequenced`, `backpressure`, `frame_too_large`,
    /// `seq_exhausted`, `nested_too_deep` (nothing recorded).
    pub fn emit(&self, message: Message) -> Result<Emitted, ProtocolError> {
        let m = message.to_core()?;
        let stamped = self
            .lock()
            .emit(m, self.max_frames, self.max_bytes)
            .map_err(|e| state("sequencing", e.code(), &e.error))?;
        Ok(Emitted {
            message: Message::from(&stamped),
            frame: stapel_runner_protocol::wire::encode(&stamped),
        })
    }

    /// Drops the kept frames at or below `seq` (numbering does not move); returns how
    /// many were dropped.
    pub fn ack(&self, seq: u64) -> u64 {
        u64::try_from(self.lock().ack(seq)).unwrap_or(u64::MAX)
    }

    /// The kept frames after `last_seq`, encoded, ascending.
    ///
    /// # Errors
    /// The sequencing code (`replay_gap`, `undecodable_frame`).
    pub fn since(&self, last_seq: u64) -> Result<Vec<String>, ProtocolError> {
        let msgs = self.lock().since(last_seq).map_err(|e| seq_err(&e))?;
        Ok(msgs
            .iter()
            .map(stapel_runner_protocol::wire::encode)
            .collect())
    }

    /// The last seq stamped (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq()
    }

    /// The seq the next `emit` stamps.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq()
    }

    /// How many frames are kept.
    pub fn frames(&self) -> u64 {
        u64::try_from(self.lock().kept().len()).unwrap_or(u64::MAX)
    }

    /// Bytes of the kept frames.
    pub fn bytes(&self) -> u64 {
        u64::try_from(self.lock().kept_bytes()).unwrap_or(u64::MAX)
    }
}

/// A standalone inbound tracker (stapel-runner-protocol 0.1.1's `InboxTracker()`): the
/// contiguous watermark plus the seqs received ahead of it within `window`.
#[derive(uniffi::Object)]
pub struct InboxTracker {
    inner: Mutex<core_seq::InboxTracker>,
    window: u64,
}

#[uniffi::export]
impl InboxTracker {
    /// An empty tracker with an out-of-order window of `window` seqs (absent: the
    /// default of `inbound_window`), read by the core's config reader as that key.
    ///
    /// # Errors
    /// `ProtocolError::Config` with the core's code and key.
    #[uniffi::constructor(default(window = None))]
    pub fn new(window: Option<u64>) -> Result<Self, ProtocolError> {
        let c = bounds(&[("inbound_window", window)])?;
        Ok(Self {
            inner: Mutex::new(core_seq::InboxTracker::new()),
            window: c.inbound_window,
        })
    }

    /// Classifies and records `seq`.
    ///
    /// # Errors
    /// `ProtocolError::State`: `invalid_seq`, `beyond_window` (nothing recorded).
    pub fn receive(&self, seq: u64) -> Result<Arrival, ProtocolError> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .receive(seq, self.window)
            .map(Arrival::from)
            .map_err(|e| state("sequencing", e.code(), e))
    }

    /// The contiguous watermark: every seq up to it has arrived.
    pub fn last_seq(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watermark()
    }
}
