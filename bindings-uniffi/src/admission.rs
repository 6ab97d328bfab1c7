//! The live server's admission machine (`core/src/admission/`): every request's verdict
//! before route lookup, the run registry and the stream-client counts. Inputs and outputs
//! cross as the core's JSON forms (the same forms the Python and Node bindings and the
//! vectors use); body bytes as bytes.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::admission::{
    self as core_admission, AdmissionConfig, AdmissionError, AdmissionInput,
};

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn misuse(e: &AdmissionError) -> ProtocolError {
    state("admission", e.code(), e)
}

/// The admission config the core reads from JSON text, every key with its value (JSON
/// text).
///
/// # Errors
/// `ProtocolError::Config` (`code`, `key`); `ProtocolError::Decode` for text that is not
/// JSON.
#[uniffi::export]
pub fn admission_config(config_json: String) -> Result<String, ProtocolError> {
    Ok(AdmissionConfig::from_value(&parse_serde(&config_json)?)?
        .to_value()
        .to_string())
}

/// The JSON error body of a refusal code, `None` for an unknown code.
#[uniffi::export]
pub fn admission_error_body(code: String) -> Option<String> {
    core_admission::error_body(&code)
}

/// The headers every live-server response carries, as JSON text of `[name, value]`
/// pairs.
#[uniffi::export]
pub fn admission_response_headers() -> String {
    core_admission::response_headers_value().to_string()
}

/// The live server's admission machine. Feed inputs (`handle_input` with the JSON text
/// of an input form, `body` with bytes), then drain `poll_output` (JSON text of an output
/// form) until `None`.
#[derive(uniffi::Object)]
pub struct Admission {
    inner: Mutex<core_admission::Admission>,
}

#[uniffi::export]
impl Admission {
    /// A machine from the JSON text of an admission config.
    ///
    /// # Errors
    /// `ProtocolError::Config`.
    #[uniffi::constructor]
    pub fn new(config_json: String) -> Result<Self, ProtocolError> {
        let c = AdmissionConfig::from_value(&parse_serde(&config_json)?)?;
        Ok(Self {
            inner: Mutex::new(core_admission::Admission::new(c)),
        })
    }

    /// Feeds one input in its JSON form (`{"request": {…}}`, `{"body_end": {"id"}}`,
    /// `{"aborted": {"id"}}`, `{"run_ended": {"run"}}`, `{"stream_closed": {"id"}}`,
    /// `{"timeout": true}`).
    ///
    /// # Errors
    /// `ProtocolError::State` with the core's code.
    pub fn handle_input(&self, now_ms: u64, input_json: String) -> Result<(), ProtocolError> {
        let input =
            AdmissionInput::from_value(&parse_serde(&input_json)?).map_err(|e| misuse(&e))?;
        locked(&self.inner)
            .handle_input(now_ms, input)
            .map_err(|e| misuse(&e))
    }

    /// Bytes of the body of request `id`, as they arrive.
    ///
    /// # Errors
    /// `ProtocolError::State` with the core's code.
    pub fn body(&self, now_ms: u64, id: u64, data: Vec<u8>) -> Result<(), ProtocolError> {
        locked(&self.inner)
            .handle_input(now_ms, AdmissionInput::Body { id, data })
            .map_err(|e| misuse(&e))
    }

    /// The next output's JSON form as text, or `None`.
    pub fn poll_output(&self) -> Option<String> {
        locked(&self.inner)
            .poll_output()
            .map(|o| o.to_value().to_string())
    }

    /// The earliest body deadline, or `None`.
    pub fn poll_timeout(&self) -> Option<u64> {
        locked(&self.inner).poll_timeout()
    }

    /// The runs kept, oldest first, as JSON text of `[{"run", "active", "streams"}]`.
    pub fn runs(&self) -> String {
        let m = locked(&self.inner);
        let runs: Vec<serde_json::Value> = m
            .runs()
            .map(|(run, active, streams)| {
                serde_json::json!({"run": run, "active": active, "streams": streams})
            })
            .collect();
        serde_json::Value::Array(runs).to_string()
    }

    /// Requests whose body is being read.
    pub fn pending_bodies(&self) -> u64 {
        u64::try_from(locked(&self.inner).pending_bodies()).unwrap_or(u64::MAX)
    }

    /// Runs whose harness has not ended.
    pub fn active_runs(&self) -> u64 {
        u64::try_from(locked(&self.inner).active_runs()).unwrap_or(u64::MAX)
    }
}
