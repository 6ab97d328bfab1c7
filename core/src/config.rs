//! One reader for configuration objects, with one policy for every config type of the
//! crate ([`SessionConfig`](crate::session::SessionConfig),
//! [`SequencingConfig`](crate::sequencing::SequencingConfig),
//! [`LocalConfig`](crate::local::LocalConfig),
//! [`ReducerConfig`](crate::reducer::ReducerConfig),
//! [`HostConfig`](crate::host::HostConfig)):
//!
//! * a configuration is a JSON object (else `not_an_object`);
//! * every key is optional: an absent key keeps its documented default;
//! * a key the type does not define is an error (`unknown_key`), the first one in the
//!   object's order;
//! * a value of the wrong JSON type is an error (`wrong_type`);
//! * a number that does not fit the field (negative, or too large) is an error
//!   (`out_of_range`).
//!
//! Every error names the key, dotted for a nested object (`sequencing.max_streams`).
//!
//! ```
//! use stapel_runner_protocol::config::ConfigError;
//! use stapel_runner_protocol::session::SessionConfig;
//!
//! let e = SessionConfig::from_value(&serde_json::json!({"ping_interval": 5})).unwrap_err();
//! assert_eq!((e.code(), e.key()), ("unknown_key", "ping_interval"));
//! let e = SessionConfig::from_value(&serde_json::json!({"sequencing": {"max_streams": "9"}}))
//!     .unwrap_err();
//! assert_eq!(e, ConfigError::WrongType { key: "sequencing.max_streams".into(), expected: "integer" });
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// Why a configuration object was refused. Each variant carries the offending key
/// (dotted when nested; empty for the configuration itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration (or the nested object at `key`) is not a JSON object. Code
    /// `not_an_object`.
    #[error("config{}{key} must be an object", if key.is_empty() { "" } else { "." })]
    NotAnObject {
        /// The key of the nested object (empty: the configuration itself).
        key: String,
    },
    /// A key the configuration type does not define. Code `unknown_key`.
    #[error("unknown config key {key:?}")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A value of the wrong JSON type. Code `wrong_type`.
    #[error("config key {key:?} must be {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// What the key takes (e.g. `integer`, `boolean`, `string`).
        expected: &'static str,
    },
    /// A number outside the range of the field. Code `out_of_range`.
    #[error("config key {key:?} is out of range (expected {expected})")]
    OutOfRange {
        /// The key.
        key: String,
        /// What the key takes (e.g. `non-negative integer`).
        expected: &'static str,
    },
}

impl ConfigError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::NotAnObject { .. } => "not_an_object",
            ConfigError::UnknownKey { .. } => "unknown_key",
            ConfigError::WrongType { .. } => "wrong_type",
            ConfigError::OutOfRange { .. } => "out_of_range",
        }
    }

    /// The offending key (dotted when nested; empty for the configuration itself).
    pub fn key(&self) -> &str {
        match self {
            ConfigError::NotAnObject { key }
            | ConfigError::UnknownKey { key }
            | ConfigError::WrongType { key, .. }
            | ConfigError::OutOfRange { key, .. } => key,
        }
    }
}

/// A configuration object checked against its known keys, read key by key with typed
/// getters. Construction applies the unknown-key policy; the getters the type checks.
#[derive(Debug, Clone)]
pub struct ConfigReader<'a> {
    object: &'a Map<String, Value>,
    prefix: String,
}

impl<'a> ConfigReader<'a> {
    /// Read `value`, which must be an object whose keys are all in `known`.
    ///
    /// # Errors
    /// `not_an_object`, `unknown_key`.
    pub fn new(value: &'a Value, known: &[&str]) -> Result<Self, ConfigError> {
        Self::at(value, known, String::new())
    }

    /// As [`new`](Self::new) for an object already in hand.
    ///
    /// # Errors
    /// `unknown_key`.
    pub fn from_object(
        object: &'a Map<String, Value>,
        known: &[&str],
    ) -> Result<Self, ConfigError> {
        Self::checked(object, known, String::new())
    }

    fn at(value: &'a Value, known: &[&str], prefix: String) -> Result<Self, ConfigError> {
        match value.as_object() {
            Some(object) => Self::checked(object, known, prefix),
            None => Err(ConfigError::NotAnObject {
                key: prefix.strip_suffix('.').unwrap_or_default().to_owned(),
            }),
        }
    }

