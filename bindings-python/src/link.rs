//! `RunnerLink` and `HubLink`: each side's whole connection driver as the core's sans-IO
//! machine (`core/src/link/`). `transport_ws.py` only pumps them: it opens, reads,
//! writes, pauses, closes and aborts sockets when told, arms one timer and hands the
//! events to the application.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString, PyTuple};
use serde_json::Value;
use stapel_runner_protocol::host::InboundFrame;
use stapel_runner_protocol::link::{
    ConnectFailure, HubLink, LinkConfig, LinkError, LinkEvent, LinkInput, LinkOutput, LinkStats,
    RunnerLink,
};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{HubSession, RunnerSession, SessionStats, Stamped};
use stapel_runner_protocol::wire::Message;

use crate::errors::raise;
use crate::json::{py_to_value, type_name, value_to_py};
use crate::messages::{message_from_py, set_seq};
use crate::sequencing::PyConnectionState;
use crate::session::{config_error, event_to_py};

/// Either link.
#[allow(clippy::large_enum_variant)]
enum Side {
    Runner(RunnerLink),
    Hub(HubLink),
}

impl Side {
    fn hub(&self) -> Option<&HubSession> {
        match self {
            Side::Hub(l) => Some(l.session()),
            Side::Runner(_) => None,
        }
    }
    fn handle(&mut self, now: u64, input: LinkInput) -> Result<(), LinkError> {
        match self {
            Side::Runner(l) => l.handle_input(now, input),
            Side::Hub(l) => l.handle_input(now, input),
        }
    }
    fn poll(&mut self) -> Option<LinkOutput> {
        match self {
            Side::Runner(l) => l.poll_output(),
            Side::Hub(l) => l.poll_output(),
        }
    }
    fn timeout(&self) -> Option<u64> {
        match self {
            Side::Runner(l) => l.poll_timeout(),
            Side::Hub(l) => l.poll_timeout(),
        }
    }
    fn state(&self) -> &ConnectionState {
        match self {
            Side::Runner(l) => l.state(),
            Side::Hub(l) => l.state(),
        }
    }
    fn state_mut(&mut self) -> &mut ConnectionState {
        match self {
            Side::Runner(l) => l.state_mut(),
            Side::Hub(l) => l.state_mut(),
        }
    }
    fn config(&self) -> &LinkConfig {
        match self {
            Side::Runner(l) => l.config(),
            Side::Hub(l) => l.config(),
        }
    }
    fn stats(&self) -> &LinkStats {
        match self {
            Side::Runner(l) => l.stats(),
            Side::Hub(l) => l.stats(),
        }
    }
    fn session_stats(&self) -> &SessionStats {
        match self {
            Side::Runner(l) => l.session_stats(),
            Side::Hub(l) => l.session_stats(),
        }
    }
    fn is_connected(&self) -> bool {
        match self {
            Side::Runner(l) => l.is_connected(),
            Side::Hub(l) => l.is_connected(),
        }
    }
    fn queued_events(&self) -> u64 {
        match self {
            Side::Runner(l) => l.queued_events(),
            Side::Hub(l) => l.queued_events(),
        }
    }
    fn is_stalled(&self) -> bool {
        match self {
            Side::Runner(l) => l.is_stalled(),
            Side::Hub(l) => l.is_stalled(),
        }
    }
}

fn link_error(py: Python<'_>, e: &LinkError) -> PyErr {
    let kind = match e {
        LinkError::Session(_) => "session",
        _ => "link",
    };
    raise(py, kind, e.to_string(), e.code())
}

