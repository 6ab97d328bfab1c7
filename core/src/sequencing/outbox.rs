//! Outbound side of one stream: the next seq and the frames kept for replay.

use std::collections::VecDeque;

use super::{EmitError, SequencingError};
use crate::wire::{self, Message};

/// One frame kept for replay: its seq and its exact encoded bytes (what was, or will
/// be, transmitted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptFrame {
    /// The frame's seq.
    pub seq: u64,
    /// The encoded frame (compact JSON, no trailing newline).
    pub frame: String,
}

/// How the seqs an outbound stream stamps relate to the peer's position (see the
/// lifecycle table on [`ConnectionState`](super::ConnectionState)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numbering {
    /// The peer's position on the stream is known: every stamped seq is final.
    Final,
    /// Seqs from `from` on were (or will be) stamped without knowing the peer's
    /// position: they are re-stamped after it once it is known.
    Provisional {
        /// The first provisional seq.
        from: u64,
    },
}

/// The outbound log of one stream: the seq the next emitted frame gets and the frames
/// not yet acknowledged by the peer, ascending by seq. Bounds are enforced per
/// connection by [`ConnectionState`](super::ConnectionState).
///
/// Frames at or above [`unconfirmed_from`](Self::unconfirmed_from) were stamped by a
/// state that did not yet know the peer's position on this stream (a fresh or restored
/// state): the peer may already have seen *other* frames under those seqs, so they are
/// re-stamped after the peer's position once it is known, instead of being trimmed.
#[derive(Debug, Clone)]
pub struct OutboxLog {
    next_seq: u64,
    kept: VecDeque<KeptFrame>,
    numbering: Numbering,
}

/// Equality compares what a snapshot persists: the next seq, the kept frames and the
/// first provisional seq (a provisional log without provisional frames equals a final
/// one).
impl PartialEq for OutboxLog {
    fn eq(&self, other: &Self) -> bool {
        self.next_seq == other.next_seq
            && self.kept == other.kept
            && self.unconfirmed_from() == other.unconfirmed_from()
    }
}

impl Eq for OutboxLog {}

impl Default for OutboxLog {
    fn default() -> Self {
        Self {
            next_seq: 1,
            kept: VecDeque::new(),
            numbering: Numbering::Final,
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
        self.next_seq.saturating_sub(1)
    }

    /// Frames kept for replay, ascending by seq.
    pub fn kept(&self) -> impl ExactSizeIterator<Item = &KeptFrame> + '_ {
        self.kept.iter()
    }

    /// The first seq stamped without knowing the peer's position (`next_seq` when every
    /// kept frame is confirmed).
    pub fn unconfirmed_from(&self) -> u64 {
        match self.numbering {
            Numbering::Final => self.next_seq,
            Numbering::Provisional { from } => from.min(self.next_seq),
        }
    }

    /// `true` once the peer's position on this stream is known (no provisional frames).
    pub fn is_confirmed(&self) -> bool {
        self.numbering == Numbering::Final
    }

    /// The lowest seq this log can still send: the first kept frame, or the next seq
    /// when nothing is kept.
    pub fn first_available(&self) -> u64 {
        self.kept.front().map_or(self.next_seq, |f| f.seq)
    }

    /// The replay tail: the kept frames with a seq above `last_seq`, ascending, decoded
    /// from the kept bytes without validation (they were validated when emitted). A
    /// `last_seq` at or above [`last_seq`](Self::last_seq) gives an empty list; frames
    /// already trimmed (acknowledged) are not kept, so they are not in it.
    ///
    /// # Errors
    /// `undecodable_frame` when one of those kept frames no longer decodes (an internal
    /// invariant broke): the call fails as a whole instead of skipping the frame, the same
    /// policy as re-stamping for a replay (`restamp_failed`) — a frame is never lost
    /// silently.
    pub fn since(&self, last_seq: u64) -> Result<Vec<Message>, SequencingError> {
        self.kept
            .iter()
            .filter(|f| f.seq > last_seq)
            .map(|f| {
                wire::decode(f.frame.as_bytes(), false)
                    .map_err(|_| SequencingError::UndecodableFrame { seq: f.seq })
            })
            .collect()
    }

