//! The bounded JSONL line framer.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::framing::{self as core_framing, FramerConfig};

use crate::errors::{state, ProtocolError};

/// The framer's bounds; `None` fields take the core's defaults.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct LineFramerConfig {
    /// Longest line in bytes (before the `\n`).
    #[uniffi(default = None)]
    pub max_line_bytes: Option<u64>,
    /// Skip empty lines.
    #[uniffi(default = None)]
    pub skip_empty_lines: Option<bool>,
    /// Most lines and line errors waiting to be pulled.
    #[uniffi(default = None)]
    pub max_ready_lines: Option<u64>,
    /// Once the waiting lines hold this many bytes, no new line is started.
    #[uniffi(default = None)]
    pub max_ready_bytes: Option<u64>,
}

/// One pulled item: a complete line or a line error.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum FramedLine {
    /// A complete line (without `\n`, one trailing `\r` removed).
    Line {
        /// The line's text.
        text: String,
    },
    /// A line that could not be framed (`line_too_long`, `invalid_utf8`).
    Error {
        /// Stable code.
        code: String,
        /// 1-based line number of the line the error replaced (`None`: the core names
        /// no line).
        line_number: Option<u64>,
    },
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn item(r: core_framing::LineResult) -> FramedLine {
    match r {
        Ok(text) => FramedLine::Line { text },
        Err(e) => FramedLine::Error {
            code: e.code().to_owned(),
            line_number: e.line_number(),
        },
    }
}

/// Push bytes, pull complete lines. Bounded: an oversize line yields one
/// `line_too_long` and framing resumes after its newline; a full queue makes `push`
/// take fewer bytes than it was given (push the rest after pulling).
#[derive(uniffi::Object)]
pub struct LineFramer {
    inner: Mutex<core_framing::LineFramer>,
}

impl LineFramer {
    fn lock(&self) -> MutexGuard<'_, core_framing::LineFramer> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[uniffi::export]
impl LineFramer {
    /// A framer with these bounds.
    #[uniffi::constructor]
    pub fn new(config: LineFramerConfig) -> Self {
        let mut c = FramerConfig::default();
        if let Some(n) = config.max_line_bytes {
            c.max_line_bytes = size(n);
        }
        if let Some(b) = config.skip_empty_lines {
            c.skip_empty_lines = b;
        }
        if let Some(n) = config.max_ready_lines {
            c.max_ready_lines = size(n);
        }
        if let Some(n) = config.max_ready_bytes {
            c.max_ready_bytes = size(n);
        }
        Self {
            inner: Mutex::new(core_framing::LineFramer::new(c)),
        }
    }

    /// Pushes bytes; returns how many it took.
    ///
    /// # Errors
    /// `push_after_finish`.
    pub fn push(&self, data: Vec<u8>) -> Result<u64, ProtocolError> {
        self.lock()
            .push(&data)
            .map(|n| n as u64)
            .map_err(|e| state("framing", e.code(), &e))
    }

    /// Pushes everything, returning every item that became ready on the way.
    ///
    /// # Errors
    /// `push_after_finish`.
    pub fn push_all(&self, data: Vec<u8>) -> Result<Vec<FramedLine>, ProtocolError> {
        let mut out = Vec::new();
        self.lock()
            .push_all(&data, |r| out.push(item(r)))
            .map_err(|e| state("framing", e.code(), &e))?;
        Ok(out)
    }

    /// End of input: an unterminated final line becomes ready.
    pub fn finish(&self) {
        self.lock().finish();
    }

    /// The next ready item, or `None`.
    pub fn poll_line(&self) -> Option<FramedLine> {
        self.lock().poll_line().map(item)
    }

    /// Bytes of the partial line held.
    pub fn buffered_bytes(&self) -> u64 {
        self.lock().buffered_bytes() as u64
    }

    /// Items waiting to be pulled.
    pub fn ready_len(&self) -> u64 {
        self.lock().ready_len() as u64
    }
}

/// The framer's default longest line in bytes (65,536).
#[uniffi::export]
pub fn default_max_line_bytes() -> u64 {
    core_framing::DEFAULT_MAX_LINE_BYTES as u64
}
