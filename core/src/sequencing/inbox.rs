//! Inbound side of one stream: contiguous watermark plus a bounded out-of-order window.

/// How a received seq relates to what the stream has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arrival {
    /// New, and exactly the next seq: the watermark advanced (possibly over seqs that had
    /// arrived ahead of it).
    InOrder,
    /// New, but above the next seq: recorded in the out-of-order window.
    Ahead,
    /// Seen before (at or below the watermark, or already in the window).
    Duplicate,
}

impl Arrival {
    /// `true` for [`InOrder`](Self::InOrder) and [`Ahead`](Self::Ahead): the frame has
    /// not been seen before and must be applied.
    pub fn is_new(self) -> bool {
        !matches!(self, Arrival::Duplicate)
    }

    /// Stable snake_case name: `in_order`, `ahead`, `duplicate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Arrival::InOrder => "in_order",
            Arrival::Ahead => "ahead",
            Arrival::Duplicate => "duplicate",
        }
    }
}

/// Why [`InboxTracker::receive`] (standalone use) refused a seq. The codes are the
/// [`SequencingError`](super::SequencingError) codes of the same refusals; both are
/// remote violations (the sender broke the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The seq is 0 (streams start at 1) or above 2^53 − 1. Code `invalid_seq`.
    #[error("seq {seq} is invalid (streams start at 1; at most 2^53 - 1)")]
    InvalidSeq {
        /// The refused seq.
        seq: u64,
    },
    /// The seq lies beyond the out-of-order window (`seq > watermark + window`); nothing
    /// is recorded. Code `beyond_window`.
    #[error("seq {seq} is beyond the window: watermark {watermark}, window {window}")]
    BeyondWindow {
        /// The refused seq.
        seq: u64,
        /// Last seq received contiguously.
        watermark: u64,
        /// The window in force.
        window: u64,
    },
}

impl InboxError {
    /// Stable snake_case code: `invalid_seq`, `beyond_window`.
    pub fn code(&self) -> &'static str {
        match self {
            InboxError::InvalidSeq { .. } => "invalid_seq",
            InboxError::BeyondWindow { .. } => "beyond_window",
        }
    }
}

/// Why [`InboxTracker::record`] refused a seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InboxRefusal {
    Zero,
    BeyondWindow,
}

/// What one inbound stream has received: the last seq received contiguously (the
/// *watermark*) and which seqs in `(watermark, watermark + window]` arrived ahead of
/// it, as a ring bitset of `window` bits rounded up to 64 (128 bytes for the default
/// window of 1024), allocated only while something is ahead. Seqs beyond the window are
/// refused, so memory never grows with the number of frames received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxTracker {
    watermark: u64,
    /// Bit `s % (64 · len)` is set when seq `s` (above the watermark) was received.
    bits: Vec<u64>,
    ahead_count: u32,
}

impl InboxTracker {
    /// A tracker that has received nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker restored from its parts for a stream with the given window: seqs
    /// outside `(watermark, watermark + window]` are ignored and contiguous seqs are
    /// absorbed into the watermark.
    pub fn from_parts(watermark: u64, ahead: impl IntoIterator<Item = u64>, window: u64) -> Self {
        let window = window.max(1);
        let mut t = Self {
            watermark,
            ..Self::default()
        };
        for s in ahead {
            if s > watermark && s.saturating_sub(watermark) <= window && !t.is_set(s) {
                t.set(s, window);
            }
        }
        t.absorb();
        t
    }

