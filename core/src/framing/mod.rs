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
//!   like any other line;
//! * complete lines wait in a bounded queue until they are pulled: at most
//!   [`FramerConfig::max_ready_lines`] items, and no new line is started once the queued
//!   lines hold [`FramerConfig::max_ready_bytes`] bytes. A full queue is backpressure, not
//!   an error: [`LineFramer::push`] accepts what fits and returns how many bytes it took,
//!   and the caller pushes the rest after pulling.
//!
//! # Call order
//!
//! ```
//! use stapel_runner_protocol::framing::{FramerConfig, LineFramer};
//!
//! let mut framer = LineFramer::new(FramerConfig::default());
//! let data = b"{\"type\":\"ping\"}\r\n{\"ty";
//! assert_eq!(framer.push(data).unwrap(), data.len()); // everything fit
//! assert_eq!(framer.poll_line().unwrap().unwrap(), "{\"type\":\"ping\"}");
//! assert!(framer.poll_line().is_none()); // the second line is not complete yet
//! framer.push(b"pe\":\"pong\"}").unwrap();
//! framer.finish();
//! assert_eq!(framer.poll_line().unwrap().unwrap(), "{\"type\":\"pong\"}");
//! assert!(framer.poll_line().is_none());
//! ```
//!
//! | call | when | effect |
//! |---|---|---|
//! | [`push`](LineFramer::push)`(data)` | before `finish` | frames `data` step by step (a step is everything up to and including the next `\n`, or the rest of `data` when it holds none); stops before a step when the queue [is full](LineFramer::is_full); returns the bytes taken. After `finish`: `Err(PushAfterFinish)` |
//! | [`poll_line`](LineFramer::poll_line)`()` | any time | the oldest queued line or line error; `None` when the queue is empty |
//! | [`finish`](LineFramer::finish)`()` | end of input | queues the unterminated final line; idempotent |
//! | [`push_all`](LineFramer::push_all)`(data, f)` | before `finish` | `push` and pull in turn until all of `data` is taken, handing every item to `f` |
//! | [`push_draining`]`(owner, framer, data, drain)` | before `finish` | the same for a state machine that owns its framer and handles lines with `&mut self` |
//!
//! Drain [`LineFramer::poll_line`] until it returns `None` after every push, and push the
//! bytes a push did not take again: the framer then holds at most the partial line
//! (≤ `max_line_bytes`) plus the bounded queue. A step adds at most one item, so the queue
//! never holds more than `max_ready_lines` items, nor more than
//! `max_ready_bytes + max_line_bytes` bytes; an empty queue always takes one step, so a
//! push after a full drain always makes progress.

use std::collections::VecDeque;

/// Default bound on one line: 64 KiB, as in the local runner's supervisor.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;

/// Default bound on the number of lines and line errors waiting to be pulled: 1024.
pub const DEFAULT_MAX_READY_LINES: usize = 1024;

/// Default bound on the bytes of the lines waiting to be pulled: 1 MiB.
pub const DEFAULT_MAX_READY_BYTES: usize = 1024 * 1024;

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
    /// Most lines and line errors waiting to be pulled. Default
    /// [`DEFAULT_MAX_READY_LINES`] (1024). Values below 1 are treated as 1.
    pub max_ready_lines: usize,
    /// Once the waiting lines hold this many bytes, [`LineFramer::push`] starts no new
    /// step until some are pulled. Default [`DEFAULT_MAX_READY_BYTES`] (1,048,576). An
    /// empty queue always takes one more line, so 0 means "one line at a time".
    pub max_ready_bytes: usize,
}

