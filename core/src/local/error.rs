//! Errors of the local-runner area. Every enum is `#[non_exhaustive]` and every variant has
//! a stable snake_case `code()` asserted by conformance vectors. Local misuse (the host
//! broke a rule of the API: [`LocalError`]) is kept apart from remote violations (a peer
//! sent bad data: [`ModelError`], [`HarnessViolation`]).

/// A local-runner JSON message (command, harness message, script, event, result, request)
/// could not be read. Always a *remote* violation: the data came from a peer or a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The text is not one JSON document (or repeats a key). Code `not_json`.
    #[error("not JSON: {message}")]
    NotJson {
        /// The parser's explanation.
        message: String,
    },
    /// The JSON document is not an object. Code `not_object`.
    #[error("expected a JSON object")]
    NotObject,
    /// `schema` is absent or names another schema id (fail closed). Code
    /// `unsupported_schema`.
    #[error("unsupported schema {found:?}; expected {expected:?}")]
    UnsupportedSchema {
        /// The schema id this reader accepts.
        expected: &'static str,
        /// The value found, when it was a string.
        found: Option<String>,
    },
    /// A required field is absent. Code `missing_field`.
    #[error("missing required field {field:?}")]
    MissingField {
        /// Path of the field, `/`-separated.
        field: String,
    },
    /// A field has the wrong type, length or range. Code `invalid_field`.
    #[error("invalid field {field:?}: {message}")]
    InvalidField {
        /// Path of the field, `/`-separated.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A closed enumeration (command type, message type, event type, terminal state,
    /// required version …) holds a value this reader does not know (fail closed). Code
    /// `unknown_value`.
    #[error("unknown value {value:?} for {field:?}")]
    UnknownValue {
        /// Path of the field, `/`-separated.
        field: String,
        /// The value found, as compact JSON text when not a string.
        value: String,
    },
}

impl ModelError {
    /// Stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::NotJson { .. } => "not_json",
            ModelError::NotObject => "not_object",
            ModelError::UnsupportedSchema { .. } => "unsupported_schema",
            ModelError::MissingField { .. } => "missing_field",
            ModelError::InvalidField { .. } => "invalid_field",
            ModelError::UnknownValue { .. } => "unknown_value",
        }
    }

    pub(crate) fn missing(field: impl Into<String>) -> Self {
        ModelError::MissingField {
            field: field.into(),
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError::InvalidField {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn unknown(field: impl Into<String>, value: &serde_json::Value) -> Self {
        ModelError::UnknownValue {
            field: field.into(),
            value: match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        }
    }
}

/// The harness broke the `paperclip.fake_harness.message.v1` protocol on its stdout. Each
/// one fails the run (`reason: "harness_protocol_violation"`): the runner records a
/// `runner.diagnostic` event with this code and terminates the harness process group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum HarnessViolation {
    /// A stdout frame exceeded the line bound. Code `stdout_frame_too_long`.
    #[error("harness stdout frame exceeded {max_line_bytes} bytes")]
    StdoutFrameTooLong {
        /// The configured bound.
        max_line_bytes: usize,
    },
    /// A stdout frame is not UTF-8. Code `stdout_invalid_utf8`.
    #[error("harness stdout frame is not valid UTF-8")]
    StdoutInvalidUtf8,
    /// A stdout frame is not a valid harness message. Code `invalid_harness_message`.
    #[error("invalid harness message: {0}")]
    InvalidMessage(ModelError),
    /// A message other than `ready` arrived before `ready`. Code `message_before_ready`.
    #[error("harness sent {message_type} before ready")]
    MessageBeforeReady {
        /// The message type received.
        message_type: String,
    },
    /// An `event` message used an event type only the runner may emit
    /// (`run.terminal`, `run.result.proposed`, `harness.*`, `runner.*`). Code
    /// `reserved_event_type`.
    #[error("harness may not emit the runner-owned event type {event_type}")]
    ReservedEventType {
        /// The event type received.
        event_type: String,
    },
    /// A `request` message does not carry a valid `paperclip.runtime_request.v1`. Code
    /// `invalid_runtime_request`.
    #[error("invalid runtime request: {0}")]
    InvalidRequest(ModelError),
    /// A `result` message does not carry a valid `paperclip.run_result.v1`. Code
    /// `invalid_run_result`.
    #[error("invalid run result: {0}")]
    InvalidResult(ModelError),
    /// More pending runtime requests than `max_pending_requests`. Code
    /// `too_many_pending_requests`.
    #[error("harness opened more than {max_pending_requests} pending runtime requests")]
    TooManyPendingRequests {
        /// The configured bound.
        max_pending_requests: usize,
    },
    /// No `ready` within the ready deadline. Code `harness_ready_timeout`.
    #[error("harness did not send ready within {ready_timeout_ms} ms")]
    ReadyTimeout {
        /// The configured deadline.
        ready_timeout_ms: u64,
    },
    /// The harness process exited (with any code or signal) before it sent `ready` (the
    /// original: "exited before ready"). Code `harness_exited_before_ready`.
    #[error("harness exited before it was ready")]
    ExitedBeforeReady,
}

/// The stable codes of the harness protocol violations a local run reports (each in a
/// `runner.diagnostic{level: "error", code}` event before the run ends as a protocol
/// violation).
pub const HARNESS_VIOLATION_CODES: [&str; 10] = [
    "stdout_frame_too_long",
    "stdout_invalid_utf8",
    "invalid_harness_message",
    "message_before_ready",
    "reserved_event_type",
    "invalid_runtime_request",
    "invalid_run_result",
    "too_many_pending_requests",
    "harness_ready_timeout",
    "harness_exited_before_ready",
];

impl HarnessViolation {
    /// Stable snake_case code of this violation (one of [`HARNESS_VIOLATION_CODES`]).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            HarnessViolation::StdoutFrameTooLong { .. } => "stdout_frame_too_long",
            HarnessViolation::StdoutInvalidUtf8 => "stdout_invalid_utf8",
            HarnessViolation::InvalidMessage(_) => "invalid_harness_message",
            HarnessViolation::MessageBeforeReady { .. } => "message_before_ready",
            HarnessViolation::ReservedEventType { .. } => "reserved_event_type",
            HarnessViolation::InvalidRequest(_) => "invalid_runtime_request",
            HarnessViolation::InvalidResult(_) => "invalid_run_result",
            HarnessViolation::TooManyPendingRequests { .. } => "too_many_pending_requests",
            HarnessViolation::ReadyTimeout { .. } => "harness_ready_timeout",
            HarnessViolation::ExitedBeforeReady => "harness_exited_before_ready",
        }
    }
}

