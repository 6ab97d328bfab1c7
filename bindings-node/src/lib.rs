//! The native half of the npm package `stapel-runner-protocol`: N-API exports over the
//! stapel-runner-protocol core, built with napi-rs.
//!
//! This crate only converts types: JSON values cross the boundary as JSON text (V8's
//! `JSON.parse` builds objects faster than N-API property by property), machines are
//! classes that own the core's machines, and every failure becomes a thrown error whose
//! message carries the core's error as JSON (see [`errors`]); the TypeScript layer
//! (`ts/`) turns it into an `Error` subclass with a `.code`. Every export runs inside
//! [`errors::guard`], so a panic in the core surfaces as a thrown error, never an abort.

mod adapter;
mod contract;
mod errors;
mod framing;
mod host;
mod local;
mod reducer;
mod runner_task;
mod sequencing;
mod session;
mod wire;

use napi_derive::napi;

/// A hidden export for the test that proves a panic becomes a thrown error: it panics
/// when the environment variable `STAPEL_NODE_PANIC_PROBE` is `1`, and returns `false`
/// otherwise.
#[napi(js_name = "__panicProbe")]
pub fn panic_probe() -> napi::Result<bool> {
    errors::guard(|| {
        if std::env::var("STAPEL_NODE_PANIC_PROBE").as_deref() == Ok("1") {
            #[allow(clippy::panic)]
            {
                panic!("panic probe");
            }
        }
        Ok(false)
    })
}
