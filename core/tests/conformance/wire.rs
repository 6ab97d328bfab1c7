//! Area `wire`: decode / validate / encode of hub-protocol frames.

use serde_json::{json, Value};
use stapel_runner_protocol::wire::{self, DecodeError, Message};

use crate::common::{bytes_of, same, steps};

fn error_json(e: &DecodeError) -> Value {
    json!({
        "code": e.code(),
        "violations": e.violations().iter().map(|v| json!({"location": v.location, "rule": v.rule.code()})).collect::<Vec<_>>(),
        "lines": e.lines(),
    })
}

fn check_error(i: usize, got: &DecodeError, want: &Value) -> Result<(), String> {
    let got = error_json(got);
    same(i, "error code", &got["code"], &want["code"])?;
    if let Some(v) = want.get("violations") {
        same(i, "violations", &got["violations"], v)?;
    }
    if let Some(l) = want.get("lines") {
        same(i, "lines", &got["lines"], l)?;
    }
    Ok(())
}

fn check_message(i: usize, msg: &Message, expect: &Value) -> Result<(), String> {
    if let Some(t) = expect.get("type") {
        same(i, "type", &json!(msg.message_type().as_str()), t)?;
    }
    if let Some(m) = expect.get("message") {
        same(i, "message", &Value::Object(wire::to_object(msg).into()), m)?;
    }
    if let Some(e) = expect.get("encoded") {
        same(i, "encoded", &json!(wire::encode(msg)), e)?;
    }
    Ok(())
}

pub fn run(vector: &Value) -> Result<(), String> {
    for (i, input, expect) in steps(vector) {
        let validate = input
            .get("validate")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let result = if let Some(bytes) = bytes_of(input, "decode")? {
            wire::decode(&bytes, validate)
        } else if let Some(obj) = input.get("encode") {
            wire::from_value(obj.into(), validate)
        } else if let Some(build) = input.get("build") {
            // Declared fields first, then unknown fields set through the message's `extra`.
            wire::from_value(build["fields"].clone().into(), validate).map(|mut m| {
                if let stapel_runner_protocol::json::Value::Object(extra) =
                    build["extra"].clone().into()
                {
                    m.extra_mut().extend(extra);
                }
                m
            })
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        };
        match (result, expect.get("error")) {
            (Ok(msg), None) => check_message(i, &msg, expect)?,
            (Err(e), Some(want)) => check_error(i, &e, want)?,
            (Ok(msg), Some(want)) => {
                return Err(format!(
                    "step {i}: expected error {want}, decoded {}",
                    wire::encode(&msg)
                ))
            }
            (Err(e), None) => return Err(format!("step {i}: unexpected error {}: {e}", e.code())),
        }
    }
    Ok(())
}
