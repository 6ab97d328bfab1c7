//! [`TurnResult`]: the answer of one harness turn.

use serde_json::{json, Value};

use super::error::AdapterError;
use crate::wire::UsageSplit;

/// The result of one turn: the model's final text and the turn's usage.
///
/// `usage` is always a valid closed five-component [`UsageSplit`] — a protocol condition:
/// without the thinking column, reasoning-class economics are understated. The type makes
/// an invalid split unrepresentable; [`from_value`](Self::from_value) validates the JSON
/// form against the closed schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    /// The model's final text (content: for the direct caller, never evidence).
    pub text: String,
    /// The turn's usage.
    pub usage: UsageSplit,
}

impl TurnResult {
    /// A result from its parts.
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
        let usage = UsageSplit::from_value(usage).map_err(|e| AdapterError::InvalidUsage {
            line_number: None,
            reason: e.to_string(),
        })?;
        Ok(Self::new(text, usage))
    }

    /// `{"text", "usage"}`.
    pub fn to_value(&self) -> Value {
        json!({"text": self.text, "usage": self.usage.to_value()})
    }
}
