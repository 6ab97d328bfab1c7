//! Canonical `paperclip.prp.event.v1` events and the runner stream's messages
//! (`paperclip.runner.stream.v1`) as records: the local-run machine's controller lines come
//! with them, the reducer takes them. Only the open `payload` and the unknown fields
//! (`extra`) are JSON object text.

use stapel_runner_protocol::local::{
    CanonicalEvent as CoreEvent, DiagnosticLevel as CoreLevel, ModelError,
    ReceiptStatus as CoreStatus, StreamMessage,
};

use crate::errors::{state, ProtocolError};
use crate::jsontext::{object_serde, parse_serde, serde_object_text};

/// `sourceKind` of a canonical event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum SourceKind {
    /// `runner`.
    Runner,
    /// `control_plane`.
    ControlPlane,
}

/// A canonical `paperclip.prp.event.v1` event, as the core reads it (schema id,
/// `schemaVersion`, closed `sourceKind`, `eventType` and `priority`, the terminal and
/// result payloads checked).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CanonicalEvent {
    /// `sourceEventId` (`event_<runId>_<seq>` for the runner's events).
    pub source_event_id: String,
    /// `sourceSeq` (≥ 1).
    pub source_seq: u64,
    /// `sourceInstanceId`.
    pub source_instance_id: String,
    /// `sourceKind`.
    pub source_kind: SourceKind,
    /// `runId`.
    pub run_id: String,
    /// `normalizedSessionId`.
    #[uniffi(default = None)]
    pub normalized_session_id: Option<String>,
    /// `eventType` (one of the seed's event types, e.g. `item.delta`).
    pub event_type: String,
    /// `priority` (0, 1 or 2).
    pub priority: u8,
    /// `emittedAt` (RFC 3339, UTC, milliseconds).
    pub emitted_at: String,
    /// `payload`: a JSON object text (open).
    pub payload: String,
    /// `turnId`.
    #[uniffi(default = None)]
    pub turn_id: Option<String>,
    /// `itemId`.
    #[uniffi(default = None)]
    pub item_id: Option<String>,
    /// Other fields (`observedAt`, `debug`, unknown ones): a JSON object text, in order.
    #[uniffi(default = "{}")]
    pub extra: String,
}

fn model_error(e: &ModelError) -> ProtocolError {
    state("local", e.code(), e)
}

impl From<&CoreEvent> for CanonicalEvent {
    fn from(e: &CoreEvent) -> Self {
        Self {
            source_event_id: e.source_event_id.clone(),
            source_seq: e.source_seq,
            source_instance_id: e.source_instance_id.clone(),
            source_kind: if e.source_kind == "control_plane" {
                SourceKind::ControlPlane
            } else {
                SourceKind::Runner
            },
            run_id: e.run_id.clone(),
            normalized_session_id: e.normalized_session_id.clone(),
            event_type: e.event_type.clone(),
            priority: e.priority,
            emitted_at: e.emitted_at.clone(),
            payload: serde_object_text(&e.payload),
            turn_id: e.turn_id.clone(),
            item_id: e.item_id.clone(),
            extra: serde_object_text(&e.extra),
        }
    }
}

impl CanonicalEvent {
    /// The event's JSON form (the core's `CanonicalEvent::to_value`).
    pub(crate) fn to_json(&self) -> Result<serde_json::Value, ProtocolError> {
        let e = CoreEvent {
            source_event_id: self.source_event_id.clone(),
            source_seq: self.source_seq,
            source_instance_id: self.source_instance_id.clone(),
            source_kind: match self.source_kind {
                SourceKind::Runner => "runner",
                SourceKind::ControlPlane => "control_plane",
            }
            .to_owned(),
            run_id: self.run_id.clone(),
            normalized_session_id: self.normalized_session_id.clone(),
            event_type: self.event_type.clone(),
            priority: self.priority,
            emitted_at: self.emitted_at.clone(),
            payload: object_serde(&self.payload)?,
            turn_id: self.turn_id.clone(),
            item_id: self.item_id.clone(),
            extra: object_serde(&self.extra)?,
        };
        Ok(e.to_value())
    }
}

