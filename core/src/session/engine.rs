//! The machinery both session machines share: framing and decoding inbound bytes,
//! in-order delivery with a bounded hold buffer, acknowledgements, keepalive timers and
//! the output queue.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use indexmap::IndexMap;

use crate::json::{CompactString, Object, Value};

use crate::framing::LineFramer;
use crate::sequencing::{Arrival, ConnectionState, Position, Resync, Role};
use crate::wire::{self, Hello, Message, MessageType, Ping, Pong};

use super::{
    CloseReason, Event, Input, Output, SessionConfig, SessionError, SessionStats, Stamped,
    MAX_PING_SNAPSHOTS,
};

/// Where the connection is (see the transition table on [`HubSession`](super::HubSession)
/// and [`RunnerSession`](super::RunnerSession)). What only exists while a transport is up
/// lives in [`Live`], so it cannot outlive the connection.
#[derive(Debug, Clone)]
pub enum Link {
    /// No transport.
    Down,
    /// Transport up.
    Up(Live),
    /// The session asked the host to close ([`Output::Close`]); waiting for
    /// `Disconnected` (or a new `Connected`). No timer runs, no input is read.
    Closing,
}

/// The hub's stage of a live connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubStage {
    /// Waiting for the runner's `hello`; nothing of the hub is transmitted.
    AwaitingHello,
    /// The `hello` announced `resume_more`: the resume gathered so far, completed by
    /// pings carrying `resume` (the last one `resume_end`). Commands wait for it.
    Resuming(IndexMap<String, u64>),
    /// The runner's whole resume was applied: frames flow.
    Open,
}

/// The runner's stage of a live connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerStage {
    /// The post-hello barrier ping with this nonce was sent; provisional frames wait
    /// for its `pong`.
    Barrier {
        /// The barrier ping's nonce.
        nonce: i64,
    },
    /// Frames flow.
    Open,
}

/// The stage of a live connection, by role: a runner can never await a hello, a hub
/// never holds a barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Hub side.
    Hub(HubStage),
    /// Runner side.
    Runner(RunnerStage),
}

/// Acknowledgements this end owes on the live connection.
#[derive(Debug, Clone, Default)]
pub enum Acks {
    /// Nothing to acknowledge.
    #[default]
    Idle,
    /// Some inbound streams advanced since the last acknowledgement.
    Owed {
        /// Acknowledge at the latest at this time.
        due: u64,
        /// Frames applied since the last acknowledgement (`ack_every_frames`).
        frames: u64,
    },
}

/// The streams whose watermark advanced since the last acknowledgement (the streams of
/// [`Acks::Owed`]), kept across acknowledgements so that a stream that keeps advancing
/// is marked without allocating: an entry belongs to the current window when it was
/// marked in it, and closing a window drops the entries not marked in it (so the set
/// never holds more than the streams of one window).
#[derive(Debug, Clone, Default)]
struct Dirty {
    /// The current window.
    window: u64,
    /// Per task, its streams (attempts) and the window each was last marked in.
    streams: HashMap<CompactString, Vec<(Option<u64>, u64)>>,
}

impl Dirty {
    /// Mark stream `(task, attempt)` in the current window.
    fn mark(&mut self, task: &str, attempt: Option<u64>) {
        let window = self.window;
        match self.streams.get_mut(task) {
            Some(list) => match list.iter_mut().find(|(a, _)| *a == attempt) {
                Some(entry) => entry.1 = window,
                None => list.push((attempt, window)),
            },
            None => {
                self.streams.insert(task.into(), vec![(attempt, window)]);
            }
        }
    }

    /// The streams marked in the current window.
    fn current(&self) -> impl Iterator<Item = (&str, Option<u64>)> + '_ {
        let window = self.window;
        self.streams.iter().flat_map(move |(task, list)| {
            list.iter()
                .filter(move |(_, w)| *w == window)
                .map(move |(a, _)| (task.as_str(), *a))
        })
    }

    /// Close the current window: its marks are spent, and entries not marked in it are
    /// dropped.
    fn close_window(&mut self) {
        let window = self.window;
        self.streams.retain(|_, list| {
            list.retain(|(_, w)| *w == window);
            !list.is_empty()
        });
        self.window = window.wrapping_add(1);
    }
}

/// What exists only while a transport is up.
#[derive(Debug, Clone)]
pub struct Live {
    /// The role's stage.
    pub(crate) stage: Stage,
    /// Time of the latest inbound bytes (dead-peer timeout).
    last_rx: u64,
    /// The next keepalive ping (`None`: keepalive disabled).
    next_ping: Option<u64>,
    /// Owed acknowledgements.
    acks: Acks,
}

impl Live {
    /// `true` once acknowledgements may flow (hub: after the hello).
    fn acks_flow(&self) -> bool {
        self.stage != Stage::Hub(HubStage::AwaitingHello)
    }
}

/// Parse a list of positions whose streams must (`with_attempt`) or must not carry an
/// attempt. Bad entries are skipped one by one: the valid positions, and a description of
/// the skipped entries (if any). A value that is not an array yields no position.
fn positions(v: &Value, with_attempt: bool, role: Role) -> (Vec<Position>, Option<String>) {
    let Some(items) = v.as_array() else {
        return (Vec::new(), Some("positions must be an array".into()));
    };
    let mut out = Vec::with_capacity(items.len());
    let (mut bad, mut first) = (0usize, None);
    for (i, item) in items.iter().enumerate() {
        let p = Position::from_value(item).and_then(|p| {
            if p.attempt.is_some() == with_attempt {
                Ok(p)
            } else {
                Err(format!(
                    "stream {:?} attempt {:?} is not a stream of the {role}",
                    p.task_id, p.attempt
                ))
            }
        });
        match p {
            Ok(p) => out.push(p),
            Err(e) => {
                bad = bad.saturating_add(1);
                if first.is_none() {
                    first = Some(format!("entry {i}: {e}"));
                }
            }
        }
    }
    let report = first.map(|f| format!("{bad} entries skipped, first: {f}"));
    (out, report)
}

/// Split positions into lists whose encoded size stays within `budget` bytes and
/// `max_entries` entries (an entry larger than the budget travels alone).
/// Split `list` the way [`chunk_positions`] splits positions: the lengths of the chunks.
fn chunk_lengths(list: &[AckEntry<'_>], budget: usize, max_entries: usize) -> Vec<usize> {
    let mut chunks = Vec::new();
    let mut len: usize = 0;
    let mut used: usize = 2;
    for &(task, attempt, seq) in list {
        let size = entry_bytes(task, attempt, seq).saturating_add(1);
        if len > 0 && (used.saturating_add(size) > budget || len >= max_entries.max(1)) {
            chunks.push(len);
            len = 0;
            used = 2;
        }
        used = used.saturating_add(size);
        len = len.saturating_add(1);
    }
    if len > 0 {
        chunks.push(len);
    }
    chunks
}

/// One acknowledgement to send: a stream (task, attempt) and its watermark.
type AckEntry<'a> = (&'a str, Option<u64>, u64);

