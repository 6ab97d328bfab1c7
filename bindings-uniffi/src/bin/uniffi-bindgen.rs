//! The UniFFI bindings generator, pinned to the same UniFFI version as the scaffolding.
//!
//! `cargo run -p stapel-runner-protocol-uniffi --features bindgen --bin uniffi-bindgen --
//! generate target/debug/libstapel_runner_protocol_uniffi.so --language kotlin --out-dir DIR`
fn main() {
    uniffi::uniffi_bindgen_main()
}
