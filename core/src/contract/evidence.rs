//! Execution evidence and the gateway's result.
//!
//! [`ExecutionEvidence`] is safe for compact State Hub reporting. Its hygiene rule is
//! structural, not a filter: evidence is built only from
//!
//! * identifiers — the request's `harness_profile_ref`, `repository` and correlation refs,
//!   the resolved profile's id, rein id and approved model, the sandbox id, the tool names
//!   the profile's policy lists, and the summary's resolved model, commit and artifact
//!   references. Each passes [`safe_identifier`]: URL userinfo is stripped, and a value
//!   that looks like credential material, contains whitespace or control characters, or
//!   is longer than 256 characters becomes `[redacted]` (free text is never an
//!   identifier); the field's name is listed in `redacted_fields`;
//! * numbers, booleans and codes the gateway itself defines (outcome, failure stage,
//!   failure code, refusal reasons, counts, durations, token splits, visibility).
//!
//! Nothing else crosses: not the title or description, not rein `inputs`, not the session
//! map, not tool-call arguments, not tool output or error text, not the name of a tool
//! the policy does not list, not any `metadata`, not host error text. Tool output and
//! error reach only the direct caller, in [`GatewayResult`].

use serde::Serialize;
use serde_json::Value;

use super::error::ContractError;
use super::fields::Obj;
use super::models::{ExecutionSummary, ToolEventVisibility, CONTRACT_VERSION};
use super::safety::{redact_identifier, REDACTED};
use crate::wire::UsageSplit;

/// Longest text accepted as an identifier in evidence.
pub const MAX_IDENTIFIER_CHARS: usize = 256;

/// Make `s` safe as an evidence identifier (see the module docs). Returns the text and
/// whether it was changed.
pub fn safe_identifier(s: &str) -> (String, bool) {
    let (out, changed) = redact_identifier(s);
    if out.chars().count() > MAX_IDENTIFIER_CHARS
        || out.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return (REDACTED.to_owned(), true);
    }
    (out, changed)
}

/// The normalized outcome of one governed execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every stage completed and the rein reported success.
    Succeeded,
    /// Governed execution did not proceed: profile resolution refused the request, so
    /// nothing was created.
    Refused,
    /// An attempted lifecycle did not complete successfully.
    Failed,
}

impl Outcome {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

/// The lifecycle stage where a refusal or failure happened (seed 001's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureStage {
    /// Profile resolution refused (`unknown`, `disabled`, `ambiguous`, `incompatible`,
    /// `unsafe`).
    Resolution,
    /// The sandbox could not be created.
    SandboxCreate,
    /// The rein could not start its session.
    SessionStart,
    /// A tool call failed, was denied by the policy, or the rein declared an unsuccessful
    /// result.
    Execution,
    /// The rein could not end its session.
    SessionEnd,
    /// The sandbox could not be destroyed.
    Teardown,
}

impl FailureStage {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureStage::Resolution => "resolution",
            FailureStage::SandboxCreate => "sandbox_create",
            FailureStage::SessionStart => "session_start",
            FailureStage::Execution => "execution",
            FailureStage::SessionEnd => "session_end",
            FailureStage::Teardown => "teardown",
        }
    }
}

/// What happened to the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TeardownStatus {
    /// No sandbox was ever created.
    NotNeeded,
    /// The sandbox was destroyed.
    Destroyed,
    /// Destruction was attempted and failed.
    Failed,
}

/// Counts of the tool calls of one execution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ToolCallCounts {
    /// Calls in the request.
    pub requested: u64,
    /// Calls handed to the rein (`dispatch_tool` actions).
    pub dispatched: u64,
    /// Dispatched calls whose result had `ok: true`.
    pub succeeded: u64,
    /// Dispatched calls whose result had `ok: false` (rein-declared unsuccessful).
    pub unsuccessful: u64,
    /// Dispatched calls the host reported as failed to dispatch.
    pub dispatch_failed: u64,
    /// Calls not dispatched because the profile's tool policy does not list the tool.
    pub denied: u64,
    /// Calls never reached because an earlier call ended the execution stage.
    pub skipped: u64,
}

