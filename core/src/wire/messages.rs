//! The seven hub-protocol messages of seed 000.
//!
//! Field policy: top-level fields the seed names are typed; the embedded objects `task`,
//! `report`, `payload` and `invocation` are kept as [`Object`]s in the key order they
//! arrived in (typed views: [`TaskAssign::task_spec`], [`TaskReportMessage::task_report`],
//! [`TaskProgress::usage`]); fields the seed does not name are kept in `extra`, in arrival
//! order, and re-emitted by [`encode`](super::encode). Roles, progress kinds, capabilities
//! and statuses are open strings.

use indexmap::IndexMap;

use super::artifacts::{TaskReport, TaskSpec, UsageSplit};
use super::error::SchemaError;
use super::payload::Payload;
use super::{PROTOCOL_VERSION, SCHEMA_VERSION};
use crate::json::{CompactString, Object, Value};

/// Common values of [`TaskProgress::kind`] (an open string).
pub mod progress_kind {
    /// Lifecycle state change.
    pub const STATE: &str = "state";
    /// Tool activity.
    pub const TOOL: &str = "tool";
    /// Control-gate outcomes.
    pub const CONTROLS: &str = "controls";
    /// Token usage; `payload.usage` is a [`UsageSplit`](crate::wire::UsageSplit).
    pub const USAGE: &str = "usage";
}

/// Common values of [`TaskAssign::role`] (an open string).
pub mod role {
    /// The coder, the role a runner executes.
    pub const CODER: &str = "coder";
}

/// Common values of a TaskReport's `status` (an open string).
pub mod report_status {
    /// The attempt finished its work.
    pub const DONE: &str = "done";
    /// The attempt needs an answer (see `questions`).
    pub const BLOCKED: &str = "blocked";
    /// The attempt failed.
    pub const FAILED: &str = "failed";
}

/// Common values of [`Hello::capabilities`] entries (open strings).
pub mod capability {
    /// Drives claude-agent-sdk sessions.
    pub const AGENT_SDK: &str = "agent-sdk";
    /// Drives a subprocess JSONL harness.
    pub const SUBPROCESS: &str = "subprocess";
}

/// The value of [`Ping::nonce`] / [`Pong::nonce`]: a string or an integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Nonce {
    /// A string nonce.
    Text(String),
    /// An integer nonce (within ±(2^53 − 1)).
    Integer(i64),
}

impl From<&str> for Nonce {
    fn from(s: &str) -> Self {
        Nonce::Text(s.to_owned())
    }
}
impl From<String> for Nonce {
    fn from(s: String) -> Self {
        Nonce::Text(s)
    }
}
impl From<i64> for Nonce {
    fn from(n: i64) -> Self {
        Nonce::Integer(n)
    }
}

/// The value of [`Ping::sent_at`]: a string (e.g. RFC 3339) or a number.
#[derive(Debug, Clone, PartialEq)]
pub enum SentAt {
    /// A textual timestamp.
    Text(String),
    /// A numeric timestamp (any JSON number).
    Number(serde_json::Number),
}

/// `hello`, runner → hub, first frame of every connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// Wire protocol major version the runner speaks (≥ 1).
    pub protocol_version: u64,
    /// Project slug, non-empty.
    pub project_id: String,
    /// Runner build/version string, opaque to the hub.
    pub runner_version: String,
    /// Backends the runner can drive (open strings).
    pub capabilities: Vec<String>,
    /// Reconnect declaration: task id → last seq received contiguously from the hub.
    pub resume: IndexMap<String, u64>,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl Hello {
    /// A `hello` for a fresh connection (no resume).
    pub fn new(project_id: impl Into<String>, runner_version: impl Into<String>) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            protocol_version: PROTOCOL_VERSION,
            project_id: project_id.into(),
            runner_version: runner_version.into(),
            capabilities: Vec::new(),
            resume: IndexMap::new(),
            extra: Object::new(),
        }
    }
}

