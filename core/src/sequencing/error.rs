//! Errors of the sequencing layer.

use crate::wire::{Message, MessageType};

use super::Role;

/// Why a message could not be emitted or received. Every variant has a stable snake_case
/// [`code`](Self::code); [`is_local`](Self::is_local) splits misuse by the caller (a
/// *local* protocol-state error) from a rule the peer broke (a *remote* violation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SequencingError {
    /// Local: only `task.assign`, `task.cancel`, `task.progress` and `task.report` are
    /// sequenced; `hello`, `ping` and `pong` cannot be emitted or received through a
    /// [`ConnectionState`](super::ConnectionState). Code `not_sequenced`.
    #[error("{message_type} is not a sequenced message")]
    NotSequenced {
        /// The type passed in.
        message_type: MessageType,
    },
    /// Local: the message has an empty `task_id`, or an empty task id was passed on its
    /// own (e.g. to [`ConnectionState::channel`](super::ConnectionState::channel)). Code
    /// `missing_task_id`.
    #[error("{}", missing_task_id_text(message_type.as_ref()))]
    MissingTaskId {
        /// The type passed in (`None` when a task id was passed without a message).
        message_type: Option<MessageType>,
    },
    /// Local: this role does not send this type (the hub sends `task.assign` and
    /// `task.cancel`, the runner `task.progress` and `task.report`). Code
    /// `role_cannot_emit`.
    #[error("the {role} does not send {message_type}")]
    RoleCannotEmit {
        /// The emitting role.
        role: Role,
        /// The type passed in.
        message_type: MessageType,
    },
    /// Remote: the peer sent a type that travels the other way. Code `wrong_direction`.
    #[error("the {role} does not receive {message_type}")]
    WrongDirection {
        /// The receiving role.
        role: Role,
        /// The type received.
        message_type: MessageType,
    },
    /// Remote: a received sequenced frame has `seq` 0 (streams start at 1) or a seq
    /// above 2^53 − 1. Code `invalid_seq`.
    #[error("received {message_type} with an invalid seq (0, or above 2^53 - 1)")]
    InvalidSeq {
        /// The type received.
        message_type: MessageType,
    },
    /// Remote: a received seq lies beyond the stream's out-of-order window
    /// (`seq > watermark + inbound_window`). Nothing is recorded. Code `beyond_window`.
    #[error("seq {seq} of task {task_id:?} (attempt {attempt:?}) is beyond the window: watermark {watermark}, window {window}")]
    BeyondWindow {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for hub→runner command streams).
        attempt: Option<u64>,
        /// The offending seq.
        seq: u64,
        /// Last seq received contiguously.
        watermark: u64,
        /// The configured window.
        window: u64,
    },
    /// Local (flow control): the kept outbound log is full (`max_outbox_frames` or
    /// `max_outbox_bytes`); wait for the peer's acknowledgement and retry. The message is
    /// handed back unchanged. Code `backpressure`.
    #[error("outbound log full: {frames} frames, {bytes} bytes kept")]
    Backpressure {
        /// Frames kept now.
        frames: usize,
        /// Bytes kept now.
        bytes: usize,
    },
    /// Local: one encoded frame is larger than `max_outbox_bytes` and could never be
    /// kept. Code `frame_too_large`.
    #[error("encoded frame of {bytes} bytes exceeds max_outbox_bytes {max}")]
    FrameTooLarge {
        /// Encoded size.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// Local: the message nests its open objects deeper than the wire allows
    /// ([`json::MAX_DEPTH`](crate::json::MAX_DEPTH) for the whole frame), so a peer could
    /// never decode its frame. Code `nested_too_deep`.
    #[error("the message nests deeper than the {max} levels a frame may have")]
    NestedTooDeep {
        /// The frame's depth limit.
        max: usize,
    },
    /// The stream table is full (`max_streams` in that direction). Local when emitting
    /// (forget finished tasks), remote when receiving (the peer opened too many streams).
    /// Code `too_many_streams`.
    #[error("too many {} streams (max {max})", if *inbound { "inbound" } else { "outbound" })]
    TooManyStreams {
        /// The bound.
        max: usize,
        /// `true` for the inbound table.
        inbound: bool,
    },
    /// Local: the stream's next seq would exceed 2^53 − 1. Code `seq_exhausted`.
    #[error("seq space of task {task_id:?} exhausted")]
    SeqExhausted {
        /// The stream's task.
        task_id: String,
    },
    /// Local (an internal invariant broke): a kept frame had to get a new seq (the peer
    /// declared a position colliding with it) but its bytes no longer decode, so no
    /// correct frame can be made from them. The frame was dropped rather than sent under
    /// a seq it does not carry; the stream's other frames were re-stamped contiguously
    /// after the peer's position. Code `restamp_failed`.
    #[error("kept frame {seq} of task {task_id:?} (attempt {attempt:?}) does not decode and could not be re-stamped; it was dropped")]
    RestampFailed {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for hub→runner command streams).
        attempt: Option<u64>,
        /// The seq the dropped frame was kept under.
        seq: u64,
    },
    /// Local (an internal invariant broke; never happens through the public API): a kept
    /// frame asked for by [`OutboxLog::since`](super::OutboxLog::since) no longer decodes.
    /// Nothing is skipped silently: the whole call fails. Code `undecodable_frame`.
    #[error("kept frame {seq} does not decode")]
    UndecodableFrame {
        /// The seq the frame is kept under.
        seq: u64,
    },
}

