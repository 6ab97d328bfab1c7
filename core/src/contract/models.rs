//! The contract-1.0 models (seed 001), strict: every model rejects unknown fields, and the
//! declared `metadata` objects are the only open place.
//!
//! Every model has `from_value(&Value)` (strict parse, typed [`ContractError`] with a
//! stable code and the field path) and `to_value()` (its canonical JSON object, fields in
//! declaration order). Absent and `null` optional fields are the same thing on input.
//!
//! Metadata policy: the runtime models ([`SandboxHandle`], [`ToolResult`],
//! [`ExecutionSummary`]) reject a `metadata` object carrying a sensitive key or a
//! credential-shaped value with `sensitive_metadata`. The catalog models
//! ([`HarnessProfile`], [`ReinDescriptor`]) parse such metadata and leave the judgement to
//! [profile resolution](super::resolution), which refuses them as `unsafe` — a refusal
//! that produces evidence, instead of a catalog that silently fails to load.

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ContractError;
use super::fields::Obj;
use crate::wire::UsageSplit;

/// The harness-contract version this crate implements.
pub const CONTRACT_VERSION: &str = "1.0";

/// A string → string map in arrival order (rein `inputs`, rein `session`).
pub type StringMap = IndexMap<String, String>;

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub(crate) fn string_map(o: &Obj<'_>, key: &str) -> Result<StringMap, ContractError> {
    Ok(o.string_map(key)?
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
        .collect())
}

/// A consumer's request for one governed execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionRequest {
    /// The harness profile to run under (required, explicit: there is no default).
    pub harness_profile_ref: String,
    /// Repository the work is about (required).
    pub repository: String,
    /// Short title (required). Content: never copied into evidence.
    pub title: String,
    /// Description of the work (required). Content: never copied into evidence.
    pub description: String,
    /// Correlation reference to an assignment record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignment_ref: Option<String>,
    /// Correlation reference to a role record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<String>,
    /// Correlation reference to a duty record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duty_ref: Option<String>,
    /// Correlation references to goal records.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub goal_refs: Vec<String>,
    /// Correlation references to resource envelopes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_envelope_refs: Vec<String>,
}

impl ExecutionRequest {
    const FIELDS: &'static [&'static str] = &[
        "harness_profile_ref",
        "repository",
        "title",
        "description",
        "assignment_ref",
        "role_ref",
        "duty_ref",
        "goal_refs",
        "resource_envelope_refs",
    ];

    /// A request with the four required fields.
    pub fn new(
        harness_profile_ref: impl Into<String>,
        repository: impl Into<String>,
        title: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            harness_profile_ref: harness_profile_ref.into(),
            repository: repository.into(),
            title: title.into(),
            description: description.into(),
            assignment_ref: None,
            role_ref: None,
            duty_ref: None,
            goal_refs: Vec::new(),
            resource_envelope_refs: Vec::new(),
        }
    }

    /// Strict parse.
    ///
    /// # Errors
    /// The first violation found (unknown field in arrival order, then the declared fields
    /// in order).
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ExecutionRequest", prefix, value, Self::FIELDS)?;
        Ok(Self {
            harness_profile_ref: o.req_str("harness_profile_ref")?,
            repository: o.req_str("repository")?,
            title: o.req_str("title")?,
            description: o.req_str("description")?,
            assignment_ref: o.opt_str("assignment_ref")?,
            role_ref: o.opt_str("role_ref")?,
            duty_ref: o.opt_str("duty_ref")?,
            goal_refs: o.str_list("goal_refs")?,
            resource_envelope_refs: o.str_list("resource_envelope_refs")?,
        })
    }

    /// Canonical JSON (absent optional fields omitted).
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// Which tools a profile lets a rein's session call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolPolicy {
    /// Tool names the gateway will dispatch. A [`ToolCall`] whose `name` is not listed is
    /// not dispatched. An entry made only of `*` would allow everything and makes the
    /// profile `unsafe`.
    pub allowed_tools: Vec<String>,
}

impl ToolPolicy {
    fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ToolPolicy", prefix, value, &["allowed_tools"])?;
        o.required("allowed_tools")?;
        Ok(Self {
            allowed_tools: o.str_list("allowed_tools")?,
        })
    }

    /// `true` when `name` is listed exactly.
    pub fn allows(&self, name: &str) -> bool {
        self.allowed_tools.iter().any(|t| t == name)
    }
}

