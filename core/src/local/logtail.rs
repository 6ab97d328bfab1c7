//! The bounded log tail (documented on [`LogTail`]).

use serde_json::{json, Value};
use std::collections::VecDeque;

/// Default number of retained lines.
pub(crate) const DEFAULT_LOG_MAX_LINES: usize = 200;
/// Default number of retained bytes (16 KiB).
pub(crate) const DEFAULT_LOG_MAX_BYTES: usize = 16 * 1024;

/// The bounded log tail reported with `harness.exited`.
///
/// Harness `log`/`diagnostic` messages and harness stderr lines are kept here, never as
/// canonical events. A single line longer than `max_bytes` is truncated to `max_bytes` on
/// a UTF-8 character boundary; then the oldest lines are evicted while more than
/// `max_lines` lines or more than `max_bytes` bytes are held, and every eviction counts
/// one dropped line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    max_lines: usize,
    max_bytes: usize,
    lines: VecDeque<String>,
    bytes: usize,
    dropped: u64,
}

impl LogTail {
    /// An empty tail. `max_lines` 0 keeps nothing (every line counts as dropped).
    pub(crate) fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            max_lines,
            max_bytes,
            lines: VecDeque::new(),
            bytes: 0,
            dropped: 0,
        }
    }

    /// Append one line.
    pub(crate) fn push(&mut self, line: &str) {
        let mut end = line.len().min(self.max_bytes);
        while !line.is_char_boundary(end) {
            end = end.saturating_sub(1);
        }
        let kept = line.get(..end).unwrap_or_default();
        self.bytes = self.bytes.saturating_add(kept.len());
        self.lines.push_back(kept.to_owned());
        while self.lines.len() > self.max_lines || self.bytes > self.max_bytes {
            match self.lines.pop_front() {
                Some(l) => {
                    self.bytes = self.bytes.saturating_sub(l.len());
                    self.dropped = self.dropped.saturating_add(1);
                }
                None => break,
            }
        }
    }

    /// Retained lines, oldest first.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }

    /// Retained bytes.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// Lines evicted so far.
    pub fn dropped_lines(&self) -> u64 {
        self.dropped
    }

    /// `{lines, retainedBytes, droppedLines}` as reported in `harness.exited`.
    pub fn to_value(&self) -> Value {
        json!({
            "lines": self.lines.iter().collect::<Vec<_>>(),
            "retainedBytes": self.bytes,
            "droppedLines": self.dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_tail() {
        let mut t = LogTail::new(2, 12);
        for l in ["first", "second", "third"] {
            t.push(l);
        }
        assert_eq!(t.lines().collect::<Vec<_>>(), ["second", "third"]);
        assert_eq!(t.dropped_lines(), 1);
        assert!(t.retained_bytes() <= 12);
    }

    #[test]
    fn truncates_a_long_line_on_a_char_boundary() {
        let mut t = LogTail::new(4, 5);
        t.push("ééé"); // 6 bytes
        assert_eq!(t.lines().collect::<Vec<_>>(), ["éé"]);
        assert_eq!(t.retained_bytes(), 4);
    }
}
