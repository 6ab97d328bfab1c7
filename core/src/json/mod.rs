//! The JSON value type of the wire messages' open objects (`payload`, `task`,
//! `invocation`, `report`, `extra`).
//!
//! [`Value`] is shaped like `serde_json::Value`, with two differences that matter on the
//! hub's hot path, where every progress frame carries a small open `payload`:
//!
//! * an [`Object`] is a vector of members in arrival order: no hashing, one allocation per
//!   object, and re-encoding keeps the order the peer sent;
//! * strings and keys are [`CompactString`]s, stored inline up to 24 bytes (most keys and
//!   many values), so a typical frame allocates a handful of times instead of a few dozen.
//!
//! Lookups by key are linear, which is the fast choice for the small objects of this
//! protocol; parsing stays linear for large objects too (duplicate detection switches to
//! hashing past a few members), so a hostile frame cannot make decoding quadratic.
//!
//! Conversions to and from `serde_json::Value` are lossless both ways (`From`), and
//! [`Value`] implements `Serialize` and `Deserialize`; its `Deserialize` rejects duplicate
//! keys at any depth, like the wire decoder.
//!
//! ```
//! use stapel_runner_protocol::json::{Object, Value};
//!
//! let mut usage = Object::new();
//! usage.insert("output", 20_480u64);
//! usage.insert("thinking", 512u64);
//! let mut payload = Object::new();
//! payload.insert("usage", usage);
//! payload.insert("model", "claude-sonnet-4-5");
//! assert_eq!(payload["usage"]["output"].as_u64(), Some(20_480));
//! assert_eq!(payload.keys().collect::<Vec<_>>(), ["usage", "model"]);
//! assert_eq!(
//!     Value::from(payload).to_string(),
//!     r#"{"usage":{"output":20480,"thinking":512},"model":"claude-sonnet-4-5"}"#
//! );
//! ```
//!
//! Literals are easiest written with `serde_json::json!` and converted:
//!
//! ```
//! use stapel_runner_protocol::json::Object;
//! use stapel_runner_protocol::wire::TaskProgress;
//!
//! let payload = Object::try_from(serde_json::json!({"state": "running", "step": 3}));
//! let progress = TaskProgress::new("T-1", "state", payload.expect("an object"));
//! assert_eq!(progress.payload["step"].as_u64(), Some(3));
//! ```

mod object;
mod serde_impl;
mod value;
pub(crate) mod walk;

pub use compact_str::CompactString;
pub(crate) use object::KeySet;
pub use object::{DuplicateKey, IntoIter, Iter, IterMut, Object};
pub use serde_json::Number;
pub use value::Value;
pub use walk::{walk, Sink, WalkError, MAX_DEPTH};

/// Members past which parsing detects duplicate keys with a hash set instead of a scan.
pub(crate) const LINEAR_KEY_SCAN: usize = 16;
