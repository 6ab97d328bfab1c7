//! The native half of the npm package `stapel-runner-protocol`: N-API exports over the
//! stapel-runner-protocol core, built with napi-rs.
//!
//! This crate only converts types: JSON values cross the boundary as JSON text (V8's
//! `JSON.parse` builds objects faster than N-API property by property), the hot
//! machines (session, sequencing state, reducer) are `External` handles driven by free
//! functions (a napi-rs class method costs several times a free function), the other
//! machines are classes, the fast paths hand numbers back through a shared scratch
//! array ([`boundary`]), and every failure becomes a thrown error whose message carries
//! the core's error as JSON (see [`errors`]); the TypeScript layer (`ts/`) turns it into
//! an `Error` subclass with a `.code`. Every export runs inside [`errors::guard`], so a
//! panic in the core surfaces as a thrown error, never an abort (the test-only cargo
//! feature `panic-probe` makes `LineFramer.pushAll` panic inside the core on one magic
//! line to prove it).

mod adapter;
mod admission;
mod boundary;
mod contract;
mod errors;
mod framing;
mod host;
mod link;
mod local;
mod reducer;
mod runner_task;
mod sequencing;
mod session;
mod store;
mod wire;
