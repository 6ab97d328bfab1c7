//! The `stapel-taskspecs` v1 artifacts embedded in hub frames: [`TaskSpec`] (in
//! `task.assign`), [`TaskReport`] (in `task.report`) and the closed five-component
//! [`UsageSplit`] (in `TaskReport.usage` and in `task.progress` frames of kind `usage`).
//!
//! Forward compatibility follows the taskspecs schemas: TaskSpec and TaskReport keep
//! unknown fields (in `extra`); UsageSplit is closed — exactly five non-negative integers.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::check::{finish, Checker, Loc};
use super::error::{Rule, SchemaError, Violation};
use crate::json::{Object, Value};

/// The five usage components, in schema order.
pub const USAGE_COMPONENTS: [&str; 5] = [
    "cache_read",
    "cache_write",
    "fresh_input",
    "output",
    "thinking",
];

/// Token accounting split into exactly five components (taskspecs `usage_split.v1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageSplit {
    /// Prompt-side tokens served from the provider's prefix cache.
    pub cache_read: u64,
    /// Prompt-side tokens written into the prefix cache.
    pub cache_write: u64,
    /// Prompt-side tokens neither read from nor written to the cache.
    pub fresh_input: u64,
    /// Generated output tokens (excluding separately reported thinking).
    pub output: u64,
    /// Reasoning tokens reported separately (0 when folded into `output`).
    pub thinking: u64,
}

impl UsageSplit {
    /// Sum of the five components (saturating).
    pub fn total_tokens(&self) -> u64 {
        [
            self.cache_read,
            self.cache_write,
            self.fresh_input,
            self.output,
            self.thinking,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add)
    }

    /// The split as a JSON object with the five keys in schema order.
    pub fn to_value(&self) -> Value {
        let mut m = Object::new();
        for (k, v) in USAGE_COMPONENTS.iter().zip([
            self.cache_read,
            self.cache_write,
            self.fresh_input,
            self.output,
            self.thinking,
        ]) {
            m.insert(*k, v);
        }
        Value::Object(m)
    }

    /// Check `value` against the closed schema, reporting under `location`.
    pub fn check(value: &Value, location: &str, out: &mut Vec<Violation>) -> Option<UsageSplit> {
        Self::check_at(value, Loc::Path(location), out)
    }

    pub(crate) fn check_at(
        value: &Value,
        loc: Loc<'_>,
        out: &mut Vec<Violation>,
    ) -> Option<UsageSplit> {
        let mut c = Checker { out };
        let obj = c.object(loc, value)?;
        // One pass over the entries (no hashing): the split is small and closed.
        let mut parts = [None; 5];
        let mut seen = [false; 5];
        for (key, v) in obj {
            let slot = USAGE_COMPONENTS
                .iter()
                .zip(seen.iter_mut().zip(parts.iter_mut()))
                .find(|(k, _)| **k == key);
            match slot {
                Some((_, (seen, part))) => {
                    *seen = true;
                    *part = c.uint(Loc::Key(&loc, key), v);
                }
                None => c.push(
                    Loc::Key(&loc, key),
                    Rule::AdditionalProperty,
                    "UsageSplit is closed: only cache_read, cache_write, fresh_input, output, thinking",
                ),
            }
        }
        for (key, seen) in USAGE_COMPONENTS.iter().zip(seen) {
            if !seen {
                c.push(
                    Loc::Key(&loc, key),
                    Rule::Required,
                    "required field is missing",
                );
            }
        }
        match parts {
            [Some(cache_read), Some(cache_write), Some(fresh_input), Some(output), Some(thinking)]
                if obj.len() == 5 =>
            {
                Some(UsageSplit {
                    cache_read,
                    cache_write,
                    fresh_input,
                    output,
                    thinking,
                })
            }
            _ => None,
        }
    }

    /// Parse and validate a split from a JSON value.
    ///
    /// # Errors
    /// Every violation, located relative to the split (the root is `""`).
    pub fn from_value(value: &Value) -> Result<UsageSplit, SchemaError> {
        let mut out = Vec::new();
        match Self::check(value, "", &mut out) {
            Some(u) if out.is_empty() => Ok(u),
            _ => Err(SchemaError {
                violations: finish(out),
            }),
        }
    }