    fn checked(
        object: &'a Map<String, Value>,
        known: &[&str],
        prefix: String,
    ) -> Result<Self, ConfigError> {
        if let Some(k) = object.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ConfigError::UnknownKey {
                key: format!("{prefix}{k}"),
            });
        }
        Ok(Self { object, prefix })
    }

    /// The full (dotted) name of `key`.
    pub fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.object.get(key)
    }

    /// The nested configuration object at `key`, checked against `known`.
    ///
    /// # Errors
    /// `not_an_object`, `unknown_key` (dotted key).
    pub fn nested(
        &self,
        key: &str,
        known: &[&str],
    ) -> Result<Option<ConfigReader<'a>>, ConfigError> {
        self.get(key)
            .map(|v| Self::at(v, known, format!("{}.", self.path(key))))
            .transpose()
    }

    /// A non-negative integer.
    ///
    /// # Errors
    /// `wrong_type` (not an integer), `out_of_range` (negative).
    pub fn u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v {
            Value::Number(n) if n.is_u64() => Ok(n.as_u64()),
            Value::Number(n) if n.is_i64() => Err(ConfigError::OutOfRange {
                key: self.path(key),
                expected: "non-negative integer",
            }),
            _ => Err(ConfigError::WrongType {
                key: self.path(key),
                expected: "integer",
            }),
        }
    }

    /// A non-negative integer that fits `usize`.
    ///
    /// # Errors
    /// As [`u64`](Self::u64), and `out_of_range` beyond `usize::MAX`.
    pub fn usize(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        self.u64(key)?
            .map(|n| {
                usize::try_from(n).map_err(|_| ConfigError::OutOfRange {
                    key: self.path(key),
                    expected: "integer that fits the platform's size type",
                })
            })
            .transpose()
    }

    /// A boolean.
    ///
    /// # Errors
    /// `wrong_type`.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        self.get(key)
            .map(|v| {
                v.as_bool().ok_or_else(|| ConfigError::WrongType {
                    key: self.path(key),
                    expected: "boolean",
                })
            })
            .transpose()
    }
}

/// Read a serde-described configuration type with the same policy: the known keys are
/// those of `T::default()`'s serialization; each present key is checked on its own (so
/// the error names it), then the whole object is deserialized over the defaults.
///
/// # Errors
/// `not_an_object`, `unknown_key`, `wrong_type`, `out_of_range` (a number the field
/// cannot hold).
pub fn from_serde<T>(value: &Value) -> Result<T, ConfigError>
where
    T: Serialize + DeserializeOwned + Default,
{
    let Some(object) = value.as_object() else {
        return Err(ConfigError::NotAnObject { key: String::new() });
    };
    let defaults = match serde_json::to_value(T::default()) {
        Ok(Value::Object(d)) => d,
        // A type whose default does not serialize to an object: no per-key check.
        _ => Map::new(),
    };
    for (key, v) in object {
        let Some(default) = defaults.get(key) else {
            return Err(ConfigError::UnknownKey { key: key.clone() });
        };
        let mut probe = defaults.clone();
        probe.insert(key.clone(), v.clone());
        if serde_json::from_value::<T>(Value::Object(probe)).is_err() {
            return Err(classify(key, default, v));
        }
    }
    let mut merged = defaults;
    merged.extend(object.iter().map(|(k, v)| (k.clone(), v.clone())));
    serde_json::from_value(Value::Object(merged)).map_err(|_| ConfigError::WrongType {
        key: String::new(),
        expected: "a valid configuration",
    })
}

/// The error for a value `v` of `key` that its field refused; `default` tells the kind.
fn classify(key: &str, default: &Value, v: &Value) -> ConfigError {
    let expected = match default {
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "a valid value",
    };
    let key = key.to_owned();
    match (default, v) {
        (Value::Number(_), Value::Number(n)) if n.is_u64() || n.is_i64() => {
            ConfigError::OutOfRange {
                key,
                expected: "non-negative integer in range",
            }
        }
        _ => ConfigError::WrongType { key, expected },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Default, PartialEq, Serialize, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Demo {
        n: u32,
        name: String,
        opt: Option<String>,
    }

    #[test]
    fn serde_types_follow_the_one_policy() {
        let ok: Demo = from_serde(&json!({"n": 3, "opt": "x"})).unwrap();
        assert_eq!(
            ok,
            Demo {
                n: 3,
                name: String::new(),
                opt: Some("x".into())
            }
        );
        let code = |v| from_serde::<Demo>(&v).map(drop).unwrap_err();
        assert_eq!(
            code(json!([])),
            ConfigError::NotAnObject { key: String::new() }
        );
        assert_eq!(code(json!({"m": 1})).code(), "unknown_key");
        assert_eq!(code(json!({"n": "1"})).code(), "wrong_type");
        assert_eq!(code(json!({"n": -1})).code(), "out_of_range");
        assert_eq!(code(json!({"n": 1u64 << 40})).code(), "out_of_range");
        assert_eq!(code(json!({"opt": 1})).key(), "opt");
    }

    #[test]
    fn reader_checks_keys_types_and_ranges() {
        let v = json!({"a": 1, "b": true, "c": {"d": -2}});
        let r = ConfigReader::new(&v, &["a", "b", "c"]).unwrap();
        assert_eq!(r.u64("a").unwrap(), Some(1));
        assert_eq!(r.bool("b").unwrap(), Some(true));
        assert_eq!(r.u64("zz").unwrap(), None);
        assert_eq!(r.bool("a").unwrap_err().code(), "wrong_type");
        let c = r.nested("c", &["d"]).unwrap().unwrap();
        assert_eq!(
            c.u64("d").unwrap_err(),
            ConfigError::OutOfRange {
                key: "c.d".into(),
                expected: "non-negative integer"
            }
        );
        assert_eq!(r.nested("c", &[]).unwrap_err().key(), "c.d");
        assert_eq!(
            r.nested("a", &[]).unwrap_err(),
            ConfigError::NotAnObject { key: "a".into() }
        );
        assert_eq!(ConfigReader::new(&v, &["a"]).unwrap_err().key(), "b");
    }
}
