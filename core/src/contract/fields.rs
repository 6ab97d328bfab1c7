//! The contract models' strict reader over one JSON object: unknown fields rejected,
//! `null` read as absent, typed field access from [`crate::fields`] with its neutral errors
//! mapped into [`ContractError`]s that name the model and the field path.

use serde_json::{Map, Value};

use super::error::ContractError;
use super::safety::find_sensitive;
use crate::fields::{self as f, concat, join, Expected, FieldError, Problem};
use crate::wire::{UsageSplit, MAX_SAFE_INTEGER};

pub(crate) use crate::fields::type_name;

/// One object being read as a contract model.
pub(crate) struct Obj<'a> {
    pub(crate) model: &'static str,
    prefix: String,
    map: &'a Map<String, Value>,
}

/// Map a neutral field error of model `model`, whose path is relative to `prefix`.
pub(crate) fn contract_error(
    model: &'static str,
    prefix: &str,
    e: &FieldError<'_>,
) -> ContractError {
    let field = concat(prefix, &e.path);
    let reason = match e.problem {
        Problem::Missing => return ContractError::MissingField { model, field },
        Problem::UnknownField => return ContractError::UnknownField { model, field },
        Problem::WrongType(Expected::Object) if e.path.is_empty() => {
            return ContractError::NotObject {
                model,
                field,
                found: e.found_type().to_owned(),
            }
        }
        Problem::WrongType(expected) => e.expected_found(expected),
        Problem::OutOfRange => "expected an integer in 0..=2^53-1".to_owned(),
        Problem::Empty => "must not be empty".to_owned(),
    };
    ContractError::InvalidField {
        model,
        field,
        reason,
    }
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
        let map = f::object(value)
            .and_then(|map| f::reject_unknown(map, declared).map(|()| map))
            .map_err(|e| contract_error(model, prefix, &e))?;
        Ok(Self {
            model,
            prefix: prefix.to_owned(),
            map,
        })
    }

    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.prefix, key)
    }

    fn err(&self, e: &FieldError<'_>) -> ContractError {
        contract_error(self.model, &self.prefix, e)
    }

    fn invalid(&self, key: &str, reason: String) -> ContractError {
        ContractError::InvalidField {
            model: self.model,
            field: self.path(key),
            reason,
        }
    }

    /// The value of `key`, `None` when absent or `null`.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        f::get_set(self.map, key)
    }

    pub(crate) fn required(&self, key: &str) -> Result<&'a Value, ContractError> {
        f::required(self.get(key), key).map_err(|e| self.err(&e))
    }

    /// An optional value of `key` read by `read` (`null` = absent).
    fn opt<T>(
        &self,
        key: &str,
        read: impl FnOnce(&'a Value, &str) -> Result<T, FieldError<'a>>,
    ) -> Result<Option<T>, ContractError> {
        self.get(key)
            .map(|v| read(v, key))
            .transpose()
            .map_err(|e| self.err(&e))
    }

    /// A required value of `key` read by `read`.
    fn req<T>(
        &self,
        key: &str,
        read: impl FnOnce(&'a Value, &str) -> Result<T, FieldError<'a>>,
    ) -> Result<T, ContractError> {
        f::required(self.get(key), key)
            .and_then(|v| read(v, key))
            .map_err(|e| self.err(&e))
    }

    /// A required non-empty string.
    pub(crate) fn req_str(&self, key: &str) -> Result<String, ContractError> {
        self.req(key, f::nonempty_string).map(str::to_owned)
    }

    /// An optional non-empty string (`null` = absent).
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<String>, ContractError> {
        Ok(self.opt(key, f::nonempty_string)?.map(str::to_owned))
    }

    /// An optional string that may be empty (`null` = absent).
    pub(crate) fn opt_text(&self, key: &str) -> Result<Option<String>, ContractError> {
        Ok(self.opt(key, f::string)?.map(str::to_owned))
    }

    /// An optional list of non-empty strings (absent or `null` = `None`).
    pub(crate) fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>, ContractError> {
        self.opt(key, |v, path| {
            f::each(f::array(v, path)?, path, |item, at| {
                f::nonempty_string(item, at).map(str::to_owned)
            })
        })
    }

    /// A list of non-empty strings; absent or `null` = empty.
    pub(crate) fn str_list(&self, key: &str) -> Result<Vec<String>, ContractError> {
        Ok(self.opt_str_list(key)?.unwrap_or_default())
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, ContractError> {
        self.opt(key, f::boolean)
    }

    pub(crate) fn req_bool(&self, key: &str) -> Result<bool, ContractError> {
        self.req(key, f::boolean)
    }

    /// A key that must be present, though its value may be `null`.
    pub(crate) fn present(&self, key: &str) -> Result<(), ContractError> {
        f::required(f::get(self.map, key), key)
            .map(|_| ())
            .map_err(|e| self.err(&e))
    }

    /// A required integer in 0..=2^53−1.
    pub(crate) fn req_u64(&self, key: &str) -> Result<u64, ContractError> {
        self.req(key, |v, path| f::uint(v, path, MAX_SAFE_INTEGER))
    }

    /// An optional string that must be one of `allowed` (`null` = absent).
    pub(crate) fn opt_enum(
        &self,
        key: &str,
        allowed: &[&'static str],
    ) -> Result<Option<&'static str>, ContractError> {
        match self.opt(key, f::nonempty_string)? {
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
        self.opt(key, |v, path| f::uint(v, path, MAX_SAFE_INTEGER))
    }

    /// An optional JSON object (absent or `null` = empty).
    pub(crate) fn object(&self, key: &str) -> Result<Map<String, Value>, ContractError> {
        Ok(self.opt(key, f::object_at)?.cloned().unwrap_or_default())
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
        string_values(&m).map_err(|e| contract_error(self.model, &self.path(key), &e))?;
        Ok(m)
    }

    /// An optional [`UsageSplit`] (`null` = absent); a bad split is an
    /// [`ContractError::InvalidField`] whose reason is the split's own error.
    pub(crate) fn opt_usage_split(&self, key: &str) -> Result<Option<UsageSplit>, ContractError> {
        self.get(key)
            .map(|v| {
                UsageSplit::from_value(&crate::json::Value::from(v))
                    .map_err(|e| self.invalid(key, e.to_string()))
            })
            .transpose()
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

    /// An optional list (absent or `null` = empty) whose items are nested models.
    pub(crate) fn list<T>(
        &self,
        key: &str,
        parse: impl FnMut(&Value, &str) -> Result<T, ContractError>,
    ) -> Result<Vec<T>, ContractError> {
        match self.opt(key, f::array)? {
            None => Ok(Vec::new()),
            Some(items) => f::each(items, &self.path(key), parse),
        }
    }
}

/// Check that every value of `map` is a string; the first one that is not is a
/// [`Problem::WrongType`] at its escaped key.
pub(crate) fn string_values(map: &Map<String, Value>) -> Result<(), FieldError<'_>> {
    map.iter()
        .try_for_each(|(k, v)| f::string(v, &join("", k)).map(|_| ()))
}
