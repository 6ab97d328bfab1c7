//! Bounded JSONL line framing.
//!
//! Every stream of newline-delimited JSON in the protocols — the hub WebSocket's text
//! frames when a host batches them, the local controller's stdin/stdout, a harness's
//! stdout and stderr — goes through [`LineFramer`]. It owns one rule set:
//!
//! * bytes may arrive in any chunking: the lines pulled out are the same whether the
//!   input was pushed in one piece or a byte at a time;
//! * a line is the bytes before a `\n`; one `\r` directly before the `\n` is removed (CRLF
//!   is accepted), and empty lines are skipped unless
//!   [`FramerConfig::skip_empty_lines`] is `false`;
//! * a line longer than [`FramerConfig::max_line_bytes`] (counted before the `\n`, so a
//!   trailing `\r` counts) yields exactly one [`FramingError::LineTooLong`]. The framer stops
//!   buffering at that moment, discards the rest of that line as it arrives and resumes with
//!   the next one. The partial-line buffer therefore never holds more than `max_line_bytes`;
//! * a line that is not UTF-8 yields [`FramingError::InvalidUtf8`] and framing continues;
//! * after [`LineFramer::finish`] (end of input) an unterminated final line is returned
//!   like any other line.
//!
//! # Call order
//!
//! ```
//! use stapel_runner_protocol::framing::{FramerConfig, LineFramer};
//!
//! let mut framer = LineFramer::new(FramerConfig::default());
//! framer.push(b"{\"type\":\"ping\"}\r\n{\"ty").unwrap();
//! assert_eq!(framer.poll_line().unwrap().unwrap(), "{\"type\":\"ping\"}");
//! assert!(framer.poll_line().is_none()); // the second line is not complete yet
//! framer.push(b"pe\":\"pong\"}").unwrap();
//! framer.finish();
//! assert_eq!(framer.poll_line().unwrap().unwrap(), "{\"type\":\"pong\"}");
//! assert!(framer.poll_line().is_none());
//! ```
//!
//! Drain [`LineFramer::poll_line`] until it returns `None` after every
//! [`LineFramer::push`]: complete lines wait in a queue until they are pulled, so the
//! framer holds at most the partial line (≤ `max_line_bytes`) plus the lines of the chunks
//! pushed since the last drain.

use std::collections::VecDeque;

/// Default bound on one line: 64 KiB, as in the local runner's supervisor.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;

/// Configuration of a [`LineFramer`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FramerConfig {
    /// Longest line accepted, in bytes before the terminating `\n` (a `\r` before it
    /// counts). Default [`DEFAULT_MAX_LINE_BYTES`] (65,536). A longer line yields one
    /// [`FramingError::LineTooLong`]. Values below 1 are treated as 1.
    pub max_line_bytes: usize,
    /// Skip lines that are empty after removing the line terminator. Default `true`:
    /// blank lines carry nothing in JSONL.
    pub skip_empty_lines: bool,
}

impl Default for FramerConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            skip_empty_lines: true,
        }
    }
}

impl FramerConfig {
    /// A configuration with the given line bound and the other defaults.
    pub fn with_max_line_bytes(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes,
            ..Self::default()
        }
    }
}

/// What went wrong with one line, or with the use of the framer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// Remote violation: the line exceeded the bound. Reported once per line, as soon as
    /// the bound is crossed; the rest of the line is discarded.
    #[error("line {line_number} exceeded {max_line_bytes} bytes")]
    LineTooLong {
        /// The configured bound.
        max_line_bytes: usize,
        /// 1-based number of the offending line in the stream.
        line_number: u64,
    },
    /// Remote violation: the line is not valid UTF-8.
    #[error("line {line_number} is not valid UTF-8 (valid up to byte {valid_up_to})")]
    InvalidUtf8 {
        /// 1-based number of the offending line in the stream.
        line_number: u64,
        /// Length of the longest valid UTF-8 prefix of the line.
        valid_up_to: usize,
    },
    /// Local misuse: bytes were pushed after [`LineFramer::finish`].
    #[error("bytes pushed after end of input")]
    PushAfterFinish,
}

impl FramingError {
    /// Stable snake_case code of this error, asserted by conformance vectors.
    pub fn code(&self) -> &'static str {
        match self {
            FramingError::LineTooLong { .. } => "line_too_long",
            FramingError::InvalidUtf8 { .. } => "invalid_utf8",
            FramingError::PushAfterFinish => "push_after_finish",
        }
    }

    /// `true` when the caller broke a rule of the API (as opposed to the peer sending bad
    /// bytes).
    pub fn is_local(&self) -> bool {
        matches!(self, FramingError::PushAfterFinish)
    }
}

/// One item pulled from the framer: a complete line, or the error that replaced it.
pub type LineResult = Result<String, FramingError>;

