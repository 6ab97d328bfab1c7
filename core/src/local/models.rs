//! Wire models of the local-runner protocol (seed 002) and their readers.
//!
//! Forward compatibility (DESIGN §3.5): unknown *optional* fields are accepted and kept
//! in `extra` (arrival order) and re-emitted after the declared ones; an unknown schema
//! id, required version or closed-enum value fails closed with a [`ModelError`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ModelError;
use crate::fields::{
    extra, object as as_object, opt_object, opt_str, req, req_array, req_nonempty_str, req_object,
    req_str, req_u64,
};

/// Schema id of controller → runner commands (runner stdin JSONL).
pub(crate) const COMMAND_SCHEMA: &str = "paperclip.prp.command.v1";
/// Schema id of the runner → controller stream envelope (runner stdout JSONL).
pub(crate) const STREAM_SCHEMA: &str = "paperclip.runner.stream.v1";
/// Schema id of runner → harness commands (harness stdin JSONL).
pub(crate) const HARNESS_COMMAND_SCHEMA: &str = "paperclip.fake_harness.command.v1";
/// Schema id of harness → runner messages (harness stdout JSONL).
pub(crate) const HARNESS_MESSAGE_SCHEMA: &str = "paperclip.fake_harness.message.v1";
/// Schema id of a fake-harness script file.
pub(crate) const SCRIPT_SCHEMA: &str = "paperclip.fake_harness.script.v1";
/// Schema id of canonical events.
pub(crate) const EVENT_SCHEMA: &str = "paperclip.prp.event.v1";
/// Schema id of terminal objects (harness proposal and canonical `run.terminal` payload).
pub(crate) const TERMINAL_SCHEMA: &str = "paperclip.prp.terminal.v1";
/// Schema id of structured run results.
pub(crate) const RESULT_SCHEMA: &str = "paperclip.run_result.v1";
/// Schema id of runtime (permission / input) requests.
pub(crate) const RUNTIME_REQUEST_SCHEMA: &str = "paperclip.runtime_request.v1";
/// Longest `commandId` accepted (command schema `maxLength`).
pub(crate) const MAX_COMMAND_ID_CHARS: usize = 160;

// ---------------------------------------------------------------------------------------
// small readers

pub(crate) fn parse_json(text: &[u8]) -> Result<Value, ModelError> {
    crate::wire::parse_value(text).map_err(|e| ModelError::NotJson {
        message: e.to_string(),
    })
}

pub(crate) fn check_schema(
    obj: &Map<String, Value>,
    expected: &'static str,
) -> Result<(), ModelError> {
    match obj.get("schema") {
        Some(Value::String(s)) if s == expected => Ok(()),
        Some(Value::String(s)) => Err(ModelError::UnsupportedSchema {
            expected,
            found: Some(s.clone()),
        }),
        _ => Err(ModelError::UnsupportedSchema {
            expected,
            found: None,
        }),
    }
}

pub(crate) fn req_id<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str, ModelError> {
    let s = req_str(obj, field)?;
    check_id(field, s)?;
    Ok(s)
}

pub(crate) fn check_id(field: &str, s: &str) -> Result<(), ModelError> {
    let n = s.chars().count();
    if n == 0 || n > MAX_COMMAND_ID_CHARS {
        return Err(ModelError::invalid(
            field,
            format!("length must be 1..={MAX_COMMAND_ID_CHARS}"),
        ));
    }
    Ok(())
}

