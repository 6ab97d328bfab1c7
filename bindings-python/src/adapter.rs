//! The adapter seam's data parts: usage mapping, `RoleSpec.from_invocation`, and the
//! UsageSplit check behind `TurnResult`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::{Map, Value};
use stapel_runner_protocol::adapter::{
    self, RoleSpec, SubprocessConfig, SubprocessInput, SubprocessOutput, SubprocessSession,
    TurnResult,
};
use stapel_runner_protocol::wire::UsageSplit;

use crate::errors::{adapter_error, adapter_error_object, import_taskspecs, schema_error};
use crate::json::{map_to_py, py_to_map, py_to_value, value_to_py};

static USAGE_SPLIT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `stapel_taskspecs.UsageSplit` (imported on first use; `AdapterUnavailableError`
/// `taskspecs_unavailable` without it).
fn usage_split_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    USAGE_SPLIT
        .get_or_try_init(py, || {
            import_taskspecs(py)?
                .getattr("UsageSplit")
                .map(Bound::unbind)
        })
        .map(|c| c.bind(py))
}

/// A core split as a `stapel_taskspecs.UsageSplit`.
pub fn usage_to_py(py: Python<'_>, u: UsageSplit) -> PyResult<Bound<'_, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("cache_read", u.cache_read)?;
    kwargs.set_item("cache_write", u.cache_write)?;
    kwargs.set_item("fresh_input", u.fresh_input)?;
    kwargs.set_item("output", u.output)?;
    kwargs.set_item("thinking", u.thinking)?;
    usage_split_class(py)?.call((), Some(&kwargs))
}

/// Provider usage as JSON: a dict as is; another object through `model_dump()` /
/// `to_dict()` when it has one, else through the attributes named in `keys` (nested
/// `*_details` objects the same way).
fn usage_json(obj: &Bound<'_, PyAny>, keys: &[&str]) -> PyResult<Value> {
    // JSON values go to the core as they are (it reports a non-object); other objects
    // (SDK usage models) are read through their dump method or attributes.
    if let Ok(v) = py_to_value(obj) {
        return Ok(v);
    }
    for method in ["model_dump", "to_dict"] {
        if let Ok(f) = obj.getattr(method) {
            if f.is_callable() {
                return py_to_value(&f.call0()?);
            }
        }
    }
    let mut m = Map::new();
    for key in keys {
        if let Ok(v) = obj.getattr(*key) {
            if v.is_none() {
                continue;
            }
            let value = if key.ends_with("_details") && v.cast::<PyDict>().is_err() {
                usage_json(&v, &["cached_tokens", "reasoning_tokens"])?
            } else {
                py_to_value(&v)?
            };
            m.insert((*key).to_owned(), value);
        }
    }
    Ok(Value::Object(m))
}

const ANTHROPIC_KEYS: [&str; 6] = [
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
    "thinking_tokens",
    "reasoning_tokens",
];

const OPENAI_KEYS: [&str; 6] = [
    "input_tokens",
    "cached_input_tokens",
    "input_tokens_details",
    "output_tokens",
    "reasoning_output_tokens",
    "output_tokens_details",
];

/// Map Anthropic-shaped usage (a dict or an object with the usage attributes) onto a
/// `stapel_taskspecs.UsageSplit`. `thinking`, when positive, is the separately reported
/// thinking count (it replaces `thinking_tokens`/`reasoning_tokens`); thinking is
/// counted inside `output_tokens`, as Anthropic bills it.
#[pyfunction]
#[pyo3(signature = (usage, *, thinking = 0))]
pub fn usage_from_anthropic<'py>(
    usage: &Bound<'py, PyAny>,
    thinking: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let py = usage.py();
    let mut v = usage_json(usage, &ANTHROPIC_KEYS)?;
    if thinking > 0 {
        if let Value::Object(m) = &mut v {
            m.remove("reasoning_tokens");
            m.insert("thinking_tokens".into(), thinking.into());
        }
    }
    let split = adapter::usage_from_anthropic(&v).map_err(|e| adapter_error(py, &e))?;
    usage_to_py(py, split)
}