/// The frame of `ping` with nonce `nonce` and the `ack` list `list`, written directly:
/// byte for byte what `wire::encode` writes for that ping (the `ack` extension as
/// [`Position::list_to_value`] builds it), in one allocation.
fn ack_ping_frame(nonce: i64, list: &[AckEntry<'_>]) -> String {
    const HEAD: &str = r#"{"schema_version":1,"type":"ping","nonce":"#;
    let body = list
        .iter()
        .map(|&(t, a, s)| entry_bytes(t, a, s).saturating_add(1))
        .fold(2, usize::saturating_add);
    let mut buf = Vec::with_capacity(HEAD.len().saturating_add(body).saturating_add(32));
    buf.extend_from_slice(HEAD.as_bytes());
    write_int(&mut buf, nonce);
    buf.extend_from_slice(br#","ack":["#);
    for (i, &(task, attempt, seq)) in list.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(br#"{"task_id":"#);
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut buf, task);
        if let Some(a) = attempt {
            buf.extend_from_slice(br#","attempt":"#);
            write_int(&mut buf, a);
        }
        buf.extend_from_slice(br#","seq":"#);
        write_int(&mut buf, seq);
        buf.push(b'}');
    }
    buf.extend_from_slice(b"]}");
    // Only ASCII punctuation, serde_json strings and digits were written.
    String::from_utf8(buf).unwrap_or_default()
}

/// Decimal digits of an integer, appended.
fn write_int<T: serde::Serialize>(buf: &mut Vec<u8>, n: T) {
    let _ = serde_json::to_writer(buf, &n);
}

pub(crate) fn chunk_positions(
    list: &[Position],
    budget: usize,
    max_entries: usize,
) -> Vec<Vec<Position>> {
    let mut chunks = Vec::new();
    let mut cur: Vec<Position> = Vec::new();
    let mut used: usize = 2;
    for p in list {
        let size = position_bytes(p).saturating_add(1);
        if !cur.is_empty()
            && (used.saturating_add(size) > budget || cur.len() >= max_entries.max(1))
        {
            chunks.push(std::mem::take(&mut cur));
            used = 2;
        }
        used = used.saturating_add(size);
        cur.push(p.clone());
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

/// Encoded size of one position in a list (`{"task_id":…,"attempt":N,"seq":N}`, compact),
/// computed without encoding it: this runs for every position of every ack.
fn position_bytes(p: &Position) -> usize {
    entry_bytes(&p.task_id, p.attempt, p.seq)
}

/// [`position_bytes`] of a position given by its parts.
fn entry_bytes(task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
    fn digits(n: u64) -> usize {
        // At most 20: `checked_ilog10` of a u64 is at most 19.
        n.checked_ilog10()
            .map_or(1, |l| l.saturating_add(1) as usize)
    }
    // The encoded length of a JSON string: quotes plus each character as serde_json
    // escapes it (`\"`, `\\`, the short control escapes, `\u00XX` for the others).
    let text = task_id
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .fold(2usize, usize::saturating_add);
    let attempt = attempt.map_or(0, |a| r#","attempt":"#.len().saturating_add(digits(a)));
    [
        r#"{"task_id":"#.len(),
        text,
        attempt,
        r#","seq":"#.len(),
        digits(seq),
        1,
    ]
    .into_iter()
    .fold(0, usize::saturating_add)
}

/// Encoded size of a list of positions (`[…,…]`), computed without encoding it.
fn list_bytes(list: &[Position]) -> usize {
    list.iter()
        .map(|p| position_bytes(p).saturating_add(1))
        .fold(2, usize::saturating_add)
}

/// Bytes of envelope a control frame may need besides its lists (type, nonce, field
/// names, markers).
pub(crate) const CONTROL_OVERHEAD: usize = 160;

/// (message, encoded size) held per stream, by seq.
type Held = HashMap<String, Vec<(Option<u64>, BTreeMap<u64, (Message, usize)>)>>;

/// The machinery of one session machine (hub or runner). Public only inside the
/// private `engine` module, so the sealed [`Machine`](super::Machine) trait can reach it.
#[derive(Debug, Clone)]
pub struct Engine {
    pub(crate) state: ConnectionState,
    pub(crate) cfg: SessionConfig,
    pub(crate) link: Link,
    framer: LineFramer,
    out: VecDeque<Output>,
    held: Held,
    /// Streams to acknowledge (see [`Acks`]).
    dirty: Dirty,
    /// Time of the latest input (lines are handled lazily at that time).
    now: u64,
    nonce: i64,
    /// Bytes of the frames held.
    held_bytes: usize,
    pub(crate) stats: SessionStats,
    /// Per outbound stream, the highest seq transmitted on the current connection (every
    /// kept frame at or below it was transmitted on it, in order). Cleared on connect;
    /// streams with nothing kept are pruned at each ping.
    sent: HashMap<StreamKey, u64>,
    /// Sequenced frames transmitted since the last ping of this connection.
    since_ping: u64,
    /// Per ping transmitted on this connection (oldest first, at most
    /// [`MAX_PING_SNAPSHOTS`]): its nonce and the positions a `pong` without an `ack`
    /// member proves the peer received.
    probes: VecDeque<(i64, Vec<(StreamKey, u64)>)>,
    /// Durable acknowledgements: per inbound stream, the highest seq the host confirmed.
    confirmed: HashMap<StreamKey, u64>,
    /// Outbound streams the application numbers itself ([`resend`](Self::resend)): an
    /// acknowledgement beyond what this session emitted trims them, never re-stamps.
    app_numbered: HashSet<StreamKey>,
}

/// Most application-numbered streams remembered (the forgotten ones are dropped first).
const MAX_APP_NUMBERED_STREAMS: usize = 65_536;

/// An outbound or inbound stream: (task, attempt).
type StreamKey = (CompactString, Option<u64>);

impl Engine {
    pub(crate) fn new(state: ConnectionState, cfg: SessionConfig) -> Self {
        // Durable acknowledgements: a state given to the session is what the host's store
        // holds, so its inbound positions count as confirmed (a forgotten task's too: its
        // frames were applied before it was forgotten).
        let confirmed = if cfg.durable_acks {
            state
                .tasks()
                .flat_map(|(task, c)| {
                    c.inbound()
                        .map(move |(a, t)| ((CompactString::from(task), a), t.watermark()))
                })
                .chain(state.tombstones().flat_map(|(task, tomb)| {
                    tomb.inbound
                        .iter()
                        .map(move |(a, w)| ((CompactString::from(task), *a), *w))
                }))
                .collect()
        } else {
            HashMap::new()
        };
        Self {
            state,
            framer: LineFramer::new(cfg.framer.clone()),
            cfg,
            link: Link::Down,
            out: VecDeque::new(),
            held: HashMap::new(),
            dirty: Dirty::default(),
            now: 0,
            nonce: 0,
            held_bytes: 0,
            stats: SessionStats::default(),
            sent: HashMap::new(),
            since_ping: 0,
            probes: VecDeque::new(),
            confirmed,
            app_numbered: HashSet::new(),
        }
    }

    /// One input (the body of [`Machine::handle_input`](super::Machine::handle_input)).
    /// `hello` is the runner's identity template (`None` on the hub).
    pub(crate) fn handle(
        &mut self,
        now: u64,
        input: Input,
        hello: Option<&Hello>,
    ) -> Result<(), SessionError> {
        // Lines of earlier bytes not yet pulled by poll_output are handled first, so
        // inputs take effect in the order they were given.
        self.catch_up();
        self.now = now;
        let result = match input {
            Input::Connected => match hello {
                None => self.connect(now, Stage::Hub(HubStage::AwaitingHello)),
                // No early return on an error: the timers below run after every input
                // (as on the hub), so a refused `Connected` leaves no deadline behind.
                Some(h) => self
                    .connect(now, Stage::Runner(RunnerStage::Open))
                    .map(|()| self.runner_hello(h)),
            },
            Input::Disconnected => {
                self.disconnect();
                Ok(())
            }
            Input::Bytes(b) => self.bytes(now, &b),
            Input::Frame(f) => self.frame(now, f),
            Input::Send(msg) => self.emit(msg).map(drop),
            Input::Timeout => Ok(()),
            Input::Confirm {
                task_id,
                attempt,
                seq,
            } => self.confirm(now, &task_id, attempt, seq),
        };
        self.timers(now);
        result
    }

    /// Stamp, keep and (when the connection is ready) transmit one sequenced message
    /// (the body of [`Machine::send`](super::Machine::send)).
    pub(crate) fn send(&mut self, now: u64, msg: Message) -> Result<Stamped, SessionError> {
        self.catch_up();
        self.now = now;
        let result = self.emit(msg);
        self.timers(now);
        result
    }

    /// The body of [`Machine::resend`](super::Machine::resend): a message whose seq its
    /// stream already emitted is reported as it is (nothing stamped, kept or
    /// transmitted); any other is [`send`](Self::send).
    pub(crate) fn resend(&mut self, now: u64, msg: Message) -> Result<Stamped, SessionError> {
        let seq = msg.seq().unwrap_or(0);
        let attempt = match self.state.role() {
            Role::Hub => None,
            Role::Runner => Some(msg.attempt().unwrap_or(0)),
        };
        // Only a message this side emits can have been emitted (any other is refused
        // by `send`, with its error).
        let emits = matches!(
            (self.state.role(), msg.message_type()),
            (Role::Hub, MessageType::TaskAssign | MessageType::TaskCancel)
                | (
                    Role::Runner,
                    MessageType::TaskProgress | MessageType::TaskReport
                )
        );
        let sent = emits
            && msg
                .task_id()
                .is_some_and(|t| self.state.was_emitted(t, attempt, seq));
        if !sent {
            if seq == 0 || !emits {
                return self.send(now, msg);
            }
            // The application numbers its frames (0.1.1's API): the frame is stamped with
            // its own seq (the stream's numbering jumps to it) and the stream's numbering
            // is the application's from now on — final, never provisional: a peer's
            // position at or beyond it means the peer has those frames (trimmed), not a
            // collision to re-stamp. So an application may re-send its frames to a fresh
            // session (a new connection object) and the peer drops the duplicates.
            self.catch_up();
            self.now = now;
            let result = self.emit_with(msg, Some(seq));
            if let Ok(st) = &result {
                if self.app_numbered.len() >= MAX_APP_NUMBERED_STREAMS {
                    let state = &self.state;
                    self.app_numbered
                        .retain(|(t, a)| state.outbound_log(t, *a).is_some());
                }
                if self.app_numbered.len() < MAX_APP_NUMBERED_STREAMS {
                    self.app_numbered
                        .insert((CompactString::from(st.task_id.as_str()), st.attempt));
                }
            }
            self.timers(now);
            return result;
        }
        self.catch_up();
        self.now = now;
        self.timers(now);
        let task_id = msg.task_id().unwrap_or_default().to_owned();
        Ok(Stamped {
            message: msg,
            task_id,
            attempt,
            seq,
        })
    }

    fn emit(&mut self, msg: Message) -> Result<Stamped, SessionError> {
        self.emit_with(msg, None)
    }

    /// Stamp, keep and (when ready) transmit; `numbered`: the application's own seq.
    fn emit_with(&mut self, msg: Message, numbered: Option<u64>) -> Result<Stamped, SessionError> {
        let encoded = match numbered {
            Some(seq) => self.state.emit_numbered_encoded(msg, seq),
            None => self.state.emit_encoded(msg),
        };
        let (message, frame) = match encoded {
            Ok(done) => done,
            Err(e) => {
                // The kept log is full: a ping now lets a seed-only peer's pong trim it.
                if e.code() == "backpressure" && self.may_transmit() && self.since_ping > 0 {
                    self.stats.probes = self.stats.probes.saturating_add(1);
                    self.send_ping(None, None);
                }
                return Err(SessionError::Emit(e));
            }
        };
        let task_id = message.task_id().unwrap_or_default().to_owned();
        let seq = message.seq().unwrap_or(0);
        let attempt = match self.state.role() {
            Role::Hub => None,
            Role::Runner => Some(message.attempt().unwrap_or(0)),
        };
        // A runner's provisional frame waits for the barrier (see `runner_hello`); a
        // hub transmits only once the runner's resume was applied (its state is then
        // confirmed).
        let provisional = attempt.is_some()
            && self
                .state
                .outbound_log(&task_id, attempt)
                .is_some_and(|l| seq >= l.unconfirmed_from());
        if self.may_transmit() && !provisional {
            self.transmit_seq(frame, &task_id, attempt, seq);
        }
        Ok(Stamped {
            message,
            task_id,
            attempt,
            seq,
        })
    }

    pub(crate) fn is_up(&self) -> bool {
        matches!(self.link, Link::Up(_))
    }

    /// The stage of the live connection, if any.
    pub(crate) fn stage(&self) -> Option<&Stage> {
        match &self.link {
            Link::Up(l) => Some(&l.stage),
            _ => None,
        }
    }

    fn set_stage(&mut self, stage: Stage) {
        if let Link::Up(l) = &mut self.link {
            l.stage = stage;
        }
    }

    pub(crate) fn transmit(&mut self, frame: String) {
        self.stats.transmitted = self.stats.transmitted.saturating_add(1);
        self.out.push_back(Output::Transmit(frame));
    }

    /// Transmit a kept sequenced frame of the outbound stream `(task, attempt)`: it is
    /// remembered as sent on this connection (for a seed-only peer's implied
    /// acknowledgement), and every `probe_every_frames` such frames a probe ping follows.
    pub(crate) fn transmit_seq(
        &mut self,
        frame: String,
        task: &str,
        attempt: Option<u64>,
        seq: u64,
    ) {
        self.transmit(frame);
        let at = self
            .sent
            .entry((CompactString::from(task), attempt))
            .or_insert(0);
        *at = (*at).max(seq);
        self.since_ping = self.since_ping.saturating_add(1);
        let every = self.cfg.probe_every_frames;
        if every > 0 && self.since_ping >= every && self.is_up() {
            self.stats.probes = self.stats.probes.saturating_add(1);
            self.send_ping(None, None);
        }
    }

    /// A ping with `nonce` is being transmitted: remember what a `pong` to it without an
    /// `ack` member proves the peer received (every sequenced frame transmitted before it
    /// on this connection). Streams with nothing kept are pruned.
    pub(crate) fn record_ping(&mut self, nonce: i64) {
        self.since_ping = 0;
        let state = &self.state;
        self.sent.retain(|(task, attempt), seq| {
            state
                .outbound_log(task, *attempt)
                .and_then(|l| l.kept().next())
                .is_some_and(|f| f.seq <= *seq)
        });
        if self.sent.is_empty() {
            return;
        }
        if self.probes.len() >= MAX_PING_SNAPSHOTS {
            self.probes.pop_front();
        }
        let positions = self.sent.iter().map(|(k, s)| (k.clone(), *s)).collect();
        self.probes.push_back((nonce, positions));
    }

    /// A `pong` without an `ack` member echoed `nonce`: the peer (a seed-only one: ours
    /// always put `ack` on pongs) handled every frame sent before that ping — on an ordered
    /// connection, it answers a ping only after the frames before it. Drop those frames.
    fn implied_ack(&mut self, nonce: i64) {
        let Some(idx) = self.probes.iter().position(|(n, _)| *n == nonce) else {
            return;
        };
        let done: Vec<_> = self.probes.drain(..=idx).collect();
        for (_, positions) in done {
            for ((task, attempt), seq) in positions {
                let n = self.state.trim_through(&task, attempt, seq);
                self.stats.implied_acked = self.stats.implied_acked.saturating_add(n as u64);
            }
        }
    }

    /// The position an acknowledgement of inbound stream `(task, attempt)` declares:
    /// its watermark, or with durable acknowledgements at most what the host confirmed
    /// (a forgotten task's streams count as confirmed).
    pub(crate) fn acked_position(&self, task: &str, attempt: Option<u64>) -> Option<u64> {
        let w = self.state.ack_watermark(task, attempt)?;
        if !self.cfg.durable_acks || self.state.is_forgotten(task) {
            return Some(w);
        }
        let c = self
            .confirmed
            .get(&(CompactString::from(task), attempt))
            .copied()
            .unwrap_or(0);
        Some(w.min(c))
    }

    /// [`Input::Confirm`]: the host's store committed `(task, attempt)` through `seq`.
    fn confirm(
        &mut self,
        now: u64,
        task: &str,
        attempt: Option<u64>,
        seq: u64,
    ) -> Result<(), SessionError> {
        if !self.cfg.durable_acks {
            return Err(SessionError::NotDurable);
        }
        if self.state.is_forgotten(task) {
            return Ok(());
        }
        // A seed-only runner's frames were delivered as the task's assigned attempt but
        // live on its attempt-less stream: confirming the attempt the application saw
        // confirms that stream.
        let attempt = match attempt {
            Some(a)
                if a > 0
                    && self.state.inbound_watermark(task, attempt).is_none()
                    && self.state.assigned_attempt(task) == a
                    && self.state.inbound_watermark(task, Some(0)).is_some() =>
            {
                Some(0)
            }
            other => other,
        };
        let delivered = self.state.inbound_watermark(task, attempt).unwrap_or(0);
        if seq > delivered {
            return Err(SessionError::ConfirmAhead {
                task_id: task.to_owned(),
                attempt,
                seq,
                delivered,
            });
        }
        let key = (CompactString::from(task), attempt);
        let before = self.confirmed.get(&key).copied().unwrap_or(0);
        if seq <= before {
            return Ok(());
        }
        self.confirmed.insert(key, seq);
        // Forget the confirmations of forgotten tasks now and then (bounded memory).
        let (_, inbound) = self.state.stream_counts();
        if self.confirmed.len() > inbound.saturating_mul(2).saturating_add(64) {
            let state = &self.state;
            self.confirmed
                .retain(|(t, a), _| state.inbound_watermark(t, *a).is_some());
        }
        self.owe_ack(now, task, attempt, seq.saturating_sub(before));
        Ok(())
    }

    pub(crate) fn event(&mut self, e: Event) {
        self.out.push_back(Output::Event(e));
    }

    pub(crate) fn peer_error(&mut self, code: &str, detail: impl Into<String>) {
        self.event(Event::PeerError {
            code: code.to_owned(),
            detail: detail.into(),
        });
    }

    pub(crate) fn close(&mut self, reason: CloseReason) {
        self.out.push_back(Output::Close(reason));
        self.link = Link::Closing;
    }

    /// A transport came up.
    fn connect(&mut self, now: u64, stage: Stage) -> Result<(), SessionError> {
        if self.is_up() {
            return Err(SessionError::AlreadyConnected);
        }
        self.framer = LineFramer::new(self.cfg.framer.clone());
        self.clear_held();
        self.dirty.close_window();
        self.sent.clear();
        self.since_ping = 0;
        self.probes.clear();
        self.link = Link::Up(Live {
            stage,
            last_rx: now,
            next_ping: (self.cfg.ping_interval_ms > 0)
                .then(|| now.saturating_add(self.cfg.ping_interval_ms)),
            acks: Acks::Idle,
        });
        Ok(())
    }

    /// The transport is gone: queued frames and close requests belong to the dead
    /// connection and are dropped (events stay for the application).
    fn disconnect(&mut self) {
        self.link = Link::Down;
        self.clear_held();
        self.out
            .retain(|o| !matches!(o, Output::Transmit(_) | Output::Close(_)));
    }

    /// Inbound bytes arrived at `now` (dead-peer timer).
    fn touch(&mut self, now: u64) {
        if let Link::Up(l) = &mut self.link {
            l.last_rx = now;
        }
    }

    fn clear_held(&mut self) {
        self.held.clear();
        self.stats.held_now = 0;
        self.held_bytes = 0;
    }

    /// Feed JSONL bytes. Complete lines are decoded and handled lazily, one at a time,
    /// as [`poll`](Self::poll) needs outputs: the output queue then holds the outputs of
    /// one line, not of a whole chunk.
    pub(crate) fn bytes(&mut self, now: u64, data: &[u8]) -> Result<(), SessionError> {
        if !self.is_up() {
            return Err(SessionError::NotConnected);
        }
        self.touch(now);
        self.now = now;
        // Lines are handled lazily; only a chunk larger than the framer's queue handles
        // lines now to make room. The framer is never finished while a connection is up.
        if let Err(e) = crate::framing::push_draining(self, |s| &mut s.framer, data, Self::catch_up)
        {
            self.peer_error(e.code(), e.to_string());
        }
        Ok(())
    }

    /// Handle the next complete line waiting in the framer; `false` when none.
    fn next_line(&mut self) -> bool {
        if !self.is_up() {
            return false;
        }
        let Some(item) = self.framer.poll_line() else {
            return false;
        };
        let now = self.now;
        match item {
            Ok(line) => self.on_line(now, line),
            Err(e) => self.peer_error(e.code(), e.to_string()),
        }
        self.maybe_flush_acks(now);
        true
    }

    /// Handle every line still waiting in the framer (before an input that must see
    /// the effects of earlier bytes).
    pub(crate) fn catch_up(&mut self) {
        while self.next_line() {}
    }

    /// One whole frame (a WebSocket text message).
    pub(crate) fn frame(&mut self, now: u64, frame: String) -> Result<(), SessionError> {
        if self.frame_ok(now, &frame)? {
            self.on_line(now, frame);
            self.maybe_flush_acks(now);
        }
        Ok(())
    }

    fn on_line(&mut self, now: u64, line: String) {
        let size = line.len();
        if let Some(msg) = self.decode(line) {
            self.on_message(now, msg, size);
        }
    }

    fn on_message(&mut self, now: u64, msg: Message, size: usize) {
        let stage = self.stage();
        let awaiting = stage == Some(&Stage::Hub(HubStage::AwaitingHello));
        // Hub after the hello (its resume complete or still arriving in pings).
        let hub_open = matches!(
            stage,
            Some(Stage::Hub(HubStage::Open | HubStage::Resuming(_)))
        );
        let barrier = match stage {
            Some(Stage::Runner(RunnerStage::Barrier { nonce })) => Some(*nonce),
            _ => None,
        };
        match msg {
            Message::Hello(h) => {
                if awaiting {
                    self.hub_hello(now, h);
                } else {
                    self.peer_error("unexpected_message", "unexpected hello");
                }
            }
            Message::Ping(p) => {
                if awaiting && p.extra.get("barrier") == Some(&Value::Bool(true)) {
                    // The runner's post-hello barrier, but its hello never arrived: the
                    // barrier's pong would confirm positions nobody declared.
                    self.close(CloseReason::HelloRequired);
                } else if hub_open {
                    self.extensions(now, &p.extra);
                    self.hub_resume_chunk(now, &p.extra);
                    self.answer_ping_after_extensions(&p);
                } else {
                    self.answer_ping(now, &p);
                }
            }
            Message::Pong(p) => {
                // A pong without `ack` comes from a peer that does not acknowledge
                // explicitly (a seed-only one): it proves receipt of what preceded its ping.
                if !p.extra.contains_key("ack") {
                    if let Some(wire::Nonce::Integer(n)) = p.nonce {
                        self.implied_ack(n);
                    }
                }
                self.extensions(now, &p.extra);
                // The barrier's pong, or a pong to any later ping of this connection (a
                // peer that skipped the barrier ping: on an ordered connection its pong to a
                // later ping comes after everything it sent in answer to the hello too).
                if matches!((p.nonce.as_ref(), barrier), (Some(wire::Nonce::Integer(n)), Some(b)) if *n >= b)
                {
                    self.finish_barrier();
                }
            }
            m => {
                if awaiting {
                    self.close(CloseReason::HelloRequired);
                } else {
                    self.sequenced(now, m, size);
                }
            }
        }
    }

    /// Check one whole frame against the line bound.
    fn frame_ok(&mut self, now: u64, frame: &str) -> Result<bool, SessionError> {
        if !self.is_up() {
            return Err(SessionError::NotConnected);
        }
        self.touch(now);
        let max = self.cfg.framer.max_line_bytes.max(1);
        if frame.len() > max {
            self.peer_error(
                "line_too_long",
                format!("frame of {} bytes exceeds {max}", frame.len()),
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// Decode one line; the framer (or the transport) already checked its UTF-8. A plain
    /// `task.progress` keeps the line as its payload's text (nothing copied or built).
    fn decode(&mut self, line: String) -> Option<Message> {
        match wire::decode_owned(line, self.cfg.validate) {
            Ok(m) => Some(m),
            Err(e) => {
                self.peer_error(e.code(), e.to_string());
                None
            }
        }
    }

    /// The inbound stream attempt key for a message at this role.
    fn inbound_attempt(&self, msg: &Message) -> Option<u64> {
        match self.state.role() {
            Role::Hub => Some(msg.attempt().unwrap_or(0)),
            Role::Runner => None,
        }
    }

    /// Hub: a runner frame whose attempt form conflicts with the task's other streams.
    ///
    /// A seed-only runner's attempt-less frames are delivered as the task's assigned
    /// attempt (see [`deliver`](Self::deliver)); if the same runner also sent frames that
    /// name that attempt, the application would get two frames with one `(task, attempt,
    /// seq)`. So a task's frames keep the form of its first stream (live, or remembered
    /// by its tombstone): an attempt-less frame is refused while the task has a stream
    /// that names an attempt, and one naming an attempt while it has an attempt-less one.
    fn mixed_attempt_forms(&self, msg: &Message) -> Option<String> {
        if self.state.role() != Role::Hub {
            return None;
        }
        let task = msg.task_id()?;
        let (attempt_less, named) = self.state.inbound_forms(task);
        let attempt = msg.attempt().unwrap_or(0);
        let conflict = if attempt == 0 { named } else { attempt_less };
        conflict.then(|| {
            format!(
                "{} of task {task:?} {}, but the runner already sent this task's frames {}: \
                 one runner numbers a task's frames in one form",
                msg.message_type(),
                if attempt == 0 {
                    "without attempt".to_owned()
                } else {
                    format!("with attempt {attempt}")
                },
                if attempt == 0 {
                    "with an attempt"
                } else {
                    "without attempt"
                },
            )
        })
    }

    /// A sequenced frame arrived: deliver it in order, hold it, or drop it.
    pub(crate) fn sequenced(&mut self, now: u64, msg: Message, size: usize) {
        if let Some(detail) = self.mixed_attempt_forms(&msg) {
            self.peer_error("mixed_attempt_forms", detail);
            return;
        }
        match self.state.accept_in_order(&msg) {
            Ok(Arrival::InOrder) => {
                if self.stats.held_now == 0 {
                    self.deliver(now, msg);
                } else {
                    let attempt = self.inbound_attempt(&msg);
                    let task = msg.task_id().unwrap_or_default().to_owned();
                    self.deliver(now, msg);
                    self.drain_held(now, &task, attempt);
                }
            }
            Ok(Arrival::Duplicate) => {
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                // A forgotten stream re-sent by a peer that missed our acknowledgement:
                // acknowledge it again so the peer stops re-sending.
                let task = msg.task_id().unwrap_or_default();
                if self.state.is_forgotten(task) {
                    let attempt = self.inbound_attempt(&msg);
                    let task = task.to_owned();
                    self.mark_dirty(now, &task, attempt);
                }
            }
            Ok(Arrival::Ahead) => self.hold(msg, size),
            Err(e) => self.peer_error(e.code(), e.to_string()),
        }
    }

    fn deliver(&mut self, now: u64, mut msg: Message) {
        let attempt = self.inbound_attempt(&msg);
        let task = msg.task_id().unwrap_or_default();
        // With durable acknowledgements the host's `Confirm` owes the acknowledgement.
        if !self.cfg.durable_acks {
            self.owe_ack(now, task, attempt, 1);
        }
        // A seed-only runner's frame carries no attempt: it belongs to the task's latest
        // assignment (its seqs stay on the attempt-less stream, numbered as the seed does).
        // (Not when the assigned attempt has a stream of its own, which only a state
        // restored from a version without the one-form rule can hold: delivered as
        // attempt 0 then, never as a second copy.)
        if attempt == Some(0) {
            let assigned = self.state.assigned_attempt(task);
            if assigned > 0 && self.state.inbound_watermark(task, Some(assigned)).is_none() {
                match &mut msg {
                    Message::TaskProgress(p) => p.attempt = assigned,
                    Message::TaskReport(r) => r.attempt = assigned,
                    _ => {}
                }
            }
        }
        self.stats.delivered = self.stats.delivered.saturating_add(1);
        self.event(Event::Received(msg));
    }

    fn hold(&mut self, msg: Message, size: usize) {
        if self.stats.held_now >= self.cfg.max_held_frames
            || self.held_bytes.saturating_add(size) > self.cfg.max_held_bytes
        {
            self.stats.held_dropped = self.stats.held_dropped.saturating_add(1);
            return;
        }
        let attempt = self.inbound_attempt(&msg);
        let seq = msg.seq().unwrap_or(0);
        let streams = self
            .held
            .entry(msg.task_id().unwrap_or_default().to_owned())
            .or_default();
        if !streams.iter().any(|(a, _)| *a == attempt) {
            streams.push((attempt, BTreeMap::new()));
        }
        let Some((_, map)) = streams.iter_mut().find(|(a, _)| *a == attempt) else {
            return;
        };
        match map.entry(seq) {
            std::collections::btree_map::Entry::Occupied(_) => {
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((msg, size));
                self.stats.held = self.stats.held.saturating_add(1);
                self.stats.held_now = self.stats.held_now.saturating_add(1);
                self.held_bytes = self.held_bytes.saturating_add(size);
            }
        }
    }

    /// Deliver held frames of one stream that are now in order.
    pub(crate) fn drain_held(&mut self, now: u64, task: &str, attempt: Option<u64>) {
        loop {
            let watermark = self.state.inbound_watermark(task, attempt).unwrap_or(0);
            let Some(streams) = self.held.get_mut(task) else {
                return;
            };
            let Some(idx) = streams.iter().position(|(a, _)| *a == attempt) else {
                return;
            };
            let Some(entry) = streams.get_mut(idx).and_then(|(_, map)| map.first_entry()) else {
                streams.swap_remove(idx);
                if streams.is_empty() {
                    self.held.remove(task);
                }
                return;
            };
            let seq = *entry.key();
            if seq > watermark.saturating_add(1) {
                return;
            }
            let (msg, size) = entry.remove();
            self.stats.held_now = self.stats.held_now.saturating_sub(1);
            self.held_bytes = self.held_bytes.saturating_sub(size);
            if seq <= watermark {
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                continue;
            }
            match self.state.accept_in_order(&msg) {
                Ok(Arrival::InOrder) => self.deliver(now, msg),
                Ok(_) => self.stats.duplicates = self.stats.duplicates.saturating_add(1),
                Err(e) => self.peer_error(e.code(), e.to_string()),
            }
        }
    }

    /// Apply the `ack` and `replay_from` extension fields of a ping, pong or hello. A bad
    /// entry is skipped (and reported as `invalid_extension`); the others apply.
    pub(crate) fn extensions(&mut self, now: u64, extra: &Object) {
        // Outbound streams of the hub are command streams (no attempt), those of the
        // runner carry an attempt; inbound streams the other way round.
        let hub = self.state.role() == Role::Hub;
        if let Some(v) = extra.get("ack") {
            let (list, bad) = positions(v, !hub, self.state.role());
            if let Some(e) = bad {
                self.peer_error("invalid_extension", format!("ack: {e}"));
            }
            for p in list {
                self.apply_ack(&p);
            }
        }
        if let Some(v) = extra.get("replay_from") {
            let (list, bad) = positions(v, hub, self.state.role());
            if let Some(e) = bad {
                self.peer_error("invalid_extension", format!("replay_from: {e}"));
            }
            for p in list {
                match self.state.skip_to(&p.task_id, p.attempt, p.seq) {
                    Ok(Some((from, to))) => {
                        self.event(Event::InboundGap(Resync {
                            task_id: p.task_id.clone(),
                            attempt: p.attempt,
                            declared: from.saturating_sub(1),
                            missing_from: from,
                            missing_to: to,
                        }));
                        self.mark_dirty(now, &p.task_id, p.attempt);
                        if self.stats.held_now > 0 {
                            self.drain_held(now, &p.task_id, p.attempt);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => self.peer_error(e.code(), e.to_string()),
                }
            }
        }
    }

    /// `true` when frames of this end may be transmitted now (hub: the runner's resume
    /// was applied; runner: connected).
    pub(crate) fn may_transmit(&self) -> bool {
        matches!(
            self.stage(),
            Some(Stage::Hub(HubStage::Open) | Stage::Runner(_))
        )
    }

    /// Apply one acknowledgement. Provisional frames it reveals as colliding are
    /// re-stamped by the state ([`ConnectionState::ack`]) and re-sent here; provisional
    /// frames it confirms (held back by the runner's barrier) are sent now.
    fn apply_ack(&mut self, p: &Position) {
        if self.state.is_forgotten(&p.task_id) {
            return;
        }
        if self
            .app_numbered
            .contains(&(CompactString::from(p.task_id.as_str()), p.attempt))
        {
            // The application's numbering: the peer holds everything up to `seq`.
            self.state.trim_through(&p.task_id, p.attempt, p.seq);
            return;
        }
        let before = self
            .state
            .outbound_log(&p.task_id, p.attempt)
            .map(|l| (l.is_confirmed(), l.unconfirmed_from()));
        let ahead =
            self.state.is_ahead(&p.task_id, p.attempt, p.seq) || (before.is_none() && p.seq > 0);
        if ahead {
            let last = self.state.last_emitted(&p.task_id, p.attempt);
            self.peer_error(
                "ack_ahead",
                format!(
                    "peer acknowledged seq {} of {:?} (attempt {:?}), beyond what this state knows it sent (last {last}); frames not yet seen are re-stamped after it",
                    p.seq, p.task_id, p.attempt
                ),
            );
        }
        if let Err(e) = self.state.ack(&p.task_id, p.attempt, p.seq) {
            self.peer_error(e.code(), e.to_string());
        }
        let Some((was_confirmed, from)) = before else {
            return;
        };
        if !self.may_transmit() || (was_confirmed && !ahead) {
            return;
        }
        // Re-stamped frames (all kept ones) or frames the barrier held back.
        let threshold = if ahead { 0 } else { from };
        let frames: Vec<(u64, String)> = self
            .state
            .outbound_log(&p.task_id, p.attempt)
            .map(|l| {
                l.kept()
                    .filter(|f| f.seq >= threshold)
                    .map(|f| (f.seq, f.frame.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for (seq, f) in frames {
            self.transmit_seq(f, &p.task_id, p.attempt, seq);
        }
    }

    /// Runner: the pong of the post-hello barrier ping arrived, so every acknowledgement
    /// the hub sent after the hello has been applied. Provisional frames still unconfirmed
    /// are final (the hub had none of their seqs): confirm them and send them.
    pub(crate) fn finish_barrier(&mut self) {
        self.set_stage(Stage::Runner(RunnerStage::Open));
        let mut frames = Vec::new();
        for (task, channel) in self.state.tasks() {
            for (attempt, log) in channel.outbound() {
                if !log.is_confirmed() {
                    let from = log.unconfirmed_from();
                    frames.extend(
                        log.kept()
                            .filter(|f| f.seq >= from)
                            .map(|f| (task.to_owned(), attempt, f.seq, f.frame.clone())),
                    );
                }
            }
        }
        self.state.confirm_all();
        for (task, attempt, seq, f) in frames {
            self.transmit_seq(f, &task, attempt, seq);
        }
    }

    fn mark_dirty(&mut self, now: u64, task: &str, attempt: Option<u64>) {
        self.owe_ack(now, task, attempt, 0);
    }

    /// Record that stream `(task, attempt)` advanced by `frames` applied frames (0: it
    /// was skipped ahead, or must be acknowledged again); the acknowledgement is due
    /// `ack_delay_ms` after the first owed one.
    fn owe_ack(&mut self, now: u64, task: &str, attempt: Option<u64>, frames: u64) {
        let Link::Up(live) = &mut self.link else {
            return;
        };
        match &mut live.acks {
            Acks::Idle => {
                live.acks = Acks::Owed {
                    due: now.saturating_add(self.cfg.ack_delay_ms),
                    frames,
                };
            }
            Acks::Owed { frames: count, .. } => *count = count.saturating_add(frames),
        }
        self.dirty.mark(task, attempt);
    }

    /// Forget the owed acknowledgements (they were sent, or are covered by a full one).
    fn clear_acks(&mut self) {
        if let Link::Up(live) = &mut self.link {
            live.acks = Acks::Idle;
        }
        self.dirty.close_window();
    }

    /// Answer a ping: a pong echoing its nonce, carrying pending acknowledgements.
    pub(crate) fn answer_ping(&mut self, now: u64, ping: &Ping) {
        self.extensions(now, &ping.extra);
        self.answer_ping_after_extensions(ping);
    }

    /// The pong (with as many pending acknowledgements as fit), then pings for the rest.
    pub(crate) fn answer_ping_after_extensions(&mut self, ping: &Ping) {
        let mut pong = Pong::answering(ping);
        let acks = self.take_acks();
        let base = wire::encode(&Message::Pong(pong.clone()))
            .len()
            .saturating_add(CONTROL_OVERHEAD);
        let budget = self.cfg.max_control_frame_bytes.saturating_sub(base);
        let mut rest: &[Position] = &acks;
        // Every pong carries `ack`, empty when nothing fits or is owed: a pong without it
        // would tell the peer that everything before its ping was received and may be
        // dropped (the implied acknowledgement of a seed-only peer), which a hub with
        // durable acknowledgements cannot promise.
        let mut first: Vec<Position> = Vec::new();
        if budget > 0 {
            if let Some(chunk) = chunk_positions(&acks, budget, self.cfg.max_ack_entries)
                .into_iter()
                .next()
                .filter(|c| list_bytes(c) <= budget)
            {
                rest = acks.get(chunk.len()..).unwrap_or_default();
                first = chunk;
            }
        }
        pong.extra.insert("ack", Position::list_to_value(&first));
        self.transmit(wire::encode(&Message::Pong(pong)));
        let rest = rest.to_vec();
        self.send_ack_pings(&rest, &[]);
    }

    /// Pending acknowledgements (tombstoned streams included), in wire order; clears the
    /// pending set.
    fn take_acks(&mut self) -> Vec<Position> {
        let list = self
            .pending_acks()
            .into_iter()
            .map(|(t, a, s)| Position::new(t, a, s))
            .collect();
        self.clear_acks();
        list
    }

    /// The pending acknowledgements, borrowed, in the deterministic wire order (task,
    /// attempt); empty when none are owed.
    fn pending_acks(&self) -> Vec<AckEntry<'_>> {
        let Link::Up(Live {
            acks: Acks::Owed { .. },
            ..
        }) = &self.link
        else {
            return Vec::new();
        };
        let most = self.dirty.streams.values().map(Vec::len).sum();
        let mut list: Vec<AckEntry<'_>> = Vec::with_capacity(most);
        list.extend(self.dirty.current().filter_map(|(task, a)| {
            let w = self.acked_position(task, a)?;
            (w > 0).then_some((task, a, w))
        }));
        list.sort_unstable_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
        list
    }

    /// The byte budget for the lists of one ping.
    fn ping_budget(&self) -> usize {
        self.cfg
            .max_control_frame_bytes
            .saturating_sub(CONTROL_OVERHEAD)
            .max(1)
    }

    /// Send `ack` and `replay_from` lists over as many pings as their byte size needs
    /// (`replay_from` first). Nothing is sent when both are empty.
    pub(crate) fn send_ack_pings(&mut self, ack: &[Position], replay_from: &[Position]) {
        let budget = self.ping_budget();
        for chunk in chunk_positions(replay_from, budget, usize::MAX) {
            self.send_ping(None, Some(&chunk));
        }
        for chunk in chunk_positions(ack, budget, self.cfg.max_ack_entries) {
            self.send_ping(Some(&chunk), None);
        }
    }

    /// The next ping nonce.
    pub(crate) fn next_nonce(&mut self) -> i64 {
        self.nonce = self.nonce.saturating_add(1);
        self.nonce
    }

    /// Send a ping (next nonce) with optional `ack` and `replay_from` lists.
    pub(crate) fn send_ping(&mut self, ack: Option<&[Position]>, replay_from: Option<&[Position]>) {
        let nonce = self.next_nonce();
        self.record_ping(nonce);
        let mut ping = Ping::new(Some(nonce.into()));
        if let Some(r) = replay_from.filter(|r| !r.is_empty()) {
            ping.extra.insert("replay_from", Position::list_to_value(r));
        }
        if let Some(a) = ack.filter(|a| !a.is_empty()) {
            ping.extra.insert("ack", Position::list_to_value(a));
        }
        self.transmit(wire::encode(&Message::Ping(ping)));
    }

    /// Acknowledge every inbound stream (after a hello), with an optional resync notice.
    /// Both lists fit in one ping when they can; otherwise they are split by byte size.
    pub(crate) fn send_full_ack(&mut self, replay_from: &[Position]) {
        self.clear_acks();
        let all: Vec<Position> = if self.cfg.durable_acks {
            self.state
                .ack_positions()
                .into_iter()
                .filter_map(|p| {
                    let seq = self.acked_position(&p.task_id, p.attempt)?;
                    (seq > 0).then(|| Position::new(p.task_id, p.attempt, seq))
                })
                .collect()
        } else {
            self.state.ack_positions()
        };
        let budget = self.ping_budget();
        if !all.is_empty()
            && all.len() <= self.cfg.max_ack_entries.max(1)
            && list_bytes(&all).saturating_add(list_bytes(replay_from)) <= budget
        {
            self.send_ping(Some(&all), Some(replay_from));
        } else {
            self.send_ack_pings(&all, replay_from);
        }
    }

    /// Send the owed acknowledgements: the steady-state path, once per
    /// `ack_every_frames` applied frames or `ack_delay_ms`. The pings are written
    /// directly from the pending set (byte for byte what [`send_ack_pings`](Self::send_ack_pings)
    /// writes), so acknowledging costs a few allocations per ping, not per stream.
    fn flush_acks(&mut self) {
        let mut nonce = self.nonce;
        let frames: Vec<(i64, String)> = {
            let list = self.pending_acks();
            let mut rest: &[AckEntry<'_>] = &list;
            chunk_lengths(&list, self.ping_budget(), self.cfg.max_ack_entries)
                .into_iter()
                .map(|n| {
                    let (chunk, tail) = rest.split_at(n.min(rest.len()));
                    rest = tail;
                    nonce = nonce.saturating_add(1);
                    (nonce, ack_ping_frame(nonce, chunk))
                })
                .collect()
        };
        self.nonce = nonce;
        self.clear_acks();
        for (n, f) in frames {
            self.record_ping(n);
            self.transmit(f);
        }
    }

    fn maybe_flush_acks(&mut self, _now: u64) {
        let every = self.cfg.ack_every_frames.max(1);
        let due = match &self.link {
            Link::Up(live) => {
                live.acks_flow()
                    && matches!(live.acks, Acks::Owed { frames, .. } if frames >= every)
            }
            _ => false,
        };
        if due {
            self.flush_acks();
        }
    }

    /// Run the timers at `now`.
    pub(crate) fn timers(&mut self, now: u64) {
        let Link::Up(live) = &self.link else {
            return;
        };
        if self.cfg.peer_timeout_ms > 0
            && now >= live.last_rx.saturating_add(self.cfg.peer_timeout_ms)
        {
            self.close(CloseReason::PeerTimeout);
            return;
        }
        self.maybe_flush_acks(now);
        let Link::Up(live) = &self.link else {
            return;
        };
        if live.acks_flow() && matches!(live.acks, Acks::Owed { due, .. } if now >= due) {
            self.flush_acks();
        }
        let Link::Up(live) = &self.link else {
            return;
        };
        if live.next_ping.is_some_and(|p| now >= p) {
            // Pending acknowledgements ride on the keepalive ping.
            let acks = if live.acks_flow() {
                self.take_acks()
            } else {
                Vec::new()
            };
            if acks.is_empty() {
                self.send_ping(None, None);
            }
            self.send_ack_pings(&acks, &[]);
            if let Link::Up(live) = &mut self.link {
                live.next_ping = Some(now.saturating_add(self.cfg.ping_interval_ms));
            }
        }
    }

    /// The earliest timer deadline of the live connection (`None` when down, closing,
    /// or no timer runs).
    pub(crate) fn deadline(&self) -> Option<u64> {
        let Link::Up(live) = &self.link else {
            return None;
        };
        let timeout = (self.cfg.peer_timeout_ms > 0)
            .then(|| live.last_rx.saturating_add(self.cfg.peer_timeout_ms));
        let ack = match &live.acks {
            Acks::Owed { due, .. } if live.acks_flow() => Some(*due),
            _ => None,
        };
        [live.next_ping, timeout, ack].into_iter().flatten().min()
    }

    pub(crate) fn poll(&mut self) -> Option<Output> {
        loop {
            if let Some(o) = self.out.pop_front() {
                return Some(o);
            }
            if !self.next_line() {
                return None;
            }
        }
    }

    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty() || (self.is_up() && self.framer.ready_len() > 0)
    }
}

#[cfg(test)]
mod position_size_tests {
    use super::*;

    #[test]
    fn computed_size_equals_encoded_size() {
        let ids = [
            "T-1",
            "",
            "tâsk/☃",
            "q\"uote\\back",
            "ctl\n\t\u{1}\u{1f}\u{7f}",
            "😀x",
        ];
        for id in ids {
            for attempt in [
                None,
                Some(0),
                Some(9),
                Some(10),
                Some(9_007_199_254_740_991),
            ] {
                for seq in [0, 1, 99, 100, u64::MAX] {
                    let p = Position::new(id, attempt, seq);
                    let encoded = serde_json::to_string(&p.to_value()).unwrap();
                    assert_eq!(position_bytes(&p), encoded.len(), "{encoded}");
                }
            }
        }
    }

    #[test]
    fn direct_ack_ping_equals_the_encoded_ping() {
        let ids = [
            "T-1",
            "tâsk/☃",
            "q\"uote\\back",
            "ctl\n\t\u{1}\u{1f}\u{7f}",
            "😀x",
        ];
        let mut entries: Vec<AckEntry<'_>> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            entries.push((id, None, i as u64));
            entries.push((id, Some(i as u64 * 7), 9_007_199_254_740_991));
        }
        for n in 1..=entries.len() {
            let list = &entries[..n];
            for nonce in [1, 42, i64::MAX] {
                let mut ping = Ping::new(Some(nonce.into()));
                let positions: Vec<Position> = list
                    .iter()
                    .map(|&(t, a, s)| Position::new(t, a, s))
                    .collect();
                ping.extra
                    .insert("ack", Position::list_to_value(&positions));
                assert_eq!(
                    ack_ping_frame(nonce, list),
                    wire::encode(&Message::Ping(ping))
                );
            }
            // The same chunks as the position chunker.
            let positions: Vec<Position> = list
                .iter()
                .map(|&(t, a, s)| Position::new(t, a, s))
                .collect();
            for (budget, max) in [(60, 100), (200, 2), (10_000, 3), (1, 1)] {
                let want: Vec<usize> = chunk_positions(&positions, budget, max)
                    .iter()
                    .map(Vec::len)
                    .collect();
                assert_eq!(chunk_lengths(list, budget, max), want);
            }
        }
    }
}
