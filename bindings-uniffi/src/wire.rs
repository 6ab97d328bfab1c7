//! The seven hub-protocol messages as records, and the codec.
//!
//! Declared fields are typed; open objects (`task`, `invocation`, `payload`, `report`)
//! and the unknown fields (`extra`, in arrival order) are JSON object text. A record
//! handed to Rust is rebuilt through the core's tolerant reader (`wire::from_value`) with
//! its declared fields, then its `extra` members are appended, as the core's `build` does.

use stapel_runner_protocol::json::{Object, Value};
use stapel_runner_protocol::wire::{self as core_wire, DecodeError, MessageType};

use crate::errors::ProtocolError;
use crate::jsontext::{object_text, parse};

/// A `ping`/`pong` nonce: a string or an integer.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum Nonce {
    /// A string nonce.
    Text {
        /// The nonce.
        value: String,
    },
    /// An integer nonce (within ±(2^53 − 1)).
    Integer {
        /// The nonce.
        value: i64,
    },
}

/// A `ping.sent_at`: a string timestamp or a JSON number (as its JSON text, so no
/// precision is lost).
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SentAt {
    /// A textual timestamp.
    Text {
        /// The timestamp.
        value: String,
    },
    /// A number, as JSON number text (`1733011200.5`).
    Number {
        /// The number's JSON text.
        json: String,
    },
}

/// One `hello.resume` entry: task id → last seq received contiguously from the hub.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ResumeEntry {
    /// The task id.
    pub task_id: String,
    /// The last seq received in order.
    pub seq: u64,
}

/// `hello`, runner → hub.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Hello {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Wire protocol major version.
    #[uniffi(default = 1)]
    pub protocol_version: u64,
    /// Project slug.
    pub project_id: String,
    /// Runner build string.
    pub runner_version: String,
    /// Backends the runner drives (open strings).
    #[uniffi(default = [])]
    pub capabilities: Vec<String>,
    /// Resume declaration, in order.
    #[uniffi(default = [])]
    pub resume: Vec<ResumeEntry>,
    /// Unknown fields: a JSON object text, members in arrival order.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `task.assign`, hub → runner.
