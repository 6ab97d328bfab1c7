//! `SocketHost` and `HubHost`: the core's connection host policy (see `core/src/host/`).
//! The transport (`transport_ws.py`) performs their outputs; every decision is the core's.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString, PyTuple};
use serde_json::Value;
use stapel_runner_protocol::host::{
    auth, HostConfig, HostError, HubHost, HubInput, HubOutput, InboundFrame, RunnerActivity,
    SocketHost, SocketInput, SocketOutput,
};

use crate::errors::raise;
use crate::json::{py_to_value, value_to_py};

fn host_error(py: Python<'_>, e: &HostError) -> PyErr {
    raise(py, "host", e.to_string(), e.code())
}

/// The core's `HostConfig` of a dict (`None`: the defaults). A refused config raises
/// `ProtocolStateError` with the core's `code` (`unknown_key`, `wrong_type`,
/// `out_of_range`, `not_an_object`) and the offending `key`.
fn config_from(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<HostConfig> {
    let v = match config {
        Some(c) if !c.is_none() => py_to_value(c)?,
        _ => Value::Object(Default::default()),
    };
    HostConfig::from_value(&v).map_err(|e| crate::session::config_error(py, &e))
}

fn pair<'py>(
    py: Python<'py>,
    kind: &str,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, [PyString::new(py, kind).into_any(), value])
}

fn socket_output<'py>(py: Python<'py>, o: SocketOutput) -> PyResult<Bound<'py, PyTuple>> {
    let kind = o.kind();
    let value = match o {
        SocketOutput::Deliver(text) | SocketOutput::Send(text) => {
            PyString::new(py, &text).into_any()
        }
        SocketOutput::PeerError { code, detail } => {
            let d = PyDict::new(py);
            d.set_item("code", code)?;
            d.set_item("detail", detail)?;
            d.into_any()
        }
        SocketOutput::Close {
            code,
            reason,
            deadline_ms,
        } => (code, reason, deadline_ms).into_pyobject(py)?.into_any(),
        _ => py.None().into_bound(py),
    };
    pair(py, kind, value)
}

fn hub_output<'py>(py: Python<'py>, o: HubOutput) -> PyResult<Bound<'py, PyTuple>> {
    let kind = o.kind();
    let value = match o {
        HubOutput::Authenticate { conn, token } => {
            (conn, token.into_string()).into_pyobject(py)?.into_any()
        }
        HubOutput::Accept { conn, runner_id } => (conn, runner_id).into_pyobject(py)?.into_any(),
        HubOutput::Reject {
            conn,
            status,
            body,
            refusal,
        } => (conn, status, body, refusal.code())
            .into_pyobject(py)?
            .into_any(),
        HubOutput::Refuse {
            conn,
            code,
            reason,
            refusal,
        } => (conn, code, reason, refusal.code())
            .into_pyobject(py)?
            .into_any(),
        HubOutput::Attach {
            conn,
            runner_id,
            announce,
        } => (conn, runner_id, announce).into_pyobject(py)?.into_any(),
        HubOutput::Evict { runner_id } => PyString::new(py, &runner_id).into_any(),
        other => PyString::new(py, &format!("{other:?}")).into_any(),
    };
    pair(py, kind, value)
}

/// One socket's host policy: feed what happened (`opened`, `frame`, `transmit`,
/// `session_close`, `close`, `failed`, `socket_closed`, `timeout`, each with a
/// monotonic `now_ms`), then drain `poll_output()` until `None` and perform every
/// output in order: `("attach", None)`, `("deliver", text)`, `("peer_error", {"code",
/// "detail"})`, `("send", frame)`, `("detach", None)`, `("close", (code, reason,
/// deadline_ms))`, `("abort", None)`. Misuse raises `ProtocolStateError` with the core's
/// code.
#[pyclass(module = "stapel_runner_protocol.transport_ws", name = "SocketHost")]
pub struct PySocketHost {
    inner: SocketHost,
}

impl PySocketHost {
    fn input(&mut self, py: Python<'_>, now_ms: u64, input: SocketInput) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| host_error(py, &e))
    }
}