/// Map OpenAI Responses / Codex-shaped usage (a dict or an object) onto a
/// `stapel_taskspecs.UsageSplit`.
#[pyfunction]
pub fn usage_from_openai<'py>(usage: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = usage.py();
    let v = usage_json(usage, &OPENAI_KEYS)?;
    let split = adapter::usage_from_openai(&v).map_err(|e| adapter_error(py, &e))?;
    usage_to_py(py, split)
}

/// Map usage of any supported shape (the five-component split itself, Anthropic or
/// OpenAI/Codex, chosen by its keys) onto a `stapel_taskspecs.UsageSplit`.
#[pyfunction]
pub fn usage_from_mapping<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = data.py();
    let v = if data.cast::<PyDict>().is_ok() {
        py_to_value(data)?
    } else {
        let d = PyDict::new(py);
        d.update(&data.cast::<pyo3::types::PyMapping>()?.clone())?;
        py_to_value(d.as_any())?
    };
    let split = adapter::usage_from_mapping(&v).map_err(|e| adapter_error(py, &e))?;
    usage_to_py(py, split)
}

/// Check a usage split dict against the closed five-component schema; raises
/// `SchemaValidationError`.
#[pyfunction]
pub fn check_usage_split(data: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = data.py();
    UsageSplit::from_value(&crate::json::py_to_jvalue(data)?)
        .map(|_| ())
        .map_err(|e| schema_error(py, &e))
}

/// `RoleSpec` fields from a `task.assign` invocation, as a dict: `role`, `backend`,
/// `model`, `session`, `system_prompt_ref`, `allowed_tools`, `llm_base_url`, `budget`
/// (`None` when absent) and `extra` (the invocation keys seed 000 does not name).
#[pyfunction]
#[pyo3(signature = (invocation, role = None))]
pub fn role_spec_from_invocation<'py>(
    invocation: &Bound<'py, PyAny>,
    role: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let py = invocation.py();
    let inv = if invocation.is_none() {
        Map::new()
    } else {
        py_to_map(invocation)?
    };
    let spec = RoleSpec::from_invocation(&inv, role).map_err(|e| adapter_error(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("role", &spec.role)?;
    d.set_item("backend", &spec.backend)?;
    d.set_item("model", &spec.model)?;
    d.set_item("session", &spec.session)?;
    d.set_item("system_prompt_ref", &spec.system_prompt_ref)?;
    d.set_item("allowed_tools", &spec.allowed_tools)?;
    d.set_item("llm_base_url", &spec.llm_base_url)?;
    match &spec.budget {
        Some(b) => d.set_item("budget", value_to_py(py, b)?)?,
        None => d.set_item("budget", py.None())?,
    }
    d.set_item("extra", map_to_py(py, &spec.extra)?)?;
    Ok(d)
}

/// The core's JSON form of a `RoleSpec` (`RoleSpec::to_value`) from its fields.
#[pyfunction]
#[pyo3(signature = (role, backend, model, session, system_prompt_ref, allowed_tools,
                    llm_base_url, budget, extra))]
#[allow(clippy::too_many_arguments)]
pub fn role_spec_to_dict<'py>(
    py: Python<'py>,
    role: String,
    backend: Option<String>,
    model: Option<String>,
    session: String,
    system_prompt_ref: Option<String>,
    allowed_tools: Vec<String>,
    llm_base_url: Option<String>,
    budget: &Bound<'py, PyAny>,
    extra: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = RoleSpec {
        role,
        backend,
        model,
        session,
        system_prompt_ref,
        allowed_tools,
        llm_base_url,
        budget: if budget.is_none() {
            None
        } else {
            Some(py_to_value(budget)?)
        },
        extra: py_to_map(extra)?,
    };
    value_to_py(py, &spec.to_value())
}

/// Parse `{"text": str, "usage": UsageSplit}` strictly (the core's `TurnResult`); returns
/// `(text, usage)` with the usage as a `stapel_taskspecs.UsageSplit`.
#[pyfunction]
pub fn turn_result_from_value<'py>(
    value: &Bound<'py, PyAny>,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let py = value.py();
    let r = TurnResult::from_value(&py_to_value(value)?).map_err(|e| adapter_error(py, &e))?;
    Ok((r.text, usage_to_py(py, r.usage)?))
}