/// Compact, content-free evidence of one governed execution (see the module docs).
/// Fields are always present; unknown measurements are `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionEvidence {
    /// [`CONTRACT_VERSION`].
    pub contract_version: String,
    /// Normalized outcome.
    pub outcome: Outcome,
    /// The first stage that refused or failed; `null` on success.
    pub failure_stage: Option<FailureStage>,
    /// Gateway-defined failure code: a refusal kind (`unknown`, `disabled`, `ambiguous`,
    /// `incompatible`, `unsafe`) or `sandbox_create_failed`, `session_start_failed`,
    /// `tool_not_allowed`, `tool_dispatch_failed`, `rein_reported_failure`,
    /// `session_end_failed`, `teardown_failed`; `null` on success.
    pub failure_code: Option<String>,
    /// Refusal reason codes (see [`resolution`](super::resolution)); empty otherwise.
    pub failure_reasons: Vec<String>,
    /// The request's profile reference.
    pub harness_profile_ref: String,
    /// The resolved rein, `null` when resolution refused.
    pub rein_id: Option<String>,
    /// The profile's approved model, `null` when resolution refused.
    pub model: Option<String>,
    /// The request's repository.
    pub repository: String,
    /// Correlation reference.
    pub assignment_ref: Option<String>,
    /// Correlation reference.
    pub role_ref: Option<String>,
    /// Correlation reference.
    pub duty_ref: Option<String>,
    /// Correlation references.
    pub goal_refs: Vec<String>,
    /// Correlation references.
    pub resource_envelope_refs: Vec<String>,
    /// The sandbox's id, `null` when none was created.
    pub sandbox_id: Option<String>,
    /// What happened to the sandbox. Once a sandbox exists, teardown is attempted on every
    /// path, so this is never `not_needed` when `sandbox_id` is set.
    pub teardown: TeardownStatus,
    /// Tool-call counts.
    pub tool_calls: ToolCallCounts,
    /// Names of the dispatched tools (policy-listed names only), first use order, unique.
    pub tools_used: Vec<String>,
    /// Gateway-measured duration from `execute` to the result, from the host's `now_ms`.
    pub duration_ms: u64,
    /// The rein's own session duration, `null` when unknown.
    pub rein_duration_ms: Option<u64>,
    /// Session tokens, `null` when unknown.
    pub tokens: Option<UsageSplit>,
    /// The model that served the session, `null` when unknown.
    pub resolved_model: Option<String>,
    /// The commit produced, `null` when unknown.
    pub commit: Option<String>,
    /// Artifact references, `null` when unknown.
    pub artifacts: Option<Vec<String>>,
    /// Inner tool-event visibility: the summary's claim, capped at what the rein
    /// descriptor declares; `unavailable` when no summary was received.
    pub tool_event_visibility: ToolEventVisibility,
    /// Inner tool events counted (`null` when visibility is `unavailable`).
    pub tool_event_count: Option<u64>,
    /// Names of the evidence fields whose value was redacted, in field order.
    pub redacted_fields: Vec<String>,
}

impl ExecutionEvidence {
    /// Canonical JSON (every field present, in declaration order).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Compact JSON text for State Hub reporting.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// Copy the summary's facts in, capping visibility at `declared`.
    pub(crate) fn absorb_summary(
        &mut self,
        summary: &ExecutionSummary,
        declared: ToolEventVisibility,
    ) {
        self.tokens = summary.tokens;
        self.rein_duration_ms = summary.duration_ms;
        self.resolved_model = summary
            .resolved_model
            .as_deref()
            .map(|s| self.ident("resolved_model", s));
        self.commit = summary.commit.as_deref().map(|s| self.ident("commit", s));
        self.artifacts = summary.artifacts.as_ref().map(|a| {
            a.iter()
                .map(|s| self.ident("artifacts", s))
                .collect::<Vec<_>>()
        });
        let rank = |v: ToolEventVisibility| match v {
            ToolEventVisibility::Unavailable => 0,
            ToolEventVisibility::Partial => 1,
            ToolEventVisibility::Complete => 2,
        };
        let vis = if rank(summary.tool_event_visibility) <= rank(declared) {
            summary.tool_event_visibility
        } else {
            declared
        };
        self.tool_event_visibility = vis;
        self.tool_event_count = match vis {
            ToolEventVisibility::Unavailable => None,
            _ => summary.tool_event_count,
        };
    }

