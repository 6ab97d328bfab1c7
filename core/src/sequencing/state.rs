//! [`ConnectionState`]: both directions of one hub↔runner connection.

use std::collections::HashMap;

use indexmap::IndexMap;

use crate::wire::{self, Message, MessageType};

use super::error::{EmitError, SequencingError};
use super::inbox::{Arrival, InboxRefusal, InboxTracker};
use super::outbox::{KeptFrame, Numbering, OutboxLog};
use super::{Position, Role, SequencingConfig};

/// All streams of one task, in both directions. Command streams have attempt `None`,
/// runner streams `Some(attempt)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskChannel {
    pub(crate) outbound: Vec<(Option<u64>, OutboxLog)>,
    pub(crate) inbound: Vec<(Option<u64>, InboxTracker)>,
    /// Hub: the `attempt` of the latest `task.assign` stamped for the task (0: none, or
    /// an assignment without an attempt). See [`ConnectionState::assigned_attempt`].
    pub(crate) assigned_attempt: u64,
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

    /// The task's entry in [`ConnectionState::resume_map`]: the last seq received
    /// contiguously on the task's highest inbound stream that has received anything
    /// (`None` when no inbound stream has, and the task is left out of the map). A
    /// stream restored or revived with nothing received (watermark 0, nothing ahead)
    /// does not count.
    pub fn resume_position(&self) -> Option<u64> {
        self.inbound
            .iter()
            .filter(|(_, t)| t.has_received())
            .max_by_key(|(a, _)| *a)
            .map(|(_, t)| t.watermark())
    }

    /// Hub: the `attempt` of the latest `task.assign` stamped for the task, 0 when none
    /// (or when it carried no attempt).
    pub fn assigned_attempt(&self) -> u64 {
        self.assigned_attempt
    }

    /// [`resume_position`](Self::resume_position), 0 when nothing was received: what
    /// `resume_map` declares for the task.
    pub fn last_received(&self) -> u64 {
        self.resume_position().unwrap_or(0)
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
    /// Streams whose kept frames had to be re-stamped but could not be (a kept frame no
    /// longer decodes; an internal invariant broke): one
    /// [`SequencingError::RestampFailed`] per such stream. The frames concerned were
    /// dropped, never replayed under a seq they do not carry; empty in practice.
    pub failed: Vec<SequencingError>,
}

impl Resync {
    /// The JSON form every binding hands out: `{task_id, attempt?, declared,
    /// missing_from, missing_to}` (`attempt` only for progress streams).
    pub fn to_value(&self) -> crate::json::Value {
        let mut m = crate::json::Object::new();
        m.insert("task_id", self.task_id.as_str());
        if let Some(a) = self.attempt {
            m.insert("attempt", a);
        }
        m.insert("declared", self.declared);
        m.insert("missing_from", self.missing_from);
        m.insert("missing_to", self.missing_to);
        crate::json::Value::Object(m)
    }
}

impl StreamReplay {
    /// The JSON form: `{task_id, attempt?, frames: [frame text, ...]}`.
    pub fn to_value(&self) -> crate::json::Value {
        let mut m = crate::json::Object::new();
        m.insert("task_id", self.task_id.as_str());
        if let Some(a) = self.attempt {
            m.insert("attempt", a);
        }
        m.insert(
            "frames",
            crate::json::Value::Array(
                self.frames
                    .iter()
                    .map(|f| crate::json::Value::from(f.frame.as_str()))
                    .collect(),
            ),
        );
        crate::json::Value::Object(m)
    }
}

impl Replay {
    /// The JSON form every binding hands out: `{streams, resync, peer_ahead, unknown}`
    /// (schema `conformance/schema/api/`). `failed` is not part of it: a binding raises
    /// the first such error (`restamp_failed`) instead of returning the report.
    pub fn to_value(&self) -> crate::json::Value {
        let mut m = crate::json::Object::new();
        m.insert(
            "streams",
            crate::json::Value::Array(self.streams.iter().map(StreamReplay::to_value).collect()),
        );
        m.insert(
            "resync",
            crate::json::Value::Array(self.resync.iter().map(Resync::to_value).collect()),
        );
        m.insert("peer_ahead", Position::list_to_value(&self.peer_ahead));
        m.insert(
            "unknown",
            crate::json::Value::Array(
                self.unknown
                    .iter()
                    .map(|u| crate::json::Value::from(u.as_str()))
                    .collect(),
            ),
        );
        crate::json::Value::Object(m)
    }

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
        self.streams.is_empty()
            && self.resync.is_empty()
            && self.peer_ahead.is_empty()
            && self.failed.is_empty()
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
///   (the same without recording), [`accept_in_order`](Self::accept_in_order) (record
///   only the next seq), [`skip_to`](Self::skip_to) (the sender can no longer send older
///   seqs);
/// * reconnecting: [`resume_map`](Self::resume_map) (what to declare in `hello.resume`),
///   [`replay_for`](Self::replay_for) / [`replay_positions`](Self::replay_positions)
///   (what to re-send), [`unacked`](Self::unacked), [`ack_positions`](Self::ack_positions),
///   [`replay_from`](Self::replay_from);
/// * housekeeping: [`forget_task`](Self::forget_task), [`snapshot`](Self::snapshot),
///   [`restore`](Self::restore), [`memory_footprint`](Self::memory_footprint).
///
/// # Lifecycle
///
/// Every task id is in exactly one of three states — **absent** (never seen, or its
/// tombstone was evicted), **live** (its streams are held) or **forgotten** (only a
/// tombstone is held) — and every outbound stream of a live task numbers either
/// **final** (the peer's position on it is known: a stamped seq is never changed) or
/// **provisional from `p`** (seqs from `p` on were stamped without knowing the peer's
/// position, see "Provisional numbering"). The connection as a whole either *knows*
/// the peer's positions or not ([`is_confirmed`](Self::is_confirmed)); while it does not,
/// every stream it creates or revives numbers provisionally. All transitions:
///
/// | from | event | to | effect |
/// |------|-------|----|--------|
/// | absent | `emit` | live | new outbound stream from seq 1: final if positions are known, else provisional from 1 |
/// | absent | `receive` / `accept_in_order` of a new seq (in order for `accept_in_order`); `skip_to` with a gap; `ack` with seq > 0 | live | new inbound stream (`ack`: outbound stream, final, numbered after the acknowledged seq) |
/// | absent | anything else (`classify`, a refused frame, `replay_*` declarations) | absent | nothing recorded (`replay_*` lists the id in [`Replay::unknown`]) |
/// | live | `emit`, `receive`, `skip_to`, `trim_through` | live | the stream's numbering, kept log or watermark moves on |
/// | live, stream final | `ack` / `replay_*` declaration ≤ last emitted seq | live, final | kept frames up to it dropped |
/// | live, stream final | `ack` / `replay_*` declaration > last emitted seq | live, final | every kept frame re-stamped after the declaration (peer ahead) |
/// | live, stream final | [`mark_unconfirmed`](Self::mark_unconfirmed) | live, provisional from next seq | — |
/// | live, provisional from `p` | `ack` / `replay_*` declaration `d` < `p` | live, final | kept frames up to `d` dropped |
/// | live, provisional from `p` | `ack` / `replay_*` declaration `d` ≥ `p` | live, final | frames below `p` dropped, frames from `p` re-stamped after `d` (peer ahead) |
/// | live, provisional | [`confirm_all`](Self::confirm_all) | live, final | provisional frames become final |
/// | live | [`forget_task`](Self::forget_task) | forgotten (absent when `max_tombstones` is 0) | streams and kept frames dropped; tombstone keeps each stream's last emitted seq / watermark; the oldest tombstone beyond `max_tombstones` is evicted (→ absent) |
/// | forgotten | `receive` / `classify` / `accept_in_order` of a seq ≤ its tombstone; `ack`, `skip_to`, `trim_through`, `replay_*` declarations | forgotten | a duplicate / ignored, no state created |
/// | forgotten | `emit`; `receive` of a new seq above the tombstone (`accept_in_order`: the next seq) | live | *revive*: every tombstoned stream comes back with its numbering (last emitted seq, watermark), provisional if positions are unknown; then the event applies |
///
/// Revival is the only way out of *forgotten* and happens in one place; a refusal
/// (`too_many_streams`, `beyond_window`, `backpressure`, …) leaves the state as it was.
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
/// what is emitted is final). Re-stamping decodes the kept bytes, sets the seq and
/// re-encodes; a frame that no longer decodes is dropped and reported
/// ([`SequencingError::RestampFailed`]), never sent under a wrong seq.
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
    /// Every live or forgotten task, live ones in the order they were first seen (or
    /// revived), forgotten ones in the order they were forgotten.
    pub(crate) tasks: IndexMap<String, TaskEntry>,
    pub(crate) outbound_streams: usize,
    pub(crate) inbound_streams: usize,
    pub(crate) kept_frames: usize,
    pub(crate) kept_bytes: usize,
    /// Number of [`TaskEntry::Forgotten`] entries.
    pub(crate) tombstones: usize,
    /// Whether the peer's positions are known (not persisted: a restored state with
    /// provisional frames starts unknown).
    pub(crate) positions: PeerPositions,
}

