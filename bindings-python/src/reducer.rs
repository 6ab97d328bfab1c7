//! `SessionReducer`: the core's fold of canonical local-runner events into a snapshot.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use stapel_runner_protocol::reducer::{self, ReduceError, ReducerConfig, SessionReducer};

use crate::errors::errors_module;
use crate::json::{py_to_value, value_to_py};

fn reduce_error(py: Python<'_>, e: &ReduceError) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("code", e.code())?;
        kwargs.set_item("detail_code", e.detail_code())?;
        let exc = errors_module(py)?
            .getattr(crate::errors::class_of("reducer", e.code()))?
            .call((e.to_string(),), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|err| err)
}

fn config_of(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<ReducerConfig> {
    let v = match config {
        Some(c) if !c.is_none() => py_to_value(c)?,
        _ => Value::Object(Default::default()),
    };
    ReducerConfig::from_value(&v).map_err(|e| crate::session::config_error(py, &e))
}

/// Folds canonical `paperclip.prp.event.v1` events (dicts, or JSON lines) into a snapshot
/// of one run and its session. `config` is a dict of the core's `ReducerConfig` fields
/// (`run_id`, `normalized_session_id`, `max_turns`, …; unknown keys are an error).
///
/// `apply` returns the outcome code (`applied`, `duplicate`, `out_of_order`, …) or raises
/// `ReducerError` (code `invalid_event`, …; `detail_code` names the inner cause) leaving
/// the snapshot unchanged. The snapshot depends only on the events applied, in order;
/// delivery anomalies are reported by `delivery()`.
#[pyclass(module = "stapel_runner_protocol.reducer", name = "SessionReducer")]
pub struct PySessionReducer {
    inner: SessionReducer,
}

#[pymethods]
impl PySessionReducer {
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            inner: SessionReducer::new(config_of(py, config)?),
        })
    }

    /// Apply one event (a dict).
    fn apply(&mut self, event: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let py = event.py();
        let v = py_to_value(event)?;
        self.inner
            .apply(&v)
            .map(|o| o.code())
            .map_err(|e| reduce_error(py, &e))
    }

    /// Apply one event given as a JSON line.
    fn apply_line(&mut self, py: Python<'_>, line: &str) -> PyResult<&'static str> {
        self.inner
            .apply_line(line)
            .map(|o| o.code())
            .map_err(|e| reduce_error(py, &e))
    }

    /// The snapshot (a dict).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.snapshot())
    }

    /// The delivery report: duplicates and out-of-order deliveries.
    fn delivery<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.delivery())
    }

    /// The snapshot of a fresh reducer after applying `events` in order (rejected events
    /// are skipped).
    #[staticmethod]
    #[pyo3(signature = (events, config = None))]
    fn replay<'py>(
        py: Python<'py>,
        events: Vec<Bound<'py, PyAny>>,
        config: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let config = config_of(py, config)?;
        let events = events
            .iter()
            .map(py_to_value)
            .collect::<PyResult<Vec<_>>>()?;
        value_to_py(py, &reducer::replay(config, &events))
    }
}
