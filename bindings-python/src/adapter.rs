//! The adapter seam's data parts: usage mapping, `RoleSpec.from_invocation`, and the
//! UsageSplit check behind `TurnResult`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::{Map, Value};
use stapel_runner_protocol::adapter::usage::{
    usage_detail_keys, ANTHROPIC_USAGE_KEYS, OPENAI_USAGE_KEYS,
};
use stapel_runner_protocol::adapter::{
    self, AdapterError, AgentOptions, AgentTurn, RoleSpec, SpawnSpec, SubprocessConfig,
    SubprocessInput, SubprocessOutput, SubprocessSession, TurnResult,
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
/// `to_dict()` when it has one, else through the attributes the core lists in `keys`
/// (nested `*_details` objects through the core's `usage_detail_keys`).
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
            let value = match usage_detail_keys(key) {
                Some(inner) if v.cast::<PyDict>().is_err() => usage_json(&v, inner)?,
                _ => py_to_value(&v)?,
            };
            m.insert((*key).to_owned(), value);
        }
    }
    Ok(Value::Object(m))
}

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
    let v = usage_json(usage, &ANTHROPIC_USAGE_KEYS)?;
    let split = adapter::usage_from_anthropic_with_thinking(&v, thinking)
        .map_err(|e| adapter_error(py, &e))?;
    usage_to_py(py, split)
}

/// Map OpenAI Responses / Codex-shaped usage (a dict or an object) onto a
/// `stapel_taskspecs.UsageSplit`.
#[pyfunction]
pub fn usage_from_openai<'py>(usage: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = usage.py();
    let v = usage_json(usage, &OPENAI_USAGE_KEYS)?;
    let split = adapter::usage_from_openai(&v).map_err(|e| adapter_error(py, &e))?;
    usage_to_py(py, split)
}

/// Map usage of any supported shape (the five-component split itself — absent
/// components 0, `None` zero usage —, Anthropic or OpenAI/Codex, chosen by its keys)
/// onto a `stapel_taskspecs.UsageSplit`. `data` is a `dict`, another mapping, or
/// anything `dict()` takes (key/value pairs, as stapel-runner-protocol 0.1.1 read it).
#[pyfunction]
pub fn usage_from_mapping<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = data.py();
    let v = if data.is_none() {
        Value::Null
    } else if data.cast::<PyDict>().is_ok() {
        py_to_value(data)?
    } else {
        // `dict(data)`: a mapping, or an iterable of key/value pairs.
        let d = py.get_type::<PyDict>().call1((data,))?;
        py_to_value(&d)?
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

/// The agent-SDK session options (the core's `AgentOptions`) of a role given in its JSON
/// form (`RoleSpec.to_dict()`) and its explicit inline `system_prompt` (the core's
/// `RoleSpec::set_system_prompt`: it takes precedence over `extra["system_prompt"]`;
/// `None` means none), as a dict with only the options that are set. Raises
/// `AdapterError` `invalid_invocation` for a malformed role.
#[pyfunction]
pub fn agent_options<'py>(
    role_spec: &Bound<'py, PyAny>,
    system_prompt: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = role_spec.py();
    let map = py_to_map(role_spec)?;
    let role = map.get("role").and_then(Value::as_str);
    let mut spec = RoleSpec::from_invocation(&map, role).map_err(|e| adapter_error(py, &e))?;
    spec.set_system_prompt(system_prompt);
    value_to_py(py, &AgentOptions::from_role(&spec).to_value())
}

/// The inline system prompt of a role's `extra` keys (the core's
/// `RoleSpec::system_prompt`: `extra["system_prompt"]` when it is a string, else `None`).
#[pyfunction]
pub fn role_spec_system_prompt(extra: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    Ok(adapter::inline_system_prompt(&py_to_map(extra)?).map(str::to_owned))
}

/// Fold an agent-SDK turn (the core's `AgentTurn`): `text_blocks` are every text block
/// of every response message, in order; `usage` is the result message's usage (a dict
/// or an SDK usage object; `None` when there is no result message or it has no usage,
/// which is zero usage). Returns `(text, usage)` with the usage as a
/// `stapel_taskspecs.UsageSplit`; raises `AdapterError` `invalid_usage`.
#[pyfunction]
#[pyo3(signature = (text_blocks, usage = None))]
pub fn agent_turn<'py>(
    py: Python<'py>,
    text_blocks: Vec<String>,
    usage: Option<&Bound<'py, PyAny>>,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let mut turn = AgentTurn::new();
    for block in &text_blocks {
        turn.text_block(block);
    }
    turn.result(match usage {
        Some(u) if !u.is_none() => Some(usage_json(u, &ANTHROPIC_USAGE_KEYS)?),
        _ => None,
    });
    let r = turn.finish().map_err(|e| adapter_error(py, &e))?;
    Ok((r.text, usage_to_py(py, r.usage)?))
}

