//! The hub↔runner wire protocol of seed 000: seven messages, their embedded
//! `stapel-taskspecs` artifacts, validation, and a deterministic codec.
//!
//! ```
//! use stapel_runner_protocol::wire::{decode, encode, Hello, Message};
//!
//! let mut hello = Hello::new("brave-falcon-1042", "0.1.0");
//! hello.capabilities = vec!["agent-sdk".into(), "subprocess".into()];
//! let frame = encode(&Message::Hello(hello.clone()));
//! assert_eq!(
//!     frame,
//!     r#"{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"brave-falcon-1042","runner_version":"0.1.0","capabilities":["agent-sdk","subprocess"]}"#
//! );
//! assert_eq!(decode(frame.as_bytes(), true).unwrap(), Message::Hello(hello));
//! ```
//!
//! # Policies
//!
//! * **Forward compatibility.** Unknown top-level fields are kept in `extra` in arrival
//!   order and re-emitted after the declared ones. TaskSpec and TaskReport keep unknown
//!   fields too; UsageSplit is closed.
//! * **Duplicate keys** anywhere in a frame are rejected with `duplicate_key`: peers
//!   disagree on which of two values wins (Python keeps the last, some parsers the first),
//!   and a frame two implementations read differently must not be accepted.
//! * **Integers.** Every integer the protocol defines (`seq`, `attempt`,
//!   `protocol_version`, `resume` values, usage components, iteration counts, integer
//!   nonces) must be an integer literal within ±(2^53 − 1), the range JavaScript and every
//!   other binding language represent exactly; larger values are a `range` violation,
//!   negative ones a `minimum` violation, and `1.0` is not an integer (`type`). Numbers
//!   inside open objects (payload, invocation, unknown fields) are carried as parsed:
//!   64-bit integers exactly, anything larger or fractional as an IEEE double, so their
//!   re-encoding can differ from the input text.
//! * **Fast path.** [`peek_progress`] checks a `task.progress` frame, the hub's firehose,
//!   in one pass without building values and hands back its fields borrowed and its
//!   payload as JSON text (which [`json::walk`](crate::json::walk) can build into any
//!   representation). It accepts only frames [`decode_str`] would accept with every rule
//!   checked, and answers `None` for anything else, so callers fall back to the full
//!   decode, which also produces the error. [`decode_view`] / [`decode_str_view`] make
//!   that choice for a binding: the fast view, or the full message, with the full
//!   decode's errors. The bindings call them to decode without copying the payload into a
//!   value tree first.
//! * **Open strings.** Roles, progress kinds, capabilities and statuses are strings with
//!   constants for common values ([`progress_kind`], [`role`], [`report_status`],
//!   [`capability`]); a closed enum would leak routing policy into the schema.

mod artifacts;
mod as_type;
mod check;
mod codec;
mod error;
mod fast;
mod json;
mod messages;
mod payload;

pub use artifacts::{
    Budget, ControlOutcome, Criterion, TaskReport, TaskSpec, UsageSplit, USAGE_COMPONENTS,
};
pub use as_type::{
    check_as, check_depth, check_message_as, is_sequenced_name, try_encode, SCHEMA_FILES,
};
pub use codec::{
    decode, decode_full, decode_owned, decode_str, encode, encode_into, from_object, from_value,
    to_object,
};
pub use error::{DecodeError, Rule, SchemaError, Violation};
pub use fast::{decode_str_view, decode_view, peek_progress, Decoded, ProgressView, MAX_MEMBERS};
pub use json::parse_value;
pub(crate) use json::type_name;
pub use messages::{
    capability, progress_kind, report_status, role, Hello, Message, MessageType, Nonce, Ping, Pong,
    SentAt, TaskAssign, TaskCancel, TaskProgress, TaskReportMessage,
};
pub use payload::Payload;

/// `schema_version` of every frame.
pub const SCHEMA_VERSION: u64 = 1;

/// The wire protocol major version this crate speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Largest integer the protocol accepts: 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
