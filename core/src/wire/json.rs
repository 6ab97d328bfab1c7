//! Strict JSON parsing: serde_json's parser with duplicate keys rejected at every depth
//! and object key order preserved.

use compact_str::CompactString;
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Number, Value};
use std::fmt;

use crate::json::{KeySet, Value as WireValue};

use super::error::DecodeError;

/// A JSON value parsed with duplicate keys rejected.
pub(crate) struct StrictValue(pub(crate) Value);

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
        Ok(StrictValue(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_none<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
        StrictValue::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(StrictValue(Value::Array(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        // Pre-sized: protocol objects are small, and growing an IndexMap re-inserts.
        let mut out = Map::with_capacity(8);
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(v) = map.next_value()?;
            // One hash per key: the entry both detects a repeat and inserts.
            match out.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(v);
                }
                serde_json::map::Entry::Occupied(slot) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate key {:?}",
                        slot.key()
                    )));
                }
            }
        }
        Ok(StrictValue(Value::Object(out)))
    }
}

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

/// A top-level key: one of the declared field names (borrowed, no allocation) or any
/// other key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    Known(&'static str),
    Other(CompactString),
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// Every key any of the seven messages declares.
const KNOWN_KEYS: [&str; 19] = [
    "schema_version",
    "type",
    "task_id",
    "seq",
    "kind",
    "attempt",
    "payload",
    "task",
    "role",
    "invocation",
    "report",
    "reason",
    "protocol_version",
    "project_id",
    "runner_version",
    "capabilities",
    "resume",
    "nonce",
    "sent_at",
];

impl Key {
    pub(crate) fn known(s: &str) -> Option<&'static str> {
        KNOWN_KEYS.iter().copied().find(|k| *k == s)
    }
    pub(crate) fn from_string(s: impl Into<CompactString> + AsRef<str>) -> Key {
        match Key::known(s.as_ref()) {
            Some(k) => Key::Known(k),
            None => Key::Other(s.into()),
        }
    }
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Known(k) => k,
            Key::Other(s) => s,
        }
    }
    pub(crate) fn into_compact(self) -> CompactString {
        match self {
            Key::Known(k) => CompactString::const_new(k),
            Key::Other(s) => s,
        }
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(match Key::known(v) {
            Some(k) => Key::Known(k),
            None => Key::Other(CompactString::new(v)),
        })
    }
    fn visit_string<E>(self, v: String) -> Result<Key, E> {
        Ok(Key::from_string(v))
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

/// The top level of a frame: the object's members in arrival order, or the JSON type
/// found instead of an object.
pub(crate) enum TopLevel {
    Object(Vec<(Key, WireValue)>),
    Other(&'static str),
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = TopLevel;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_bool<E>(self, _: bool) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("string"))
    }
    fn visit_unit<E>(self) -> Result<TopLevel, E> {
        Ok(TopLevel::Other("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TopLevel, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(TopLevel::Other("array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut out: Vec<(Key, WireValue)> = Vec::with_capacity(8);
        let mut keys = KeySet::default();
        while let Some(key) = map.next_key::<Key>()? {
            if keys.seen_before(&out, key.as_str()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {:?}",
                    key.as_str()
                )));
            }
            let v: WireValue = map.next_value()?;
            out.push((key, v));
        }
        Ok(TopLevel::Object(out))
    }
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct Seed;
impl<'de> DeserializeSeed<'de> for Seed {
    type Value = TopLevel;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<TopLevel, D::Error> {
        TopLevel::deserialize(d)
    }
}

fn map_err(e: serde_json::Error) -> DecodeError {
    // serde_json stops at 128 levels, beyond `json::MAX_DEPTH` too: the same error as
    // every other too-deep refusal. serde_json names this error only in its text.
    if e.is_syntax() && e.to_string().starts_with("recursion limit exceeded") {
        return DecodeError::too_deep();
    }
    match e.classify() {
        // The only data errors our visitors raise are duplicate keys.
        serde_json::error::Category::Data => DecodeError::DuplicateKey {
            message: e.to_string(),
        },
        _ => DecodeError::NotJson {
            message: e.to_string(),
        },
    }
}

/// Check UTF-8 once for the whole frame (much cheaper than string by string), then parse
/// from the `&str`.
fn as_text(bytes: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| DecodeError::NotJson {
        message: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
    })
}

/// Parse one complete JSON document (trailing whitespace allowed, nothing else).
pub(crate) fn parse_top(bytes: &[u8]) -> Result<TopLevel, DecodeError> {
    parse_top_str(as_text(bytes)?)
}

/// [`parse_top`] for text already known to be UTF-8.
pub(crate) fn parse_top_str(text: &str) -> Result<TopLevel, DecodeError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = Seed.deserialize(&mut de).map_err(map_err)?;
    de.end().map_err(map_err)?;
    Ok(top)
}

/// Parse any JSON document strictly: duplicate keys at any depth are rejected, object key
/// order is preserved.
///
/// # Errors
/// [`DecodeError::NotJson`] or [`DecodeError::DuplicateKey`].
pub fn parse_value(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut de = serde_json::Deserializer::from_str(as_text(bytes)?);
    let StrictValue(v) = StrictValue::deserialize(&mut de).map_err(map_err)?;
    de.end().map_err(map_err)?;
    Ok(v)
}

/// Name of a JSON value's type, as used in messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
