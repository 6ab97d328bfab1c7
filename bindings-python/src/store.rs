//! What a hub persists (the core's `store` module): the rows of a hub session, the
//! writes a step needs before its outputs, the lease timing machine, and the close
//! policy for store errors. SQL is the host's (`stapel_runner_protocol.pgstore`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use serde_json::json;
use stapel_runner_protocol::session::HubSession;
use stapel_runner_protocol::store::{
    close_for, Lease, LeaseConfig, LeaseInput, RowTracker, RunnerRows, StoreError,
};

use crate::errors::raise;
use crate::json::{py_to_value, value_to_py};
use crate::session::config_error;

/// A store error as the table's class of kind `store` (`StoreError`; `fenced`:
/// `FencedError`).
pub(crate) fn store_error(py: Python<'_>, e: &StoreError) -> PyErr {
    raise(py, "store", e.to_string(), e.code())
}

/// Rows from their dict form (the core's JSON form of rows, `RunnerRows::from_json`);
/// a malformed dict is `StoreError` `invalid_rows`.
pub(crate) fn rows_of(py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<RunnerRows> {
    RunnerRows::from_json(&py_to_value(rows)?).map_err(|e| store_error(py, &e))
}

/// Which rows a step changed: the writes to commit before the step's outputs are
/// performed (the core's `RowTracker`). `RowTracker(rows)` starts from the rows the
/// store holds (those the session was built from; `None`: nothing). `writes(hub)` (a
/// `HubSession` or `HubLink`) lists the writes as dicts, in the order to apply them —
/// `{"op": "put_task", "task_id", "next_seq", "assigned_attempt", "forgotten"}`,
/// `{"op": "put_command", "task_id", "seq", "frame"}`, `{"op": "delete_commands",
/// "task_id", "through"}`, `{"op": "delete_task", "task_id"}` — and remembers them as
/// pending: `committed()` after the commit, `failed()` after a rollback (the next
/// `writes` lists them again). Inbound rows are never in it: the apply transaction
/// writes them.
#[pyclass(module = "stapel_runner_protocol.store", name = "RowTracker")]
pub struct PyRowTracker {
    inner: RowTracker,
}

#[pymethods]
impl PyRowTracker {
    #[new]
    #[pyo3(signature = (rows = None))]
    fn new(py: Python<'_>, rows: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let rows = match rows {
            Some(r) if !r.is_none() => rows_of(py, r)?,
            _ => RunnerRows::default(),
        };
        Ok(Self {
            inner: RowTracker::new(&rows),
        })
    }

    /// The writes that make the store hold `hub`'s tasks and commands (see the class).
    fn writes<'py>(
        &mut self,
        py: Python<'py>,
        hub: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let writes = with_hub(hub, |h| self.inner.writes(h))?;
        let list = PyList::empty(py);
        for w in &writes {
            list.append(value_to_py(py, &w.to_json())?)?;
        }
        Ok(list)
    }

    /// The writes of the last `writes` committed: the store holds them.
    fn committed(&mut self) {
        self.inner.committed();
    }

    /// The writes of the last `writes` were rolled back: the next call lists them again.
    fn failed(&mut self) {
        self.inner.failed();
    }
}

/// Run `f` over the core `HubSession` of a `HubSession` or `HubLink` object.
pub(crate) fn with_hub<T>(hub: &Bound<'_, PyAny>, f: impl FnOnce(&HubSession) -> T) -> PyResult<T> {
    if let Ok(s) = hub.cast::<crate::session::PyHubSession>() {
        let base = s.as_super().borrow();
        if let Some(h) = base.hub() {
            return Ok(f(h));
        }
    }
    if let Ok(l) = hub.cast::<crate::link::PyHubLink>() {
        let base = l.as_super().borrow();
        if let Some(h) = base.hub_session() {
            return Ok(f(h));
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected a HubSession or HubLink, not {}",
        crate::json::type_name(hub)
    )))
}

/// The close `(code, reason)` for a runner socket whose hub hit the store error `code`
/// (`fenced`, `store_unavailable`, `lease_expired`, `store_limit`; any other code closes
/// as `store_unavailable`): code 1012, the runner reconnects and resumes from the
/// committed rows.
#[pyfunction(name = "close_for")]
pub fn py_close_for(code: &str) -> (u16, &'static str) {
    close_for(code)
}

/// A hub's lease timing (the core's sans-IO `Lease`): when to renew the leases of its
/// runners, and when to stop serving them because it could not. `config`: a dict of
/// `lease_ms` (10000), `renew_every_ms` (3000), `margin_ms` (2000), `retry_ms` (500);
/// a refused one raises `ConfigError`. Report a renewal's outcome with
/// `renewed(now_ms, started_at)` (its transaction began at local monotonic
/// `started_at`) or `renew_failed(now_ms)`; `tick(now_ms)` when `poll_timeout()`
/// passed. `poll_output()` gives `"renew"` (start one now), `"expiring"` (stop
/// confirming, close every runner with `close_for("lease_expired")`), `"held"` (serving
/// again) or `None`. The first poll asks for a renewal.
#[pyclass(module = "stapel_runner_protocol.store", name = "Lease")]
pub struct PyLease {
    inner: Lease,
}

#[pymethods]
impl PyLease {
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let v = match config {
            Some(c) if !c.is_none() => py_to_value(c)?,
            _ => json!({}),
        };
        let c = LeaseConfig::from_value(&v).map_err(|e| config_error(py, &e))?;
        Ok(Self {
            inner: Lease::new(c),
        })
    }

    /// The renewal asked for committed; its transaction began at local `started_at`.
    fn renewed(&mut self, now_ms: u64, started_at: u64) {
        self.inner
            .handle_input(now_ms, LeaseInput::Renewed { started_at });
    }

    /// The renewal failed.
    fn renew_failed(&mut self, now_ms: u64) {
        self.inner.handle_input(now_ms, LeaseInput::RenewFailed);
    }

    /// Time passed.
    fn tick(&mut self, now_ms: u64) {
        self.inner.handle_input(now_ms, LeaseInput::Timeout);
    }

    /// The next output (`"renew"`, `"expiring"`, `"held"`), or `None`.
    fn poll_output(&mut self) -> Option<&'static str> {
        self.inner.poll_output().map(|o| o.name())
    }

    /// When to call `tick` next (`None`: no timer).
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }

    /// `True` while the hub may serve its runners at local `now_ms` (confirm applied
    /// frames, take runners over).
    fn is_held(&self, now_ms: u64) -> bool {
        self.inner.is_held(now_ms)
    }

    /// The configuration's keys with their values.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.config().to_value())
    }
}

/// The rows of a core hub session as a dict.
pub(crate) fn rows_to_py<'py>(py: Python<'py>, hub: &HubSession) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &hub.rows().to_json())
}

/// Register the store's names on the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRowTracker>()?;
    m.add_class::<PyLease>()?;
    m.add_function(wrap_pyfunction!(py_close_for, m)?)?;
    let keys = PyTuple::new(m.py(), LeaseConfig::KEYS)?;
    m.add("LEASE_CONFIG_KEYS", keys)?;
    Ok(())
}