impl Default for FramerConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            skip_empty_lines: true,
            max_ready_lines: DEFAULT_MAX_READY_LINES,
            max_ready_bytes: DEFAULT_MAX_READY_BYTES,
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

    /// The keys of the JSON form: the field names.
    pub const KEYS: [&'static str; 4] = [
        "max_line_bytes",
        "skip_empty_lines",
        "max_ready_lines",
        "max_ready_bytes",
    ];

    /// Defaults overridden by the keys present in `value` (see [`KEYS`](Self::KEYS)),
    /// read by the crate's one config reader ([`crate::config`]).
    ///
    /// ```
    /// use stapel_runner_protocol::framing::FramerConfig;
    ///
    /// let c = FramerConfig::from_value(&serde_json::json!({"max_line_bytes": 8})).unwrap();
    /// assert_eq!((c.max_line_bytes, c.skip_empty_lines), (8, true));
    /// let e = FramerConfig::from_value(&serde_json::json!({"max_lines": 8})).unwrap_err();
    /// assert_eq!((e.code(), e.key()), ("unknown_key", "max_lines"));
    /// ```
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, crate::config::ConfigError> {
        let r = crate::config::ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        Ok(Self {
            max_line_bytes: r.usize("max_line_bytes")?.unwrap_or(d.max_line_bytes),
            skip_empty_lines: r.bool("skip_empty_lines")?.unwrap_or(d.skip_empty_lines),
            max_ready_lines: r.usize("max_ready_lines")?.unwrap_or(d.max_ready_lines),
            max_ready_bytes: r.usize("max_ready_bytes")?.unwrap_or(d.max_ready_bytes),
        })
    }

    /// The JSON form: every key of [`KEYS`](Self::KEYS) with its value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({
            "max_line_bytes": self.max_line_bytes,
            "skip_empty_lines": self.skip_empty_lines,
            "max_ready_lines": self.max_ready_lines,
            "max_ready_bytes": self.max_ready_bytes,
        })
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
    /// The codes of the two remote line errors ([`LineTooLong`](Self::LineTooLong),
    /// [`InvalidUtf8`](Self::InvalidUtf8)): the codes a line error a binding exposes can
    /// carry.
    pub const LINE_CODES: [&'static str; 2] = ["line_too_long", "invalid_utf8"];

    /// The line error code equal to `code`, as the `'static` string of
    /// [`LINE_CODES`](Self::LINE_CODES); `None` for any other string.
    pub fn line_code(code: &str) -> Option<&'static str> {
        Self::LINE_CODES.into_iter().find(|c| *c == code)
    }

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

    /// The 1-based line number a line error is about; `None` for local misuse.
    pub fn line_number(&self) -> Option<u64> {
        match self {
            FramingError::LineTooLong { line_number, .. }
            | FramingError::InvalidUtf8 { line_number, .. } => Some(*line_number),
            FramingError::PushAfterFinish => None,
        }
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
    /// Sum of the lengths of the lines in `ready`.
    ready_bytes: usize,
    /// Number of lines started so far (1-based number of the current line).
    line_number: u64,
    finished: bool,
}

