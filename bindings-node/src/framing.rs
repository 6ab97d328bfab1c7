//! Area `framing`: the bounded JSONL line framer (`framing::LineFramer`).

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::framing::{FramerConfig, FramingError, LineFramer, LineResult};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::wire::num;

fn item_json(item: LineResult) -> Value {
    match item {
        Ok(line) => json!({ "line": line }),
        Err(e) => json!({ "error": e.code(), "line_number": e.line_number() }),
    }
}

fn framing_error(e: &FramingError) -> napi::Error {
    fail("framing", e.code(), e, Value::Null)
}

/// The line a test-only build (cargo feature `panic-probe`) panics on inside the core's
/// `push_all`, to prove that a panic in the core's call stack is a thrown error.
#[cfg(feature = "panic-probe")]
const PANIC_PROBE_LINE: &str = "\u{1}stapel-runner-protocol:panic-probe";

/// A bounded JSONL line framer: push bytes, pull lines and line errors.
#[napi]
pub struct NativeLineFramer {
    framer: LineFramer,
}

#[napi]
impl NativeLineFramer {
    /// `config`: JSON text with `max_line_bytes`, `skip_empty_lines`,
    /// `max_ready_lines`, `max_ready_bytes` (absent keys take the core's defaults; the
    /// core's config reader refuses anything else).
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let v = match config {
                Some(t) => parse_arg("config", &t)?,
                None => json!({}),
            };
            let c = FramerConfig::from_value(&v).map_err(|e| config_error(&e))?;
            Ok(Self {
                framer: LineFramer::new(c),
            })
        })
    }

    /// Push bytes; how many it took (all unless the ready queue filled up).
    #[napi]
    pub fn push(&mut self, data: Uint8Array) -> napi::Result<u32> {
        guard(|| {
            let n = self.framer.push(&data).map_err(|e| framing_error(&e))?;
            u32::try_from(n).map_err(|e| bad_argument("push", e))
        })
    }

    /// Push everything, pulling in turn; every item as the JSON text of an array.
    #[napi]
    pub fn push_all(&mut self, data: Uint8Array) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            self.framer
                .push_all(&data, |item| {
                    #[cfg(feature = "panic-probe")]
                    if matches!(&item, Ok(line) if line == PANIC_PROBE_LINE) {
                        #[allow(clippy::panic)]
                        {
                            panic!("panic probe inside the core's LineFramer::push_all");
                        }
                    }
                    out.push(item_json(item));
                })
                .map_err(|e| framing_error(&e))?;
            Ok(Value::Array(out).to_string())
        })
    }

    /// End of input: a last line without a newline becomes ready.
    #[napi]
    pub fn finish(&mut self) -> napi::Result<()> {
        guard(|| {
            self.framer.finish();
            Ok(())
        })
    }

    /// The next line or line error as JSON text, or `null`.
    #[napi]
    pub fn poll_line(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.framer.poll_line().map(|i| item_json(i).to_string())))
    }

    /// Every ready line and line error as the JSON text of an array.
    #[napi]
    pub fn drain(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(i) = self.framer.poll_line() {
                out.push(item_json(i));
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The framer's state as JSON text: `buffered_bytes`, `ready`, `ready_bytes`,
    /// `full`, `finished`.
    #[napi]
    pub fn status(&self) -> napi::Result<String> {
        guard(|| {
            let f = &self.framer;
            Ok(json!({
                "buffered_bytes": f.buffered_bytes(),
                "ready": f.ready_len(),
                "ready_bytes": f.ready_bytes(),
                "full": f.is_full(),
                "finished": f.is_finished(),
            })
            .to_string())
        })
    }

    /// The configuration the framer runs with, every key (JSON text).
    #[napi]
    pub fn config(&self) -> napi::Result<String> {
        guard(|| Ok(self.framer.config().to_value().to_string()))
    }

    /// Bytes of the line being assembled.
    #[napi]
    pub fn buffered_bytes(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.framer.buffered_bytes() as u64)))
    }
}
