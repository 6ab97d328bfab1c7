//! Area `contract`: strict contract-1.0 models, profile resolution and its refusals, the
//! gateway lifecycle machine, identifier/credential safety checks, and the rein helpers.
//! Values cross as JSON text.

use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    self, rein, safety, Catalog, ContractError, Gateway, GatewayConfig, GatewayError, GatewayInput,
    HarnessProfile, ReinSession, SandboxHandle, SessionIds, ToolCall,
};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::num;

fn contract_error(e: &ContractError) -> napi::Error {
    fail(
        "contract",
        e.code(),
        e,
        json!({"model": e.model(), "field": e.field()}),
    )
}

fn gateway_error(e: &GatewayError) -> napi::Error {
    fail("contract", e.code(), e, Value::Null)
}

fn to_text<T: serde::Serialize>(v: &T) -> napi::Result<String> {
    serde_json::to_string(v).map_err(|e| bad_argument("value", e))
}

fn catalog_of(text: &str) -> napi::Result<Catalog> {
    Catalog::from_value(&parse_arg("catalog", text)?).map_err(|e| contract_error(&e))
}

fn profile_of(text: &str) -> napi::Result<HarnessProfile> {
    HarnessProfile::from_value(&parse_arg("profile", text)?).map_err(|e| contract_error(&e))
}

fn sandbox_of(text: &str) -> napi::Result<SandboxHandle> {
    SandboxHandle::from_value(&parse_arg("sandbox", text)?).map_err(|e| contract_error(&e))
}

/// Parse `value` (JSON text) strictly as the contract model `name`; its normalized
/// JSON text.
#[napi]
pub fn contract_parse_model(name: String, value: String) -> napi::Result<String> {
    guard(|| {
        let v = contract::parse_model(&name, &parse_arg("value", &value)?)
            .map_err(|e| contract_error(&e))?;
        Ok(v.to_string())
    })
}

/// The names of the contract models.
#[napi]
pub fn contract_model_names() -> napi::Result<Vec<String>> {
    guard(|| {
        Ok(contract::MODEL_NAMES
            .iter()
            .map(|s| (*s).to_owned())
            .collect())
    })
}

/// Parse a catalog (JSON text); `{profiles, reins}` counts as JSON text.
#[napi]
pub fn contract_parse_catalog(catalog: String) -> napi::Result<String> {
    guard(|| {
        let c = catalog_of(&catalog)?;
        Ok(json!({"profiles": c.profiles.len(), "reins": c.reins.len()}).to_string())
    })
}

/// Resolve a harness profile reference against a catalog: `{profile, rein}` as JSON
/// text, or a thrown `ResolutionRefused` with the refusal reasons.
#[napi]
pub fn contract_resolve(profile_ref: String, catalog: String) -> napi::Result<String> {
    guard(|| {
        let c = catalog_of(&catalog)?;
        match contract::resolve(&profile_ref, &c) {
            Ok(r) => Ok(json!({
                "profile": serde_json::to_value(&r.profile).map_err(|e| bad_argument("profile", e))?,
                "rein": serde_json::to_value(&r.rein).map_err(|e| bad_argument("rein", e))?,
            })
            .to_string()),
            Err(refusal) => Err(fail(
                "resolution",
                refusal.code(),
                format!("profile {profile_ref:?} refused: {}", refusal.reasons.join(", ")),
                json!({"reasons": refusal.reasons}),
            )),
        }
    })
}

/// An identifier made safe for evidence: `{text, redacted}` as JSON text; `kind`
/// names an identifier kind, absent the generic rules.
#[napi]
pub fn contract_safe_identifier(value: String, kind: Option<String>) -> napi::Result<String> {
    guard(|| {
        let (text, redacted) = match kind {
            None => contract::safe_identifier(&value),
            Some(k) => {
                let kind = contract::IdentifierKind::from_name(&k).ok_or_else(|| {
                    bad_argument("kind", format!("unknown identifier kind {k:?}"))
                })?;
                contract::safe_identifier_as(kind, &value)
            }
        };
        Ok(json!({"text": text, "redacted": redacted}).to_string())
    })
}

/// Whether a string looks like a credential.
#[napi]
pub fn contract_looks_like_credential(value: String) -> napi::Result<bool> {
    guard(|| Ok(safety::looks_like_credential(&value)))
}

/// Whether a key names sensitive data.
#[napi]
pub fn contract_is_sensitive_key(key: String) -> napi::Result<bool> {
    guard(|| Ok(safety::is_sensitive_key(&key)))
}

/// Whether a string is a credential reference (not a credential).
#[napi]
pub fn contract_is_credential_reference(value: String) -> napi::Result<bool> {
    guard(|| Ok(safety::is_credential_reference(&value)))
}

/// The rein role spec of a harness profile (JSON text in and out).
#[napi]
pub fn rein_role_spec(profile: String) -> napi::Result<String> {
    guard(|| {
        Ok(rein::role_spec(&profile_of(&profile)?)
            .to_value()
            .to_string())
    })
}

/// The rein session map of turn `n` in a sandbox (JSON text).
#[napi]
pub fn rein_session_map(n: f64, sandbox: String) -> napi::Result<String> {
    guard(|| to_text(&rein::session_map(now_of(n)?, &sandbox_of(&sandbox)?)))
}

