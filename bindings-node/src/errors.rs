//! Failures as thrown JS errors: the message is a marker followed by the core's error as
//! JSON (`class`, `code`, `message`, and where the core has them `violations`, `lines`,
//! `key`), which the TypeScript layer maps onto its `Error` subclasses. The class is
//! never chosen here: every error names its *kind* (the core error type it comes from)
//! and the core's one error table (`errors::error_class(kind, code)`) gives the class.

use serde_json::{json, Map, Value};
use stapel_runner_protocol::errors::{error_class, ROOT_CLASS};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Prefix of every error message this crate throws (the TS layer recognises it).
pub const MARKER: &str = "\u{1}stapel:";

/// A thrown error for a core error of `kind` with the core's stable `code`: its class is
/// the core's `error_class(kind, code)`.
pub fn fail(kind: &str, code: &str, message: impl ToString, extra: Value) -> napi::Error {
    throw(error_class(kind, code), code, message, extra)
}

/// A thrown error of class `class` (a name of the core's table).
fn throw(class: &str, code: &str, message: impl ToString, extra: Value) -> napi::Error {
    let mut body = Map::new();
    body.insert("class".into(), json!(class));
    body.insert("code".into(), json!(code));
    body.insert("message".into(), json!(message.to_string()));
    if let Value::Object(more) = extra {
        body.extend(more);
    }
    napi::Error::from_reason(format!("{MARKER}{}", Value::Object(body)))
}

/// A wire decode error (`DecodeError`) with its located violations.
pub fn decode_error(e: &stapel_runner_protocol::wire::DecodeError) -> napi::Error {
    fail(
        "decode",
        e.code(),
        e,
        violations_json(e.violations(), e.lines()),
    )
}

fn violations_json(v: &[stapel_runner_protocol::wire::Violation], lines: Vec<String>) -> Value {
    json!({
        "violations": v.iter().map(|x| json!({
            "location": x.location,
            "rule": x.rule.code(),
            "message": x.message,
        })).collect::<Vec<_>>(),
        "lines": lines,
    })
}

/// A configuration the core refused (`ConfigError`), naming the key.
pub fn config_error(e: &stapel_runner_protocol::config::ConfigError) -> napi::Error {
    fail("config", e.code(), e, json!({ "key": e.key() }))
}

/// A JSON argument the binding could not read (a bug of the TS layer or a caller
/// bypassing it): the root class, code `invalid_argument` (not a core error).
pub fn bad_argument(what: &str, e: impl ToString) -> napi::Error {
    throw(
        ROOT_CLASS,
        "invalid_argument",
        format!("{what}: {}", e.to_string()),
        Value::Null,
    )
}

/// Parse a JSON argument into a `serde_json::Value`.
pub fn parse_arg(what: &str, text: &str) -> napi::Result<Value> {
    serde_json::from_str(text).map_err(|e| bad_argument(what, e))
}

/// Run an export's body, turning a panic into a thrown error (code `panic`).
pub fn guard<T>(body: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            Err(fail(
                "panic",
                "panic",
                format!("the native core panicked: {text}"),
                Value::Null,
            ))
        }
    }
}
