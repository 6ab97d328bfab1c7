//! `HubSession` and `RunnerSession`: the core's sans-IO session machines.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::{Map, Value};
use stapel_runner_protocol::config::ConfigError;
use stapel_runner_protocol::sequencing::Resync;
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::Message;

use crate::errors::raise;
use crate::json::{py_to_value, type_name};
use crate::messages::{message_from_py, message_to_py, set_seq};
use crate::sequencing::PyConnectionState;

// The sessions' `validate=True`: the literal `help()` shows, which must be the core's
// default.
const _: () = assert!(stapel_runner_protocol::session::DEFAULT_VALIDATE);

/// Either session machine, through the core's shared trait.
type DynMachine = Box<dyn Machine + Send + Sync>;

fn session_error(py: Python<'_>, e: &SessionError) -> PyErr {
    raise(py, "session", e.to_string(), e.code())
}

fn resync_to_py<'py>(py: Python<'py>, r: &Resync) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("task_id", &r.task_id)?;
    if let Some(a) = r.attempt {
        d.set_item("attempt", a)?;
    }
    d.set_item("declared", r.declared)?;
    d.set_item("missing_from", r.missing_from)?;
    d.set_item("missing_to", r.missing_to)?;
    Ok(d)
}

/// A session event as Python sees it: its kind and value (`("hello", Hello)`,
/// `("received", message)`, `("inbound_gap", resync)`, `("outbound_resync", resync)`,
/// `("peer_error", {"code", "detail"})`).
pub(crate) fn event_to_py<'py>(
    py: Python<'py>,
    e: Event,
) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
    Ok(match e {
        Event::Hello(h) => ("hello", message_to_py(py, Message::Hello(h))?),
        Event::Received(m) => ("received", message_to_py(py, m)?),
        Event::InboundGap(r) => ("inbound_gap", resync_to_py(py, &r)?.into_any()),
        Event::OutboundResync(r) => ("outbound_resync", resync_to_py(py, &r)?.into_any()),
        Event::PeerError { code, detail } => {
            let d = PyDict::new(py);
            d.set_item("code", code)?;
            d.set_item("detail", detail)?;
            ("peer_error", d.into_any())
        }
        other => (
            "unknown_event",
            PyString::new(py, &format!("{other:?}")).into_any(),
        ),
    })
}

/// One output as Python sees it; a drained machine (`None`) is `("timeout", deadline)`
/// with the core's `poll_timeout()`.
fn output_to_py<'py>(
    py: Python<'py>,
    o: Option<Output>,
    machine: &DynMachine,
) -> PyResult<Bound<'py, PyTuple>> {
    let pair = |kind: &str, v: Bound<'py, PyAny>| {
        PyTuple::new(py, [PyString::new(py, kind).into_any(), v])
    };
    let Some(o) = o else {
        let t = machine.poll_timeout();
        return pair("timeout", t.into_pyobject(py)?.into_any());
    };
    match o {
        Output::Transmit(frame) => pair("transmit", PyString::new(py, &frame).into_any()),
        Output::Close(reason) => pair("close", PyString::new(py, reason.code()).into_any()),
        Output::Event(e) => {
            let (kind, value) = event_to_py(py, e)?;
            pair(kind, value)
        }
    }
}

/// A refused configuration as the table's class of kind `config` (`ConfigError`, which
/// is also a `ValueError`: 0.1.1-era code caught that), with the core's `code`
/// (`unknown_key`, `wrong_type`, `out_of_range`, `not_an_object`) and the offending `key`
/// (dotted when nested) as attributes. Every config of the core is refused this way.
pub(crate) fn config_error(py: Python<'_>, e: &ConfigError) -> PyErr {
    let kwargs = PyDict::new(py);
    let filled = kwargs
        .set_item("code", e.code())
        .and_then(|()| kwargs.set_item("key", e.key()));
    if let Err(err) = filled {
        return err;
    }
    crate::errors::raise_class(
        py,
        crate::errors::class_of("config", e.code()),
        e.to_string(),
        &kwargs,
    )
}

