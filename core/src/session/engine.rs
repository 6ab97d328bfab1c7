//! The machinery both session machines share: framing and decoding inbound bytes,
//! in-order delivery with a bounded hold buffer, acknowledgements, keepalive timers and
//! the output queue.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::Value;

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
/// attempt.
fn positions(v: &Value, with_attempt: bool, role: Role) -> Result<Vec<Position>, String> {
    let list = Position::list_from_value(v)?;
    match list.iter().find(|p| p.attempt.is_some() != with_attempt) {
        Some(p) => Err(format!(
            "stream {:?} attempt {:?} is not a stream of the {role}",
            p.task_id, p.attempt
        )),
        None => Ok(list),
    }
}

type Held = HashMap<String, Vec<(Option<u64>, BTreeMap<u64, Message>)>>;

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

    pub(crate) fn disconnect(&mut self) {
        self.phase = Phase::Down;
        self.clear_held();
        self.next_ping = None;
        self.ack_due = None;
    }

    fn clear_held(&mut self) {
        self.held.clear();
        self.stats.held_now = 0;
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
        // The framer is never finished while a connection is up.
        let _ = self.framer.push(data);
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
            Ok(line) => self.on_line(now, line.as_bytes()),
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
            self.on_line(now, frame.as_bytes());
            self.maybe_flush_acks(now);
        }
        Ok(())
    }

    fn on_line(&mut self, now: u64, line: &[u8]) {
        if let Some(msg) = self.decode(line) {
            self.on_message(now, msg);
        }
    }

    fn on_message(&mut self, now: u64, msg: Message) {
        let awaiting = self.phase == Phase::AwaitingHello;
        match msg {
            Message::Hello(h) => {
                if self.state.role() == Role::Hub && awaiting {
                    self.hub_hello(now, h);
                } else {
                    self.peer_error("unexpected_message", "unexpected hello");
                }
            }
            Message::Ping(p) => self.answer_ping(now, &p),
            Message::Pong(p) => self.extensions(now, &p.extra),
            m => {
                if awaiting {
                    self.close(CloseReason::HelloRequired);
                } else {
                    self.sequenced(now, m);
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

    fn decode(&mut self, line: &[u8]) -> Option<Message> {
        match wire::decode(line, self.cfg.validate) {
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
    pub(crate) fn sequenced(&mut self, now: u64, msg: Message) {
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
            Ok(Arrival::Duplicate) => self.stats.duplicates += 1,
            Ok(Arrival::Ahead) => self.hold(msg),
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

    fn hold(&mut self, msg: Message) {
        if self.stats.held_now >= self.cfg.max_held_frames {
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
                v.insert(msg);
                self.stats.held += 1;
                self.stats.held_now += 1;
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
            let msg = entry.remove();
            self.stats.held_now -= 1;
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

    /// Apply the `ack` and `replay_from` extension fields of a ping, pong or hello.
    pub(crate) fn extensions(&mut self, now: u64, extra: &serde_json::Map<String, Value>) {
        // Outbound streams of the hub are command streams (no attempt), those of the
        // runner carry an attempt; inbound streams the other way round.
        let hub = self.state.role() == Role::Hub;
        if let Some(v) = extra.get("ack") {
            match positions(v, !hub, self.state.role()) {
                Ok(list) => {
                    for p in list {
                        let last = self.state.last_emitted(&p.task_id, p.attempt);
                        if p.seq > last {
                            self.peer_error(
                                "ack_ahead",
                                format!(
                                    "peer acknowledged seq {} of {:?} (attempt {:?}), beyond {last} emitted; numbering continues after it",
                                    p.seq, p.task_id, p.attempt
                                ),
                            );
                        }
                        self.state.ack(&p.task_id, p.attempt, p.seq);
                    }
                }
                Err(e) => self.peer_error("invalid_extension", format!("ack: {e}")),
            }
        }
        if let Some(v) = extra.get("replay_from") {
            match positions(v, hub, self.state.role()) {
                Ok(list) => {
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
                Err(e) => self.peer_error("invalid_extension", format!("replay_from: {e}")),
            }
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
        let mut pong = Pong::answering(ping);
        let acks = self.take_acks();
        if let Some(first) = acks.first() {
            pong.extra
                .insert("ack".into(), Position::list_to_value(first));
        }
        self.transmit(wire::encode(&Message::Pong(pong)));
        for chunk in acks.iter().skip(1) {
            self.send_ping(Some(chunk), None);
        }
    }

    /// Pending acknowledgements, chunked; clears the pending set.
    fn take_acks(&mut self) -> Vec<Vec<Position>> {
        if self.dirty.is_empty() {
            return Vec::new();
        }
        let mut list = Vec::new();
        for (task, attempts) in self.dirty.drain() {
            for a in attempts {
                if let Some(w) = self.state.inbound_watermark(&task, a) {
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
        list.chunks(self.cfg.max_ack_entries.max(1))
            .map(<[Position]>::to_vec)
            .collect()
    }

    /// Send a ping (next nonce) with optional `ack` and `replay_from` lists.
    pub(crate) fn send_ping(&mut self, ack: Option<&[Position]>, replay_from: Option<&[Position]>) {
        self.nonce += 1;
        let mut ping = Ping::new(Some(self.nonce.into()));
        if let Some(r) = replay_from.filter(|r| !r.is_empty()) {
            ping.extra
                .insert("replay_from".into(), Position::list_to_value(r));
        }
        if let Some(a) = ack.filter(|a| !a.is_empty()) {
            ping.extra.insert("ack".into(), Position::list_to_value(a));
        }
        self.transmit(wire::encode(&Message::Ping(ping)));
    }

    /// Acknowledge every inbound stream (after a hello), with an optional resync notice.
    pub(crate) fn send_full_ack(&mut self, replay_from: &[Position]) {
        self.dirty.clear();
        self.unacked_count = 0;
        self.ack_due = None;
        let all = self.state.ack_positions();
        let chunks: Vec<&[Position]> = all.chunks(self.cfg.max_ack_entries.max(1)).collect();
        if chunks.is_empty() {
            if !replay_from.is_empty() {
                self.send_ping(None, Some(replay_from));
            }
            return;
        }
        for (i, c) in chunks.iter().enumerate() {
            let r = if i == 0 { Some(replay_from) } else { None };
            self.send_ping(Some(c), r);
        }
    }

    fn flush_acks(&mut self) {
        for chunk in self.take_acks() {
            self.send_ping(Some(&chunk), None);
        }
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
                for chunk in acks {
                    self.send_ping(Some(&chunk), None);
                }
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
