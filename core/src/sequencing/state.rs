//! [`ConnectionState`]: both directions of one hub↔runner connection.

use std::collections::HashMap;

use indexmap::IndexMap;

use crate::wire::{self, Message, MessageType};

use super::error::{EmitError, SequencingError};
use super::inbox::{Arrival, InboxRefusal, InboxTracker};
use super::outbox::{KeptFrame, OutboxLog};
use super::{Position, Role, SequencingConfig};

/// All streams of one task, in both directions. Command streams have attempt `None`,
/// runner streams `Some(attempt)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskChannel {
    pub(crate) outbound: Vec<(Option<u64>, OutboxLog)>,
    pub(crate) inbound: Vec<(Option<u64>, InboxTracker)>,
}

impl TaskChannel {
    /// Outbound streams of the task: (attempt, log).
    pub fn outbound(&self) -> impl Iterator<Item = (Option<u64>, &OutboxLog)> + '_ {
        self.outbound.iter().map(|(a, l)| (*a, l))
    }

    /// Inbound streams of the task: (attempt, tracker).
    pub fn inbound(&self) -> impl Iterator<Item = (Option<u64>, &InboxTracker)> + '_ {
        self.inbound.iter().map(|(a, t)| (*a, t))
    }

    fn out_mut(&mut self, attempt: Option<u64>) -> Option<&mut OutboxLog> {
        self.outbound
            .iter_mut()
            .find(|(a, _)| *a == attempt)
            .map(|(_, l)| l)
    }

    fn out(&self, attempt: Option<u64>) -> Option<&OutboxLog> {
        self.outbound
            .iter()
            .find(|(a, _)| *a == attempt)
            .map(|(_, l)| l)
    }

    fn inb(&self, attempt: Option<u64>) -> Option<&InboxTracker> {
        self.inbound
            .iter()
            .find(|(a, _)| *a == attempt)
            .map(|(_, t)| t)
    }

    fn inb_mut(&mut self, attempt: Option<u64>) -> Option<&mut InboxTracker> {
        self.inbound
            .iter_mut()
            .find(|(a, _)| *a == attempt)
            .map(|(_, t)| t)
    }

    fn is_empty(&self) -> bool {
        self.outbound.is_empty() && self.inbound.is_empty()
    }
}

/// A stream whose declared position is older than the kept log: the seqs
/// `missing_from..=missing_to` can no longer be replayed. The kept tail (from
/// `missing_to + 1`) is still replayed after this notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resync {
    /// The stream's task.
    pub task_id: String,
    /// The stream's attempt (`None` for command streams).
    pub attempt: Option<u64>,
    /// The position the peer declared.
    pub declared: u64,
    /// First missing seq (`declared + 1`).
    pub missing_from: u64,
    /// Last missing seq (first kept seq − 1).
    pub missing_to: u64,
}

/// The kept tail of one stream to re-send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamReplay {
    /// The stream's task.
    pub task_id: String,
    /// The stream's attempt (`None` for command streams).
    pub attempt: Option<u64>,
    /// The frames to re-send, ascending by seq.
    pub frames: Vec<KeptFrame>,
}

/// What to re-send after a peer declared its positions
/// ([`ConnectionState::replay_for`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// Per stream, the kept frames above the declared position (streams with nothing to
    /// re-send are left out), in task order.
    pub streams: Vec<StreamReplay>,
    /// Streams whose declared position is older than the kept log. Send the resync
    /// notice before the stream's frames.
    pub resync: Vec<Resync>,
    /// Streams where the peer declared a position beyond anything emitted (the local
    /// state is older than the peer's, e.g. restored from an old snapshot). Numbering
    /// continues after the declared position so that new frames are not taken for
    /// duplicates.
    pub peer_ahead: Vec<Position>,
    /// Task ids the peer declared that this state does not know (no state is created
    /// for them).
    pub unknown: Vec<String>,
}