/// Keyword configuration shared by both machines (the keywords of `session_new!`),
/// read by the core's [`SessionConfig::from_value`] (its keys are the keyword names).
#[allow(clippy::too_many_arguments)]
fn config(
    py: Python<'_>,
    validate: bool,
    ping_interval_ms: Option<u64>,
    peer_timeout_ms: Option<u64>,
    ack_every_frames: Option<u64>,
    ack_delay_ms: Option<u64>,
    max_ack_entries: Option<usize>,
    max_control_frame_bytes: Option<usize>,
    max_held_frames: Option<usize>,
    max_held_bytes: Option<usize>,
    min_protocol_version: Option<u64>,
    max_protocol_version: Option<u64>,
    max_line_bytes: Option<usize>,
    sequencing: Option<&Bound<'_, PyAny>>,
    probe_every_frames: Option<&Bound<'_, PyAny>>,
    durable_acks: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionConfig> {
    let mut m = Map::new();
    m.insert("validate".into(), validate.into());
    // Read by the core as given, so a wrong type or range is the core's `ConfigError`.
    for (k, v) in [
        ("probe_every_frames", probe_every_frames),
        ("durable_acks", durable_acks),
    ] {
        if let Some(v) = v.filter(|v| !v.is_none()) {
            m.insert(k.into(), py_to_value(v)?);
        }
    }
    for (k, v) in [
        ("ping_interval_ms", ping_interval_ms),
        ("peer_timeout_ms", peer_timeout_ms),
        ("ack_every_frames", ack_every_frames),
        ("ack_delay_ms", ack_delay_ms),
        ("min_protocol_version", min_protocol_version),
        ("max_protocol_version", max_protocol_version),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), v.into());
        }
    }
    for (k, v) in [
        ("max_ack_entries", max_ack_entries),
        ("max_control_frame_bytes", max_control_frame_bytes),
        ("max_held_frames", max_held_frames),
        ("max_held_bytes", max_held_bytes),
        ("max_line_bytes", max_line_bytes),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), v.into());
        }
    }
    if let Some(s) = sequencing.filter(|s| !s.is_none()) {
        m.insert("sequencing".into(), py_to_value(s)?);
    }
    SessionConfig::from_value(&Value::Object(m)).map_err(|e| config_error(py, &e))
}

/// The common part of `HubSession` and `RunnerSession` (not constructed directly).
///
/// Call order (the core's): feed one input (`connected`, `disconnected`, `frame`,
/// `bytes`, `send`, `tick`, each with the host's monotonic `now_ms`), then drain
/// `poll_output()` until it returns `("timeout", deadline)`; call `tick(deadline)` when
/// the deadline is reached. Outputs are `(kind, value)` pairs: `("transmit", frame)`,
/// `("close", code)`, `("timeout", ms | None)`, and the events `("hello", Hello)`,
/// `("received", message)`, `("inbound_gap", resync)`, `("outbound_resync", resync)`,
/// `("peer_error", {"code", "detail"})`. Local misuse raises `ProtocolStateError`
/// (`not_connected`, `already_connected`, or the sequencing code of a refused `send`).
/// `disconnected` drops the outputs still queued.
///
/// The machine calls `mark_unconfirmed()` on the state it is given (fresh or restored
/// may be older than the peer's): a runner sends a barrier `ping` after its `hello` and
/// holds provisional frames until that ping's `pong`; provisional frames whose seqs the
/// peer already holds are re-stamped after its position, never lost. Control frames (`hello`, `ping`, `pong`)
/// stay within `max_control_frame_bytes`: long lists are split over pings and a long
/// `hello.resume` is continued in pings.
#[pyclass(
    module = "stapel_runner_protocol.session",
    name = "SessionMachine",
    subclass
)]
pub struct PySession {
    inner: DynMachine,
}

impl PySession {
    /// The core hub session (`None` for a runner session).
    pub(crate) fn hub(&self) -> Option<&HubSession> {
        self.inner.as_hub()
    }

    fn input(&mut self, py: Python<'_>, now_ms: u64, input: Input) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| session_error(py, &e))
    }
}

