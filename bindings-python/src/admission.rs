//! `Admission`: the live server's trust model (see `core/src/admission/`). A host that
//! serves the live page feeds every request head, body chunk and run/stream event into
//! it and performs its verdicts; every rule, code, bound and route is the core's.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::Value;
use stapel_runner_protocol::admission::{
    self, Admission, AdmissionConfig, AdmissionError, AdmissionInput,
};

use crate::errors::raise;
use crate::json::{py_to_value, value_to_py};

fn misuse(py: Python<'_>, e: &AdmissionError) -> PyErr {
    raise(py, "admission", e.to_string(), e.code())
}

/// The core's `AdmissionConfig` of a dict (`None`: the defaults); a refused one raises
/// `ConfigError` with the core's `code` and `key`.
fn config_from(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<AdmissionConfig> {
    let v = match config {
        Some(c) if !c.is_none() => py_to_value(c)?,
        _ => Value::Object(Default::default()),
    };
    AdmissionConfig::from_value(&v).map_err(|e| crate::session::config_error(py, &e))
}

/// The live server's admission machine. Feed inputs in their JSON form with
/// `handle_input(now_ms, input)` (`{"request": {"id", "peer", "local", "method",
/// "target", "headers": [[name, value], …]}}`, `{"body_end": {"id"}}`, `{"aborted":
/// {"id"}}`, `{"run_ended": {"run"}}`, `{"stream_closed": {"id"}}`, `{"timeout":
/// True}`) and body bytes with `body(now_ms, id, data)`, then drain `poll_output()`
/// until `None`: `{"refuse": {"id", "status", "code"}}` (answer with
/// `admission_error_body(code)` and `admission_response_headers()`), `{"read_body":
/// {"id", "limit"}}`, `{"admit": {"id", "route"}}`, `{"evict": {"run"}}`. Misuse raises
/// `ProtocolStateError` with the core's code.
#[pyclass(module = "stapel_runner_protocol._native", name = "Admission")]
pub struct PyAdmission {
    inner: Admission,
}

#[pymethods]
impl PyAdmission {
    /// `config`: a dict of the core's `AdmissionConfig` keys.
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            inner: Admission::new(config_from(py, config)?),
        })
    }

    /// Feed one input in its JSON form.
    fn handle_input(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        input: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let input = AdmissionInput::from_value(&py_to_value(input)?).map_err(|e| misuse(py, &e))?;
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| misuse(py, &e))
    }

    /// Bytes of the body of request `id`, as they arrive.
    fn body(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        id: u64,
        data: &Bound<'_, PyBytes>,
    ) -> PyResult<()> {
        let input = AdmissionInput::Body {
            id,
            data: data.as_bytes().to_vec(),
        };
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| misuse(py, &e))
    }

    /// The next output (its JSON form), `None` when drained.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .poll_output()
            .map(|o| value_to_py(py, &o.to_value()))
            .transpose()
    }

    /// Every queued output, in order.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut out = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            out.push(value_to_py(py, &o.to_value())?);
        }
        Ok(out)
    }

    /// The earliest body deadline, `None` while no body is being read.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }

    /// The runs kept, oldest first: `{"run", "active", "streams"}` each.
    #[getter]
    fn runs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let runs: Vec<Value> = self
            .inner
            .runs()
            .map(|(run, active, streams)| {
                serde_json::json!({"run": run, "active": active, "streams": streams})
            })
            .collect();
        value_to_py(py, &Value::Array(runs))
    }

    /// Runs whose harness has not ended.
    #[getter]
    fn active_runs(&self) -> usize {
        self.inner.active_runs()
    }

    /// Requests whose body is being read.
    #[getter]
    fn pending_bodies(&self) -> usize {
        self.inner.pending_bodies()
    }
}

/// The admission config a dict reads as (`None`: the defaults), every key with its
/// value. Raises `ProtocolStateError` (`code`, `key`) for a refused config.
#[pyfunction]
#[pyo3(signature = (config = None))]
pub fn admission_config<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &config_from(py, config)?.to_value())
}

/// The JSON error body of a refusal code, `None` for an unknown code.
#[pyfunction]
pub fn admission_error_body(code: &str) -> Option<String> {
    admission::error_body(code)
}

/// The headers every response of the live server carries, `(name, value)` pairs.
#[pyfunction]
pub fn admission_response_headers() -> Vec<(&'static str, &'static str)> {
    admission::RESPONSE_HEADERS.to_vec()
}
