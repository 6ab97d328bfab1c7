//! The benchmark's wasm-bindgen exports over the core (see Cargo.toml): the same calls the
//! napi build's hot paths make, with the same boundary design (text in; numbers or JSON
//! text out, parsed by the JS engine).

use stapel_runner_protocol::reducer::{ReducerConfig, SessionReducer};
use stapel_runner_protocol::wire;
use wasm_bindgen::prelude::*;

/// The core's validating fast path: the frame's `attempt` when it is a plain, valid
/// `task.progress` whose numbers a JS number holds exactly, else -1 (take `decode_full`).
#[wasm_bindgen]
pub fn decode_fast(frame: &str) -> f64 {
    match wire::peek_progress(frame) {
        Some(view) if view.payload_f64_exact => view.attempt as f64,
        _ => -1.0,
    }
}

/// The full decode: the message's canonical JSON text, or the core's error code.
#[wasm_bindgen]
pub fn decode_full(frame: &str, validate: bool) -> Result<String, JsError> {
    wire::decode_full(frame, validate)
        .map(|m| wire::encode(&m))
        .map_err(|e| JsError::new(e.code()))
}

/// The core's session reducer.
#[wasm_bindgen]
pub struct Reducer {
    inner: SessionReducer,
}

#[wasm_bindgen]
impl Reducer {
    /// A reducer with `config` (JSON text).
    #[wasm_bindgen(constructor)]
    pub fn new(config: &str) -> Result<Reducer, JsError> {
        let v: serde_json::Value =
            serde_json::from_str(config).map_err(|e| JsError::new(&e.to_string()))?;
        let config = ReducerConfig::from_value(&v).map_err(|e| JsError::new(e.code()))?;
        Ok(Reducer {
            inner: SessionReducer::new(config),
        })
    }

    /// Apply one event (a JSONL line); the outcome as JSON text (`{"kind": code}`).
    pub fn apply_line(&mut self, line: &str) -> Result<String, JsError> {
        self.inner
            .apply_line(line)
            .map(|o| serde_json::json!({ "kind": o.code() }).to_string())
            .map_err(|e| JsError::new(e.code()))
    }

    /// Apply every line of JSONL text; how many were applied.
    pub fn apply_lines(&mut self, text: &str) -> Result<f64, JsError> {
        let mut n = 0u32;
        for line in text.split('\n').filter(|l| !l.trim().is_empty()) {
            self.inner
                .apply_line(line)
                .map_err(|e| JsError::new(e.code()))?;
            n += 1;
        }
        Ok(f64::from(n))
    }

    /// The snapshot as JSON text.
    pub fn snapshot(&self) -> String {
        self.inner.snapshot().to_string()
    }
}
