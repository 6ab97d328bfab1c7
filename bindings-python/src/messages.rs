//! The seven message classes of `stapel_runner_protocol.messages`: mutable Python objects
//! over the core's message structs. Parsing, validation and encoding are the core's
//! (`wire::from_object`, `Message::validate`, `wire::encode`); this module converts.

use indexmap::IndexMap;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use stapel_runner_protocol::json::{Number, Object, Value};
use stapel_runner_protocol::wire::{
    self, Hello, Message, MessageType, Nonce, Ping, Pong, SentAt, TaskAssign, TaskCancel,
    TaskProgress, TaskReportMessage,
};

use crate::errors::{decode_error, schema_error};
use crate::fields::Slot;
use crate::json::{number_to_py, object_to_py, py_to_object, type_name};

type Obj = Slot<Object>;

/// The error the core reports for fields of the wrong shape (e.g. `capabilities = [1]`).
fn shape_error(py: Python<'_>, object: Object) -> PyErr {
    match wire::from_object(object, false) {
        Err(e) => decode_error(py, &e),
        Ok(_) => PyTypeError::new_err("message fields have types the message cannot hold"),
    }
}

/// Append `extra` (a dict) to a message's JSON object, skipping declared keys.
fn push_extra(py: Python<'_>, out: &mut Object, extra: &Obj) -> PyResult<()> {
    match extra.json(py)? {
        Value::Object(m) => {
            for (k, v) in m {
                if !out.contains_key(&k) {
                    out.insert(k, v);
                }
            }
            Ok(())
        }
        _ => Err(PyTypeError::new_err("extra must be a dict")),
    }
}

fn nonce_from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Nonce>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Nonce::Text(s.to_cow()?.into_owned())));
    }
    if obj.cast::<PyInt>().is_ok() && obj.cast::<PyBool>().is_err() {
        return Ok(Some(Nonce::Integer(obj.extract()?)));
    }
    Err(PyTypeError::new_err(format!(
        "nonce must be a str, an int or None, not {}",
        type_name(obj)
    )))
}

fn nonce_to_py<'py>(py: Python<'py>, n: &Option<Nonce>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match n {
        None => py.None().into_bound(py),
        Some(Nonce::Text(s)) => PyString::new(py, s).into_any(),
        Some(Nonce::Integer(i)) => i.into_pyobject(py)?.into_any(),
    })
}

fn sent_at_from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SentAt>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(SentAt::Text(s.to_cow()?.into_owned())));
    }
    if obj.cast::<PyBool>().is_err() {
        if obj.cast::<PyInt>().is_ok() {
            if let Ok(i) = obj.extract::<i64>() {
                return Ok(Some(SentAt::Number(i.into())));
            }
            if let Ok(u) = obj.extract::<u64>() {
                return Ok(Some(SentAt::Number(u.into())));
            }
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return Number::from_f64(f.value())
                .map(|n| Some(SentAt::Number(n)))
                .ok_or_else(|| PyValueError::new_err("sent_at must be finite"));
        }
    }
    Err(PyTypeError::new_err(format!(
        "sent_at must be a str, a number or None, not {}",
        type_name(obj)
    )))
}

fn sent_at_to_py<'py>(py: Python<'py>, t: &Option<SentAt>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match t {
        None => py.None().into_bound(py),
        Some(SentAt::Text(s)) => PyString::new(py, s).into_any(),
        Some(SentAt::Number(n)) => number_to_py(py, n)?,
    })
}

/// Python's `repr()` of a str.
fn str_repr(s: &str) -> String {
    Python::attach(|py| {
        PyString::new(py, s)
            .repr()
            .and_then(|r| r.to_cow().map(|c| c.into_owned()))
            .unwrap_or_else(|_| format!("{s:?}"))
    })
}

/// Build the message a dict describes, as the class `mt` (the dict's `type` is ignored).
fn from_dict_as<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    mt: MessageType,
    validate: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut object = py_to_object(data)?;
    object.insert("type", mt.as_str());
    match wire::from_object(object, validate) {
        Ok(m) => message_to_py(py, m),
        Err(e) => Err(decode_error(py, &e)),
    }
}

