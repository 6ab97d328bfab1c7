//! The harness-execution contract (seed 001): the strict contract-1.0 models as records,
//! profile resolution, the gateway lifecycle machine (typed inputs and outputs), the rein
//! helpers and evidence redaction.
//!
//! Records go to the core through the core's own strict readers (each record is turned
//! into its JSON form and read by the model's `from_value`), so a record built by the host
//! meets exactly the rules of one read from JSON. Only the open values — `metadata`, tool
//! `arguments` and `output`, the gateway's generic `answer` value — are JSON text.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use serde_json::{json, Map, Value};
use stapel_runner_protocol::contract::{
    self as core_contract, rein, safety, Catalog as CoreCatalog, ContractError,
    ExecutionEvidence as CoreEvidence, ExecutionRequest as CoreRequest,
    ExecutionSummary as CoreSummary, FailureStage as CoreStage, Gateway, GatewayAction,
    GatewayConfig, GatewayError, GatewayInput as CoreInput, GatewayOutput as CoreOutput,
    GatewayResult as CoreResult, HarnessProfile as CoreProfile, Outcome as CoreOutcome,
    ReinDescriptor as CoreRein, ReinSession, SandboxHandle as CoreSandbox,
    SessionEndStatus as CoreSessionEnd, SessionIds, StringMap, TeardownStatus as CoreTeardown,
    ToolCall as CoreCall, ToolEventVisibility as CoreVisibility, ToolResult as CoreToolResult,
};

use crate::adapter::{RoleSpec, UsageSplit};
use crate::errors::ProtocolError;
use crate::jsontext::{object_serde, parse_serde, serde_object_text};

impl From<ContractError> for ProtocolError {
    fn from(e: ContractError) -> Self {
        // As the core: every model error names its model and field (`""` for the model
        // itself, and both `""` for `unknown_model`, where no model was being built).
        ProtocolError::Contract {
            code: e.code().to_owned(),
            kind: "contract".to_owned(),
            detail: e.to_string(),
            model: Some(e.model().to_owned()),
            field: Some(e.field().to_owned()),
        }
    }
}

fn gateway_error(e: GatewayError) -> ProtocolError {
    match e {
        GatewayError::Model(m) => ProtocolError::from(m),
        other => ProtocolError::Contract {
            code: other.code().to_owned(),
            kind: "contract".to_owned(),
            detail: other.to_string(),
            model: None,
            field: None,
        },
    }
}

// ---------------------------------------------------------------------------------------
// JSON forms of records (read back by the core's strict readers)

fn put(m: &mut Map<String, Value>, key: &str, v: impl Into<Value>) {
    m.insert(key.to_owned(), v.into());
}

fn put_opt<T: Into<Value>>(m: &mut Map<String, Value>, key: &str, v: Option<T>) {
    if let Some(v) = v {
        m.insert(key.to_owned(), v.into());
    }
}

fn open_object(text: &str) -> Result<Value, ProtocolError> {
    Ok(Value::Object(object_serde(text)?))
}

fn string_map_json(m: &HashMap<String, String>) -> Value {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    Value::Object(
        keys.into_iter()
            .map(|k| (k.clone(), Value::String(m[k].clone())))
            .collect(),
    )
}

fn string_map_out(m: &StringMap) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn string_map_in(m: &HashMap<String, String>) -> StringMap {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| (k.clone(), m[k].clone()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// models

/// How much of a rein's inner tool activity its summary can account for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ToolEventVisibility {
    /// Every inner tool event is counted.
    Complete,
    /// Some are.
    Partial,
    /// None are (the default).
    Unavailable,
}

impl From<CoreVisibility> for ToolEventVisibility {
    fn from(v: CoreVisibility) -> Self {
        match v {
            CoreVisibility::Complete => Self::Complete,
            CoreVisibility::Partial => Self::Partial,
            CoreVisibility::Unavailable => Self::Unavailable,
        }
    }
}

impl ToolEventVisibility {
    fn as_str(self) -> &'static str {
        match self {
            Self::Complete => CoreVisibility::Complete.as_str(),
            Self::Partial => CoreVisibility::Partial.as_str(),
            Self::Unavailable => CoreVisibility::Unavailable.as_str(),
        }
    }
}

/// A consumer's request for one governed execution.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ExecutionRequest {
    /// The harness profile to run (`profile_id` or a reference the catalog resolves).
    pub harness_profile_ref: String,
    /// Repository to work on.
    pub repository: String,
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Assignment reference.
    #[uniffi(default = None)]
    pub assignment_ref: Option<String>,
    /// Role reference.
    #[uniffi(default = None)]
    pub role_ref: Option<String>,
    /// Duty reference.
    #[uniffi(default = None)]
    pub duty_ref: Option<String>,
    /// Goal references.
    #[uniffi(default = [])]
    pub goal_refs: Vec<String>,
    /// Resource envelope references.
    #[uniffi(default = [])]
    pub resource_envelope_refs: Vec<String>,
}

impl From<&CoreRequest> for ExecutionRequest {
    fn from(r: &CoreRequest) -> Self {
        Self {
            harness_profile_ref: r.harness_profile_ref.clone(),
            repository: r.repository.clone(),
            title: r.title.clone(),
            description: r.description.clone(),
            assignment_ref: r.assignment_ref.clone(),
            role_ref: r.role_ref.clone(),
            duty_ref: r.duty_ref.clone(),
            goal_refs: r.goal_refs.clone(),
            resource_envelope_refs: r.resource_envelope_refs.clone(),
        }
    }
}

impl ExecutionRequest {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        put(
            &mut m,
            "harness_profile_ref",
            self.harness_profile_ref.as_str(),
        );
        put(&mut m, "repository", self.repository.as_str());
        put(&mut m, "title", self.title.as_str());
        put(&mut m, "description", self.description.as_str());
        put_opt(&mut m, "assignment_ref", self.assignment_ref.clone());
        put_opt(&mut m, "role_ref", self.role_ref.clone());
        put_opt(&mut m, "duty_ref", self.duty_ref.clone());
        put(&mut m, "goal_refs", self.goal_refs.clone());
        put(
            &mut m,
            "resource_envelope_refs",
            self.resource_envelope_refs.clone(),
        );
        Value::Object(m)
    }
}

