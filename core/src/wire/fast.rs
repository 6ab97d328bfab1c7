//! A validating fast path for the firehose frame, `task.progress`.
//!
//! [`peek_progress`] checks a frame in one pass without building any value: the fixed
//! fields are borrowed from the frame and the payload is returned as its JSON text. It
//! accepts a frame only when [`decode_str`](super::decode_str) with `validate = true`
//! would accept it *and* the frame is in the plain form (no unknown top-level fields, no
//! escapes in keys or in the borrowed strings, at most [`MAX_MEMBERS`] members per
//! payload object); for every other frame it answers `None` and the caller takes the full
//! path, which also produces the error. It is an accelerator, never a second set of
//! rules: `core/tests/fast_props.rs` checks it against `decode_str` on random frames.

use serde::de::{self, DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

use super::artifacts::USAGE_COMPONENTS;
use super::messages::progress_kind;
use super::{MAX_SAFE_INTEGER, SCHEMA_VERSION};

/// Most members an object inside a payload may have for the fast path (duplicate keys are
/// found by comparing against every earlier key).
pub const MAX_MEMBERS: usize = 32;

/// The fields of a valid `task.progress` frame, borrowed from it (see [`peek_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressView<'a> {
    /// `task_id`, non-empty.
    pub task_id: &'a str,
    /// `seq`.
    pub seq: u64,
    /// `attempt` (0 when absent).
    pub attempt: u64,
    /// `kind`.
    pub kind: &'a str,
    /// The payload object's JSON text, exactly as in the frame: well-formed, without
    /// duplicate keys at any depth, and for kind `usage` with a valid `usage` split.
    pub payload: &'a str,
}

/// Check `frame` as a `task.progress` frame in one pass (see the module docs): `Some`
/// when it is valid and in the plain form, `None` when the full
/// [`decode_str`](super::decode_str) must decide.
///
/// ```
/// use stapel_runner_protocol::wire::peek_progress;
///
/// let frame = r#"{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"state","payload":{"state":"running"}}"#;
/// let view = peek_progress(frame).unwrap();
/// assert_eq!((view.task_id, view.seq, view.kind), ("T-1", 3, "state"));
/// assert_eq!(view.payload, r#"{"state":"running"}"#);
/// assert!(peek_progress(r#"{"type":"task.progress"}"#).is_none()); // invalid: full path
/// ```
pub fn peek_progress(frame: &str) -> Option<ProgressView<'_>> {
    let mut de = serde_json::Deserializer::from_str(frame);
    let view = de.deserialize_map(Top).ok()?;
    de.end().ok()?;
    Some(view)
}

/// A string borrowed from the frame (one with escapes is refused).
struct Borrowed<'a>(&'a str);

impl<'de: 'a, 'a> de::Deserialize<'de> for Borrowed<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = &'de str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string without escapes")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<&'de str, E> {
                Ok(v)
            }
        }
        d.deserialize_str(V).map(Borrowed)
    }
}

/// An integer literal in `0..=2^53 - 1`.
struct SafeUint(u64);

impl<'de> de::Deserialize<'de> for SafeUint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = u64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer in 0..=2^53-1")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
                if v <= MAX_SAFE_INTEGER {
                    Ok(v)
                } else {
                    Err(E::custom("out of range"))
                }
            }
        }
        d.deserialize_u64(V).map(SafeUint)
    }
}

struct Top;

const TYPE: u8 = 1;
const SCHEMA: u8 = 2;
const TASK_ID: u8 = 4;
const SEQ: u8 = 8;
const KIND: u8 = 16;
const ATTEMPT: u8 = 32;
const PAYLOAD: u8 = 64;
const REQUIRED: u8 = TYPE | SCHEMA | TASK_ID | SEQ | KIND | PAYLOAD;

