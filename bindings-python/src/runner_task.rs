//! The connected runner's task policy (`core::runner_task`) in its JSON form.

use pyo3::prelude::*;
use stapel_runner_protocol::runner_task;

use crate::errors::raise;
use crate::json::{py_to_value, value_to_py};

/// Evaluate one decision of the connected runner's task policy in JSON form (reconnect
/// backoff, admission, harness event → progress, outcome → TaskReport, …; see the core's
/// `runner_task::call`). Raises `ProtocolStateError` (code `invalid_call`) for a
/// malformed call.
#[pyfunction]
pub fn runner_task_call<'py>(call: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = call.py();
    let v = py_to_value(call)?;
    match runner_task::call(&v) {
        Ok(out) => value_to_py(py, &out),
        Err(e) => Err(raise(py, "runner_task", e.to_string(), e.code())),
    }
}
