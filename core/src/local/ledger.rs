//! The command ledger (documented on [`CommandLedger`]).

use std::collections::{HashMap, VecDeque};

/// Default [`CommandLedger`] entry bound.
pub(crate) const DEFAULT_LEDGER_MAX_ENTRIES: usize = 1024;
/// Default [`CommandLedger`] byte bound (1 MiB of ids plus canonical JSON).
pub(crate) const DEFAULT_LEDGER_MAX_BYTES: usize = 1024 * 1024;

/// What the ledger says about a command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum LedgerVerdict {
    /// Unseen id with the expected `controllerSeq`: record and apply it.
    Fresh,
    /// Same id, same canonical JSON: answer `duplicate`, apply nothing.
    Duplicate,
    /// Same id, different canonical JSON: answer `rejected`.
    Conflict,
    /// Unseen id, `controllerSeq` is not the next one: answer `rejected`.
    NotContiguous {
        /// The `controllerSeq` the ledger expects.
        expected: u64,
    },
}

/// Bounded ledger of accepted commands (read it with
/// [`LocalRun::ledger`](super::LocalRun::ledger)).
///
/// The command ledger keeps the canonical JSON per accepted `commandId` and the next
/// `controllerSeq`.
///
/// Order (as in the original runner): **schema** (the caller reads the
/// [`CommandEnvelope`](super::CommandEnvelope): schema id and shape, `type` as text) →
/// **duplicate** → **contiguity** → **record** → **dispatch** (the caller; an unknown or
/// unimplemented `type` is rejected there, after it used up its `controllerSeq`). The
/// canonical JSON stored is that of the typed command
/// ([`CommandEnvelope::ledger_value`](super::CommandEnvelope::ledger_value)).
///
/// 1. **duplicate by `commandId`** — the same id with the same canonical JSON is a
///    *duplicate* (no second effect); the same id with different canonical
///    JSON is a *conflict*. This comes *before* the sequence check, so a
///    retransmitted old command is a duplicate, not a gap;
/// 2. **contiguity** — `controllerSeq` must equal [`CommandLedger::next_seq`] (1 for the
///    first command), otherwise *not contiguous*.
///
/// # Bound
///
/// The ledger keeps at most `max_entries` commands and `max_bytes` bytes of canonical
/// JSON (each entry costs its id plus its canonical text). Recording past either bound
/// evicts the oldest entries first. An evicted command that is retransmitted is no longer
/// recognised as a duplicate; because its `controllerSeq` is behind `next_seq` it is then
/// answered `NotContiguous` (rejected) — it is never applied a second time. The count of
/// evicted entries is [`CommandLedger::evicted`]. Lookup, recording and each eviction
/// are O(1) (a hash map plus a queue of ids in arrival order).
#[derive(Debug, Clone)]
pub struct CommandLedger {
    max_entries: usize,
    max_bytes: usize,
    entries: HashMap<String, String>,
    /// Ids of `entries`, oldest first; each id appears once.
    order: VecDeque<String>,
    bytes: usize,
    next_seq: u64,
    evicted: u64,
}

impl CommandLedger {
    /// An empty ledger; bounds below 1 are treated as 1.
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            max_entries: max_entries.max(1),
            max_bytes: max_bytes.max(1),
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            next_seq: 1,
            evicted: 0,
        }
    }

    /// Classify a command by id, canonical JSON and `controllerSeq` (no state change).
    pub(crate) fn check(
        &self,
        command_id: &str,
        canonical: &str,
        controller_seq: u64,
    ) -> LedgerVerdict {
        match self.entries.get(command_id) {
            Some(stored) if stored == canonical => LedgerVerdict::Duplicate,
            Some(_) => LedgerVerdict::Conflict,
            None if controller_seq != self.next_seq => LedgerVerdict::NotContiguous {
                expected: self.next_seq,
            },
            None => LedgerVerdict::Fresh,
        }
    }

    /// Record a [`LedgerVerdict::Fresh`] command and advance `next_seq`, evicting the
    /// oldest entries past the bounds. (Recording an id that is already held replaces its
    /// text in place; the machine never does that.)
    pub(crate) fn record(&mut self, command_id: &str, canonical: &str) {
        self.bytes = self
            .bytes
            .saturating_add(command_id.len().saturating_add(canonical.len()));
        match self
            .entries
            .insert(command_id.to_owned(), canonical.to_owned())
        {
            Some(old) => {
                self.bytes = self
                    .bytes
                    .saturating_sub(command_id.len().saturating_add(old.len()))
            }
            None => self.order.push_back(command_id.to_owned()),
        }
        self.next_seq = self.next_seq.saturating_add(1);
        while self.entries.len() > self.max_entries
            || (self.bytes > self.max_bytes && self.entries.len() > 1)
        {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.entries.remove(&k) {
                self.bytes = self.bytes.saturating_sub(k.len().saturating_add(v.len()));
                self.evicted = self.evicted.saturating_add(1);
            }
        }
    }

    /// The `controllerSeq` the next fresh command must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held (ids plus canonical JSON).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries evicted by the bounds so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_is_checked_before_contiguity_and_eviction_never_reapplies() {
        let mut l = CommandLedger::new(2, 1 << 20);
        assert_eq!(l.check("a", "{1}", 1), LedgerVerdict::Fresh);
        l.record("a", "{1}");
        assert_eq!(l.check("a", "{1}", 1), LedgerVerdict::Duplicate);
        assert_eq!(l.check("a", "{2}", 1), LedgerVerdict::Conflict);
        assert_eq!(
            l.check("b", "{}", 3),
            LedgerVerdict::NotContiguous { expected: 2 }
        );
        l.record("b", "{}");
        l.record("c", "{}");
        assert_eq!(l.len(), 2);
        assert_eq!(l.evicted(), 1);
        assert_eq!(
            l.check("a", "{1}", 1),
            LedgerVerdict::NotContiguous { expected: 4 }
        );
        assert_eq!(
            l.check("z", "{}", 0),
            LedgerVerdict::NotContiguous { expected: 4 }
        );
    }

    #[test]
    fn eviction_is_oldest_first_under_both_bounds() {
        let mut l = CommandLedger::new(1000, 20);
        for i in 0..100u32 {
            let id = format!("c{i}");
            assert_eq!(l.check(&id, "{x}", u64::from(i) + 1), LedgerVerdict::Fresh);
            l.record(&id, "{x}");
            assert!(l.bytes() <= 20);
        }
        // Each entry costs 6..7 bytes: the newest two or three are held.
        assert!(l.len() >= 2 && l.len() <= 3);
        assert_eq!(l.evicted() + l.len() as u64, 100);
        assert_eq!(l.check("c99", "{x}", 1), LedgerVerdict::Duplicate);
        assert_eq!(
            l.check("c0", "{x}", 1),
            LedgerVerdict::NotContiguous { expected: 101 }
        );
        // A re-used evicted id with the next seq is fresh again and held once.
        l.record("c0", "{x}");
        assert_eq!(l.check("c0", "{y}", 102), LedgerVerdict::Conflict);
    }
}
