//! Sequencing: per-stream seqs, duplicate suppression, resume and replay (seed 000,
//! "Idempotency and resume"), bounded and persistable.
//!
//! ```
//! use stapel_runner_protocol::sequencing::{ConnectionState, Role};
//! use stapel_runner_protocol::wire::{Message, TaskCancel};
//!
//! let mut hub = ConnectionState::new(Role::Hub);
//! let mut runner = ConnectionState::new(Role::Runner);
//! let c1 = hub.emit(TaskCancel::new("T-1", "a").into()).unwrap(); // seq 1
//! let c2 = hub.emit(TaskCancel::new("T-1", "b").into()).unwrap(); // seq 2
//! assert_eq!((c1.seq(), c2.seq()), (Some(1), Some(2)));
//! assert!(runner.receive(&c1).unwrap().is_new()); // 2 is lost in flight
//!
//! let resume = runner.resume_map(); // goes into hello.resume
//! assert_eq!(resume.get("T-1"), Some(&1));
//! let replay = hub.replay_for(&resume); // the hub re-sends the tail
//! assert_eq!(replay.messages()["T-1"], vec![c2]);
//! ```
//!
//! # Streams
//!
//! * **hub → runner** commands (`task.assign`, `task.cancel`) form one stream per
//!   `task_id`; its seq continues across attempts, and `hello.resume` is keyed by task id.
//! * **runner → hub** `task.progress` and `task.report` form one stream per
//!   `(task_id, attempt)`: a new attempt starts again at seq 1 and is never mistaken for
//!   duplicates of the previous attempt.
//!
//! Each stream starts at seq 1. Only those four types are sequenced; passing anything
//! else, or a message with an empty `task_id`, is a local protocol-state error.
//!
//! # Bounds ([`SequencingConfig`])
//!
//! * inbound: per stream a contiguous watermark plus at most `inbound_window` seqs
//!   recorded above it; a seq beyond `watermark + inbound_window` is refused with
//!   `beyond_window` and nothing is recorded;
//! * outbound: the frames kept for replay are bounded per connection by
//!   `max_outbox_frames` and `max_outbox_bytes`; frames at or below the peer's
//!   acknowledged position are dropped ([`ConnectionState::ack`],
//!   [`ConnectionState::replay_for`]); when full, [`ConnectionState::emit`] fails with
//!   `backpressure` and hands the message back untouched;
//! * a peer whose declared position is older than the kept log gets an explicit
//!   [`Resync`] naming the missing seqs — never a silent partial replay;
//! * at most `max_streams` streams per direction, then `too_many_streams`;
//! * at most `max_tombstones` forgotten tasks remembered (oldest evicted first).
//!
//! # Persistence
//!
//! [`ConnectionState::snapshot`] serialises the whole state to versioned bytes and
//! [`ConnectionState::restore`] reads them back into an equal state (format documented
//! on [`snapshot`](ConnectionState::snapshot)).

mod error;
mod inbox;
mod outbox;
pub(crate) mod snapshot;
mod state;

pub use error::{EmitError, SequencingError, SnapshotError};
pub use inbox::{Arrival, InboxError, InboxTracker};
pub use outbox::{KeptFrame, OutboxLog};
pub use snapshot::SNAPSHOT_MAGIC;
pub use state::{ConnectionState, Replay, Resync, StreamReplay, TaskChannel};

use serde_json::{json, Map, Value};

use crate::wire::MessageType;

/// Default out-of-order window per inbound stream, in seqs.
pub const DEFAULT_INBOUND_WINDOW: u64 = 1024;
/// Largest accepted out-of-order window (larger configured values are clamped): the
/// window costs one bit per seq per stream while frames are ahead (8 KiB at this bound).
pub const MAX_INBOUND_WINDOW: u64 = 65_536;
/// Default bound on frames kept for replay per connection.
pub const DEFAULT_MAX_OUTBOX_FRAMES: usize = 4096;
/// Default bound on bytes kept for replay per connection (16 MiB).
pub const DEFAULT_MAX_OUTBOX_BYTES: usize = 16 * 1024 * 1024;
/// Default bound on streams per direction.
pub const DEFAULT_MAX_STREAMS: usize = 10_000;
/// Default bound on tombstones of forgotten tasks.
pub const DEFAULT_MAX_TOMBSTONES: usize = 10_000;

/// `true` for the four types that carry a `seq` in a per-task stream (the seed's
/// `is_sequenced`).
pub fn is_sequenced(message_type: MessageType) -> bool {
    message_type.is_sequenced()
}

/// Which end of the connection a [`ConnectionState`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The orchestrator: sends commands, receives progress.
    Hub,
    /// The in-container runner: sends progress and reports, receives commands.
    Runner,
}

impl Role {
    /// `hub` or `runner`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Hub => "hub",
            Role::Runner => "runner",
        }
    }

    /// The role named `name` (`hub` / `runner`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "hub" => Some(Role::Hub),
            "runner" => Some(Role::Runner),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bounds of a [`ConnectionState`]. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SequencingConfig {
    /// Out-of-order window per inbound stream: a seq above `watermark + inbound_window` is
    /// refused (`beyond_window`). Default [`DEFAULT_INBOUND_WINDOW`] (1024); values are
    /// clamped to `1..=`[`MAX_INBOUND_WINDOW`].
    pub inbound_window: u64,
    /// Most frames kept for replay per connection, over all outbound streams. Default
    /// [`DEFAULT_MAX_OUTBOX_FRAMES`] (4096).
    pub max_outbox_frames: usize,
    /// Most encoded bytes kept for replay per connection. Default
    /// [`DEFAULT_MAX_OUTBOX_BYTES`] (16 MiB).
    pub max_outbox_bytes: usize,
    /// Most streams per direction (outbound and inbound are counted separately). Default
    /// [`DEFAULT_MAX_STREAMS`] (10,000).
    pub max_streams: usize,
    /// Most tombstones of forgotten tasks
    /// ([`ConnectionState::forget_task`]); the oldest is evicted beyond it (0 keeps
    /// none). Default [`DEFAULT_MAX_TOMBSTONES`] (10,000).
    pub max_tombstones: usize,
}

