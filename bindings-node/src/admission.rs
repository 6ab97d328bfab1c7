//! Area `admission`: the live server's trust model as the core's sans-IO machine
//! (`core/src/admission/`). Inputs and outputs cross as the core's JSON forms (JSON
//! text); body bytes as a `Uint8Array`.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::admission::{
    self, Admission, AdmissionConfig, AdmissionError, AdmissionInput,
};

use crate::errors::{config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::num;

fn misuse(e: &AdmissionError) -> napi::Error {
    fail("admission", e.code(), e, Value::Null)
}

fn config_of(config: Option<&str>) -> napi::Result<AdmissionConfig> {
    let v = match config {
        Some(t) => parse_arg("config", t)?,
        None => json!({}),
    };
    AdmissionConfig::from_value(&v).map_err(|e| config_error(&e))
}

/// The admission config as the core reads it (JSON text in and out).
#[napi]
pub fn admission_config(config: Option<String>) -> napi::Result<String> {
    guard(|| Ok(config_of(config.as_deref())?.to_value().to_string()))
}

/// The JSON error body of a refusal code, or `null` for an unknown code.
#[napi]
pub fn admission_error_body(code: String) -> napi::Result<Option<String>> {
    guard(|| Ok(admission::error_body(&code)))
}

/// The headers every live-server response carries, as the JSON text of `[name, value]`
/// pairs.
#[napi]
pub fn admission_response_headers() -> napi::Result<String> {
    guard(|| Ok(admission::response_headers_value().to_string()))
}

/// The live server's admission machine: every request's verdict, the run registry and
/// the stream-client counts.
#[napi]
pub struct NativeAdmission {
    inner: Admission,
}

#[napi]
impl NativeAdmission {
    /// `config`: JSON text of the admission config.
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                inner: Admission::new(config_of(config.as_deref())?),
            })
        })
    }

    /// Feed one input: the JSON text of its JSON form.
    #[napi]
    pub fn handle(&mut self, now_ms: f64, input: String) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let input =
                AdmissionInput::from_value(&parse_arg("input", &input)?).map_err(|e| misuse(&e))?;
            self.inner.handle_input(now, input).map_err(|e| misuse(&e))
        })
    }

    /// Bytes of the body of request `id`, as they arrive.
    #[napi]
    pub fn body(&mut self, now_ms: f64, id: f64, data: Uint8Array) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let input = AdmissionInput::Body {
                id: now_of(id)?,
                data: data.to_vec(),
            };
            self.inner.handle_input(now, input).map_err(|e| misuse(&e))
        })
    }

    /// The next output's JSON form as JSON text, or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.inner.poll_output().map(|o| o.to_value().to_string())))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.inner.poll_output() {
                out.push(o.to_value());
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The earliest body deadline, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.inner.poll_timeout().map(num)))
    }

    /// The runs kept, oldest first, as the JSON text of `[{run, active, streams}]`.
    #[napi]
    pub fn runs(&self) -> napi::Result<String> {
        guard(|| {
            let runs: Vec<Value> = self
                .inner
                .runs()
                .map(|(run, active, streams)| json!({"run": run, "active": active, "streams": streams}))
                .collect();
            Ok(Value::Array(runs).to_string())
        })
    }

    /// Requests whose body is being read.
    #[napi]
    pub fn pending_bodies(&self) -> napi::Result<u32> {
        guard(|| Ok(u32::try_from(self.inner.pending_bodies()).unwrap_or(u32::MAX)))
    }

    /// Runs whose harness has not ended.
    #[napi]
    pub fn active_runs(&self) -> napi::Result<u32> {
        guard(|| Ok(u32::try_from(self.inner.active_runs()).unwrap_or(u32::MAX)))
    }
}