/// The lifecycle state of one task id that is not absent (see the table on
/// [`ConnectionState`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TaskEntry {
    /// The task's streams are held.
    Live(TaskChannel),
    /// Only the tombstone of the task is held.
    Forgotten(Tombstone),
}

impl TaskEntry {
    fn live(&self) -> Option<&TaskChannel> {
        match self {
            TaskEntry::Live(c) => Some(c),
            TaskEntry::Forgotten(_) => None,
        }
    }

    fn live_mut(&mut self) -> Option<&mut TaskChannel> {
        match self {
            TaskEntry::Live(c) => Some(c),
            TaskEntry::Forgotten(_) => None,
        }
    }

    fn tombstone(&self) -> Option<&Tombstone> {
        match self {
            TaskEntry::Live(_) => None,
            TaskEntry::Forgotten(t) => Some(t),
        }
    }
}

/// Whether the peer's positions on this end's outbound streams are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerPositions {
    /// Known: new streams number final.
    Known,
    /// Unknown (after [`ConnectionState::mark_unconfirmed`]): new and revived streams
    /// number provisionally.
    Unknown,
}

/// Equality compares what a snapshot persists (the in-memory "positions known" state
/// and the interleaving of live and forgotten tasks are left out).
impl PartialEq for ConnectionState {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.config == other.config
            && self.tasks == other.tasks
            && self.outbound_streams == other.outbound_streams
            && self.inbound_streams == other.inbound_streams
            && self.kept_frames == other.kept_frames
            && self.kept_bytes == other.kept_bytes
            && self.tombstones == other.tombstones
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

    fn outbound(&self, attempt: Option<u64>) -> Option<u64> {
        self.outbound
            .iter()
            .find(|(a, _)| *a == attempt)
            .map(|(_, s)| *s)
    }
}

/// Give a kept frame a new seq: decode its exact bytes, set the seq, re-encode (unknown
/// fields are kept in place). `None` when the bytes no longer decode (kept frames are
/// checked on emit and restore, so this is an internal invariant breaking).
fn restamp(frame: &KeptFrame, seq: u64) -> Option<KeptFrame> {
    let mut m = wire::decode(frame.frame.as_bytes(), false).ok()?;
    m.set_seq(seq);
    Some(KeptFrame {
        seq,
        frame: wire::encode(&m),
    })
}

/// What [`reconcile`] did to one outbound log.
struct Reconciled {
    /// The peer was ahead of the log (a collision, or a declaration beyond the last
    /// emitted seq): kept frames were re-stamped after the declaration.
    ahead: bool,
    /// Seqs of kept frames that could not be re-stamped and were dropped.
    failed: Vec<u64>,
}

impl Reconciled {
    fn error(&self, task_id: &str, attempt: Option<u64>) -> Option<SequencingError> {
        self.failed
            .first()
            .map(|&seq| SequencingError::RestampFailed {
                task_id: task_id.to_owned(),
                attempt,
                seq,
            })
    }
}

/// Apply a peer's declared position `d` (it has everything up to `d`) to an outbound
/// log: seen frames are trimmed, provisional frames that collide with seqs the peer has
/// seen are re-stamped after `d`, and the log becomes final.
fn reconcile(log: &mut OutboxLog, d: u64) -> Reconciled {
    let next = log.next_seq();
    // The first seq the peer may have seen under other content.
    let collide_from = if log.is_confirmed() {
        // The peer is ahead of everything emitted on a stream whose position was
        // known: never lose a kept frame — re-stamp them all after `d`.
        (d >= next).then(|| log.first_available())
    } else {
        Some(log.unconfirmed_from())
    };
    let mut failed = Vec::new();
    let ahead = match collide_from {
        Some(m) if d >= m => {
            let provisional = log.kept().filter(|f| f.seq >= m).count();
            let provisional = u64::try_from(provisional).unwrap_or(u64::MAX);
            if d.saturating_add(provisional) > wire::MAX_SAFE_INTEGER {
                // Re-stamping would leave the seq space: ignore the declaration.
                return Reconciled {
                    ahead: false,
                    failed,
                };
            }
            let kept = log.kept_mut();
            // Frames below the provisional range were seen (they are at or below `d`).
            while kept.front().is_some_and(|f| f.seq < m) {
                kept.pop_front();
            }
            let old = std::mem::take(kept);
            let mut s = d;
            for f in old {
                // s < d + provisional ≤ 2^53 − 1: no overflow.
                let seq = s.saturating_add(1);
                match restamp(&f, seq) {
                    Some(nf) => {
                        kept.push_back(nf);
                        s = seq;
                    }
                    None => failed.push(f.seq),
                }
            }
            log.set_next_seq(s.saturating_add(1));
            true
        }
        _ => {
            log.trim_through(d);
            false
        }
    };
    log.confirm();
    Reconciled { ahead, failed }
}