/// A harness profile: which rein runs which model in which sandbox, with which tools.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct HarnessProfile {
    /// `1.0`.
    pub contract_version: String,
    /// Profile id.
    pub profile_id: String,
    /// The rein's id.
    pub rein: String,
    /// Whether the profile may be resolved.
    pub enabled: bool,
    /// Model.
    pub model: String,
    /// The sand-boxer template.
    pub sandbox_profile: String,
    /// Tools the rein's session may call (`tool_policy.allowed_tools`).
    pub allowed_tools: Vec<String>,
    /// Credential references (never values).
    pub credential_refs: Vec<String>,
    /// Declared open metadata: a JSON object text.
    pub metadata: String,
}

impl From<&CoreProfile> for HarnessProfile {
    fn from(p: &CoreProfile) -> Self {
        Self {
            contract_version: p.contract_version.clone(),
            profile_id: p.profile_id.clone(),
            rein: p.rein.clone(),
            enabled: p.enabled,
            model: p.model.clone(),
            sandbox_profile: p.sandbox_profile.clone(),
            allowed_tools: p.tool_policy.allowed_tools.clone(),
            credential_refs: p.credential_refs.clone(),
            metadata: serde_object_text(&p.metadata),
        }
    }
}

impl HarnessProfile {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        let mut m = Map::new();
        put(&mut m, "contract_version", self.contract_version.as_str());
        put(&mut m, "profile_id", self.profile_id.as_str());
        put(&mut m, "rein", self.rein.as_str());
        put(&mut m, "enabled", self.enabled);
        put(&mut m, "model", self.model.as_str());
        put(&mut m, "sandbox_profile", self.sandbox_profile.as_str());
        put(
            &mut m,
            "tool_policy",
            json!({ "allowed_tools": self.allowed_tools }),
        );
        put(&mut m, "credential_refs", self.credential_refs.clone());
        put(&mut m, "metadata", open_object(&self.metadata)?);
        Ok(Value::Object(m))
    }

    fn to_core(&self) -> Result<CoreProfile, ProtocolError> {
        Ok(CoreProfile::from_value(&self.to_json()?)?)
    }
}

/// A rein's descriptor.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ReinDescriptor {
    /// Rein id.
    pub rein_id: String,
    /// `1.0`.
    pub contract_version: String,
    /// What its summaries can account for.
    pub tool_event_visibility: ToolEventVisibility,
    /// Declared open metadata: a JSON object text.
    pub metadata: String,
}

impl From<&CoreRein> for ReinDescriptor {
    fn from(r: &CoreRein) -> Self {
        Self {
            rein_id: r.rein_id.clone(),
            contract_version: r.contract_version.clone(),
            tool_event_visibility: r.tool_event_visibility.into(),
            metadata: serde_object_text(&r.metadata),
        }
    }
}

impl ReinDescriptor {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        Ok(json!({
            "rein_id": self.rein_id,
            "contract_version": self.contract_version,
            "tool_event_visibility": self.tool_event_visibility.as_str(),
            "metadata": open_object(&self.metadata)?,
        }))
    }
}

/// The sand-boxer's handle on a provisioned sandbox.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SandboxHandle {
    /// Sandbox id.
    pub sandbox_id: String,
    /// Declared open metadata: a JSON object text.
    #[uniffi(default = "{}")]
    pub metadata: String,
}

impl From<&CoreSandbox> for SandboxHandle {
    fn from(s: &CoreSandbox) -> Self {
        Self {
            sandbox_id: s.sandbox_id.clone(),
            metadata: serde_object_text(&s.metadata),
        }
    }
}

impl SandboxHandle {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        Ok(json!({"sandbox_id": self.sandbox_id, "metadata": open_object(&self.metadata)?}))
    }

    fn to_core(&self) -> Result<CoreSandbox, ProtocolError> {
        Ok(CoreSandbox::from_value(&self.to_json()?)?)
    }
}

/// One tool invocation the gateway dispatches to the rein's session.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// The caller's id for the call.
    #[uniffi(default = None)]
    pub call_id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments: a JSON object text (open).
    #[uniffi(default = "{}")]
    pub arguments: String,
}

impl From<&CoreCall> for ToolCall {
    fn from(c: &CoreCall) -> Self {
        Self {
            call_id: c.call_id.clone(),
            name: c.name.clone(),
            arguments: serde_object_text(&c.arguments),
        }
    }
}

impl ToolCall {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        let mut m = Map::new();
        put_opt(&mut m, "call_id", self.call_id.clone());
        put(&mut m, "name", self.name.as_str());
        put(&mut m, "arguments", open_object(&self.arguments)?);
        Ok(Value::Object(m))
    }
}

/// What the rein returned for one tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolResult {
    /// Success.
    pub ok: bool,
    /// The output: any JSON value, as JSON text (open; `null` when none).
    #[uniffi(default = "null")]
    pub output: String,
    /// The error text.
    #[uniffi(default = None)]
    pub error: Option<String>,
    /// Declared open metadata: a JSON object text.
    #[uniffi(default = "{}")]
    pub metadata: String,
}

impl From<&CoreToolResult> for ToolResult {
    fn from(r: &CoreToolResult) -> Self {
        Self {
            ok: r.ok,
            output: r.output.to_string(),
            error: r.error.clone(),
            metadata: serde_object_text(&r.metadata),
        }
    }
}

impl ToolResult {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        let mut m = Map::new();
        put(&mut m, "ok", self.ok);
        put(&mut m, "output", parse_serde(&self.output)?);
        put_opt(&mut m, "error", self.error.clone());
        put(&mut m, "metadata", open_object(&self.metadata)?);
        Ok(Value::Object(m))
    }
}

/// The normalized facts a rein reports when its session ends (`None`: unknown).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ExecutionSummary {
    /// Token usage.
    #[uniffi(default = None)]
    pub tokens: Option<UsageSplit>,
    /// Duration.
    #[uniffi(default = None)]
    pub duration_ms: Option<u64>,
    /// The model that actually ran.
    #[uniffi(default = None)]
    pub resolved_model: Option<String>,
    /// Resulting commit.
    #[uniffi(default = None)]
    pub commit: Option<String>,
    /// Artifact references.
    #[uniffi(default = None)]
    pub artifacts: Option<Vec<String>>,
    /// What the tool event count accounts for.
    pub tool_event_visibility: ToolEventVisibility,
    /// Inner tool events counted.
    #[uniffi(default = None)]
    pub tool_event_count: Option<u64>,
    /// Declared open metadata: a JSON object text.
    #[uniffi(default = "{}")]
    pub metadata: String,
}

