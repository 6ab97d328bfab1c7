//! [`RoleSpec`]: what a harness adapter needs from `task.assign`.

use serde_json::{Map, Value};

use super::error::AdapterError;
use crate::wire::role;

/// Default [`RoleSpec::role`].
pub const DEFAULT_ROLE: &str = role::CODER;

/// Default [`RoleSpec::session`]: one harness session per task.
pub const DEFAULT_SESSION: &str = "per-task";

/// The `extra` key of an inline system prompt (see [`RoleSpec::system_prompt`]).
pub const INLINE_SYSTEM_PROMPT: &str = "system_prompt";

/// The inline system prompt of a role's extra keys: `extra["system_prompt"]` when it is
/// a string (see [`RoleSpec::system_prompt`]).
pub fn inline_system_prompt(extra: &Map<String, Value>) -> Option<&str> {
    extra.get(INLINE_SYSTEM_PROMPT).and_then(Value::as_str)
}

/// The invocation fields seed 000 names, in order.
pub const INVOCATION_FIELDS: [&str; 7] = [
    "backend",
    "model",
    "session",
    "system_prompt_ref",
    "allowed_tools",
    "llm_base_url",
    "budget",
];

/// The role an adapter plays and the model↔harness pairing it runs, built from a
/// `task.assign` frame's `role` and `invocation`.
///
/// Fields are open strings (roles and backends are routing policy, which the protocol
/// does not enumerate). Invocation keys seed 000 does not name are kept in
/// [`extra`](Self::extra), in arrival order — a key named `role` too (the assign's
/// role is [`role`](Self::role); see [`from_invocation`](Self::from_invocation)).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSpec {
    /// The role (default `coder`).
    pub role: String,
    /// Harness backend (`agent-sdk`, `subprocess`, …).
    pub backend: Option<String>,
    /// Model identifier.
    pub model: Option<String>,
    /// Session policy (default `per-task`).
    pub session: String,
    /// Reference to the system prompt (never the prompt itself).
    pub system_prompt_ref: Option<String>,
    /// Tools the harness may use.
    pub allowed_tools: Vec<String>,
    /// Base URL of the LLM gateway.
    pub llm_base_url: Option<String>,
    /// Budget, any JSON value (kept as given).
    pub budget: Option<Value>,
    /// Invocation keys seed 000 does not name, in arrival order.
    pub extra: Map<String, Value>,
}

impl RoleSpec {
    /// Build from an invocation object. `role` is the assign's role; `None` means
    /// [`DEFAULT_ROLE`]. A `null` field is the same as an absent one.
    ///
    /// The role is the assign's: an invocation key named `role` is not a field seed 000
    /// names, so it is kept in `extra` like any other such key (stapel-runner-protocol
    /// 0.1.1 did the same), whatever its value. [`to_value`](Self::to_value) cannot
    /// emit it next to the declared `role` (the declared field wins there).
    ///
    /// # Errors
    /// `invalid_invocation` when a named field has the wrong type: `backend`, `model`,
    /// `session`, `system_prompt_ref`, `llm_base_url` must be strings, `allowed_tools`
    /// an array of strings. Roles and sessions are open strings; an empty one is kept as
    /// given.
    pub fn from_invocation(
        invocation: &Map<String, Value>,
        role: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let bad = |field: &str, reason: &str| AdapterError::InvalidInvocation {
            field: field.to_owned(),
            reason: reason.to_owned(),
        };
        let get = |k: &str| invocation.get(k).filter(|v| !v.is_null());
        let string = |k: &str| -> Result<Option<String>, AdapterError> {
            match get(k) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(k, "expected a string")),
            }
        };
        let role = role.unwrap_or(DEFAULT_ROLE);
        let session = string("session")?.unwrap_or_else(|| DEFAULT_SESSION.to_owned());
        let allowed_tools = match get("allowed_tools") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(&format!("allowed_tools/{i}"), "expected a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("allowed_tools", "expected an array of strings")),
        };
        Ok(Self {
            role: role.to_owned(),
            backend: string("backend")?,
            model: string("model")?,
            session,
            system_prompt_ref: string("system_prompt_ref")?,
            allowed_tools,
            llm_base_url: string("llm_base_url")?,
            budget: get("budget").cloned(),
            extra: invocation
                .iter()
                .filter(|(k, _)| !INVOCATION_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// The inline system prompt: `extra["system_prompt"]` when it is a string, else
    /// `None` (any other value there is kept in `extra` but is no prompt). Seed 000 names
    /// only `system_prompt_ref`; an inline prompt is for reference and test harnesses.
    pub fn system_prompt(&self) -> Option<&str> {
        inline_system_prompt(&self.extra)
    }

    /// Set the inline system prompt explicitly; the explicit value takes precedence over
    /// whatever the invocation carried: `Some(p)` makes `p` the prompt (replacing the
    /// `extra` value in place, or appending it), `None` removes any inline prompt (a
    /// non-string `extra["system_prompt"]` included). A binding whose role type has its
    /// own `system_prompt` field applies it with this before deriving
    /// [`AgentOptions`](super::AgentOptions).
    pub fn set_system_prompt(&mut self, prompt: Option<String>) {
        match prompt {
            Some(p) => {
                self.extra
                    .insert(INLINE_SYSTEM_PROMPT.to_owned(), Value::String(p));
            }
            None => {
                self.extra.shift_remove(INLINE_SYSTEM_PROMPT);
            }
        }
    }

    /// JSON form: `role`, then the invocation fields in seed order (absent optional
    /// fields omitted; `session` and `allowed_tools` always present), then `extra` in
    /// arrival order. [`from_invocation`](Self::from_invocation) never puts a declared
    /// name into `extra`; should a hand-built value do so, the declared field wins and
    /// the colliding `extra` key is not emitted.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        let opt = |m: &mut Map<String, Value>, k: &str, v: &Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), Value::String(v.clone()));
            }
        };
        opt(&mut m, "backend", &self.backend);
        opt(&mut m, "model", &self.model);
        m.insert("session".into(), Value::String(self.session.clone()));
        opt(&mut m, "system_prompt_ref", &self.system_prompt_ref);
        m.insert(
            "allowed_tools".into(),
            Value::Array(
                self.allowed_tools
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            ),
        );
        opt(&mut m, "llm_base_url", &self.llm_base_url);
        if let Some(b) = &self.budget {
            m.insert("budget".into(), b.clone());
        }
        for (k, v) in &self.extra {
            if !m.contains_key(k) {
                m.insert(k.clone(), v.clone());
            }
        }
        Value::Object(m)
    }
}