/// A core message as an instance of its Python class.
pub fn message_to_py(py: Python<'_>, m: Message) -> PyResult<Bound<'_, PyAny>> {
    Ok(match m {
        Message::Hello(m) => Bound::new(py, PyHello::from_core(m))?.into_any(),
        Message::TaskAssign(m) => Bound::new(py, PyTaskAssign::from_core(m))?.into_any(),
        Message::TaskProgress(m) => Bound::new(py, PyTaskProgress::from_core(m))?.into_any(),
        Message::TaskReport(m) => Bound::new(py, PyTaskReportMessage::from_core(m))?.into_any(),
        Message::TaskCancel(m) => Bound::new(py, PyTaskCancel::from_core(m))?.into_any(),
        Message::Ping(m) => Bound::new(py, PyPing::from_core(m))?.into_any(),
        Message::Pong(m) => Bound::new(py, PyPong::from_core(m))?.into_any(),
    })
}

/// The core message of a Python message object. A `dict` is built into a message with
/// the tolerant rules (`from_dict`).
///
/// # Errors
/// `TypeError` for other objects; the core's error for fields of the wrong shape.
pub fn message_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Message> {
    let py = obj.py();
    if let Ok(m) = obj.cast::<PyTaskProgress>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyTaskAssign>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyTaskReportMessage>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyTaskCancel>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyHello>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyPing>() {
        return m.borrow().to_message(py);
    }
    if let Ok(m) = obj.cast::<PyPong>() {
        return m.borrow().to_message(py);
    }
    if obj.cast::<PyDict>().is_ok() {
        return wire::from_object(py_to_object(obj)?, false).map_err(|e| decode_error(py, &e));
    }
    Err(PyTypeError::new_err(format!(
        "expected a protocol message or a dict, got {}",
        type_name(obj)
    )))
}

/// Run `f` on the core message of a Python message object without copying its native
/// containers: they are moved out, and moved back from the message `f` returns. A
/// `dict` is built into a message with the tolerant rules.
///
/// # Errors
/// As [`message_from_py`]; `f`'s own result is returned as is.
pub fn with_message<R>(
    obj: &Bound<'_, PyAny>,
    f: impl FnOnce(Message) -> (R, Message),
) -> PyResult<R> {
    let py = obj.py();
    macro_rules! lent {
        ($($ty:ty),*) => {$(
            if let Ok(c) = obj.cast::<$ty>() {
                let mut b = c.try_borrow_mut()?;
                let m = b.lend(py)?;
                let (r, back) = f(m);
                b.restore(back);
                return Ok(r);
            }
        )*};
    }
    lent!(
        PyTaskProgress,
        PyTaskAssign,
        PyTaskReportMessage,
        PyTaskCancel,
        PyHello,
        PyPing,
        PyPong
    );
    let m = message_from_py(obj)?;
    Ok(f(m).0)
}

/// Set the `seq` of a Python message object (after the core stamped its copy).
pub fn set_seq(obj: &Bound<'_, PyAny>, seq: u64) -> PyResult<()> {
    if let Ok(m) = obj.cast::<PyTaskProgress>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskAssign>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskReportMessage>() {
        m.borrow_mut().seq = seq;
    } else if let Ok(m) = obj.cast::<PyTaskCancel>() {
        m.borrow_mut().seq = seq;
    }
    Ok(())
}

fn eq_messages(a: PyResult<Message>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let py = other.py();
    let not_impl = || py.NotImplemented();
    let a = match a {
        Ok(a) => a,
        Err(_) => return Ok(not_impl()),
    };
    if other.cast::<PyDict>().is_ok() {
        return Ok(not_impl());
    }
    match message_from_py(other) {
        Ok(b) => Ok(PyBool::new(py, a == b).to_owned().into_any().unbind()),
        Err(_) => Ok(not_impl()),
    }
}

fn to_dict_of<'py>(py: Python<'py>, m: PyResult<Message>) -> PyResult<Bound<'py, PyDict>> {
    object_to_py(py, &wire::to_object(&m?))
}

fn validate_message(py: Python<'_>, m: PyResult<Message>) -> PyResult<()> {
    m?.validate().map_err(|e| schema_error(py, &e))
}

