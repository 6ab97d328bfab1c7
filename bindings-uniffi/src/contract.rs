//! The harness-execution contract (seed 001): strict models, profile resolution, the
//! gateway lifecycle machine, the rein helpers and evidence redaction. Models, inputs and
//! outputs are the core's JSON forms, as JSON text.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::contract::{
    self as core_contract, rein, safety, Catalog, ContractError, Gateway, GatewayConfig,
    GatewayError, GatewayInput, HarnessProfile, ReinSession, SandboxHandle, SessionIds, ToolCall,
};

use crate::errors::ProtocolError;
use crate::jsontext::parse_serde;

impl From<ContractError> for ProtocolError {
    fn from(e: ContractError) -> Self {
        ProtocolError::Contract {
            code: e.code().to_owned(),
            detail: e.to_string(),
            model: Some(e.model().to_owned()),
            field: Some(e.field().to_owned()),
        }
    }
}

fn gateway_error(e: &GatewayError) -> ProtocolError {
    ProtocolError::Contract {
        code: e.code().to_owned(),
        detail: e.to_string(),
        model: None,
        field: None,
    }
}

fn catalog(catalog_json: Option<String>) -> Result<Catalog, ProtocolError> {
    let v = match catalog_json {
        Some(t) => parse_serde(&t)?,
        None => serde_json::Value::Object(serde_json::Map::new()),
    };
    Ok(Catalog::from_value(&v)?)
}

fn text<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Parses a contract-1.0 model by name (`MODEL_NAMES`); returns its normalized JSON form.
///
/// # Errors
/// `ProtocolError::Contract` with the model and field.
#[uniffi::export]
pub fn contract_parse_model(name: String, json: String) -> Result<String, ProtocolError> {
    Ok(core_contract::parse_model(&name, &parse_serde(&json)?)?.to_string())
}

/// The names of the contract models `contract_parse_model` reads.
#[uniffi::export]
pub fn contract_model_names() -> Vec<String> {
    core_contract::MODEL_NAMES
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Counts of a parsed catalog.
#[derive(Debug, Clone, uniffi::Record)]
pub struct CatalogCounts {
    /// Profiles in the catalog.
    pub profiles: u64,
    /// Reins in the catalog.
    pub reins: u64,
}

/// Parses a profile catalog (`{"profiles": […], "reins": […]}`).
///
/// # Errors
/// `ProtocolError::Contract`.
#[uniffi::export]
pub fn contract_parse_catalog(json: String) -> Result<CatalogCounts, ProtocolError> {
    let c = catalog(Some(json))?;
    Ok(CatalogCounts {
        profiles: c.profiles.len() as u64,
        reins: c.reins.len() as u64,
    })
}

/// The profile and rein a reference resolved to.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ResolvedProfile {
    /// The profile's id.
    pub profile_id: String,
    /// Its rein's id.
    pub rein_id: String,
    /// The profile (JSON form).
    pub profile_json: String,
}