macro_rules! closed_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }
        impl $name {
            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// Parse the wire spelling; `None` for an unknown value (fail closed).
            #[allow(clippy::should_implement_trait)]
            pub fn from_str(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

fn parse_enum<T>(
    obj: &Map<String, Value>,
    field: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, ModelError> {
    let v = req(obj, field)?;
    v.as_str()
        .and_then(parse)
        .ok_or_else(|| ModelError::unknown(field, v))
}

// ---------------------------------------------------------------------------------------
// commands

closed_enum! {
    /// The 18 `type`s of `paperclip.prp.command.v1`.
    CommandType {
        /// Create the harness process group and wait for `ready`.
        RunPrepare = "run.prepare",
        /// Not implemented by the local runner.
        RunAttach = "run.attach",
        /// Open the one driver session.
        SessionOpen = "session.open",
        /// Start the scripted turn.
        TurnStart = "turn.start",
        /// Not implemented by the local runner.
        TurnSteer = "turn.steer",
        /// Interrupt the active turn.
        TurnInterrupt = "turn.interrupt",
        /// Stop the active turn (treated as an interruption).
        TurnStop = "turn.stop",
        /// Answer a pending runtime request.
        RequestResolve = "request.resolve",
        /// Not implemented by the local runner.
        InteractionReceipt = "interaction.receipt",
        /// Not implemented by the local runner.
        SemanticToolResult = "semantic_tool.result",
        /// Not implemented by the local runner.
        SessionSnapshot = "session.snapshot",
        /// Close the session (forwarded to the harness).
        SessionClose = "session.close",
        /// Not implemented by the local runner.
        SessionBudgetIncrease = "session.budget.increase",
        /// Not implemented by the local runner.
        SessionDestroy = "session.destroy",
        /// Cancel the run: forwarded, then the harness group is terminated.
        RunCancel = "run.cancel",
        /// Not implemented by the local runner.
        RunnerDrain = "runner.drain",
        /// Not implemented by the local runner.
        RunnerSuspend = "runner.suspend",
        /// Not implemented by the local runner.
        RunnerShutdown = "runner.shutdown",
    }
}

impl CommandType {
    /// `true` for the eight commands the local runner implements.
    pub fn is_implemented_locally(self) -> bool {
        matches!(
            self,
            CommandType::RunPrepare
                | CommandType::SessionOpen
                | CommandType::TurnStart
                | CommandType::RequestResolve
                | CommandType::TurnInterrupt
                | CommandType::TurnStop
                | CommandType::SessionClose
                | CommandType::RunCancel
        )
    }
}

/// A `paperclip.prp.command.v1` controller command.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerCommand {
    /// `commandId`, 1..=160 characters.
    pub command_id: String,
    /// `controllerSeq`, from 1, contiguous.
    pub controller_seq: u64,
    /// `type`.
    pub command_type: CommandType,
    /// `issuedAt` (date-time text, not interpreted).
    pub issued_at: String,
    /// `payload` (open object).
    pub payload: Map<String, Value>,
    /// Optional `controllerEpoch` (needs the `transport.command_epochs.v1` capability, which
    /// the local runner does not negotiate: a command carrying it is rejected).
    pub controller_epoch: Option<String>,
    /// Optional `deadlineAt` (kept, not enforced by the local runner).
    pub deadline_at: Option<String>,
    /// Optional `precondition` object (kept, not enforced by the local runner).
    pub precondition: Option<Map<String, Value>>,
    /// Unknown optional fields in arrival order.
    pub extra: Map<String, Value>,
}

const COMMAND_FIELDS: &[&str] = &[
    "schema",
    "commandId",
    "controllerSeq",
    "type",
    "issuedAt",
    "payload",
    "controllerEpoch",
    "deadlineAt",
    "precondition",
];

impl RunnerCommand {
    /// A command with an empty payload.
    pub fn new(
        command_id: impl Into<String>,
        controller_seq: u64,
        command_type: CommandType,
    ) -> Self {
        Self {
            command_id: command_id.into(),
            controller_seq,
            command_type,
            issued_at: "2026-01-01T00:00:00.000Z".into(),
            payload: Map::new(),
            controller_epoch: None,
            deadline_at: None,
            precondition: None,
            extra: Map::new(),
        }
    }

    /// Read a command from a parsed JSON value. The schema id is checked first; an
    /// unknown `type` or a `controllerSeq` below 1 fails closed (the local runner reads
    /// those through [`CommandEnvelope`] instead, so that they meet the ledger first).
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        CommandEnvelope::from_value(v)?.into_command()
    }

    /// Parse one JSON line.
    pub fn parse(line: &str) -> Result<Self, ModelError> {
        Self::from_value(&parse_json(line.as_bytes())?)
    }

    /// The JSON value: declared fields in schema order, then `extra`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("schema".into(), COMMAND_SCHEMA.into());
        m.insert("commandId".into(), self.command_id.clone().into());
        m.insert("controllerSeq".into(), self.controller_seq.into());
        m.insert("type".into(), self.command_type.as_str().into());
        m.insert("issuedAt".into(), self.issued_at.clone().into());
        m.insert("payload".into(), Value::Object(self.payload.clone()));
        if let Some(e) = &self.controller_epoch {
            m.insert("controllerEpoch".into(), e.clone().into());
        }
        if let Some(d) = &self.deadline_at {
            m.insert("deadlineAt".into(), d.clone().into());
        }
        if let Some(p) = &self.precondition {
            m.insert("precondition".into(), Value::Object(p.clone()));
        }
        for (k, v) in &self.extra {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }
}

/// A `paperclip.prp.command.v1` command as the local runner's ledger sees it: the shape is
/// validated (schema id, `commandId`, `issuedAt`, `payload`, optional fields), but `type`
/// is kept as text and `controllerSeq` may be any non-negative integer. This mirrors the
/// original runner, which parses `type` as a string: an unknown type or `controllerSeq` 0
/// passes the schema check, meets the duplicate and contiguity rules of the ledger, and is
/// rejected later (at dispatch, or as not contiguous).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandEnvelope {
    /// `commandId`, 1..=160 characters.
    pub command_id: String,
    /// `controllerSeq` (0 allowed here; never contiguous).
    pub controller_seq: u64,
    /// `type`, as text (possibly not one of the 18 [`CommandType`]s).
    pub type_text: String,
    /// `issuedAt`.
    pub issued_at: String,
    /// `payload`.
    pub payload: Map<String, Value>,
    /// Optional `controllerEpoch`.
    pub controller_epoch: Option<String>,
    /// Optional `deadlineAt`.
    pub deadline_at: Option<String>,
    /// Optional `precondition`.
    pub precondition: Option<Map<String, Value>>,
    /// Unknown optional fields in arrival order.
    pub extra: Map<String, Value>,
}