macro_rules! message_methods {
    ($ty:ident, $mt:expr, $name:literal, { $($body:tt)* }) => {
        #[pymethods]
        impl $ty {
        /// The wire `type` of this class.
        #[classattr]
        const ARTIFACT: &'static str = $name;

        /// Build a message from a dict with the tolerant rules of `decode` (absent
        /// fields take defaults, unknown keys go to `extra`). The dict's `type` is
        /// ignored: the class decides.
        #[classmethod]
        fn from_dict<'py>(
            _cls: &Bound<'py, pyo3::types::PyType>,
            data: &Bound<'py, PyAny>,
        ) -> PyResult<Bound<'py, PyAny>> {
            from_dict_as(data.py(), data, $mt, false)
        }

        /// `from_dict`, then (by default) full schema validation.
        #[classmethod]
        #[pyo3(signature = (data, *, validate = true))]
        fn parse<'py>(
            _cls: &Bound<'py, pyo3::types::PyType>,
            data: &Bound<'py, PyAny>,
            validate: bool,
        ) -> PyResult<Bound<'py, PyAny>> {
            from_dict_as(data.py(), data, $mt, validate)
        }

        /// The message as a dict, exactly as `encode` writes it.
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            to_dict_of(py, self.to_message(py))
        }

        /// Check every schema rule; raises `SchemaValidationError`, returns `self`.
        fn validate(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
            let py = slf.py();
            validate_message(py, slf.borrow().to_message(py))?;
            Ok(slf)
        }

        fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
            eq_messages(self.to_message(other.py()), other)
        }

        /// Pickling and copying go through `to_dict` / `from_dict`.
        #[allow(clippy::type_complexity)]
        fn __reduce__<'py>(
            slf: &Bound<'py, Self>,
        ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
            let py = slf.py();
            let from_dict = slf.get_type().getattr("from_dict")?;
            let d = to_dict_of(py, slf.borrow().to_message(py))?;
            Ok((from_dict, (d,)))
        }

        $($body)*
        }
    };
}

// ------------------------------------------------------------------------------------

/// `hello`, runner → hub: the first frame of every connection.
#[pyclass(module = "stapel_runner_protocol.messages", name = "Hello")]
pub struct PyHello {
    #[pyo3(get, set)]
    project_id: String,
    #[pyo3(get, set)]
    runner_version: String,
    #[pyo3(get, set)]
    protocol_version: u64,
    capabilities: Slot<Vec<String>>,
    resume: Slot<IndexMap<String, u64>>,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyHello {
    /// Move the message out for the core (no copy of native containers); see
    /// [`restore`](Self::restore).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let (c, r, e) = (
            self.capabilities.prepare(py)?,
            self.resume.prepare(py)?,
            self.extra.prepare(py)?,
        );
        if c.is_mismatch() || r.is_mismatch() || e.is_mismatch() {
            return Err(shape_error(py, self.to_json(py)?));
        }
        Ok(Message::Hello(Hello {
            schema_version: self.schema_version,
            protocol_version: self.protocol_version,
            project_id: self.project_id.clone(),
            runner_version: self.runner_version.clone(),
            capabilities: self.capabilities.take(c),
            resume: self.resume.take(r),
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::Hello(m) = m {
            self.capabilities.give_back(m.capabilities);
            self.resume.give_back(m.resume);
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: Hello) -> Self {
        Self {
            project_id: m.project_id,
            runner_version: m.runner_version,
            protocol_version: m.protocol_version,
            capabilities: Slot::Native(m.capabilities),
            resume: Slot::Native(m.resume),
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
        let mut o = Object::new();
        o.insert("schema_version", self.schema_version);
        o.insert("type", "hello");
        o.insert("protocol_version", self.protocol_version);
        o.insert("project_id", self.project_id.as_str());
        o.insert("runner_version", self.runner_version.as_str());
        o.insert("capabilities", self.capabilities.json(py)?);
        o.insert("resume", self.resume.json(py)?);
        push_extra(py, &mut o, &self.extra)?;
        Ok(o)
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match (
            self.capabilities.native(py)?,
            self.resume.native(py)?,
            self.extra.native(py)?,
        ) {
            (Some(capabilities), Some(resume), Some(extra)) => Ok(Message::Hello(Hello {
                schema_version: self.schema_version,
                protocol_version: self.protocol_version,
                project_id: self.project_id.clone(),
                runner_version: self.runner_version.clone(),
                capabilities,
                resume,
                extra,
            })),
            _ => Err(shape_error(py, self.to_json(py)?)),
        }
    }
}

message_methods!(PyHello, MessageType::Hello, "hello", {
    #[new]
    #[pyo3(signature = (project_id = "", runner_version = "",
                        protocol_version = 1, capabilities = None,
                        resume = None, schema_version = 1, extra = None))]
    fn new(
        project_id: &str,
        runner_version: &str,
        protocol_version: u64,
        capabilities: Option<&Bound<'_, PyAny>>,
        resume: Option<&Bound<'_, PyAny>>,
        schema_version: u64,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> Self {
        Self {
            project_id: project_id.to_owned(),
            runner_version: runner_version.to_owned(),
            protocol_version,
            capabilities: Slot::arg(capabilities),
            resume: Slot::arg(resume),
            schema_version,
            extra: Slot::arg(extra),
        }
    }

    /// Backends the runner can drive (open strings).
    #[getter]
    fn capabilities(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.capabilities.get(py)
    }
    #[setter]
    fn set_capabilities(&mut self, v: &Bound<'_, PyAny>) {
        self.capabilities.set(v)
    }
    /// Reconnect declaration: task id → last seq received contiguously from the hub.
    #[getter]
    fn resume(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.resume.get(py)
    }
    #[setter]
    fn set_resume(&mut self, v: &Bound<'_, PyAny>) {
        self.resume.set(v)
    }
    /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
    #[getter]
    fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.extra.get(py)
    }
    #[setter]
    fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
        self.extra.set(v)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Hello(project_id={}, runner_version={}, protocol_version={}, capabilities={}, resume={}, schema_version={}, extra={})",
            str_repr(&self.project_id),
            str_repr(&self.runner_version),
            self.protocol_version,
            self.capabilities.repr(py)?,
            self.resume.repr(py)?,
            self.schema_version,
            self.extra.repr(py)?
        ))
    }
});