/// `task.assign`, hub → runner: run one attempt of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskAssign {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// Mirror of `task.id`; filled from it when absent on the wire.
    pub task_id: String,
    /// The TaskSpec object, keys in arrival order.
    pub task: Object,
    /// Role to execute (open string, usually `coder`).
    pub role: String,
    /// Model↔harness pairing and runtime wiring (`backend`, `model`, `session`,
    /// `system_prompt_ref`, `allowed_tools`, `llm_base_url`, `budget`, …).
    pub invocation: Object,
    /// Position in the hub's per-task command stream; 0 until stamped.
    pub seq: u64,
    /// Attempt number (0 = unset/legacy).
    pub attempt: u64,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl TaskAssign {
    /// An assign for `task`; `task_id` is taken from `task.id`.
    pub fn new(task: Object, role: impl Into<String>, invocation: Object) -> Self {
        let task_id = task
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Self {
            schema_version: SCHEMA_VERSION,
            task_id,
            task,
            role: role.into(),
            invocation,
            seq: 0,
            attempt: 0,
            extra: Object::new(),
        }
    }

    /// The embedded task as a typed, validated [`TaskSpec`].
    ///
    /// # Errors
    /// The TaskSpec's violations, located under `task/`.
    pub fn task_spec(&self) -> Result<TaskSpec, SchemaError> {
        TaskSpec::from_object_at(&self.task, "task")
    }
}

/// `task.progress`, runner → hub.
///
/// The hub's firehose, shaped so that ingesting it allocates nothing: `task_id` and
/// `kind` are [`CompactString`]s (inline up to 24 bytes), and a decoded frame's
/// [`payload`](Self::payload) stays the frame's validated JSON text until it is read
/// (see [`Payload`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskProgress {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// The task this progress belongs to.
    pub task_id: CompactString,
    /// Position in the runner's per-(task, attempt) stream; 0 until stamped.
    pub seq: u64,
    /// Payload discriminator (open string; see [`progress_kind`]).
    pub kind: CompactString,
    /// Attempt echoed from the assign (0 = unset/legacy).
    pub attempt: u64,
    /// Kind-specific body, keys in arrival order; read it as an [`Object`] (it derefs to
    /// one), edit it through [`Payload::to_mut`].
    pub payload: Payload,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl TaskProgress {
    /// A progress frame of `kind` with `payload`.
    pub fn new(
        task_id: impl Into<CompactString>,
        kind: impl Into<CompactString>,
        payload: Object,
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            task_id: task_id.into(),
            seq: 0,
            kind: kind.into(),
            attempt: 0,
            payload: Payload::from(payload),
            extra: Object::new(),
        }
    }

    /// A `usage` progress frame carrying `usage` as `payload.usage`.
    pub fn usage(task_id: impl Into<CompactString>, usage: &UsageSplit) -> Self {
        let mut payload = Object::new();
        payload.insert("usage", usage.to_value());
        Self::new(task_id, progress_kind::USAGE, payload)
    }

    /// `payload.usage` as a typed [`UsageSplit`] (whatever the kind).
    ///
    /// # Errors
    /// The split's violations, located under `payload/usage`.
    pub fn usage_split(&self) -> Result<UsageSplit, SchemaError> {
        UsageSplit::from_payload(&self.payload)
    }
}

/// `task.report`, runner → hub: the attempt's TaskReport.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskReportMessage {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// The task reported on; filled from `report.task_id` when absent on the wire.
    pub task_id: String,
    /// The TaskReport object, keys in arrival order.
    pub report: Object,
    /// Position in the runner's per-(task, attempt) stream; 0 until stamped.
    pub seq: u64,
    /// Attempt echoed from the assign (0 = unset/legacy).
    pub attempt: u64,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl TaskReportMessage {
    /// A report message; `task_id` is taken from `report.task_id`.
    pub fn new(report: Object) -> Self {
        let task_id = report
            .get("task_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Self {
            schema_version: SCHEMA_VERSION,
            task_id,
            report,
            seq: 0,
            attempt: 0,
            extra: Object::new(),
        }
    }

    /// The embedded report as a typed, validated [`TaskReport`].
    ///
    /// # Errors
    /// The TaskReport's violations, located under `report/`.
    pub fn task_report(&self) -> Result<TaskReport, SchemaError> {
        TaskReport::from_object_at(&self.report, "report")
    }
}