/// The core's `LinkConfig` of a dict, or of its JSON text (`None`: the defaults). A
/// refused one raises `ConfigError` with the core's `code` and the offending `key`.
fn config_from(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<LinkConfig> {
    let v = match config {
        None => Value::Object(Default::default()),
        Some(c) if c.is_none() => Value::Object(Default::default()),
        Some(c) => match c.cast::<PyString>() {
            Ok(text) => serde_json::from_str(text.to_str()?)
                .map_err(|e| PyValueError::new_err(format!("config is not JSON: {e}")))?,
            Err(_) => py_to_value(c)?,
        },
    };
    LinkConfig::from_value(&v).map_err(|e| config_error(py, &e))
}

fn state_of(state: Option<PyRef<'_, PyConnectionState>>) -> Option<ConnectionState> {
    state.map(|s| s.core().clone())
}

fn frame_of(data: &Bound<'_, PyAny>) -> PyResult<InboundFrame> {
    Ok(if let Ok(s) = data.cast::<PyString>() {
        InboundFrame::Text(s.to_str()?.to_owned())
    } else if let Ok(b) = data.cast::<PyBytes>() {
        InboundFrame::Binary(b.as_bytes().to_vec())
    } else if let Ok(b) = data.cast::<PyByteArray>() {
        InboundFrame::Binary(b.to_vec())
    } else if data.hasattr("tobytes")? {
        InboundFrame::Binary(data.call_method0("tobytes")?.extract::<Vec<u8>>()?)
    } else {
        return Err(PyTypeError::new_err(format!(
            "a frame is str (text) or bytes (binary), not {}",
            type_name(data)
        )));
    })
}

fn pair<'py>(
    py: Python<'py>,
    kind: &str,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, [PyString::new(py, kind).into_any(), value])
}

/// A link event as `(kind, value)`.
fn link_event_to_py<'py>(py: Python<'py>, e: LinkEvent) -> PyResult<Bound<'py, PyTuple>> {
    let none = || py.None().into_bound(py);
    match e {
        LinkEvent::Session(e) => {
            let (kind, value) = event_to_py(py, e)?;
            pair(py, kind, value)
        }
        LinkEvent::Connected => pair(py, "connected", none()),
        LinkEvent::Disconnected { reason } => {
            pair(py, "disconnected", PyString::new(py, &reason).into_any())
        }
        LinkEvent::Reconnecting { delay_ms, failures } => {
            let d = PyDict::new(py);
            d.set_item("delay_ms", delay_ms)?;
            d.set_item("failures", failures)?;
            pair(py, "reconnecting", d.into_any())
        }
        LinkEvent::Error {
            code,
            detail,
            status,
        } => {
            let d = PyDict::new(py);
            d.set_item("code", code)?;
            d.set_item("detail", detail)?;
            d.set_item("status", status)?;
            pair(py, "error", d.into_any())
        }
        LinkEvent::Stalled {
            bound,
            kept_frames,
            kept_bytes,
            detail,
        } => {
            let d = PyDict::new(py);
            d.set_item("bound", bound)?;
            d.set_item("kept_frames", kept_frames)?;
            d.set_item("kept_bytes", kept_bytes)?;
            d.set_item("detail", detail)?;
            pair(py, "stalled", d.into_any())
        }
        LinkEvent::Unstalled => pair(py, "unstalled", none()),
        LinkEvent::Stopped => pair(py, "stopped", none()),
        other => pair(
            py,
            "unknown_event",
            PyString::new(py, &format!("{other:?}")).into_any(),
        ),
    }
}

/// A link output as `(kind, value)`.
fn output_to_py<'py>(py: Python<'py>, o: LinkOutput) -> PyResult<Bound<'py, PyTuple>> {
    match o {
        LinkOutput::Connect { socket } => pair(py, "connect", socket.into_pyobject(py)?.into_any()),
        LinkOutput::Send { socket, frame } => pair(
            py,
            "send",
            (socket, PyString::new(py, &frame))
                .into_pyobject(py)?
                .into_any(),
        ),
        LinkOutput::Pause { socket } => pair(py, "pause", socket.into_pyobject(py)?.into_any()),
        LinkOutput::Resume { socket } => pair(py, "resume", socket.into_pyobject(py)?.into_any()),
        LinkOutput::Close {
            socket,
            code,
            reason,
        } => pair(
            py,
            "close",
            (socket, code, reason).into_pyobject(py)?.into_any(),
        ),
        LinkOutput::Abort { socket } => pair(py, "abort", socket.into_pyobject(py)?.into_any()),
        LinkOutput::Event(e) => pair(py, "event", link_event_to_py(py, e)?.into_any()),
        other => pair(
            py,
            "unknown",
            PyString::new(py, &format!("{other:?}")).into_any(),
        ),
    }
}