impl From<&CoreSummary> for ExecutionSummary {
    fn from(s: &CoreSummary) -> Self {
        Self {
            tokens: s.tokens.as_ref().map(UsageSplit::from),
            duration_ms: s.duration_ms,
            resolved_model: s.resolved_model.clone(),
            commit: s.commit.clone(),
            artifacts: s.artifacts.clone(),
            tool_event_visibility: s.tool_event_visibility.into(),
            tool_event_count: s.tool_event_count,
            metadata: serde_object_text(&s.metadata),
        }
    }
}

impl ExecutionSummary {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        Ok(json!({
            "tokens": self.tokens.map(UsageSplit::to_json),
            "duration_ms": self.duration_ms,
            "resolved_model": self.resolved_model,
            "commit": self.commit,
            "artifacts": self.artifacts,
            "tool_event_visibility": self.tool_event_visibility.as_str(),
            "tool_event_count": self.tool_event_count,
            "metadata": open_object(&self.metadata)?,
        }))
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Outcome {
    /// The tool calls ran and succeeded.
    Succeeded,
    /// Resolution refused the request.
    Refused,
    /// A stage failed.
    Failed,
}

/// The lifecycle stage that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum FailureStage {
    /// Profile resolution.
    Resolution,
    /// Sandbox creation.
    SandboxCreate,
    /// Session start.
    SessionStart,
    /// Tool execution.
    Execution,
    /// Session end.
    SessionEnd,
    /// Teardown.
    Teardown,
}

/// What happened to the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TeardownStatus {
    /// No sandbox was created.
    NotNeeded,
    /// Destroyed.
    Destroyed,
    /// Destruction failed.
    Failed,
    /// Given up (the gateway could not name it).
    Abandoned,
}

/// What happened to the rein's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum SessionEndStatus {
    /// No session was started.
    NotAttempted,
    /// Ended.
    Ended,
    /// Ending failed.
    Failed,
    /// Given up.
    Abandoned,
}

/// Tool calls by fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct ToolCallCounts {
    /// In the request.
    pub requested: u64,
    /// Handed to the rein.
    pub dispatched: u64,
    /// Returned `ok: true`.
    pub succeeded: u64,
    /// Returned `ok: false`.
    pub unsuccessful: u64,
    /// Could not be dispatched.
    pub dispatch_failed: u64,
    /// Refused by the tool policy.
    pub denied: u64,
    /// Not reached after a failure.
    pub skipped: u64,
    /// Given up on (abort).
    pub abandoned: u64,
}

/// The evidence of one execution: what happened, with failure stage, never content.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ExecutionEvidence {
    /// `1.0`.
    pub contract_version: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The failed stage.
    pub failure_stage: Option<FailureStage>,
    /// The failure's stable code.
    pub failure_code: Option<String>,
    /// Reason codes.
    pub failure_reasons: Vec<String>,
    /// The requested profile (made safe).
    pub harness_profile_ref: String,
    /// The rein.
    pub rein_id: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The repository (made safe).
    pub repository: String,
    /// Assignment reference.
    pub assignment_ref: Option<String>,
    /// Role reference.
    pub role_ref: Option<String>,
    /// Duty reference.
    pub duty_ref: Option<String>,
    /// Goal references.
    pub goal_refs: Vec<String>,
    /// Resource envelope references.
    pub resource_envelope_refs: Vec<String>,
    /// The sandbox.
    pub sandbox_id: Option<String>,
    /// The session's end.
    pub session_end: SessionEndStatus,
    /// The sandbox's teardown.
    pub teardown: TeardownStatus,
    /// Tool calls by fate.
    pub tool_calls: ToolCallCounts,
    /// Tools used, in order.
    pub tools_used: Vec<String>,
    /// Wall time of the execution.
    pub duration_ms: u64,
    /// The rein's own duration.
    pub rein_duration_ms: Option<u64>,
    /// Token usage.
    pub tokens: Option<UsageSplit>,
    /// The model that actually ran.
    pub resolved_model: Option<String>,
    /// Resulting commit.
    pub commit: Option<String>,
    /// Artifact references.
    pub artifacts: Option<Vec<String>>,
    /// What the tool event count accounts for.
    pub tool_event_visibility: ToolEventVisibility,
    /// Inner tool events counted.
    pub tool_event_count: Option<u64>,
    /// Fields whose values were redacted.
    pub redacted_fields: Vec<String>,
}

fn outcome(o: CoreOutcome) -> Outcome {
    match o {
        CoreOutcome::Succeeded => Outcome::Succeeded,
        CoreOutcome::Refused => Outcome::Refused,
        CoreOutcome::Failed => Outcome::Failed,
    }
}

fn failure_stage(s: CoreStage) -> FailureStage {
    match s {
        CoreStage::Resolution => FailureStage::Resolution,
        CoreStage::SandboxCreate => FailureStage::SandboxCreate,
        CoreStage::SessionStart => FailureStage::SessionStart,
        CoreStage::Execution => FailureStage::Execution,
        CoreStage::SessionEnd => FailureStage::SessionEnd,
        CoreStage::Teardown => FailureStage::Teardown,
    }
}

fn teardown(t: CoreTeardown) -> TeardownStatus {
    match t {
        CoreTeardown::NotNeeded => TeardownStatus::NotNeeded,
        CoreTeardown::Destroyed => TeardownStatus::Destroyed,
        CoreTeardown::Failed => TeardownStatus::Failed,
        CoreTeardown::Abandoned => TeardownStatus::Abandoned,
    }
}

fn session_end(s: CoreSessionEnd) -> SessionEndStatus {
    match s {
        CoreSessionEnd::NotAttempted => SessionEndStatus::NotAttempted,
        CoreSessionEnd::Ended => SessionEndStatus::Ended,
        CoreSessionEnd::Failed => SessionEndStatus::Failed,
        CoreSessionEnd::Abandoned => SessionEndStatus::Abandoned,
    }
}

