//! Errors of the adapter seam.

use serde_json::{json, Map, Value};

/// What went wrong in the harness-adapter seam. Codes are stable and asserted by
/// conformance vectors. [`is_local`](Self::is_local) separates the caller's misuse from
/// faults of the harness (the child process) or of its data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// A harness stdout line is not JSON. Code `not_json`.
    #[error("harness line {line_number} is not JSON: {reason}")]
    NotJson {
        /// 1-based line number in the child's stdout stream.
        line_number: u64,
        /// The parser's explanation (not stable).
        reason: String,
    },
    /// A harness stdout line exceeded the bound; the rest of it was discarded unread.
    /// Code `line_too_long`.
    #[error("harness line {line_number} exceeded {max_line_bytes} bytes")]
    LineTooLong {
        /// 1-based line number.
        line_number: u64,
        /// The configured bound.
        max_line_bytes: usize,
    },
    /// A harness stdout line is not UTF-8. Code `invalid_utf8`.
    #[error("harness line {line_number} is not valid UTF-8")]
    InvalidUtf8 {
        /// 1-based line number.
        line_number: u64,
    },
    /// A harness line is JSON but not a message: not an object, `type` absent or not a
    /// string, a duplicate key, or an `error` message without a string `message`.
    /// Code `invalid_message`.
    #[error("harness line {line_number} is not a valid message: {reason}")]
    InvalidMessage {
        /// 1-based line number.
        line_number: u64,
        /// Why (not stable).
        reason: String,
    },
    /// A `result` message without a string `text` or without `usage`, or a TurnResult
    /// value that is not `{"text", "usage"}`. Code `invalid_result`.
    #[error("invalid turn result{}: {reason}", at(*line_number))]
    InvalidResult {
        /// 1-based line number, when the result came from a harness line.
        line_number: Option<u64>,
        /// Why (not stable).
        reason: String,
    },
    /// Usage that cannot be mapped onto the five-component split (a bad count, an inner
    /// count larger than its container, disagreeing spellings, or a split component
    /// above 2^53 − 1). Code `invalid_usage`.
    #[error("invalid usage{}: {reason}", at(*line_number))]
    InvalidUsage {
        /// 1-based line number, when the usage came from a harness line.
        line_number: Option<u64>,
        /// Why (not stable).
        reason: String,
    },
    /// The harness reported `{"type":"error","message":…}`. The turn is over; the session
    /// stays usable. Code `harness_error`.
    #[error("harness error at line {line_number}: {message}")]
    HarnessError {
        /// 1-based line number.
        line_number: u64,
        /// The harness's message (adapter output: for the direct caller, not evidence).
        message: String,
    },
    /// The child's stdout ended while a turn waited for its result. Code
    /// `unexpected_eof`.
    #[error("harness stdout ended before the turn's result")]
    UnexpectedEof,
    /// A `result` or `error` message arrived while no turn was in progress. Code
    /// `unexpected_message`.
    #[error("harness line {line_number}: {message_type:?} outside a turn")]
    UnexpectedMessage {
        /// 1-based line number.
        line_number: u64,
        /// `result` or `error`.
        message_type: String,
    },
    /// An invocation field has the wrong type. Code `invalid_invocation`.
    #[error("invocation field {field:?}: {reason}")]
    InvalidInvocation {
        /// The field.
        field: String,
        /// Why (not stable).
        reason: String,
    },
    /// The child could not be started: its command is empty. Code `no_command`.
    #[error("the subprocess adapter needs a non-empty command")]
    NoCommand,
    /// The host could not start the child. Code `spawn_failed`.
    #[error("cannot start the harness: {message}")]
    SpawnFailed {
        /// The host's error text (not stable).
        message: String,
    },
    /// Writing a turn to the child's stdin failed (the child closed it or exited). The
    /// session closes. Code `stdin_closed`.
    #[error("cannot write to the harness: {message}")]
    StdinClosed {
        /// The host's error text (not stable).
        message: String,
    },
    /// The adapter's backend is not available to the host: an optional dependency it
    /// needs (an agent SDK, a WebSocket library) is not installed. Nothing was started.
    /// Code `adapter_unavailable`.
    #[error("{message}")]
    AdapterUnavailable {
        /// The host's explanation, e.g. how to install the dependency (not stable).
        message: String,
    },
    /// The host could not open the harness session (an SDK client's connect failed).
    /// No session exists. Code `connect_failed`.
    #[error("cannot connect the harness session: {message}")]
    ConnectFailed {
        /// The host's error text (not stable).
        message: String,
    },
    /// A turn failed in the host's harness I/O (the SDK raised while sending the prompt
    /// or reading the response) — not a harness-reported `harness_error`. Code
    /// `turn_failed`.
    #[error("harness turn failed: {message}")]
    TurnFailed {
        /// The host's error text (not stable).
        message: String,
    },
    /// Local misuse: a turn was started before the child runs (no `Spawned` yet). Code
    /// `not_spawned`.
    #[error("the harness child is not running yet")]
    NotSpawned,
    /// Local misuse: a turn was started while another is in progress. Code
    /// `turn_in_progress`.
    #[error("a turn is already in progress")]
    TurnInProgress,
    /// Local misuse: a turn was started after the session closed (stdout ended, or a
    /// stream-level error). Code `session_closed`.
    #[error("the harness session is closed")]
    SessionClosed,
}