static TURN_RESULT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn turn_result_to_py<'py>(py: Python<'py>, r: TurnResult) -> PyResult<Bound<'py, PyAny>> {
    let cls = TURN_RESULT
        .get_or_try_init(py, || {
            py.import("stapel_runner_protocol.adapters")?
                .getattr("TurnResult")
                .map(Bound::unbind)
        })?
        .bind(py);
    cls.call1((r.text, usage_to_py(py, r.usage)?))
}

/// The subprocess JSONL turn machine (the core's sans-IO `SubprocessSession`): the host
/// writes what it asks to the child's stdin and feeds back the child's stdout.
///
/// `poll()` returns `(kind, value)` pairs: `("write_stdin", str)`, `("progress", dict)`,
/// `("turn_result", TurnResult)`, `("error", AdapterError)` (not raised: the turn ended
/// with it; the session stays usable only for `harness_error`), or `None`.
#[pyclass(
    module = "stapel_runner_protocol.adapters",
    name = "SubprocessTurnMachine"
)]
pub struct PySubprocessTurnMachine {
    inner: SubprocessSession,
}

fn output_to_py<'py>(py: Python<'py>, o: SubprocessOutput) -> PyResult<Option<Bound<'py, PyAny>>> {
    let pair = |kind: &str, v: Bound<'py, PyAny>| -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(Some((kind, v).into_pyobject(py)?.into_any()))
    };
    match o {
        SubprocessOutput::Waiting => Ok(None),
        SubprocessOutput::WriteStdin(data) => {
            pair("write_stdin", PyString::new(py, &data).into_any())
        }
        SubprocessOutput::Progress(event) => pair("progress", map_to_py(py, &event)?.into_any()),
        SubprocessOutput::TurnResult(r) => pair("turn_result", turn_result_to_py(py, r)?),
        SubprocessOutput::Error(e) => pair("error", adapter_error_object(py, &e)?),
        other => pair("unknown", value_to_py(py, &other.to_value())?),
    }
}

#[pymethods]
impl PySubprocessTurnMachine {
    #[new]
    #[pyo3(signature = (max_line_bytes = 1048576))]
    fn new(max_line_bytes: usize) -> Self {
        Self {
            inner: SubprocessSession::new(SubprocessConfig::with_max_line_bytes(max_line_bytes)),
        }
    }

    /// Start a turn (queues the `{"type":"turn","prompt"}` line to write). Raises
    /// `AdapterError` `turn_in_progress` or `session_closed`.
    #[pyo3(signature = (prompt, now_ms = 0))]
    fn start_turn(&mut self, py: Python<'_>, prompt: &str, now_ms: u64) -> PyResult<()> {
        self.input(
            py,
            now_ms,
            SubprocessInput::StartTurn {
                prompt: prompt.to_owned(),
            },
        )
    }

    /// Bytes read from the child's stdout, in any chunking.
    #[pyo3(signature = (data, now_ms = 0))]
    fn feed_stdout(&mut self, py: Python<'_>, data: &[u8], now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Stdout(data.to_vec()))
    }

    /// The child's stdout reached end of file.
    #[pyo3(signature = (now_ms = 0))]
    fn feed_eof(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Eof)
    }

    /// The next output, or `None` when nothing is ready.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        output_to_py(py, self.inner.poll_output())
    }

    /// Every ready output, as a list.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        while let Some(item) = output_to_py(py, self.inner.poll_output())? {
            list.append(item)?;
        }
        Ok(list)
    }

    /// `True` while a turn waits for its result.
    #[getter]
    fn in_turn(&self) -> bool {
        self.inner.in_turn()
    }

    /// `True` once stdout ended or a stream-level error closed the session.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}

impl PySubprocessTurnMachine {
    fn input(&mut self, py: Python<'_>, now_ms: u64, input: SubprocessInput) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| adapter_error(py, &e))
    }
}