/// Push without the default growth to 4 elements: most tasks have one stream per
/// direction, and this vector exists once per task.
fn push_exact<T>(v: &mut Vec<T>, item: T) {
    v.reserve_exact(1);
    v.push(item);
}

/// The stream a message belongs to, once checked.
struct Key<'a> {
    task_id: &'a str,
    attempt: Option<u64>,
}

/// The inbound tracker of a live stream, if the stream exists (the receive fast path).
fn live_inbound<'t>(
    tasks: &'t mut IndexMap<String, TaskEntry>,
    k: &Key<'_>,
) -> Option<&'t mut InboxTracker> {
    tasks
        .get_mut(k.task_id)
        .and_then(TaskEntry::live_mut)
        .and_then(|c| c.inb_mut(k.attempt))
}

/// Where an inbound frame was classified (see [`ConnectionState::inbound_arrival`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InboundAt {
    /// The stream exists.
    Live,
    /// The task is forgotten: classified against its tombstone.
    Forgotten,
    /// Neither: the stream would be created.
    Absent,
}

/// The error for a refused seq.
fn refusal(
    r: InboxRefusal,
    msg: &Message,
    k: &Key<'_>,
    watermark: u64,
    window: u64,
) -> SequencingError {
    match r {
        InboxRefusal::Zero => SequencingError::InvalidSeq {
            message_type: msg.message_type(),
        },
        InboxRefusal::BeyondWindow => SequencingError::BeyondWindow {
            task_id: k.task_id.to_owned(),
            attempt: k.attempt,
            seq: msg.seq().unwrap_or(0),
            watermark,
            window,
        },
    }
}

fn too_many(max: usize, inbound: bool) -> SequencingError {
    SequencingError::TooManyStreams { max, inbound }
}