/// The text of [`SequencingError::MissingTaskId`].
fn missing_task_id_text(message_type: Option<&MessageType>) -> String {
    match message_type {
        Some(t) => format!("{t} has no task_id"),
        None => "a sequenced message must carry a task_id; the task id is empty".to_owned(),
    }
}

impl SequencingError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SequencingError::NotSequenced { .. } => "not_sequenced",
            SequencingError::MissingTaskId { .. } => "missing_task_id",
            SequencingError::RoleCannotEmit { .. } => "role_cannot_emit",
            SequencingError::WrongDirection { .. } => "wrong_direction",
            SequencingError::InvalidSeq { .. } => "invalid_seq",
            SequencingError::BeyondWindow { .. } => "beyond_window",
            SequencingError::Backpressure { .. } => "backpressure",
            SequencingError::FrameTooLarge { .. } => "frame_too_large",
            SequencingError::NestedTooDeep { .. } => "nested_too_deep",
            SequencingError::TooManyStreams { .. } => "too_many_streams",
            SequencingError::SeqExhausted { .. } => "seq_exhausted",
            SequencingError::RestampFailed { .. } => "restamp_failed",
            SequencingError::UndecodableFrame { .. } => "undecodable_frame",
        }
    }

    /// `true` when the caller broke a rule of the API (or must wait), `false` when the
    /// peer broke a rule of the protocol.
    pub fn is_local(&self) -> bool {
        match self {
            SequencingError::WrongDirection { .. }
            | SequencingError::InvalidSeq { .. }
            | SequencingError::BeyondWindow { .. } => false,
            SequencingError::TooManyStreams { inbound, .. } => !inbound,
            _ => true,
        }
    }
}

/// [`ConnectionState::emit`](super::ConnectionState::emit) refused a message. The message
/// is handed back exactly as it was passed in (its `seq` untouched), so nothing is lost:
/// retry it after the cause is gone (e.g. after an acknowledgement trims the log).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct EmitError {
    /// Why.
    pub error: SequencingError,
    /// The caller's message, unchanged.
    pub message: Box<Message>,
}

impl EmitError {
    /// Stable code of the cause (see [`SequencingError::code`]).
    pub fn code(&self) -> &'static str {
        self.error.code()
    }

    /// The caller's message, unchanged.
    pub fn into_message(self) -> Message {
        *self.message
    }
}

/// Why snapshot bytes could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes do not start with the snapshot magic. Code `not_a_snapshot`.
    #[error("not a sequencing snapshot (bad magic)")]
    NotASnapshot,
    /// The header names a format version this build does not read. Code
    /// `unsupported_snapshot_version`.
    #[error("unsupported snapshot version {found}")]
    UnsupportedVersion {
        /// The version in the header.
        found: String,
    },
    /// The body is malformed or inconsistent. Code `corrupt_snapshot`.
    #[error("corrupt snapshot: {message}")]
    Corrupt {
        /// What is wrong.
        message: String,
    },
}

impl SnapshotError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::NotASnapshot => "not_a_snapshot",
            SnapshotError::UnsupportedVersion { .. } => "unsupported_snapshot_version",
            SnapshotError::Corrupt { .. } => "corrupt_snapshot",
        }
    }
}