impl CommandEnvelope {
    /// Read the envelope: the schema id first, then the required and optional fields.
    /// `type` must be a string (else `unknown_value`), `controllerSeq` a non-negative
    /// integer.
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        let obj = as_object(v)?;
        check_schema(obj, COMMAND_SCHEMA)?;
        let command_id = req_id(obj, "commandId")?.to_owned();
        let controller_seq = req_u64(obj, "controllerSeq")?;
        let type_text = match req(obj, "type")? {
            Value::String(s) => s.clone(),
            other => return Err(ModelError::unknown("type", other)),
        };
        let issued_at = req_str(obj, "issuedAt")?.to_owned();
        let payload = req_object(obj, "payload")?.clone();
        let controller_epoch = opt_str(obj, "controllerEpoch")?.map(str::to_owned);
        let deadline_at = opt_str(obj, "deadlineAt")?.map(str::to_owned);
        let precondition = opt_object(obj, "precondition")?.cloned();
        Ok(Self {
            command_id,
            controller_seq,
            type_text,
            issued_at,
            payload,
            controller_epoch,
            deadline_at,
            precondition,
            extra: extra(obj, COMMAND_FIELDS),
        })
    }

    /// The typed command the ledger stores the canonical JSON of: exactly the fields the
    /// original runner's typed command has — `schema`, `commandId`, `controllerSeq`,
    /// `type`, `issuedAt`, `payload`. Unknown fields and the optional `deadlineAt` /
    /// `precondition` (which the local runner does not enforce) are not part of it, so
    /// a retransmission that differs only in them is a duplicate.
    pub fn ledger_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("schema".into(), COMMAND_SCHEMA.into());
        m.insert("commandId".into(), self.command_id.clone().into());
        m.insert("controllerSeq".into(), self.controller_seq.into());
        m.insert("type".into(), self.type_text.clone().into());
        m.insert("issuedAt".into(), self.issued_at.clone().into());
        m.insert("payload".into(), Value::Object(self.payload.clone()));
        Value::Object(m)
    }

    /// The known command type, if `type` is one of the 18.
    pub fn command_type(&self) -> Option<CommandType> {
        CommandType::from_str(&self.type_text)
    }

    /// The strict [`RunnerCommand`]: fails on `controllerSeq` 0 (`invalid_field`) or an
    /// unknown `type` (`unknown_value`).
    pub fn into_command(self) -> Result<RunnerCommand, ModelError> {
        if self.controller_seq < 1 {
            return Err(ModelError::invalid("controllerSeq", "must be at least 1"));
        }
        let Some(command_type) = self.command_type() else {
            return Err(ModelError::unknown("type", &Value::from(self.type_text)));
        };
        Ok(RunnerCommand {
            command_id: self.command_id,
            controller_seq: self.controller_seq,
            command_type,
            issued_at: self.issued_at,
            payload: self.payload,
            controller_epoch: self.controller_epoch,
            deadline_at: self.deadline_at,
            precondition: self.precondition,
            extra: self.extra,
        })
    }
}

// ---------------------------------------------------------------------------------------
// runner stream

closed_enum! {
    /// `status` of a command receipt.
    ReceiptStatus {
        /// The command was recorded and applied.
        Accepted = "accepted",
        /// The same `commandId` with the same canonical content was applied before.
        Duplicate = "duplicate",
        /// The command was not applied.
        Rejected = "rejected",
    }
}

closed_enum! {
    /// `level` of a runner stream diagnostic.
    DiagnosticLevel {
        /// Informational.
        Info = "info",
        /// Something unusual that did not change the run.
        Warning = "warning",
        /// Something failed.
        Error = "error",
    }
}

/// A `command_receipt` stream message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandReceipt {
    /// `commandId` of the command answered.
    #[serde(rename = "commandId")]
    pub command_id: String,
    /// `controllerSeq` of the command answered.
    #[serde(rename = "controllerSeq")]
    pub controller_seq: u64,
    /// The verdict.
    pub status: ReceiptStatus,
    /// Human-readable explanation (the fixed texts listed in `conformance/README.md`).
    pub detail: String,
}

/// One message of the `paperclip.runner.stream.v1` stream (runner → controller).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamMessage {
    /// `{kind:"event", event}`: a canonical `paperclip.prp.event.v1` event.
    Event(Value),
    /// `{kind:"command_receipt", commandId, controllerSeq, status, detail}`.
    CommandReceipt(CommandReceipt),
    /// `{kind:"diagnostic", level, message}`: a runner diagnostic (never a canonical event).
    Diagnostic {
        /// Severity.
        level: DiagnosticLevel,
        /// Text.
        message: String,
    },
}

