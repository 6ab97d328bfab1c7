//! Area `adapter`: RoleSpec, TurnResult, usage mapping and the subprocess JSONL turn
//! machine (seed 000's harness-adapter seam). Vocabulary: `conformance/README.md`.

use serde_json::{json, Value};
use stapel_runner_protocol::adapter::{
    usage_from_anthropic, usage_from_mapping, usage_from_openai, AdapterError, RoleSpec,
    SubprocessConfig, SubprocessInput, SubprocessOutput, SubprocessSession, TurnResult,
};

use crate::common::{bytes_of, same, steps};

fn check_error(i: usize, got: &AdapterError, want: &Value) -> Result<(), String> {
    let Value::Object(want) = want else {
        return Err(format!("step {i}: expect.error must be an object"));
    };
    let got_v = got.to_value();
    for (k, w) in want {
        same(i, &format!("error.{k}"), &got_v[k.as_str()], w)?;
    }
    Ok(())
}

fn outcome(i: usize, got: Result<Value, AdapterError>, expect: &Value) -> Result<(), String> {
    match (got, expect.get("error")) {
        (Ok(v), None) => same(i, "value", &v, expect.get("value").unwrap_or(&Value::Null)),
        (Err(e), Some(want)) => check_error(i, &e, want),
        (Ok(v), Some(want)) => Err(format!("step {i}: expected error {want}, got value {v}")),
        (Err(e), None) => Err(format!("step {i}: unexpected error {}: {e}", e.code())),
    }
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let mut config = SubprocessConfig::default();
    if let Some(n) = cfg.get("max_line_bytes").and_then(Value::as_u64) {
        config.max_line_bytes = n as usize;
    }
    let mut session = SubprocessSession::new(config);
    for (i, input, expect) in steps(vector) {
        if let Some(r) = input.get("role_spec") {
            let inv = r["invocation"]
                .as_object()
                .ok_or(format!("step {i}: role_spec.invocation must be an object"))?;
            let got = RoleSpec::from_invocation(inv, r.get("role").and_then(Value::as_str))
                .map(|s| s.to_value());
            outcome(i, got, expect)?;
        } else if let Some(u) = input.get("usage") {
            let value = &u["value"];
            let got = match u["shape"].as_str() {
                Some("anthropic") => usage_from_anthropic(value),
                Some("openai") => usage_from_openai(value),
                Some("mapping") => usage_from_mapping(value),
                other => return Err(format!("step {i}: unknown usage shape {other:?}")),
            };
            if let Ok(split) = &got {
                if let Some(t) = expect.get("total_tokens") {
                    same(i, "total_tokens", &json!(split.total_tokens()), t)?;
                }
            }
            outcome(i, got.map(|s| s.to_value().into()), expect)?;
        } else if let Some(t) = input.get("turn_result") {
            outcome(i, TurnResult::from_value(t).map(|r| r.to_value()), expect)?;
        } else {
            let now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
            let mut result = Ok(());
            let mut outputs = Vec::new();
            let drain = |s: &mut SubprocessSession, out: &mut Vec<Value>| loop {
                match s.poll_output() {
                    SubprocessOutput::Waiting => break,
                    o => out.push(o.to_value()),
                }
            };
            if let Some(p) = input.get("start_turn") {
                let prompt = p
                    .as_str()
                    .ok_or(format!("step {i}: start_turn"))?
                    .to_owned();
                result = session.handle_input(now, SubprocessInput::StartTurn { prompt });
                drain(&mut session, &mut outputs);
            } else if let Some(data) = bytes_of(input, "stdout")? {
                let chunk = input.get("chunk_size").and_then(Value::as_u64).unwrap_or(0) as usize;
                let chunk = if chunk == 0 { data.len().max(1) } else { chunk };
                for piece in data.chunks(chunk) {
                    result = session.handle_input(now, SubprocessInput::Stdout(piece.to_vec()));
                    if result.is_err() {
                        break;
                    }
                    drain(&mut session, &mut outputs);
                }
            } else if input.get("eof").is_some() {
                result = session.handle_input(now, SubprocessInput::Eof);
                drain(&mut session, &mut outputs);
            } else {
                return Err(format!("step {i}: unknown input {input}"));
            }
            match (result, expect.get("error")) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => check_error(i, &e, want)?,
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
            if let Some(st) = expect.get("state") {
                let got = if session.is_closed() {
                    "closed"
                } else if session.in_turn() {
                    "in_turn"
                } else {
                    "idle"
                };
                same(i, "state", &json!(got), st)?;
            }
        }
    }
    Ok(())
}