/// Reads a canonical event from its JSON text with the core's rules.
///
/// # Errors
/// `ProtocolError::State` with the core's model error code (`missing_field`,
/// `unknown_value`, …); `Decode` for text that is not JSON.
#[uniffi::export]
pub fn canonical_event_from_json(json: String) -> Result<CanonicalEvent, ProtocolError> {
    let v = parse_serde(&json)?;
    CoreEvent::from_value(&v)
        .map(|e| CanonicalEvent::from(&e))
        .map_err(|e| model_error(&e))
}

/// The event's JSON text (the core's field order), checked by the core's reader.
///
/// # Errors
/// As [`canonical_event_from_json`].
#[uniffi::export]
pub fn canonical_event_to_json(event: CanonicalEvent) -> Result<String, ProtocolError> {
    let v = event.to_json()?;
    CoreEvent::from_value(&v).map_err(|e| model_error(&e))?;
    Ok(v.to_string())
}

/// `status` of a command receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ReceiptStatus {
    /// The command was recorded and applied.
    Accepted,
    /// The same command was applied before.
    Duplicate,
    /// The command was not applied.
    Rejected,
}

/// `level` of a runner diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum DiagnosticLevel {
    /// Informational.
    Info,
    /// Something unusual that did not change the run.
    Warning,
    /// Something failed.
    Error,
}

/// One message of the runner's stream to its controller.
// Records cross UniFFI by value (no boxing across the boundary).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum StreamItem {
    /// A canonical event.
    Event {
        /// The event.
        event: CanonicalEvent,
    },
    /// The answer to a controller command.
    CommandReceipt {
        /// `commandId` of the command answered.
        command_id: String,
        /// `controllerSeq` of the command answered.
        controller_seq: u64,
        /// The verdict.
        status: ReceiptStatus,
        /// The core's fixed explanation.
        detail: String,
    },
    /// A runner diagnostic (never a canonical event).
    Diagnostic {
        /// Severity.
        level: DiagnosticLevel,
        /// Text.
        message: String,
    },
}

fn stream_item(m: StreamMessage) -> Result<StreamItem, ProtocolError> {
    Ok(match m {
        StreamMessage::Event(v) => StreamItem::Event {
            event: CanonicalEvent::from(&CoreEvent::from_value(&v).map_err(|e| model_error(&e))?),
        },
        StreamMessage::CommandReceipt(r) => StreamItem::CommandReceipt {
            command_id: r.command_id,
            controller_seq: r.controller_seq,
            status: match r.status {
                CoreStatus::Accepted => ReceiptStatus::Accepted,
                CoreStatus::Duplicate => ReceiptStatus::Duplicate,
                CoreStatus::Rejected => ReceiptStatus::Rejected,
            },
            detail: r.detail,
        },
        StreamMessage::Diagnostic { level, message } => StreamItem::Diagnostic {
            level: match level {
                CoreLevel::Info => DiagnosticLevel::Info,
                CoreLevel::Warning => DiagnosticLevel::Warning,
                CoreLevel::Error => DiagnosticLevel::Error,
            },
            message,
        },
        #[allow(unreachable_patterns)]
        other => {
            return Err(state(
                "local",
                "unknown_value",
                format!("stream message {:?}", other.to_value()),
            ))
        }
    })
}

/// Reads one line of a runner's stream (controller side), failing closed like the core.
///
/// # Errors
/// `ProtocolError::State` with the core's model error code.
#[uniffi::export]
pub fn stream_item_from_line(line: String) -> Result<StreamItem, ProtocolError> {
    stream_item(StreamMessage::parse(&line).map_err(|e| model_error(&e))?)
}

/// The typed form of a controller line the local-run machine wrote (`None` only if the
/// core's own reader refused the core's own line, which its tests rule out).
pub(crate) fn controller_item(line: &str) -> Option<StreamItem> {
    StreamMessage::parse(line)
        .ok()
        .and_then(|m| stream_item(m).ok())
}