/// The common part of `RunnerLink` and `HubLink` (not constructed directly): one side's
/// connection driver. Call order (the core's): feed one input (each with the host's
/// monotonic `now_ms`) or `send`, then drain `poll_output()` until `None` (or take
/// `drain_outputs()`), performing every output in order, then arm one timer at
/// `poll_timeout()` and call `tick(now_ms)` when it passes.
///
/// Outputs are `(kind, value)` pairs: `("connect", socket)` (runner: open socket
/// `socket` and report `opened` or `connect_failed`), `("send", (socket, frame))`,
/// `("pause", socket)` / `("resume", socket)` (stop / start reading), `("close",
/// (socket, code, reason))` (close handshake; report `socket_closed` when it ends),
/// `("abort", socket)` (drop it at once, report nothing more), and `("event", (kind,
/// value))` for the application: the session's `("hello", Hello)`, `("received",
/// message)`, `("inbound_gap", resync)`, `("outbound_resync", resync)`, `("peer_error",
/// {"code", "detail"})`, and `("connected", None)`, `("disconnected", reason)`,
/// `("reconnecting", {"delay_ms", "failures"})`, `("error", {"code", "detail",
/// "status"})`, `("stalled", {"bound", "kept_frames", "kept_bytes", "detail"})`,
/// `("unstalled", None)`, `("stopped", None)`. Report every event the application took
/// with `events_taken(now_ms, n)`.
///
/// Errors are the core table's classes: `ProtocolStateError` (`wrong_side`,
/// `invalid_close_code`, the session's `backpressure`, `not_durable`, `confirm_ahead`,
/// …), `ConfigError` for a refused config. A panic inside the core (a bug) raises
/// `PanicError` (code `panic`) and the link refuses every later call the same way: a
/// host tears the connection down.
#[pyclass(module = "stapel_runner_protocol.link", name = "LinkMachine", subclass)]
pub struct PyLink {
    inner: Side,
    /// A call panicked: the link's state is not trusted any more.
    poisoned: bool,
    /// Test hook: the next input panics inside the guarded call.
    panic_next: bool,
}

impl PyLink {
    /// The core hub session of a hub link.
    pub(crate) fn hub_session(&self) -> Option<&HubSession> {
        self.inner.hub()
    }

    /// Run `f` on the link with panics caught: a panic raises `PanicError` and poisons
    /// the link.
    fn guarded<R>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut Side) -> PyResult<R>,
    ) -> PyResult<R> {
        if self.poisoned {
            return Err(raise(
                py,
                "panic",
                "the link panicked in an earlier call and must not be used again".into(),
                "panic",
            ));
        }
        let inject = std::mem::take(&mut self.panic_next);
        let inner = &mut self.inner;
        let r = catch_unwind(AssertUnwindSafe(|| {
            if inject {
                panic!("a panic injected by the test hook _panic_on_next_call()");
            }
            f(inner)
        }));
        match r {
            Ok(r) => r,
            Err(payload) => {
                self.poisoned = true;
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(raise(
                    py,
                    "panic",
                    format!("the core panicked inside a link call: {what}"),
                    "panic",
                ))
            }
        }
    }

    fn input(&mut self, py: Python<'_>, now_ms: u64, input: LinkInput) -> PyResult<()> {
        self.guarded(py, |side| {
            side.handle(now_ms, input).map_err(|e| link_error(py, &e))
        })
    }

    fn stamped(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        message: &Bound<'_, PyAny>,
        resend: bool,
    ) -> PyResult<u64> {
        if message.cast::<PyDict>().is_ok() && !resend {
            return Err(PyTypeError::new_err(format!(
                "send() takes a message object, not {}",
                type_name(message)
            )));
        }
        let m = message_from_py(message)?;
        let given = m.seq();
        let stamped: Stamped = self.guarded(py, |side| {
            let r = match (side, resend) {
                (Side::Runner(l), false) => l.send(now_ms, m),
                (Side::Runner(l), true) => l.resend(now_ms, m),
                (Side::Hub(l), _) => l.send(now_ms, m),
            };
            r.map_err(|e| link_error(py, &e))
        })?;
        if message.cast::<PyDict>().is_err() && given != Some(stamped.seq) {
            set_seq(message, stamped.seq)?;
        }
        Ok(stamped.seq)
    }
}

