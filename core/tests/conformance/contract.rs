//! Area `contract`: strict contract-1.0 models, profile resolution, the gateway lifecycle
//! machine and evidence redaction (seed 001). Vocabulary: `conformance/README.md`.

use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    self, rein, safety, Catalog, ContractError, Gateway, GatewayConfig, GatewayInput,
    HarnessProfile, ReinSession, SandboxHandle, SessionIds, ToolCall,
};

use crate::common::{same, steps};

/// Compare an error against `{"code", …}`: `code` always, every other given key too.
fn check_error(i: usize, got: &Value, want: &Value) -> Result<(), String> {
    let Value::Object(want) = want else {
        return Err(format!("step {i}: expect.error must be an object"));
    };
    for (k, w) in want {
        same(i, &format!("error.{k}"), &got[k.as_str()], w)?;
    }
    Ok(())
}

fn contract_error(e: &ContractError) -> Value {
    json!({"code": e.code(), "model": e.model(), "field": e.field()})
}

fn outcome(i: usize, got: Result<Value, Value>, expect: &Value) -> Result<(), String> {
    match (got, expect.get("error")) {
        (Ok(v), None) => same(i, "value", &v, expect.get("value").unwrap_or(&Value::Null)),
        (Err(e), Some(want)) => check_error(i, &e, want),
        (Ok(v), Some(want)) => Err(format!("step {i}: expected error {want}, got value {v}")),
        (Err(e), None) => Err(format!("step {i}: unexpected error {e}")),
    }
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let mut gateway: Option<Gateway> = None;
    let mut rein_session: Option<ReinSession> = None;
    let mut session_ids = SessionIds::new();
    let catalog = || -> Result<Catalog, String> {
        Catalog::from_value(cfg.get("catalog").unwrap_or(&json!({})))
            .map_err(|e| format!("config.catalog is invalid: {e}"))
    };
    for (i, input, expect) in steps(vector) {
        if let Some(p) = input.get("parse") {
            let name = p["model"]
                .as_str()
                .ok_or(format!("step {i}: parse.model"))?;
            let got = contract::parse_model(name, &p["value"]).map_err(|e| contract_error(&e));
            outcome(i, got, expect)?;
        } else if input.get("model_names").is_some() {
            outcome(i, Ok(json!(contract::MODEL_NAMES)), expect)?;
        } else if let Some(c) = input.get("parse_catalog") {
            let got = Catalog::from_value(c)
                .map(|c| json!({"profiles": c.profiles.len(), "reins": c.reins.len()}))
                .map_err(|e| contract_error(&e));
            outcome(i, got, expect)?;
        } else if let Some(r) = input.get("resolve") {
            let r = r
                .as_str()
                .ok_or(format!("step {i}: resolve must be a string"))?;
            let got = contract::resolve(r, &catalog()?)
                .map(|ok| json!({"profile_id": ok.profile.profile_id, "rein_id": ok.rein.rein_id}))
                .map_err(|e| json!({"code": e.code(), "reasons": e.reasons}));
            match (got, expect.get("refusal")) {
                (Ok(v), None) => same(i, "resolved", &v, &expect["resolved"])?,
                (Err(e), Some(want)) => check_error(i, &e, want)?,
                (Ok(v), Some(w)) => return Err(format!("step {i}: expected refusal {w}, got {v}")),
                (Err(e), None) => return Err(format!("step {i}: unexpected refusal {e}")),
            }
        } else if let Some(s) = input.get("safe_identifier") {
            let s = s.as_str().ok_or(format!("step {i}: safe_identifier"))?;
            let (v, redacted) = match input.get("kind") {
                None => contract::safe_identifier(s),
                Some(k) => {
                    let kind = k
                        .as_str()
                        .and_then(contract::IdentifierKind::from_name)
                        .ok_or(format!("step {i}: unknown identifier kind {k}"))?;
                    contract::safe_identifier_as(kind, s)
                }
            };
            outcome(i, Ok(json!({"text": v, "redacted": redacted})), expect)?;
        } else if let Some(s) = input.get("looks_like_credential") {
            let s = s
                .as_str()
                .ok_or(format!("step {i}: looks_like_credential"))?;
            outcome(i, Ok(json!(safety::looks_like_credential(s))), expect)?;
        } else if let Some(s) = input.get("is_sensitive_key") {
            let s = s.as_str().ok_or(format!("step {i}: is_sensitive_key"))?;
            outcome(i, Ok(json!(safety::is_sensitive_key(s))), expect)?;
        } else if let Some(s) = input.get("is_credential_reference") {
            let s = s
                .as_str()
                .ok_or(format!("step {i}: is_credential_reference"))?;
            outcome(i, Ok(json!(safety::is_credential_reference(s))), expect)?;
        } else if let Some(g) = input.get("gateway") {
            if gateway.is_none() {
                let mut config = GatewayConfig::new(catalog()?);
                if let Some(n) = cfg.get("max_tool_calls").and_then(Value::as_u64) {
                    config.max_tool_calls = n as usize;
                }
                if let Some(n) = cfg.get("max_evidence_refs").and_then(Value::as_u64) {
                    config.max_evidence_refs = n as usize;
                }
                if let Some(n) = cfg.get("max_evidence_artifacts").and_then(Value::as_u64) {
                    config.max_evidence_artifacts = n as usize;
                }
                gateway = Some(Gateway::new(config));
            }
            let gw = gateway.as_mut().ok_or("no gateway")?;
            let now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
            let result = GatewayInput::from_value(g).and_then(|inp| gw.handle_input(now, inp));
            let mut outputs = Vec::new();
            while let Some(out) = gw.poll_output() {
                outputs.push(out.to_value());
                if outputs.len() > 64 {
                    return Err(format!("step {i}: gateway does not settle"));
                }
            }
            match (result, expect.get("error")) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => check_error(i, &json!({"code": e.code()}), want)?,
                (Ok(()), Some(w)) => return Err(format!("step {i}: expected error {w}")),
                (Err(e), None) => {
                    return Err(format!("step {i}: unexpected error {}: {e}", e.code()))
                }
            }
            same(
                i,
                "outputs",
                &Value::Array(outputs),
                expect.get("outputs").unwrap_or(&json!([])),
            )?;
            if let Some(f) = expect.get("finished") {
                same(i, "finished", &json!(gw.is_finished()), f)?;
            }
            if let Some(s) = expect.get("stage") {
                same(i, "stage", &json!(gw.stage().as_str()), s)?;
            }
            same(i, "poll_timeout", &json!(gw.poll_timeout()), &Value::Null)?;
        } else if let Some(p) = input.get("rein_role_spec") {
            let profile = HarnessProfile::from_value(p).map_err(|e| format!("step {i}: {e}"))?;
            outcome(i, Ok(rein::role_spec(&profile).to_value()), expect)?;
        } else if let Some(m) = input.get("rein_session_map") {
            let n = m["n"]
                .as_u64()
                .ok_or(format!("step {i}: rein_session_map.n"))?;
            let sandbox =
                SandboxHandle::from_value(&m["sandbox"]).map_err(|e| format!("step {i}: {e}"))?;
            outcome(i, Ok(json!(rein::session_map(n, &sandbox))), expect)?;
        } else if let Some(m) = input.get("rein_initial_prompt") {
            let inputs: contract::StringMap =
                serde_json::from_value(m.clone()).map_err(|e| format!("step {i}: {e}"))?;
            outcome(i, Ok(json!(rein::initial_prompt(&inputs))), expect)?;
        } else if let Some(p) = input.get("rein_start") {
            let profile = HarnessProfile::from_value(p).map_err(|e| format!("step {i}: {e}"))?;
            let now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
            rein_session = Some(ReinSession::new(&profile, now));
            outcome(i, Ok(Value::Null), expect)?;
        } else if let Some(c) = input.get("rein_tool_call_prompt") {
            let call = ToolCall::from_value(c).map_err(|e| format!("step {i}: {e}"))?;
            let rs = rein_session
                .as_mut()
                .ok_or(format!("step {i}: no rein_start"))?;
            outcome(i, Ok(json!(rs.tool_call_prompt(&call))), expect)?;
        } else if let Some(u) = input.get("rein_turn") {
            let rs = rein_session
                .as_mut()
                .ok_or(format!("step {i}: no rein_start"))?;
            let got = rs
                .record_turn_value(u)
                .map(|()| Value::Null)
                .map_err(|e| json!({"code": e.code()}));
            outcome(i, got, expect)?;
        } else if let Some(s) = input.get("rein_open_session") {
            let sandbox = SandboxHandle::from_value(s).map_err(|e| format!("step {i}: {e}"))?;
            outcome(i, Ok(json!(session_ids.open(&sandbox))), expect)?;
        } else if let Some(t) = input.get("rein_tool_result") {
            let text = t.as_str().ok_or(format!("step {i}: rein_tool_result"))?;
            outcome(i, Ok(rein::tool_result_from_text(text).to_value()), expect)?;
        } else if let Some(e) = input.get("rein_turn_error") {
            let code = e["code"].as_str().ok_or(format!("step {i}: code"))?;
            let message = e["message"].as_str().ok_or(format!("step {i}: message"))?;
            let got = rein::tool_result_from_turn_error(code, message).map(|r| r.to_value());
            outcome(i, Ok(got.unwrap_or(Value::Null)), expect)?;
        } else if input.get("rein_summary").is_some() {
            let now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
            let rs = rein_session
                .as_ref()
                .ok_or(format!("step {i}: no rein_start"))?;
            outcome(i, Ok(rs.summary(now).to_value()), expect)?;
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        }
        // What the rein session counts after the step: the token split summed so far and
        // the tool calls counted so far.
        if expect.get("usage").is_some() || expect.get("tool_calls").is_some() {
            let rs = rein_session
                .as_ref()
                .ok_or(format!("step {i}: usage and tool_calls need a rein_start"))?;
            if let Some(want) = expect.get("usage") {
                let got = serde_json::to_value(rs.usage()).map_err(|e| e.to_string())?;
                same(i, "usage", &got, want)?;
            }
            if let Some(want) = expect.get("tool_calls") {
                same(i, "tool_calls", &json!(rs.tool_calls()), want)?;
            }
        }
    }
    Ok(())
}