impl From<&CoreEvidence> for ExecutionEvidence {
    fn from(e: &CoreEvidence) -> Self {
        let c = &e.tool_calls;
        Self {
            contract_version: e.contract_version.clone(),
            outcome: outcome(e.outcome),
            failure_stage: e.failure_stage.map(failure_stage),
            failure_code: e.failure_code.clone(),
            failure_reasons: e.failure_reasons.clone(),
            harness_profile_ref: e.harness_profile_ref.clone(),
            rein_id: e.rein_id.clone(),
            model: e.model.clone(),
            repository: e.repository.clone(),
            assignment_ref: e.assignment_ref.clone(),
            role_ref: e.role_ref.clone(),
            duty_ref: e.duty_ref.clone(),
            goal_refs: e.goal_refs.clone(),
            resource_envelope_refs: e.resource_envelope_refs.clone(),
            sandbox_id: e.sandbox_id.clone(),
            session_end: session_end(e.session_end),
            teardown: teardown(e.teardown),
            tool_calls: ToolCallCounts {
                requested: c.requested,
                dispatched: c.dispatched,
                succeeded: c.succeeded,
                unsuccessful: c.unsuccessful,
                dispatch_failed: c.dispatch_failed,
                denied: c.denied,
                skipped: c.skipped,
                abandoned: c.abandoned,
            },
            tools_used: e.tools_used.clone(),
            duration_ms: e.duration_ms,
            rein_duration_ms: e.rein_duration_ms,
            tokens: e.tokens.as_ref().map(UsageSplit::from),
            resolved_model: e.resolved_model.clone(),
            commit: e.commit.clone(),
            artifacts: e.artifacts.clone(),
            tool_event_visibility: e.tool_event_visibility.into(),
            tool_event_count: e.tool_event_count,
            redacted_fields: e.redacted_fields.clone(),
        }
    }
}

// The core's spelling of its closed enums, through the core's own `as_str`.
fn outcome_str(o: Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => CoreOutcome::Succeeded,
        Outcome::Refused => CoreOutcome::Refused,
        Outcome::Failed => CoreOutcome::Failed,
    }
    .as_str()
}

fn failure_stage_str(s: FailureStage) -> &'static str {
    match s {
        FailureStage::Resolution => CoreStage::Resolution,
        FailureStage::SandboxCreate => CoreStage::SandboxCreate,
        FailureStage::SessionStart => CoreStage::SessionStart,
        FailureStage::Execution => CoreStage::Execution,
        FailureStage::SessionEnd => CoreStage::SessionEnd,
        FailureStage::Teardown => CoreStage::Teardown,
    }
    .as_str()
}

fn teardown_str(t: TeardownStatus) -> &'static str {
    match t {
        TeardownStatus::NotNeeded => CoreTeardown::NotNeeded,
        TeardownStatus::Destroyed => CoreTeardown::Destroyed,
        TeardownStatus::Failed => CoreTeardown::Failed,
        TeardownStatus::Abandoned => CoreTeardown::Abandoned,
    }
    .as_str()
}

fn session_end_str(s: SessionEndStatus) -> &'static str {
    match s {
        SessionEndStatus::NotAttempted => CoreSessionEnd::NotAttempted,
        SessionEndStatus::Ended => CoreSessionEnd::Ended,
        SessionEndStatus::Failed => CoreSessionEnd::Failed,
        SessionEndStatus::Abandoned => CoreSessionEnd::Abandoned,
    }
    .as_str()
}

impl ExecutionEvidence {
    fn to_json(&self) -> Value {
        let c = &self.tool_calls;
        json!({
            "contract_version": self.contract_version,
            "outcome": outcome_str(self.outcome),
            "failure_stage": self.failure_stage.map(failure_stage_str),
            "failure_code": self.failure_code,
            "failure_reasons": self.failure_reasons,
            "harness_profile_ref": self.harness_profile_ref,
            "rein_id": self.rein_id,
            "model": self.model,
            "repository": self.repository,
            "assignment_ref": self.assignment_ref,
            "role_ref": self.role_ref,
            "duty_ref": self.duty_ref,
            "goal_refs": self.goal_refs,
            "resource_envelope_refs": self.resource_envelope_refs,
            "sandbox_id": self.sandbox_id,
            "session_end": session_end_str(self.session_end),
            "teardown": teardown_str(self.teardown),
            "tool_calls": {
                "requested": c.requested, "dispatched": c.dispatched, "succeeded": c.succeeded,
                "unsuccessful": c.unsuccessful, "dispatch_failed": c.dispatch_failed,
                "denied": c.denied, "skipped": c.skipped, "abandoned": c.abandoned,
            },
            "tools_used": self.tools_used,
            "duration_ms": self.duration_ms,
            "rein_duration_ms": self.rein_duration_ms,
            "tokens": self.tokens.map(UsageSplit::to_json),
            "resolved_model": self.resolved_model,
            "commit": self.commit,
            "artifacts": self.artifacts,
            "tool_event_visibility": self.tool_event_visibility.as_str(),
            "tool_event_count": self.tool_event_count,
            "redacted_fields": self.redacted_fields,
        })
    }
}

/// What the gateway answers the consumer: success, the evidence, the tool output.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GatewayResult {
    /// `true` iff the outcome is `succeeded`.
    pub ok: bool,
    /// The evidence.
    pub evidence: ExecutionEvidence,
    /// The last tool output: any JSON value, as JSON text (open).
    pub tool_output: String,
    /// The error text for the direct caller.
    pub tool_error: Option<String>,
}

impl From<&CoreResult> for GatewayResult {
    fn from(r: &CoreResult) -> Self {
        Self {
            ok: r.ok,
            evidence: ExecutionEvidence::from(&r.evidence),
            tool_output: r.tool_output.to_string(),
            tool_error: r.tool_error.clone(),
        }
    }
}

impl GatewayResult {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        Ok(json!({
            "ok": self.ok,
            "evidence": self.evidence.to_json(),
            "tool_output": parse_serde(&self.tool_output)?,
            "tool_error": self.tool_error,
        }))
    }
}

