//! Area `local`: the local-run machine of seed 002, driven by controller and harness
//! bytes, process facts and timeouts. Vocabulary: `conformance/README.md`.

use serde_json::{json, Map, Value};
use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output};

use crate::common::{hex, same, steps};

/// The bytes of `<key>` (JSON value → compact text plus `\n`), `<key>_text` (UTF-8 as is)
/// or `<key>_hex` (hex bytes as is).
fn bytes_of(input: &Value, key: &str) -> Result<Option<Vec<u8>>, String> {
    if let Some(v) = input.get(key) {
        return Ok(Some(format!("{v}\n").into_bytes()));
    }
    if let Some(s) = input.get(format!("{key}_text")) {
        return s
            .as_str()
            .map(|s| Some(s.as_bytes().to_vec()))
            .ok_or_else(|| format!("{key}_text must be a string"));
    }
    if let Some(s) = input.get(format!("{key}_hex")) {
        return hex(s
            .as_str()
            .ok_or_else(|| format!("{key}_hex must be a string"))?)
        .map(Some);
    }
    Ok(None)
}

fn opt_i32(v: &Value, key: &str) -> Result<Option<i32>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("{key} must be an integer or null")),
    }
}

fn parse_input(input: &Value) -> Result<Input, String> {
    if let Some(b) = bytes_of(input, "controller")? {
        return Ok(Input::ControllerBytes(b));
    }
    if input.get("controller_eof").is_some() {
        return Ok(Input::ControllerEof);
    }
    if let Some(b) = bytes_of(input, "harness")? {
        return Ok(Input::HarnessStdout(b));
    }
    if let Some(b) = bytes_of(input, "stderr")? {
        return Ok(Input::HarnessStderr(b));
    }
    if let Some(s) = input.get("harness_spawned") {
        let pid = s
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or("harness_spawned needs a u32 pid")?;
        return Ok(Input::HarnessSpawned { pid });
    }
    if let Some(s) = input.get("harness_spawn_failed") {
        let message = s
            .get("message")
            .and_then(Value::as_str)
            .ok_or("harness_spawn_failed needs a message")?
            .to_owned();
        return Ok(Input::HarnessSpawnFailed { message });
    }
    if let Some(e) = input.get("harness_exited") {
        return Ok(Input::HarnessExited {
            code: opt_i32(e, "code")?,
            signal: opt_i32(e, "signal")?,
        });
    }
    if input.get("timeout").is_some() {
        return Ok(Input::Timeout);
    }
    Err(format!("unknown input {input}"))
}

fn parse_line(line: &str) -> Result<Value, String> {
    serde_json::from_str(line).map_err(|e| format!("output line is not JSON ({e}): {line}"))
}

/// The JSON form of an output (see the docs).
fn output_json(o: &Output) -> Result<Value, String> {
    Ok(match o {
        Output::ToController(l) => json!({"to_controller": parse_line(l)?}),
        Output::ToHarness(l) => json!({"to_harness": parse_line(l)?}),
        Output::Spawn(s) => json!({"spawn": {"program": s.program, "args": s.args,
            "env": s.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(), "new_process_group": s.new_process_group}}),
        Output::CloseHarnessStdin => json!({"close_harness_stdin": true}),
        Output::Signal { group, signal } => {
            json!({"signal": {"group": group, "signal": signal.as_str()}})
        }
        Output::Exit(c) => json!({"exit": c}),
        Output::Timeout(d) => json!({"timeout": d}),
        other => return Err(format!("unknown output {other:?}")),
    })
}

/// The one-line summary of an output (see the docs).
fn summary(o: &Value) -> String {
    if let Some(m) = o.get("to_controller") {
        let msg = &m["message"];
        return match msg["kind"].as_str() {
            Some("event") => format!(
                "event {}",
                msg["event"]["eventType"].as_str().unwrap_or("?")
            ),
            Some("command_receipt") => format!(
                "receipt {} {}",
                msg["commandId"].as_str().unwrap_or("?"),
                msg["status"].as_str().unwrap_or("?")
            ),
            Some("diagnostic") => format!("diagnostic {}", msg["level"].as_str().unwrap_or("?")),
            _ => "controller ?".into(),
        };
    }
    if let Some(h) = o.get("to_harness") {
        return format!("harness {}", h["type"].as_str().unwrap_or("?"));
    }
    if o.get("spawn").is_some() {
        return "spawn".into();
    }
    if o.get("close_harness_stdin").is_some() {
        return "close_harness_stdin".into();
    }
    if let Some(s) = o.get("signal") {
        return format!("signal {}", s["signal"].as_str().unwrap_or("?"));
    }
    if let Some(c) = o.get("exit") {
        return format!("exit {c}");
    }
    match o.get("timeout") {
        Some(Value::Null) => "timeout none".into(),
        Some(d) => format!("timeout {d}"),
        None => "?".into(),
    }
}