#[pymethods]
impl PyLink {
    /// Runner: start connecting (at once), or again after `stop` or a loss without
    /// reconnects.
    fn start(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Start)
    }

    /// Runner: close the socket with `code` and `reason` and stop reconnecting;
    /// `("stopped", None)` follows once every socket is gone.
    #[pyo3(signature = (now_ms, code = stapel_runner_protocol::host::CLOSE_NORMAL, reason = String::new()))]
    fn stop(&mut self, py: Python<'_>, now_ms: u64, code: u16, reason: String) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Stop { code, reason })
    }

    /// Runner: socket `socket` (asked for by `("connect", socket)`) is open.
    fn opened(&mut self, py: Python<'_>, now_ms: u64, socket: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Opened { socket })
    }

    /// Runner: socket `socket` could not be opened: `failure` is `"refused"` (the server
    /// answered the upgrade with HTTP `status`), `"no_token"` (no token to present) or
    /// `"failed"` (DNS, TCP, TLS, the handshake). `detail` goes into the error event
    /// (never put a secret in it).
    #[pyo3(signature = (now_ms, socket, failure, *, status = None, detail = String::new()))]
    fn connect_failed(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        socket: u64,
        failure: &str,
        status: Option<u16>,
        detail: String,
    ) -> PyResult<()> {
        let failure = match (failure, status) {
            ("refused", Some(status)) => ConnectFailure::Refused { status },
            ("refused", None) => {
                return Err(PyValueError::new_err("failure \"refused\" needs status="))
            }
            ("no_token", _) => ConnectFailure::NoToken,
            ("failed", _) => ConnectFailure::Failed,
            (other, _) => {
                return Err(PyValueError::new_err(format!(
                    "failure must be \"refused\", \"no_token\" or \"failed\", not {other:?}"
                )))
            }
        };
        self.input(
            py,
            now_ms,
            LinkInput::ConnectFailed {
                socket,
                failure,
                detail,
            },
        )
    }

    /// Hub: the upgraded, authenticated socket `socket` serves this runner from now on
    /// (one serving it before is closed, reason `replaced`).
    fn attach(&mut self, py: Python<'_>, now_ms: u64, socket: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Attach { socket })
    }

    /// Hub: close the runner's socket with `code` and `reason`.
    #[pyo3(signature = (now_ms, code = stapel_runner_protocol::host::CLOSE_NORMAL, reason = String::new()))]
    fn close(&mut self, py: Python<'_>, now_ms: u64, code: u16, reason: String) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Close { code, reason })
    }

    /// A frame was read from socket `socket`: `str` is a text frame, `bytes` /
    /// `bytearray` / `memoryview` a binary one (decoded strictly as UTF-8 by the link).
    fn frame(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        socket: u64,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let frame = frame_of(data)?;
        self.input(py, now_ms, LinkInput::Frame { socket, frame })
    }

    /// Socket `socket` is gone (the peer closed it, its read side ended, or the close
    /// handshake completed).
    fn socket_closed(&mut self, py: Python<'_>, now_ms: u64, socket: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::SocketClosed { socket })
    }

    /// The transport failed on socket `socket`; `detail` goes into the error event
    /// (never a secret).
    #[pyo3(signature = (now_ms, socket, detail = String::new()))]
    fn failed(&mut self, py: Python<'_>, now_ms: u64, socket: u64, detail: String) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Failed { socket, detail })
    }

    /// The application took `n` events.
    fn events_taken(&mut self, py: Python<'_>, now_ms: u64, n: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::EventsTaken(n))
    }

    /// Durable acknowledgements (config `session.durable_acks`): the store committed the
    /// inbound stream `(task_id, attempt)` through `seq` (`attempt=None` for a command
    /// stream). `ProtocolStateError` `not_durable` or `confirm_ahead` when refused.
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
            LinkInput::Confirm {
                task_id,
                attempt,
                seq,
            },
        )
    }

    /// `poll_timeout()` passed (harmless at any time).
    fn tick(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, LinkInput::Timeout)
    }

    /// Send a sequenced message (runner: `task.progress` / `task.report`; hub:
    /// `task.assign` / `task.cancel`): stamped (its `seq` set on the object), kept for
    /// replay and transmitted when connected. Returns the seq. A refused send raises
    /// `ProtocolStateError` (e.g. `backpressure`: the kept log is full — a `("stalled",
    /// …)` event is emitted once; send again after `("unstalled", None)`).
    fn send(&mut self, py: Python<'_>, now_ms: u64, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.stamped(py, now_ms, message, false)
    }

    /// `send` of a message that may have been sent before (runner: a message whose
    /// `seq` its stream already emitted is not sent again; a `dict` is built with
    /// `decode`'s tolerant rules). The hub's link sends it as `send`.
    fn resend(&mut self, py: Python<'_>, now_ms: u64, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.stamped(py, now_ms, message, true)
    }

    /// The next output `(kind, value)`, `None` when drained.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match self.guarded(py, |side| Ok(side.poll()))? {
            Some(o) => output_to_py(py, o).map(Some),
            None => Ok(None),
        }
    }

    /// Every queued output, in order.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let outputs = self.guarded(py, |side| {
            let mut out = Vec::new();
            while let Some(o) = side.poll() {
                out.push(o);
            }
            Ok(out)
        })?;
        outputs.into_iter().map(|o| output_to_py(py, o)).collect()
    }

    /// When to call `tick` next (absolute, in the host's `now_ms` clock); `None`: no timer.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.timeout()
    }

    /// `"runner"` or `"hub"`.
    #[getter]
    fn side(&self) -> &'static str {
        match self.inner {
            Side::Runner(_) => "runner",
            Side::Hub(_) => "hub",
        }
    }

    /// `True` while a socket serves the session.
    #[getter]
    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    /// Events emitted and not yet reported taken.
    #[getter]
    fn queued_events(&self) -> u64 {
        self.inner.queued_events()
    }

    /// `True` between `("stalled", …)` and `("unstalled", None)`.
    #[getter]
    fn is_stalled(&self) -> bool {
        self.inner.is_stalled()
    }

    /// `True` after a panic inside the core: every call raises `PanicError`.
    #[getter]
    fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The link's own config keys with their values (`config().to_value()`: not the
    /// session's).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.config().to_value())
    }

    /// The link's counters: `{"dropped_events", "connections", "backlog_overflows"}`.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("dropped_events", s.dropped_events)?;
        d.set_item("connections", s.connections)?;
        d.set_item("backlog_overflows", s.backlog_overflows)?;
        Ok(d)
    }

    /// The session's counters: `{"delivered", "duplicates", "held", "held_dropped",
    /// "held_now", "transmitted", "implied_acked", "probes"}`.
    #[getter]
    fn session_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.session_stats();
        let d = PyDict::new(py);
        d.set_item("delivered", s.delivered)?;
        d.set_item("duplicates", s.duplicates)?;
        d.set_item("held", s.held)?;
        d.set_item("held_dropped", s.held_dropped)?;
        d.set_item("held_now", s.held_now)?;
        d.set_item("transmitted", s.transmitted)?;
        d.set_item("implied_acked", s.implied_acked)?;
        d.set_item("probes", s.probes)?;
        Ok(d)
    }

    /// A copy of the sequencing state (`snapshot()` persists it without the copy).
    #[getter]
    fn state(&self) -> PyConnectionState {
        PyConnectionState::from_core(self.inner.state().clone())
    }

    /// The sequencing state's snapshot (`ConnectionState.snapshot()`): persist it and
    /// build the next link over `ConnectionState.restore(bytes)` to resume.
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.state().snapshot())
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

    /// Bytes kept for replay.
    #[getter]
    fn outbox_bytes(&self) -> usize {
        self.inner.state().outbox_bytes()
    }

    /// `ConnectionState.forget_task` on the link's own state (safe once
    /// `is_fully_acknowledged(task_id)` holds and its last inbound frame was applied).
    /// `True` when the task was known.
    fn forget_task(&mut self, task_id: &str) -> bool {
        self.inner.state_mut().forget_task(task_id)
    }

    /// `ConnectionState.trim_through` on the link's own state. Returns how many kept
    /// frames were dropped.
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

    /// Test hook: the next call that feeds the link panics inside the core call (caught:
    /// it raises `PanicError` and poisons the link), so hosts can test their panic
    /// handling. Not for production use.
    fn _panic_on_next_call(&mut self) {
        self.panic_next = true;
    }
}

