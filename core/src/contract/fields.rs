//! A strict reader over one JSON object: unknown fields rejected, typed field access with
//! errors that name the model and the field path.

use serde_json::{Map, Value};

use super::error::ContractError;
use super::safety::{concat, find_sensitive, join};
use crate::wire::MAX_SAFE_INTEGER;

pub(crate) use crate::wire::type_name;

/// One object being read as a contract model.
pub(crate) struct Obj<'a> {
    pub(crate) model: &'static str,
    prefix: String,
    pub(crate) map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// Open `value` as model `model` whose declared fields are `declared`. The first
    /// undeclared field in arrival order is an [`ContractError::UnknownField`].
    pub(crate) fn open(
        model: &'static str,
        prefix: &str,
        value: &'a Value,
        declared: &[&str],
    ) -> Result<Self, ContractError> {
        let Value::Object(map) = value else {
            return Err(ContractError::NotObject {
                model,
                field: prefix.to_owned(),
                found: type_name(value).to_owned(),
            });
        };
        if let Some(k) = map.keys().find(|k| !declared.contains(&k.as_str())) {
            return Err(ContractError::UnknownField {
                model,
                field: join(prefix, k),
            });
        }
        Ok(Self {
            model,
            prefix: prefix.to_owned(),
            map,
        })
    }

    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.prefix, key)
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> ContractError {
        self.invalid_at(self.path(key), reason)
    }

    fn invalid_at(&self, field: String, reason: impl Into<String>) -> ContractError {
        ContractError::InvalidField {
            model: self.model,
            field,
            reason: reason.into(),
        }
    }

    /// The value of `key`, `None` when absent or `null`.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn required(&self, key: &str) -> Result<&'a Value, ContractError> {
        self.get(key).ok_or_else(|| ContractError::MissingField {
            model: self.model,
            field: self.path(key),
        })
    }

    /// `v` as a non-empty string; errors are reported at the full path `field`.
    fn string_of(&self, field: String, v: &Value) -> Result<String, ContractError> {
        match v {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            Value::String(_) => Err(self.invalid_at(field, "must not be empty")),
            other => Err(self.invalid_at(
                field,
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    /// A required non-empty string.
    pub(crate) fn req_str(&self, key: &str) -> Result<String, ContractError> {
        let v = self.required(key)?;
        self.string_of(self.path(key), v)
    }

    /// An optional non-empty string (`null` = absent).
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<String>, ContractError> {
        self.get(key)
            .map(|v| self.string_of(self.path(key), v))
            .transpose()
    }

    /// An optional string that may be empty (`null` = absent).
    pub(crate) fn opt_text(&self, key: &str) -> Result<Option<String>, ContractError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.invalid(
                key,
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    /// An optional list of non-empty strings (absent or `null` = `None`).
    pub(crate) fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>, ContractError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let Value::Array(items) = v else {
            return Err(self.invalid(key, format!("expected an array, found {}", type_name(v))));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.string_of(join(&self.path(key), &i.to_string()), item))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A list of non-empty strings; absent or `null` = empty.
    pub(crate) fn str_list(&self, key: &str) -> Result<Vec<String>, ContractError> {
        Ok(self.opt_str_list(key)?.unwrap_or_default())
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, ContractError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.invalid(
                key,
                format!("expected a boolean, found {}", type_name(other)),
            )),
        }
    }

    pub(crate) fn req_bool(&self, key: &str) -> Result<bool, ContractError> {
        self.required(key)?;
        Ok(self.opt_bool(key)?.unwrap_or_default())
    }

    /// A key that must be present, though its value may be `null`.
    pub(crate) fn present(&self, key: &str) -> Result<(), ContractError> {
        if self.map.contains_key(key) {
            Ok(())
        } else {
            Err(ContractError::MissingField {
                model: self.model,
                field: self.path(key),
            })
        }
    }

    /// A required integer in 0..=2^53−1.
    pub(crate) fn req_u64(&self, key: &str) -> Result<u64, ContractError> {
        self.required(key)?;
        Ok(self.opt_u64(key)?.unwrap_or_default())
    }

    /// An optional string that must be one of `allowed` (`null` = absent).
    pub(crate) fn opt_enum(
        &self,
        key: &str,
        allowed: &[&'static str],
    ) -> Result<Option<&'static str>, ContractError> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(v) => allowed
                .iter()
                .find(|a| **a == v)
                .copied()
                .map(Some)
                .ok_or_else(|| {
                    self.invalid(key, format!("unknown value {v:?} (one of {allowed:?})"))
                }),
        }
    }

    /// An optional integer in 0..=2^53−1.
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, ContractError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(u) if u <= MAX_SAFE_INTEGER => Ok(Some(u)),
                _ => Err(self.invalid(key, "expected an integer in 0..=2^53-1")),
            },
            Some(other) => Err(self.invalid(
                key,
                format!("expected an integer, found {}", type_name(other)),
            )),
        }
    }

    /// An optional JSON object (absent or `null` = empty).
    pub(crate) fn object(&self, key: &str) -> Result<Map<String, Value>, ContractError> {
        match self.get(key) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(other) => Err(self.invalid(
                key,
                format!("expected an object, found {}", type_name(other)),
            )),
        }
    }

    /// A declared, open `metadata` object that must carry no sensitive value.
    pub(crate) fn metadata(&self, key: &str) -> Result<Map<String, Value>, ContractError> {
        let m = self.object(key)?;
        if let Some(p) = find_sensitive(&Value::Object(m.clone())) {
            return Err(ContractError::SensitiveMetadata {
                model: self.model,
                field: concat(&self.path(key), &p),
            });
        }
        Ok(m)
    }

    /// A string → string map (absent or `null` = empty).
    pub(crate) fn string_map(&self, key: &str) -> Result<Map<String, Value>, ContractError> {
        let m = self.object(key)?;
        if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
            return Err(ContractError::InvalidField {
                model: self.model,
                field: join(&self.path(key), k),
                reason: format!("expected a string, found {}", type_name(v)),
            });
        }
        Ok(m)
    }

    /// Parse a nested model at `key`.
    pub(crate) fn nested<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&Value, &str) -> Result<T, ContractError>,
    ) -> Result<T, ContractError> {
        let v = self.required(key)?;
        parse(v, &self.path(key))
    }
}