// ------------------------------------------------------------------------------------

/// `task.assign`, hub → runner: run one attempt of a task.
#[pyclass(module = "stapel_runner_protocol.messages", name = "TaskAssign")]
pub struct PyTaskAssign {
    #[pyo3(get, set)]
    task_id: String,
    task: Obj,
    #[pyo3(get, set)]
    role: String,
    invocation: Obj,
    #[pyo3(get, set)]
    seq: u64,
    #[pyo3(get, set)]
    attempt: u64,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyTaskAssign {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let (t, i, e) = (
            self.task.prepare(py)?,
            self.invocation.prepare(py)?,
            self.extra.prepare(py)?,
        );
        if t.is_mismatch() || i.is_mismatch() || e.is_mismatch() {
            return Err(shape_error(py, self.to_json(py)?));
        }
        Ok(Message::TaskAssign(TaskAssign {
            schema_version: self.schema_version,
            task_id: self.task_id.clone(),
            task: self.task.take(t),
            role: self.role.clone(),
            invocation: self.invocation.take(i),
            seq: self.seq,
            attempt: self.attempt,
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::TaskAssign(m) = m {
            self.task.give_back(m.task);
            self.invocation.give_back(m.invocation);
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: TaskAssign) -> Self {
        Self {
            task_id: m.task_id,
            task: Slot::Native(m.task),
            role: m.role,
            invocation: Slot::Native(m.invocation),
            seq: m.seq,
            attempt: m.attempt,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
        let mut o = Object::new();
        o.insert("schema_version", self.schema_version);
        o.insert("type", "task.assign");
        o.insert("task_id", self.task_id.as_str());
        o.insert("task", self.task.json(py)?);
        o.insert("role", self.role.as_str());
        o.insert("invocation", self.invocation.json(py)?);
        o.insert("seq", self.seq);
        o.insert("attempt", self.attempt);
        push_extra(py, &mut o, &self.extra)?;
        Ok(o)
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match (
            self.task.native(py)?,
            self.invocation.native(py)?,
            self.extra.native(py)?,
        ) {
            (Some(task), Some(invocation), Some(extra)) => Ok(Message::TaskAssign(TaskAssign {
                schema_version: self.schema_version,
                task_id: self.task_id.clone(),
                task,
                role: self.role.clone(),
                invocation,
                seq: self.seq,
                attempt: self.attempt,
                extra,
            })),
            _ => Err(shape_error(py, self.to_json(py)?)),
        }
    }
}

message_methods!(PyTaskAssign, MessageType::TaskAssign, "task.assign", {
    #[new]
    #[pyo3(signature = (task_id = "", task = None, role = "",
                        invocation = None, seq = 0, attempt = 0,
                        schema_version = 1, extra = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        task_id: &str,
        task: Option<&Bound<'_, PyAny>>,
        role: &str,
        invocation: Option<&Bound<'_, PyAny>>,
        seq: u64,
        attempt: u64,
        schema_version: u64,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> Self {
        Self {
            task_id: task_id.to_owned(),
            task: Slot::arg(task),
            role: role.to_owned(),
            invocation: Slot::arg(invocation),
            seq,
            attempt,
            schema_version,
            extra: Slot::arg(extra),
        }
    }

    /// The TaskSpec object (a dict, keys in arrival order).
    #[getter]
    fn task(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.task.get(py)
    }
    #[setter]
    fn set_task(&mut self, v: &Bound<'_, PyAny>) {
        self.task.set(v)
    }
    /// Model↔harness pairing and runtime wiring (a dict).
    #[getter]
    fn invocation(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.invocation.get(py)
    }
    #[setter]
    fn set_invocation(&mut self, v: &Bound<'_, PyAny>) {
        self.invocation.set(v)
    }
    /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
    #[getter]
    fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.extra.get(py)
    }
    #[setter]
    fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
        self.extra.set(v)
    }

    /// The embedded task as a validated `stapel_taskspecs.TaskSpec` (validation by the
    /// core; raises `SchemaValidationError` with locations under `task/`).
    #[getter]
    fn task_spec<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let task = match self.task.native(py)? {
            Some(t) => t,
            None => return Err(shape_error(py, self.to_json(py)?)),
        };
        let probe = TaskAssign::new(task, "", Object::new());
        probe.task_spec().map_err(|e| schema_error(py, &e))?;
        let d = object_to_py(py, &probe.task)?;
        crate::errors::import_taskspecs(py)?
            .getattr("TaskSpec")?
            .call_method1("from_dict", (d,))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TaskAssign(task_id={}, task={}, role={}, invocation={}, seq={}, attempt={}, schema_version={}, extra={})",
            str_repr(&self.task_id),
            self.task.repr(py)?,
            str_repr(&self.role),
            self.invocation.repr(py)?,
            self.seq,
            self.attempt,
            self.schema_version,
            self.extra.repr(py)?
        ))
    }
});