/// The core's `AdapterError` for a fault the host met in its own I/O
/// (`AdapterError::host_fault`: `spawn_failed`, `stdin_closed`, `adapter_unavailable`,
/// `connect_failed`, `turn_failed`) with the host's `message`, as an exception instance
/// to raise: `AdapterUnavailableError` for `adapter_unavailable`, `AdapterError`
/// otherwise. `ValueError` for another code.
#[pyfunction]
pub fn host_adapter_error<'py>(
    py: Python<'py>,
    code: &str,
    message: String,
) -> PyResult<Bound<'py, PyAny>> {
    let e = AdapterError::host_fault(code, message).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("{code:?} is not a host fault code"))
    })?;
    adapter_error_object(py, &e)
}

/// Add the adapter seam's defaults and its newer functions to the native module:
/// `DEFAULT_ROLE`, `DEFAULT_SESSION`, `DEFAULT_GRACE_MS`, `DEFAULT_TURN_MAX_LINE_BYTES`
/// (the core's constants), `agent_turn`, `host_adapter_error`, `role_spec_system_prompt`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DEFAULT_ROLE", adapter::DEFAULT_ROLE)?;
    m.add("DEFAULT_SESSION", adapter::DEFAULT_SESSION)?;
    m.add("DEFAULT_GRACE_MS", adapter::DEFAULT_GRACE_MS)?;
    m.add(
        "DEFAULT_TURN_MAX_LINE_BYTES",
        adapter::DEFAULT_TURN_MAX_LINE_BYTES,
    )?;
    m.add_function(wrap_pyfunction!(agent_turn, m)?)?;
    m.add_function(wrap_pyfunction!(host_adapter_error, m)?)?;
    m.add_function(wrap_pyfunction!(role_spec_system_prompt, m)?)?;
    Ok(())
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

/// The subprocess session machine (the core's sans-IO `SubprocessSession`): the host
/// performs what it asks (spawn, stdin writes, closing, signals) and feeds back the
/// child's stdout and what happened (spawned, spawn failed, write failed, exited, timeout).
///
/// `poll()` returns `(kind, value)` pairs: `("spawn", dict)` (`program`, `args`, `env`,
/// `cwd`, `new_process_group`), `("write_stdin", str)`, `("close_stdin", None)`,
/// `("signal", (target, signal))` (`"process"`/`"group"`, `"TERM"`/`"KILL"`),
/// `("close_stdout", None)`, `("progress", dict)`, `("turn_result", TurnResult)`,
/// `("error", AdapterError)` (not raised: the turn ended with it; the session stays usable
/// only for `harness_error`), or `None`. With `attached=True` (the default) the machine
/// starts over a child the host already runs (pid unknown, `process_group` as given).
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
        SubprocessOutput::Spawn(request) => {
            let d = PyDict::new(py);
            d.set_item("program", &request.program)?;
            d.set_item("args", &request.args)?;
            let env = PyDict::new(py);
            for (k, v) in &request.env {
                env.set_item(k, v)?;
            }
            d.set_item("env", env)?;
            d.set_item("cwd", &request.cwd)?;
            d.set_item("new_process_group", request.new_process_group)?;
            pair("spawn", d.into_any())
        }
        SubprocessOutput::WriteStdin(data) => {
            pair("write_stdin", PyString::new(py, &data).into_any())
        }
        SubprocessOutput::CloseStdin => pair("close_stdin", py.None().into_bound(py)),
        SubprocessOutput::Signal { target, signal } => pair(
            "signal",
            (target.as_str(), signal.as_str())
                .into_pyobject(py)?
                .into_any(),
        ),
        SubprocessOutput::CloseStdout => pair("close_stdout", py.None().into_bound(py)),
        SubprocessOutput::Progress(event) => pair("progress", map_to_py(py, &event)?.into_any()),
        SubprocessOutput::TurnResult(r) => pair("turn_result", turn_result_to_py(py, r)?),
        SubprocessOutput::Error(e) => pair("error", adapter_error_object(py, &e)?),
        other => pair("unknown", value_to_py(py, &other.to_value())?),
    }
}