impl Replay {
    /// The frames as messages per task id (the seed's `replay_for` result). Frames are
    /// decoded from the kept bytes without validation.
    pub fn messages(&self) -> IndexMap<String, Vec<Message>> {
        let mut out: IndexMap<String, Vec<Message>> = IndexMap::new();
        for s in &self.streams {
            let entry = out.entry(s.task_id.clone()).or_default();
            for f in &s.frames {
                if let Ok(m) = wire::decode(f.frame.as_bytes(), false) {
                    entry.push(m);
                }
            }
        }
        out
    }

    /// `true` when there is nothing to send or report.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty() && self.resync.is_empty() && self.peer_ahead.is_empty()
    }
}

/// Sequencing state of one end of a hub↔runner connection (the seed's
/// `ConnectionState`): the outbound logs it keeps for replay and the inbound trackers
/// that suppress duplicates. It lives longer than any one transport connection: keep it
/// across reconnects, persist it with [`snapshot`](Self::snapshot).
///
/// # Methods by purpose
///
/// * sending: [`emit`](Self::emit) stamps the next seq and keeps the frame;
///   [`ack`](Self::ack) drops what the peer acknowledged;
/// * receiving: [`receive`](Self::receive) (new vs duplicate), [`classify`](Self::classify)
///   (the same without recording), [`skip_to`](Self::skip_to) (the sender can no
///   longer send older seqs);
/// * reconnecting: [`resume_map`](Self::resume_map) (what to declare in `hello.resume`),
///   [`replay_for`](Self::replay_for) / [`replay_positions`](Self::replay_positions)
///   (what to re-send), [`unacked`](Self::unacked), [`ack_positions`](Self::ack_positions),
///   [`replay_from`](Self::replay_from);
/// * housekeeping: [`forget_task`](Self::forget_task), [`snapshot`](Self::snapshot),
///   [`restore`](Self::restore), [`memory_footprint`](Self::memory_footprint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionState {
    pub(crate) role: Role,
    pub(crate) config: SequencingConfig,
    pub(crate) tasks: IndexMap<String, TaskChannel>,
    pub(crate) outbound_streams: usize,
    pub(crate) inbound_streams: usize,
    pub(crate) kept_frames: usize,
    pub(crate) kept_bytes: usize,
}

/// Push without the default growth to 4 elements: most tasks have one stream per
/// direction, and this vector exists once per task.
fn push_exact<T>(v: &mut Vec<T>, item: T) {
    v.reserve_exact(1);
    v.push(item);
}

/// `record` after a successful `classify` cannot refuse; map the impossible case to a
/// harmless error rather than panicking.
fn unreachable_refusal() -> SequencingError {
    SequencingError::InvalidSeq {
        message_type: MessageType::TaskProgress,
    }
}

/// The stream a message belongs to, once checked.
struct Key<'a> {
    task_id: &'a str,
    attempt: Option<u64>,
}

impl ConnectionState {
    /// An empty state with the default bounds.
    pub fn new(role: Role) -> Self {
        Self::with_config(role, SequencingConfig::default())
    }

