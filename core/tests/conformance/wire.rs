//! Area `wire`: decode / validate / encode of hub-protocol frames.

use serde_json::{json, Value};
use stapel_runner_protocol::wire::{self, DecodeError, Message, MessageType};

use crate::common::{bytes_of, hex, same, steps};

fn error_json(e: &DecodeError) -> Value {
    json!({
        "code": e.code(),
        "violations": e.violations().iter().map(|v| json!({"location": v.location, "rule": v.rule.code()})).collect::<Vec<_>>(),
        "lines": e.lines(),
    })
}

fn check_error(i: usize, got: &DecodeError, want: &Value) -> Result<(), String> {
    let text = got.to_string();
    let got = error_json(got);
    same(i, "error code", &got["code"], &want["code"])?;
    if let Some(v) = want.get("violations") {
        same(i, "violations", &got["violations"], v)?;
    }
    if let Some(l) = want.get("lines") {
        same(i, "lines", &got["lines"], l)?;
    }
    if let Some(t) = want.get("text") {
        same(i, "text", &json!(text), t)?;
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

/// `depth` nested empty arrays (`[]` is one level).
fn nested(depth: u64) -> Value {
    let mut v = json!([]);
    for _ in 1..depth {
        v = json!([v]);
    }
    v
}

/// The input's object at `key` with the `nest` input's generated value added (see
/// conformance/README.md: vector files cannot nest deeply themselves).
fn with_nest(input: &Value, obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let (Some(nest), Some(map)) = (input.get("nest"), obj.as_object_mut()) {
        let key = nest["key"].as_str().unwrap_or_default().to_owned();
        map.insert(key, nested(nest["depth"].as_u64().unwrap_or(0)));
    }
    obj
}

pub fn run(vector: &Value) -> Result<(), String> {
    for (i, input, expect) in steps(vector) {
        let validate = input
            .get("validate")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let result = if let Some(bytes) = bytes_of(input, "decode")? {
            wire::decode(&bytes, validate)
        } else if let Some(units) = input.get("decode_utf16_hex").and_then(Value::as_str) {
            // A text frame given as UTF-16 code units (big-endian hex), which can hold a
            // lone surrogate no UTF-8 text can.
            let bytes = hex(units)?;
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            match String::from_utf16(&units) {
                Ok(text) => wire::decode_str(&text, validate),
                Err(_) => Err(DecodeError::not_unicode()),
            }
        } else if let Some(value) = input.get("check") {
            let name = input["as"].as_str().unwrap_or_default();
            let mt = MessageType::from_wire(name)
                .ok_or_else(|| format!("step {i}: unknown type {name:?}"))?;
            wire::check_as(value.clone().into(), mt)
        } else if let Some(obj) = input.get("encode") {
            wire::from_value(with_nest(input, obj).into(), validate)
        } else if let Some(build) = input.get("build") {
            // Declared fields first, then unknown fields set through the message's `extra`.
            wire::from_value(build["fields"].clone().into(), validate).map(|mut m| {
                if let stapel_runner_protocol::json::Value::Object(extra) =
                    with_nest(input, &build["extra"]).into()
                {
                    m.extra_mut().extend(extra);
                }
                m
            })
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        };
        // Every message a step produces is encoded: a message the core will not encode
        // (`try_encode`) fails the step with the core's error.
        let result = result.and_then(|m| wire::try_encode(&m).map(|_| m));
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