// ------------------------------------------------------------------------------------

/// `task.progress`, runner → hub.
#[pyclass(module = "stapel_runner_protocol.messages", name = "TaskProgress")]
pub struct PyTaskProgress {
    #[pyo3(get, set)]
    task_id: String,
    #[pyo3(get, set)]
    seq: u64,
    #[pyo3(get, set)]
    kind: String,
    payload: Obj,
    #[pyo3(get, set)]
    attempt: u64,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyTaskProgress {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let (p, e) = (self.payload.prepare(py)?, self.extra.prepare(py)?);
        if p.is_mismatch() || e.is_mismatch() {
            return Err(shape_error(py, self.to_json(py)?));
        }
        Ok(Message::TaskProgress(TaskProgress {
            schema_version: self.schema_version,
            task_id: self.task_id.clone(),
            seq: self.seq,
            kind: self.kind.clone(),
            attempt: self.attempt,
            payload: self.payload.take(p),
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::TaskProgress(m) = m {
            self.payload.give_back(m.payload);
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: TaskProgress) -> Self {
        Self {
            task_id: m.task_id,
            seq: m.seq,
            kind: m.kind,
            payload: Slot::Native(m.payload),
            attempt: m.attempt,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
        let mut o = Object::new();
        o.insert("schema_version", self.schema_version);
        o.insert("type", "task.progress");
        o.insert("task_id", self.task_id.as_str());
        o.insert("seq", self.seq);
        o.insert("kind", self.kind.as_str());
        o.insert("attempt", self.attempt);
        o.insert("payload", self.payload.json(py)?);
        push_extra(py, &mut o, &self.extra)?;
        Ok(o)
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match (self.payload.native(py)?, self.extra.native(py)?) {
            (Some(payload), Some(extra)) => Ok(Message::TaskProgress(TaskProgress {
                schema_version: self.schema_version,
                task_id: self.task_id.clone(),
                seq: self.seq,
                kind: self.kind.clone(),
                attempt: self.attempt,
                payload,
                extra,
            })),
            _ => Err(shape_error(py, self.to_json(py)?)),
        }
    }
}

message_methods!(
    PyTaskProgress,
    MessageType::TaskProgress,
    "task.progress",
    {
        #[new]
        #[pyo3(signature = (task_id = "", seq = 0, kind = "", payload = None,
                        attempt = 0, schema_version = 1, extra = None))]
        fn new(
            task_id: &str,
            seq: u64,
            kind: &str,
            payload: Option<&Bound<'_, PyAny>>,
            attempt: u64,
            schema_version: u64,
            extra: Option<&Bound<'_, PyAny>>,
        ) -> Self {
            Self {
                task_id: task_id.to_owned(),
                seq,
                kind: kind.to_owned(),
                payload: Slot::arg(payload),
                attempt,
                schema_version,
                extra: Slot::arg(extra),
            }
        }

        /// Kind-specific body (a dict, keys in arrival order).
        #[getter]
        fn payload(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
            self.payload.get(py)
        }
        #[setter]
        fn set_payload(&mut self, v: &Bound<'_, PyAny>) {
            self.payload.set(v)
        }
        /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
        #[getter]
        fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
            self.extra.get(py)
        }
        #[setter]
        fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
            self.extra.set(v)
        }

        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            Ok(format!(
            "TaskProgress(task_id={}, seq={}, kind={}, payload={}, attempt={}, schema_version={}, extra={})",
            str_repr(&self.task_id),
            self.seq,
            str_repr(&self.kind),
            self.payload.repr(py)?,
            self.attempt,
            self.schema_version,
            self.extra.repr(py)?
        ))
        }
    }
);