    /// A safe identifier; records the field name when redacted.
    pub(crate) fn ident(&mut self, field: &str, s: &str) -> String {
        let (out, changed) = safe_identifier(s);
        if changed && !self.redacted_fields.iter().any(|f| f == field) {
            self.redacted_fields.push(field.to_owned());
        }
        out
    }

    pub(crate) fn blank(contract_version: &str) -> Self {
        Self {
            contract_version: contract_version.to_owned(),
            outcome: Outcome::Succeeded,
            failure_stage: None,
            failure_code: None,
            failure_reasons: Vec::new(),
            harness_profile_ref: String::new(),
            rein_id: None,
            model: None,
            repository: String::new(),
            assignment_ref: None,
            role_ref: None,
            duty_ref: None,
            goal_refs: Vec::new(),
            resource_envelope_refs: Vec::new(),
            sandbox_id: None,
            teardown: TeardownStatus::NotNeeded,
            tool_calls: ToolCallCounts::default(),
            tools_used: Vec::new(),
            duration_ms: 0,
            rein_duration_ms: None,
            tokens: None,
            resolved_model: None,
            commit: None,
            artifacts: None,
            tool_event_visibility: ToolEventVisibility::Unavailable,
            tool_event_count: None,
            redacted_fields: Vec::new(),
        }
    }
}

impl ExecutionEvidence {
    const FIELDS: &'static [&'static str] = &[
        "contract_version",
        "outcome",
        "failure_stage",
        "failure_code",
        "failure_reasons",
        "harness_profile_ref",
        "rein_id",
        "model",
        "repository",
        "assignment_ref",
        "role_ref",
        "duty_ref",
        "goal_refs",
        "resource_envelope_refs",
        "sandbox_id",
        "teardown",
        "tool_calls",
        "tools_used",
        "duration_ms",
        "rein_duration_ms",
        "tokens",
        "resolved_model",
        "commit",
        "artifacts",
        "tool_event_visibility",
        "tool_event_count",
        "redacted_fields",
    ];

    /// Strict parse of evidence JSON (for State Hub readers): every field must be present
    /// (nullable ones may be `null`), no other field is allowed, enum values and counts
    /// are checked. It does not re-run redaction: it reads what a gateway produced.
    ///
    /// # Errors
    /// The first violation, as for every contract model.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        Self::parse_at(value, "")
    }

    pub(crate) fn parse_at(value: &Value, prefix: &str) -> Result<Self, ContractError> {
        let o = Obj::open("ExecutionEvidence", prefix, value, Self::FIELDS)?;
        for key in Self::FIELDS {
            o.present(key)?;
        }
        let outcome = match o.opt_enum("outcome", &["succeeded", "refused", "failed"])? {
            Some("succeeded") => Outcome::Succeeded,
            Some("refused") => Outcome::Refused,
            Some(_) => Outcome::Failed,
            None => {
                return Err(ContractError::MissingField {
                    model: o.model,
                    field: o.path("outcome"),
                })
            }
        };
        let failure_stage = o
            .opt_enum(
                "failure_stage",
                &[
                    "resolution",
                    "sandbox_create",
                    "session_start",
                    "execution",
                    "session_end",
                    "teardown",
                ],
            )?
            .map(|s| match s {
                "resolution" => FailureStage::Resolution,
                "sandbox_create" => FailureStage::SandboxCreate,
                "session_start" => FailureStage::SessionStart,
                "execution" => FailureStage::Execution,
                "session_end" => FailureStage::SessionEnd,
                _ => FailureStage::Teardown,
            });
        let teardown = match o.opt_enum("teardown", &["not_needed", "destroyed", "failed"])? {
            Some("not_needed") => TeardownStatus::NotNeeded,
            Some("destroyed") => TeardownStatus::Destroyed,
            Some(_) => TeardownStatus::Failed,
            None => {
                return Err(ContractError::MissingField {
                    model: o.model,
                    field: o.path("teardown"),
                })
            }
        };
        let tool_calls = o.nested("tool_calls", |v, p| {
            let c = Obj::open(
                "ToolCallCounts",
                p,
                v,
                &[
                    "requested",
                    "dispatched",
                    "succeeded",
                    "unsuccessful",
                    "dispatch_failed",
                    "denied",
                    "skipped",
                ],
            )?;
            Ok(ToolCallCounts {
                requested: c.req_u64("requested")?,
                dispatched: c.req_u64("dispatched")?,
                succeeded: c.req_u64("succeeded")?,
                unsuccessful: c.req_u64("unsuccessful")?,
                dispatch_failed: c.req_u64("dispatch_failed")?,
                denied: c.req_u64("denied")?,
                skipped: c.req_u64("skipped")?,
            })
        })?;
        let tokens = match o.get("tokens") {
            None => None,
            Some(v) => {
                Some(
                    UsageSplit::from_value(v).map_err(|e| ContractError::InvalidField {
                        model: o.model,
                        field: o.path("tokens"),
                        reason: e.to_string(),
                    })?,
                )
            }
        };
        let tool_event_visibility = match o.opt_enum(
            "tool_event_visibility",
            &["complete", "partial", "unavailable"],
        )? {
            Some("complete") => ToolEventVisibility::Complete,
            Some("partial") => ToolEventVisibility::Partial,
            _ => ToolEventVisibility::Unavailable,
        };
        Ok(Self {
            contract_version: o.req_str("contract_version")?,
            outcome,
            failure_stage,
            failure_code: o.opt_str("failure_code")?,
            failure_reasons: o.str_list("failure_reasons")?,
            harness_profile_ref: o.req_str("harness_profile_ref")?,
            rein_id: o.opt_str("rein_id")?,
            model: o.opt_str("model")?,
            repository: o.req_str("repository")?,
            assignment_ref: o.opt_str("assignment_ref")?,
            role_ref: o.opt_str("role_ref")?,
            duty_ref: o.opt_str("duty_ref")?,
            goal_refs: o.str_list("goal_refs")?,
            resource_envelope_refs: o.str_list("resource_envelope_refs")?,
            sandbox_id: o.opt_str("sandbox_id")?,
            teardown,
            tool_calls,
            tools_used: o.str_list("tools_used")?,
            duration_ms: o.req_u64("duration_ms")?,
            rein_duration_ms: o.opt_u64("rein_duration_ms")?,
            tokens,
            resolved_model: o.opt_str("resolved_model")?,
            commit: o.opt_str("commit")?,
            artifacts: o.opt_str_list("artifacts")?,
            tool_event_visibility,
            tool_event_count: o.opt_u64("tool_event_count")?,
            redacted_fields: o.str_list("redacted_fields")?,
        })
    }
}