/// One contract-1.0 model, by name (`contract_model_names()`).
// Records cross UniFFI by value (no boxing across the boundary).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ContractModel {
    /// `ExecutionRequest`.
    ExecutionRequest {
        /// The model.
        v: ExecutionRequest,
    },
    /// `HarnessProfile`.
    HarnessProfile {
        /// The model.
        v: HarnessProfile,
    },
    /// `ReinDescriptor`.
    ReinDescriptor {
        /// The model.
        v: ReinDescriptor,
    },
    /// `SandboxHandle`.
    SandboxHandle {
        /// The model.
        v: SandboxHandle,
    },
    /// `ToolCall`.
    ToolCall {
        /// The model.
        v: ToolCall,
    },
    /// `ToolResult`.
    ToolResult {
        /// The model.
        v: ToolResult,
    },
    /// `ExecutionSummary`.
    ExecutionSummary {
        /// The model.
        v: ExecutionSummary,
    },
    /// `ExecutionEvidence`.
    ExecutionEvidence {
        /// The model.
        v: ExecutionEvidence,
    },
    /// `GatewayResult`.
    GatewayResult {
        /// The model.
        v: GatewayResult,
    },
}

impl ContractModel {
    fn name_and_json(&self) -> Result<(&'static str, Value), ProtocolError> {
        Ok(match self {
            Self::ExecutionRequest { v } => ("ExecutionRequest", v.to_json()),
            Self::HarnessProfile { v } => ("HarnessProfile", v.to_json()?),
            Self::ReinDescriptor { v } => ("ReinDescriptor", v.to_json()?),
            Self::SandboxHandle { v } => ("SandboxHandle", v.to_json()?),
            Self::ToolCall { v } => ("ToolCall", v.to_json()?),
            Self::ToolResult { v } => ("ToolResult", v.to_json()?),
            Self::ExecutionSummary { v } => ("ExecutionSummary", v.to_json()?),
            Self::ExecutionEvidence { v } => ("ExecutionEvidence", v.to_json()),
            Self::GatewayResult { v } => ("GatewayResult", v.to_json()?),
        })
    }
}

fn read_model(name: &str, value: &Value) -> Result<ContractModel, ProtocolError> {
    Ok(match name {
        "ExecutionRequest" => ContractModel::ExecutionRequest {
            v: ExecutionRequest::from(&CoreRequest::from_value(value)?),
        },
        "HarnessProfile" => ContractModel::HarnessProfile {
            v: HarnessProfile::from(&CoreProfile::from_value(value)?),
        },
        "ReinDescriptor" => ContractModel::ReinDescriptor {
            v: ReinDescriptor::from(&CoreRein::from_value(value)?),
        },
        "SandboxHandle" => ContractModel::SandboxHandle {
            v: SandboxHandle::from(&CoreSandbox::from_value(value)?),
        },
        "ToolCall" => ContractModel::ToolCall {
            v: ToolCall::from(&CoreCall::from_value(value)?),
        },
        "ToolResult" => ContractModel::ToolResult {
            v: ToolResult::from(&CoreToolResult::from_value(value)?),
        },
        "ExecutionSummary" => ContractModel::ExecutionSummary {
            v: ExecutionSummary::from(&CoreSummary::from_value(value)?),
        },
        "ExecutionEvidence" => ContractModel::ExecutionEvidence {
            v: ExecutionEvidence::from(&CoreEvidence::from_value(value)?),
        },
        "GatewayResult" => ContractModel::GatewayResult {
            v: GatewayResult::from(&CoreResult::from_value(value)?),
        },
        // Any other name: the core's own refusal (`unknown_model`).
        other => {
            let e = match core_contract::parse_model(other, value) {
                Err(e) => e,
                Ok(_) => ContractError::UnknownModel {
                    name: other.to_owned(),
                    known: &core_contract::MODEL_NAMES,
                },
            };
            return Err(e.into());
        }
    })
}

/// Parses a contract-1.0 model by name (`contract_model_names()`) strictly from JSON text.
///
/// # Errors
/// `ProtocolError::Contract` with the model and field (`unknown_model`: neither).
#[uniffi::export]
pub fn contract_parse_model(name: String, json: String) -> Result<ContractModel, ProtocolError> {
    read_model(&name, &parse_serde(&json)?)
}

/// A model's normalized JSON text (the core's `to_value`: every declared field present,
/// defaults filled in), after the core's strict reader checked the record.
///
/// # Errors
/// `ProtocolError::Contract` for a record the core refuses; `Decode` for open fields that
/// are not JSON.
#[uniffi::export]
pub fn contract_model_to_json(model: ContractModel) -> Result<String, ProtocolError> {
    let (name, v) = model.name_and_json()?;
    Ok(core_contract::parse_model(name, &v)?.to_string())
}

/// The names of the contract models `contract_parse_model` reads.
#[uniffi::export]
pub fn contract_model_names() -> Vec<String> {
    core_contract::MODEL_NAMES
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------
// catalog and resolution

/// A profile catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default, uniffi::Record)]
pub struct Catalog {
    /// Known harness profiles.
    #[uniffi(default = [])]
    pub profiles: Vec<HarnessProfile>,
    /// Known rein descriptors.
    #[uniffi(default = [])]
    pub reins: Vec<ReinDescriptor>,
}

impl Catalog {
    fn to_core(&self) -> Result<CoreCatalog, ProtocolError> {
        let profiles = self
            .profiles
            .iter()
            .map(HarnessProfile::to_json)
            .collect::<Result<Vec<_>, _>>()?;
        let reins = self
            .reins
            .iter()
            .map(ReinDescriptor::to_json)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CoreCatalog::from_value(
            &json!({"profiles": profiles, "reins": reins}),
        )?)
    }
}

impl From<&CoreCatalog> for Catalog {
    fn from(c: &CoreCatalog) -> Self {
        Self {
            profiles: c.profiles.iter().map(HarnessProfile::from).collect(),
            reins: c.reins.iter().map(ReinDescriptor::from).collect(),
        }
    }
}

/// Parses a profile catalog (`{"profiles": […], "reins": […]}`) strictly.
///
/// # Errors
/// `ProtocolError::Contract`.
#[uniffi::export]
pub fn contract_parse_catalog(json: String) -> Result<Catalog, ProtocolError> {
    Ok(Catalog::from(&CoreCatalog::from_value(&parse_serde(
        &json,
    )?)?))
}

/// The profile and rein a reference resolved to.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ResolvedProfile {
    /// The profile.
    pub profile: HarnessProfile,
    /// Its rein.
    pub rein: ReinDescriptor,
}