impl StreamMessage {
    /// The envelope `{"schema":"paperclip.runner.stream.v1","message":{...}}`.
    pub fn to_value(&self) -> Value {
        let mut msg = Map::new();
        match self {
            StreamMessage::Event(e) => {
                msg.insert("kind".into(), "event".into());
                msg.insert("event".into(), e.clone());
            }
            StreamMessage::CommandReceipt(r) => {
                msg.insert("kind".into(), "command_receipt".into());
                msg.insert("commandId".into(), r.command_id.clone().into());
                msg.insert("controllerSeq".into(), r.controller_seq.into());
                msg.insert("status".into(), r.status.as_str().into());
                msg.insert("detail".into(), r.detail.clone().into());
            }
            StreamMessage::Diagnostic { level, message } => {
                msg.insert("kind".into(), "diagnostic".into());
                msg.insert("level".into(), level.as_str().into());
                msg.insert("message".into(), message.clone().into());
            }
        }
        let mut env = Map::new();
        env.insert("schema".into(), STREAM_SCHEMA.into());
        env.insert("message".into(), Value::Object(msg));
        Value::Object(env)
    }

    /// The compact JSON line (without the terminating newline).
    pub fn to_line(&self) -> String {
        self.to_value().to_string()
    }

    /// Read a stream line (controller side). Fails closed on an unknown schema or kind.
    pub fn parse(line: &str) -> Result<Self, ModelError> {
        let v = parse_json(line.as_bytes())?;
        let obj = as_object(&v)?;
        check_schema(obj, STREAM_SCHEMA)?;
        let msg = req_object(obj, "message")?;
        match req_str(msg, "kind")? {
            "event" => Ok(StreamMessage::Event(req(msg, "event")?.clone())),
            "command_receipt" => Ok(StreamMessage::CommandReceipt(CommandReceipt {
                command_id: req_str(msg, "commandId")?.to_owned(),
                controller_seq: req_u64(msg, "controllerSeq")?,
                status: parse_enum(msg, "status", ReceiptStatus::from_str)?,
                detail: req_str(msg, "detail")?.to_owned(),
            })),
            "diagnostic" => Ok(StreamMessage::Diagnostic {
                level: parse_enum(msg, "level", DiagnosticLevel::from_str)?,
                message: req_str(msg, "message")?.to_owned(),
            }),
            other => Err(ModelError::unknown("message/kind", &Value::from(other))),
        }
    }
}

// ---------------------------------------------------------------------------------------
// harness command / message

/// A `paperclip.fake_harness.command.v1` command (runner → harness stdin).
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessCommand {
    /// The controller's `commandId`, forwarded.
    pub command_id: String,
    /// The controller's command type, forwarded.
    pub command_type: CommandType,
    /// The controller's payload, forwarded.
    pub payload: Map<String, Value>,
    /// Unknown optional fields in arrival order.
    pub extra: Map<String, Value>,
}

impl HarnessCommand {
    /// `{schema, commandId, type, payload}` then `extra`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("schema".into(), HARNESS_COMMAND_SCHEMA.into());
        m.insert("commandId".into(), self.command_id.clone().into());
        m.insert("type".into(), self.command_type.as_str().into());
        m.insert("payload".into(), Value::Object(self.payload.clone()));
        for (k, v) in &self.extra {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }

    /// Compact JSON line (no newline).
    pub fn to_line(&self) -> String {
        self.to_value().to_string()
    }

    /// Read a harness command (harness side).
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        let obj = as_object(v)?;
        check_schema(obj, HARNESS_COMMAND_SCHEMA)?;
        Ok(Self {
            command_id: req_id(obj, "commandId")?.to_owned(),
            command_type: parse_enum(obj, "type", CommandType::from_str)?,
            payload: req_object(obj, "payload")?.clone(),
            extra: extra(obj, &["schema", "commandId", "type", "payload"]),
        })
    }

    /// Parse one JSON line.
    pub fn parse(line: &str) -> Result<Self, ModelError> {
        Self::from_value(&parse_json(line.as_bytes())?)
    }
}

closed_enum! {
    /// `type` of a `paperclip.fake_harness.message.v1` message.
    HarnessMessageType {
        /// `{version, script}`: the harness is ready.
        Ready = "ready",
        /// `{eventType, turnId?, itemId?, payload}`: a typed driver event.
        Event = "event",
        /// `{request}`: a runtime request.
        Request = "request",
        /// `{result}`: the semantic result.
        Result = "result",
        /// `{terminal}`: the terminal proposal.
        Terminal = "terminal",
        /// `{stream, text}`: a log line.
        Log = "log",
        /// Free-form diagnostic (kept in the log tail only).
        Diagnostic = "diagnostic",
    }
}

/// A `paperclip.fake_harness.message.v1` message (harness stdout → runner).
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessMessage {
    /// `messageSeq`.
    pub message_seq: u64,
    /// `type`.
    pub message_type: HarnessMessageType,
    /// `payload` (shape depends on the type).
    pub payload: Map<String, Value>,
    /// Unknown optional fields in arrival order.
    pub extra: Map<String, Value>,
}

impl HarnessMessage {
    /// A message with the given seq, type and payload.
    pub fn new(
        message_seq: u64,
        message_type: HarnessMessageType,
        payload: Map<String, Value>,
    ) -> Self {
        Self {
            message_seq,
            message_type,
            payload,
            extra: Map::new(),
        }
    }

