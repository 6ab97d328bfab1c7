//! Area `framing`: the bounded JSONL line framer (`framing::LineFramer`).

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::framing::{FramerConfig, FramingError, LineFramer, LineResult};

use crate::errors::{bad_argument, fail, guard, parse_arg};

fn item_json(item: LineResult) -> Value {
    match item {
        Ok(line) => json!({ "line": line }),
        Err(e) => json!({ "error": e.code(), "line_number": e.line_number() }),
    }
}

fn framing_error(e: &FramingError) -> napi::Error {
    fail("ProtocolStateError", e.code(), e, Value::Null)
}

fn size(v: &Value, key: &str) -> napi::Result<Option<usize>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| bad_argument(key, "not a size")),
    }
}

/// A bounded JSONL line framer: push bytes, pull lines and line errors.
#[napi]
pub struct NativeLineFramer {
    framer: LineFramer,
}

#[napi]
impl NativeLineFramer {
    /// `config`: JSON text with `max_line_bytes`, `skip_empty_lines`,
    /// `max_ready_lines`, `max_ready_bytes` (absent keys take the core's defaults).
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let v = match config {
                Some(t) => parse_arg("config", &t)?,
                None => json!({}),
            };
            let mut c = FramerConfig::default();
            if let Some(n) = size(&v, "max_line_bytes")? {
                c.max_line_bytes = n;
            }
            if let Some(b) = v.get("skip_empty_lines").and_then(Value::as_bool) {
                c.skip_empty_lines = b;
            }
            if let Some(n) = size(&v, "max_ready_lines")? {
                c.max_ready_lines = n;
            }
            if let Some(n) = size(&v, "max_ready_bytes")? {
                c.max_ready_bytes = n;
            }
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
                .push_all(&data, |item| out.push(item_json(item)))
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

    /// Bytes of the line being assembled.
    #[napi]
    pub fn buffered_bytes(&self) -> napi::Result<u32> {
        guard(|| Ok(u32::try_from(self.framer.buffered_bytes()).unwrap_or(u32::MAX)))
    }

    /// Lines and line errors waiting to be pulled.
    #[napi]
    pub fn ready_len(&self) -> napi::Result<u32> {
        guard(|| Ok(u32::try_from(self.framer.ready_len()).unwrap_or(u32::MAX)))
    }

    /// The line bound in bytes.
    #[napi]
    pub fn max_line_bytes(&self) -> napi::Result<f64> {
        guard(|| {
            Ok(crate::session::num(
                self.framer.config().max_line_bytes as u64,
            ))
        })
    }
}