/// A named, versioned execution profile: which rein, model, sandbox and tools are
/// approved. Profiles may name credential *routes*, never credential values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessProfile {
    /// The exact contract version the profile is written for; must equal
    /// [`CONTRACT_VERSION`] to resolve (else `incompatible`).
    pub contract_version: String,
    /// Identifier matched by [`ExecutionRequest::harness_profile_ref`].
    pub profile_id: String,
    /// Identifier of the rein that executes this profile ([`ReinDescriptor::rein_id`]).
    pub rein: String,
    /// A disabled profile is refused (`disabled`). Default `true`.
    pub enabled: bool,
    /// The approved model.
    pub model: String,
    /// The sand-boxer template to provision.
    pub sandbox_profile: String,
    /// Tools the session may call.
    pub tool_policy: ToolPolicy,
    /// Credential-route references (`scheme:name`, e.g. `env:ANTHROPIC_API_KEY`),
    /// resolved rein-locally. A value here that is not such a reference is `unsafe`.
    pub credential_refs: Vec<String>,
    /// Rein-specific, non-secret additions.
    pub metadata: Map<String, Value>,
}

impl HarnessProfile {
    const FIELDS: &'static [&'static str] = &[
        "contract_version",
        "profile_id",
        "rein",
        "enabled",
        "model",
        "sandbox_profile",
        "tool_policy",
        "credential_refs",
        "metadata",
    ];

    /// Strict parse. Sensitive metadata is *not* a parse error here; resolution refuses it
    /// as `unsafe`.
    ///
    /// # Errors
    /// The first structural violation.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("HarnessProfile", prefix, value, Self::FIELDS)?;
        Ok(Self {
            contract_version: o.req_str("contract_version")?,
            profile_id: o.req_str("profile_id")?,
            rein: o.req_str("rein")?,
            enabled: o.opt_bool("enabled")?.unwrap_or(true),
            model: o.req_str("model")?,
            sandbox_profile: o.req_str("sandbox_profile")?,
            tool_policy: o.nested("tool_policy", ToolPolicy::parse_at)?,
            credential_refs: o.str_list("credential_refs")?,
            metadata: o.object("metadata")?,
        })
    }

    /// Canonical JSON.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// How much of a rein's inner tool activity its summary can account for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEventVisibility {
    /// Every inner tool event is counted.
    Complete,
    /// Some inner tool events are counted; the count is a lower bound.
    Partial,
    /// The rein cannot observe its inner tool events. Never an empty claim of
    /// completeness. The default.
    #[default]
    Unavailable,
}

impl ToolEventVisibility {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolEventVisibility::Complete => "complete",
            ToolEventVisibility::Partial => "partial",
            ToolEventVisibility::Unavailable => "unavailable",
        }
    }

    fn parse(o: &Obj<'_>, key: &str) -> Result<Self, ContractError> {
        match o.opt_str(key)?.as_deref() {
            None | Some("unavailable") => Ok(Self::Unavailable),
            Some("complete") => Ok(Self::Complete),
            Some("partial") => Ok(Self::Partial),
            Some(other) => Err(ContractError::InvalidField {
                model: o.model,
                field: o.path(key),
                reason: format!("unknown value {other:?} (complete, partial, unavailable)"),
            }),
        }
    }
}

/// What a rein declares about itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReinDescriptor {
    /// Identifier a profile's `rein` refers to.
    pub rein_id: String,
    /// The exact contract version the rein supports; must equal [`CONTRACT_VERSION`].
    pub contract_version: String,
    /// The best tool-event visibility the rein's summaries can offer. Default
    /// `unavailable`.
    pub tool_event_visibility: ToolEventVisibility,
    /// Rein-specific, non-secret additions (checked at resolution).
    pub metadata: Map<String, Value>,
}

impl ReinDescriptor {
    const FIELDS: &'static [&'static str] = &[
        "rein_id",
        "contract_version",
        "tool_event_visibility",
        "metadata",
    ];

    /// Strict parse (sensitive metadata is judged at resolution).
    ///
    /// # Errors
    /// The first structural violation.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ReinDescriptor", prefix, value, Self::FIELDS)?;
        Ok(Self {
            rein_id: o.req_str("rein_id")?,
            contract_version: o.req_str("contract_version")?,
            tool_event_visibility: ToolEventVisibility::parse(&o, "tool_event_visibility")?,
            metadata: o.object("metadata")?,
        })
    }

    /// Canonical JSON.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// The sand-boxer's handle on a provisioned sandbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxHandle {
    /// Sandbox identifier (an identifier: it appears in evidence, redacted if needed).
    pub sandbox_id: String,
    /// Provider-specific, non-secret additions.
    pub metadata: Map<String, Value>,
}

impl SandboxHandle {
    /// A handle with no metadata.
    pub fn new(sandbox_id: impl Into<String>) -> Self {
        Self {
            sandbox_id: sandbox_id.into(),
            metadata: Map::new(),
        }
    }

    /// Strict parse.
    ///
    /// # Errors
    /// The first violation; sensitive metadata is `sensitive_metadata`.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("SandboxHandle", prefix, value, &["sandbox_id", "metadata"])?;
        Ok(Self {
            sandbox_id: o.req_str("sandbox_id")?,
            metadata: o.metadata("metadata")?,
        })
    }

    /// Canonical JSON.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// One tool invocation the gateway dispatches to the rein's session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    /// Caller's correlation id for the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Tool name; dispatched only when the profile's tool policy lists it.
    pub name: String,
    /// Arguments (content: never copied into evidence).
    pub arguments: Map<String, Value>,
}