    /// Read a message; fails closed on schema and type.
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        let obj = as_object(v)?;
        check_schema(obj, HARNESS_MESSAGE_SCHEMA)?;
        Ok(Self {
            message_seq: req_u64(obj, "messageSeq")?,
            message_type: parse_enum(obj, "type", HarnessMessageType::from_str)?,
            payload: req_object(obj, "payload")?.clone(),
            extra: extra(obj, &["schema", "messageSeq", "type", "payload"]),
        })
    }

    /// Parse one JSON line.
    pub fn parse(line: &str) -> Result<Self, ModelError> {
        Self::from_value(&parse_json(line.as_bytes())?)
    }

    /// `{schema, messageSeq, type, payload}` then `extra`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("schema".into(), HARNESS_MESSAGE_SCHEMA.into());
        m.insert("messageSeq".into(), self.message_seq.into());
        m.insert("type".into(), self.message_type.as_str().into());
        m.insert("payload".into(), Value::Object(self.payload.clone()));
        for (k, v) in &self.extra {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }

    /// Compact JSON line (no newline).
    pub fn to_line(&self) -> String {
        self.to_value().to_string()
    }
}

// ---------------------------------------------------------------------------------------
// script

/// One step of a fake-harness script (`kind`-tagged, snake_case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScriptStep {
    /// Wait (overridable by the player's `delay_override_ms`).
    Delay {
        /// Milliseconds to wait.
        milliseconds: u64,
    },
    /// Send a `log` message.
    Log {
        /// `stdout` or `stderr` (open string).
        stream: String,
        /// The line.
        text: String,
    },
    /// Send an `event` message.
    Event {
        /// Canonical event type.
        event_type: String,
        /// Turn id; defaults to the current turn for `turn.*`/`item.*` events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        /// Item id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
        /// Event payload.
        payload: Value,
    },
    /// Send a `request` message.
    Request {
        /// A `paperclip.runtime_request.v1` object.
        request: Value,
    },
    /// Wait for `request.resolve` with this `payload.requestId`, then emit
    /// `runtime_request.resolved`.
    AwaitResolution {
        /// The request awaited.
        request_id: String,
    },
    /// Wait for `turn.interrupt`, then emit `turn.interrupted`.
    AwaitInterrupt,
    /// Send a `result` message.
    Result {
        /// A `paperclip.run_result.v1` object.
        payload: Value,
    },
    /// Send a `terminal` message.
    Terminal {
        /// A `paperclip.prp.terminal.v1` proposal.
        payload: Value,
    },
    /// Start a worker process in the harness's process group.
    SpawnWorker,
    /// Exit with this code.
    Exit {
        /// Exit code.
        code: i32,
    },
}

/// A `paperclip.fake_harness.script.v1` script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Script name (non-empty; equals the file stem for the seven reference scripts).
    pub name: String,
    /// Steps (non-empty).
    pub steps: Vec<ScriptStep>,
}

impl Script {
    /// Read a script; schema must be `paperclip.fake_harness.script.v1`, name and steps
    /// non-empty, every step kind known.
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        let obj = as_object(v)?;
        check_schema(obj, SCRIPT_SCHEMA)?;
        let name = req_nonempty_str(obj, "name")?;
        let steps_v = req(obj, "steps")?
            .as_array()
            .ok_or_else(|| ModelError::invalid("steps", "expected an array"))?;
        if steps_v.is_empty() {
            return Err(ModelError::invalid("steps", "must not be empty"));
        }
        let mut steps = Vec::with_capacity(steps_v.len());
        for (i, s) in steps_v.iter().enumerate() {
            let kind = s.get("kind").cloned().unwrap_or(Value::Null);
            let step: ScriptStep = serde_json::from_value(s.clone()).map_err(|e| {
                if e.to_string().contains("unknown variant") {
                    ModelError::unknown(format!("steps/{i}/kind"), &kind)
                } else {
                    ModelError::invalid(format!("steps/{i}"), e.to_string())
                }
            })?;
            steps.push(step);
        }
        Ok(Self {
            name: name.to_owned(),
            steps,
        })
    }

    /// Parse a script document.
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        Self::from_value(&parse_json(text.as_bytes())?)
    }
}

// ---------------------------------------------------------------------------------------
// terminal, result, request

closed_enum! {
    /// `turnTerminalState`.
    TurnTerminalState {
        /// The turn completed.
        Completed = "completed",
        /// The turn failed.
        Failed = "failed",
        /// The turn was interrupted.
        Interrupted = "interrupted",
        /// The turn was cancelled.
        Cancelled = "cancelled",
    }
}

closed_enum! {
    /// `runTerminalState`.
    RunTerminalState {
        /// The run succeeded.
        Succeeded = "succeeded",
        /// The run failed.
        Failed = "failed",
        /// The run was cancelled.
        Cancelled = "cancelled",
    }
}

closed_enum! {
    /// `reportedWorkDisposition`.
    WorkDisposition {
        /// The work is done.
        Done = "done",
        /// The work is blocked (a result then needs `blocker`).
        Blocked = "blocked",
        /// The work needs review.
        NeedsReview = "needs_review",
        /// The work was yielded (a result then needs `continuation`).
        Yielded = "yielded",
    }
}