#[pymethods]
impl PySocketHost {
    /// `config`: a dict of the core's `HostConfig` keys (`close_timeout_ms`, …); a
    /// refused one raises `ProtocolStateError` with the core's `code` and `key`.
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            inner: SocketHost::new(&config_from(py, config)?),
        })
    }

    /// The socket is open.
    fn opened(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::Opened)
    }
    /// A frame was read: `str` is a text frame, `bytes`/`bytearray`/`memoryview` binary.
    fn frame(&mut self, py: Python<'_>, now_ms: u64, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let frame = if let Ok(s) = data.cast::<PyString>() {
            InboundFrame::Text(s.extract::<String>()?)
        } else if let Ok(b) = data.cast::<PyBytes>() {
            InboundFrame::Binary(b.as_bytes().to_vec())
        } else if let Ok(b) = data.cast::<PyByteArray>() {
            InboundFrame::Binary(b.to_vec())
        } else {
            InboundFrame::Binary(data.call_method0("tobytes")?.extract::<Vec<u8>>()?)
        };
        self.input(py, now_ms, SocketInput::Frame(frame))
    }
    /// The session produced this frame to transmit.
    fn transmit(&mut self, py: Python<'_>, now_ms: u64, frame: String) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::Transmit(frame))
    }
    /// The session gave up on the connection with this reason code.
    fn session_close(&mut self, py: Python<'_>, now_ms: u64, reason: String) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::SessionClose(reason))
    }
    /// The application (or the hub) closes the socket.
    #[pyo3(signature = (now_ms, code = stapel_runner_protocol::host::CLOSE_NORMAL, reason = String::new()))]
    fn close(&mut self, py: Python<'_>, now_ms: u64, code: u16, reason: String) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::Close { code, reason })
    }
    /// The transport failed on this socket.
    fn failed(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::Failed)
    }
    /// The socket is gone.
    fn socket_closed(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::SocketClosed)
    }
    /// `poll_timeout()` passed.
    fn timeout(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, SocketInput::Timeout)
    }

    /// The next output, `None` when drained.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .poll_output()
            .map(|o| socket_output(py, o))
            .transpose()
    }
    /// Every queued output, in order.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let mut out = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            out.push(socket_output(py, o)?);
        }
        Ok(out)
    }
    /// The close handshake's deadline while closing, else `None`.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }
    /// `"idle"`, `"open"`, `"closing"` or `"closed"`.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().as_str()
    }
    /// `True` while the socket is open and the session attached.
    #[getter]
    fn is_open(&self) -> bool {
        self.inner.is_open()
    }
}

type Headers = Vec<(String, String)>;
type Activity = (String, u64, u64, u64, u64, bool);

/// The hub's door and runner registry: feed `request`, `upgraded`, `authenticated`,
/// `runner_added`, `timeout` (each with `now_ms`), then drain `poll_output()` until
/// `None`: `("authenticate", (conn, token))`, `("accept", (conn, runner_id))`,
/// `("reject", (conn, status, body, refusal))`, `("refuse", (conn, code, reason,
/// refusal))`, `("attach", (conn, runner_id, announce))`, `("evict", runner_id)`.
#[pyclass(module = "stapel_runner_protocol.transport_ws", name = "HubHost")]
pub struct PyHubHost {
    inner: HubHost,
}

impl PyHubHost {
    fn input(&mut self, py: Python<'_>, now_ms: u64, input: HubInput) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| host_error(py, &e))
    }
}