#[derive(Debug, Clone, uniffi::Record)]
pub struct TaskAssign {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Mirror of `task.id`.
    pub task_id: String,
    /// The TaskSpec: JSON object text.
    pub task: String,
    /// Role to execute (open string).
    pub role: String,
    /// Invocation: JSON object text.
    #[uniffi(default = "{}")]
    pub invocation: String,
    /// Sequence number (0: not yet stamped).
    #[uniffi(default = 0)]
    pub seq: u64,
    /// Attempt number.
    #[uniffi(default = 0)]
    pub attempt: u64,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `task.progress`, runner → hub.
#[derive(Debug, Clone, uniffi::Record)]
pub struct TaskProgress {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Task id.
    pub task_id: String,
    /// Sequence number (0: not yet stamped).
    #[uniffi(default = 0)]
    pub seq: u64,
    /// Progress kind (open string: `state`, `usage`, `log`, …).
    pub kind: String,
    /// Attempt number.
    #[uniffi(default = 0)]
    pub attempt: u64,
    /// Payload: JSON object text.
    #[uniffi(default = "{}")]
    pub payload: String,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `task.report`, runner → hub.
#[derive(Debug, Clone, uniffi::Record)]
pub struct TaskReportMessage {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Mirror of `report.task_id`.
    pub task_id: String,
    /// The TaskReport: JSON object text.
    pub report: String,
    /// Sequence number (0: not yet stamped).
    #[uniffi(default = 0)]
    pub seq: u64,
    /// Attempt number.
    #[uniffi(default = 0)]
    pub attempt: u64,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `task.cancel`, hub → runner.
#[derive(Debug, Clone, uniffi::Record)]
pub struct TaskCancel {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Task id.
    pub task_id: String,
    /// Why.
    #[uniffi(default = "")]
    pub reason: String,
    /// Sequence number (0: not yet stamped).
    #[uniffi(default = 0)]
    pub seq: u64,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `ping`, either direction.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Ping {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// Optional nonce.
    #[uniffi(default = None)]
    pub nonce: Option<Nonce>,
    /// Optional send time.
    #[uniffi(default = None)]
    pub sent_at: Option<SentAt>,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// `pong`, the answer to a `ping`.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Pong {
    /// Frame schema version (1).
    #[uniffi(default = 1)]
    pub schema_version: u64,
    /// The ping's nonce.
    #[uniffi(default = None)]
    pub nonce: Option<Nonce>,
    /// Unknown fields: JSON object text.
    #[uniffi(default = "{}")]
    pub extra: String,
}

/// Any hub-protocol frame.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum Message {
    /// `hello`
    Hello {
        /// The message.
        v: Hello,
    },
    /// `task.assign`
    TaskAssign {
        /// The message.
        v: TaskAssign,
    },
    /// `task.progress`
    TaskProgress {
        /// The message.
        v: TaskProgress,
    },
    /// `task.report`
    TaskReport {
        /// The message.
        v: TaskReportMessage,
    },
    /// `task.cancel`
    TaskCancel {
        /// The message.
        v: TaskCancel,
    },
    /// `ping`
    Ping {
        /// The message.
        v: Ping,
    },
    /// `pong`
    Pong {
        /// The message.
        v: Pong,
    },
}

fn nonce_out(n: &Option<core_wire::Nonce>) -> Option<Nonce> {
    n.as_ref().map(|n| match n {
        core_wire::Nonce::Text(s) => Nonce::Text { value: s.clone() },
        core_wire::Nonce::Integer(i) => Nonce::Integer { value: *i },
    })
}

fn nonce_in(n: &Option<Nonce>) -> Value {
    match n {
        None => Value::Null,
        Some(Nonce::Text { value }) => Value::from(value.as_str()),
        Some(Nonce::Integer { value }) => Value::from(*value),
    }
}

impl From<&core_wire::Message> for Message {
    fn from(m: &core_wire::Message) -> Self {
        use core_wire::Message as M;
        match m {
            M::Hello(h) => Message::Hello { v: hello_out(h) },
            M::TaskAssign(a) => Message::TaskAssign {
                v: TaskAssign {
                    schema_version: a.schema_version,
                    task_id: a.task_id.clone(),
                    task: object_text(&a.task),
                    role: a.role.clone(),
                    invocation: object_text(&a.invocation),
                    seq: a.seq,
                    attempt: a.attempt,
                    extra: object_text(&a.extra),
                },
            },
            M::TaskProgress(p) => Message::TaskProgress {
                v: TaskProgress {
                    schema_version: p.schema_version,
                    task_id: p.task_id.to_string(),
                    seq: p.seq,
                    kind: p.kind.to_string(),
                    attempt: p.attempt,
                    payload: object_text(&p.payload),
                    extra: object_text(&p.extra),
                },
            },
            M::TaskReport(r) => Message::TaskReport {
                v: TaskReportMessage {
                    schema_version: r.schema_version,
                    task_id: r.task_id.clone(),
                    report: object_text(&r.report),
                    seq: r.seq,
                    attempt: r.attempt,
                    extra: object_text(&r.extra),
                },
            },
            M::TaskCancel(c) => Message::TaskCancel {
                v: TaskCancel {
                    schema_version: c.schema_version,
                    task_id: c.task_id.clone(),
                    reason: c.reason.clone(),
                    seq: c.seq,
                    extra: object_text(&c.extra),
                },
            },
            M::Ping(p) => Message::Ping {
                v: Ping {
                    schema_version: p.schema_version,
                    nonce: nonce_out(&p.nonce),
                    sent_at: p.sent_at.as_ref().map(|s| match s {
                        core_wire::SentAt::Text(t) => SentAt::Text { value: t.clone() },
                        core_wire::SentAt::Number(n) => SentAt::Number {
                            json: n.to_string(),
                        },
                    }),
                    extra: object_text(&p.extra),
                },
            },
            M::Pong(p) => Message::Pong {
                v: Pong {
                    schema_version: p.schema_version,
                    nonce: nonce_out(&p.nonce),
                    extra: object_text(&p.extra),
                },
            },
        }
    }
}

/// A core `hello` as a record.
pub(crate) fn hello_out(h: &core_wire::Hello) -> Hello {
    Hello {
        schema_version: h.schema_version,
        protocol_version: h.protocol_version,
        project_id: h.project_id.clone(),
        runner_version: h.runner_version.clone(),
        capabilities: h.capabilities.clone(),
        resume: h
            .resume
            .iter()
            .map(|(t, s)| ResumeEntry {
                task_id: t.clone(),
                seq: *s,
            })
            .collect(),
        extra: object_text(&h.extra),
    }
}

/// A resume declaration as the core's ordered map; a task named twice is refused with
/// the decoder's `duplicate_key` (the wire form is a JSON object).
pub(crate) fn resume_in(
    entries: Vec<ResumeEntry>,
) -> Result<indexmap::IndexMap<String, u64>, ProtocolError> {
    let mut map = indexmap::IndexMap::with_capacity(entries.len());
    for e in entries {
        if map.contains_key(&e.task_id) {
            return Err(DecodeError::DuplicateKey {
                message: format!("duplicate key {:?} in a resume declaration", e.task_id),
            }
            .into());
        }
        map.insert(e.task_id, e.seq);
    }
    Ok(map)
}

/// A `hello` record as the core's (through the same reader as every message).
pub(crate) fn hello_in(h: Hello) -> Result<core_wire::Hello, ProtocolError> {
    match (Message::Hello { v: h }).to_core()? {
        core_wire::Message::Hello(h) => Ok(h),
        other => Err(DecodeError::UnknownType {
            type_name: Some(other.message_type().as_str().to_owned()),
        }
        .into()),
    }
}

/// An open-object field's JSON text as a value (the core's reader checks its type).
fn open(text: &str) -> Result<Value, ProtocolError> {
    parse(text)
}

/// The `extra` text as an object.
fn extra_object(text: &str) -> Result<Object, ProtocolError> {
    match parse(text)? {
        Value::Object(o) => Ok(o),
        other => Err(DecodeError::NotObject {
            found: other.type_name(),
        }
        .into()),
    }
}

impl Message {
    /// The core message: declared fields through the core's tolerant reader, then the
    /// unknown fields appended.
    pub(crate) fn to_core(&self) -> Result<core_wire::Message, ProtocolError> {
        let mut o = Object::new();
        let (mt, extra) = match self {
            Message::Hello { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("protocol_version", v.protocol_version);
                o.insert("project_id", v.project_id.as_str());
                o.insert("runner_version", v.runner_version.as_str());
                o.insert(
                    "capabilities",
                    Value::Array(
                        v.capabilities
                            .iter()
                            .map(|c| Value::from(c.as_str()))
                            .collect(),
                    ),
                );
                // `resume` is a JSON object on the wire: a task named twice is the
                // decoder's `duplicate_key`, never a silent last-wins.
                let mut resume = Object::new();
                for e in &v.resume {
                    if resume.get(e.task_id.as_str()).is_some() {
                        return Err(DecodeError::DuplicateKey {
                            message: format!("duplicate key {:?} in hello.resume", e.task_id),
                        }
                        .into());
                    }
                    resume.insert(e.task_id.as_str(), e.seq);
                }
                o.insert("resume", resume);
                (MessageType::Hello, &v.extra)
            }
            Message::TaskAssign { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("task_id", v.task_id.as_str());
                o.insert("task", open(&v.task)?);
                o.insert("role", v.role.as_str());
                o.insert("invocation", open(&v.invocation)?);
                o.insert("seq", v.seq);
                o.insert("attempt", v.attempt);
                (MessageType::TaskAssign, &v.extra)
            }
            Message::TaskProgress { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("task_id", v.task_id.as_str());
                o.insert("seq", v.seq);
                o.insert("kind", v.kind.as_str());
                o.insert("attempt", v.attempt);
                o.insert("payload", open(&v.payload)?);
                (MessageType::TaskProgress, &v.extra)
            }
            Message::TaskReport { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("task_id", v.task_id.as_str());
                o.insert("report", open(&v.report)?);
                o.insert("seq", v.seq);
                o.insert("attempt", v.attempt);
                (MessageType::TaskReport, &v.extra)
            }
            Message::TaskCancel { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("task_id", v.task_id.as_str());
                o.insert("reason", v.reason.as_str());
                o.insert("seq", v.seq);
                (MessageType::TaskCancel, &v.extra)
            }
            Message::Ping { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("nonce", nonce_in(&v.nonce));
                let sent_at = match &v.sent_at {
                    None => Value::Null,
                    Some(SentAt::Text { value }) => Value::from(value.as_str()),
                    Some(SentAt::Number { json }) => parse(json)?,
                };
                o.insert("sent_at", sent_at);
                (MessageType::Ping, &v.extra)
            }
            Message::Pong { v } => {
                o.insert("schema_version", v.schema_version);
                o.insert("nonce", nonce_in(&v.nonce));
                (MessageType::Pong, &v.extra)
            }
        };
        o.insert("type", mt.as_str());
        let mut msg = core_wire::from_value(Value::Object(o), false)?;
        msg.extra_mut().extend(extra_object(extra)?);
        Ok(msg)
    }
}

/// Decodes one frame (UTF-8 bytes). With `validate`, every schema rule is checked and
/// all violations are reported, sorted by location.
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn decode(frame: Vec<u8>, validate: bool) -> Result<Message, ProtocolError> {
    Ok(from_view(core_wire::decode_view(&frame, validate)?))
}

/// The record of a decoded frame: a plain `task.progress` that the core's one-pass
/// scanner accepted keeps its validated payload text as is (no value built, nothing
/// re-encoded); any other frame is converted from the core's message.
pub(crate) fn from_view(d: core_wire::Decoded<'_>) -> Message {
    match d {
        core_wire::Decoded::Progress(v) => Message::TaskProgress {
            v: TaskProgress {
                schema_version: core_wire::SCHEMA_VERSION,
                task_id: v.task_id.to_owned(),
                seq: v.seq,
                kind: v.kind.to_owned(),
                attempt: v.attempt,
                payload: v.payload.to_owned(),
                extra: "{}".to_owned(),
            },
        },
        core_wire::Decoded::Message(m) => Message::from(&m),
    }
}

/// Checks one frame without building the message record (the core's decode with
/// `validate`, the result dropped): the cheap way to ask "would this frame decode?".
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn check_frame(frame: Vec<u8>, validate: bool) -> Result<(), ProtocolError> {
    core_wire::decode_view(&frame, validate)?;
    Ok(())
}

/// [`decode`] of a frame the host holds in a direct `ByteBuffer` (Kotlin) — read in place,
/// without the copy into a Rust-allocated buffer (and the extra FFI call that allocates
/// it) that a `ByteArray` argument costs. UniFFI 0.32.2 passes the buffer's base address
/// with `remaining()` bytes, so the frame must start at the buffer's position 0: pass a
/// `slice()` of a buffer whose position is not 0.
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn decode_direct(frame: &[u8], validate: bool) -> Result<Message, ProtocolError> {
    Ok(from_view(core_wire::decode_view(frame, validate)?))
}

/// [`check_frame`] of a frame in a direct `ByteBuffer` (see [`decode_direct`]).
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn check_frame_direct(frame: &[u8], validate: bool) -> Result<(), ProtocolError> {
    core_wire::decode_view(frame, validate)?;
    Ok(())
}

/// Decodes one text frame (a WebSocket text message); the same rules as [`decode`].
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn decode_text(frame: String, validate: bool) -> Result<Message, ProtocolError> {
    Ok(from_view(core_wire::decode_str_view(&frame, validate)?))
}

/// Decodes a text frame given as UTF-16 code units (a JVM or Swift string exactly as the
/// host holds it, lone surrogates included): text that is not valid Unicode fails with
/// the core's `not_json` ("the text is not valid Unicode"); other text is decoded.
///
/// # Errors
/// `ProtocolError::Decode` with the core's code.
#[uniffi::export]
pub fn decode_utf16(units: Vec<u16>, validate: bool) -> Result<Message, ProtocolError> {
    let text = String::from_utf16(&units).map_err(|_| DecodeError::not_unicode())?;
    decode_text(text, validate)
}

/// Encodes a message: deterministic, byte-stable compact JSON (declared keys in the fixed
/// order per type, then unknown fields in arrival order). Refuses a message the peer's
/// decoder would refuse (nesting deeper than 127 levels).
///
/// # Errors
/// `ProtocolError::Decode` (`not_json`, `schema_violation` for a declared field the typed
/// model cannot hold, `not_object` for an `extra` that is not an object).
#[uniffi::export]
pub fn encode(message: Message) -> Result<String, ProtocolError> {
    Ok(core_wire::try_encode(&message.to_core()?)?)
}

/// The message as a JSON object text (declared fields per the encoding rules, then the
/// unknown fields): the same bytes as [`encode`].
///
/// # Errors
/// As [`encode`].
#[uniffi::export]
pub fn message_to_json(message: Message) -> Result<String, ProtocolError> {
    let m = message.to_core()?;
    Ok(Value::Object(core_wire::to_object(&m)).to_string())
}

/// Builds a message from a JSON object text with the decoder's rules (tolerant unless
/// `validate`): the same as [`decode_text`].
///
/// # Errors
/// `ProtocolError::Decode`.
#[uniffi::export]
pub fn message_from_json(json: String, validate: bool) -> Result<Message, ProtocolError> {
    decode_text(json, validate)
}

/// Checks a JSON value (text) against every rule of message type `type_name`
/// (`wire::check_as`); an absent `type` is taken to be `type_name`.
///
/// # Errors
/// `ProtocolError::Decode`; `unknown_type` for a type name the protocol does not have.
#[uniffi::export]
pub fn check_as(json: String, type_name: String) -> Result<Message, ProtocolError> {
    let mt = MessageType::from_wire(&type_name).ok_or(DecodeError::UnknownType {
        type_name: Some(type_name.clone()),
    })?;
    Ok(Message::from(&core_wire::check_as(parse(&json)?, mt)?))
}

/// Validates a message against every schema rule.
///
/// # Errors
/// `ProtocolError::Decode` (`schema_violation` with the located violations).
#[uniffi::export]
pub fn validate(message: Message) -> Result<(), ProtocolError> {
    let m = message.to_core()?;
    let name = m.message_type();
    core_wire::check_message_as(&m, name)?;
    Ok(())
}

/// The wire name of a message's type (`task.progress`).
#[uniffi::export]
pub fn message_type_name(message: &Message) -> String {
    let mt = match message {
        Message::Hello { .. } => MessageType::Hello,
        Message::TaskAssign { .. } => MessageType::TaskAssign,
        Message::TaskProgress { .. } => MessageType::TaskProgress,
        Message::TaskReport { .. } => MessageType::TaskReport,
        Message::TaskCancel { .. } => MessageType::TaskCancel,
        Message::Ping { .. } => MessageType::Ping,
        Message::Pong { .. } => MessageType::Pong,
    };
    mt.as_str().to_owned()
}

/// The wire names of the seven message types.
#[uniffi::export]
pub fn message_types() -> Vec<String> {
    MessageType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect()
}

/// `true` for the message types that carry a `seq` (the sequenced streams).
#[uniffi::export]
pub fn is_sequenced(type_name: String) -> bool {
    core_wire::is_sequenced_name(&type_name)
}

/// The frame schema version this core speaks.
#[uniffi::export]
pub fn schema_version() -> u64 {
    core_wire::SCHEMA_VERSION
}

/// The wire protocol version this core speaks.
#[uniffi::export]
pub fn protocol_version() -> u64 {
    core_wire::PROTOCOL_VERSION
}
