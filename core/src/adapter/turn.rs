//! [`TurnResult`]: the answer of one harness turn.

use serde_json::{json, Value};

use super::error::AdapterError;
use crate::wire::{UsageSplit, MAX_SAFE_INTEGER};

/// The result of one turn: the model's final text and the turn's usage.
///
/// `usage` is always a closed five-component [`UsageSplit`] — a protocol condition:
/// without the thinking column, reasoning-class economics are understated. The type makes
/// a split with missing or extra components unrepresentable, but not one with a
/// component above 2^53 − 1 (the schema's bound): [`try_new`](Self::try_new) and
/// [`from_value`](Self::from_value) check it, and every result the core itself builds
/// (from a harness line or a usage mapping) has passed that check. [`new`](Self::new)
/// trusts its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    /// The model's final text (content: for the direct caller, never evidence).
    pub text: String,
    /// The turn's usage.
    pub usage: UsageSplit,
}

impl TurnResult {
    /// A result from its parts, checked: every usage component must be at most
    /// 2^53 − 1.
    ///
    /// # Errors
    /// `invalid_usage` naming the first component out of range.
    pub fn try_new(text: impl Into<String>, usage: UsageSplit) -> Result<Self, AdapterError> {
        let components = [
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
            ("fresh_input", usage.fresh_input),
            ("output", usage.output),
            ("thinking", usage.thinking),
        ];
        if let Some((name, n)) = components.iter().find(|(_, n)| *n > MAX_SAFE_INTEGER) {
            return Err(AdapterError::InvalidUsage {
                line_number: None,
                reason: format!("{name} ({n}) exceeds 2^53-1"),
            });
        }
        Ok(Self::new(text, usage))
    }

    /// A result from its parts, unchecked (see [`try_new`](Self::try_new)).
    pub fn new(text: impl Into<String>, usage: UsageSplit) -> Self {
        Self {
            text: text.into(),
            usage,
        }
    }

    /// Parse `{"text": string, "usage": UsageSplit}` strictly: no other keys, `usage`
    /// exactly the five non-negative integer components (≤ 2^53 − 1).
    ///
    /// # Errors
    /// `invalid_result` for a bad envelope, `invalid_usage` for a bad split.
    pub fn from_value(value: &Value) -> Result<Self, AdapterError> {
        let bad = |reason: &str| AdapterError::InvalidResult {
            line_number: None,
            reason: reason.to_owned(),
        };
        let obj = value.as_object().ok_or_else(|| bad("expected an object"))?;
        if let Some(k) = obj.keys().find(|k| *k != "text" && *k != "usage") {
            return Err(bad(&format!("unknown key {k:?}")));
        }
        let text = obj
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`text` must be a string"))?;
        let usage = obj.get("usage").ok_or_else(|| bad("`usage` is required"))?;
        let usage = UsageSplit::from_value(&crate::json::Value::from(usage)).map_err(|e| {
            AdapterError::InvalidUsage {
                line_number: None,
                reason: e.to_string(),
            }
        })?;
        Ok(Self::new(text, usage))
    }

    /// `{"text", "usage"}`.
    pub fn to_value(&self) -> Value {
        json!({"text": self.text, "usage": self.usage.to_value()})
    }
}
