//! Execution evidence and the gateway's result.
//!
//! [`ExecutionEvidence`] is safe for compact State Hub reporting. Seed 001 excludes raw
//! prompts, model output, tool output and credential material from it. The rule is
//! structural, not a filter: evidence is built only from
//!
//! * **identifiers** — values whose job is to link evidence to records, so they pass
//!   *when well-shaped*. Each has a [kind](IdentifierKind) with a shape; a value that
//!   does not have its kind's shape, or that carries credential material (a well-known
//!   secret prefix such as `hf_`, `npm_`, `pypi-`, `sk-`, `sk-ant-`, `ghp_`, `gho_`,
//!   `github_pat_`, `xox…-`, `AKIA…`, a JWT `eyJ…`, a URL password, or a random-looking
//!   run of letters and digits — see [`identifier_carries_secret`](super::safety::identifier_carries_secret)), becomes
//!   `[redacted]` and its field is named in `redacted_fields`. A URL loses its userinfo,
//!   query and fragment (also named in `redacted_fields`).
//!
//!   | evidence field | source | kind |
//!   |---|---|---|
//!   | `harness_profile_ref`, `assignment_ref`, `role_ref`, `duty_ref`, `goal_refs`, `resource_envelope_refs` | request | `ref` |
//!   | `repository` | request | `repository` |
//!   | `rein_id`, `model`, `tools_used` | resolved profile / rein | `ref` |
//!   | `sandbox_id` | sandbox handle | `ref` |
//!   | `resolved_model` | summary | `ref` |
//!   | `commit` | summary | `commit` |
//!   | `artifacts` | summary | `artifact` |
//!
//!   A well-shaped identifier reaches evidence verbatim, in its own field and nowhere
//!   else — whoever supplies an identifier decides what it says. Free text (anything
//!   with whitespace or punctuation outside the shape) and credential material never
//!   pass;
//! * **numbers, booleans and codes the gateway itself defines** (outcome, failure stage,
//!   failure code, refusal reasons, the abort code, statuses, counts, durations, token
//!   splits, visibility).
//!
//! Nothing else crosses: not the title or description, not rein `inputs`, not the session
//! map, not tool-call ids or arguments, not tool output or error text, not the name of a
//! tool the policy does not list, not any `metadata`, not credential references, not the
//! sandbox profile, not host failure messages. Tool output and error reach only the
//! direct caller, in [`GatewayResult`]; the error text with its secrets redacted by the
//! context-aware detector ([`redact_secrets`](super::safety::redact_secrets)), since error
//! details get logged.
//!
//! Identifiers are checked by the same detector: a `ref` such as `token:<value>` or
//! `password=<value>` is redacted by context, not only by shape. Free text that *does*
//! travel — the runner's report `summary_business` and `failure_type`, and the fields
//! progress copies from harness events — is redacted with the same detector before it
//! leaves (see [`runner_task`](crate::runner_task)).
//!
//! # Bounds
//!
//! Every integer is saturated at [`MAX_SAFE_INTEGER`] (2^53 − 1) so the evidence always
//! parses as its own strict model. `goal_refs` and `resource_envelope_refs` keep at most
//! [`GatewayConfig::max_evidence_refs`](super::GatewayConfig::max_evidence_refs) entries
//! and `artifacts` at most
//! [`GatewayConfig::max_evidence_artifacts`](super::GatewayConfig::max_evidence_artifacts)
//! (default 64 each); the entries beyond are replaced by one final marker entry
//! `[truncated:N]` (N = entries dropped).

use serde::Serialize;
use serde_json::Value;

use super::error::ContractError;
use super::fields::Obj;
use super::models::{ExecutionSummary, ToolEventVisibility, CONTRACT_VERSION};
use super::safety::{safe_identifier_as, IdentifierKind};
use crate::wire::{UsageSplit, MAX_SAFE_INTEGER};

/// Make `s` safe as a `ref`-kind evidence identifier (see the module docs and
/// [`safe_identifier_as`]). Returns the text and whether it was changed.
pub fn safe_identifier(s: &str) -> (String, bool) {
    safe_identifier_as(IdentifierKind::Ref, s)
}

