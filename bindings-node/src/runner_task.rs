//! The connected runner's task policy (`core::runner_task`) in its JSON form, and its
//! reconnect counter as a class.

use napi_derive::napi;
use serde_json::Value;
use stapel_runner_protocol::runner_task;

use crate::errors::{bad_argument, fail, guard, parse_arg};
use crate::wire::num;

/// Evaluate one decision of the connected runner's task policy (the JSON text of a
/// one-key call: reconnect backoff, admission, harness event → progress, outcome →
/// TaskReport, …; see the core's `runner_task::call`); the result's JSON text. A
/// malformed call throws `ProtocolStateError` (code `invalid_call`).
#[napi]
pub fn runner_task_call(call: String) -> napi::Result<String> {
    guard(|| {
        let input = parse_arg("call", &call)?;
        let out = runner_task::call(&input)
            .map_err(|e| fail("runner_task", e.code(), &e, Value::Null))?;
        serde_json::to_string(&out).map_err(|e| bad_argument("result", e))
    })
}

/// The core's reconnect counter (`runner_task::Reconnect`) over a backoff: consecutive
/// failures since the last connection that delivered a frame, and the delay before each
/// next attempt.
#[napi]
pub struct NativeReconnect {
    inner: runner_task::Reconnect,
}

/// A non-negative integer from JS (`what` names it in the error).
fn whole(what: &str, n: f64) -> napi::Result<u64> {
    crate::session::now_of(n).map_err(|_| bad_argument(what, "not a non-negative integer"))
}

#[napi]
impl NativeReconnect {
    /// A counter at 0 failures; absent bounds take the core's `Backoff` defaults.
    #[napi(constructor)]
    pub fn new(initial_ms: Option<f64>, max_ms: Option<f64>) -> napi::Result<Self> {
        guard(|| {
            let d = runner_task::Backoff::default();
            let backoff = runner_task::Backoff {
                initial_ms: initial_ms.map_or(Ok(d.initial_ms), |v| whole("initial_ms", v))?,
                max_ms: max_ms.map_or(Ok(d.max_ms), |v| whole("max_ms", v))?,
            };
            Ok(Self {
                inner: runner_task::Reconnect::new(backoff),
            })
        })
    }

    /// A connect failed (refused, timed out, the upgrade rejected): the delay before the
    /// next attempt, ms (`random`: a random non-negative integer from the host).
    #[napi]
    pub fn connect_failed(&mut self, random: f64) -> napi::Result<f64> {
        guard(|| Ok(num(self.inner.connect_failed(whole("random", random)?))))
    }

    /// A connection was lost; `received_frame`: it handed at least one frame to the
    /// session (then the count starts again). The delay before the next attempt, ms.
    #[napi]
    pub fn connection_lost(&mut self, received_frame: bool, random: f64) -> napi::Result<f64> {
        guard(|| {
            let random = whole("random", random)?;
            Ok(num(self.inner.connection_lost(received_frame, random)))
        })
    }

    /// Consecutive failures counted so far.
    #[napi]
    pub fn failures(&self) -> napi::Result<u32> {
        guard(|| Ok(self.inner.failures()))
    }
}