/// The runner's connection to its hub (the core's `RunnerLink`): the `RunnerSession` over
/// `hello` (and `state`, a restored `ConnectionState`, to resume), its socket, the
/// reconnect schedule (jitter from `seed`: take it from `os.urandom` or
/// `random.SystemRandom`), and the bounds on the application's events. `config` is a
/// dict (or JSON text) of the core's `LinkConfig` keys (`session`, `close_timeout_ms`,
/// `connect_timeout_ms`, `max_queued_events`, `max_backlog_bytes`,
/// `max_closing_sockets`, `reconnect`, `backoff_initial_ms`, `backoff_max_ms`); a
/// refused one raises `ConfigError`. See `LinkMachine` for the call order.
#[pyclass(module = "stapel_runner_protocol.link", name = "RunnerLink", extends = PyLink)]
pub struct PyRunnerLink;

#[pymethods]
impl PyRunnerLink {
    #[new]
    #[pyo3(signature = (hello, config = None, *, seed = 0, state = None))]
    fn new(
        py: Python<'_>,
        hello: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyAny>>,
        seed: u64,
        state: Option<PyRef<'_, PyConnectionState>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let hello = match message_from_py(hello)? {
            Message::Hello(h) => h,
            _ => return Err(PyTypeError::new_err("hello must be a Hello message")),
        };
        let config = config_from(py, config)?;
        let session = match state_of(state) {
            Some(s) => RunnerSession::with_state(hello, config.session.clone(), s),
            None => RunnerSession::new(hello, config.session.clone()),
        };
        let link = RunnerLink::new(session, config, seed);
        Ok(PyClassInitializer::from(PyLink {
            inner: Side::Runner(link),
            poisoned: false,
            panic_next: false,
        })
        .add_subclass(Self))
    }

    /// `"idle"`, `"waiting"`, `"connecting"` or `"open"`.
    #[getter]
    fn phase(self_: PyRef<'_, Self>) -> &'static str {
        match &self_.as_super().inner {
            Side::Runner(l) => l.phase().as_str(),
            Side::Hub(_) => "open",
        }
    }
}

