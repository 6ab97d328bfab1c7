//! The harness contract (seed 001): strict contract-1.0 models, profile resolution, the
//! gateway lifecycle machine and the safety helpers, in JSON form.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use pyo3::types::{PyDict, PyList};
use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    self, rein, safety, Catalog, ContractError, Gateway, GatewayConfig, GatewayError, GatewayInput,
    HarnessProfile, IdentifierKind, Refusal, ReinSession, SandboxHandle, SessionIds, ToolCall,
};

use crate::errors::errors_module;
use crate::json::{py_to_value, value_to_py};

fn raise_with(py: Python<'_>, class: &str, message: String, kwargs: &[(&str, Value)]) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let d = PyDict::new(py);
        for (k, v) in kwargs {
            d.set_item(*k, value_to_py(py, v)?)?;
        }
        let exc = errors_module(py)?
            .getattr(class)?
            .call((message,), Some(&d))?;
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|e| e)
}

fn contract_error(py: Python<'_>, e: &ContractError) -> PyErr {
    raise_with(
        py,
        crate::errors::class_of("contract", e.code()),
        e.to_string(),
        &[
            ("code", json!(e.code())),
            ("model", json!(e.model())),
            ("field", json!(e.field())),
        ],
    )
}

fn gateway_error(py: Python<'_>, e: &GatewayError) -> PyErr {
    raise_with(
        py,
        crate::errors::class_of("contract", e.code()),
        e.to_string(),
        &[("code", json!(e.code()))],
    )
}

fn refusal(py: Python<'_>, r: &Refusal) -> PyErr {
    raise_with(
        py,
        crate::errors::class_of("resolution", r.code()),
        r.to_string(),
        &[("code", json!(r.code())), ("reasons", json!(r.reasons))],
    )
}

/// The core's `contract::MODEL_NAMES` (exported as `CONTRACT_MODELS`).
pub const MODELS: [&str; 9] = contract::MODEL_NAMES;

/// Parse a contract-1.0 model strictly and return its normalised JSON form (the core's
/// `contract::parse_model`; the names are `CONTRACT_MODELS`). Raises `ContractError`
/// (`code`, `model`, `field`; `unknown_model` for a name outside `CONTRACT_MODELS`).
#[pyfunction]
pub fn parse_model<'py>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    match contract::parse_model(name, &py_to_value(value)?) {
        Ok(v) => value_to_py(py, &v),
        Err(e) => Err(contract_error(py, &e)),
    }
}

fn catalog_of(py: Python<'_>, catalog: Option<&Bound<'_, PyAny>>) -> PyResult<Catalog> {
    let v = match catalog {
        Some(c) if !c.is_none() => py_to_value(c)?,
        _ => json!({}),
    };
    Catalog::from_value(&v).map_err(|e| contract_error(py, &e))
}

/// Check a catalog (`{"profiles": [...], "reins": [...]}`) strictly; returns the counts
/// `{"profiles": n, "reins": n}`.
#[pyfunction]
pub fn parse_catalog<'py>(catalog: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let py = catalog.py();
    let c = catalog_of(py, Some(catalog))?;
    let d = PyDict::new(py);
    d.set_item("profiles", c.profiles.len())?;
    d.set_item("reins", c.reins.len())?;
    Ok(d)
}

/// Resolve a harness profile reference against a catalog: `{"profile": {...}, "rein":
/// {...}}`, or raises `ResolutionRefused` (`code`, `reasons`).
#[pyfunction]
pub fn resolve<'py>(
    harness_profile_ref: &str,
    catalog: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = catalog.py();
    let c = catalog_of(py, Some(catalog))?;
    match contract::resolve(harness_profile_ref, &c) {
        Ok(ok) => value_to_py(
            py,
            &json!({"profile": ok.profile.to_value(), "rein": ok.rein.to_value()}),
        ),
        Err(r) => Err(refusal(py, &r)),
    }
}