impl<'de> Visitor<'de> for Top {
    type Value = ProgressView<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a task.progress frame")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = 0u8;
        let mut view = ProgressView {
            task_id: "",
            seq: 0,
            attempt: 0,
            kind: "",
            payload: "",
        };
        let mut usage_ok = false;
        while let Some(Borrowed(key)) = map.next_key()? {
            let bit = match key {
                "type" => TYPE,
                "schema_version" => SCHEMA,
                "task_id" => TASK_ID,
                "seq" => SEQ,
                "kind" => KIND,
                "attempt" => ATTEMPT,
                "payload" => PAYLOAD,
                _ => return Err(A::Error::custom("unknown field")),
            };
            if seen & bit != 0 {
                return Err(A::Error::custom("duplicate key"));
            }
            seen |= bit;
            match bit {
                TYPE => {
                    if map.next_value::<Borrowed<'de>>()?.0 != "task.progress" {
                        return Err(A::Error::custom("not task.progress"));
                    }
                }
                SCHEMA => {
                    if map.next_value::<SafeUint>()?.0 != SCHEMA_VERSION {
                        return Err(A::Error::custom("schema_version"));
                    }
                }
                TASK_ID => {
                    view.task_id = map.next_value::<Borrowed<'de>>()?.0;
                    if view.task_id.is_empty() {
                        return Err(A::Error::custom("empty task_id"));
                    }
                }
                SEQ => view.seq = map.next_value::<SafeUint>()?.0,
                ATTEMPT => view.attempt = map.next_value::<SafeUint>()?.0,
                KIND => view.kind = map.next_value::<Borrowed<'de>>()?.0,
                _ => {
                    let raw: &'de RawValue = map.next_value()?;
                    view.payload = raw.get();
                    let mut de = serde_json::Deserializer::from_str(view.payload);
                    usage_ok = de.deserialize_map(Payload).map_err(A::Error::custom)?;
                }
            }
        }
        if seen & REQUIRED != REQUIRED {
            return Err(A::Error::custom("missing field"));
        }
        if view.kind == progress_kind::USAGE && !usage_ok {
            return Err(A::Error::custom("usage payload without a valid split"));
        }
        Ok(view)
    }
}

/// Keys of one object, for duplicate detection.
struct Keys<'a> {
    keys: [&'a str; MAX_MEMBERS],
    len: usize,
}

impl<'a> Keys<'a> {
    fn new() -> Self {
        Keys {
            keys: [""; MAX_MEMBERS],
            len: 0,
        }
    }
    fn add<E: de::Error>(&mut self, key: &'a str) -> Result<(), E> {
        if self.len == MAX_MEMBERS || self.keys[..self.len].contains(&key) {
            return Err(E::custom("duplicate key or too many members"));
        }
        self.keys[self.len] = key;
        self.len += 1;
        Ok(())
    }
}

/// The payload object; its value is whether it holds a valid `usage` split.
struct Payload;

impl<'de> Visitor<'de> for Payload {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut keys = Keys::new();
        let mut usage_ok = false;
        while let Some(Borrowed(key)) = map.next_key()? {
            keys.add(key)?;
            if key == "usage" {
                map.next_value_seed(Usage)?;
                usage_ok = true;
            } else {
                map.next_value_seed(Any)?;
            }
        }
        Ok(usage_ok)
    }
}

/// A valid UsageSplit: exactly the five components, each a safe non-negative integer.
struct Usage;

impl<'de> DeserializeSeed<'de> for Usage {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Usage {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a usage split")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u8;
        while let Some(Borrowed(key)) = map.next_key()? {
            let i = USAGE_COMPONENTS
                .iter()
                .position(|c| *c == key)
                .ok_or_else(|| A::Error::custom("unknown usage component"))?;
            if seen & (1 << i) != 0 {
                return Err(A::Error::custom("duplicate key"));
            }
            seen |= 1 << i;
            map.next_value::<SafeUint>()?;
        }
        if seen != (1 << USAGE_COMPONENTS.len()) - 1 {
            return Err(A::Error::custom("missing usage component"));
        }
        Ok(())
    }
}

/// Any JSON value, checked for duplicate keys at every depth.
struct Any;

impl<'de> DeserializeSeed<'de> for Any {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Any {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Any)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::new();
        while let Some(Borrowed(key)) = map.next_key()? {
            keys.add(key)?;
            map.next_value_seed(Any)?;
        }
        Ok(())
    }
}