/// A bounded, chunking-independent JSONL line framer. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct LineFramer {
    config: FramerConfig,
    /// Bytes of the current, not yet terminated line. Never longer than `max_line_bytes`.
    partial: Vec<u8>,
    /// The current line crossed the bound: its remaining bytes are dropped until `\n`.
    discarding: bool,
    /// Complete lines and errors waiting to be pulled, in stream order.
    ready: VecDeque<LineResult>,
    /// Number of lines started so far (1-based number of the current line).
    line_number: u64,
    finished: bool,
}

impl LineFramer {
    /// A new framer with the given configuration.
    pub fn new(config: FramerConfig) -> Self {
        let mut config = config;
        config.max_line_bytes = config.max_line_bytes.max(1);
        Self {
            config,
            partial: Vec::new(),
            discarding: false,
            ready: VecDeque::new(),
            line_number: 1,
            finished: false,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &FramerConfig {
        &self.config
    }

    /// Feed bytes, in any chunking. Complete lines become available from
    /// [`poll_line`](Self::poll_line).
    ///
    /// # Errors
    /// [`FramingError::PushAfterFinish`] if [`finish`](Self::finish) was called; the bytes are
    /// ignored.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), FramingError> {
        if self.finished {
            return Err(FramingError::PushAfterFinish);
        }
        while !data.is_empty() {
            match memchr::memchr(b'\n', data) {
                Some(pos) => {
                    let (head, rest) = (&data[..pos], &data[pos + 1..]);
                    self.absorb(head);
                    self.end_line();
                    data = rest;
                }
                None => {
                    self.absorb(data);
                    break;
                }
            }
        }
        Ok(())
    }

    /// Mark the end of input. An unterminated final line is queued as a line; a final line
    /// that was being discarded for its length produces nothing more. Idempotent.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.discarding || !self.partial.is_empty() {
            self.end_line();
        }
    }

    /// Pull the next complete line (without its terminator) or the error that replaced it,
    /// in stream order. `None` when nothing is ready.
    pub fn poll_line(&mut self) -> Option<LineResult> {
        self.ready.pop_front()
    }

    /// Bytes held for the current partial line; never more than `max_line_bytes`.
    pub fn buffered_bytes(&self) -> usize {
        self.partial.len()
    }

    /// Number of lines and errors waiting in [`poll_line`](Self::poll_line).
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// `true` once [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Append bytes of the current line, enforcing the bound.
    fn absorb(&mut self, bytes: &[u8]) {
        if self.discarding || bytes.is_empty() {
            return;
        }
        let max = self.config.max_line_bytes;
        if self.partial.len() + bytes.len() > max {
            self.partial.clear();
            self.partial.shrink_to(max.min(DEFAULT_MAX_LINE_BYTES));
            self.discarding = true;
            self.ready.push_back(Err(FramingError::LineTooLong {
                max_line_bytes: max,
                line_number: self.line_number,
            }));
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// The current line ended (`\n` seen, or end of input).
    fn end_line(&mut self) {
        let number = self.line_number;
        self.line_number += 1;
        if self.discarding {
            self.discarding = false;
            return;
        }
        let mut bytes = std::mem::take(&mut self.partial);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        if bytes.is_empty() && self.config.skip_empty_lines {
            // Keep the allocation for the next line.
            self.partial = bytes;
            return;
        }
        match String::from_utf8(bytes) {
            Ok(line) => self.ready.push_back(Ok(line)),
            Err(err) => self.ready.push_back(Err(FramingError::InvalidUtf8 {
                line_number: number,
                valid_up_to: err.utf8_error().valid_up_to(),
            })),
        }
    }
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new(FramerConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(f: &mut LineFramer) -> Vec<LineResult> {
        std::iter::from_fn(|| f.poll_line()).collect()
    }

    #[test]
    fn oversized_line_yields_one_error_then_recovers() {
        let mut f = LineFramer::new(FramerConfig::with_max_line_bytes(64));
        let mut input = vec![b'x'; 4096];
        input.extend_from_slice(b"\nnext\n");
        for chunk in input.chunks(7) {
            f.push(chunk).unwrap();
            assert!(f.buffered_bytes() <= 64);
        }
        let out = drain(&mut f);
        assert_eq!(
            out,
            vec![
                Err(FramingError::LineTooLong {
                    max_line_bytes: 64,
                    line_number: 1
                }),
                Ok("next".to_string())
            ]
        );
    }

    #[test]
    fn line_exactly_at_bound_is_accepted() {
        let mut f = LineFramer::new(FramerConfig::with_max_line_bytes(4));
        f.push(b"abcd\nabcde\n").unwrap();
        assert_eq!(drain(&mut f)[0], Ok("abcd".to_string()));
    }

    #[test]
    fn push_after_finish_is_local_misuse() {
        let mut f = LineFramer::default();
        f.finish();
        let err = f.push(b"x").unwrap_err();
        assert_eq!(err.code(), "push_after_finish");
        assert!(err.is_local());
    }
}
