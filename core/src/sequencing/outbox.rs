//! Outbound side of one stream: the next seq and the frames kept for replay.

use std::collections::VecDeque;

/// One frame kept for replay: its seq and its exact encoded bytes (what was, or will
/// be, transmitted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptFrame {
    /// The frame's seq.
    pub seq: u64,
    /// The encoded frame (compact JSON, no trailing newline).
    pub frame: String,
}

/// The outbound log of one stream: the seq the next emitted frame gets and the frames
/// not yet acknowledged by the peer, ascending by seq. Bounds are enforced per
/// connection by [`ConnectionState`](super::ConnectionState).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxLog {
    next_seq: u64,
    kept: VecDeque<KeptFrame>,
}

impl Default for OutboxLog {
    fn default() -> Self {
        Self {
            next_seq: 1,
            kept: VecDeque::new(),
        }
    }
}

impl OutboxLog {
    /// A log whose first frame will get seq 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq the next emitted frame gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Last seq emitted (0 = none).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Frames kept for replay, ascending by seq.
    pub fn kept(&self) -> impl ExactSizeIterator<Item = &KeptFrame> + '_ {
        self.kept.iter()
    }

    /// The lowest seq this log can still send: the first kept frame, or the next seq
    /// when nothing is kept.
    pub fn first_available(&self) -> u64 {
        self.kept.front().map_or(self.next_seq, |f| f.seq)
    }

    /// Bytes of the kept frames.
    pub fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|f| f.frame.len()).sum()
    }

    pub(crate) fn from_parts(next_seq: u64, kept: VecDeque<KeptFrame>) -> Self {
        Self { next_seq, kept }
    }

    pub(crate) fn push(&mut self, frame: String) {
        let seq = self.next_seq;
        self.kept.push_back(KeptFrame { seq, frame });
        self.next_seq += 1;
    }

    /// Drop kept frames with seq ≤ `seq`; returns (frames, bytes) dropped.
    pub(crate) fn trim_through(&mut self, seq: u64) -> (usize, usize) {
        let (mut n, mut b) = (0, 0);
        while self.kept.front().is_some_and(|f| f.seq <= seq) {
            if let Some(f) = self.kept.pop_front() {
                n += 1;
                b += f.frame.len();
            }
        }
        (n, b)
    }

    /// The peer is ahead of everything emitted: continue numbering after its position.
    pub(crate) fn advance_to(&mut self, next_seq: u64) {
        if next_seq > self.next_seq {
            self.next_seq = next_seq;
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.kept.capacity() * std::mem::size_of::<KeptFrame>()
            + self.kept.iter().map(|f| f.frame.capacity()).sum::<usize>()
    }
}