#[pymethods]
impl PySession {
    /// A transport connection is up.
    fn connected(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, Input::Connected)
    }

    /// The transport connection is gone. Idempotent.
    fn disconnected(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, Input::Disconnected)
    }

    /// One complete frame (e.g. one WebSocket text message).
    fn frame(&mut self, py: Python<'_>, now_ms: u64, frame: String) -> PyResult<()> {
        self.input(py, now_ms, Input::Frame(frame))
    }

    /// JSONL bytes, in any chunking.
    fn bytes(&mut self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        self.input(py, now_ms, Input::Bytes(data.to_vec()))
    }

    /// Send a sequenced message: it is stamped (its `seq` is set on the object), kept
    /// for replay and transmitted when the connection is ready (a provisional frame once
    /// the post-hello barrier is answered).
    fn send(&mut self, py: Python<'_>, now_ms: u64, message: &Bound<'_, PyAny>) -> PyResult<()> {
        if message.cast::<PyDict>().is_ok() {
            return Err(PyTypeError::new_err(format!(
                "send() takes a message object, not {}",
                type_name(message)
            )));
        }
        let m = message_from_py(message)?;
        let stamped = self
            .inner
            .send(now_ms, m)
            .map_err(|e| session_error(py, &e))?;
        set_seq(message, stamped.seq)
    }

    /// Send a message that may have been sent before (stapel-runner-protocol 0.1.1's
    /// `RunnerConnection.send`, whose application numbers its frames and re-sends them
    /// from a checkpoint): one whose `seq` its stream already emitted is that frame —
    /// nothing is stamped, kept or transmitted (the session replays it itself until it
    /// is acknowledged); any other is sent as by `send` (its new `seq` set on the
    /// object). A `dict` is built into a message with `decode`'s tolerant rules first.
    /// Returns the seq the message goes under (the core's `Machine::resend`).
    fn resend(&mut self, py: Python<'_>, now_ms: u64, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        let m = message_from_py(message)?;
        let given = m.seq();
        let stamped = self
            .inner
            .resend(now_ms, m)
            .map_err(|e| session_error(py, &e))?;
        if message.cast::<PyDict>().is_err() && given != Some(stamped.seq) {
            set_seq(message, stamped.seq)?;
        }
        Ok(stamped.seq)
    }

    /// Durable acknowledgements (a session built with `durable_acks=True`): the host's
    /// store committed the inbound stream `(task_id, attempt)` through `seq`
    /// (`attempt=None` for a command stream); nothing above the confirmed position is
    /// acknowledged, on any path. Refused with `ProtocolStateError` `not_durable` (no
    /// `durable_acks`) or `confirm_ahead` (beyond what was applied).
    #[pyo3(signature = (now_ms, task_id, attempt, seq))]
    fn confirm(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        task_id: String,
        attempt: Option<u64>,
        seq: u64,
    ) -> PyResult<()> {
        self.input(
            py,
            now_ms,
            Input::Confirm {
                task_id,
                attempt,
                seq,
            },
        )
    }

    /// Time passed (the deadline of the last timeout was reached).
    fn tick(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, Input::Timeout)
    }

    /// The next output (a `(kind, value)` pair); `("timeout", deadline)` when nothing
    /// more is to be done now.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let o = self.inner.poll_output();
        output_to_py(py, o, &self.inner)
    }

    /// Every output up to and including the next `("timeout", deadline)`.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        loop {
            let o = self.inner.poll_output();
            let done = o.is_none();
            list.append(output_to_py(py, o, &self.inner)?)?;
            if done {
                return Ok(list);
            }
        }
    }

    /// `True` while a transport connection is up.
    #[getter]
    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    /// A copy of the session's sequencing state (persist it with `snapshot()`).
    #[getter]
    fn state(&self) -> PyConnectionState {
        PyConnectionState::from_core(self.inner.state().clone())
    }

    /// `state.resume_map()` without copying the state.
    fn resume_map<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        use crate::fields::Native;
        self.inner.state().resume_map().to_py(py)
    }

    /// Frames kept for replay.
    #[getter]
    fn outbox_frames(&self) -> usize {
        self.inner.state().outbox_frames()
    }

    /// Forget a finished task in the session's own state (`state` is a copy):
    /// `ConnectionState.forget_task` — its streams are dropped and a tombstone is kept,
    /// so late or replayed frames of it are duplicates. Safe once
    /// `is_fully_acknowledged(task_id)` holds and its last inbound frame was applied.
    /// `True` when the task was known.
    fn forget_task(&mut self, task_id: &str) -> bool {
        self.inner.state_mut().forget_task(task_id)
    }

    /// Drop the kept frames at or below `seq` of one of this end's outbound streams in
    /// the session's own state (`ConnectionState.trim_through`), e.g. at a checkpoint
    /// against a peer that sends no acknowledgements. Returns how many were dropped.
    #[pyo3(signature = (task_id, attempt, seq))]
    fn trim_through(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        self.inner.state_mut().trim_through(task_id, attempt, seq)
    }

    /// `state.is_fully_acknowledged(task_id)` without copying the state.
    fn is_fully_acknowledged(&self, task_id: &str) -> bool {
        self.inner.state().is_fully_acknowledged(task_id)
    }

    /// `state.is_forgotten(task_id)` without copying the state.
    fn is_forgotten(&self, task_id: &str) -> bool {
        self.inner.state().is_forgotten(task_id)
    }
}