// ------------------------------------------------------------------------------------

/// `task.report`, runner → hub: the attempt's TaskReport.
#[pyclass(module = "stapel_runner_protocol.messages", name = "TaskReportMessage")]
pub struct PyTaskReportMessage {
    #[pyo3(get, set)]
    task_id: String,
    report: Obj,
    #[pyo3(get, set)]
    seq: u64,
    #[pyo3(get, set)]
    attempt: u64,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyTaskReportMessage {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let (r, e) = (self.report.prepare(py)?, self.extra.prepare(py)?);
        if r.is_mismatch() || e.is_mismatch() {
            return Err(shape_error(py, self.to_json(py)?));
        }
        Ok(Message::TaskReport(TaskReportMessage {
            schema_version: self.schema_version,
            task_id: self.task_id.clone(),
            report: self.report.take(r),
            seq: self.seq,
            attempt: self.attempt,
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::TaskReport(m) = m {
            self.report.give_back(m.report);
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: TaskReportMessage) -> Self {
        Self {
            task_id: m.task_id,
            report: Slot::Native(m.report),
            seq: m.seq,
            attempt: m.attempt,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
        let mut o = Object::new();
        o.insert("schema_version", self.schema_version);
        o.insert("type", "task.report");
        o.insert("task_id", self.task_id.as_str());
        o.insert("report", self.report.json(py)?);
        o.insert("seq", self.seq);
        o.insert("attempt", self.attempt);
        push_extra(py, &mut o, &self.extra)?;
        Ok(o)
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match (self.report.native(py)?, self.extra.native(py)?) {
            (Some(report), Some(extra)) => Ok(Message::TaskReport(TaskReportMessage {
                schema_version: self.schema_version,
                task_id: self.task_id.clone(),
                report,
                seq: self.seq,
                attempt: self.attempt,
                extra,
            })),
            _ => Err(shape_error(py, self.to_json(py)?)),
        }
    }
}

message_methods!(
    PyTaskReportMessage,
    MessageType::TaskReport,
    "task.report",
    {
        #[new]
        #[pyo3(signature = (task_id = "", report = None, seq = 0, attempt = 0,
                        schema_version = 1, extra = None))]
        fn new(
            task_id: &str,
            report: Option<&Bound<'_, PyAny>>,
            seq: u64,
            attempt: u64,
            schema_version: u64,
            extra: Option<&Bound<'_, PyAny>>,
        ) -> Self {
            Self {
                task_id: task_id.to_owned(),
                report: Slot::arg(report),
                seq,
                attempt,
                schema_version,
                extra: Slot::arg(extra),
            }
        }

        /// The TaskReport object (a dict, keys in arrival order).
        #[getter]
        fn report(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
            self.report.get(py)
        }
        #[setter]
        fn set_report(&mut self, v: &Bound<'_, PyAny>) {
            self.report.set(v)
        }
        /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
        #[getter]
        fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
            self.extra.get(py)
        }
        #[setter]
        fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
            self.extra.set(v)
        }

        /// The embedded report as a validated `stapel_taskspecs.TaskReport` (validation by
        /// the core; raises `SchemaValidationError` with locations under `report/`).
        #[getter]
        fn report_model<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let report = match self.report.native(py)? {
                Some(r) => r,
                None => return Err(shape_error(py, self.to_json(py)?)),
            };
            let probe = TaskReportMessage::new(report);
            probe.task_report().map_err(|e| schema_error(py, &e))?;
            let d = object_to_py(py, &probe.report)?;
            crate::errors::import_taskspecs(py)?
                .getattr("TaskReport")?
                .call_method1("from_dict", (d,))
        }

        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            Ok(format!(
            "TaskReportMessage(task_id={}, report={}, seq={}, attempt={}, schema_version={}, extra={})",
            str_repr(&self.task_id),
            self.report.repr(py)?,
            self.seq,
            self.attempt,
            self.schema_version,
            self.extra.repr(py)?
        ))
        }
    }
);

