//! `Serialize` / `Deserialize` for [`Value`] and [`Object`]. Deserializing rejects
//! duplicate keys at any depth and never allocates for a key that fits inline.

use std::fmt;

use compact_str::CompactString;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Number;

use super::object::KeySet;
use super::{Object, Value};

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => n.serialize(s),
            Value::String(v) => s.serialize_str(v),
            Value::Array(a) => s.collect_seq(a),
            Value::Object(o) => o.serialize(s),
        }
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Deserializes a key as a [`CompactString`] straight from the parser's borrowed text.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = CompactString;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<CompactString, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = CompactString;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<CompactString, E> {
        Ok(CompactString::new(v))
    }
    fn visit_string<E>(self, v: String) -> Result<CompactString, E> {
        Ok(CompactString::from(v))
    }
}

/// Visits any JSON value.
pub(crate) struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(CompactString::new(v)))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(CompactString::from(v)))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element::<Value>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        visit_object(map).map(Value::Object)
    }
}

/// Collect an object's members, rejecting a repeated key as soon as it is read.
fn visit_object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Object, A::Error> {
    let mut out = Object::with_capacity(map.size_hint().unwrap_or(4).clamp(4, 64));
    let mut keys = KeySet::default();
    while let Some(key) = map.next_key_seed(KeySeed)? {
        if keys.seen_before(out.as_slice(), &key) {
            return Err(de::Error::custom(format_args!(
                "duplicate key {:?}",
                key.as_str()
            )));
        }
        let value = map.next_value::<Value>()?;
        out.push_unchecked(key, value);
    }
    Ok(out)
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Object;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object, A::Error> {
        visit_object(map)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text_in_order() {
        let text = r#"{"z":1,"a":[true,null,"x\u00e9\n"],"m":{"q":1.5,"b":-3,"e":{}},"big":18446744073709551616}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"z":1,"a":[true,null,"xé\n"],"m":{"q":1.5,"b":-3,"e":{}},"big":1.8446744073709552e+19}"#
        );
        let sj: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v, sj);
        assert_eq!(Value::from(sj.clone()), v);
        assert_eq!(serde_json::Value::from(v), sj);
    }

    #[test]
    fn duplicate_keys_rejected_at_any_depth_and_size() {
        assert!(serde_json::from_str::<Value>(r#"{"a":1,"a":2}"#).is_err());
        assert!(serde_json::from_str::<Value>(r#"[{"x":{"b":1,"b":1}}]"#).is_err());
        assert!(serde_json::from_str::<Object>(r#"{"a":1,"b":2}"#).is_ok());
        let many: Vec<String> = (0..500).map(|i| format!("\"k{i}\":{i}")).collect();
        let ok = format!("{{{}}}", many.join(","));
        assert_eq!(serde_json::from_str::<Object>(&ok).unwrap().len(), 500);
        let dup = format!("{{{},\"k250\":0}}", many.join(","));
        let err = serde_json::from_str::<Object>(&dup)
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate key \"k250\""), "{err}");
        // Escaped spellings of the same key are the same key.
        assert!(serde_json::from_str::<Value>(r#"{"a":1,"\u0061":2}"#).is_err());
    }
}