/// `__new__` of a session class: its own leading parameters, then `state` and the
/// configuration keywords both classes share (stated once, here; see [`config`]).
/// `$machine(lead…, state, config)` builds the machine, calling `config` once it has
/// checked its own arguments.
macro_rules! session_new {
    ($class:ident($($lead:ident: $lead_ty:ty),*) => $machine:path $(; $($extra:tt)*)?) => {
        session_new!(@keywords $class($($lead: $lead_ty),*) => $machine; [$($($extra)*)?];
            validate: bool = true,
            ping_interval_ms: Option<u64> = None,
            peer_timeout_ms: Option<u64> = None,
            ack_every_frames: Option<u64> = None,
            ack_delay_ms: Option<u64> = None,
            max_ack_entries: Option<usize> = None,
            max_control_frame_bytes: Option<usize> = None,
            max_held_frames: Option<usize> = None,
            max_held_bytes: Option<usize> = None,
            min_protocol_version: Option<u64> = None,
            max_protocol_version: Option<u64> = None,
            max_line_bytes: Option<usize> = None,
            sequencing: Option<&Bound<'_, PyAny>> = None,
            probe_every_frames: Option<&Bound<'_, PyAny>> = None,
            durable_acks: Option<&Bound<'_, PyAny>> = None
        );
    };
    (@keywords $class:ident($($lead:ident: $lead_ty:ty),*) => $machine:path; [$($extra:tt)*];
        $($kw:ident: $ty:ty = $default:tt),*
    ) => {
        #[pymethods]
        impl $class {
            $($extra)*

            #[new]
            #[pyo3(signature = ($($lead,)* *, state = None, $($kw = $default),*))]
            #[allow(clippy::too_many_arguments)]
            fn new(
                py: Python<'_>,
                $($lead: $lead_ty,)*
                state: Option<PyRef<'_, PyConnectionState>>,
                $($kw: $ty),*
            ) -> PyResult<PyClassInitializer<Self>> {
                let inner = $machine($($lead,)* state, || config(py, $($kw),*))?;
                Ok(PyClassInitializer::from(PySession { inner }).add_subclass(Self))
            }
        }
    };
}

/// The hub side of one hub↔runner connection (see `SessionMachine` for the call order).
#[pyclass(module = "stapel_runner_protocol.session", name = "HubSession", extends = PySession)]
pub struct PyHubSession;

session_new!(PyHubSession() => hub_machine;
    /// The rows a hub store holds for this session (`stapel_runner_protocol.store`):
    /// `{"tasks": [{"task_id", "next_seq", "assigned_attempt", "forgotten"}],
    /// "inbound": [{"task_id", "attempt", "through"}], "commands": [{"task_id", "seq",
    /// "frame"}]}`, sorted by key. With `durable_acks` an inbound stream's `through` is
    /// what was confirmed.
    fn rows<'py>(self_: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self_.as_super().hub() {
            Some(h) => crate::store::rows_to_py(py, h),
            None => Err(PyTypeError::new_err("not a hub session")),
        }
    }

    /// A hub session rebuilt from a store's rows (a takeover; the dict form of `rows()`),
    /// with the core's session config keys in `config` (a dict; turn `durable_acks` on
    /// for a store). Refused rows raise `StoreError` (`invalid_rows`); a refused config
    /// `ConfigError`.
    #[staticmethod]
    #[pyo3(signature = (rows, config = None))]
    fn from_rows(
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyHubSession>> {
        let rows = crate::store::rows_of(py, rows)?;
        let value = match config {
            Some(c) if !c.is_none() => py_to_value(c)?,
            _ => Value::Object(Map::new()),
        };
        let c = SessionConfig::from_value(&value).map_err(|e| config_error(py, &e))?;
        let hub = HubSession::from_rows(c, &rows).map_err(|e| crate::store::store_error(py, &e))?;
        let init = PyClassInitializer::from(PySession {
            inner: Box::new(hub),
        })
        .add_subclass(PyHubSession);
        Py::new(py, init)
    }
);

fn hub_machine(
    state: Option<PyRef<'_, PyConnectionState>>,
    config: impl FnOnce() -> PyResult<SessionConfig>,
) -> PyResult<DynMachine> {
    let c = config()?;
    Ok(Box::new(match state {
        Some(s) => HubSession::with_state(c, s.core().clone()),
        None => HubSession::new(c),
    }))
}

/// The runner side of one hub↔runner connection: `hello` is the identity template (its
/// `resume` is filled on every connect). See `SessionMachine` for the call order.
#[pyclass(module = "stapel_runner_protocol.session", name = "RunnerSession", extends = PySession)]
pub struct PyRunnerSession;

session_new!(PyRunnerSession(hello: &Bound<'_, PyAny>) => runner_machine);

fn runner_machine(
    hello: &Bound<'_, PyAny>,
    state: Option<PyRef<'_, PyConnectionState>>,
    config: impl FnOnce() -> PyResult<SessionConfig>,
) -> PyResult<DynMachine> {
    let hello = match message_from_py(hello)? {
        Message::Hello(h) => h,
        _ => return Err(PyTypeError::new_err("hello must be a Hello message")),
    };
    let c = config()?;
    Ok(Box::new(match state {
        Some(s) => RunnerSession::with_state(hello, c, s.core().clone()),
        None => RunnerSession::new(hello, c),
    }))
}