    /// Last seq received contiguously from 1 (0 = none).
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Seqs received above the watermark, ascending.
    pub fn ahead(&self) -> impl Iterator<Item = u64> + '_ {
        let slots = self.slots();
        let w = self.watermark;
        (1..=slots)
            .filter_map(move |d| w.checked_add(d))
            .filter(move |s| self.ahead_count > 0 && self.is_set(*s))
    }

    /// Number of seqs received above the watermark.
    pub fn ahead_len(&self) -> usize {
        self.ahead_count as usize
    }

    /// `true` once any frame was received (or the stream was skipped forward).
    pub fn has_received(&self) -> bool {
        self.watermark > 0 || self.ahead_count > 0
    }

    fn slots(&self) -> u64 {
        (self.bits.len() as u64).saturating_mul(64)
    }

    /// The word index and bit mask of `seq` in the ring (`None` while nothing is
    /// allocated).
    #[inline]
    fn slot(&self, seq: u64) -> Option<(usize, u64)> {
        let i = seq.checked_rem(self.slots())?;
        Some(((i >> 6) as usize, 1u64 << (i & 63)))
    }

    fn is_set(&self, seq: u64) -> bool {
        self.slot(seq)
            .and_then(|(w, m)| self.bits.get(w).map(|word| word & m != 0))
            .unwrap_or(false)
    }

    fn set(&mut self, seq: u64, window: u64) {
        if self.bits.is_empty() {
            let words = usize::try_from(window.div_ceil(64).max(1)).unwrap_or(1);
            self.bits = vec![0; words];
        }
        if let Some((w, m)) = self.slot(seq) {
            if let Some(word) = self.bits.get_mut(w) {
                if *word & m == 0 {
                    *word |= m;
                    self.ahead_count = self.ahead_count.saturating_add(1);
                }
            }
        }
    }

    fn clear(&mut self, seq: u64) {
        if let Some((w, m)) = self.slot(seq) {
            if let Some(word) = self.bits.get_mut(w) {
                if *word & m != 0 {
                    *word &= !m;
                    self.ahead_count = self.ahead_count.saturating_sub(1);
                }
            }
        }
    }

    /// Classify `seq` without recording it.
    pub(crate) fn classify(&self, seq: u64, window: u64) -> Result<Arrival, InboxRefusal> {
        if seq == 0 || seq > crate::wire::MAX_SAFE_INTEGER {
            return Err(InboxRefusal::Zero);
        }
        // `seq > watermark` below, so the distance is at least 1.
        match seq.checked_sub(self.watermark) {
            None | Some(0) => Ok(Arrival::Duplicate),
            Some(d) if d > window => Err(InboxRefusal::BeyondWindow),
            Some(1) => Ok(Arrival::InOrder),
            Some(_) if self.is_set(seq) => Ok(Arrival::Duplicate),
            Some(_) => Ok(Arrival::Ahead),
        }
    }

    /// Standalone use of one tracker, without a
    /// [`ConnectionState`](super::ConnectionState) (stapel-runner-protocol 0.1.1's
    /// `InboxTracker().receive`): classify and record `seq` with an out-of-order window of
    /// `window` seqs (clamped to `1..=`[`MAX_INBOUND_WINDOW`](super::MAX_INBOUND_WINDOW),
    /// as [`SequencingConfig::inbound_window`](super::SequencingConfig) is). The
    /// watermark advances across a gap only once the missing seqs arrive. Use one window
    /// for the tracker's whole life.
    ///
    /// # Errors
    /// [`InboxError`] (`invalid_seq`, `beyond_window`); nothing is recorded.
    pub fn receive(&mut self, seq: u64, window: u64) -> Result<Arrival, InboxError> {
        let window = window.clamp(1, super::MAX_INBOUND_WINDOW);
        self.record(seq, window).map_err(|r| match r {
            InboxRefusal::Zero => InboxError::InvalidSeq { seq },
            InboxRefusal::BeyondWindow => InboxError::BeyondWindow {
                seq,
                watermark: self.watermark,
                window,
            },
        })
    }

    /// Classify and record `seq`.
    pub(crate) fn record(&mut self, seq: u64, window: u64) -> Result<Arrival, InboxRefusal> {
        let arrival = self.classify(seq, window)?;
        match arrival {
            Arrival::InOrder => {
                self.watermark = seq;
                self.absorb();
            }
            Arrival::Ahead => self.set(seq, window),
            Arrival::Duplicate => {}
        }
        Ok(arrival)
    }

    /// The sender declared that it can no longer send anything below `first_available`.
    /// If the watermark is below `first_available − 1`, jump it there and return the
    /// missing range `(from, to)` (inclusive); otherwise nothing changes.
    pub(crate) fn skip_to(&mut self, first_available: u64) -> Option<(u64, u64)> {
        let target = first_available
            .saturating_sub(1)
            .min(crate::wire::MAX_SAFE_INTEGER);
        if self.watermark >= target {
            return None;
        }
        // watermark < target ≤ 2^53 − 1: no overflow.
        let from = self.watermark.saturating_add(1);
        if self.ahead_count > 0 {
            if target.saturating_sub(self.watermark) >= self.slots() {
                self.bits = Vec::new();
                self.ahead_count = 0;
            } else {
                for s in from..=target {
                    self.clear(s);
                }
            }
        }
        self.watermark = target;
        self.absorb();
        Some((from, target))
    }

    fn absorb(&mut self) {
        while self.ahead_count > 0 {
            let next = self.watermark.saturating_add(1);
            if !self.is_set(next) {
                break;
            }
            self.clear(next);
            self.watermark = next;
        }
        if self.ahead_count == 0 && !self.bits.is_empty() {
            self.bits = Vec::new();
        }
    }

    /// Heap bytes held: the bitset while something is ahead, else nothing.
    pub fn heap_bytes(&self) -> usize {
        self.bits.capacity().saturating_mul(8)
    }
}