impl Default for SequencingConfig {
    fn default() -> Self {
        Self {
            inbound_window: DEFAULT_INBOUND_WINDOW,
            max_outbox_frames: DEFAULT_MAX_OUTBOX_FRAMES,
            max_outbox_bytes: DEFAULT_MAX_OUTBOX_BYTES,
            max_streams: DEFAULT_MAX_STREAMS,
            max_tombstones: DEFAULT_MAX_TOMBSTONES,
        }
    }
}

impl SequencingConfig {
    /// The configuration as a JSON object with the field names above.
    pub fn to_value(&self) -> Value {
        json!({
            "inbound_window": self.inbound_window,
            "max_outbox_frames": self.max_outbox_frames,
            "max_outbox_bytes": self.max_outbox_bytes,
            "max_streams": self.max_streams,
            "max_tombstones": self.max_tombstones,
        })
    }

    /// The keys of the JSON form.
    pub const KEYS: [&'static str; 5] = [
        "inbound_window",
        "max_outbox_frames",
        "max_outbox_bytes",
        "max_streams",
        "max_tombstones",
    ];

    /// Defaults overridden by the keys present in `value`, read by the crate's one
    /// config reader ([`crate::config`]: unknown keys, wrong types and out-of-range
    /// numbers are errors naming the key).
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError).
    pub fn from_value(value: &Value) -> Result<Self, crate::config::ConfigError> {
        Self::read(&crate::config::ConfigReader::new(value, &Self::KEYS)?)
    }

    /// [`from_value`](Self::from_value) for an object already in hand.
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError).
    pub fn from_object(object: &Map<String, Value>) -> Result<Self, crate::config::ConfigError> {
        Self::read(&crate::config::ConfigReader::from_object(
            object,
            &Self::KEYS,
        )?)
    }

    /// Read the keys of a checked config object (also used for the nested `sequencing`
    /// object of a session config).
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError).
    pub fn read(r: &crate::config::ConfigReader<'_>) -> Result<Self, crate::config::ConfigError> {
        let d = Self::default();
        Ok(Self {
            inbound_window: r.u64("inbound_window")?.unwrap_or(d.inbound_window),
            max_outbox_frames: r.usize("max_outbox_frames")?.unwrap_or(d.max_outbox_frames),
            max_outbox_bytes: r.usize("max_outbox_bytes")?.unwrap_or(d.max_outbox_bytes),
            max_streams: r.usize("max_streams")?.unwrap_or(d.max_streams),
            max_tombstones: r.usize("max_tombstones")?.unwrap_or(d.max_tombstones),
        })
    }
}

/// A position in one stream: used for acknowledgements, for "first seq I can still
/// send" declarations, and for per-stream resume declarations.
///
/// JSON form (wire extension fields `ack` and `replay_from`):
/// `{"task_id": "T-1", "attempt": 2, "seq": 7}`; `attempt` is omitted for hub→runner
/// command streams.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Position {
    /// The stream's task.
    pub task_id: String,
    /// The stream's attempt; `None` for hub→runner command streams.
    pub attempt: Option<u64>,
    /// The seq.
    pub seq: u64,
}

impl Position {
    /// A position.
    pub fn new(task_id: impl Into<String>, attempt: Option<u64>, seq: u64) -> Self {
        Self {
            task_id: task_id.into(),
            attempt,
            seq,
        }
    }

    /// The JSON form.
    pub fn to_value(&self) -> crate::json::Value {
        let mut m = crate::json::Object::new();
        m.insert("task_id", self.task_id.as_str());
        if let Some(a) = self.attempt {
            m.insert("attempt", a);
        }
        m.insert("seq", self.seq);
        crate::json::Value::Object(m)
    }

    /// Parse the JSON form.
    ///
    /// # Errors
    /// A message naming the offending field.
    pub fn from_value(value: &crate::json::Value) -> Result<Self, String> {
        let o = value.as_object().ok_or("position must be an object")?;
        let task_id = o
            .get("task_id")
            .and_then(crate::json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("position.task_id must be a non-empty string")?;
        let attempt = match o.get("attempt") {
            None | Some(crate::json::Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| *n <= crate::wire::MAX_SAFE_INTEGER)
                    .ok_or("position.attempt must be a non-negative integer")?,
            ),
        };
        let seq = o
            .get("seq")
            .and_then(crate::json::Value::as_u64)
            .filter(|n| *n <= crate::wire::MAX_SAFE_INTEGER)
            .ok_or("position.seq must be a non-negative integer")?;
        Ok(Self::new(task_id, attempt, seq))
    }

    /// Parse a JSON array of positions.
    ///
    /// # Errors
    /// A message naming the offending entry.
    pub fn list_from_value(value: &crate::json::Value) -> Result<Vec<Self>, String> {
        let items = value.as_array().ok_or("positions must be an array")?;
        items
            .iter()
            .enumerate()
            .map(|(i, v)| Self::from_value(v).map_err(|e| format!("entry {i}: {e}")))
            .collect()
    }

    /// A JSON array of positions.
    pub fn list_to_value(list: &[Position]) -> crate::json::Value {
        crate::json::Value::Array(list.iter().map(Position::to_value).collect())
    }
}