/// Resolves a harness profile reference against a catalog.
///
/// # Errors
/// `ProtocolError::Refusal` with the reasons, or `Contract` for a catalog the core refuses.
#[uniffi::export]
pub fn contract_resolve(
    profile_ref: String,
    catalog: Catalog,
) -> Result<ResolvedProfile, ProtocolError> {
    let c = catalog.to_core()?;
    match core_contract::resolve(&profile_ref, &c) {
        Ok(r) => Ok(ResolvedProfile {
            profile: HarnessProfile::from(&r.profile),
            rein: ReinDescriptor::from(&r.rein),
        }),
        Err(r) => Err(ProtocolError::Refusal {
            code: r.code().to_owned(),
            kind: "resolution".to_owned(),
            detail: format!("{}: {}", r.code(), r.reasons.join(", ")),
            reasons: r.reasons.iter().map(|s| (*s).to_owned()).collect(),
        }),
    }
}

/// A text made safe for evidence, and whether it was redacted.
#[derive(Debug, Clone, uniffi::Record)]
pub struct SafeText {
    /// The safe text.
    pub text: String,
    /// `true` when something was redacted.
    pub redacted: bool,
}

/// Makes an identifier safe for evidence (`kind`: one of the core's identifier kinds;
/// `None`: the generic rule). `None` when the core does not know the kind.
#[uniffi::export]
pub fn contract_safe_identifier(s: String, kind: Option<String>) -> Option<SafeText> {
    let (text, redacted) = match kind {
        None => core_contract::safe_identifier(&s),
        Some(k) => {
            core_contract::safe_identifier_as(core_contract::IdentifierKind::from_name(&k)?, &s)
        }
    };
    Some(SafeText { text, redacted })
}

/// `true` when the text looks like a credential value.
#[uniffi::export]
pub fn contract_looks_like_credential(s: String) -> bool {
    safety::looks_like_credential(&s)
}

/// `true` when a key names something sensitive.
#[uniffi::export]
pub fn contract_is_sensitive_key(key: String) -> bool {
    safety::is_sensitive_key(&key)
}

/// `true` when the text is a credential reference (not a value).
#[uniffi::export]
pub fn contract_is_credential_reference(s: String) -> bool {
    safety::is_credential_reference(&s)
}

// ---------------------------------------------------------------------------------------
// gateway

/// What the host tells the gateway: the request, then the outcome of each action.
// Records cross UniFFI by value (no boxing across the boundary).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum GatewayInput {
    /// Start the execution.
    Execute {
        /// The consumer's request.
        request: ExecutionRequest,
        /// Rein inputs.
        inputs: HashMap<String, String>,
        /// Calls to dispatch, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The sandbox exists.
    SandboxCreated {
        /// The sand-boxer's handle.
        sandbox: SandboxHandle,
    },
    /// No sandbox was created.
    SandboxCreateFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The rein's session map.
    SessionStarted {
        /// Rein-local session state, passed back verbatim.
        session: HashMap<String, String>,
    },
    /// The rein could not start.
    SessionStartFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The rein's tool result.
    ToolDispatched {
        /// The result.
        result: ToolResult,
    },
    /// The call could not be dispatched.
    ToolDispatchFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The rein's normalized facts.
    SessionEnded {
        /// The summary.
        summary: ExecutionSummary,
    },
    /// The rein could not end its session.
    SessionEndFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The sandbox was destroyed.
    SandboxDestroyed,
    /// Destruction failed.
    SandboxDestroyFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The host's callback for the outstanding action returned this value (any JSON, as
    /// JSON text: open); the gateway reads it as the action's answer model.
    Answer {
        /// The value's JSON text (`null` for callbacks returning nothing).
        value: String,
    },
    /// The callback's return value could not be turned into JSON.
    AnswerInvalid {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The host's callback raised.
    ActionFailed {
        /// Explanation for the direct caller.
        message: Option<String>,
    },
    /// The host gives up on the outstanding action.
    Abort {
        /// The host's reason code (`[a-z][a-z0-9_]*`, at most 64 bytes).
        code: String,
    },
}

impl GatewayInput {
    fn to_json(&self) -> Result<Value, ProtocolError> {
        let msg = |ty: &str, message: &Option<String>| json!({"type": ty, "message": message});
        Ok(match self {
            Self::Execute {
                request,
                inputs,
                tool_calls,
            } => json!({
                "type": "execute",
                "request": request.to_json(),
                "inputs": string_map_json(inputs),
                "tool_calls": tool_calls.iter().map(ToolCall::to_json).collect::<Result<Vec<_>, _>>()?,
            }),
            Self::SandboxCreated { sandbox } => {
                json!({"type": "sandbox_created", "sandbox": sandbox.to_json()?})
            }
            Self::SandboxCreateFailed { message } => msg("sandbox_create_failed", message),
            Self::SessionStarted { session } => {
                json!({"type": "session_started", "session": string_map_json(session)})
            }
            Self::SessionStartFailed { message } => msg("session_start_failed", message),
            Self::ToolDispatched { result } => {
                json!({"type": "tool_dispatched", "result": result.to_json()?})
            }
            Self::ToolDispatchFailed { message } => msg("tool_dispatch_failed", message),
            Self::SessionEnded { summary } => {
                json!({"type": "session_ended", "summary": summary.to_json()?})
            }
            Self::SessionEndFailed { message } => msg("session_end_failed", message),
            Self::SandboxDestroyed => json!({"type": "sandbox_destroyed"}),
            Self::SandboxDestroyFailed { message } => msg("sandbox_destroy_failed", message),
            Self::Answer { value } => json!({"type": "answer", "value": parse_serde(value)?}),
            Self::AnswerInvalid { message } => msg("answer_invalid", message),
            Self::ActionFailed { message } => msg("action_failed", message),
            Self::Abort { code } => json!({"type": "abort", "code": code}),
        })
    }

    fn to_core(&self) -> Result<CoreInput, ProtocolError> {
        CoreInput::from_value(&self.to_json()?).map_err(gateway_error)
    }
}

fn gateway_input(i: CoreInput) -> Result<GatewayInput, ProtocolError> {
    Ok(match i {
        CoreInput::Execute {
            request,
            inputs,
            tool_calls,
        } => GatewayInput::Execute {
            request: ExecutionRequest::from(&request),
            inputs: string_map_out(&inputs),
            tool_calls: tool_calls.iter().map(ToolCall::from).collect(),
        },
        CoreInput::SandboxCreated { sandbox } => GatewayInput::SandboxCreated {
            sandbox: SandboxHandle::from(&sandbox),
        },
        CoreInput::SandboxCreateFailed { message } => GatewayInput::SandboxCreateFailed { message },
        CoreInput::SessionStarted { session } => GatewayInput::SessionStarted {
            session: string_map_out(&session),
        },
        CoreInput::SessionStartFailed { message } => GatewayInput::SessionStartFailed { message },
        CoreInput::ToolDispatched { result } => GatewayInput::ToolDispatched {
            result: ToolResult::from(&result),
        },
        CoreInput::ToolDispatchFailed { message } => GatewayInput::ToolDispatchFailed { message },
        CoreInput::SessionEnded { summary } => GatewayInput::SessionEnded {
            summary: ExecutionSummary::from(&summary),
        },
        CoreInput::SessionEndFailed { message } => GatewayInput::SessionEndFailed { message },
        CoreInput::SandboxDestroyed => GatewayInput::SandboxDestroyed,
        CoreInput::SandboxDestroyFailed { message } => {
            GatewayInput::SandboxDestroyFailed { message }
        }
        CoreInput::Answer { value } => GatewayInput::Answer {
            value: value.to_string(),
        },
        CoreInput::AnswerInvalid { message } => GatewayInput::AnswerInvalid { message },
        CoreInput::ActionFailed { message } => GatewayInput::ActionFailed { message },
        CoreInput::Abort { code } => GatewayInput::Abort { code },
        #[allow(unreachable_patterns)]
        other => {
            return Err(ProtocolError::Contract {
                code: "invalid_input".to_owned(),
                kind: "contract".to_owned(),
                detail: format!(
                    "input type {:?} has no record in this binding",
                    other.type_name()
                ),
                model: None,
                field: None,
            })
        }
    })
}

/// Reads a gateway input from its JSON form (`{"type": "execute", …}`) with the core's
/// strict reader.
///
/// # Errors
/// `ProtocolError::Contract` (`invalid_input`, or the embedded model's code with its model
/// and field); `Decode` for text that is not JSON.
#[uniffi::export]
pub fn gateway_input_from_json(json: String) -> Result<GatewayInput, ProtocolError> {
    gateway_input(CoreInput::from_value(&parse_serde(&json)?).map_err(gateway_error)?)
}

/// What the gateway asks the host to do, or its result.
// Records cross UniFFI by value (no boxing across the boundary).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum GatewayOutput {
    /// Ask the sand-boxer for a sandbox; report `SandboxCreated` or `SandboxCreateFailed`.
    CreateSandbox {
        /// The resolved profile's id.
        harness_profile_ref: String,
        /// The sand-boxer template.
        sandbox_profile: String,
        /// The request's repository.
        repository: String,
    },
    /// Call the rein's `start_session(profile, inputs, sandbox)`.
    StartSession {
        /// The resolved profile.
        profile: HarnessProfile,
        /// The request's rein inputs.
        inputs: HashMap<String, String>,
        /// The sandbox.
        sandbox: SandboxHandle,
    },
    /// Call the rein's `dispatch_tool(session, call)`.
    DispatchTool {
        /// The session map.
        session: HashMap<String, String>,
        /// The call.
        call: ToolCall,
    },
    /// Call the rein's `end_session(session)`.
    EndSession {
        /// The session map.
        session: HashMap<String, String>,
    },
    /// Ask the sand-boxer to destroy the sandbox.
    DestroySandbox {
        /// The sandbox.
        sandbox: SandboxHandle,
    },
    /// Pass whatever the sand-boxer returned to its `destroy`, best effort.
    DiscardSandbox,
    /// The execution is over (emitted exactly once).
    Result {
        /// The result.
        result: GatewayResult,
    },
    /// An output this binding does not know yet (a newer core).
    Unknown {
        /// The core's JSON form of the output.
        json: String,
    },
}