/// Validate a `paperclip.prp.terminal.v1` object: schema id and the three closed enum
/// fields (`turnTerminalState`, `runTerminalState`, `reportedWorkDisposition`); other
/// fields are open.
pub(crate) fn validate_terminal(v: &Value) -> Result<(), ModelError> {
    let obj = as_object(v)?;
    check_schema(obj, TERMINAL_SCHEMA)?;
    parse_enum(obj, "turnTerminalState", TurnTerminalState::from_str)?;
    parse_enum(obj, "runTerminalState", RunTerminalState::from_str)?;
    parse_enum(obj, "reportedWorkDisposition", WorkDisposition::from_str)?;
    Ok(())
}

/// Check a harness terminal proposal: schema `paperclip.prp.terminal.v1` and all three
/// enum fields valid. This is `proposalValid` of the reconciliation.
pub(crate) fn terminal_proposal_is_valid(v: &Value) -> bool {
    validate_terminal(v).is_ok()
}

/// Validate a `paperclip.run_result.v1` object (required fields, closed enums, the
/// `blocked → blocker` and `yielded → continuation` rules). Returns its disposition.
pub(crate) fn validate_run_result(v: &Value) -> Result<WorkDisposition, ModelError> {
    let obj = as_object(v)?;
    check_schema(obj, RESULT_SCHEMA)?;
    let disposition = parse_enum(obj, "reportedWorkDisposition", WorkDisposition::from_str)?;
    let summary = req_nonempty_str(obj, "summary")?;
    if summary.chars().count() > 12_000 {
        return Err(ModelError::invalid(
            "summary",
            "longer than 12000 characters",
        ));
    }
    let claim = req_object(obj, "completionClaim")?;
    let at = |f: &str| format!("completionClaim/{f}");
    req_nonempty_str(claim, "contractRevision")
        .map_err(|_| ModelError::invalid(at("contractRevision"), "expected a non-empty string"))?;
    if !claim
        .get("objectiveSatisfied")
        .is_some_and(Value::is_boolean)
    {
        return Err(ModelError::invalid(
            at("objectiveSatisfied"),
            "expected a boolean",
        ));
    }
    for (i, c) in req_array(claim, "criteria")
        .map_err(|_| ModelError::invalid(at("criteria"), "expected an array"))?
        .iter()
        .enumerate()
    {
        let c = c.as_object().ok_or_else(|| {
            ModelError::invalid(at(&format!("criteria/{i}")), "expected an object")
        })?;
        req_nonempty_str(c, "criterionId").map_err(|_| {
            ModelError::invalid(
                at(&format!("criteria/{i}/criterionId")),
                "expected a non-empty string",
            )
        })?;
        let st = c.get("status").cloned().unwrap_or(Value::Null);
        if !matches!(st.as_str(), Some("satisfied" | "not_satisfied" | "unknown")) {
            return Err(ModelError::unknown(
                at(&format!("criteria/{i}/status")),
                &st,
            ));
        }
        if !c.get("evidenceRefs").is_some_and(Value::is_array) {
            return Err(ModelError::invalid(
                at(&format!("criteria/{i}/evidenceRefs")),
                "expected an array",
            ));
        }
    }
    for (i, w) in req_array(claim, "remainingWork")
        .map_err(|_| ModelError::invalid(at("remainingWork"), "expected an array"))?
        .iter()
        .enumerate()
    {
        let w = w.as_object().ok_or_else(|| {
            ModelError::invalid(at(&format!("remainingWork/{i}")), "expected an object")
        })?;
        req_nonempty_str(w, "description").map_err(|_| {
            ModelError::invalid(
                at(&format!("remainingWork/{i}/description")),
                "expected a non-empty string",
            )
        })?;
        if !w.get("blocksCompletion").is_some_and(Value::is_boolean) {
            return Err(ModelError::invalid(
                at(&format!("remainingWork/{i}/blocksCompletion")),
                "expected a boolean",
            ));
        }
    }
    for f in ["evidence", "attentionRequests"] {
        if req_array(obj, f)?.iter().any(|e| !e.is_object()) {
            return Err(ModelError::invalid(f, "items must be objects"));
        }
    }
    for (i, ver) in req_array(obj, "verification")?.iter().enumerate() {
        let ver = ver.as_object().ok_or_else(|| {
            ModelError::invalid(format!("verification/{i}"), "expected an object")
        })?;
        req_nonempty_str(ver, "commandOrCheck").map_err(|_| {
            ModelError::invalid(
                format!("verification/{i}/commandOrCheck"),
                "expected a non-empty string",
            )
        })?;
        let st = ver.get("status").cloned().unwrap_or(Value::Null);
        if !matches!(st.as_str(), Some("passed" | "failed" | "not_run")) {
            return Err(ModelError::unknown(format!("verification/{i}/status"), &st));
        }
    }
    for (i, a) in req_array(obj, "artifacts")?.iter().enumerate() {
        let a = a
            .as_object()
            .ok_or_else(|| ModelError::invalid(format!("artifacts/{i}"), "expected an object"))?;
        for f in ["kind", "ref"] {
            req_nonempty_str(a, f).map_err(|_| {
                ModelError::invalid(format!("artifacts/{i}/{f}"), "expected a non-empty string")
            })?;
        }
    }
    if let Some(c) = obj.get("continuation") {
        let c = c
            .as_object()
            .ok_or_else(|| ModelError::invalid("continuation", "expected an object"))?;
        let kind = c.get("kind").cloned().unwrap_or(Value::Null);
        if !matches!(
            kind.as_str(),
            Some("same_agent" | "retry" | "delegated_issue" | "response_wake" | "monitor")
        ) {
            return Err(ModelError::unknown("continuation/kind", &kind));
        }
        for f in ["summary", "idempotencyKey"] {
            req_nonempty_str(c, f).map_err(|_| {
                ModelError::invalid(format!("continuation/{f}"), "expected a non-empty string")
            })?;
        }
    }
    if let Some(b) = obj.get("blocker") {
        let b = b
            .as_object()
            .ok_or_else(|| ModelError::invalid("blocker", "expected an object"))?;
        let scope = b.get("scope").cloned().unwrap_or(Value::Null);
        if !matches!(scope.as_str(), Some("current_track" | "task_wide")) {
            return Err(ModelError::unknown("blocker/scope", &scope));
        }
    }
    match disposition {
        WorkDisposition::Blocked if !obj.contains_key("blocker") => {
            return Err(ModelError::missing("blocker"))
        }
        WorkDisposition::Yielded if !obj.contains_key("continuation") => {
            return Err(ModelError::missing("continuation"))
        }
        _ => {}
    }
    Ok(disposition)
}

