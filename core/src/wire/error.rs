//! Errors of the wire codec and the schema violations they carry.

use std::fmt;

/// The rule a [`Violation`] broke. Each has a stable snake_case [`code`](Rule::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// A required field is absent.
    Required,
    /// A field has the wrong JSON type (for integers: not an integer literal).
    Type,
    /// A field must hold one exact value (`schema_version: 1`).
    Const,
    /// A string is shorter than its minimum length.
    MinLength,
    /// A number is below its minimum.
    Minimum,
    /// An integer lies outside ±(2^53 − 1), the range every binding language represents
    /// exactly.
    Range,
    /// A closed object (UsageSplit) has a key it does not declare.
    AdditionalProperty,
    /// Two fields that must agree do not (`task_id` vs `task.id`, `task_id` vs
    /// `report.task_id`).
    Mismatch,
}

impl Rule {
    /// Stable snake_case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Rule::Required => "required",
            Rule::Type => "type",
            Rule::Const => "const",
            Rule::MinLength => "min_length",
            Rule::Minimum => "minimum",
            Rule::Range => "range",
            Rule::AdditionalProperty => "additional_property",
            Rule::Mismatch => "mismatch",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One broken schema rule: where, which rule, and a human-readable message.
///
/// `location` is a slash-separated path from the frame's root without a leading slash,
/// e.g. `payload/usage/thinking` or `task/criteria/0/id`; the empty string is the frame
/// itself. Keys containing `~` or `/` are escaped as in JSON Pointer (`~0`, `~1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Violation {
    /// Path of the offending value.
    pub location: String,
    /// The rule broken.
    pub rule: Rule,
    /// Human-readable explanation (not stable; assert on `location` and `rule`).
    pub message: String,
}

impl Violation {
    pub(crate) fn new(location: impl Into<String>, rule: Rule, message: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            rule,
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loc = if self.location.is_empty() {
            "<root>"
        } else {
            &self.location
        };
        write!(f, "{loc}: {} ({})", self.message, self.rule)
    }
}

/// Why a frame could not be decoded. Every variant is a *remote* violation: the bytes
/// came from a peer. Codes are stable and asserted by conformance vectors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are not a JSON document (syntax error, truncation, invalid UTF-8, or
    /// trailing data). Code `not_json`.
    #[error("frame is not JSON: {message}")]
    NotJson {
        /// The parser's explanation, with line and column.
        message: String,
    },
    /// An object in the frame, at any depth, repeats a key. Such frames are rejected
    /// rather than resolved first-wins or last-wins, because peers disagree on which wins.
    /// Code `duplicate_key`.
    #[error("frame has a duplicate key: {message}")]
    DuplicateKey {
        /// Names the repeated key.
        message: String,
    },
    /// The JSON document is not an object. Code `not_object`.
    #[error("frame is a JSON {found}, not an object")]
    NotObject {
        /// The JSON type found: `array`, `string`, `number`, `boolean` or `null`.
        found: &'static str,
    },
    /// `type` is absent, not a string, or not one of the seven message types.
    /// Code `unknown_type`.
    #[error("unknown message type {}", type_name.as_deref().map(|t| format!("{t:?}")).unwrap_or_else(|| "(absent or not a string)".into()))]
    UnknownType {
        /// The `type` value when it was a string.
        type_name: Option<String>,
    },
    /// The frame breaks one or more schema rules; all of them are listed, sorted by
    /// location. Code `schema_violation`.
    #[error("{} schema violation(s): {}", violations.len(), join(violations))]
    Schema {
        /// Every violation found, sorted by location then rule.
        violations: Vec<Violation>,
    },
}

fn join(v: &[Violation]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl DecodeError {
    /// The error for a frame nesting arrays and objects deeper than
    /// [`json::MAX_DEPTH`](crate::json::MAX_DEPTH) levels: the decoder refuses such a
    /// frame, and [`try_encode`](super::try_encode) refuses to make one. Code `not_json`.
    pub fn too_deep() -> Self {
        DecodeError::NotJson {
            message: format!("nested deeper than {} levels", crate::json::MAX_DEPTH),
        }
    }

    /// The error for a text frame that is not valid Unicode (a binding's string holding a
    /// lone surrogate has no UTF-8 form). Code `not_json`.
    pub fn not_unicode() -> Self {
        DecodeError::NotJson {
            message: "the text is not valid Unicode (it has no UTF-8 form)".into(),
        }
    }

    /// Stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::NotJson { .. } => "not_json",
            DecodeError::DuplicateKey { .. } => "duplicate_key",
            DecodeError::NotObject { .. } => "not_object",
            DecodeError::UnknownType { .. } => "unknown_type",
            DecodeError::Schema { .. } => "schema_violation",
        }
    }

    /// The schema violations, empty for the other variants.
    pub fn violations(&self) -> &[Violation] {
        match self {
            DecodeError::Schema { violations } => violations,
            _ => &[],
        }
    }

    /// The error as human-readable lines, the text every binding shows: for a schema
    /// error one line per violation, in order, as [`Violation`]'s `Display`
    /// (`"location: message (rule)"`, `<root>` for the frame itself); for any other error
    /// the single line `"<root>: "` followed by the error's `Display`.
    ///
    /// ```
    /// use stapel_runner_protocol::wire::decode;
    ///
    /// let e = decode(br#"{"type":"task.cancel","task_id":"T","reason":"r","seq":-1}"#, true);
    /// assert_eq!(e.unwrap_err().lines(), [
    ///     "schema_version: required field is missing (required)",
    ///     "seq: -1 is below the minimum 0 (minimum)",
    /// ]);
    /// assert_eq!(decode(b"[]", true).unwrap_err().lines(), ["<root>: frame is a JSON array, not an object"]);
    /// ```
    pub fn lines(&self) -> Vec<String> {
        match self {
            DecodeError::Schema { violations } => lines(violations),
            other => vec![format!("<root>: {other}")],
        }
    }
}

/// A message or artifact built in code breaks schema rules (see
/// [`Message::validate`](super::Message::validate)). Code `schema_violation`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} schema violation(s): {}", violations.len(), join(violations))]
pub struct SchemaError {
    /// Every violation found, sorted by location then rule.
    pub violations: Vec<Violation>,
}

/// One line per violation, as [`Violation`]'s `Display`.
fn lines(v: &[Violation]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

impl SchemaError {
    /// One human-readable line per violation (see [`DecodeError::lines`]).
    pub fn lines(&self) -> Vec<String> {
        lines(&self.violations)
    }

    /// Stable code: `schema_violation`.
    pub fn code(&self) -> &'static str {
        "schema_violation"
    }
}

impl From<SchemaError> for DecodeError {
    fn from(e: SchemaError) -> Self {
        DecodeError::Schema {
            violations: e.violations,
        }
    }
}