/// `task.cancel`, hub → runner: stop at the next automaton boundary.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCancel {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// The task to cancel.
    pub task_id: String,
    /// Why (open string).
    pub reason: String,
    /// Position in the hub's per-task command stream; 0 until stamped.
    pub seq: u64,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl TaskCancel {
    /// A cancel of `task_id` for `reason`.
    pub fn new(task_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            task_id: task_id.into(),
            reason: reason.into(),
            seq: 0,
            extra: Object::new(),
        }
    }
}

/// `ping`, either direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Ping {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// Token the pong echoes.
    pub nonce: Option<Nonce>,
    /// Optional send timestamp.
    pub sent_at: Option<SentAt>,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl Ping {
    /// A ping with an optional nonce.
    pub fn new(nonce: Option<Nonce>) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            nonce,
            sent_at: None,
            extra: Object::new(),
        }
    }
}

/// `pong`, either direction: answers a [`Ping`].
#[derive(Debug, Clone, PartialEq)]
pub struct Pong {
    /// Frame schema version; must be 1 to validate.
    pub schema_version: u64,
    /// The answered ping's nonce.
    pub nonce: Option<Nonce>,
    /// Unknown top-level fields, in arrival order.
    pub extra: Object,
}

impl Pong {
    /// The pong answering `ping` (echoes its nonce).
    pub fn answering(ping: &Ping) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            nonce: ping.nonce.clone(),
            extra: Object::new(),
        }
    }
}

/// The `type` discriminator of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageType {
    /// `hello`
    Hello,
    /// `task.assign`
    TaskAssign,
    /// `task.progress`
    TaskProgress,
    /// `task.report`
    TaskReport,
    /// `task.cancel`
    TaskCancel,
    /// `ping`
    Ping,
    /// `pong`
    Pong,
}

impl MessageType {
    /// All seven types, in the seed's order.
    pub const ALL: [MessageType; 7] = [
        MessageType::Hello,
        MessageType::TaskAssign,
        MessageType::TaskProgress,
        MessageType::TaskReport,
        MessageType::TaskCancel,
        MessageType::Ping,
        MessageType::Pong,
    ];

    /// The wire name, e.g. `task.progress`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Hello => "hello",
            MessageType::TaskAssign => "task.assign",
            MessageType::TaskProgress => "task.progress",
            MessageType::TaskReport => "task.report",
            MessageType::TaskCancel => "task.cancel",
            MessageType::Ping => "ping",
            MessageType::Pong => "pong",
        }
    }

    /// The type named `name` on the wire.
    pub fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The top-level keys this type declares, in encoding order.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            MessageType::Hello => &[
                "schema_version",
                "type",
                "protocol_version",
                "project_id",
                "runner_version",
                "capabilities",
                "resume",
            ],
            MessageType::TaskAssign => &[
                "schema_version",
                "type",
                "task_id",
                "task",
                "role",
                "invocation",
                "seq",
                "attempt",
            ],
            MessageType::TaskProgress => &[
                "schema_version",
                "type",
                "task_id",
                "seq",
                "kind",
                "attempt",
                "payload",
            ],
            MessageType::TaskReport => &[
                "schema_version",
                "type",
                "task_id",
                "report",
                "seq",
                "attempt",
            ],
            MessageType::TaskCancel => &["schema_version", "type", "task_id", "reason", "seq"],
            MessageType::Ping => &["schema_version", "type", "nonce", "sent_at"],
            MessageType::Pong => &["schema_version", "type", "nonce"],
        }
    }

    /// `true` when `key` is one of [`keys`](Self::keys): a field this type declares, which
    /// an unknown field (`extra`) of the same name never overrides.
    pub fn is_declared(self, key: &str) -> bool {
        self.keys().contains(&key)
    }

    /// Append the unknown fields `extra` to `out`, a message of this type as a JSON object
    /// built from its declared fields, in `extra`'s order, skipping every key this type
    /// [declares](Self::is_declared): extra keys never override declared ones. The rule
    /// [`encode`](super::encode) and [`to_object`](super::to_object) apply, for a binding
    /// that builds the object from its own field values.
    pub fn append_extra(self, out: &mut Object, extra: Object) {
        for (k, v) in extra {
            if !self.is_declared(&k) {
                out.insert(k, v);
            }
        }
    }

    /// `true` for the four types that carry a `seq` in a per-task stream.
    pub fn is_sequenced(self) -> bool {
        matches!(
            self,
            MessageType::TaskAssign
                | MessageType::TaskProgress
                | MessageType::TaskReport
                | MessageType::TaskCancel
        )
    }
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Any hub-protocol frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// `hello`
    Hello(Hello),
    /// `task.assign`
    TaskAssign(TaskAssign),
    /// `task.progress`
    TaskProgress(TaskProgress),
    /// `task.report`
    TaskReport(TaskReportMessage),
    /// `task.cancel`
    TaskCancel(TaskCancel),
    /// `ping`
    Ping(Ping),
    /// `pong`
    Pong(Pong),
}