// ------------------------------------------------------------------------------------

/// `task.cancel`, hub → runner: stop at the next automaton boundary.
#[pyclass(module = "stapel_runner_protocol.messages", name = "TaskCancel")]
pub struct PyTaskCancel {
    #[pyo3(get, set)]
    task_id: String,
    #[pyo3(get, set)]
    reason: String,
    #[pyo3(get, set)]
    seq: u64,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyTaskCancel {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let e = self.extra.prepare(py)?;
        if e.is_mismatch() {
            return Err(shape_error(py, self.to_json(py)?));
        }
        Ok(Message::TaskCancel(TaskCancel {
            schema_version: self.schema_version,
            task_id: self.task_id.clone(),
            reason: self.reason.clone(),
            seq: self.seq,
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::TaskCancel(m) = m {
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: TaskCancel) -> Self {
        Self {
            task_id: m.task_id,
            reason: m.reason,
            seq: m.seq,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_json(&self, py: Python<'_>) -> PyResult<Object> {
        let mut o = Object::new();
        o.insert("schema_version", self.schema_version);
        o.insert("type", "task.cancel");
        o.insert("task_id", self.task_id.as_str());
        o.insert("reason", self.reason.as_str());
        o.insert("seq", self.seq);
        push_extra(py, &mut o, &self.extra)?;
        Ok(o)
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match self.extra.native(py)? {
            Some(extra) => Ok(Message::TaskCancel(TaskCancel {
                schema_version: self.schema_version,
                task_id: self.task_id.clone(),
                reason: self.reason.clone(),
                seq: self.seq,
                extra,
            })),
            None => Err(shape_error(py, self.to_json(py)?)),
        }
    }
}

message_methods!(PyTaskCancel, MessageType::TaskCancel, "task.cancel", {
    #[new]
    #[pyo3(signature = (task_id = "", reason = "", seq = 0,
                        schema_version = 1, extra = None))]
    fn new(
        task_id: &str,
        reason: &str,
        seq: u64,
        schema_version: u64,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> Self {
        Self {
            task_id: task_id.to_owned(),
            reason: reason.to_owned(),
            seq,
            schema_version,
            extra: Slot::arg(extra),
        }
    }

    /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
    #[getter]
    fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.extra.get(py)
    }
    #[setter]
    fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
        self.extra.set(v)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TaskCancel(task_id={}, reason={}, seq={}, schema_version={}, extra={})",
            str_repr(&self.task_id),
            str_repr(&self.reason),
            self.seq,
            self.schema_version,
            self.extra.repr(py)?
        ))
    }
});

// ------------------------------------------------------------------------------------

