//! Area `admission`: the live server's admission machine (`admission::Admission`)
//! through the public API. See conformance/README.md, "Area `admission`".

use serde_json::{json, Map, Value};
use stapel_runner_protocol::admission::{
    error_body, response_headers_value, Admission, AdmissionConfig, AdmissionInput,
};

use crate::common::{same, steps};

/// Keys of a step's input besides the one input key.
const STEP_KEYS: &[&str] = &["now"];
/// Inputs that query the core without feeding the machine.
const QUERIES: &[&str] = &["parse_config", "error_body", "response_headers"];

fn runs(m: &Admission) -> Value {
    Value::Array(
        m.runs()
            .map(|(run, active, streams)| json!({"run": run, "active": active, "streams": streams}))
            .collect(),
    )
}

fn query(i: usize, key: &str, arg: &Value, expect: &Value) -> Result<(), String> {
    let allowed: &[&str] = if key == "parse_config" {
        &["config", "config_error"]
    } else {
        &["value"]
    };
    if let Some(k) = expect
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| !allowed.contains(&k.as_str()))
    {
        return Err(format!("step {i}: {k} is not a {key} expectation"));
    }
    match key {
        "parse_config" => match AdmissionConfig::from_value(arg) {
            Ok(c) => same(
                i,
                "config",
                &c.to_value(),
                expect.get("config").ok_or(format!(
                    "step {i}: parse_config succeeded, expected {expect}"
                ))?,
            ),
            Err(e) => same(
                i,
                "config_error",
                &json!({"code": e.code(), "key": e.key()}),
                expect.get("config_error").ok_or(format!(
                    "step {i}: unexpected config error {} (key {:?})",
                    e.code(),
                    e.key()
                ))?,
            ),
        },
        "error_body" => {
            let code = arg.as_str().ok_or("error_body takes a code string")?;
            let got = match error_body(code) {
                Some(body) => Value::String(body),
                None => Value::Null,
            };
            same(i, "value", &got, expect.get("value").ok_or("needs value")?)
        }
        _ => same(
            i,
            "value",
            &response_headers_value(),
            expect.get("value").ok_or("needs value")?,
        ),
    }
}

pub fn run(vector: &Value) -> Result<(), String> {
    let config = AdmissionConfig::from_value(&vector["config"])
        .map_err(|e| format!("config refused: {} (key {:?})", e.code(), e.key()))?;
    let mut m = Admission::new(config);
    let mut now = 0u64;
    for (i, input, expect) in steps(vector) {
        let obj: &Map<String, Value> = input.as_object().ok_or("input is not an object")?;
        if let Some(n) = obj.get("now").and_then(Value::as_u64) {
            now = n;
        }
        let mut rest: Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| !STEP_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(key) = QUERIES.iter().find(|q| rest.contains_key(**q)) {
            let arg = rest.remove(*key).unwrap_or(Value::Null);
            query(i, key, &arg, expect)?;
            continue;
        }
        for k in ["config", "config_error", "value"] {
            if expect.get(k).is_some() {
                return Err(format!("step {i}: {k} is a query expectation"));
            }
        }
        let error = AdmissionInput::from_value(&Value::Object(rest))
            .and_then(|input| m.handle_input(now, input))
            .err()
            .map(|e| e.code());
        let mut outputs = Vec::new();
        while let Some(o) = m.poll_output() {
            outputs.push(o.to_value());
        }
        same(
            i,
            "error",
            &json!(error),
            &expect.get("error").cloned().unwrap_or(Value::Null),
        )?;
        let want = expect.get("outputs").cloned().unwrap_or_else(|| json!([]));
        same(i, "outputs", &Value::Array(outputs), &want)?;
        if let Some(want) = expect.get("timeout") {
            same(i, "timeout", &json!(m.poll_timeout()), want)?;
        }
        if let Some(want) = expect.get("runs") {
            same(i, "runs", &runs(&m), want)?;
        }
        if let Some(want) = expect.get("pending") {
            same(i, "pending", &json!(m.pending_bodies()), want)?;
        }
    }
    Ok(())
}
