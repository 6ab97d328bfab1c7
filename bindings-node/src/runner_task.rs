//! The connected runner's task policy (`core::runner_task`) in its JSON form.

use napi_derive::napi;
use serde_json::Value;
use stapel_runner_protocol::runner_task;

use crate::errors::{bad_argument, fail, guard, parse_arg};

/// Evaluate one decision of the connected runner's task policy (the JSON text of a
/// one-key call: reconnect backoff, admission, harness event → progress, outcome →
/// TaskReport, …; see the core's `runner_task::call`); the result's JSON text. A
/// malformed call throws `ProtocolStateError` (code `invalid_call`).
#[napi]
pub fn runner_task_call(call: String) -> napi::Result<String> {
    guard(|| {
        let input = parse_arg("call", &call)?;
        let out = runner_task::call(&input)
            .map_err(|e| fail("ProtocolStateError", e.code(), &e, Value::Null))?;
        serde_json::to_string(&out).map_err(|e| bad_argument("result", e))
    })
}