    /// Standalone use of one log, without a [`ConnectionState`](super::ConnectionState)
    /// (stapel-runner-protocol 0.1.1's `OutboxLog().emit`): stamp the next seq on `msg`,
    /// keep its encoded frame for replay and return the stamped message. The log is
    /// bounded like a connection's: at most `max_frames` frames and `max_bytes` encoded
    /// bytes are kept (see [`SequencingConfig`](super::SequencingConfig)'s
    /// `max_outbox_frames` / `max_outbox_bytes` for the defaults); a full log refuses the
    /// message until [`ack`](Self::ack) trims it. The log does not key streams: the
    /// caller keeps one log per stream.
    ///
    /// # Errors
    /// [`EmitError`] carrying the message back unchanged: `not_sequenced` (`hello`,
    /// `ping`, `pong`), `seq_exhausted`, `nested_too_deep`, `frame_too_large` (one frame
    /// above `max_bytes`), `backpressure` (the log is full). Nothing is recorded on error.
    pub fn emit(
        &mut self,
        mut msg: Message,
        max_frames: usize,
        max_bytes: usize,
    ) -> Result<Message, EmitError> {
        let fail = |error, message| EmitError {
            error,
            message: Box::new(message),
        };
        let Some(original) = msg.seq() else {
            let message_type = msg.message_type();
            return Err(fail(SequencingError::NotSequenced { message_type }, msg));
        };
        let seq = self.next_seq;
        if seq > wire::MAX_SAFE_INTEGER {
            let task_id = msg.task_id().unwrap_or_default().to_owned();
            return Err(fail(SequencingError::SeqExhausted { task_id }, msg));
        }
        if wire::check_depth(&msg).is_err() {
            let max = crate::json::MAX_DEPTH;
            return Err(fail(SequencingError::NestedTooDeep { max }, msg));
        }
        msg.set_seq(seq);
        let frame = wire::encode(&msg);
        let (frames, bytes) = (self.kept.len(), self.kept_bytes());
        let error = if frame.len() > max_bytes {
            Some(SequencingError::FrameTooLarge {
                bytes: frame.len(),
                max: max_bytes,
            })
        } else if frames >= max_frames || bytes.saturating_add(frame.len()) > max_bytes {
            Some(SequencingError::Backpressure { frames, bytes })
        } else {
            None
        };
        if let Some(e) = error {
            msg.set_seq(original);
            return Err(fail(e, msg));
        }
        self.push(frame);
        Ok(msg)
    }

    /// Standalone use (0.1.1's `OutboxLog().ack`): the peer holds every frame up to
    /// `seq`, so drop the kept frames at or below it. Numbering does not move. Returns how
    /// many frames were dropped.
    pub fn ack(&mut self, seq: u64) -> usize {
        self.trim_through(seq).0
    }

    /// Bytes of the kept frames.
    pub fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|f| f.frame.len()).sum()
    }

    pub(crate) fn from_parts(
        next_seq: u64,
        kept: VecDeque<KeptFrame>,
        numbering: Numbering,
    ) -> Self {
        Self {
            next_seq,
            kept,
            numbering,
        }
    }

    /// An empty log numbered from `next_seq` (1 for a new stream, the tombstone's last
    /// seq + 1 for a revived one).
    pub(crate) fn starting_at(next_seq: u64, numbering: Numbering) -> Self {
        Self {
            next_seq,
            kept: VecDeque::new(),
            numbering,
        }
    }

    /// Mark the frames stamped from now on as provisional (a restored state).
    pub(crate) fn mark_unconfirmed(&mut self) {
        if self.numbering == Numbering::Final {
            self.numbering = Numbering::Provisional {
                from: self.next_seq,
            };
        }
    }

    /// The peer's position is known: every kept frame is numbered consistently with it.
    pub(crate) fn confirm(&mut self) {
        self.numbering = Numbering::Final;
    }

    /// The frames kept, mutably (re-stamping).
    pub(crate) fn kept_mut(&mut self) -> &mut VecDeque<KeptFrame> {
        &mut self.kept
    }

    /// Set the next seq outright (re-stamping).
    pub(crate) fn set_next_seq(&mut self, next_seq: u64) {
        self.next_seq = next_seq;
    }

    /// Keep `frame` under the next seq. The caller has checked that the next seq is at
    /// most 2^53 − 1, so the increment cannot wrap.
    pub(crate) fn push(&mut self, frame: String) {
        let seq = self.next_seq;
        self.kept.push_back(KeptFrame { seq, frame });
        self.next_seq = seq.saturating_add(1);
    }

    /// Drop kept frames with seq ≤ `seq`; returns (frames, bytes) dropped.
    pub(crate) fn trim_through(&mut self, seq: u64) -> (usize, usize) {
        let (mut n, mut b) = (0usize, 0usize);
        while self.kept.front().is_some_and(|f| f.seq <= seq) {
            if let Some(f) = self.kept.pop_front() {
                n = n.saturating_add(1);
                b = b.saturating_add(f.frame.len());
            }
        }
        (n, b)
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let frames = self
            .kept
            .capacity()
            .saturating_mul(std::mem::size_of::<KeptFrame>());
        self.kept
            .iter()
            .fold(frames, |acc, f| acc.saturating_add(f.frame.capacity()))
    }
}
