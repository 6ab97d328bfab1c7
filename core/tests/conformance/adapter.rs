//! Area `adapter`: RoleSpec, TurnResult, usage mapping and the subprocess JSONL turn
//! machine (seed 000's harness-adapter seam). Vocabulary: `conformance/README.md`.

use serde_json::{json, Map, Value};
use stapel_runner_protocol::adapter::usage::{
    usage_detail_keys, ANTHROPIC_USAGE_KEYS, OPENAI_USAGE_KEYS,
};
use stapel_runner_protocol::adapter::{
    usage_from_anthropic, usage_from_anthropic_with_thinking, usage_from_mapping,
    usage_from_openai, AdapterError, AgentOptions, AgentTurn, RoleSpec, SpawnSpec,
    SubprocessConfig, SubprocessInput, SubprocessSession, TurnResult,
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

/// Usage read the way a host reads an SDK usage object: only the keys the core lists
/// (nested `*_details` objects through their own key lists), `null`s left out.
fn as_object(value: &Value, keys: &[&str]) -> Value {
    let Value::Object(m) = value else {
        return value.clone();
    };
    let mut out = Map::new();
    for key in keys {
        match m.get(*key) {
            None | Some(Value::Null) => {}
            Some(v) => {
                let v = match (usage_detail_keys(key), v) {
                    (Some(inner), Value::Object(_)) => as_object(v, inner),
                    _ => v.clone(),
                };
                out.insert((*key).to_owned(), v);
            }
        }
    }
    Value::Object(out)
}

fn spawn_spec(i: usize, v: &Value) -> Result<SpawnSpec, String> {
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let command = strings(&v["command"]).ok_or(format!("step {i}: open.command"))?;
    let mut spec = SpawnSpec::new(command, v["path"].as_str().unwrap_or_default());
    if let Some(env) = v.get("env").and_then(Value::as_object) {
        for (k, x) in env {
            let x = x
                .as_str()
                .ok_or(format!("step {i}: open.env values are strings"))?;
            spec.env.push((k.clone(), x.to_owned()));
        }
    }
    spec.llm_base_url = v
        .get("llm_base_url")
        .and_then(Value::as_str)
        .map(str::to_owned);
    spec.cwd = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
    Ok(spec)
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let mut config = SubprocessConfig::default();
    if let Some(n) = cfg.get("max_line_bytes").and_then(Value::as_u64) {
        config.max_line_bytes = n as usize;
    }
    if let Some(n) = cfg.get("grace_ms").and_then(Value::as_u64) {
        config = config.grace_ms(n);
    }
    if let Some(b) = cfg.get("map_usage").and_then(Value::as_bool) {
        config = config.map_usage(b);
    }
    let mut session = SubprocessSession::new(config);
    match cfg
        .get("start")
        .and_then(Value::as_str)
        .unwrap_or("attached")
    {
        "attached" => {
            let process_group = cfg
                .get("process_group")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let attach = SubprocessInput::Spawned {
                pid: None,
                process_group,
            };
            session
                .handle_input(0, attach)
                .map_err(|e| format!("attach: {e}"))?;
        }
        "new" => {}
        other => return Err(format!("unknown config.start {other:?}")),
    }
    for (i, input, expect) in steps(vector) {
        if let Some(r) = input.get("agent_options") {
            let inv = r["invocation"].as_object().ok_or(format!(
                "step {i}: agent_options.invocation must be an object"
            ))?;
            let got = RoleSpec::from_invocation(inv, r.get("role").and_then(Value::as_str)).map(
                |mut s| {
                    if let Some(p) = r.get("system_prompt") {
                        s.set_system_prompt(p.as_str().map(str::to_owned));
                    }
                    AgentOptions::from_role(&s).to_value()
                },
            );
            outcome(i, got, expect)?;
        } else if let Some(t) = input.get("agent_turn") {
            let blocks = t["text_blocks"]
                .as_array()
                .ok_or(format!("step {i}: agent_turn.text_blocks must be an array"))?;
            let mut turn = AgentTurn::new();
            for b in blocks {
                turn.text_block(
                    b.as_str()
                        .ok_or(format!("step {i}: text blocks are strings"))?,
                );
            }
            if let Some(result) = t.get("result") {
                turn.result(result.get("usage").cloned());
            }
            outcome(i, turn.finish().map(|r| r.to_value()), expect)?;
        } else if let Some(f) = input.get("host_fault") {
            let code = f["code"]
                .as_str()
                .ok_or(format!("step {i}: host_fault.code"))?;
            let message = f["message"]
                .as_str()
                .ok_or(format!("step {i}: host_fault.message"))?;
            let got = match AdapterError::host_fault(code, message) {
                Some(e) => {
                    if e.code() != code {
                        return Err(format!("step {i}: host_fault({code}) built {}", e.code()));
                    }
                    Err(e)
                }
                None => Ok(Value::Null),
            };
            outcome(i, got, expect)?;
        } else if let Some(r) = input.get("role_spec") {
            let inv = r["invocation"]
                .as_object()
                .ok_or(format!("step {i}: role_spec.invocation must be an object"))?;
            let spec = RoleSpec::from_invocation(inv, r.get("role").and_then(Value::as_str));
            if let (Ok(spec), Some(want)) = (&spec, expect.get("system_prompt")) {
                same(i, "system_prompt", &json!(spec.system_prompt()), want)?;
            }
            outcome(i, spec.map(|s| s.to_value()), expect)?;
        } else if let Some(u) = input.get("usage") {
            let object = u.get("as_object").and_then(Value::as_bool) == Some(true);
            let thinking = u.get("thinking").and_then(Value::as_u64);
            let value = match (object, u["shape"].as_str()) {
                (true, Some("anthropic")) => as_object(&u["value"], &ANTHROPIC_USAGE_KEYS),
                (true, Some("openai")) => as_object(&u["value"], &OPENAI_USAGE_KEYS),
                (true, other) => return Err(format!("step {i}: as_object with shape {other:?}")),
                (false, _) => u["value"].clone(),
            };
            let value = &value;
            let got = match (u["shape"].as_str(), thinking) {
                (Some("anthropic"), Some(t)) => usage_from_anthropic_with_thinking(value, t),
                (Some("anthropic"), None) => usage_from_anthropic(value),
                (Some("openai"), None) => usage_from_openai(value),
                (Some("mapping"), None) => usage_from_mapping(value),
                other => return Err(format!("step {i}: unknown usage form {other:?}")),
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
            let drain = |s: &mut SubprocessSession, out: &mut Vec<Value>| {
                while let Some(o) = s.poll_output() {
                    out.push(o.to_value());
                }
            };
            let text = |key: &str| -> Result<String, String> {
                input[key]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or(format!("step {i}: {key} must be a string"))
            };
            let simple = if let Some(o) = input.get("open") {
                Some(SubprocessInput::Open(spawn_spec(i, o)?))
            } else if let Some(s) = input.get("spawned") {
                Some(SubprocessInput::Spawned {
                    pid: s.get("pid").and_then(Value::as_u64).map(|p| p as u32),
                    process_group: s["process_group"].as_bool().unwrap_or(false),
                })
            } else if input.get("spawn_failed").is_some() {
                Some(SubprocessInput::SpawnFailed {
                    message: text("spawn_failed")?,
                })
            } else if input.get("stdin_write_failed").is_some() {
                Some(SubprocessInput::StdinWriteFailed {
                    message: text("stdin_write_failed")?,
                })
            } else if input.get("exited").is_some() {
                Some(SubprocessInput::Exited)
            } else if input.get("close").is_some() {
                Some(SubprocessInput::Close)
            } else if input.get("timeout").is_some() {
                Some(SubprocessInput::Timeout)
            } else {
                None
            };
            if let Some(event) = simple {
                result = session.handle_input(now, event);
                drain(&mut session, &mut outputs);
            } else if let Some(p) = input.get("start_turn") {
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
            if let Some(l) = expect.get("lifecycle") {
                same(i, "lifecycle", &json!(session.state().as_str()), l)?;
            }
            if let Some(t) = expect.get("timeout") {
                same(i, "timeout", &json!(session.poll_timeout()), t)?;
            }
            if let Some(r) = expect.get("result_line") {
                let got = session
                    .result_line()
                    .cloned()
                    .map_or(Value::Null, Value::Object);
                same(i, "result_line", &got, r)?;
            }
        }
    }
    Ok(())
}
