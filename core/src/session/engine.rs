//! The machinery both session machines share: framing and decoding inbound bytes,
//! in-order delivery with a bounded hold buffer, acknowledgements, keepalive timers and
//! the output queue.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::json::{Object, Value};

use crate::framing::LineFramer;
use crate::sequencing::{Arrival, ConnectionState, Position, Resync, Role};
use crate::wire::{self, Message, Ping, Pong};

use super::{CloseReason, Event, Output, SessionConfig, SessionError, SessionStats};

/// Connection phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No transport.
    Down,
    /// Hub only: transport up, waiting for the runner's `hello`.
    AwaitingHello,
    /// Transport up, frames flow.
    Open,
    /// The session asked the host to close; waiting for `Disconnected`.
    Closing,
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
                bad += 1;
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
pub(crate) fn chunk_positions(
    list: &[Position],
    budget: usize,
    max_entries: usize,
) -> Vec<Vec<Position>> {
    let mut chunks = Vec::new();
    let mut cur: Vec<Position> = Vec::new();
    let mut used = 2;
    for p in list {
        let size = position_bytes(p) + 1;
        if !cur.is_empty() && (used + size > budget || cur.len() >= max_entries.max(1)) {
            chunks.push(std::mem::take(&mut cur));
            used = 2;
        }
        used += size;
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
    fn digits(mut n: u64) -> usize {
        let mut d = 1;
        while n >= 10 {
            n /= 10;
            d += 1;
        }
        d
    }
    // The encoded length of a JSON string: quotes plus each character as serde_json
    // escapes it (`\"`, `\\`, the short control escapes, `\u00XX` for the others).
    let text = 2 + p
        .task_id
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>();
    let attempt = p.attempt.map_or(0, |a| r#","attempt":"#.len() + digits(a));
    r#"{"task_id":"#.len() + text + attempt + r#","seq":"#.len() + digits(p.seq) + 1
}

/// Bytes of envelope a control frame may need besides its lists (type, nonce, field
/// names, markers).
pub(crate) const CONTROL_OVERHEAD: usize = 160;

/// (message, encoded size) held per stream, by seq.
type Held = HashMap<String, Vec<(Option<u64>, BTreeMap<u64, (Message, usize)>)>>;

#[derive(Debug, Clone)]
pub(crate) struct Engine {
    pub(crate) state: ConnectionState,
    pub(crate) cfg: SessionConfig,
    pub(crate) phase: Phase,
    framer: LineFramer,
    out: VecDeque<Output>,
    held: Held,
    /// Inbound streams whose watermark advanced since the last acknowledgement.
    dirty: HashMap<String, Vec<Option<u64>>>,
    unacked_count: u64,
    ack_due: Option<u64>,
    last_rx: u64,
    /// Time of the latest input (lines are handled lazily at that time).
    now: u64,
    next_ping: Option<u64>,
    nonce: i64,
    /// Bytes of the frames held.
    held_bytes: usize,
    /// Runner: nonce of the post-hello barrier ping while its pong is awaited.
    pub(crate) barrier: Option<i64>,
    /// Hub: the runner's `hello.resume` while more of it is announced (`resume_more`).
    pub(crate) resume_pending: Option<indexmap::IndexMap<String, u64>>,
    pub(crate) stats: SessionStats,
}

impl Engine {
    pub(crate) fn new(state: ConnectionState, cfg: SessionConfig) -> Self {
        Self {
            state,
            framer: LineFramer::new(cfg.framer.clone()),
            cfg,
            phase: Phase::Down,
            out: VecDeque::new(),
            held: HashMap::new(),
            dirty: HashMap::new(),
            unacked_count: 0,
            ack_due: None,
            last_rx: 0,
            now: 0,
            next_ping: None,
            nonce: 0,
            held_bytes: 0,
            barrier: None,
            resume_pending: None,
            stats: SessionStats::default(),
        }
    }

    pub(crate) fn set_now(&mut self, now: u64) {
        self.now = now;
    }

    pub(crate) fn is_up(&self) -> bool {
        matches!(self.phase, Phase::AwaitingHello | Phase::Open)
    }

    pub(crate) fn transmit(&mut self, frame: String) {
        self.stats.transmitted += 1;
        self.out.push_back(Output::Transmit(frame));
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
        self.phase = Phase::Closing;
        self.next_ping = None;
        self.ack_due = None;
    }

    /// A transport came up.
    pub(crate) fn connect(&mut self, now: u64, phase: Phase) -> Result<(), SessionError> {
        if self.is_up() {
            return Err(SessionError::AlreadyConnected);
        }
        self.phase = phase;
        self.framer = LineFramer::new(self.cfg.framer.clone());
        self.clear_held();
        self.dirty.clear();
        self.unacked_count = 0;
        self.ack_due = None;
        self.last_rx = now;
        self.next_ping =
            (self.cfg.ping_interval_ms > 0).then(|| now.saturating_add(self.cfg.ping_interval_ms));
        Ok(())
    }

    /// The transport is gone: queued frames and close requests belong to the dead
    /// connection and are dropped (events stay for the application).
    pub(crate) fn disconnect(&mut self) {
        self.phase = Phase::Down;
        self.clear_held();
        self.next_ping = None;
        self.ack_due = None;
        self.barrier = None;
        self.resume_pending = None;
        self.out
            .retain(|o| !matches!(o, Output::Transmit(_) | Output::Close(_)));
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
        self.last_rx = now;
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
            Ok(line) => self.on_line(now, &line),
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
    pub(crate) fn frame(&mut self, now: u64, frame: &str) -> Result<(), SessionError> {
        if self.frame_ok(now, frame)? {
            self.on_line(now, frame);
            self.maybe_flush_acks(now);
        }
        Ok(())
    }

    fn on_line(&mut self, now: u64, line: &str) {
        if let Some(msg) = self.decode(line) {
            self.on_message(now, msg, line.len());
        }
    }

    fn on_message(&mut self, now: u64, msg: Message, size: usize) {
        let awaiting = self.phase == Phase::AwaitingHello;
        match msg {
            Message::Hello(h) => {
                if self.state.role() == Role::Hub && awaiting {
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
                } else if self.state.role() == Role::Hub && self.phase == Phase::Open {
                    self.extensions(now, &p.extra);
                    self.hub_resume_chunk(now, &p.extra);
                    self.answer_ping_after_extensions(&p);
                } else {
                    self.answer_ping(now, &p);
                }
            }
            Message::Pong(p) => {
                self.extensions(now, &p.extra);
                if self.barrier.is_some()
                    && matches!(p.nonce, Some(wire::Nonce::Integer(n)) if Some(n) == self.barrier)
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
        self.last_rx = now;
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

    /// Decode one line; the framer (or the transport) already checked its UTF-8.
    fn decode(&mut self, line: &str) -> Option<Message> {
        match wire::decode_str(line, self.cfg.validate) {
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

    /// A sequenced frame arrived: deliver it in order, hold it, or drop it.
    pub(crate) fn sequenced(&mut self, now: u64, msg: Message, size: usize) {
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
                self.stats.duplicates += 1;
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

    fn deliver(&mut self, now: u64, msg: Message) {
        let attempt = self.inbound_attempt(&msg);
        let task = msg.task_id().unwrap_or_default();
        match self.dirty.get_mut(task) {
            Some(list) => {
                if !list.contains(&attempt) {
                    list.push(attempt);
                }
            }
            None => {
                self.dirty.insert(task.to_owned(), vec![attempt]);
            }
        }
        self.unacked_count += 1;
        if self.ack_due.is_none() {
            self.ack_due = Some(now.saturating_add(self.cfg.ack_delay_ms));
        }
        self.stats.delivered += 1;
        self.event(Event::Received(msg));
    }

    fn hold(&mut self, msg: Message, size: usize) {
        if self.stats.held_now >= self.cfg.max_held_frames
            || self.held_bytes.saturating_add(size) > self.cfg.max_held_bytes
        {
            self.stats.held_dropped += 1;
            return;
        }
        let attempt = self.inbound_attempt(&msg);
        let seq = msg.seq().unwrap_or(0);
        let streams = self
            .held
            .entry(msg.task_id().unwrap_or_default().to_owned())
            .or_default();
        let idx = match streams.iter().position(|(a, _)| *a == attempt) {
            Some(i) => i,
            None => {
                streams.push((attempt, BTreeMap::new()));
                streams.len() - 1
            }
        };
        match streams[idx].1.entry(seq) {
            std::collections::btree_map::Entry::Occupied(_) => self.stats.duplicates += 1,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((msg, size));
                self.stats.held += 1;
                self.stats.held_now += 1;
                self.held_bytes += size;
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
            let map = &mut streams[idx].1;
            let Some(entry) = map.first_entry() else {
                streams.swap_remove(idx);
                if streams.is_empty() {
                    self.held.remove(task);
                }
                return;
            };
            let seq = *entry.key();
            if seq > watermark + 1 {
                return;
            }
            let (msg, size) = entry.remove();
            self.stats.held_now -= 1;
            self.held_bytes -= size;
            if seq <= watermark {
                self.stats.duplicates += 1;
                continue;
            }
            match self.state.accept_in_order(&msg) {
                Ok(Arrival::InOrder) => self.deliver(now, msg),
                Ok(_) => self.stats.duplicates += 1,
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
                            declared: from - 1,
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
        self.phase == Phase::Open && self.resume_pending.is_none()
    }

    /// Apply one acknowledgement. Provisional frames it reveals as colliding are
    /// re-stamped by the state ([`ConnectionState::ack`]) and re-sent here; provisional
    /// frames it confirms (held back by the runner's barrier) are sent now.
    fn apply_ack(&mut self, p: &Position) {
        if self.state.is_forgotten(&p.task_id) {
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
        let frames: Vec<String> = self
            .state
            .outbound_log(&p.task_id, p.attempt)
            .map(|l| {
                l.kept()
                    .filter(|f| f.seq >= threshold)
                    .map(|f| f.frame.clone())
                    .collect()
            })
            .unwrap_or_default();
        for f in frames {
            self.transmit(f);
        }
    }

    /// Runner: the pong of the post-hello barrier ping arrived, so every acknowledgement
    /// the hub sent after the hello has been applied. Provisional frames still unconfirmed
    /// are final (the hub had none of their seqs): confirm them and send them.
    pub(crate) fn finish_barrier(&mut self) {
        self.barrier = None;
        let mut frames = Vec::new();
        for (_, channel) in self.state.tasks() {
            for (_, log) in channel.outbound() {
                if !log.is_confirmed() {
                    let from = log.unconfirmed_from();
                    frames.extend(
                        log.kept()
                            .filter(|f| f.seq >= from)
                            .map(|f| f.frame.clone()),
                    );
                }
            }
        }
        self.state.confirm_all();
        for f in frames {
            self.transmit(f);
        }
    }

    fn mark_dirty(&mut self, now: u64, task: &str, attempt: Option<u64>) {
        let list = self.dirty.entry(task.to_owned()).or_default();
        if !list.contains(&attempt) {
            list.push(attempt);
        }
        if self.ack_due.is_none() {
            self.ack_due = Some(now.saturating_add(self.cfg.ack_delay_ms));
        }
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
        let base = wire::encode(&Message::Pong(pong.clone())).len() + CONTROL_OVERHEAD;
        let budget = self.cfg.max_control_frame_bytes.saturating_sub(base);
        let mut rest: &[Position] = &acks;
        if budget > 0 {
            if let Some(first) = chunk_positions(&acks, budget, self.cfg.max_ack_entries)
                .into_iter()
                .next()
                .filter(|c| 2 + c.iter().map(|p| position_bytes(p) + 1).sum::<usize>() <= budget)
            {
                rest = &acks[first.len()..];
                pong.extra.insert("ack", Position::list_to_value(&first));
            }
        }
        self.transmit(wire::encode(&Message::Pong(pong)));
        let rest = rest.to_vec();
        self.send_ack_pings(&rest, &[]);
    }

    /// Pending acknowledgements (tombstoned streams included); clears the pending set.
    fn take_acks(&mut self) -> Vec<Position> {
        if self.dirty.is_empty() {
            return Vec::new();
        }
        let mut list = Vec::new();
        for (task, attempts) in self.dirty.drain() {
            for a in attempts {
                if let Some(w) = self.state.ack_watermark(&task, a) {
                    if w > 0 {
                        list.push(Position::new(task.clone(), a, w));
                    }
                }
            }
        }
        // Deterministic order on the wire.
        list.sort_by(|x, y| (&x.task_id, x.attempt).cmp(&(&y.task_id, y.attempt)));
        self.unacked_count = 0;
        self.ack_due = None;
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
        self.nonce += 1;
        self.nonce
    }

    /// Send a ping (next nonce) with optional `ack` and `replay_from` lists.
    pub(crate) fn send_ping(&mut self, ack: Option<&[Position]>, replay_from: Option<&[Position]>) {
        let mut ping = Ping::new(Some(self.next_nonce().into()));
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
        self.dirty.clear();
        self.unacked_count = 0;
        self.ack_due = None;
        let all = self.state.ack_positions();
        let budget = self.ping_budget();
        let size = |l: &[Position]| 2 + l.iter().map(|p| position_bytes(p) + 1).sum::<usize>();
        if !all.is_empty()
            && all.len() <= self.cfg.max_ack_entries.max(1)
            && size(&all) + size(replay_from) <= budget
        {
            self.send_ping(Some(&all), Some(replay_from));
        } else {
            self.send_ack_pings(&all, replay_from);
        }
    }

    fn flush_acks(&mut self) {
        let acks = self.take_acks();
        self.send_ack_pings(&acks, &[]);
    }

    fn maybe_flush_acks(&mut self, _now: u64) {
        if self.phase == Phase::Open && self.unacked_count >= self.cfg.ack_every_frames.max(1) {
            self.flush_acks();
        }
    }

    /// Run the timers at `now`.
    pub(crate) fn timers(&mut self, now: u64) {
        if !self.is_up() {
            return;
        }
        if self.cfg.peer_timeout_ms > 0
            && now >= self.last_rx.saturating_add(self.cfg.peer_timeout_ms)
        {
            self.close(CloseReason::PeerTimeout);
            return;
        }
        self.maybe_flush_acks(now);
        if self.phase == Phase::Open && self.ack_due.is_some_and(|d| now >= d) {
            self.flush_acks();
        }
        if let Some(p) = self.next_ping {
            if now >= p {
                // Pending acknowledgements ride on the keepalive ping.
                let acks = if self.phase == Phase::Open {
                    self.take_acks()
                } else {
                    Vec::new()
                };
                if acks.is_empty() {
                    self.send_ping(None, None);
                }
                self.send_ack_pings(&acks, &[]);
                self.next_ping = Some(now.saturating_add(self.cfg.ping_interval_ms));
            }
        }
    }

    pub(crate) fn deadline(&self) -> Option<u64> {
        if !self.is_up() {
            return None;
        }
        let mut d: Option<u64> = None;
        let mut take = |x: Option<u64>| {
            if let Some(x) = x {
                d = Some(d.map_or(x, |y| y.min(x)));
            }
        };
        take(self.next_ping);
        if self.cfg.peer_timeout_ms > 0 {
            take(Some(self.last_rx.saturating_add(self.cfg.peer_timeout_ms)));
        }
        if self.phase == Phase::Open {
            take(self.ack_due);
        }
        d
    }

    pub(crate) fn poll(&mut self) -> Output {
        loop {
            if let Some(o) = self.out.pop_front() {
                return o;
            }
            if !self.next_line() {
                return Output::Timeout(self.deadline());
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
}