fn gateway_output(o: CoreOutput) -> GatewayOutput {
    match o {
        CoreOutput::Action(GatewayAction::CreateSandbox {
            harness_profile_ref,
            sandbox_profile,
            repository,
        }) => GatewayOutput::CreateSandbox {
            harness_profile_ref,
            sandbox_profile,
            repository,
        },
        CoreOutput::Action(GatewayAction::StartSession {
            profile,
            inputs,
            sandbox,
        }) => GatewayOutput::StartSession {
            profile: HarnessProfile::from(&*profile),
            inputs: string_map_out(&inputs),
            sandbox: SandboxHandle::from(&sandbox),
        },
        CoreOutput::Action(GatewayAction::DispatchTool { session, call }) => {
            GatewayOutput::DispatchTool {
                session: string_map_out(&session),
                call: ToolCall::from(&call),
            }
        }
        CoreOutput::Action(GatewayAction::EndSession { session }) => GatewayOutput::EndSession {
            session: string_map_out(&session),
        },
        CoreOutput::Action(GatewayAction::DestroySandbox { sandbox }) => {
            GatewayOutput::DestroySandbox {
                sandbox: SandboxHandle::from(&sandbox),
            }
        }
        CoreOutput::Action(GatewayAction::DiscardSandbox) => GatewayOutput::DiscardSandbox,
        CoreOutput::Result(r) => GatewayOutput::Result {
            result: GatewayResult::from(&*r),
        },
        #[allow(unreachable_patterns)]
        other => GatewayOutput::Unknown {
            json: other.to_value().to_string(),
        },
    }
}

/// Bounds of a gateway; `None`: the core's defaults.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct GatewayBounds {
    /// Most tool calls per execution.
    #[uniffi(default = None)]
    pub max_tool_calls: Option<u64>,
    /// Most evidence refs kept.
    #[uniffi(default = None)]
    pub max_evidence_refs: Option<u64>,
    /// Most evidence artifacts kept.
    #[uniffi(default = None)]
    pub max_evidence_artifacts: Option<u64>,
}

/// The gateway lifecycle machine (seed 001): feed `GatewayInput`s, drain
/// `GatewayOutput`s (actions for the host, then the result).
#[derive(uniffi::Object)]
pub struct GatewayMachine {
    inner: Mutex<Gateway>,
}