impl ToolCall {
    /// A call with no arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            call_id: None,
            name: name.into(),
            arguments: Map::new(),
        }
    }

    /// Strict parse.
    ///
    /// # Errors
    /// The first violation.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ToolCall", prefix, value, &["call_id", "name", "arguments"])?;
        Ok(Self {
            call_id: o.opt_str("call_id")?,
            name: o.req_str("name")?,
            arguments: o.object("arguments")?,
        })
    }

    /// Canonical JSON.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// What the rein returned for one [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// The rein's own verdict. `false` is a rein-declared unsuccessful result: the
    /// execution stage fails.
    pub ok: bool,
    /// Tool output, any JSON (`null` when none). Direct-caller only.
    pub output: Value,
    /// Tool error text. Direct-caller only.
    pub error: Option<String>,
    /// Rein-specific, non-secret additions.
    pub metadata: Map<String, Value>,
}

impl ToolResult {
    /// A successful result with `output`.
    pub fn success(output: Value) -> Self {
        Self {
            ok: true,
            output,
            error: None,
            metadata: Map::new(),
        }
    }

    /// An unsuccessful result with an error text.
    pub fn failure(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            output: Value::Null,
            error: Some(error.into()),
            metadata: Map::new(),
        }
    }

    /// Strict parse.
    ///
    /// # Errors
    /// The first violation; sensitive metadata is `sensitive_metadata`.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open(
            "ToolResult",
            prefix,
            value,
            &["ok", "output", "error", "metadata"],
        )?;
        Ok(Self {
            ok: o.req_bool("ok")?,
            output: o.get("output").cloned().unwrap_or(Value::Null),
            error: o.opt_text("error")?,
            metadata: o.metadata("metadata")?,
        })
    }

    /// Canonical JSON.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}

/// The normalized facts a rein reports when its session ends. Every measurement is
/// `null` when unknown — never a guessed zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecutionSummary {
    /// Token usage of the session as a five-component split.
    pub tokens: Option<UsageSplit>,
    /// The rein's own measurement of the session, in milliseconds.
    pub duration_ms: Option<u64>,
    /// The model that actually served the session.
    pub resolved_model: Option<String>,
    /// The commit the session produced.
    pub commit: Option<String>,
    /// Artifact references the session produced.
    pub artifacts: Option<Vec<String>>,
    /// How much inner tool activity `tool_event_count` accounts for. Default
    /// `unavailable`.
    pub tool_event_visibility: ToolEventVisibility,
    /// Inner tool events counted; must be `null` when visibility is `unavailable` and
    /// present when it is `complete`.
    pub tool_event_count: Option<u64>,
    /// Rein-specific, non-secret additions (never copied into evidence).
    pub metadata: Map<String, Value>,
}

impl ExecutionSummary {
    const FIELDS: &'static [&'static str] = &[
        "tokens",
        "duration_ms",
        "resolved_model",
        "commit",
        "artifacts",
        "tool_event_visibility",
        "tool_event_count",
        "metadata",
    ];

    /// Strict parse.
    ///
    /// # Errors
    /// The first violation: `tokens` must be a valid closed UsageSplit; a
    /// `tool_event_count` with visibility `unavailable`, or a `complete` visibility without
    /// a count, is `invalid_field`; sensitive metadata is `sensitive_metadata`.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ExecutionSummary", prefix, value, Self::FIELDS)?;
        let tokens = o.opt_usage_split("tokens")?;
        let duration_ms = o.opt_u64("duration_ms")?;
        let resolved_model = o.opt_str("resolved_model")?;
        let commit = o.opt_str("commit")?;
        let artifacts = o.opt_str_list("artifacts")?;
        let tool_event_visibility = ToolEventVisibility::parse(&o, "tool_event_visibility")?;
        let tool_event_count = o.opt_u64("tool_event_count")?;
        let inconsistent = match tool_event_visibility {
            ToolEventVisibility::Unavailable => tool_event_count.is_some(),
            ToolEventVisibility::Complete => tool_event_count.is_none(),
            ToolEventVisibility::Partial => false,
        };
        if inconsistent {
            return Err(ContractError::InvalidField {
                model: o.model,
                field: o.path("tool_event_count"),
                reason: format!(
                    "tool_event_count must be {} when tool_event_visibility is {}",
                    if tool_event_count.is_some() {
                        "null"
                    } else {
                        "present"
                    },
                    tool_event_visibility.as_str()
                ),
            });
        }
        Ok(Self {
            tokens,
            duration_ms,
            resolved_model,
            commit,
            artifacts,
            tool_event_visibility,
            tool_event_count,
            metadata: o.metadata("metadata")?,
        })
    }

    /// Canonical JSON: unknown measurements are explicit `null`s.
    pub fn to_value(&self) -> Value {
        to_json(self)
    }
}
