//! Timing probes for `scripts/bench` (feature `bench-probe`; never in a shipped library):
//! each runs one step of a binding call `n` times inside Rust and returns the elapsed
//! nanoseconds, so the benchmark can split a Kotlin call's time into the core's work, the
//! binding's record building, UniFFI's buffer serialization and the JNA crossing.
//! The clock is read here, in the binding's test-only code, never in the core.

use std::time::Instant;

use stapel_runner_protocol::session::{HubSession as CoreHub, Input, Machine};
use stapel_runner_protocol::wire;
use uniffi::Lower;

use crate::wire::{from_view, Message};

fn elapsed(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The core alone: `decode_view(frame, validate)` `n` times (the result dropped).
#[uniffi::export]
pub fn probe_core_decode(frame: Vec<u8>, validate: bool, n: u32) -> u64 {
    let t0 = Instant::now();
    let mut ok = 0u32;
    for _ in 0..n {
        ok = ok.wrapping_add(u32::from(wire::decode_view(&frame, validate).is_ok()));
    }
    std::hint::black_box(ok);
    elapsed(t0)
}

/// The core plus the binding's record: `decode_view` and the `Message` record `n` times.
#[uniffi::export]
pub fn probe_decode_record(frame: Vec<u8>, validate: bool, n: u32) -> u64 {
    let t0 = Instant::now();
    for _ in 0..n {
        if let Ok(d) = wire::decode_view(&frame, validate) {
            std::hint::black_box(from_view(d));
        }
    }
    elapsed(t0)
}

/// As [`probe_decode_record`], plus UniFFI's serialization of the record into the
/// `RustBuffer` that crosses to the JVM (freed again here).
#[uniffi::export]
pub fn probe_decode_lowered(frame: Vec<u8>, validate: bool, n: u32) -> u64 {
    let t0 = Instant::now();
    for _ in 0..n {
        if let Ok(d) = wire::decode_view(&frame, validate) {
            let buf = <Message as Lower<crate::UniFfiTag>>::lower(from_view(d));
            std::hint::black_box(buf.len());
            buf.destroy();
        }
    }
    elapsed(t0)
}

/// The core's hub ingest alone: a connected hub that has `hello` takes `frames` (one
/// task's usage frames with rising seqs) and every output is drained (dropped, no record
/// built). Returns the nanoseconds for all frames.
#[uniffi::export]
pub fn probe_core_hub_ingest(hello: String, frames: Vec<String>) -> u64 {
    let mut hub = CoreHub::new(Default::default());
    let _ = hub.handle_input(0, Input::Connected);
    let _ = hub.handle_input(0, Input::Frame(hello));
    while hub.poll_output().is_some() {}
    let t0 = Instant::now();
    for f in frames {
        let _ = hub.handle_input(1, Input::Frame(f));
        while let Some(o) = hub.poll_output() {
            std::hint::black_box(&o);
        }
    }
    elapsed(t0)
}
