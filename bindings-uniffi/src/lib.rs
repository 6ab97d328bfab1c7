//! UniFFI bindings of the stapel-runner-protocol core: Kotlin and Swift sources are
//! generated from this library by the crate's `uniffi-bindgen` binary.
//!
//! Thin by rule: every decision (parsing, validation, encoding, sequencing, machines)
//! runs in the core; this crate converts types and maps errors. Declared fields are typed
//! records and enums; only the genuinely open objects (`payload`, `task`, `invocation`,
//! `report`, `extra`, `metadata`, tool arguments and outputs, budgets, raw provider usage)
//! cross the boundary as JSON text: the core's encoding going out, the core's strict
//! parser coming in (see README.md).
//!
//! Machines are pull-style objects: `handle_input(now_ms, input)`, then `poll_output()`
//! until it returns `None`, and `poll_timeout()` for the next deadline. No callback
//! interfaces: the host language never re-enters Rust from inside Rust.

uniffi::setup_scaffolding!();

mod adapter;
mod admission;
mod contract;
mod errors;
mod events;
mod framing;
mod jsontext;
mod link;
mod machines;
#[cfg(feature = "bench-probe")]
mod probe;
mod reducer;
mod runner_task;
mod sequencing;
mod session;
mod store;
mod wire;

pub use errors::{ProtocolError, Violation};

/// The version of the core crate these bindings wrap.
#[uniffi::export]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Panics inside the Rust side on purpose, so the bindings' tests can check that a panic
/// surfaces as an exception in the host language and not as a crash of the process.
/// Only in libraries built with the `panic-probe` feature (the test script builds one).
#[cfg(feature = "panic-probe")]
#[uniffi::export]
pub fn panic_probe(message: String) -> String {
    #[allow(clippy::panic)]
    {
        panic!("panic_probe: {message}")
    }
}