/// An identifier safe to put in evidence: `(text, redacted)`. `kind` names an
/// identifier kind of the core (`None`: the generic rules).
#[pyfunction]
#[pyo3(signature = (s, kind = None))]
pub fn safe_identifier(s: &str, kind: Option<&str>) -> PyResult<(String, bool)> {
    match kind {
        None => Ok(contract::safe_identifier(s)),
        Some(k) => IdentifierKind::from_name(k)
            .map(|kind| contract::safe_identifier_as(kind, s))
            .ok_or_else(|| PyValueError::new_err(format!("unknown identifier kind {k:?}"))),
    }
}

/// `True` when `s` looks like a credential value.
#[pyfunction]
pub fn looks_like_credential(s: &str) -> bool {
    safety::looks_like_credential(s)
}

/// `True` when `key` names a sensitive field.
#[pyfunction]
pub fn is_sensitive_key(key: &str) -> bool {
    safety::is_sensitive_key(key)
}

/// `True` when `s` is a credential reference (not a value).
#[pyfunction]
pub fn is_credential_reference(s: &str) -> bool {
    safety::is_credential_reference(s)
}

/// The gateway lifecycle machine (seed 001), sans-IO: `handle_input(now_ms, input)` with an input
/// in the core's JSON form (`{"type": "execute", …}`, …), then `drain()` the outputs
/// (JSON form: actions for the host, the result). Misuse raises `ContractError`.
#[pyclass(module = "stapel_runner_protocol.contract", name = "GatewayMachine")]
pub struct PyGateway {
    inner: Gateway,
}

#[pymethods]
impl PyGateway {
    #[new]
    #[pyo3(signature = (catalog = None, *, max_tool_calls = None, max_evidence_refs = None,
                        max_evidence_artifacts = None))]
    fn new(
        py: Python<'_>,
        catalog: Option<&Bound<'_, PyAny>>,
        max_tool_calls: Option<usize>,
        max_evidence_refs: Option<usize>,
        max_evidence_artifacts: Option<usize>,
    ) -> PyResult<Self> {
        let mut config = GatewayConfig::new(catalog_of(py, catalog)?);
        if let Some(n) = max_tool_calls {
            config.max_tool_calls = n;
        }
        if let Some(n) = max_evidence_refs {
            config.max_evidence_refs = n;
        }
        if let Some(n) = max_evidence_artifacts {
            config.max_evidence_artifacts = n;
        }
        Ok(Self {
            inner: Gateway::new(config),
        })
    }

    /// Feed one input (JSON form).
    fn handle_input(&mut self, now_ms: u64, input: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = input.py();
        let v = py_to_value(input)?;
        GatewayInput::from_value(&v)
            .and_then(|inp| self.inner.handle_input(now_ms, inp))
            .map_err(|e| gateway_error(py, &e))
    }

    /// The next output (JSON form), or `None` when waiting.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .poll_output()
            .map(|o| value_to_py(py, &o.to_value()))
            .transpose()
    }

    /// Every ready output.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        while let Some(o) = self.inner.poll_output() {
            list.append(value_to_py(py, &o.to_value())?)?;
        }
        Ok(list)
    }

    /// Always `None`: the gateway has no timers (the one-shape vocabulary).
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }

    /// The lifecycle stage: `idle`, `creating_sandbox`, `starting_session`,
    /// `dispatching`, `ending_session`, `destroying_sandbox`, `discarding_sandbox` or
    /// `finished`.
    #[getter]
    fn stage(&self) -> &'static str {
        self.inner.stage().as_str()
    }

    /// `True` once the result was emitted.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_finished()
    }
}

fn model_of<T>(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    parse: impl FnOnce(&Value) -> Result<T, ContractError>,
) -> PyResult<T> {
    parse(&py_to_value(value)?).map_err(|e| contract_error(py, &e))
}

/// One session of the reference rein (`SubprocessRein`): the core's rules for the tool
/// call prompt, the usage sum and the summary.
#[pyclass(module = "stapel_runner_protocol.contract", name = "ReinSession")]
pub struct PyReinSession {
    inner: ReinSession,
}

#[pymethods]
impl PyReinSession {
    #[new]
    fn new(profile: &Bound<'_, PyAny>, now_ms: u64) -> PyResult<Self> {
        let profile = model_of(profile.py(), profile, HarnessProfile::from_value)?;
        Ok(Self {
            inner: ReinSession::new(&profile, now_ms),
        })
    }