/// The marker entry that ends a truncated evidence list: `[truncated:N]`.
pub fn truncation_marker(dropped: usize) -> String {
    format!("[truncated:{dropped}]")
}

fn clamp(n: u64) -> u64 {
    n.min(MAX_SAFE_INTEGER)
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
///
/// For an abort it is the stage the gateway was in: the stage whose action was
/// outstanding.
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
    /// The host aborted while the sandbox was being created or destroyed: the gateway
    /// does not know whether a sandbox exists, and the host owns its cleanup.
    Abandoned,
}

impl TeardownStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            TeardownStatus::NotNeeded => "not_needed",
            TeardownStatus::Destroyed => "destroyed",
            TeardownStatus::Failed => "failed",
            TeardownStatus::Abandoned => "abandoned",
        }
    }
}

/// What happened to the rein's session end. With `teardown` it keeps a failure visible
/// even when an earlier stage already failed (only the first failure is
/// `failure_stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionEndStatus {
    /// No session was started, so none was ended.
    NotAttempted,
    /// The rein ended its session and reported a summary.
    Ended,
    /// The rein could not end its session.
    Failed,
    /// The host aborted while the session end was outstanding.
    Abandoned,
}

impl SessionEndStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEndStatus::NotAttempted => "not_attempted",
            SessionEndStatus::Ended => "ended",
            SessionEndStatus::Failed => "failed",
            SessionEndStatus::Abandoned => "abandoned",
        }
    }
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
    /// Calls never reached because an earlier call (or an abort) ended the execution
    /// stage.
    pub skipped: u64,
    /// Dispatched calls whose outcome was never reported because the host aborted.
    pub abandoned: u64,
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
    /// `session_end_failed`, `teardown_failed`, `aborted`; `null` on success.
    pub failure_code: Option<String>,
    /// Refusal reason codes (see [`resolution`](super::resolution)), or the host's abort
    /// code when `failure_code` is `aborted`; empty otherwise.
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
    /// What happened to the rein's session end.
    pub session_end: SessionEndStatus,
    /// What happened to the sandbox. Once a sandbox exists, teardown is attempted on every
    /// path, so this is `destroyed`, `failed` or `abandoned` when `sandbox_id` is set.
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
    /// Inner tool events counted (`null` when visibility is `unavailable`; never `null`
    /// when it is `complete`).
    pub tool_event_count: Option<u64>,
    /// Names of the evidence fields whose value was redacted or stripped, once each, in
    /// the order the gateway fills them (request fields, `rein_id`, `model`,
    /// `sandbox_id`, `tools_used`, `resolved_model`, `commit`, `artifacts`).
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

    /// Copy the summary's facts in, capping visibility at `declared`. The summary may
    /// have been built as a Rust value without validation, so its claims are enforced
    /// here: a `complete` claim without a count is downgraded to `unavailable` (never an
    /// empty claim of completeness), an `unavailable` one carries no count, and
    /// `artifacts` keeps at most `max_artifacts` entries.
    pub(crate) fn absorb_summary(
        &mut self,
        summary: &ExecutionSummary,
        declared: ToolEventVisibility,
        max_artifacts: usize,
    ) {
        self.tokens = summary.tokens;
        self.rein_duration_ms = summary.duration_ms;
        self.resolved_model = summary
            .resolved_model
            .as_deref()
            .map(|s| self.ident("resolved_model", IdentifierKind::Ref, s));
        self.commit = summary
            .commit
            .as_deref()
            .map(|s| self.ident("commit", IdentifierKind::Commit, s));
        self.artifacts = summary
            .artifacts
            .as_ref()
            .map(|a| self.ident_list("artifacts", IdentifierKind::Artifact, a, max_artifacts));
        let rank = |v: ToolEventVisibility| match v {
            ToolEventVisibility::Unavailable => 0,
            ToolEventVisibility::Partial => 1,
            ToolEventVisibility::Complete => 2,
        };
        let mut vis = if rank(summary.tool_event_visibility) <= rank(declared) {
            summary.tool_event_visibility
        } else {
            declared
        };
        if vis == ToolEventVisibility::Complete && summary.tool_event_count.is_none() {
            vis = ToolEventVisibility::Unavailable;
        }
        self.tool_event_visibility = vis;
        self.tool_event_count = match vis {
            ToolEventVisibility::Unavailable => None,
            _ => summary.tool_event_count,
        };
    }

    /// A safe identifier of `kind`; records the field name when redacted.
    pub(crate) fn ident(&mut self, field: &str, kind: IdentifierKind, s: &str) -> String {
        let (out, changed) = safe_identifier_as(kind, s);
        if changed && !self.redacted_fields.iter().any(|f| f == field) {
            self.redacted_fields.push(field.to_owned());
        }
        out
    }

    /// Safe identifiers of `kind`, at most `max` of them, then a
    /// [truncation marker](truncation_marker) when entries were dropped.
    pub(crate) fn ident_list(
        &mut self,
        field: &str,
        kind: IdentifierKind,
        items: &[String],
        max: usize,
    ) -> Vec<String> {
        let mut out: Vec<String> = items
            .iter()
            .take(max)
            .map(|s| self.ident(field, kind, s))
            .collect();
        if items.len() > max {
            out.push(truncation_marker(items.len().saturating_sub(max)));
        }
        out
    }

    /// Saturate every integer at [`MAX_SAFE_INTEGER`].
    pub(crate) fn clamp_integers(&mut self) {
        let c = &mut self.tool_calls;
        for n in [
            &mut c.requested,
            &mut c.dispatched,
            &mut c.succeeded,
            &mut c.unsuccessful,
            &mut c.dispatch_failed,
            &mut c.denied,
            &mut c.skipped,
            &mut c.abandoned,
        ] {
            *n = clamp(*n);
        }
        self.duration_ms = clamp(self.duration_ms);
        self.rein_duration_ms = self.rein_duration_ms.map(clamp);
        self.tool_event_count = self.tool_event_count.map(clamp);
        if let Some(t) = &mut self.tokens {
            for n in [
                &mut t.cache_read,
                &mut t.cache_write,
                &mut t.fresh_input,
                &mut t.output,
                &mut t.thinking,
            ] {
                *n = clamp(*n);
            }
        }
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
            session_end: SessionEndStatus::NotAttempted,
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
        "session_end",
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
        let session_end = match o.opt_enum(
            "session_end",
            &["not_attempted", "ended", "failed", "abandoned"],
        )? {
            Some("not_attempted") => SessionEndStatus::NotAttempted,
            Some("ended") => SessionEndStatus::Ended,
            Some("failed") => SessionEndStatus::Failed,
            Some(_) => SessionEndStatus::Abandoned,
            None => {
                return Err(ContractError::MissingField {
                    model: o.model,
                    field: o.path("session_end"),
                })
            }
        };
        let teardown = match o.opt_enum(
            "teardown",
            &["not_needed", "destroyed", "failed", "abandoned"],
        )? {
            Some("not_needed") => TeardownStatus::NotNeeded,
            Some("destroyed") => TeardownStatus::Destroyed,
            Some("failed") => TeardownStatus::Failed,
            Some(_) => TeardownStatus::Abandoned,
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
                    "abandoned",
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
                abandoned: c.req_u64("abandoned")?,
            })
        })?;
        let tokens = o.opt_usage_split("tokens")?;
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
            session_end,
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
    /// Output of the last dispatched tool call whose result was reported; `null` when
    /// the last call was denied, failed to dispatch or was abandoned. Direct caller only;
    /// never reported.
    pub tool_output: Value,
    /// Error text of that tool call, else the message of the first `*_failed` report
    /// that carried one, with any secret in it redacted
    /// ([`redact_secrets`](super::safety::redact_secrets): error details get logged).
    /// Direct caller only; never reported.
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