/// Local misuse of [`LocalRun`](super::LocalRun) or [`ScriptPlayer`](super::ScriptPlayer):
/// the host reported something that cannot have happened. The input is ignored and the
/// machine's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// `HarnessSpawned`/`HarnessSpawnFailed` without a pending `Spawn` output. Code
    /// `no_spawn_pending`.
    #[error("no harness spawn is pending")]
    NoSpawnPending,
    /// Harness output or exit reported when no harness was started, or after it exited.
    /// Code `no_harness_running`.
    #[error("no harness process is running")]
    NoHarnessRunning,
    /// Controller bytes after the controller EOF. Code `controller_input_after_eof`.
    #[error("controller bytes after controller EOF")]
    ControllerInputAfterEof,
    /// A player input that does not fit its state (e.g. `DelayElapsed` with no delay
    /// pending). Code `unexpected_input`.
    #[error("unexpected input: {0}")]
    UnexpectedInput(String),
    /// A configuration value is out of range. Code `invalid_config`.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
}

impl LocalError {
    /// Stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            LocalError::NoSpawnPending => "no_spawn_pending",
            LocalError::NoHarnessRunning => "no_harness_running",
            LocalError::ControllerInputAfterEof => "controller_input_after_eof",
            LocalError::UnexpectedInput(_) => "unexpected_input",
            LocalError::InvalidConfig(_) => "invalid_config",
        }
    }

    /// Always `true`: every variant is local misuse.
    pub fn is_local(&self) -> bool {
        true
    }
}

/// A local-runner field error: a wrong integer names the value found, any other wrong
/// type the JSON type found.
impl From<crate::fields::FieldError<'_>> for ModelError {
    fn from(e: crate::fields::FieldError<'_>) -> Self {
        use crate::fields::{Expected, Problem};
        let message = match e.problem {
            Problem::Missing => return ModelError::MissingField { field: e.path },
            Problem::WrongType(Expected::Object) if e.path.is_empty() => {
                return ModelError::NotObject
            }
            Problem::WrongType(Expected::Integer) | Problem::OutOfRange => format!(
                "expected a non-negative integer, found {}",
                e.found.unwrap_or(&serde_json::Value::Null)
            ),
            Problem::WrongType(expected) => e.expected_found(expected),
            Problem::Empty => "must not be empty".to_owned(),
            Problem::UnknownField => "not a declared field".to_owned(),
        };
        ModelError::InvalidField {
            field: e.path,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_violation_code_is_listed_once() {
        let all = [
            HarnessViolation::StdoutFrameTooLong { max_line_bytes: 1 },
            HarnessViolation::StdoutInvalidUtf8,
            HarnessViolation::InvalidMessage(ModelError::NotObject),
            HarnessViolation::MessageBeforeReady {
                message_type: "event".into(),
            },
            HarnessViolation::ReservedEventType {
                event_type: "run.terminal".into(),
            },
            HarnessViolation::InvalidRequest(ModelError::NotObject),
            HarnessViolation::InvalidResult(ModelError::NotObject),
            HarnessViolation::TooManyPendingRequests {
                max_pending_requests: 1,
            },
            HarnessViolation::ReadyTimeout {
                ready_timeout_ms: 1,
            },
            HarnessViolation::ExitedBeforeReady,
        ];
        let codes: Vec<&str> = all.iter().map(HarnessViolation::code).collect();
        assert_eq!(codes, HARNESS_VIOLATION_CODES);
    }
}