impl Message {
    /// The frame's type.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::Hello(_) => MessageType::Hello,
            Message::TaskAssign(_) => MessageType::TaskAssign,
            Message::TaskProgress(_) => MessageType::TaskProgress,
            Message::TaskReport(_) => MessageType::TaskReport,
            Message::TaskCancel(_) => MessageType::TaskCancel,
            Message::Ping(_) => MessageType::Ping,
            Message::Pong(_) => MessageType::Pong,
        }
    }

    /// The task this frame belongs to, for the four sequenced types.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Message::TaskAssign(m) => Some(&m.task_id),
            Message::TaskProgress(m) => Some(&m.task_id),
            Message::TaskReport(m) => Some(&m.task_id),
            Message::TaskCancel(m) => Some(&m.task_id),
            _ => None,
        }
    }

    /// The stream position, for the four sequenced types (0 = not stamped).
    pub fn seq(&self) -> Option<u64> {
        match self {
            Message::TaskAssign(m) => Some(m.seq),
            Message::TaskProgress(m) => Some(m.seq),
            Message::TaskReport(m) => Some(m.seq),
            Message::TaskCancel(m) => Some(m.seq),
            _ => None,
        }
    }

    /// Stamp `seq`; returns `false` (and does nothing) for unsequenced types.
    pub fn set_seq(&mut self, seq: u64) -> bool {
        match self {
            Message::TaskAssign(m) => m.seq = seq,
            Message::TaskProgress(m) => m.seq = seq,
            Message::TaskReport(m) => m.seq = seq,
            Message::TaskCancel(m) => m.seq = seq,
            _ => return false,
        }
        true
    }

    /// The attempt, for the three types that carry one.
    pub fn attempt(&self) -> Option<u64> {
        match self {
            Message::TaskAssign(m) => Some(m.attempt),
            Message::TaskProgress(m) => Some(m.attempt),
            Message::TaskReport(m) => Some(m.attempt),
            _ => None,
        }
    }

    /// Unknown top-level fields, in arrival order.
    pub fn extra(&self) -> &Object {
        match self {
            Message::Hello(m) => &m.extra,
            Message::TaskAssign(m) => &m.extra,
            Message::TaskProgress(m) => &m.extra,
            Message::TaskReport(m) => &m.extra,
            Message::TaskCancel(m) => &m.extra,
            Message::Ping(m) => &m.extra,
            Message::Pong(m) => &m.extra,
        }
    }

    /// Mutable access to the unknown top-level fields. On encode, a key that collides with
    /// a declared field of the message is skipped (the declared field wins).
    pub fn extra_mut(&mut self) -> &mut Object {
        match self {
            Message::Hello(m) => &mut m.extra,
            Message::TaskAssign(m) => &mut m.extra,
            Message::TaskProgress(m) => &mut m.extra,
            Message::TaskReport(m) => &mut m.extra,
            Message::TaskCancel(m) => &mut m.extra,
            Message::Ping(m) => &mut m.extra,
            Message::Pong(m) => &mut m.extra,
        }
    }
}

macro_rules! impl_from {
    ($($variant:ident($ty:ty)),*) => {$(
        impl From<$ty> for Message {
            fn from(m: $ty) -> Self { Message::$variant(m) }
        }
    )*};
}
impl_from!(
    Hello(Hello),
    TaskAssign(TaskAssign),
    TaskProgress(TaskProgress),
    TaskReport(TaskReportMessage),
    TaskCancel(TaskCancel),
    Ping(Ping),
    Pong(Pong)
);