#[pymethods]
impl PyHubHost {
    /// `config`: a dict of the core's `HostConfig` keys (`tokens`, `max_idle_runners`, …);
    /// a refused one raises `ProtocolStateError` with the core's `code` and `key`.
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            inner: HubHost::new(&config_from(py, config)?),
        })
    }

    /// An upgrade request with these header name/value pairs arrived.
    fn request(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        conn: u64,
        headers: Headers,
    ) -> PyResult<()> {
        self.input(py, now_ms, HubInput::Request { conn, headers })
    }
    /// The WebSocket of `conn` is open.
    fn upgraded(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        conn: u64,
        headers: Headers,
    ) -> PyResult<()> {
        self.input(py, now_ms, HubInput::Upgraded { conn, headers })
    }
    /// The authenticator's answer for `conn`.
    #[pyo3(signature = (now_ms, conn, runner_id))]
    fn authenticated(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        conn: u64,
        runner_id: Option<String>,
    ) -> PyResult<()> {
        self.input(py, now_ms, HubInput::Authenticated { conn, runner_id })
    }
    /// A runner handle was created; `activity`: `(runner_id, sockets, kept_frames,
    /// queued_events, waiting_readers, awaiting_accept)` of every kept handle.
    fn runner_added(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        runner_id: String,
        activity: Vec<Activity>,
    ) -> PyResult<()> {
        let activity = activity
            .into_iter()
            .map(
                |(
                    runner_id,
                    sockets,
                    kept_frames,
                    queued_events,
                    waiting_readers,
                    awaiting_accept,
                )| {
                    RunnerActivity {
                        runner_id,
                        sockets,
                        kept_frames,
                        queued_events,
                        waiting_readers,
                        awaiting_accept,
                    }
                },
            )
            .collect();
        self.input(
            py,
            now_ms,
            HubInput::RunnerAdded {
                runner_id,
                activity,
            },
        )
    }
    /// `poll_timeout()` passed (a no-op: the hub machine has no timers).
    fn timeout(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, HubInput::Timeout)
    }

    /// The next output, `None` when drained.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .poll_output()
            .map(|o| hub_output(py, o))
            .transpose()
    }
    /// Every queued output, in order.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let mut out = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            out.push(hub_output(py, o)?);
        }
        Ok(out)
    }
    /// Always `None`.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }
    /// The runner id one `Authorization` value authenticates with the token table.
    fn runner_id_for(&self, authorization: &str) -> Option<String> {
        self.inner.runner_id_for(authorization).map(str::to_owned)
    }
    /// `True` when a token table decides (else the host's authenticator).
    #[getter]
    fn has_token_table(&self) -> bool {
        self.inner.has_token_table()
    }
    /// Registered runner ids, oldest first.
    #[getter]
    fn runners(&self) -> Vec<String> {
        self.inner.runners().map(str::to_owned).collect()
    }
    /// Connections pending between the token check and the upgraded socket.
    #[getter]
    fn pending_connections(&self) -> usize {
        self.inner.pending_connections()
    }
}

/// The bearer token of one `Authorization` header value, or `None` when the value is
/// refused (not `Bearer`, no token).
#[pyfunction]
pub fn bearer_token(value: &str) -> Option<String> {
    auth::bearer_token(value).ok().map(str::to_owned)
}

/// The refusal code of an upgrade request's headers, or `None` when they present a
/// bearer token (rules 1–3; the token itself is checked by `HubHost`).
#[pyfunction]
pub fn bearer_refusal(headers: Headers) -> Option<&'static str> {
    auth::bearer_from_headers(&headers).err().map(|r| r.code())
}

/// The core's idle rule for one runner handle's `(runner_id, sockets, kept_frames,
/// queued_events, waiting_readers, awaiting_accept)`.
#[pyfunction]
pub fn runner_is_idle(activity: Activity) -> bool {
    let (runner_id, sockets, kept_frames, queued_events, waiting_readers, awaiting_accept) =
        activity;
    RunnerActivity {
        runner_id,
        sockets,
        kept_frames,
        queued_events,
        waiting_readers,
        awaiting_accept,
    }
    .is_idle()
}

/// The `Authorization` header value a runner sends for `token` (`Bearer <token>`), or
/// `None` for an empty token (no header).
#[pyfunction]
pub fn bearer_authorization(token: &str) -> Option<String> {
    auth::authorization_value(token)
}

/// The host config a dict reads as (`None`: the defaults), as the core describes it:
/// every key with its value, `tokens` the number of table entries (`None` without a
/// table). Raises `ProtocolStateError` (`code`, `key`) for a refused config, as
/// `SocketHost` and `HubHost` do.
#[pyfunction]
#[pyo3(signature = (config = None))]
pub fn host_config<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &config_from(py, config)?.to_value())
}