    /// The turn prompt for a tool call (counts one tool call).
    fn tool_call_prompt(&mut self, call: &Bound<'_, PyAny>) -> PyResult<String> {
        let call = model_of(call.py(), call, ToolCall::from_value)?;
        Ok(self.inner.tool_call_prompt(&call))
    }

    /// Add one turn's token split (`{"cache_read", …}`, the core's
    /// `ReinSession::record_turn_value`); `AdapterError` with code `invalid_usage` when it
    /// is not a valid split (nothing is added).
    fn record_turn(&mut self, usage: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = usage.py();
        self.inner
            .record_turn_value(&py_to_value(usage)?)
            .map_err(|e| crate::errors::adapter_error(py, &e))
    }

    /// The summary `end_session` reports at `now_ms` (canonical JSON form).
    fn summary<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.summary(now_ms).to_value())
    }

    /// Tool calls counted so far.
    #[getter]
    fn tool_calls(&self) -> u64 {
        self.inner.tool_calls()
    }
}

/// The harness role of a profile (`RoleSpec` JSON form).
#[pyfunction]
pub fn rein_role_spec<'py>(profile: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = profile.py();
    let profile = model_of(py, profile, HarnessProfile::from_value)?;
    value_to_py(py, &rein::role_spec(&profile).to_value())
}

/// The prompt of the turn `start_session` runs first (`inputs["prompt"]` when present and
/// not empty), or `None`.
#[pyfunction]
pub fn rein_initial_prompt(inputs: std::collections::BTreeMap<String, String>) -> Option<String> {
    let inputs: contract::StringMap = inputs.into_iter().collect();
    rein::initial_prompt(&inputs).map(str::to_owned)
}

/// The session map of the rein's `n`-th session in `sandbox`.
#[pyfunction]
pub fn rein_session_map<'py>(n: u64, sandbox: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = sandbox.py();
    let sandbox = model_of(py, sandbox, SandboxHandle::from_value)?;
    let map: serde_json::Map<String, Value> = rein::session_map(n, &sandbox)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    value_to_py(py, &Value::Object(map))
}

/// The session numbers of one rein (the core's `rein::SessionIds`): `open(sandbox)`
/// takes the next number (1, 2, …) and returns that session's map.
#[pyclass(module = "stapel_runner_protocol.contract", name = "ReinSessionIds")]
#[derive(Default)]
pub struct PySessionIds {
    inner: SessionIds,
}

#[pymethods]
impl PySessionIds {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// The next session's map in `sandbox`: `{"session_id": "s-<n>", "sandbox_id": …}`.
    fn open<'py>(&mut self, sandbox: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = sandbox.py();
        let sandbox = model_of(py, sandbox, SandboxHandle::from_value)?;
        value_to_py(py, &json!(self.inner.open(&sandbox)))
    }

    /// The number the next session gets.
    #[getter]
    fn next_number(&self) -> u64 {
        self.inner.next_number()
    }
}

/// The successful tool result of a turn whose text is `text`.
#[pyfunction]
pub fn rein_tool_result<'py>(py: Python<'py>, text: String) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &rein::tool_result_from_text(text).to_value())
}

/// The tool result of a turn that failed with adapter error `code` (`message`: the
/// harness's words): `ok: false` for `harness_error`, else `None` (no result: the rein
/// re-raises and the dispatch fails).
#[pyfunction]
pub fn rein_turn_error_result<'py>(
    py: Python<'py>,
    code: &str,
    message: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    rein::tool_result_from_turn_error(code, message)
        .map(|r| value_to_py(py, &r.to_value()))
        .transpose()
}

/// Register the reference rein's helpers.
///
/// # Errors
/// When a registration fails.
pub fn register_rein(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReinSession>()?;
    m.add_class::<PySessionIds>()?;
    m.add_function(wrap_pyfunction!(rein_role_spec, m)?)?;
    m.add_function(wrap_pyfunction!(rein_session_map, m)?)?;
    m.add_function(wrap_pyfunction!(rein_initial_prompt, m)?)?;
    m.add_function(wrap_pyfunction!(rein_tool_result, m)?)?;
    m.add_function(wrap_pyfunction!(rein_turn_error_result, m)?)?;
    Ok(())
}
