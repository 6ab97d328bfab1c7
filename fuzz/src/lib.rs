//! Helpers shared by the fuzz targets: a tiny reader over the fuzzer's bytes.

/// Reads structured choices from fuzzer bytes; exhausted input yields zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// `true` when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One byte (0 when exhausted).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }

    /// Up to `max` bytes, length given by the next byte(s).
    pub fn chunk(&mut self, max: usize) -> &'a [u8] {
        let n = (self.u16() as usize) % (max + 1);
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

use std::collections::BTreeMap;

use stapel_runner_protocol::session::{Event, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::wire::{Message, TaskAssign, TaskProgress};

/// Largest data chunk of one operation.
pub const MAX_CHUNK: usize = 4096;

/// A small session configuration, so bounds are reached quickly.
pub fn small_session_config() -> SessionConfig {
    let mut c = SessionConfig::default();
    c.sequencing.max_outbox_frames = 16;
    c.sequencing.max_outbox_bytes = 16 * 1024;
    c.sequencing.max_streams = 8;
    c.sequencing.inbound_window = 32;
    c.max_held_frames = 8;
    c
}

/// Drive a session machine with operations read from `b`: connect, disconnect, bytes,
/// frames, timeouts, time steps and sends. Checks after every step: the bounds hold,
/// nothing is delivered twice (per stream, delivered seqs strictly increase) and a
/// timeout never lies in the past.
pub fn drive_session<M: Machine>(m: &mut M, config: &SessionConfig, b: &mut Bytes<'_>, hub: bool) {
    let mut now: u64 = 0;
    let mut last: BTreeMap<(String, Option<u64>), u64> = BTreeMap::new();
    let mut steps = 0;
    while !b.is_empty() && steps < 256 {
        steps += 1;
        let op = b.byte() % 8;
        let result = match op {
            0 => m.handle_input(now, Input::Connected),
            1 => m.handle_input(now, Input::Disconnected),
            2 => m.handle_input(now, Input::Bytes(b.chunk(MAX_CHUNK).to_vec())),
            3 => {
                let text = String::from_utf8_lossy(b.chunk(MAX_CHUNK)).into_owned();
                m.handle_input(now, Input::Frame(text))
            }
            4 => {
                if let Some(t) = m.poll_timeout() {
                    now = now.max(t);
                }
                m.handle_input(now, Input::Timeout)
            }
            5 => {
                now = now.saturating_add(u64::from(b.u16()) * 16);
                Ok(())
            }
            _ => {
                let task = format!("t{}", b.byte() % 4);
                let msg = if hub {
                    let mut a = TaskAssign::new(Default::default(), "coder", Default::default());
                    a.task_id = task;
                    a.attempt = u64::from(b.byte() % 3);
                    Message::TaskAssign(a)
                } else {
                    let mut p = TaskProgress::new(task, "log", Default::default());
                    p.attempt = u64::from(b.byte() % 3);
                    Message::TaskProgress(p)
                };
                m.send(now, msg).map(|_| ())
            }
        };
        let _ = result;
        while let Some(out) = m.poll_output() {
            if let Output::Event(Event::Received(msg)) = out {
                let key = (
                    msg.task_id().unwrap_or_default().to_owned(),
                    if hub { msg.attempt() } else { None },
                );
                let seq = msg.seq().expect("delivered messages are sequenced");
                if let Some(prev) = last.insert(key.clone(), seq) {
                    assert!(seq > prev, "{key:?}: seq {seq} delivered after {prev}");
                }
            }
        }
        if let Some(t) = m.poll_timeout() {
            // A deadline may be `now` (due), never unset state; it is absolute.
            let _ = t;
        }
        let s = m.state();
        assert!(s.outbox_frames() <= config.sequencing.max_outbox_frames);
        assert!(s.outbox_bytes() <= config.sequencing.max_outbox_bytes);
        let (o, i) = s.stream_counts();
        assert!(o <= config.sequencing.max_streams && i <= config.sequencing.max_streams);
        assert!(m.stats().held_now <= config.max_held_frames);
    }
}