impl Default for ExecutionEvidence {
    fn default() -> Self {
        Self::blank(CONTRACT_VERSION)
    }
}

/// What the gateway returns to its direct caller.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayResult {
    /// Derived from the normalized outcome: `true` exactly when it is `succeeded`.
    pub ok: bool,
    /// Compact, content-free evidence; the only part fit for the State Hub.
    pub evidence: ExecutionEvidence,
    /// Output of the last dispatched tool call. Direct caller only; never reported.
    pub tool_output: Value,
    /// Error text of the last dispatched tool call. Direct caller only; never reported.
    pub tool_error: Option<String>,
}

impl GatewayResult {
    /// Canonical JSON: `{"ok", "evidence", "tool_output", "tool_error"}`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Strict parse: exactly `ok` (boolean), `evidence` (strict ExecutionEvidence),
    /// `tool_output` (any JSON, `null` when absent) and `tool_error` (text or `null`).
    /// `ok` must equal `evidence.outcome == "succeeded"`.
    ///
    /// # Errors
    /// The first violation; an `ok` that contradicts the outcome is `invalid_field` at
    /// `ok`.
    pub fn from_value(value: &Value) -> Result<Self, ContractError> {
        let o = Obj::open(
            "GatewayResult",
            "",
            value,
            &["ok", "evidence", "tool_output", "tool_error"],
        )?;
        let ok = o.req_bool("ok")?;
        let evidence = o.nested("evidence", ExecutionEvidence::parse_at)?;
        if ok != (evidence.outcome == Outcome::Succeeded) {
            return Err(ContractError::InvalidField {
                model: o.model,
                field: o.path("ok"),
                reason: format!(
                    "ok must be derived from the outcome ({})",
                    evidence.outcome.as_str()
                ),
            });
        }
        Ok(Self {
            ok,
            evidence,
            tool_output: o.get("tool_output").cloned().unwrap_or(Value::Null),
            tool_error: o.opt_text("tool_error")?,
        })
    }
}