fn event_projection(e: &Value) -> Value {
    let mut m = Map::new();
    m.insert("eventType".into(), e["eventType"].clone());
    for k in ["turnId", "itemId"] {
        if let Some(v) = e.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("payload".into(), e["payload"].clone());
    Value::Object(m)
}

pub fn run(vector: &Value) -> Result<(), String> {
    let config = LocalConfig::from_value(vector.get("config").unwrap_or(&json!({})));
    if crate::common::check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let mut machine = LocalRun::new(config).map_err(|e| e.to_string())?;
    let mut now = 0u64;
    let mut all_events: Vec<Value> = Vec::new();
    for (i, input, expect) in steps(vector) {
        if let Some(n) = input.get("now_ms") {
            now = n
                .as_u64()
                .ok_or(format!("step {i}: now_ms must be a u64"))?;
        }
        let parsed = parse_input(input).map_err(|e| format!("step {i}: {e}"))?;
        let error = match machine.handle_input(now, parsed) {
            Ok(()) => Value::Null,
            Err(e) => json!(e.code()),
        };
        let mut outputs = Vec::new();
        loop {
            let o = machine.poll_output();
            let last = matches!(o, Output::Timeout(_));
            outputs.push(output_json(&o).map_err(|e| format!("step {i}: {e}"))?);
            if last {
                break;
            }
        }
        same(
            i,
            "error",
            &error,
            expect.get("error").unwrap_or(&Value::Null),
        )?;
        let messages: Vec<&Value> = outputs
            .iter()
            .filter_map(|o| o.get("to_controller"))
            .map(|m| &m["message"])
            .collect();
        let events: Vec<Value> = messages
            .iter()
            .filter(|m| m["kind"] == "event")
            .map(|m| m["event"].clone())
            .collect();
        all_events.extend(events.iter().cloned());
        let mut checked = false;
        if let Some(want) = expect.get("outputs") {
            same(i, "outputs", &Value::Array(outputs.clone()), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("summary") {
            let got: Vec<Value> = outputs.iter().map(|o| Value::String(summary(o))).collect();
            same(i, "summary", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("events") {
            let got: Vec<Value> = events.iter().map(event_projection).collect();
            same(i, "events", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("receipts") {
            let got: Vec<Value> = messages
                .iter()
                .filter(|m| m["kind"] == "command_receipt")
                .map(|m| json!({"commandId": m["commandId"], "controllerSeq": m["controllerSeq"], "status": m["status"], "detail": m["detail"]}))
                .collect();
            same(i, "receipts", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("diagnostics") {
            let got: Vec<Value> = messages
                .iter()
                .filter(|m| m["kind"] == "diagnostic")
                .map(|m| json!({"level": m["level"], "message": m["message"]}))
                .collect();
            same(i, "diagnostics", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("harness_commands") {
            let got: Vec<Value> = outputs
                .iter()
                .filter_map(|o| o.get("to_harness").cloned())
                .collect();
            same(i, "harness_commands", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("event_codes") {
            let got: Vec<Value> = events
                .iter()
                .filter_map(|e| e["payload"].get("code").cloned())
                .collect();
            same(i, "event_codes", &Value::Array(got), want)?;
            checked = true;
        }
        if let Some(want) = expect.get("terminal") {
            let got = events
                .iter()
                .find(|e| e["eventType"] == "run.terminal")
                .map(|e| e["payload"].clone())
                .unwrap_or(Value::Null);
            same(i, "terminal", &got, want)?;
            checked = true;
        }
        if let Some(want) = expect.get("all_event_types") {
            let got: Vec<Value> = all_events.iter().map(|e| e["eventType"].clone()).collect();
            same(i, "all_event_types", &Value::Array(got), want)?;
            checked = true;
        }
        if !checked && expect.get("error").is_none() {
            return Err(format!("step {i}: expect checks nothing"));
        }
    }
    Ok(())
}
