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
///
/// # Provisional numbering
///
/// A state that was lost or restored from an older snapshot does not know how far the
/// peer got on its outbound streams: the peer may have seen seqs this state never
/// emitted. After [`mark_unconfirmed`](Self::mark_unconfirmed) (the session machines call
/// it for every state they are given), frames stamped before the peer's position is known
/// are *provisional* ([`OutboxLog::unconfirmed_from`]) and must not be transmitted yet.
/// When the peer declares a position at or above the first provisional seq
/// ([`ack`](Self::ack), [`replay_for`](Self::replay_for),
/// [`replay_positions`](Self::replay_positions)), the provisional frames are re-stamped
/// after that position (in order, contiguously) instead of being trimmed, so none is
/// lost or taken for a duplicate; [`confirm_all`](Self::confirm_all) ends the provisional
/// period once every position is known. A declaration beyond the last emitted seq of a
/// stream without provisional frames re-stamps every kept frame after it (the state is
/// older than the peer's; keeping every frame is preferred over guessing which were
/// seen). A state from [`new`](Self::new) has no provisional frames (the seed's model:
/// what is emitted is final).
///
/// # Forgotten tasks
///
/// [`forget_task`](Self::forget_task) drops a task's streams but keeps a *tombstone*
/// (per stream: last seq emitted, last seq received contiguously), bounded by
/// `max_tombstones` (oldest evicted first): late or replayed frames of a forgotten stream
/// are duplicates, acknowledgements and `replay_from` declarations for it create no
/// state, and emitting on it (or receiving a seq above its tombstone) revives the task
/// with its numbering intact.
#[derive(Debug, Clone)]
pub struct ConnectionState {
    pub(crate) role: Role,
    pub(crate) config: SequencingConfig,
    pub(crate) tasks: IndexMap<String, TaskChannel>,
    pub(crate) outbound_streams: usize,
    pub(crate) inbound_streams: usize,
    pub(crate) kept_frames: usize,
    pub(crate) kept_bytes: usize,
    pub(crate) forgotten: IndexMap<String, Tombstone>,
    /// The peer's positions are known (not persisted: a restored state starts
    /// unconfirmed).
    pub(crate) confirmed: bool,
}

/// Equality compares what a snapshot persists (the in-memory "positions confirmed"
/// flag is left out).
impl PartialEq for ConnectionState {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.config == other.config
            && self.tasks == other.tasks
            && self.outbound_streams == other.outbound_streams
            && self.inbound_streams == other.inbound_streams
            && self.kept_frames == other.kept_frames
            && self.kept_bytes == other.kept_bytes
            && self.forgotten == other.forgotten
    }
}

impl Eq for ConnectionState {}

/// What is remembered of a forgotten task: per outbound stream the last seq emitted, per
/// inbound stream the last seq received contiguously.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tombstone {
    pub(crate) outbound: Vec<(Option<u64>, u64)>,
    pub(crate) inbound: Vec<(Option<u64>, u64)>,
}

impl Tombstone {
    fn inbound(&self, attempt: Option<u64>) -> Option<u64> {
        self.inbound
            .iter()
            .find(|(a, _)| *a == attempt)
            .map(|(_, w)| *w)
    }
}

/// Give a kept frame a new seq: decode its exact bytes, set the seq, re-encode (unknown
/// fields are kept in place). Kept frames always decode (checked on emit and restore);
/// should one not, its bytes are kept as they are.
fn restamp(frame: &KeptFrame, seq: u64) -> KeptFrame {
    match wire::decode(frame.frame.as_bytes(), false) {
        Ok(mut m) => {
            m.set_seq(seq);
            KeptFrame {
                seq,
                frame: wire::encode(&m),
            }
        }
        Err(_) => KeptFrame {
            seq,
            frame: frame.frame.clone(),
        },
    }
}