/// The initial prompt from a rein's inputs (JSON text of a string map), or `null`.
#[napi]
pub fn rein_initial_prompt(inputs: String) -> napi::Result<Option<String>> {
    guard(|| {
        let map: contract::StringMap =
            serde_json::from_str(&inputs).map_err(|e| bad_argument("inputs", e))?;
        Ok(rein::initial_prompt(&map).map(str::to_owned))
    })
}

/// The tool result of a harness's final text (JSON text).
#[napi]
pub fn rein_tool_result(text: String) -> napi::Result<String> {
    guard(|| Ok(rein::tool_result_from_text(text).to_value().to_string()))
}

/// The tool result of a turn error (JSON text), or `null` when the error is not one a
/// tool result reports.
#[napi]
pub fn rein_tool_result_from_turn_error(
    code: String,
    message: String,
) -> napi::Result<Option<String>> {
    guard(|| {
        Ok(rein::tool_result_from_turn_error(&code, &message).map(|r| r.to_value().to_string()))
    })
}

/// The gateway lifecycle machine of contract 1.0.
#[napi]
pub struct NativeGateway {
    gateway: Gateway,
}

#[napi]
impl NativeGateway {
    /// `config`: JSON text with `catalog` (a contract error when the catalog is
    /// refused) and optionally `max_tool_calls`, `max_evidence_refs`,
    /// `max_evidence_artifacts` (absent keys take the core's defaults; the core's config
    /// reader refuses anything else).
    #[napi(constructor)]
    pub fn new(config: String) -> napi::Result<Self> {
        guard(|| {
            let v = parse_arg("config", &config)?;
            let catalog = Catalog::from_value(v.get("catalog").unwrap_or(&json!({})))
                .map_err(|e| contract_error(&e))?;
            let c = GatewayConfig::from_value(catalog, &v).map_err(|e| config_error(&e))?;
            Ok(Self {
                gateway: Gateway::new(c),
            })
        })
    }

    /// Feed one input (JSON text of a gateway input).
    #[napi]
    pub fn handle(&mut self, now_ms: f64, input: String) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let input = GatewayInput::from_value(&parse_arg("input", &input)?)
                .map_err(|e| gateway_error(&e))?;
            self.gateway
                .handle_input(now, input)
                .map_err(|e| gateway_error(&e))
        })
    }

    /// The next output as JSON text, or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.gateway.poll_output().map(|o| o.to_value().to_string())))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.gateway.poll_output() {
                out.push(o.to_value());
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The absolute deadline for the next timeout, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.gateway.poll_timeout().map(num)))
    }

    /// Whether the lifecycle is over.
    #[napi]
    pub fn is_finished(&self) -> napi::Result<bool> {
        guard(|| Ok(self.gateway.is_finished()))
    }

    /// The lifecycle stage's name.
    #[napi]
    pub fn stage(&self) -> napi::Result<String> {
        guard(|| Ok(self.gateway.stage().as_str().to_owned()))
    }
}

/// One rein session: tool-call prompts, turn usage, the execution summary.
#[napi]
pub struct NativeReinSession {
    session: ReinSession,
}

#[napi]
impl NativeReinSession {
    /// A session for a harness profile (JSON text), started at `now_ms`.
    #[napi(constructor)]
    pub fn new(profile: String, now_ms: f64) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                session: ReinSession::new(&profile_of(&profile)?, now_of(now_ms)?),
            })
        })
    }

    /// The prompt of a tool call (JSON text).
    #[napi]
    pub fn tool_call_prompt(&mut self, call: String) -> napi::Result<String> {
        guard(|| {
            let call =
                ToolCall::from_value(&parse_arg("call", &call)?).map_err(|e| contract_error(&e))?;
            Ok(self.session.tool_call_prompt(&call))
        })
    }

    /// Record a turn's usage (JSON text of a usage split).
    #[napi]
    pub fn record_turn(&mut self, usage: String) -> napi::Result<()> {
        guard(|| {
            self.session
                .record_turn_value(&parse_arg("usage", &usage)?)
                .map_err(|e| fail("adapter", e.code(), &e, Value::Null))
        })
    }

    /// Tool calls so far.
    #[napi]
    pub fn tool_calls(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.session.tool_calls())))
    }

    /// The summed usage (JSON text).
    #[napi]
    pub fn usage(&self) -> napi::Result<String> {
        guard(|| to_text(&self.session.usage()))
    }

    /// The execution summary at `now_ms` (JSON text).
    #[napi]
    pub fn summary(&self, now_ms: f64) -> napi::Result<String> {
        guard(|| Ok(self.session.summary(now_of(now_ms)?).to_value().to_string()))
    }
}

/// Opens numbered sessions per sandbox.
#[napi]
pub struct NativeSessionIds {
    ids: SessionIds,
}

#[napi]
impl NativeSessionIds {
    /// No session opened yet.
    #[napi(constructor)]
    pub fn new() -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                ids: SessionIds::new(),
            })
        })
    }

    /// Open the next session of a sandbox (JSON text); its session map as JSON text.
    #[napi]
    pub fn open(&mut self, sandbox: String) -> napi::Result<String> {
        guard(|| to_text(&self.ids.open(&sandbox_of(&sandbox)?)))
    }

    /// The number the next session gets.
    #[napi]
    pub fn next_number(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.ids.next_number())))
    }
}