    /// `payload.usage` of a progress payload, located under `payload/usage`.
    pub(crate) fn from_payload(payload: &Object) -> Result<UsageSplit, SchemaError> {
        let mut out = Vec::new();
        let got = match payload.get("usage") {
            Some(v) => Self::check_at(v, Loc::Path("payload/usage"), &mut out),
            None => {
                out.push(Violation::new(
                    "payload/usage",
                    Rule::Required,
                    "required field is missing",
                ));
                None
            }
        };
        match got {
            Some(u) if out.is_empty() => Ok(u),
            _ => Err(SchemaError {
                violations: finish(out),
            }),
        }
    }
}

/// One acceptance criterion of a [`TaskSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Stable criterion id, non-empty.
    pub id: String,
    /// Given/When/Then prose, non-empty.
    pub text: String,
    /// Unknown fields, preserved.
    #[serde(flatten)]
    pub extra: Object,
}

/// The enforcement envelope of a [`TaskSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Iteration budget (≥ 0).
    pub iterations: u64,
    /// Host-defined limits (tokens, wall time, …), preserved.
    #[serde(flatten)]
    pub extra: Object,
}

/// A unit of work (taskspecs `task_spec.v1`). Unknown fields are kept in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Artifact schema version (1).
    pub schema_version: u64,
    /// Stable task identifier, non-empty.
    pub id: String,
    /// Task kind (open string), non-empty.
    #[serde(rename = "type")]
    pub task_type: String,
    /// One-sentence statement of intent, non-empty.
    pub goal: String,
    /// FSM state snapshot (open string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Risk classes (non-empty strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Vec<String>>,
    /// References into the project spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_refs: Option<Vec<String>>,
    /// Ids of tasks this one depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<String>>,
    /// Acceptance criteria.
    pub criteria: Vec<Criterion>,
    /// Explicit non-goals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_scope: Option<Vec<String>>,
    /// Enforcement envelope.
    pub budget: Budget,
    /// Human-readable prose body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Unknown fields, preserved in arrival order.
    #[serde(flatten)]
    pub extra: Object,
}

impl TaskSpec {
    /// Check a TaskSpec object, reporting under `prefix` (e.g. `task`).
    pub fn check(obj: &Object, prefix: &str, out: &mut Vec<Violation>) {
        let p = Loc::Path(prefix);
        let mut c = Checker { out };
        c.schema_version_const(obj, p);
        for key in ["id", "type", "goal"] {
            if let Some(v) = c.required(obj, p, key) {
                c.string(Loc::Key(&p, key), v, 1);
            }
        }
        if let Some(v) = obj.get("status") {
            c.string(Loc::Key(&p, "status"), v, 0);
        }
        if let Some(v) = obj.get("risk") {
            c.string_array(Loc::Key(&p, "risk"), v, 1);
        }
        for key in ["spec_refs", "depends_on", "out_of_scope"] {
            if let Some(v) = obj.get(key) {
                c.string_array(Loc::Key(&p, key), v, 0);
            }
        }
        if let Some(v) = c.required(obj, p, "criteria") {
            let loc = Loc::Key(&p, "criteria");
            match v {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let item_loc = Loc::Index(&loc, i);
                        if let Some(crit) = c.object(item_loc, item) {
                            for key in ["id", "text"] {
                                if let Some(v) = c.required(crit, item_loc, key) {
                                    c.string(Loc::Key(&item_loc, key), v, 1);
                                }
                            }
                        }
                    }
                }
                other => c.type_error(loc, "array", other),
            }
        }
        if let Some(v) = c.required(obj, p, "budget") {
            let loc = Loc::Key(&p, "budget");
            if let Some(budget) = c.object(loc, v) {
                if let Some(v) = c.required(budget, loc, "iterations") {
                    c.uint(Loc::Key(&loc, "iterations"), v);
                }
            }
        }
        if let Some(v) = obj.get("body") {
            c.string(Loc::Key(&p, "body"), v, 0);
        }
    }

    /// Validate and convert a TaskSpec object.
    ///
    /// # Errors
    /// Every violation, located relative to the object (root `""`).
    pub fn from_object(obj: &Object) -> Result<TaskSpec, SchemaError> {
        Self::from_object_at(obj, "")
    }

    pub(crate) fn from_object_at(obj: &Object, prefix: &str) -> Result<TaskSpec, SchemaError> {
        typed(obj, prefix, Self::check)
    }

    /// The TaskSpec as a JSON object (declared fields first, then `extra`).
    pub fn to_object(&self) -> Object {
        to_object(self)
    }
}