    /// An empty state with the given bounds.
    pub fn with_config(role: Role, mut config: SequencingConfig) -> Self {
        config.inbound_window = config.inbound_window.clamp(1, super::MAX_INBOUND_WINDOW);
        Self {
            role,
            config,
            tasks: IndexMap::new(),
            outbound_streams: 0,
            inbound_streams: 0,
            kept_frames: 0,
            kept_bytes: 0,
        }
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The bounds in force.
    pub fn config(&self) -> &SequencingConfig {
        &self.config
    }

    /// The per-task channels, in the order tasks were first seen.
    pub fn tasks(&self) -> impl Iterator<Item = (&str, &TaskChannel)> + '_ {
        self.tasks.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Frames kept for replay, over all streams.
    pub fn outbox_frames(&self) -> usize {
        self.kept_frames
    }

    /// Encoded bytes kept for replay, over all streams.
    pub fn outbox_bytes(&self) -> usize {
        self.kept_bytes
    }

    /// Number of (outbound, inbound) streams.
    pub fn stream_counts(&self) -> (usize, usize) {
        (self.outbound_streams, self.inbound_streams)
    }

    /// Check a message for a direction and name its stream.
    fn key<'m>(&self, msg: &'m Message, outbound: bool) -> Result<Key<'m>, SequencingError> {
        let message_type = msg.message_type();
        let task_id = match msg.task_id() {
            Some(t) => t,
            None => return Err(SequencingError::NotSequenced { message_type }),
        };
        if task_id.is_empty() {
            return Err(SequencingError::MissingTaskId { message_type });
        }
        let is_command = matches!(
            message_type,
            MessageType::TaskAssign | MessageType::TaskCancel
        );
        let hub_sends = self.role == Role::Hub;
        if outbound && is_command != hub_sends {
            return Err(SequencingError::RoleCannotEmit {
                role: self.role,
                message_type,
            });
        }
        if !outbound && is_command == hub_sends {
            return Err(SequencingError::WrongDirection {
                role: self.role,
                message_type,
            });
        }
        let attempt = if is_command {
            None
        } else {
            Some(msg.attempt().unwrap_or(0))
        };
        Ok(Key { task_id, attempt })
    }

    /// Stamp the next seq of the message's stream on it, keep its encoded frame for
    /// replay, and return the stamped message (the seed's `emit`).
    ///
    /// # Errors
    /// [`EmitError`] carrying the message back unchanged: `not_sequenced`,
    /// `missing_task_id`, `role_cannot_emit`, `too_many_streams`, `frame_too_large`,
    /// `backpressure`, `seq_exhausted`. Nothing is recorded on error.
    pub fn emit(&mut self, mut msg: Message) -> Result<Message, EmitError> {
        let fail = |error, message| EmitError {
            error,
            message: Box::new(message),
        };
        let (task_id, attempt, exists, seq) = match self.key(&msg, true) {
            Err(e) => return Err(fail(e, msg)),
            Ok(k) => {
                let log = self.tasks.get(k.task_id).and_then(|c| c.out(k.attempt));
                (
                    k.task_id.to_owned(),
                    k.attempt,
                    log.is_some(),
                    log.map_or(1, OutboxLog::next_seq),
                )
            }
        };
        if !exists && self.outbound_streams >= self.config.max_streams {
            return Err(fail(
                SequencingError::TooManyStreams {
                    max: self.config.max_streams,
                    inbound: false,
                },
                msg,
            ));
        }
        if seq > wire::MAX_SAFE_INTEGER {
            return Err(fail(SequencingError::SeqExhausted { task_id }, msg));
        }
        let original = msg.seq().unwrap_or(0);
        msg.set_seq(seq);
        let frame = wire::encode(&msg);
        let error = if frame.len() > self.config.max_outbox_bytes {
            Some(SequencingError::FrameTooLarge {
                bytes: frame.len(),
                max: self.config.max_outbox_bytes,
            })
        } else if self.kept_frames >= self.config.max_outbox_frames
            || self.kept_bytes + frame.len() > self.config.max_outbox_bytes
        {
            Some(SequencingError::Backpressure {
                frames: self.kept_frames,
                bytes: self.kept_bytes,
            })
        } else {
            None
        };
        if let Some(e) = error {
            msg.set_seq(original);
            return Err(fail(e, msg));
        }
        self.kept_frames += 1;
        self.kept_bytes += frame.len();
        let channel = self.tasks.entry(task_id).or_default();
        match channel.out_mut(attempt) {
            Some(log) => log.push(frame),
            None => {
                let mut log = OutboxLog::new();
                log.push(frame);
                push_exact(&mut channel.outbound, (attempt, log));
                self.outbound_streams += 1;
            }
        }
        Ok(msg)
    }

    /// As [`emit`](Self::emit), also returning the exact encoded frame that was kept
    /// (what to transmit).
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub fn emit_encoded(&mut self, msg: Message) -> Result<(Message, String), EmitError> {
        let msg = self.emit(msg)?;
        let frame = msg
            .task_id()
            .and_then(|t| self.tasks.get(t))
            .and_then(|c| {
                let attempt = match msg.message_type() {
                    MessageType::TaskAssign | MessageType::TaskCancel => None,
                    _ => Some(msg.attempt().unwrap_or(0)),
                };
                c.out(attempt)
            })
            .and_then(|log| log.kept().last())
            .map(|f| f.frame.clone())
            .unwrap_or_else(|| wire::encode(&msg));
        Ok((msg, frame))
    }

    /// Classify a received message as new (in order or ahead) or duplicate, without
    /// recording it.
    ///
    /// # Errors
    /// As [`receive`](Self::receive).
    pub fn classify(&self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        let tracker = self.tasks.get(k.task_id).and_then(|c| c.inb(k.attempt));
        let fresh = InboxTracker::new();
        let t = tracker.unwrap_or(&fresh);
        let arrival = t
            .classify(seq, self.config.inbound_window)
            .map_err(|r| self.refusal(r, msg, &k, t))?;
        if tracker.is_none() && self.inbound_streams >= self.config.max_streams {
            return Err(SequencingError::TooManyStreams {
                max: self.config.max_streams,
                inbound: true,
            });
        }
        Ok(arrival)
    }

    /// Record a received message (the seed's `receive`): [`Arrival::is_new`] tells
    /// whether to apply it.
    ///
    /// # Errors
    /// Local: `not_sequenced`, `missing_task_id`. Remote: `wrong_direction`,
    /// `invalid_seq` (seq 0), `beyond_window`, `too_many_streams`. Nothing is recorded on
    /// error.
    pub fn receive(&mut self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        let window = self.config.inbound_window;
        if let Some(channel) = self.tasks.get_mut(k.task_id) {
            if let Some(t) = channel.inb_mut(k.attempt) {
                return match t.record(seq, window) {
                    Ok(a) => Ok(a),
                    Err(r) => {
                        let t = t.clone();
                        Err(self.refusal(r, msg, &k, &t))
                    }
                };
            }
        }
        let mut t = InboxTracker::new();
        let arrival = t
            .record(seq, window)
            .map_err(|r| self.refusal(r, msg, &k, &InboxTracker::new()))?;
        if self.inbound_streams >= self.config.max_streams {
            return Err(SequencingError::TooManyStreams {
                max: self.config.max_streams,
                inbound: true,
            });
        }
        self.inbound_streams += 1;
        push_exact(
            &mut self.tasks.entry(k.task_id.to_owned()).or_default().inbound,
            (k.attempt, t),
        );
        Ok(arrival)
    }

    /// Record a received message only if it is exactly the next seq of its stream
    /// (the in-order delivery used by the session machines): returns
    /// [`Arrival::InOrder`] (recorded), [`Arrival::Duplicate`], or [`Arrival::Ahead`]
    /// **without** recording it — the caller holds the frame until the gap fills, and a
    /// held frame lost with the connection is simply replayed later.
    ///
    /// # Errors
    /// As [`receive`](Self::receive).
    pub fn accept_in_order(&mut self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        let window = self.config.inbound_window;
        if let Some(t) = self
            .tasks
            .get_mut(k.task_id)
            .and_then(|c| c.inb_mut(k.attempt))
        {
            return match t.classify(seq, window) {
                Ok(Arrival::InOrder) => t.record(seq, window).map_err(|_| unreachable_refusal()),
                Ok(a) => Ok(a),
                Err(r) => {
                    let t = t.clone();
                    Err(self.refusal(r, msg, &k, &t))
                }
            };
        }
        match InboxTracker::new().classify(seq, window) {
            Ok(Arrival::InOrder) => self.receive(msg),
            Ok(a) => {
                if self.inbound_streams >= self.config.max_streams {
                    return Err(SequencingError::TooManyStreams {
                        max: self.config.max_streams,
                        inbound: true,
                    });
                }
                Ok(a)
            }
            Err(r) => Err(self.refusal(r, msg, &k, &InboxTracker::new())),
        }
    }

    fn refusal(
        &self,
        r: InboxRefusal,
        msg: &Message,
        k: &Key<'_>,
        t: &InboxTracker,
    ) -> SequencingError {
        match r {
            InboxRefusal::Zero => SequencingError::InvalidSeq {
                message_type: msg.message_type(),
            },
            InboxRefusal::BeyondWindow => SequencingError::BeyondWindow {
                task_id: k.task_id.to_owned(),
                attempt: k.attempt,
                seq: msg.seq().unwrap_or(0),
                watermark: t.watermark(),
                window: self.config.inbound_window,
            },
        }
    }

    /// The last seq received contiguously on an inbound stream, if the stream exists.
    pub fn inbound_watermark(&self, task_id: &str, attempt: Option<u64>) -> Option<u64> {
        self.tasks
            .get(task_id)
            .and_then(|c| c.inb(attempt))
            .map(InboxTracker::watermark)
    }

    /// The outbound log of a stream, if it exists.
    pub fn outbound_log(&self, task_id: &str, attempt: Option<u64>) -> Option<&OutboxLog> {
        self.tasks.get(task_id).and_then(|c| c.out(attempt))
    }

    /// Per task, the last seq received contiguously — what goes into `hello.resume`.
    /// Only tasks with at least one received frame are listed (a task whose frames all
    /// arrived ahead of a gap is listed with 0). For the runner these are the command
    /// streams; for the hub, whose inbound streams are per attempt, the value is that of
    /// the task's highest attempt with a received frame.
    pub fn resume_map(&self) -> IndexMap<String, u64> {
        let mut out = IndexMap::new();
        for (task, channel) in &self.tasks {
            let best = channel
                .inbound
                .iter()
                .filter(|(_, t)| t.has_received())
                .max_by_key(|(a, _)| *a);
            if let Some((_, t)) = best {
                out.insert(task.clone(), t.watermark());
            }
        }
        out
    }

    /// Inbound positions to acknowledge: the watermark of every inbound stream that has
    /// received something.
    pub fn ack_positions(&self) -> Vec<Position> {
        let mut out = Vec::new();
        for (task, channel) in &self.tasks {
            for (attempt, t) in &channel.inbound {
                if t.watermark() > 0 {
                    out.push(Position::new(task.clone(), *attempt, t.watermark()));
                }
            }
        }
        out
    }

    /// For every outbound stream that has emitted something, the lowest seq it can
    /// still send (its first kept frame, or the next seq when everything was
    /// acknowledged). A receiver below `seq − 1` has lost frames it can no longer get.
    pub fn replay_from(&self) -> Vec<Position> {
        let mut out = Vec::new();
        for (task, channel) in &self.tasks {
            for (attempt, log) in &channel.outbound {
                if log.last_seq() > 0 {
                    out.push(Position::new(task.clone(), *attempt, log.first_available()));
                }
            }
        }
        out
    }

    /// Every kept (unacknowledged) frame, stream by stream in task order, ascending by
    /// seq within a stream: what a runner re-sends after a reconnect.
    pub fn unacked(&self) -> impl Iterator<Item = (&str, Option<u64>, &KeptFrame)> + '_ {
        self.tasks.iter().flat_map(|(task, c)| {
            c.outbound
                .iter()
                .flat_map(move |(a, log)| log.kept().map(move |f| (task.as_str(), *a, f)))
        })
    }

    /// The peer acknowledged everything up to `seq` on an outbound stream: drop those
    /// kept frames. Returns the number of frames dropped.
    ///
    /// An acknowledgement beyond the last emitted seq means the peer has seen seqs this
    /// state never emitted — the state is older than the peer's (restored from an old
    /// snapshot, or lost): everything kept is dropped and numbering continues after
    /// `seq`, so that new frames are not taken for duplicates. For the same reason an
    /// acknowledgement (`seq > 0`) of an unknown stream creates it with its next seq at
    /// `seq + 1` (unless `max_streams` is reached). [`last_emitted`](Self::last_emitted)
    /// tells beforehand whether an acknowledgement is ahead.
    pub fn ack(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        let Some(log) = self.tasks.get_mut(task_id).and_then(|c| c.out_mut(attempt)) else {
            if seq > 0
                && seq < crate::wire::MAX_SAFE_INTEGER
                && self.outbound_streams < self.config.max_streams
            {
                let mut log = OutboxLog::new();
                log.advance_to(seq + 1);
                push_exact(
                    &mut self.tasks.entry(task_id.to_owned()).or_default().outbound,
                    (attempt, log),
                );
                self.outbound_streams += 1;
            }
            return 0;
        };
        let (n, b) = log.trim_through(seq);
        if seq > log.last_seq() {
            log.advance_to(seq.saturating_add(1));
        }
        self.kept_frames -= n;
        self.kept_bytes -= b;
        n
    }

    /// The last seq emitted on an outbound stream (0 when the stream is unknown).
    pub fn last_emitted(&self, task_id: &str, attempt: Option<u64>) -> u64 {
        self.outbound_log(task_id, attempt)
            .map_or(0, OutboxLog::last_seq)
    }

    /// The sender of an inbound stream declared that it can no longer send seqs below
    /// `first_available`. When this end has not received everything below it, the
    /// watermark jumps to `first_available − 1` and the missing range `(from, to)` is
    /// returned; otherwise nothing changes and `None` is returned. An unknown stream is
    /// created only when there is a gap.
    ///
    /// # Errors
    /// `too_many_streams` (remote) when a stream would be created past the bound.
    pub fn skip_to(
        &mut self,
        task_id: &str,
        attempt: Option<u64>,
        first_available: u64,
    ) -> Result<Option<(u64, u64)>, SequencingError> {
        if let Some(t) = self.tasks.get_mut(task_id).and_then(|c| c.inb_mut(attempt)) {
            return Ok(t.skip_to(first_available));
        }
        if first_available <= 1 {
            return Ok(None);
        }
        if self.inbound_streams >= self.config.max_streams {
            return Err(SequencingError::TooManyStreams {
                max: self.config.max_streams,
                inbound: true,
            });
        }
        let mut t = InboxTracker::new();
        let gap = t.skip_to(first_available);
        self.inbound_streams += 1;
        push_exact(
            &mut self.tasks.entry(task_id.to_owned()).or_default().inbound,
            (attempt, t),
        );
        Ok(gap)
    }

    /// What to re-send to a peer that declared `resume` (task id → last seq received
    /// contiguously, as in `hello.resume`); the seed's `replay_for`.
    ///
    /// The declaration also acknowledges: kept frames at or below it are dropped.
    /// For the hub (command streams) a task missing from `resume` counts as declared 0,
    /// because a runner lists every task it has received anything for. For the runner,
    /// whose streams are per attempt, the value applies to the task's highest attempt;
    /// other streams count as undeclared (their whole kept tail is replayed, no resync).
    /// Task ids this state does not know are listed in [`Replay::unknown`] and create no
    /// state.
    pub fn replay_for(&mut self, resume: &IndexMap<String, u64>) -> Replay {
        let mut declared = Vec::new();
        for (task, channel) in &self.tasks {
            match self.role {
                Role::Hub => {
                    if channel.out(None).is_some() {
                        let seq = resume.get(task).copied().unwrap_or(0);
                        declared.push(Position::new(task.clone(), None, seq));
                    }
                }
                Role::Runner => {
                    if let (Some(seq), Some((a, _))) = (
                        resume.get(task),
                        channel.outbound.iter().max_by_key(|(a, _)| *a),
                    ) {
                        declared.push(Position::new(task.clone(), *a, *seq));
                    }
                }
            }
        }
        let mut replay = self.replay_positions(&declared);
        for task in resume.keys() {
            let known = self.tasks.get(task).is_some_and(|c| !c.outbound.is_empty());
            if !known {
                replay.unknown.push(task.clone());
            }
        }
        replay
    }

    /// What to re-send given exact per-stream declarations. A declared stream drops its
    /// kept frames at or below the position, reports a [`Resync`] when its kept log
    /// starts above `position + 1`, and replays the rest; a stream with no declaration
    /// replays its whole kept tail. Declarations for unknown streams are ignored (listed
    /// in [`Replay::unknown`] by task id); no state is created.
    pub fn replay_positions(&mut self, declared: &[Position]) -> Replay {
        let mut replay = Replay::default();
        for p in declared {
            let known = self
                .tasks
                .get(&p.task_id)
                .is_some_and(|c| c.out(p.attempt).is_some());
            if !known && !replay.unknown.contains(&p.task_id) {
                replay.unknown.push(p.task_id.clone());
            }
        }
        let index: HashMap<(&str, Option<u64>), u64> = declared
            .iter()
            .map(|p| ((p.task_id.as_str(), p.attempt), p.seq))
            .collect();
        let (mut frames_dropped, mut bytes_dropped) = (0, 0);
        for (task, channel) in &mut self.tasks {
            for (attempt, log) in &mut channel.outbound {
                let d = index.get(&(task.as_str(), *attempt)).copied();
                if let Some(d) = d {
                    if d > log.last_seq() {
                        let (n, b) = log.trim_through(u64::MAX);
                        frames_dropped += n;
                        bytes_dropped += b;
                        log.advance_to(d.saturating_add(1));
                        replay
                            .peer_ahead
                            .push(Position::new(task.clone(), *attempt, d));
                        continue;
                    }
                    let (n, b) = log.trim_through(d);
                    frames_dropped += n;
                    bytes_dropped += b;
                    let first = log.first_available();
                    if first > d + 1 {
                        replay.resync.push(Resync {
                            task_id: task.clone(),
                            attempt: *attempt,
                            declared: d,
                            missing_from: d + 1,
                            missing_to: first - 1,
                        });
                    }
                }
                if log.kept().len() > 0 {
                    replay.streams.push(StreamReplay {
                        task_id: task.clone(),
                        attempt: *attempt,
                        frames: log.kept().cloned().collect(),
                    });
                }
            }
        }
        self.kept_frames -= frames_dropped;
        self.kept_bytes -= bytes_dropped;
        replay
    }

    /// Drop every stream of a task in both directions (e.g. after its final report was
    /// applied and acknowledged). Frames of the task received later start a fresh
    /// stream, so forget a task only when the peer cannot send it anything more.
    /// Returns `true` when the task was known.
    pub fn forget_task(&mut self, task_id: &str) -> bool {
        let Some(channel) = self.tasks.shift_remove(task_id) else {
            return false;
        };
        self.outbound_streams -= channel.outbound.len();
        self.inbound_streams -= channel.inbound.len();
        for (_, log) in &channel.outbound {
            self.kept_frames -= log.kept().len();
            self.kept_bytes -= log.kept_bytes();
        }
        true
    }

    /// Estimated heap and inline bytes held by this state: the task table (key strings,
    /// entries, hash index), the per-stream vectors, trackers and kept frames. An
    /// estimate from capacities and element sizes, not an allocator measurement.
    pub fn memory_footprint(&self) -> usize {
        use std::mem::size_of;
        let mut total = size_of::<Self>();
        // IndexMap: entries vector (hash + key + value) plus the index table.
        total += self.tasks.capacity() * (size_of::<(u64, String, TaskChannel)>() + 8 + 1);
        for (task, channel) in &self.tasks {
            total += task.capacity();
            total += channel.outbound.capacity() * size_of::<(Option<u64>, OutboxLog)>();
            total += channel.inbound.capacity() * size_of::<(Option<u64>, InboxTracker)>();
            for (_, log) in &channel.outbound {
                total += log.heap_bytes();
            }
            for (_, t) in &channel.inbound {
                total += t.heap_bytes();
            }
        }
        total
    }

    /// Drop a task channel left with no streams (internal housekeeping after restore).
    pub(crate) fn prune_empty(&mut self) {
        self.tasks.retain(|_, c| !c.is_empty());
    }
}