impl LineFramer {
    /// A new framer with the given configuration.
    pub fn new(config: FramerConfig) -> Self {
        let mut config = config;
        config.max_line_bytes = config.max_line_bytes.max(1);
        config.max_ready_lines = config.max_ready_lines.max(1);
        Self {
            config,
            partial: Vec::new(),
            discarding: false,
            ready: VecDeque::new(),
            ready_bytes: 0,
            line_number: 1,
            finished: false,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &FramerConfig {
        &self.config
    }

    /// Feed bytes, in any chunking, and return how many were taken. Complete lines become
    /// available from [`poll_line`](Self::poll_line).
    ///
    /// Bytes are taken one step at a time (everything up to and including the next `\n`,
    /// or the rest of `data` when it holds none); before each step the push stops if the
    /// queue [is full](Self::is_full). A return value below `data.len()` is backpressure:
    /// pull the waiting lines, then push `&data[taken..]` again. A push into an empty
    /// queue takes at least one step.
    ///
    /// # Errors
    /// [`FramingError::PushAfterFinish`] if [`finish`](Self::finish) was called; nothing
    /// is taken.
    pub fn push(&mut self, data: &[u8]) -> Result<usize, FramingError> {
        if self.finished {
            return Err(FramingError::PushAfterFinish);
        }
        let mut rest = data;
        while !rest.is_empty() && !self.is_full() {
            match memchr::memchr(b'\n', rest) {
                Some(pos) => {
                    let (head, tail) = rest.split_at(pos);
                    self.absorb(head);
                    self.end_line();
                    rest = tail.get(1..).unwrap_or_default();
                }
                None => {
                    self.absorb(rest);
                    rest = &[];
                }
            }
        }
        Ok(data.len().saturating_sub(rest.len()))
    }

    /// Push all of `data`, pulling in between: every item that becomes ready (and every
    /// item already waiting) is handed to `on_item`, in stream order. For callers that
    /// handle lines synchronously; the queue is empty afterwards.
    ///
    /// ```
    /// use stapel_runner_protocol::framing::LineFramer;
    ///
    /// let mut lines = Vec::new();
    /// LineFramer::default().push_all(b"a\nb\n", |item| lines.extend(item.ok())).unwrap();
    /// assert_eq!(lines, ["a", "b"]);
    /// ```
    ///
    /// # Errors
    /// [`FramingError::PushAfterFinish`] if [`finish`](Self::finish) was called.
    pub fn push_all(
        &mut self,
        data: &[u8],
        mut on_item: impl FnMut(LineResult),
    ) -> Result<(), FramingError> {
        let mut rest = data;
        loop {
            let taken = self.push(rest)?;
            rest = rest.get(taken..).unwrap_or_default();
            while let Some(item) = self.poll_line() {
                on_item(item);
            }
            if rest.is_empty() {
                return Ok(());
            }
        }
    }

    /// Mark the end of input. An unterminated final line is queued as a line; a final line
    /// that was being discarded for its length produces nothing more. Idempotent. The
    /// final line is queued even when the queue is full (it is at most one item of at
    /// most `max_line_bytes`).
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
        let item = self.ready.pop_front()?;
        if let Ok(line) = &item {
            self.ready_bytes = self.ready_bytes.saturating_sub(line.len());
        }
        Some(item)
    }

    /// Bytes held for the current partial line; never more than `max_line_bytes`.
    pub fn buffered_bytes(&self) -> usize {
        self.partial.len()
    }

    /// Number of lines and errors waiting in [`poll_line`](Self::poll_line); never more
    /// than `max_ready_lines`.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Bytes of the lines waiting in [`poll_line`](Self::poll_line).
    pub fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    /// `true` when [`push`](Self::push) takes nothing more until lines are pulled: the
    /// queue is not empty and holds `max_ready_lines` items or `max_ready_bytes` bytes.
    pub fn is_full(&self) -> bool {
        !self.ready.is_empty()
            && (self.ready.len() >= self.config.max_ready_lines
                || self.ready_bytes >= self.config.max_ready_bytes)
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
        if self.partial.len().saturating_add(bytes.len()) > max {
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
        self.line_number = self.line_number.saturating_add(1);
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
            Ok(line) => {
                self.ready_bytes = self.ready_bytes.saturating_add(line.len());
                self.ready.push_back(Ok(line));
            }
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

/// Push all of `data` into a framer that `owner` holds, calling `drain(owner)` whenever
/// the framer's queue fills up: for state machines that handle each line with `&mut
/// self` (so [`LineFramer::push_all`]'s closure could not borrow them). Returns the bytes
/// taken: all of `data`, unless a `drain` left the queue full (the machine stopped
/// reading, e.g. it closed), in which case the rest is dropped. Lines of the last push
/// stay queued for the caller's own drain.
///
/// ```
/// use stapel_runner_protocol::framing::{push_draining, FramerConfig, LineFramer};
///
/// struct Machine { framer: LineFramer, seen: Vec<String> }
/// impl Machine {
///     fn drain(&mut self) {
///         while let Some(Ok(line)) = self.framer.poll_line() {
///             self.seen.push(line);
///         }
///     }
/// }
/// let mut config = FramerConfig::default();
/// config.max_ready_lines = 1;
/// let mut m = Machine { framer: LineFramer::new(config), seen: Vec::new() };
/// assert_eq!(push_draining(&mut m, |m| &mut m.framer, b"a\nb\nc\n", Machine::drain), Ok(6));
/// m.drain();
/// assert_eq!(m.seen, ["a", "b", "c"]);
/// ```
///
/// # Errors
/// [`FramingError::PushAfterFinish`] if the framer was finished.
pub fn push_draining<T: ?Sized>(
    owner: &mut T,
    framer: impl Fn(&mut T) -> &mut LineFramer,
    data: &[u8],
    mut drain: impl FnMut(&mut T),
) -> Result<usize, FramingError> {
    let mut rest = data;
    loop {
        let taken = framer(owner).push(rest)?;
        rest = rest.get(taken..).unwrap_or_default();
        if rest.is_empty() {
            break;
        }
        drain(owner);
        if framer(owner).is_full() {
            break;
        }
    }
    Ok(data.len().saturating_sub(rest.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(f: &mut LineFramer) -> Vec<LineResult> {
        std::iter::from_fn(|| f.poll_line()).collect()
    }

    #[test]
    fn line_codes_are_the_codes_of_the_line_errors() {
        let long = FramingError::LineTooLong {
            max_line_bytes: 1,
            line_number: 1,
        };
        let utf8 = FramingError::InvalidUtf8 {
            line_number: 1,
            valid_up_to: 0,
        };
        assert_eq!(FramingError::LINE_CODES, [long.code(), utf8.code()]);
        assert_eq!(
            FramingError::line_code("invalid_utf8"),
            Some("invalid_utf8")
        );
        assert_eq!(
            FramingError::line_code(FramingError::PushAfterFinish.code()),
            None
        );
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

    #[test]
    fn push_draining_stops_when_the_drain_makes_no_room() {
        let config = FramerConfig {
            max_ready_lines: 1,
            ..FramerConfig::default()
        };
        let mut f = LineFramer::new(config);
        // A drain that pulls nothing: the rest is dropped instead of looping forever.
        assert_eq!(push_draining(&mut f, |f| f, b"a\nb\nc\n", |_| {}), Ok(2));
        assert_eq!(f.ready_len(), 1);
        // A drain that pulls everything takes it all.
        let mut seen = Vec::new();
        let taken = push_draining(&mut f, |f| f, b"b\nc\n", |f| seen.extend(f.poll_line()));
        assert_eq!(taken, Ok(4));
        assert_eq!(seen.len(), 2);
        assert_eq!(f.poll_line(), Some(Ok("c".to_string())));
    }
}