/// Apply a peer's declared position `d` (it has everything up to `d`) to an outbound
/// log: seen frames are trimmed, provisional frames that collide with seqs the peer has
/// seen are re-stamped after `d`, and the log is confirmed. Returns `true` when the peer
/// was ahead of this log (a collision, or `d` beyond the last emitted seq).
fn reconcile(log: &mut OutboxLog, d: u64) -> bool {
    let next = log.next_seq();
    let m = if log.is_confirmed() {
        if d >= next {
            // The peer is ahead of everything emitted on a stream whose position was
            // known: never lose a kept frame — re-stamp them all after `d`.
            log.first_available()
        } else {
            u64::MAX
        }
    } else {
        log.unconfirmed_from()
    };
    let ahead = d >= m;
    if ahead {
        let provisional = log.kept().filter(|f| f.seq >= m).count() as u64;
        if d.saturating_add(provisional) > wire::MAX_SAFE_INTEGER {
            // Re-stamping would leave the seq space: ignore the declaration.
            return false;
        }
        let kept = log.kept_mut();
        // Frames below the provisional range were seen (they are at or below `d`).
        while kept.front().is_some_and(|f| f.seq < m) {
            kept.pop_front();
        }
        let mut s = d;
        for f in kept.iter_mut() {
            s = s.saturating_add(1);
            *f = restamp(f, s);
        }
        log.set_next_seq(s.saturating_add(1));
    } else {
        log.trim_through(d);
    }
    log.confirm();
    ahead
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
            forgotten: IndexMap::new(),
            confirmed: true,
        }
    }

    /// Recount the kept frames and bytes (after re-stamping or trimming many logs).
    fn recount(&mut self) {
        let (mut n, mut b) = (0, 0);
        for c in self.tasks.values() {
            for (_, log) in &c.outbound {
                n += log.kept().len();
                b += log.kept_bytes();
            }
        }
        self.kept_frames = n;
        self.kept_bytes = b;
    }

    /// `true` once the peer's positions are known ([`confirm_all`](Self::confirm_all)):
    /// frames stamped from then on are final.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed
    }

    /// The peer's position is known for every stream (the hub: after applying a complete
    /// `hello.resume`; the runner: once the hub's post-`hello` acknowledgements have
    /// arrived). Provisional frames still kept are final from now on (the peer has seen
    /// none of their seqs), and streams created later are numbered from 1 as final.
    pub fn confirm_all(&mut self) {
        for c in self.tasks.values_mut() {
            for (_, log) in &mut c.outbound {
                log.confirm();
            }
        }
        self.confirmed = true;
    }

    /// Treat every frame stamped from now on as provisional until the peer's positions
    /// are known again: for a state that may be older than the peer's (fresh after a
    /// loss, or restored). The session machines call it on every state they are given,
    /// and transmit provisional frames only once confirmed.
    pub fn mark_unconfirmed(&mut self) {
        for c in self.tasks.values_mut() {
            for (_, log) in &mut c.outbound {
                log.mark_unconfirmed();
            }
        }
        self.confirmed = false;
    }

    /// `true` when no frame of the task is kept for replay: every frame emitted on it was
    /// acknowledged by the peer (also `true` for unknown and forgotten tasks). Once the
    /// task's terminal frame (its report, or the last command) is acknowledged, the task
    /// can be [forgotten](Self::forget_task) safely.
    pub fn is_fully_acknowledged(&self, task_id: &str) -> bool {
        self.tasks
            .get(task_id)
            .is_none_or(|c| c.outbound.iter().all(|(_, log)| log.kept().len() == 0))
    }

    /// `true` when the task was forgotten and its tombstone is still kept.
    pub fn is_forgotten(&self, task_id: &str) -> bool {
        self.forgotten.contains_key(task_id)
    }

    /// Number of tombstones kept (forgotten tasks, at most `max_tombstones`).
    pub fn forgotten_count(&self) -> usize {
        self.forgotten.len()
    }

    /// Bring a forgotten task back (its numbering continues): `false` when that would
    /// exceed `max_streams`.
    fn revive(&mut self, task_id: &str) -> bool {
        let Some(t) = self.forgotten.get(task_id) else {
            return true;
        };
        if self.outbound_streams + t.outbound.len() > self.config.max_streams
            || self.inbound_streams + t.inbound.len() > self.config.max_streams
        {
            return false;
        }
        let Some(t) = self.forgotten.shift_remove(task_id) else {
            return true;
        };
        let window = self.config.inbound_window;
        let confirmed = self.confirmed;
        let channel = self.tasks.entry(task_id.to_owned()).or_default();
        for (a, last) in t.outbound {
            let mut log = OutboxLog::new();
            log.advance_to(last.saturating_add(1));
            if !confirmed {
                log.mark_unconfirmed();
            }
            channel.outbound.push((a, log));
            self.outbound_streams += 1;
        }
        for (a, w) in t.inbound {
            channel
                .inbound
                .push((a, InboxTracker::from_parts(w, [], window)));
            self.inbound_streams += 1;
        }
        true
    }

    /// An empty outbound log for a new stream: provisional until the peer's positions
    /// are known.
    fn new_log(&self) -> OutboxLog {
        if self.confirmed {
            OutboxLog::new()
        } else {
            OutboxLog::unconfirmed()
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
        if let Some(t) = msg.task_id() {
            if self.forgotten.contains_key(t) && !self.revive(t) {
                return Err(fail(
                    SequencingError::TooManyStreams {
                        max: self.config.max_streams,
                        inbound: false,
                    },
                    msg,
                ));
            }
        }
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
        let fresh = self.new_log();
        let channel = self.tasks.entry(task_id).or_default();
        match channel.out_mut(attempt) {
            Some(log) => log.push(frame),
            None => {
                let mut log = fresh;
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
        if let Some(a) = self.tombstone_arrival(&k, seq) {
            return Ok(a);
        }
        let tracker = self.tasks.get(k.task_id).and_then(|c| c.inb(k.attempt));
        let fresh = match self
            .forgotten
            .get(k.task_id)
            .and_then(|t| t.inbound(k.attempt))
        {
            Some(w) => InboxTracker::from_parts(w, [], self.config.inbound_window),
            None => InboxTracker::new(),
        };
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
        if let Some(a) = self.tombstone_arrival(&k, seq) {
            return Ok(a);
        }
        self.revive_for_receive(&k)?;
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
        if let Some(a) = self.tombstone_arrival(&k, seq) {
            return Ok(a);
        }
        if self.forgotten.contains_key(k.task_id) {
            // Only an in-order seq revives the task; anything else is classified
            // against the tombstone without reviving it.
            let w = self
                .forgotten
                .get(k.task_id)
                .and_then(|t| t.inbound(k.attempt));
            let t = InboxTracker::from_parts(w.unwrap_or(0), [], self.config.inbound_window);
            match t.classify(seq, self.config.inbound_window) {
                Ok(Arrival::InOrder) => self.revive_for_receive(&k)?,
                Ok(a) => return Ok(a),
                Err(r) => return Err(self.refusal(r, msg, &k, &t)),
            }
        }
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

    /// A frame of a forgotten stream at or below its tombstone: a duplicate.
    fn tombstone_arrival(&self, k: &Key<'_>, seq: u64) -> Option<Arrival> {
        let w = self.forgotten.get(k.task_id)?.inbound(k.attempt)?;
        (seq >= 1 && seq <= w).then_some(Arrival::Duplicate)
    }

    fn revive_for_receive(&mut self, k: &Key<'_>) -> Result<(), SequencingError> {
        if self.forgotten.contains_key(k.task_id) && !self.revive(k.task_id) {
            return Err(SequencingError::TooManyStreams {
                max: self.config.max_streams,
                inbound: true,
            });
        }
        Ok(())
    }

    /// The watermark to acknowledge for an inbound stream, tombstones included.
    pub(crate) fn ack_watermark(&self, task_id: &str, attempt: Option<u64>) -> Option<u64> {
        self.inbound_watermark(task_id, attempt)
            .or_else(|| self.forgotten.get(task_id)?.inbound(attempt))
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
    /// An acknowledgement at or above the stream's first provisional seq (see
    /// "Provisional numbering" above), or beyond the last emitted seq, means the peer has
    /// seen seqs this state re-used (it is older than the peer's: restored from an old
    /// snapshot, or lost): the provisional frames are **re-stamped** after `seq`, in
    /// order, and numbering continues after them — nothing kept is lost, and the caller
    /// re-sends them ([`unacked`](Self::unacked)); 0 is returned. For the same reason an
    /// acknowledgement (`seq > 0`) of an unknown stream creates it with its next seq at
    /// `seq + 1` (unless `max_streams` is reached); one of a forgotten task, or above
    /// 2^53 − 1, is ignored. [`is_ahead`](Self::is_ahead) tells beforehand whether an
    /// acknowledgement is ahead.
    pub fn ack(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        if seq > crate::wire::MAX_SAFE_INTEGER || self.forgotten.contains_key(task_id) {
            return 0;
        }
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
        let before = log.kept().len();
        let bytes_before = log.kept_bytes();
        let ahead = reconcile(log, seq);
        let after = log.kept().len();
        let bytes_after = log.kept_bytes();
        self.kept_frames = self.kept_frames - before + after;
        self.kept_bytes = self.kept_bytes - bytes_before + bytes_after;
        if ahead {
            0
        } else {
            before - after
        }
    }

    /// The application knows the peer holds everything up to `seq` on one of this end's
    /// outbound streams (e.g. a runner's checkpoint against a hub that sends no
    /// acknowledgements): drop the kept frames at or below `seq`. Unlike
    /// [`ack`](Self::ack) it never re-stamps, moves numbering or creates a stream.
    /// Returns the number of frames dropped.
    pub fn trim_through(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        let Some(log) = self.tasks.get_mut(task_id).and_then(|c| c.out_mut(attempt)) else {
            return 0;
        };
        let (n, b) = log.trim_through(seq);
        self.kept_frames -= n;
        self.kept_bytes -= b;
        n
    }

    /// `true` when a declared position `seq` of an outbound stream is ahead of this
    /// state (it collides with provisional frames or lies beyond the last emitted seq).
    pub fn is_ahead(&self, task_id: &str, attempt: Option<u64>, seq: u64) -> bool {
        match self.outbound_log(task_id, attempt) {
            None => false,
            Some(log) if log.is_confirmed() => seq > log.last_seq(),
            Some(log) => seq >= log.unconfirmed_from(),
        }
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
    /// created only when there is a gap; a forgotten task is left alone (`None`).
    ///
    /// # Errors
    /// `too_many_streams` (remote) when a stream would be created past the bound.
    pub fn skip_to(
        &mut self,
        task_id: &str,
        attempt: Option<u64>,
        first_available: u64,
    ) -> Result<Option<(u64, u64)>, SequencingError> {
        if self.forgotten.contains_key(task_id) {
            return Ok(None);
        }
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
    /// state; forgotten tasks are ignored; a value above 2^53 − 1 counts as absent.
    /// Provisional frames that collide with a declared position are re-stamped after it
    /// and replayed (the stream is listed in [`Replay::peer_ahead`]).
    pub fn replay_for(&mut self, resume: &IndexMap<String, u64>) -> Replay {
        let mut declared = Vec::new();
        for (task, channel) in &self.tasks {
            match self.role {
                Role::Hub => {
                    if channel.out(None).is_some() {
                        // An entry above 2^53 − 1 is invalid and counts as absent.
                        let seq = resume
                            .get(task)
                            .copied()
                            .filter(|s| *s <= wire::MAX_SAFE_INTEGER)
                            .unwrap_or(0);
                        declared.push(Position::new(task.clone(), None, seq));
                    }
                }
                Role::Runner => {
                    if let (Some(seq), Some((a, _))) = (
                        resume.get(task).filter(|s| **s <= wire::MAX_SAFE_INTEGER),
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
            if !known && !self.forgotten.contains_key(task) && !replay.unknown.contains(task) {
                replay.unknown.push(task.clone());
            }
        }
        replay
    }

    /// What to re-send given exact per-stream declarations. A declared stream drops its
    /// kept frames at or below the position, reports a [`Resync`] when its kept log
    /// starts above `position + 1`, and replays the rest; a stream with no declaration
    /// replays its whole kept tail. A declaration at or above the stream's first
    /// provisional seq, or beyond its last emitted seq, lists the stream in
    /// [`Replay::peer_ahead`] and re-stamps its provisional frames after the declared
    /// position (they are replayed with their new seqs; nothing is dropped unseen).
    /// Declarations for unknown streams are ignored (listed in [`Replay::unknown`] by
    /// task id; forgotten tasks are not listed); declarations above 2^53 − 1 are
    /// ignored. No state is created.
    pub fn replay_positions(&mut self, declared: &[Position]) -> Replay {
        let mut replay = Replay::default();
        for p in declared {
            let known = self
                .tasks
                .get(&p.task_id)
                .is_some_and(|c| c.out(p.attempt).is_some());
            if !known
                && !self.forgotten.contains_key(&p.task_id)
                && !replay.unknown.contains(&p.task_id)
            {
                replay.unknown.push(p.task_id.clone());
            }
        }
        let index: HashMap<(&str, Option<u64>), u64> = declared
            .iter()
            .filter(|p| p.seq <= wire::MAX_SAFE_INTEGER)
            .map(|p| ((p.task_id.as_str(), p.attempt), p.seq))
            .collect();
        for (task, channel) in &mut self.tasks {
            for (attempt, log) in &mut channel.outbound {
                if let Some(&d) = index.get(&(task.as_str(), *attempt)) {
                    if reconcile(log, d) {
                        replay
                            .peer_ahead
                            .push(Position::new(task.clone(), *attempt, d));
                    } else {
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
        self.recount();
        replay
    }

    /// Drop every stream of a task in both directions and keep a tombstone of it (see
    /// "Forgotten tasks" above). Safe once [`is_fully_acknowledged`](Self::is_fully_acknowledged)
    /// holds and the task's last inbound frame was applied: kept (unacknowledged) frames
    /// are dropped with the task. Late or replayed frames of the task are then
    /// duplicates; forgotten streams are left out of `resume_map`, `ack_positions` and
    /// `replay_from`. At most `max_tombstones` are kept; beyond that the oldest is
    /// evicted, and an evicted task is unknown again (its frames would start a fresh
    /// stream). Returns `true` when the task was known.
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
        let tomb = Tombstone {
            outbound: channel
                .outbound
                .iter()
                .map(|(a, l)| (*a, l.last_seq()))
                .collect(),
            inbound: channel
                .inbound
                .iter()
                .map(|(a, t)| (*a, t.watermark()))
                .collect(),
        };
        if self.config.max_tombstones > 0 {
            while self.forgotten.len() >= self.config.max_tombstones {
                self.forgotten.shift_remove_index(0);
            }
            self.forgotten.insert(task_id.to_owned(), tomb);
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
        total += self.forgotten.capacity() * (size_of::<(u64, String, Tombstone)>() + 8 + 1);
        for (task, t) in &self.forgotten {
            total += task.capacity()
                + (t.outbound.capacity() + t.inbound.capacity()) * size_of::<(Option<u64>, u64)>();
        }
        total
    }

    /// Drop a task channel left with no streams (internal housekeeping after restore).
    pub(crate) fn prune_empty(&mut self) {
        self.tasks.retain(|_, c| !c.is_empty());
    }
}