/// One runner as a hub serves it, across its sockets (the core's `HubLink`): the
/// `HubSession` (over `state`, a restored `ConnectionState`, to resume the runner's
/// streams), which socket serves it, and the bounds on the application's events.
/// `config` as for `RunnerLink` (`session.durable_acks: true` holds acknowledgements
/// until `confirm`). The hub's door (token check, eviction) is `HubHost`. See
/// `LinkMachine` for the call order.
#[pyclass(module = "stapel_runner_protocol.link", name = "HubLink", extends = PyLink)]
pub struct PyHubLink;

#[pymethods]
impl PyHubLink {
    #[new]
    #[pyo3(signature = (config = None, *, state = None, rows = None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        state: Option<PyRef<'_, PyConnectionState>>,
        rows: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let config = config_from(py, config)?;
        let rows = rows.filter(|r| !r.is_none());
        let session = match (state_of(state), rows) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err("give state or rows, not both"));
            }
            (Some(s), None) => HubSession::with_state(config.session.clone(), s),
            (None, Some(r)) => {
                let rows = crate::store::rows_of(py, r)?;
                HubSession::from_rows(config.session.clone(), &rows)
                    .map_err(|e| crate::store::store_error(py, &e))?
            }
            (None, None) => HubSession::new(config.session.clone()),
        };
        let link = HubLink::new(session, config);
        Ok(PyClassInitializer::from(PyLink {
            inner: Side::Hub(link),
            poisoned: false,
            panic_next: false,
        })
        .add_subclass(Self))
    }

    /// The socket serving the runner, if any.
    #[getter]
    fn socket(self_: PyRef<'_, Self>) -> Option<u64> {
        match &self_.as_super().inner {
            Side::Hub(l) => l.socket(),
            Side::Runner(_) => None,
        }
    }

    /// The rows a hub store holds for the runner (`HubSession.rows()`).
    fn rows<'py>(self_: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self_.as_super().inner.hub() {
            Some(h) => crate::store::rows_to_py(py, h),
            None => Err(PyTypeError::new_err("not a hub link")),
        }
    }

    /// Sockets attached or in their close handshake (for the hub's eviction decision).
    #[getter]
    fn sockets(self_: PyRef<'_, Self>) -> u64 {
        match &self_.as_super().inner {
            Side::Hub(l) => l.sockets(),
            Side::Runner(_) => 0,
        }
    }
}