/// `ping`, either direction.
#[pyclass(module = "stapel_runner_protocol.messages", name = "Ping")]
pub struct PyPing {
    nonce: Option<Nonce>,
    sent_at: Option<SentAt>,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyPing {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let e = self.extra.prepare(py)?;
        if e.is_mismatch() {
            return Err(PyTypeError::new_err("extra must be a dict"));
        }
        Ok(Message::Ping(Ping {
            schema_version: self.schema_version,
            nonce: self.nonce.clone(),
            sent_at: self.sent_at.clone(),
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::Ping(m) = m {
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: Ping) -> Self {
        Self {
            nonce: m.nonce,
            sent_at: m.sent_at,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match self.extra.native(py)? {
            Some(extra) => Ok(Message::Ping(Ping {
                schema_version: self.schema_version,
                nonce: self.nonce.clone(),
                sent_at: self.sent_at.clone(),
                extra,
            })),
            None => Err(PyTypeError::new_err("extra must be a dict")),
        }
    }
}

message_methods!(PyPing, MessageType::Ping, "ping", {
    #[new]
    #[pyo3(signature = (nonce = None, sent_at = None, schema_version = 1,
                        extra = None))]
    fn new(
        nonce: Option<&Bound<'_, PyAny>>,
        sent_at: Option<&Bound<'_, PyAny>>,
        schema_version: u64,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            nonce: nonce_from_py(nonce)?,
            sent_at: sent_at_from_py(sent_at)?,
            schema_version,
            extra: Slot::arg(extra),
        })
    }

    /// Token the pong echoes: a str, an int or None.
    #[getter]
    fn nonce<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        nonce_to_py(py, &self.nonce)
    }
    #[setter]
    fn set_nonce(&mut self, v: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.nonce = nonce_from_py(v)?;
        Ok(())
    }
    /// Optional send timestamp: a str, a number or None.
    #[getter]
    fn sent_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        sent_at_to_py(py, &self.sent_at)
    }
    #[setter]
    fn set_sent_at(&mut self, v: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.sent_at = sent_at_from_py(v)?;
        Ok(())
    }
    /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
    #[getter]
    fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.extra.get(py)
    }
    #[setter]
    fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
        self.extra.set(v)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Ping(nonce={}, sent_at={}, schema_version={}, extra={})",
            nonce_to_py(py, &self.nonce)?.repr()?,
            sent_at_to_py(py, &self.sent_at)?.repr()?,
            self.schema_version,
            self.extra.repr(py)?
        ))
    }
});

// ------------------------------------------------------------------------------------

/// `pong`, either direction: answers a `Ping`.
#[pyclass(module = "stapel_runner_protocol.messages", name = "Pong")]
pub struct PyPong {
    nonce: Option<Nonce>,
    #[pyo3(get, set)]
    schema_version: u64,
    extra: Obj,
}

impl PyPong {
    /// Move the message out for the core (no copy of native containers).
    fn lend(&mut self, py: Python<'_>) -> PyResult<Message> {
        let e = self.extra.prepare(py)?;
        if e.is_mismatch() {
            return Err(PyTypeError::new_err("extra must be a dict"));
        }
        Ok(Message::Pong(Pong {
            schema_version: self.schema_version,
            nonce: self.nonce.clone(),
            extra: self.extra.take(e),
        }))
    }
    /// Take back the containers of a lent message.
    fn restore(&mut self, m: Message) {
        if let Message::Pong(m) = m {
            self.extra.give_back(m.extra);
        }
    }
    fn from_core(m: Pong) -> Self {
        Self {
            nonce: m.nonce,
            schema_version: m.schema_version,
            extra: Slot::Native(m.extra),
        }
    }
    fn to_message(&self, py: Python<'_>) -> PyResult<Message> {
        match self.extra.native(py)? {
            Some(extra) => Ok(Message::Pong(Pong {
                schema_version: self.schema_version,
                nonce: self.nonce.clone(),
                extra,
            })),
            None => Err(PyTypeError::new_err("extra must be a dict")),
        }
    }
}

message_methods!(PyPong, MessageType::Pong, "pong", {
    #[new]
    #[pyo3(signature = (nonce = None, schema_version = 1, extra = None))]
    fn new(
        nonce: Option<&Bound<'_, PyAny>>,
        schema_version: u64,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            nonce: nonce_from_py(nonce)?,
            schema_version,
            extra: Slot::arg(extra),
        })
    }

    /// The pong answering `ping` (echoes its nonce).
    #[classmethod]
    fn answer(_cls: &Bound<'_, pyo3::types::PyType>, ping: PyRef<'_, PyPing>) -> Self {
        let core = Pong::answering(&Ping::new(ping.nonce.clone()));
        Self::from_core(core)
    }

    /// The answered ping's nonce: a str, an int or None.
    #[getter]
    fn nonce<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        nonce_to_py(py, &self.nonce)
    }
    #[setter]
    fn set_nonce(&mut self, v: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.nonce = nonce_from_py(v)?;
        Ok(())
    }
    /// Unknown top-level fields, in arrival order; re-emitted by `encode`.
    #[getter]
    fn extra(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.extra.get(py)
    }
    #[setter]
    fn set_extra(&mut self, v: &Bound<'_, PyAny>) {
        self.extra.set(v)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Pong(nonce={}, schema_version={}, extra={})",
            nonce_to_py(py, &self.nonce)?.repr()?,
            self.schema_version,
            self.extra.repr(py)?
        ))
    }
});
