//! [`AgentOptions`]: what an agent-SDK harness session is configured with.

use serde_json::{json, Map, Value};

use super::error::AdapterError;
use super::role::RoleSpec;
use super::subprocess::LLM_BASE_URL_ENV;
use super::turn::TurnResult;
use super::usage::usage_from_anthropic;
use crate::wire::UsageSplit;

/// The `budget` keys an agent-SDK session takes over, in order.
pub const AGENT_BUDGET_KEYS: [&str; 2] = ["max_turns", "max_budget_usd"];

/// The options of seed 000's `AgentSdkAdapter` session (one persistent claude-agent-sdk
/// client per role), derived from a [`RoleSpec`]. A binding spells them the way its SDK
/// does (`max_turns` in Python, `maxTurns` in TypeScript); the choices are made here:
///
/// * `model` — the role's model, when non-empty;
/// * `allowed_tools` — the role's tools, when there are any;
/// * `system_prompt` — the role's inline prompt, [`RoleSpec::system_prompt`] (for
///   reference and test harnesses; production roles name a `system_prompt_ref`);
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
            system_prompt: spec.system_prompt().map(str::to_owned),
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

/// The fold of one agent-SDK turn into a [`TurnResult`].
///
/// The host reads its SDK's response messages (recognising their shapes is I/O and stays
/// in the host) and feeds the fold what they carry, in order:
///
/// * [`text_block`](Self::text_block) for every text block of every message — the turn's
///   text is all of them joined in order, with no separator;
/// * [`result`](Self::result) for the final result message, with its usage when it has
///   one — Anthropic-shaped, mapped by [`usage_from_anthropic`]. Only the first result
///   counts (the SDK ends a response with it).
///
/// [`finish`](Self::finish) builds the result. A turn without a result message, or whose
/// result carries no usage, has zero usage: that is not an error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTurn {
    text: String,
    result: AgentResult,
}

/// Whether the fold saw the result message, and its usage.
#[derive(Debug, Clone, Default, PartialEq)]
enum AgentResult {
    /// No result message yet.
    #[default]
    Pending,
    /// The result message, with its usage when it had one.
    Seen(Option<Value>),
}

impl AgentTurn {
    /// An empty turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append a text block.
    pub fn text_block(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The result message, with its usage (`None`: the message has no usage). Only the
    /// first call counts.
    pub fn result(&mut self, usage: Option<Value>) {
        if self.result == AgentResult::Pending {
            self.result = AgentResult::Seen(usage.filter(|u| !u.is_null()));
        }
    }

    /// The turn's result.
    ///
    /// # Errors
    /// `invalid_usage` when the result's usage cannot be mapped.
    pub fn finish(self) -> Result<TurnResult, AdapterError> {
        let usage = match &self.result {
            AgentResult::Seen(Some(u)) => usage_from_anthropic(u)?,
            AgentResult::Seen(None) | AgentResult::Pending => UsageSplit::default(),
        };
        Ok(TurnResult::new(self.text, usage))
    }
}