/// `true` for the hub→runner command types.
fn is_command(message_type: MessageType) -> bool {
    matches!(
        message_type,
        MessageType::TaskAssign | MessageType::TaskCancel
    )
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
            tombstones: 0,
            positions: PeerPositions::Known,
        }
    }

    /// The live channel of a task.
    fn live_channel(&self, task_id: &str) -> Option<&TaskChannel> {
        self.tasks.get(task_id).and_then(TaskEntry::live)
    }

    /// A copy of every stream of one task: its outbound logs and inbound trackers
    /// (empty for a task this state does not know, or has forgotten).
    ///
    /// # Errors
    /// `missing_task_id` for an empty `task_id` (no sequenced message can name it).
    pub fn channel(&self, task_id: &str) -> Result<TaskChannel, SequencingError> {
        if task_id.is_empty() {
            return Err(SequencingError::MissingTaskId { message_type: None });
        }
        Ok(self.live_channel(task_id).cloned().unwrap_or_default())
    }

    /// The live channel of a task, mutably.
    fn channel_mut(&mut self, task_id: &str) -> Option<&mut TaskChannel> {
        self.tasks.get_mut(task_id).and_then(TaskEntry::live_mut)
    }

    /// The tombstone of a forgotten task.
    fn tombstone(&self, task_id: &str) -> Option<&Tombstone> {
        self.tasks.get(task_id).and_then(TaskEntry::tombstone)
    }

    /// Live channels in order.
    fn live(&self) -> impl Iterator<Item = (&String, &TaskChannel)> + '_ {
        self.tasks
            .iter()
            .filter_map(|(k, e)| e.live().map(|c| (k, c)))
    }

    /// Live channels in order, mutably.
    fn live_mut(&mut self) -> impl Iterator<Item = (&String, &mut TaskChannel)> + '_ {
        self.tasks
            .iter_mut()
            .filter_map(|(k, e)| e.live_mut().map(|c| (k, c)))
    }

    /// Recount the kept frames and bytes (after re-stamping or trimming many logs).
    fn recount(&mut self) {
        let (mut n, mut b) = (0usize, 0usize);
        for (_, c) in self.live() {
            for (_, log) in &c.outbound {
                n = n.saturating_add(log.kept().len());
                b = b.saturating_add(log.kept_bytes());
            }
        }
        self.kept_frames = n;
        self.kept_bytes = b;
    }

    /// A new outbound log numbered from `next_seq`: final while the peer's positions
    /// are known, provisional otherwise.
    fn fresh_log(&self, next_seq: u64) -> OutboxLog {
        let mut log = OutboxLog::starting_at(next_seq, Numbering::Final);
        if self.positions == PeerPositions::Unknown {
            log.mark_unconfirmed();
        }
        log
    }

    /// `true` once the peer's positions are known ([`confirm_all`](Self::confirm_all)):
    /// frames stamped from then on are final.
    pub fn is_confirmed(&self) -> bool {
        self.positions == PeerPositions::Known
    }

    /// The peer's position is known for every stream (the hub: after applying a complete
    /// `hello.resume`; the runner: once the hub's post-`hello` acknowledgements have
    /// arrived). Provisional frames still kept are final from now on (the peer has seen
    /// none of their seqs), and streams created later are numbered from 1 as final.
    pub fn confirm_all(&mut self) {
        for (_, c) in self.live_mut() {
            for (_, log) in &mut c.outbound {
                log.confirm();
            }
        }
        self.positions = PeerPositions::Known;
    }

    /// Treat every frame stamped from now on as provisional until the peer's positions
    /// are known again: for a state that may be older than the peer's (fresh after a
    /// loss, or restored). The session machines call it on every state they are given,
    /// and transmit provisional frames only once confirmed.
    pub fn mark_unconfirmed(&mut self) {
        for (_, c) in self.live_mut() {
            for (_, log) in &mut c.outbound {
                log.mark_unconfirmed();
            }
        }
        self.positions = PeerPositions::Unknown;
    }

    /// `true` when no frame of the task is kept for replay: every frame emitted on it was
    /// acknowledged by the peer (also `true` for unknown and forgotten tasks). Once the
    /// task's terminal frame (its report, or the last command) is acknowledged, the task
    /// can be [forgotten](Self::forget_task) safely.
    pub fn is_fully_acknowledged(&self, task_id: &str) -> bool {
        self.live_channel(task_id)
            .is_none_or(|c| c.outbound.iter().all(|(_, log)| log.kept().len() == 0))
    }

    /// The tombstones of forgotten tasks, oldest first.
    pub(crate) fn tombstones(&self) -> impl Iterator<Item = (&str, &Tombstone)> + '_ {
        self.tasks.iter().filter_map(|(t, e)| match e {
            TaskEntry::Forgotten(tomb) => Some((t.as_str(), tomb)),
            TaskEntry::Live(_) => None,
        })
    }

    /// `true` when the task was forgotten and its tombstone is still kept.
    pub fn is_forgotten(&self, task_id: &str) -> bool {
        self.tombstone(task_id).is_some()
    }

    /// Number of tombstones kept (forgotten tasks, at most `max_tombstones`).
    pub fn forgotten_count(&self) -> usize {
        self.tombstones
    }

    /// Forgotten → live (the only place a task is revived; see the lifecycle table):
    /// every tombstoned stream comes back with its numbering, provisional while the
    /// peer's positions are unknown. `extra_out` / `extra_in` are streams the caller
    /// will create right after (counted against `max_streams` beforehand, so a refusal
    /// leaves the state unchanged). Does nothing for a task that is not forgotten.
    ///
    /// # Errors
    /// `too_many_streams` (`inbound` names the direction reported) when the revived and
    /// extra streams would exceed `max_streams`.
    fn revive(
        &mut self,
        task_id: &str,
        extra_out: usize,
        extra_in: usize,
        inbound: bool,
    ) -> Result<(), SequencingError> {
        let Some(t) = self.tombstone(task_id) else {
            return Ok(());
        };
        let max = self.config.max_streams;
        let outs = self
            .outbound_streams
            .saturating_add(t.outbound.len())
            .saturating_add(extra_out);
        let ins = self
            .inbound_streams
            .saturating_add(t.inbound.len())
            .saturating_add(extra_in);
        if outs > max || ins > max {
            return Err(too_many(max, inbound));
        }
        let Some(TaskEntry::Forgotten(t)) = self.tasks.shift_remove(task_id) else {
            return Ok(());
        };
        let window = self.config.inbound_window;
        let mut channel = TaskChannel::default();
        for (a, last) in t.outbound {
            channel
                .outbound
                .push((a, self.fresh_log(last.saturating_add(1))));
        }
        for (a, w) in t.inbound {
            channel
                .inbound
                .push((a, InboxTracker::from_parts(w, [], window)));
        }
        self.outbound_streams = self.outbound_streams.saturating_add(channel.outbound.len());
        self.inbound_streams = self.inbound_streams.saturating_add(channel.inbound.len());
        self.tombstones = self.tombstones.saturating_sub(1);
        self.tasks
            .insert(task_id.to_owned(), TaskEntry::Live(channel));
        Ok(())
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The bounds in force.
    pub fn config(&self) -> &SequencingConfig {
        &self.config
    }

    /// The per-task channels of the live tasks, in the order tasks were first seen (a
    /// revived task counts as seen when it was revived).
    pub fn tasks(&self) -> impl Iterator<Item = (&str, &TaskChannel)> + '_ {
        self.live().map(|(k, v)| (k.as_str(), v))
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
            return Err(SequencingError::MissingTaskId {
                message_type: Some(message_type),
            });
        }
        let command = is_command(message_type);
        let hub_sends = self.role == Role::Hub;
        if outbound && command != hub_sends {
            return Err(SequencingError::RoleCannotEmit {
                role: self.role,
                message_type,
            });
        }
        if !outbound && command == hub_sends {
            return Err(SequencingError::WrongDirection {
                role: self.role,
                message_type,
            });
        }
        let attempt = if command {
            None
        } else {
            Some(msg.attempt().unwrap_or(0))
        };
        Ok(Key { task_id, attempt })
    }

    /// Stamp the next seq of the message's stream on it, keep its encoded frame for
    /// replay, and return the stamped message (the seed's `emit`). Emitting on a
    /// forgotten task revives it (its numbering continues).
    ///
    /// # Errors
    /// [`EmitError`] carrying the message back unchanged: `not_sequenced`,
    /// `missing_task_id`, `role_cannot_emit`, `too_many_streams`, `frame_too_large`,
    /// `backpressure`, `seq_exhausted`. Nothing is recorded on error.
    pub fn emit(&mut self, msg: Message) -> Result<Message, EmitError> {
        self.emit_at(msg, None)
    }

    /// [`emit`](Self::emit) of a frame the application numbered itself (0.1.1's API):
    /// stamped with `seq` when that is at or beyond the stream's next seq (the numbering
    /// jumps forward to it), else with the next seq; the stream's numbering is final
    /// from then on (the application's seqs are authoritative, never provisional).
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub(crate) fn emit_numbered(&mut self, msg: Message, seq: u64) -> Result<Message, EmitError> {
        self.emit_at(msg, Some(seq))
    }

    fn emit_at(&mut self, mut msg: Message, at_least: Option<u64>) -> Result<Message, EmitError> {
        let fail = |error, message| EmitError {
            error,
            message: Box::new(message),
        };
        // Where the stream is: (seq to stamp, it exists live, the task is forgotten).
        let (seq, exists, forgotten) = match self.key(&msg, true) {
            Err(e) => return Err(fail(e, msg)),
            Ok(k) => match self.tasks.get(k.task_id) {
                Some(TaskEntry::Live(c)) => match c.out(k.attempt) {
                    Some(log) => (log.next_seq(), true, false),
                    None => (1, false, false),
                },
                Some(TaskEntry::Forgotten(t)) => (
                    t.outbound(k.attempt).map_or(1, |s| s.saturating_add(1)),
                    t.outbound(k.attempt).is_some(),
                    true,
                ),
                None => (1, false, false),
            },
        };
        let max = self.config.max_streams;
        if !forgotten && !exists && self.outbound_streams >= max {
            return Err(fail(too_many(max, false), msg));
        }
        let seq = match at_least {
            Some(s) if s > seq => s,
            _ => seq,
        };
        if seq > wire::MAX_SAFE_INTEGER {
            let task_id = msg.task_id().unwrap_or_default().to_owned();
            return Err(fail(SequencingError::SeqExhausted { task_id }, msg));
        }
        // A frame no peer could decode is never stamped or kept.
        if wire::check_depth(&msg).is_err() {
            let max = crate::json::MAX_DEPTH;
            return Err(fail(SequencingError::NestedTooDeep { max }, msg));
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
            || self.kept_bytes.saturating_add(frame.len()) > self.config.max_outbox_bytes
        {
            Some(SequencingError::Backpressure {
                frames: self.kept_frames,
                bytes: self.kept_bytes,
            })
        } else {
            None
        };
        let task_id = msg.task_id().unwrap_or_default();
        let error = match error {
            None if forgotten => self.revive(task_id, usize::from(!exists), 0, false).err(),
            e => e,
        };
        if let Some(e) = error {
            msg.set_seq(original);
            return Err(fail(e, msg));
        }
        let attempt = if is_command(msg.message_type()) {
            None
        } else {
            Some(msg.attempt().unwrap_or(0))
        };
        self.kept_frames = self.kept_frames.saturating_add(1);
        self.kept_bytes = self.kept_bytes.saturating_add(frame.len());
        let mut fresh = self.fresh_log(seq);
        let app = at_least.is_some();
        if app {
            fresh.confirm();
        }
        let created = match self.tasks.get_mut(task_id) {
            Some(TaskEntry::Live(channel)) => match channel.out_mut(attempt) {
                Some(log) => {
                    log.set_next_seq(seq);
                    log.push(frame);
                    if app {
                        log.confirm();
                    }
                    false
                }
                None => {
                    let mut log = fresh;
                    log.push(frame);
                    push_exact(&mut channel.outbound, (attempt, log));
                    true
                }
            },
            // Revived above; a tombstone cannot remain here.
            Some(TaskEntry::Forgotten(_)) | None => {
                let mut log = fresh;
                log.push(frame);
                let channel = TaskChannel {
                    outbound: vec![(attempt, log)],
                    inbound: Vec::new(),
                    assigned_attempt: 0,
                };
                self.tasks
                    .insert(task_id.to_owned(), TaskEntry::Live(channel));
                true
            }
        };
        if created {
            self.outbound_streams = self.outbound_streams.saturating_add(1);
        }
        if let Message::TaskAssign(a) = &msg {
            if a.attempt > 0 {
                if let Some(TaskEntry::Live(channel)) = self.tasks.get_mut(task_id) {
                    channel.assigned_attempt = a.attempt;
                }
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
        Ok(self.with_kept_frame(msg))
    }

    /// [`emit_numbered`](Self::emit_numbered), also returning the kept frame.
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub(crate) fn emit_numbered_encoded(
        &mut self,
        msg: Message,
        seq: u64,
    ) -> Result<(Message, String), EmitError> {
        let msg = self.emit_numbered(msg, seq)?;
        Ok(self.with_kept_frame(msg))
    }

    /// The message and the exact frame its stream kept for it (just emitted).
    fn with_kept_frame(&self, msg: Message) -> (Message, String) {
        let frame = msg
            .task_id()
            .and_then(|t| self.live_channel(t))
            .and_then(|c| {
                let attempt = if is_command(msg.message_type()) {
                    None
                } else {
                    Some(msg.attempt().unwrap_or(0))
                };
                c.out(attempt)
            })
            .and_then(|log| log.kept().last())
            .map(|f| f.frame.clone())
            .unwrap_or_else(|| wire::encode(&msg));
        (msg, frame)
    }

    /// Classify `seq` on the stream `k` without recording it: against the live tracker,
    /// the tombstone of a forgotten task, or an empty tracker. The one rule behind
    /// [`classify`](Self::classify), [`receive`](Self::receive) and
    /// [`accept_in_order`](Self::accept_in_order).
    fn inbound_arrival(
        &self,
        msg: &Message,
        k: &Key<'_>,
        seq: u64,
    ) -> Result<(Arrival, InboundAt), SequencingError> {
        let window = self.config.inbound_window;
        let (watermark, at, result) = match self.tasks.get(k.task_id) {
            Some(TaskEntry::Live(c)) => match c.inb(k.attempt) {
                Some(t) => (t.watermark(), InboundAt::Live, t.classify(seq, window)),
                None => (
                    0,
                    InboundAt::Absent,
                    InboxTracker::new().classify(seq, window),
                ),
            },
            Some(TaskEntry::Forgotten(tomb)) => {
                let w = tomb.inbound(k.attempt).unwrap_or(0);
                let t = InboxTracker::from_parts(w, [], window);
                (w, InboundAt::Forgotten, t.classify(seq, window))
            }
            None => (
                0,
                InboundAt::Absent,
                InboxTracker::new().classify(seq, window),
            ),
        };
        let arrival = result.map_err(|r| refusal(r, msg, k, watermark, window))?;
        // A new frame of a stream that does not exist yet needs room for it.
        if at != InboundAt::Live
            && arrival.is_new()
            && self.inbound_streams >= self.config.max_streams
        {
            return Err(too_many(self.config.max_streams, true));
        }
        Ok((arrival, at))
    }

    /// Make the inbound stream `k` exist (reviving a forgotten task, or creating the
    /// stream) and record `seq` on it.
    fn record_new(
        &mut self,
        msg: &Message,
        k: &Key<'_>,
        seq: u64,
        at: InboundAt,
    ) -> Result<Arrival, SequencingError> {
        if at == InboundAt::Forgotten {
            let has_stream = self
                .tombstone(k.task_id)
                .is_some_and(|t| t.inbound(k.attempt).is_some());
            self.revive(k.task_id, 0, usize::from(!has_stream), true)?;
        }
        let window = self.config.inbound_window;
        let channel = match self.tasks.get_mut(k.task_id) {
            Some(TaskEntry::Live(c)) => c,
            _ => {
                self.tasks.insert(
                    k.task_id.to_owned(),
                    TaskEntry::Live(TaskChannel::default()),
                );
                match self.tasks.get_mut(k.task_id).and_then(TaskEntry::live_mut) {
                    Some(c) => c,
                    None => return Err(too_many(self.config.max_streams, true)),
                }
            }
        };
        if let Some(t) = channel.inb_mut(k.attempt) {
            let w = t.watermark();
            return t
                .record(seq, window)
                .map_err(|r| refusal(r, msg, k, w, window));
        }
        let mut t = InboxTracker::new();
        let arrival = t
            .record(seq, window)
            .map_err(|r| refusal(r, msg, k, 0, window))?;
        push_exact(&mut channel.inbound, (k.attempt, t));
        self.inbound_streams = self.inbound_streams.saturating_add(1);
        Ok(arrival)
    }

    /// Classify a received message as new (in order or ahead) or duplicate, without
    /// recording it.
    ///
    /// # Errors
    /// As [`receive`](Self::receive).
    pub fn classify(&self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        self.inbound_arrival(msg, &k, seq).map(|(a, _)| a)
    }

    /// Record a received message (the seed's `receive`): [`Arrival::is_new`] tells
    /// whether to apply it. A new frame of a forgotten task revives it.
    ///
    /// # Errors
    /// Local: `not_sequenced`, `missing_task_id`. Remote: `wrong_direction`,
    /// `invalid_seq` (seq 0), `beyond_window`, `too_many_streams`. Nothing is recorded on
    /// error.
    pub fn receive(&mut self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        let window = self.config.inbound_window;
        // Fast path: the stream exists.
        if let Some(t) = live_inbound(&mut self.tasks, &k) {
            let w = t.watermark();
            return t
                .record(seq, window)
                .map_err(|r| refusal(r, msg, &k, w, window));
        }
        match self.inbound_arrival(msg, &k, seq)? {
            (Arrival::Duplicate, _) => Ok(Arrival::Duplicate),
            (_, at) => self.record_new(msg, &k, seq, at),
        }
    }

    /// Record a received message only if it is exactly the next seq of its stream
    /// (the in-order delivery used by the session machines): returns
    /// [`Arrival::InOrder`] (recorded), [`Arrival::Duplicate`], or [`Arrival::Ahead`]
    /// **without** recording it — the caller holds the frame until the gap fills, and a
    /// held frame lost with the connection is simply replayed later. Only an in-order
    /// frame revives a forgotten task.
    ///
    /// # Errors
    /// As [`receive`](Self::receive).
    pub fn accept_in_order(&mut self, msg: &Message) -> Result<Arrival, SequencingError> {
        let k = self.key(msg, false)?;
        let seq = msg.seq().unwrap_or(0);
        let window = self.config.inbound_window;
        if let Some(t) = live_inbound(&mut self.tasks, &k) {
            let w = t.watermark();
            return match t.classify(seq, window) {
                Ok(Arrival::InOrder) => t
                    .record(seq, window)
                    .map_err(|r| refusal(r, msg, &k, w, window)),
                Ok(a) => Ok(a),
                Err(r) => Err(refusal(r, msg, &k, w, window)),
            };
        }
        match self.inbound_arrival(msg, &k, seq)? {
            (Arrival::InOrder, at) => self.record_new(msg, &k, seq, at),
            (a, _) => Ok(a),
        }
    }

    /// The watermark to acknowledge for an inbound stream, tombstones included.
    pub(crate) fn ack_watermark(&self, task_id: &str, attempt: Option<u64>) -> Option<u64> {
        match self.tasks.get(task_id)? {
            TaskEntry::Live(c) => c.inb(attempt).map(InboxTracker::watermark),
            TaskEntry::Forgotten(t) => t.inbound(attempt),
        }
    }

    /// Hub: which forms the runner's streams of `task_id` have, live or remembered by the
    /// task's tombstone: `(attempt-less, with an attempt)`. See the session's
    /// `mixed_attempt_forms` rule.
    pub(crate) fn inbound_forms(&self, task_id: &str) -> (bool, bool) {
        // Per frame received: no allocation (core/tests/ingest_alloc.rs).
        let forms = |attempts: &mut dyn Iterator<Item = Option<u64>>| {
            attempts.fold((false, false), |(less, named), a| {
                (less || a == Some(0), named || a.is_some_and(|a| a > 0))
            })
        };
        match self.tasks.get(task_id) {
            Some(TaskEntry::Live(c)) => forms(&mut c.inbound.iter().map(|(a, _)| *a)),
            Some(TaskEntry::Forgotten(t)) => forms(&mut t.inbound.iter().map(|(a, _)| *a)),
            None => (false, false),
        }
    }

    /// Hub: the `attempt` of the latest `task.assign` this state stamped for `task_id`
    /// (0 when none, when it carried no attempt, or when the task was forgotten). A
    /// seed-only runner's progress and reports carry no `attempt`; the hub session
    /// delivers them as this attempt (see `docs/protocol.md`, "Seed-only peers").
    pub fn assigned_attempt(&self, task_id: &str) -> u64 {
        self.live_channel(task_id).map_or(0, |c| c.assigned_attempt)
    }

    /// The last seq received contiguously on an inbound stream, if the stream exists.
    pub fn inbound_watermark(&self, task_id: &str, attempt: Option<u64>) -> Option<u64> {
        self.live_channel(task_id)
            .and_then(|c| c.inb(attempt))
            .map(InboxTracker::watermark)
    }

    /// The outbound log of a stream, if it exists.
    pub fn outbound_log(&self, task_id: &str, attempt: Option<u64>) -> Option<&OutboxLog> {
        self.live_channel(task_id).and_then(|c| c.out(attempt))
    }

    /// Per task, the last seq received contiguously — what goes into `hello.resume`
    /// ([`TaskChannel::resume_position`] of every live task that has one). Only tasks
    /// with at least one received frame are listed (a task whose frames all arrived
    /// ahead of a gap is listed with 0). For the runner these are the command streams;
    /// for the hub, whose inbound streams are per attempt, the value is that of the
    /// task's highest attempt with a received frame.
    pub fn resume_map(&self) -> IndexMap<String, u64> {
        self.live()
            .filter_map(|(task, c)| c.resume_position().map(|w| (task.clone(), w)))
            .collect()
    }

    /// Inbound positions to acknowledge: the watermark of every inbound stream that has
    /// received something.
    pub fn ack_positions(&self) -> Vec<Position> {
        let mut out = Vec::new();
        for (task, channel) in self.live() {
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
        for (task, channel) in self.live() {
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
        self.live().flat_map(|(task, c)| {
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
    /// `seq + 1` (unless `max_streams` is reached, or `attempt` does not fit this role's
    /// outbound streams); one of a forgotten task, or above 2^53 − 1, is ignored.
    /// [`is_ahead`](Self::is_ahead) tells beforehand whether an
    /// acknowledgement is ahead.
    ///
    /// # Errors
    /// `restamp_failed` when a kept frame to re-stamp no longer decodes (an internal
    /// invariant broke): that frame was dropped, the acknowledgement is applied to the
    /// rest, and the state is consistent (nothing is sent under a wrong seq).
    pub fn ack(
        &mut self,
        task_id: &str,
        attempt: Option<u64>,
        seq: u64,
    ) -> Result<usize, SequencingError> {
        if seq > wire::MAX_SAFE_INTEGER {
            return Ok(0);
        }
        let max = self.config.max_streams;
        let room = self.outbound_streams < max;
        let log = match self.tasks.get_mut(task_id) {
            Some(TaskEntry::Forgotten(_)) => return Ok(0),
            Some(TaskEntry::Live(c)) => c.out_mut(attempt),
            None => None,
        };
        let Some(log) = log else {
            // An acknowledgement of a stream this state does not know: the peer is ahead.
            // (Not for a stream this role never sends: attempt must match the role.)
            let shape = attempt.is_some() == (self.role == Role::Runner);
            if seq > 0 && seq < wire::MAX_SAFE_INTEGER && room && shape {
                let log = OutboxLog::starting_at(seq.saturating_add(1), Numbering::Final);
                let entry = self
                    .tasks
                    .entry(task_id.to_owned())
                    .or_insert_with(|| TaskEntry::Live(TaskChannel::default()));
                if let TaskEntry::Live(c) = entry {
                    push_exact(&mut c.outbound, (attempt, log));
                    self.outbound_streams = self.outbound_streams.saturating_add(1);
                }
            }
            return Ok(0);
        };
        let before = log.kept().len();
        let bytes_before = log.kept_bytes();
        let r = reconcile(log, seq);
        let after = log.kept().len();
        let bytes_after = log.kept_bytes();
        self.kept_frames = self
            .kept_frames
            .saturating_sub(before)
            .saturating_add(after);
        self.kept_bytes = self
            .kept_bytes
            .saturating_sub(bytes_before)
            .saturating_add(bytes_after);
        if let Some(e) = r.error(task_id, attempt) {
            return Err(e);
        }
        Ok(if r.ahead {
            0
        } else {
            before.saturating_sub(after)
        })
    }

    /// The application knows the peer holds everything up to `seq` on one of this end's
    /// outbound streams (e.g. a runner's checkpoint against a hub that sends no
    /// acknowledgements): drop the kept frames at or below `seq`. Unlike
    /// [`ack`](Self::ack) it never re-stamps, moves numbering or creates a stream.
    /// Returns the number of frames dropped.
    pub fn trim_through(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        let Some(log) = self.channel_mut(task_id).and_then(|c| c.out_mut(attempt)) else {
            return 0;
        };
        let (n, b) = log.trim_through(seq);
        self.kept_frames = self.kept_frames.saturating_sub(n);
        self.kept_bytes = self.kept_bytes.saturating_sub(b);
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

    /// Whether `seq` was already emitted on the outbound stream `(task_id, attempt)`:
    /// `1 ≤ seq ≤` its last emitted seq, on a live stream or on the tombstone of a
    /// forgotten task. What [`Machine::resend`](crate::session::Machine::resend) asks.
    pub fn was_emitted(&self, task_id: &str, attempt: Option<u64>, seq: u64) -> bool {
        let last = match self.tasks.get(task_id) {
            Some(TaskEntry::Live(c)) => c.out(attempt).map_or(0, OutboxLog::last_seq),
            Some(TaskEntry::Forgotten(t)) => t.outbound(attempt).unwrap_or(0),
            None => 0,
        };
        seq >= 1 && seq <= last
    }

    /// The sender of an inbound stream declared that it can no longer send seqs below
    /// `first_available`. When this end has not received everything below it, the
    /// watermark jumps to `first_available − 1` and the missing range `(from, to)` is
    /// returned; otherwise nothing changes and `None` is returned. An unknown stream is
    /// created only when there is a gap and `attempt` fits the direction (`Some` for the
    /// hub's inbound progress streams, `None` for the runner's command streams); a
    /// forgotten task is left alone (`None`).
    ///
    /// # Errors
    /// `too_many_streams` (remote) when a stream would be created past the bound.
    pub fn skip_to(
        &mut self,
        task_id: &str,
        attempt: Option<u64>,
        first_available: u64,
    ) -> Result<Option<(u64, u64)>, SequencingError> {
        match self.tasks.get_mut(task_id) {
            Some(TaskEntry::Forgotten(_)) => return Ok(None),
            Some(TaskEntry::Live(c)) => {
                if let Some(t) = c.inb_mut(attempt) {
                    return Ok(t.skip_to(first_available));
                }
            }
            None => {}
        }
        // Nothing to create at or below 1, nor for a stream this role never receives.
        if first_available <= 1 || attempt.is_some() != (self.role == Role::Hub) {
            return Ok(None);
        }
        if self.inbound_streams >= self.config.max_streams {
            return Err(too_many(self.config.max_streams, true));
        }
        let mut t = InboxTracker::new();
        let gap = t.skip_to(first_available);
        let entry = self
            .tasks
            .entry(task_id.to_owned())
            .or_insert_with(|| TaskEntry::Live(TaskChannel::default()));
        if let TaskEntry::Live(c) = entry {
            push_exact(&mut c.inbound, (attempt, t));
            self.inbound_streams = self.inbound_streams.saturating_add(1);
        }
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
    /// and replayed (the stream is listed in [`Replay::peer_ahead`]); a frame that
    /// cannot be re-stamped is dropped and reported in [`Replay::failed`].
    pub fn replay_for(&mut self, resume: &IndexMap<String, u64>) -> Replay {
        let mut declared = Vec::new();
        for (task, channel) in self.live() {
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
            let known = match self.tasks.get(task) {
                Some(TaskEntry::Live(c)) => !c.outbound.is_empty(),
                Some(TaskEntry::Forgotten(_)) => true,
                None => false,
            };
            if !known && !replay.unknown.contains(task) {
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
    /// position (they are replayed with their new seqs; nothing is dropped unseen, except
    /// a frame that cannot be re-stamped, reported in [`Replay::failed`]).
    /// Declarations for unknown streams are ignored (listed in [`Replay::unknown`] by
    /// task id; forgotten tasks are not listed); declarations above 2^53 − 1 are
    /// ignored. No state is created.
    pub fn replay_positions(&mut self, declared: &[Position]) -> Replay {
        let mut replay = Replay::default();
        for p in declared {
            let known = match self.tasks.get(&p.task_id) {
                Some(TaskEntry::Live(c)) => c.out(p.attempt).is_some(),
                Some(TaskEntry::Forgotten(_)) => true,
                None => false,
            };
            if !known && !replay.unknown.contains(&p.task_id) {
                replay.unknown.push(p.task_id.clone());
            }
        }
        let index: HashMap<(&str, Option<u64>), u64> = declared
            .iter()
            .filter(|p| p.seq <= wire::MAX_SAFE_INTEGER)
            .map(|p| ((p.task_id.as_str(), p.attempt), p.seq))
            .collect();
        for (task, channel) in self.live_mut() {
            for (attempt, log) in &mut channel.outbound {
                if let Some(&d) = index.get(&(task.as_str(), *attempt)) {
                    let r = reconcile(log, d);
                    if let Some(e) = r.error(task, *attempt) {
                        replay.failed.push(e);
                    }
                    if r.ahead {
                        replay
                            .peer_ahead
                            .push(Position::new(task.clone(), *attempt, d));
                    } else {
                        let first = log.first_available();
                        // d ≤ 2^53 − 1, so d + 1 cannot wrap.
                        let missing_from = d.saturating_add(1);
                        if first > missing_from {
                            replay.resync.push(Resync {
                                task_id: task.clone(),
                                attempt: *attempt,
                                declared: d,
                                missing_from,
                                missing_to: first.saturating_sub(1),
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
        if self.live_channel(task_id).is_none() {
            return false;
        }
        let Some(TaskEntry::Live(channel)) = self.tasks.shift_remove(task_id) else {
            return false;
        };
        self.outbound_streams = self.outbound_streams.saturating_sub(channel.outbound.len());
        self.inbound_streams = self.inbound_streams.saturating_sub(channel.inbound.len());
        for (_, log) in &channel.outbound {
            self.kept_frames = self.kept_frames.saturating_sub(log.kept().len());
            self.kept_bytes = self.kept_bytes.saturating_sub(log.kept_bytes());
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
            while self.tombstones >= self.config.max_tombstones {
                let oldest = self
                    .tasks
                    .iter()
                    .position(|(_, e)| matches!(e, TaskEntry::Forgotten(_)));
                match oldest {
                    Some(i) => {
                        self.tasks.shift_remove_index(i);
                        self.tombstones = self.tombstones.saturating_sub(1);
                    }
                    None => break,
                }
            }
            self.tasks
                .insert(task_id.to_owned(), TaskEntry::Forgotten(tomb));
            self.tombstones = self.tombstones.saturating_add(1);
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
        let entry = size_of::<(u64, String, TaskEntry)>().saturating_add(9);
        total = total.saturating_add(self.tasks.capacity().saturating_mul(entry));
        for (task, e) in &self.tasks {
            total = total.saturating_add(task.capacity());
            match e {
                TaskEntry::Live(channel) => {
                    let out = size_of::<(Option<u64>, OutboxLog)>();
                    let inb = size_of::<(Option<u64>, InboxTracker)>();
                    total = total
                        .saturating_add(channel.outbound.capacity().saturating_mul(out))
                        .saturating_add(channel.inbound.capacity().saturating_mul(inb));
                    for (_, log) in &channel.outbound {
                        total = total.saturating_add(log.heap_bytes());
                    }
                    for (_, t) in &channel.inbound {
                        total = total.saturating_add(t.heap_bytes());
                    }
                }
                TaskEntry::Forgotten(t) => {
                    let pairs = t.outbound.capacity().saturating_add(t.inbound.capacity());
                    total =
                        total.saturating_add(pairs.saturating_mul(size_of::<(Option<u64>, u64)>()));
                }
            }
        }
        total
    }

    /// Drop a live task left with no streams (internal housekeeping after restore).
    pub(crate) fn prune_empty(&mut self) {
        self.tasks.retain(|_, e| match e {
            TaskEntry::Live(c) => !c.is_empty(),
            TaskEntry::Forgotten(_) => true,
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::wire::TaskCancel;

    /// A hub with two provisional frames of T-1 (seqs 1 and 2), the first one's kept
    /// bytes corrupted so that it no longer decodes.
    fn hub_with_corrupt_frame() -> ConnectionState {
        let mut hub = ConnectionState::new(Role::Hub);
        hub.mark_unconfirmed();
        hub.emit(TaskCancel::new("T-1", "a").into()).unwrap();
        hub.emit(TaskCancel::new("T-1", "b").into()).unwrap();
        let log = hub
            .channel_mut("T-1")
            .and_then(|c| c.out_mut(None))
            .unwrap();
        log.kept_mut()[0].frame = "{not json".into();
        hub.recount();
        hub
    }

    /// A cancel whose unknown field `k` nests `depth` arrays (the frame: one level more).
    fn deep_cancel(depth: usize) -> Message {
        let mut v = crate::json::Value::Array(Vec::new());
        for _ in 1..depth {
            v = crate::json::Value::Array(vec![v]);
        }
        let mut cancel = TaskCancel::new("T-1", "deep");
        cancel.extra.insert("k", v);
        cancel.into()
    }

    #[test]
    fn emit_refuses_a_frame_nested_deeper_than_a_peer_decodes() {
        let limit = crate::json::MAX_DEPTH;
        let mut hub = ConnectionState::new(Role::Hub);
        let err = hub.emit(deep_cancel(limit)).unwrap_err();
        assert_eq!(err.code(), "nested_too_deep");
        assert!(err.error.is_local());
        assert_eq!(hub.unacked().count(), 0, "nothing kept");
        // The deepest frame a peer decodes is stamped, kept, and decodes.
        let (msg, frame) = hub.emit_encoded(deep_cancel(limit - 1)).unwrap();
        assert_eq!(msg.seq(), Some(1));
        assert!(wire::decode_str(&frame, true).is_ok());
    }

    #[test]
    fn since_fails_on_a_kept_frame_that_does_not_decode_instead_of_skipping_it() {
        let hub = hub_with_corrupt_frame();
        let log = hub.outbound_log("T-1", None).unwrap();
        let err = log.since(0).unwrap_err();
        assert_eq!(err, SequencingError::UndecodableFrame { seq: 1 });
        assert_eq!(err.code(), "undecodable_frame");
        // Above the corrupt frame the tail decodes.
        let tail = log.since(1).unwrap();
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0].seq(), Some(2));
        assert!(log.since(2).unwrap().is_empty());
    }

    #[test]
    fn channel_refuses_an_empty_task_id_and_copies_known_tasks() {
        let mut hub = ConnectionState::new(Role::Hub);
        let err = hub.channel("").unwrap_err();
        assert_eq!(err.code(), "missing_task_id");
        assert!(err.to_string().contains("must carry a task_id"));
        assert_eq!(hub.channel("T-1").unwrap(), TaskChannel::default());
        hub.emit(TaskCancel::new("T-1", "a").into()).unwrap();
        let c = hub.channel("T-1").unwrap();
        assert_eq!(c.outbound().count(), 1);
    }

    #[test]
    fn ack_reports_a_frame_that_cannot_be_restamped_and_never_keeps_it() {
        let mut hub = hub_with_corrupt_frame();
        let err = hub.ack("T-1", None, 5).unwrap_err();
        assert_eq!(err.code(), "restamp_failed");
        assert_eq!(
            err,
            SequencingError::RestampFailed {
                task_id: "T-1".into(),
                attempt: None,
                seq: 1
            }
        );
        // The good frame was re-stamped right after the peer's position, the bad one
        // dropped; the counters match what is kept.
        let frames: Vec<(u64, String)> = hub
            .unacked()
            .map(|(_, _, f)| (f.seq, f.frame.clone()))
            .collect();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].0, 6);
        let m = wire::decode(frames[0].1.as_bytes(), false).unwrap();
        assert_eq!(m.seq(), Some(6));
        assert_eq!(hub.outbox_frames(), 1);
        assert_eq!(hub.outbox_bytes(), frames[0].1.len());
        assert_eq!(hub.last_emitted("T-1", None), 6);
        assert!(hub.outbound_log("T-1", None).unwrap().is_confirmed());
    }

    #[test]
    fn replay_reports_a_frame_that_cannot_be_restamped() {
        let mut hub = hub_with_corrupt_frame();
        let replay = hub.replay_positions(&[Position::new("T-1", None, 3)]);
        assert_eq!(replay.failed.len(), 1);
        assert_eq!(replay.failed[0].code(), "restamp_failed");
        assert!(!replay.is_empty());
        let frames: Vec<&KeptFrame> = replay.streams.iter().flat_map(|s| &s.frames).collect();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].seq, 4);
        assert!(frames.iter().all(|f| !f.frame.contains("not json")));
        assert_eq!(hub.outbox_frames(), 1);
    }

    #[test]
    fn resume_position_skips_streams_that_received_nothing() {
        let mut c = TaskChannel::default();
        assert_eq!(c.resume_position(), None);
        assert_eq!(c.last_received(), 0);
        c.inbound
            .push((Some(1), InboxTracker::from_parts(3, [], 8)));
        c.inbound
            .push((Some(2), InboxTracker::from_parts(0, [], 8)));
        assert_eq!(c.resume_position(), Some(3));
        c.inbound
            .push((Some(3), InboxTracker::from_parts(0, [2], 8)));
        assert_eq!(c.resume_position(), Some(0));
    }
}