/// Outcome of one control gate in a [`TaskReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlOutcome {
    /// `pass`, `fail`, `skip`, `error`, … (open string).
    pub status: String,
    /// Optional log tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Unknown fields, preserved.
    #[serde(flatten)]
    pub extra: Object,
}

/// The runner's report on one attempt (taskspecs `task_report.v1`). Unknown fields are
/// kept in `extra`; `usage` is the closed [`UsageSplit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// Artifact schema version (1).
    pub schema_version: u64,
    /// The task reported on, non-empty.
    pub task_id: String,
    /// Terminal status claim (open string; `done`, `blocked`, `failed`).
    pub status: String,
    /// Result in business language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_business: Option<String>,
    /// Paths changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_changed: Option<Vec<String>>,
    /// Control-gate outcomes by control name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controls: Option<IndexMap<String, ControlOutcome>>,
    /// Commits made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<Vec<String>>,
    /// Questions raised when blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<Vec<String>>,
    /// Failure taxonomy label (open string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_type: Option<String>,
    /// Coder iterations spent (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// Five-component usage for the attempt; required even when blocked or failed.
    pub usage: UsageSplit,
    /// Unknown fields, preserved in arrival order.
    #[serde(flatten)]
    pub extra: Object,
}

impl TaskReport {
    /// Check a TaskReport object, reporting under `prefix` (e.g. `report`).
    pub fn check(obj: &Object, prefix: &str, out: &mut Vec<Violation>) {
        let p = Loc::Path(prefix);
        let mut c = Checker { out: &mut *out };
        c.schema_version_const(obj, p);
        if let Some(v) = c.required(obj, p, "task_id") {
            c.string(Loc::Key(&p, "task_id"), v, 1);
        }
        if let Some(v) = c.required(obj, p, "status") {
            c.string(Loc::Key(&p, "status"), v, 0);
        }
        for key in ["summary_business", "failure_type"] {
            if let Some(v) = obj.get(key) {
                c.string(Loc::Key(&p, key), v, 0);
            }
        }
        for key in ["files_changed", "commits", "questions"] {
            if let Some(v) = obj.get(key) {
                c.string_array(Loc::Key(&p, key), v, 0);
            }
        }
        if let Some(v) = obj.get("controls") {
            let loc = Loc::Key(&p, "controls");
            if let Some(controls) = c.object(loc, v) {
                for (name, outcome) in controls {
                    let oloc = Loc::Key(&loc, name);
                    if let Some(o) = c.object(oloc, outcome) {
                        if let Some(v) = c.required(o, oloc, "status") {
                            c.string(Loc::Key(&oloc, "status"), v, 0);
                        }
                        if let Some(v) = o.get("log") {
                            c.string(Loc::Key(&oloc, "log"), v, 0);
                        }
                    }
                }
            }
        }
        if let Some(v) = obj.get("iterations") {
            c.uint(Loc::Key(&p, "iterations"), v);
        }
        if let Some(v) = c.required(obj, p, "usage") {
            UsageSplit::check_at(v, Loc::Key(&p, "usage"), out);
        }
    }

    /// Validate and convert a TaskReport object.
    ///
    /// # Errors
    /// Every violation, located relative to the object (root `""`).
    pub fn from_object(obj: &Object) -> Result<TaskReport, SchemaError> {
        Self::from_object_at(obj, "")
    }

    pub(crate) fn from_object_at(obj: &Object, prefix: &str) -> Result<TaskReport, SchemaError> {
        typed(obj, prefix, Self::check)
    }

    /// The TaskReport as a JSON object (declared fields first, then `extra`).
    pub fn to_object(&self) -> Object {
        to_object(self)
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    obj: &Object,
    prefix: &str,
    check: fn(&Object, &str, &mut Vec<Violation>),
) -> Result<T, SchemaError> {
    let mut out = Vec::new();
    check(obj, prefix, &mut out);
    if !out.is_empty() {
        return Err(SchemaError {
            violations: finish(out),
        });
    }
    serde_json::from_value(serde_json::Value::from(Value::Object(obj.clone()))).map_err(|e| {
        SchemaError {
            violations: vec![Violation::new(prefix, Rule::Type, e.to_string())],
        }
    })
}

fn to_object<T: Serialize>(v: &T) -> Object {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m.into(),
        _ => Object::new(),
    }
}