/// The core's link config of a dict (`None`: the defaults) as the core describes it
/// (`LinkConfig.to_value()`: the link's own keys, not the session's). Raises
/// `ConfigError` (`code`, `key`) for a refused config, as the links do.
#[pyfunction]
#[pyo3(signature = (config = None))]
pub fn link_config<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &config_from(py, config)?.to_value())
}

/// The core's error table (`errors::table_value()`): `{"classes": [{"name", "parent",
/// "doc"}…], "rules": [{"kind", "code", "class"}…]}`.
#[pyfunction]
pub fn error_table(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    value_to_py(py, &stapel_runner_protocol::errors::table_value())
}

/// The class name the core's table gives an error of `kind` with `code`
/// (`errors::error_class`).
#[pyfunction]
pub fn error_class(kind: &str, code: &str) -> &'static str {
    stapel_runner_protocol::errors::error_class(kind, code)
}

/// Register the link classes, their constants and the error table functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use stapel_runner_protocol::link as l;
    m.add_class::<PyLink>()?;
    m.add_class::<PyRunnerLink>()?;
    m.add_class::<PyHubLink>()?;
    m.add_function(wrap_pyfunction!(link_config, m)?)?;
    m.add_function(wrap_pyfunction!(error_table, m)?)?;
    m.add_function(wrap_pyfunction!(error_class, m)?)?;
    m.add("LINK_CONFIG_KEYS", l::LinkConfig::KEYS.to_vec())?;
    m.add(
        "SESSION_CONFIG_KEYS",
        stapel_runner_protocol::session::SessionConfig::KEYS.to_vec(),
    )?;
    m.add("LINK_NEWS_ALLOWANCE", l::NEWS_ALLOWANCE)?;
    m.add("LINK_CONNECT_TIMEOUT_MS", l::DEFAULT_CONNECT_TIMEOUT_MS)?;
    m.add("LINK_MAX_CLOSING_SOCKETS", l::DEFAULT_MAX_CLOSING_SOCKETS)?;
    Ok(())
}