/// Resolves a harness profile reference against a catalog (JSON text).
///
/// # Errors
/// `ProtocolError::Refusal` with the reasons, or `Contract` for a bad catalog.
#[uniffi::export]
pub fn contract_resolve(
    profile_ref: String,
    catalog_json: String,
) -> Result<ResolvedProfile, ProtocolError> {
    let c = catalog(Some(catalog_json))?;
    match core_contract::resolve(&profile_ref, &c) {
        Ok(r) => Ok(ResolvedProfile {
            profile_id: r.profile.profile_id.clone(),
            rein_id: r.rein.rein_id.clone(),
            profile_json: r.profile.to_value().to_string(),
        }),
        Err(r) => Err(ProtocolError::Refusal {
            code: r.code().to_owned(),
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

/// The gateway lifecycle machine (seed 001): feed JSON-form inputs
/// (`{"type": "execute", …}`), drain JSON-form outputs (actions for the host, the result).
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
    /// A gateway over a catalog (JSON text; `None`: empty).
    ///
    /// # Errors
    /// `ProtocolError::Contract` for a bad catalog.
    #[uniffi::constructor(default(catalog_json = None, bounds = None))]
    pub fn new(
        catalog_json: Option<String>,
        bounds: Option<GatewayBounds>,
    ) -> Result<Self, ProtocolError> {
        let mut config = GatewayConfig::new(catalog(catalog_json)?);
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

    /// Feeds one input (JSON form).
    ///
    /// # Errors
    /// `ProtocolError::Contract` with the gateway's code.
    pub fn handle_input(&self, now_ms: u64, input_json: String) -> Result<(), ProtocolError> {
        let v = parse_serde(&input_json)?;
        let input = GatewayInput::from_value(&v).map_err(|e| gateway_error(&e))?;
        self.lock()
            .handle_input(now_ms, input)
            .map_err(|e| gateway_error(&e))
    }

    /// The next output (JSON form), or `None`.
    pub fn poll_output(&self) -> Option<String> {
        self.lock().poll_output().map(|o| o.to_value().to_string())
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

/// The `RoleSpec` (JSON form) the rein derives from a harness profile (JSON text).
///
/// # Errors
/// `ProtocolError::Contract`.
#[uniffi::export]
pub fn rein_role_spec(profile_json: String) -> Result<String, ProtocolError> {
    let p = HarnessProfile::from_value(&parse_serde(&profile_json)?)?;
    Ok(rein::role_spec(&p).to_value().to_string())
}

/// The session map (JSON object text) of session `n` in a sandbox (JSON text).
///
/// # Errors
/// `ProtocolError::Contract`.
#[uniffi::export]
pub fn rein_session_map(n: u64, sandbox_json: String) -> Result<String, ProtocolError> {
    let s = SandboxHandle::from_value(&parse_serde(&sandbox_json)?)?;
    Ok(text(&rein::session_map(n, &s)))
}

/// The initial prompt among the rein inputs, if any (the core's rule).
#[uniffi::export]
pub fn rein_initial_prompt(inputs: std::collections::HashMap<String, String>) -> Option<String> {
    let inputs: core_contract::models::StringMap = inputs.into_iter().collect();
    rein::initial_prompt(&inputs).map(str::to_owned)
}

/// The tool result (JSON form) for a text.
#[uniffi::export]
pub fn rein_tool_result(text: String) -> String {
    rein::tool_result_from_text(text).to_value().to_string()
}

/// The tool result (JSON form) for a failed turn, or `None` when the error is not one the
/// rein reports as a tool result.
#[uniffi::export]
pub fn rein_turn_error_result(code: String, message: String) -> Option<String> {
    rein::tool_result_from_turn_error(&code, &message).map(|r| r.to_value().to_string())
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

    /// Opens the next session in a sandbox (JSON text); its map as JSON object text.
    ///
    /// # Errors
    /// `ProtocolError::Contract`.
    pub fn open(&self, sandbox_json: String) -> Result<String, ProtocolError> {
        let s = SandboxHandle::from_value(&parse_serde(&sandbox_json)?)?;
        let mut ids = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(text(&ids.open(&s)))
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
    /// Starts an execution of a harness profile (JSON text) at `now_ms`.
    ///
    /// # Errors
    /// `ProtocolError::Contract`.
    #[uniffi::constructor]
    pub fn new(profile_json: String, now_ms: u64) -> Result<Self, ProtocolError> {
        let p = HarnessProfile::from_value(&parse_serde(&profile_json)?)?;
        Ok(Self {
            inner: Mutex::new(ReinSession::new(&p, now_ms)),
        })
    }

    /// The prompt for a tool call (JSON text).
    ///
    /// # Errors
    /// `ProtocolError::Contract`.
    pub fn tool_call_prompt(&self, call_json: String) -> Result<String, ProtocolError> {
        let c = ToolCall::from_value(&parse_serde(&call_json)?)?;
        Ok(self.lock().tool_call_prompt(&c))
    }

    /// Records one turn's usage (JSON text).
    ///
    /// # Errors
    /// `ProtocolError::Adapter` (`invalid_usage`).
    pub fn record_turn(&self, usage_json: String) -> Result<(), ProtocolError> {
        let u = parse_serde(&usage_json)?;
        Ok(self.lock().record_turn_value(&u)?)
    }

    /// The execution summary (JSON form) at `now_ms`.
    pub fn summary(&self, now_ms: u64) -> String {
        self.lock().summary(now_ms).to_value().to_string()
    }

    /// The token split summed so far (JSON text).
    pub fn usage(&self) -> String {
        text(&self.lock().usage())
    }

    /// Tool calls counted so far.
    pub fn tool_calls(&self) -> u64 {
        self.lock().tool_calls()
    }
}