impl GatewayMachine {
    fn lock(&self) -> MutexGuard<'_, Gateway> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[uniffi::export]
impl GatewayMachine {
    /// A gateway over a catalog (`None`: empty).
    ///
    /// # Errors
    /// `ProtocolError::Contract` for a catalog the core refuses.
    #[uniffi::constructor(default(catalog = None, bounds = None))]
    pub fn new(
        catalog: Option<Catalog>,
        bounds: Option<GatewayBounds>,
    ) -> Result<Self, ProtocolError> {
        let mut config = GatewayConfig::new(catalog.unwrap_or_default().to_core()?);
        let b = bounds.unwrap_or_default();
        if let Some(n) = b.max_tool_calls {
            config.max_tool_calls = size(n);
        }
        if let Some(n) = b.max_evidence_refs {
            config.max_evidence_refs = size(n);
        }
        if let Some(n) = b.max_evidence_artifacts {
            config.max_evidence_artifacts = size(n);
        }
        Ok(Self {
            inner: Mutex::new(Gateway::new(config)),
        })
    }

    /// Feeds one input (read by the core's strict reader first).
    ///
    /// # Errors
    /// `ProtocolError::Contract` with the gateway's code.
    pub fn handle_input(&self, now_ms: u64, input: GatewayInput) -> Result<(), ProtocolError> {
        let input = input.to_core()?;
        self.lock()
            .handle_input(now_ms, input)
            .map_err(gateway_error)
    }

    /// The next output, or `None`.
    pub fn poll_output(&self) -> Option<GatewayOutput> {
        self.lock().poll_output().map(gateway_output)
    }

    /// Always `None`: the gateway has no timers.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.lock().poll_timeout()
    }

    /// The lifecycle stage (`idle`, `creating_sandbox`, …, `finished`).
    pub fn stage(&self) -> String {
        self.lock().stage().as_str().to_owned()
    }

    /// `true` once the result was emitted.
    pub fn is_finished(&self) -> bool {
        self.lock().is_finished()
    }
}

// ---------------------------------------------------------------------------------------
// rein helpers

/// The `RoleSpec` the rein derives from a harness profile.
///
/// # Errors
/// `ProtocolError::Contract` for a profile the core refuses.
#[uniffi::export]
pub fn rein_role_spec(profile: HarnessProfile) -> Result<RoleSpec, ProtocolError> {
    Ok(RoleSpec::from(&rein::role_spec(&profile.to_core()?)))
}

/// The session map of session `n` in a sandbox.
///
/// # Errors
/// `ProtocolError::Contract` for a handle the core refuses.
#[uniffi::export]
pub fn rein_session_map(
    n: u64,
    sandbox: SandboxHandle,
) -> Result<HashMap<String, String>, ProtocolError> {
    Ok(string_map_out(&rein::session_map(n, &sandbox.to_core()?)))
}

/// The initial prompt among the rein inputs, if any (the core's rule).
#[uniffi::export]
pub fn rein_initial_prompt(inputs: HashMap<String, String>) -> Option<String> {
    rein::initial_prompt(&string_map_in(&inputs)).map(str::to_owned)
}

/// The tool result for a text.
#[uniffi::export]
pub fn rein_tool_result(text: String) -> ToolResult {
    ToolResult::from(&rein::tool_result_from_text(text))
}

/// The tool result for a failed turn, or `None` when the error is not one the rein
/// reports as a tool result.
#[uniffi::export]
pub fn rein_turn_error_result(code: String, message: String) -> Option<ToolResult> {
    rein::tool_result_from_turn_error(&code, &message).map(|r| ToolResult::from(&r))
}

/// Session ids of one rein: `open` gives each sandbox session its map.
#[derive(uniffi::Object)]
pub struct ReinSessionIds {
    inner: Mutex<SessionIds>,
}

#[uniffi::export]
impl ReinSessionIds {
    /// Fresh ids.
    #[uniffi::constructor]
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(SessionIds::new()),
        }
    }

    /// Opens the next session in a sandbox; its map.
    ///
    /// # Errors
    /// `ProtocolError::Contract` for a handle the core refuses.
    pub fn open(&self, sandbox: SandboxHandle) -> Result<HashMap<String, String>, ProtocolError> {
        let s = sandbox.to_core()?;
        let mut ids = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(string_map_out(&ids.open(&s)))
    }
}

/// One rein execution: prompts for tool calls, turns' usage, the summary.
#[derive(uniffi::Object)]
pub struct ReinExecution {
    inner: Mutex<ReinSession>,
}

impl ReinExecution {
    fn lock(&self) -> MutexGuard<'_, ReinSession> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[uniffi::export]
impl ReinExecution {
    /// Starts an execution of a harness profile at `now_ms`.
    ///
    /// # Errors
    /// `ProtocolError::Contract` for a profile the core refuses.
    #[uniffi::constructor]
    pub fn new(profile: HarnessProfile, now_ms: u64) -> Result<Self, ProtocolError> {
        Ok(Self {
            inner: Mutex::new(ReinSession::new(&profile.to_core()?, now_ms)),
        })
    }

    /// The prompt for a tool call.
    ///
    /// # Errors
    /// `ProtocolError::Contract` for a call the core refuses.
    pub fn tool_call_prompt(&self, call: ToolCall) -> Result<String, ProtocolError> {
        let c = CoreCall::from_value(&call.to_json()?)?;
        Ok(self.lock().tool_call_prompt(&c))
    }

    /// Records one turn's usage: a provider's usage mapping or a split (JSON text, open:
    /// the core chooses the shape by its keys).
    ///
    /// # Errors
    /// `ProtocolError::Adapter` (`invalid_usage`).
    pub fn record_turn(&self, usage_json: String) -> Result<(), ProtocolError> {
        let u = parse_serde(&usage_json)?;
        Ok(self.lock().record_turn_value(&u)?)
    }

    /// Records one turn's usage split (checked by the core's reader).
    ///
    /// # Errors
    /// `ProtocolError::Adapter` (`invalid_usage`).
    pub fn record_turn_split(&self, usage: UsageSplit) -> Result<(), ProtocolError> {
        let u = usage.to_core()?;
        self.lock().record_turn(&u);
        Ok(())
    }

    /// The execution summary at `now_ms`.
    pub fn summary(&self, now_ms: u64) -> ExecutionSummary {
        ExecutionSummary::from(&self.lock().summary(now_ms))
    }

    /// The token split summed so far.
    pub fn usage(&self) -> UsageSplit {
        UsageSplit::from(&self.lock().usage())
    }

    /// Tool calls counted so far.
    pub fn tool_calls(&self) -> u64 {
        self.lock().tool_calls()
    }
}
