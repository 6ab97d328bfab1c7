//! [`AgentOptions`]: what an agent-SDK harness session is configured with.

use serde_json::{json, Map, Value};

use super::role::RoleSpec;
use super::subprocess::LLM_BASE_URL_ENV;

/// The `budget` keys an agent-SDK session takes over, in order.
pub const AGENT_BUDGET_KEYS: [&str; 2] = ["max_turns", "max_budget_usd"];

/// The options of seed 000's `AgentSdkAdapter` session (one persistent claude-agent-sdk
/// client per role), derived from a [`RoleSpec`]. A binding spells them the way its SDK
/// does (`max_turns` in Python, `maxTurns` in TypeScript); the choices are made here:
///
/// * `model` — the role's model, when non-empty;
/// * `allowed_tools` — the role's tools, when there are any;
/// * `system_prompt` — an inline `system_prompt` string from the invocation's extra keys
///   (for reference and test harnesses; production roles name a `system_prompt_ref`);
/// * `env` — [`LLM_BASE_URL_ENV`] = the role's `llm_base_url`, when non-empty;
/// * `max_turns`, `max_budget_usd` — taken over as given from a `budget` object that has
///   them ([`AGENT_BUDGET_KEYS`]); another budget shape sets neither.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct AgentOptions {
    /// Model identifier.
    pub model: Option<String>,
    /// Tools the harness may use (empty: the SDK's default).
    pub allowed_tools: Vec<String>,
    /// Inline system prompt.
    pub system_prompt: Option<String>,
    /// Variables for the SDK's child process, in order.
    pub env: Vec<(String, String)>,
    /// The budget's `max_turns`, as given.
    pub max_turns: Option<Value>,
    /// The budget's `max_budget_usd`, as given.
    pub max_budget_usd: Option<Value>,
}

impl AgentOptions {
    /// The options for `spec` (see the [type docs](Self)).
    pub fn from_role(spec: &RoleSpec) -> Self {
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let budget = |key: &str| match &spec.budget {
            Some(Value::Object(b)) => b.get(key).cloned(),
            _ => None,
        };
        Self {
            model: non_empty(&spec.model),
            allowed_tools: spec.allowed_tools.clone(),
            system_prompt: spec
                .extra
                .get("system_prompt")
                .and_then(Value::as_str)
                .map(str::to_owned),
            env: non_empty(&spec.llm_base_url)
                .map(|url| vec![(LLM_BASE_URL_ENV.to_owned(), url)])
                .unwrap_or_default(),
            max_turns: budget("max_turns"),
            max_budget_usd: budget("max_budget_usd"),
        }
    }

    /// JSON form with only the options that are set: `model`, `allowed_tools` (when
    /// non-empty), `system_prompt`, `env` (an object, when non-empty), `max_turns`,
    /// `max_budget_usd`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(model) = &self.model {
            m.insert("model".into(), json!(model));
        }
        if !self.allowed_tools.is_empty() {
            m.insert("allowed_tools".into(), json!(self.allowed_tools));
        }
        if let Some(prompt) = &self.system_prompt {
            m.insert("system_prompt".into(), json!(prompt));
        }
        if !self.env.is_empty() {
            let env: Map<String, Value> = self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            m.insert("env".into(), Value::Object(env));
        }
        for (key, value) in AGENT_BUDGET_KEYS
            .iter()
            .zip([&self.max_turns, &self.max_budget_usd])
        {
            if let Some(v) = value {
                m.insert((*key).to_owned(), v.clone());
            }
        }
        Value::Object(m)
    }
}