#[pymethods]
impl PySubprocessTurnMachine {
    #[new]
    #[pyo3(signature = (max_line_bytes = adapter::DEFAULT_TURN_MAX_LINE_BYTES, *,
                        grace_ms = adapter::DEFAULT_GRACE_MS, attached = true,
                        process_group = false, map_usage = true))]
    fn new(
        py: Python<'_>,
        max_line_bytes: usize,
        grace_ms: u64,
        attached: bool,
        process_group: bool,
        map_usage: bool,
    ) -> PyResult<Self> {
        let config = SubprocessConfig::with_max_line_bytes(max_line_bytes)
            .grace_ms(grace_ms)
            .map_usage(map_usage);
        let mut machine = Self {
            inner: SubprocessSession::new(config),
        };
        if attached {
            machine.input(
                py,
                0,
                SubprocessInput::Spawned {
                    pid: None,
                    process_group,
                },
            )?;
        }
        Ok(machine)
    }

    /// Ask to start a child: queues `("spawn", request)` (the cleared environment: `PATH`
    /// = `path`, then `env`, then `ANTHROPIC_BASE_URL` = `llm_base_url`), or
    /// `("error", no_command)` for an empty command.
    #[pyo3(signature = (command, *, env = None, path = "", llm_base_url = None, cwd = None,
                        now_ms = 0))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        &mut self,
        py: Python<'_>,
        command: Vec<String>,
        env: Option<Vec<(String, String)>>,
        path: &str,
        llm_base_url: Option<String>,
        cwd: Option<String>,
        now_ms: u64,
    ) -> PyResult<()> {
        let mut spec = SpawnSpec::new(command, path);
        spec.env = env.unwrap_or_default();
        spec.llm_base_url = llm_base_url;
        spec.cwd = cwd;
        self.input(py, now_ms, SubprocessInput::Open(spec))
    }

    /// The child runs (`pid` when known; `process_group` when it leads its own group).
    #[pyo3(signature = (pid = None, *, process_group = false, now_ms = 0))]
    fn spawned(
        &mut self,
        py: Python<'_>,
        pid: Option<u32>,
        process_group: bool,
        now_ms: u64,
    ) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Spawned { pid, process_group })
    }

    /// The `spawn` output failed with `message`.
    #[pyo3(signature = (message, now_ms = 0))]
    fn spawn_failed(&mut self, py: Python<'_>, message: String, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::SpawnFailed { message })
    }

    /// Start a turn (queues the `{"type":"turn","prompt"}` line to write). Raises
    /// `AdapterError` `turn_in_progress`, `session_closed` or `not_spawned`.
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

    /// A `write_stdin` output failed with `message`.
    #[pyo3(signature = (message, now_ms = 0))]
    fn stdin_write_failed(&mut self, py: Python<'_>, message: String, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::StdinWriteFailed { message })
    }

    /// The child exited and was reaped.
    #[pyo3(signature = (now_ms = 0))]
    fn exited(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Exited)
    }

    /// Close the session: start the stop escalation (idempotent).
    #[pyo3(signature = (now_ms = 0))]
    fn close(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Close)
    }

    /// `now_ms` reached `poll_timeout()` before the child exited.
    fn timeout(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SubprocessInput::Timeout)
    }

    /// The deadline (in the `now_ms` clock) until which the host waits for the child's
    /// exit before calling `timeout()`; `None` when no wait is pending.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }

    /// The next output, or `None` when nothing is ready.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.inner.poll_output() {
            Some(o) => output_to_py(py, o),
            None => Ok(None),
        }
    }

    /// Every ready output, as a list.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        while let Some(o) = self.inner.poll_output() {
            if let Some(item) = output_to_py(py, o)? {
                list.append(item)?;
            }
        }
        Ok(list)
    }

    /// The `result` line that ended the most recent turn, as the dict the child wrote
    /// (every key), or `None` before the first result: the core's `result_line`.
    #[getter]
    fn result_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.inner.result_line() {
            Some(line) => Ok(Some(map_to_py(py, line)?.into_any())),
            None => Ok(None),
        }
    }

    /// `True` while a turn waits for its result.
    #[getter]
    fn in_turn(&self) -> bool {
        self.inner.in_turn()
    }

    /// `True` once no turn can start: the session is closing (the child is being
    /// stopped) or closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The lifecycle state: `new`, `spawning`, `idle`, `in_turn`, `closing` or
    /// `closed`.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().as_str()
    }
}

impl PySubprocessTurnMachine {
    fn input(&mut self, py: Python<'_>, now_ms: u64, input: SubprocessInput) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| adapter_error(py, &e))
    }
}