closed_enum! {
    /// `type` of a runtime request.
    RuntimeRequestType {
        /// A yes/no style permission with `choices`.
        Permission = "permission",
        /// Free-text input.
        Input = "input",
    }
}

/// Validate a `paperclip.runtime_request.v1` object as the harness sends it
/// (`requestKind: "runtime"`, `status: "pending"`). Returns `(requestId, type)`.
pub(crate) fn validate_runtime_request(
    v: &Value,
) -> Result<(String, RuntimeRequestType), ModelError> {
    let obj = as_object(v)?;
    check_schema(obj, RUNTIME_REQUEST_SCHEMA)?;
    let kind = req(obj, "requestKind")?;
    if kind.as_str() != Some("runtime") {
        return Err(ModelError::unknown("requestKind", kind));
    }
    let id = req_id(obj, "requestId")?.to_owned();
    let ty = parse_enum(obj, "type", RuntimeRequestType::from_str)?;
    let status = req(obj, "status")?;
    if status.as_str() != Some("pending") {
        return Err(ModelError::unknown("status", status));
    }
    if let Some(choices) = obj.get("choices") {
        let arr = choices
            .as_array()
            .ok_or_else(|| ModelError::invalid("choices", "expected an array"))?;
        for (i, c) in arr.iter().enumerate() {
            let c = c
                .as_object()
                .ok_or_else(|| ModelError::invalid(format!("choices/{i}"), "expected an object"))?;
            req_str(c, "key").map_err(|_| {
                ModelError::invalid(format!("choices/{i}/key"), "expected a string")
            })?;
            req_str(c, "label").map_err(|_| {
                ModelError::invalid(format!("choices/{i}/label"), "expected a string")
            })?;
        }
    }
    opt_str(obj, "prompt")?;
    Ok((id, ty))
}

/// Every `eventType` of `paperclip.prp.event.v1` (closed: anything else fails closed).
pub(crate) const EVENT_TYPES: &[&str] = &[
    "runner.connected",
    "runner.reconnected",
    "runner.disconnected",
    "runner.draining",
    "runner.diagnostic",
    "runtime.phase.changed",
    "sandbox.metric",
    "workspace.ready",
    "harness.starting",
    "harness.ready",
    "harness.exited",
    "harness.diagnostic",
    "session.starting",
    "session.started",
    "session.resuming",
    "session.resumed",
    "session.reconciled",
    "session.closed",
    "session.failed",
    "turn.submitted",
    "turn.accepted",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "turn.cancelled",
    "item.started",
    "item.delta",
    "item.completed",
    "item.failed",
    "mcp_app.discovered",
    "mcp_app.resource.resolved",
    "mcp_app.initializing",
    "mcp_app.ready",
    "mcp_app.tool_input",
    "mcp_app.tool_result",
    "mcp_app.action.requested",
    "mcp_app.action.resolved",
    "mcp_app.host_context.changed",
    "mcp_app.failed",
    "mcp_app.teardown",
    "runtime_request.created",
    "runtime_request.resolved",
    "runtime_request.expired",
    "runtime_request.cancelled",
    "interaction.request.proposed",
    "interaction.request.materialized",
    "interaction.request.rejected",
    "interaction.response.progressed",
    "interaction.response.resolved",
    "interaction.response.delivered",
    "run.result.proposed",
    "run.result.accepted",
    "run.result.rejected",
    "attention.request.proposed",
    "attention.request.routed",
    "attention.request.resolved",
    "attention.request.expired",
    "attention.request.superseded",
    "work.assessment.recorded",
    "issue.status.decision.recorded",
    "issue.status.decision.applied",
    "issue.status.decision.rejected",
    "issue.status.decision.superseded",
    "run.terminal",
];

