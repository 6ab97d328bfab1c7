//! Emits the linker arguments a Node addon needs (undefined N-API symbols resolved by the
//! host process).
fn main() {
    napi_build::setup();
}