fn at(line: Option<u64>) -> String {
    line.map(|n| format!(" at line {n}")).unwrap_or_default()
}

impl AdapterError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            AdapterError::NotJson { .. } => "not_json",
            AdapterError::LineTooLong { .. } => "line_too_long",
            AdapterError::InvalidUtf8 { .. } => "invalid_utf8",
            AdapterError::InvalidMessage { .. } => "invalid_message",
            AdapterError::InvalidResult { .. } => "invalid_result",
            AdapterError::InvalidUsage { .. } => "invalid_usage",
            AdapterError::HarnessError { .. } => "harness_error",
            AdapterError::UnexpectedEof => "unexpected_eof",
            AdapterError::UnexpectedMessage { .. } => "unexpected_message",
            AdapterError::InvalidInvocation { .. } => "invalid_invocation",
            AdapterError::NoCommand => "no_command",
            AdapterError::SpawnFailed { .. } => "spawn_failed",
            AdapterError::StdinClosed { .. } => "stdin_closed",
            AdapterError::AdapterUnavailable { .. } => "adapter_unavailable",
            AdapterError::ConnectFailed { .. } => "connect_failed",
            AdapterError::TurnFailed { .. } => "turn_failed",
            AdapterError::NotSpawned => "not_spawned",
            AdapterError::TurnInProgress => "turn_in_progress",
            AdapterError::SessionClosed => "session_closed",
        }
    }

    /// `true` when the caller broke a rule of the API (as opposed to the harness sending
    /// bad data).
    pub fn is_local(&self) -> bool {
        matches!(
            self,
            AdapterError::TurnInProgress
                | AdapterError::SessionClosed
                | AdapterError::NotSpawned
                | AdapterError::NoCommand
        )
    }

    /// The harness stdout line the error is about, when there is one.
    pub fn line_number(&self) -> Option<u64> {
        match self {
            AdapterError::NotJson { line_number, .. }
            | AdapterError::LineTooLong { line_number, .. }
            | AdapterError::InvalidUtf8 { line_number }
            | AdapterError::InvalidMessage { line_number, .. }
            | AdapterError::HarnessError { line_number, .. }
            | AdapterError::UnexpectedMessage { line_number, .. } => Some(*line_number),
            AdapterError::InvalidResult { line_number, .. }
            | AdapterError::InvalidUsage { line_number, .. } => *line_number,
            _ => None,
        }
    }

    /// JSON form: `{"code", "line_number"}` (`line_number` is `null` when not about a
    /// line), plus `"message"` for `harness_error` and the [host faults](Self::HOST_CODES)
    /// (`spawn_failed`, `stdin_closed`, `adapter_unavailable`, `connect_failed`,
    /// `turn_failed`), and `"field"` for `invalid_invocation`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("code".into(), json!(self.code()));
        m.insert("line_number".into(), json!(self.line_number()));
        match self {
            AdapterError::HarnessError { message, .. }
            | AdapterError::SpawnFailed { message }
            | AdapterError::StdinClosed { message }
            | AdapterError::AdapterUnavailable { message }
            | AdapterError::ConnectFailed { message }
            | AdapterError::TurnFailed { message } => {
                m.insert("message".into(), json!(message));
            }
            AdapterError::InvalidInvocation { field, .. } => {
                m.insert("field".into(), json!(field));
            }
            _ => {}
        }
        Value::Object(m)
    }

    /// The codes of the faults a host reports from its own I/O, each carrying only the
    /// host's message (see [`host_fault`](Self::host_fault)).
    pub const HOST_CODES: [&'static str; 5] = [
        "spawn_failed",
        "stdin_closed",
        "adapter_unavailable",
        "connect_failed",
        "turn_failed",
    ];

    /// The error for a fault the host met in its own I/O, by code: `spawn_failed`,
    /// `stdin_closed`, `adapter_unavailable` (an optional backend dependency is
    /// missing), `connect_failed` (opening the harness session failed) or `turn_failed`
    /// (the harness I/O failed during a turn), with the host's `message`. A binding
    /// builds these errors here instead of spelling codes of its own; `None` for any
    /// other code (the core's own errors carry more than a message).
    pub fn host_fault(code: &str, message: impl Into<String>) -> Option<Self> {
        let message = message.into();
        Some(match code {
            "spawn_failed" => AdapterError::SpawnFailed { message },
            "stdin_closed" => AdapterError::StdinClosed { message },
            "adapter_unavailable" => AdapterError::AdapterUnavailable { message },
            "connect_failed" => AdapterError::ConnectFailed { message },
            "turn_failed" => AdapterError::TurnFailed { message },
            _ => return None,
        })
    }

    pub(crate) fn with_line(self, n: u64) -> Self {
        match self {
            AdapterError::InvalidUsage { reason, .. } => AdapterError::InvalidUsage {
                line_number: Some(n),
                reason,
            },
            AdapterError::InvalidResult { reason, .. } => AdapterError::InvalidResult {
                line_number: Some(n),
                reason,
            },
            other => other,
        }
    }
}