/// `true` when `event_type` is one of [`EVENT_TYPES`].
pub(crate) fn is_known_event_type(event_type: &str) -> bool {
    EVENT_TYPES.contains(&event_type)
}

/// Event priority per the local runner: 0 for `run.result.proposed`, `run.terminal`,
/// `turn.completed`, `turn.failed`, `turn.interrupted`, `harness.exited`; 2 for
/// `item.delta`, `harness.diagnostic`, `runner.diagnostic`; 1 otherwise.
pub(crate) fn event_priority(event_type: &str) -> u8 {
    match event_type {
        "run.result.proposed"
        | "run.terminal"
        | "turn.completed"
        | "turn.failed"
        | "turn.interrupted"
        | "harness.exited" => 0,
        "item.delta" | "harness.diagnostic" | "runner.diagnostic" => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn all_eighteen_command_types_parse() {
        // The 18 command types of seed 002, 8 of which the local runner implements.
        let all = [
            ("run.prepare", true),
            ("run.attach", false),
            ("session.open", true),
            ("turn.start", true),
            ("turn.steer", false),
            ("turn.interrupt", true),
            ("turn.stop", true),
            ("request.resolve", true),
            ("interaction.receipt", false),
            ("semantic_tool.result", false),
            ("session.snapshot", false),
            ("session.close", true),
            ("session.budget.increase", false),
            ("session.destroy", false),
            ("run.cancel", true),
            ("runner.drain", false),
            ("runner.suspend", false),
            ("runner.shutdown", false),
        ];
        for (name, local) in all {
            let v = json!({"schema": COMMAND_SCHEMA, "commandId": "c1", "controllerSeq": 1, "type": name, "issuedAt": "x", "payload": {}});
            let t = RunnerCommand::from_value(&v).unwrap().command_type;
            assert_eq!(t.as_str(), name);
            assert_eq!(t.is_implemented_locally(), local, "{name}");
        }
    }

    #[test]
    fn unknown_fields_are_preserved_and_unknown_type_fails_closed() {
        let v = json!({"schema": COMMAND_SCHEMA, "commandId": "c1", "controllerSeq": 1, "type": "turn.start", "issuedAt": "x", "payload": {}, "zeta": 1, "alpha": [2]});
        let c = RunnerCommand::from_value(&v).unwrap();
        assert_eq!(c.to_value(), v);
        assert_eq!(
            c.to_value()
                .as_object()
                .unwrap()
                .keys()
                .next_back()
                .unwrap(),
            "alpha"
        );
        let bad = json!({"schema": COMMAND_SCHEMA, "commandId": "c1", "controllerSeq": 1, "type": "turn.fly", "issuedAt": "x", "payload": {}});
        assert_eq!(
            RunnerCommand::from_value(&bad).unwrap_err().code(),
            "unknown_value"
        );
        let schema = json!({"schema": "paperclip.prp.command.v2"});
        assert_eq!(
            RunnerCommand::from_value(&schema).unwrap_err().code(),
            "unsupported_schema"
        );
    }

    #[test]
    fn stream_messages_round_trip() {
        for m in [
            StreamMessage::Event(json!({"a": 1})),
            StreamMessage::CommandReceipt(CommandReceipt {
                command_id: "c".into(),
                controller_seq: 3,
                status: ReceiptStatus::Duplicate,
                detail: "d".into(),
            }),
            StreamMessage::Diagnostic {
                level: DiagnosticLevel::Warning,
                message: "m".into(),
            },
        ] {
            assert_eq!(StreamMessage::parse(&m.to_line()).unwrap(), m);
        }
        assert_eq!(
            StreamMessage::parse(
                r#"{"schema":"paperclip.runner.stream.v1","message":{"kind":"x"}}"#
            )
            .unwrap_err()
            .code(),
            "unknown_value"
        );
    }

    #[test]
    fn result_rules() {
        let mut r = json!({"schema": RESULT_SCHEMA, "reportedWorkDisposition": "yielded", "summary": "s",
            "completionClaim": {"contractRevision": "r", "objectiveSatisfied": false, "criteria": [], "remainingWork": []},
            "evidence": [], "verification": [], "attentionRequests": [], "artifacts": []});
        assert_eq!(
            validate_run_result(&r).unwrap_err(),
            ModelError::missing("continuation")
        );
        r["continuation"] = json!({"kind": "retry", "summary": "s", "idempotencyKey": "k"});
        assert_eq!(validate_run_result(&r).unwrap(), WorkDisposition::Yielded);
        r["reportedWorkDisposition"] = json!("finished");
        assert_eq!(validate_run_result(&r).unwrap_err().code(), "unknown_value");
    }
}
