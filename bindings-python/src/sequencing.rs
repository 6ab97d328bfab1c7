//! `ConnectionState` and its read-only views (`TaskChannel`, `OutboxLog`,
//! `InboxTracker`) over the core's sequencing state.

use indexmap::IndexMap;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use stapel_runner_protocol::sequencing::{
    self as seq, Arrival, ConnectionState, Position, Replay, Role, SequencingConfig,
    DEFAULT_INBOUND_WINDOW, DEFAULT_MAX_OUTBOX_BYTES, DEFAULT_MAX_OUTBOX_FRAMES,
};
use stapel_runner_protocol::wire::Message;

use crate::errors::raise;
use crate::fields::Native;
use crate::json::type_name;
use crate::messages::{message_from_py, message_to_py, set_seq, with_message};

fn state_error(py: Python<'_>, message: String, code: &str) -> PyErr {
    raise(py, "sequencing", message, code)
}

/// Only message objects take part in sequencing (not dicts).
fn check_sequenced_arg(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if obj.cast::<PyDict>().is_ok() {
        return Err(PyTypeError::new_err(
            "sequencing takes message objects, not dicts (use decode() first)",
        ));
    }
    Ok(())
}

/// The core message of a message object (not a dict).
fn sequenced_message(obj: &Bound<'_, PyAny>) -> PyResult<Message> {
    check_sequenced_arg(obj)?;
    message_from_py(obj)
}

/// The part of a sequenced message object the sequencing state reads on receipt (see
/// [`crate::messages::sequencing_view`]). Any other object goes through [`sequenced_message`],
/// so a dict, a non-message and an unsequenced message (`hello`, `ping`, `pong`) fail
/// exactly as before.
fn sequencing_view(obj: &Bound<'_, PyAny>) -> PyResult<Message> {
    match crate::messages::sequencing_view(obj)? {
        Some(m) => Ok(m),
        None => sequenced_message(obj),
    }
}

fn position_to_py<'py>(py: Python<'py>, p: &Position) -> PyResult<Bound<'py, PyAny>> {
    crate::json::jvalue_to_py(py, &p.to_value())
}

fn positions_to_py<'py>(py: Python<'py>, ps: &[Position]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for p in ps {
        list.append(position_to_py(py, p)?)?;
    }
    Ok(list)
}

fn replay_to_py<'py>(py: Python<'py>, r: &Replay) -> PyResult<Bound<'py, PyDict>> {
    let streams = PyList::empty(py);
    for s in &r.streams {
        let d = PyDict::new(py);
        d.set_item("task_id", &s.task_id)?;
        if let Some(a) = s.attempt {
            d.set_item("attempt", a)?;
        }
        let frames: Vec<&str> = s.frames.iter().map(|f| f.frame.as_str()).collect();
        d.set_item("frames", frames)?;
        streams.append(d)?;
    }
    let resync = PyList::empty(py);
    for x in &r.resync {
        let d = PyDict::new(py);
        d.set_item("task_id", &x.task_id)?;
        if let Some(a) = x.attempt {
            d.set_item("attempt", a)?;
        }
        d.set_item("declared", x.declared)?;
        d.set_item("missing_from", x.missing_from)?;
        d.set_item("missing_to", x.missing_to)?;
        resync.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("streams", streams)?;
    out.set_item("resync", resync)?;
    out.set_item("peer_ahead", positions_to_py(py, &r.peer_ahead)?)?;
    out.set_item("unknown", &r.unknown)?;
    Ok(out)
}

/// A replay whose frames could not all be re-stamped (an internal invariant broke in
/// the core) raises `ProtocolStateError` with the core's code (`restamp_failed`); the
/// dropped frames are never sent, and the rest stays in `unacked()`.
fn check_replay(py: Python<'_>, r: &Replay) -> PyResult<()> {
    match r.failed.first() {
        Some(e) => Err(state_error(py, e.to_string(), e.code())),
        None => Ok(()),
    }
}

fn replay_messages<'py>(py: Python<'py>, r: &Replay) -> PyResult<Bound<'py, PyDict>> {
    // Each kept frame goes through the package's decode path (the core's
    // `wire::decode_str_view`: the fast view for a plain progress frame, the payload
    // kept as text until read). A kept frame that no longer decodes fails the call
    // (`undecodable_frame`, the core's policy for `OutboxLog::since`) rather than
    // vanishing from the replay.
    let out = PyDict::new(py);
    for s in &r.streams {
        let list = match out.get_item(&s.task_id)? {
            Some(l) => l.cast_into::<PyList>()?,
            None => {
                let l = PyList::empty(py);
                out.set_item(&s.task_id, &l)?;
                l
            }
        };
        for f in &s.frames {
            // SAFETY: no owner is given, so the message copies what it keeps of `f.frame`.
            let m =
                unsafe { crate::wire::decode_text(py, &f.frame, false, None) }.map_err(|_| {
                    let e = seq::SequencingError::UndecodableFrame { seq: f.seq };
                    state_error(py, e.to_string(), e.code())
                })?;
            list.append(m)?;
        }
    }
    Ok(out)
}

/// A `hello.resume`-style dict (`{task_id: seq}`, seqs non-negative ints); `None` is `{}`.
fn parse_resume(obj: Option<&Bound<'_, PyAny>>) -> PyResult<IndexMap<String, u64>> {
    match obj {
        None => Ok(IndexMap::new()),
        Some(o) if o.is_none() => Ok(IndexMap::new()),
        Some(o) => IndexMap::<String, u64>::from_py(o)?.ok_or_else(|| {
            PyValueError::new_err("resume must map task ids (str) to seqs (non-negative int)")
        }),
    }
}

fn parse_positions(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Position>> {
    let v = crate::json::py_to_jvalue(obj)?;
    Position::list_from_value(&v).map_err(PyValueError::new_err)
}

/// A view that cannot be changed: the stream belongs to a `ConnectionState`.
fn read_only(what: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "this {what} is a read-only copy of a ConnectionState stream; \
         emit and receive through the ConnectionState (or build a standalone {what}())"
    ))
}

/// The log of one outbound stream.
///
/// `OutboxLog(*, max_frames=4096, max_bytes=16 MiB)` is a standalone, bounded log
/// (stapel-runner-protocol 0.1.1's `OutboxLog()`): `emit(message)` stamps the next seq
/// on the message (in place) and keeps its frame, `since(last_seq)` gives the replay tail,
/// `ack(seq)` drops what the peer holds. A full log refuses `emit` with
/// `ProtocolStateError` (`backpressure`, `frame_too_large`) until `ack` trims it.
/// The logs of `ConnectionState.channel(task_id).outbound` are read-only copies, but for
/// `ack(seq)`, which trims the state's stream as 0.1.1's did (a 0.1.1 hub trims its
/// replay that way after a `hello.resume`).
#[pyclass(module = "stapel_runner_protocol.state", name = "OutboxLog")]
pub struct PyOutboxLog {
    inner: seq::OutboxLog,
    /// `(max_frames, max_bytes)` of a standalone log; `None` for a read-only copy.
    bounds: Option<(usize, usize)>,
    /// The state and stream `(task_id, attempt)` a read-only copy was taken from.
    origin: Option<(Py<PyConnectionState>, String, Option<u64>)>,
}

impl PyOutboxLog {
    fn view(
        inner: seq::OutboxLog,
        origin: Option<(Py<PyConnectionState>, String, Option<u64>)>,
    ) -> Self {
        Self {
            inner,
            bounds: None,
            origin,
        }
    }
}

#[pymethods]
impl PyOutboxLog {
    #[new]
    #[pyo3(signature = (*, max_frames = DEFAULT_MAX_OUTBOX_FRAMES, max_bytes = DEFAULT_MAX_OUTBOX_BYTES))]
    fn new(max_frames: usize, max_bytes: usize) -> Self {
        Self {
            inner: seq::OutboxLog::new(),
            bounds: Some((max_frames, max_bytes)),
            origin: None,
        }
    }

    /// Stamp the next seq on `message` (in place), keep its encoded frame for replay and
    /// return `message`. `ProtocolStateError` (`not_sequenced`, `backpressure`,
    /// `frame_too_large`, `seq_exhausted`, `nested_too_deep`) leaves it unchanged.
    fn emit<'py>(&mut self, message: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = message.py();
        let (max_frames, max_bytes) = self.bounds.ok_or_else(|| read_only("OutboxLog"))?;
        check_sequenced_arg(&message)?;
        let log = &mut self.inner;
        let outcome = with_message(&message, |m| match log.emit(m, max_frames, max_bytes) {
            Ok(stamped) => (Ok(stamped.seq().unwrap_or(0)), stamped),
            Err(e) => {
                let err = (e.error.to_string(), e.code());
                (Err(err), e.into_message())
            }
        })?;
        match outcome {
            Ok(seq) => {
                set_seq(&message, seq)?;
                Ok(message)
            }
            Err((text, code)) => Err(state_error(py, text, code)),
        }
    }

    /// The peer holds everything up to `seq`: drop the kept frames at or below it
    /// (numbering does not move). Returns `None`, as stapel-runner-protocol 0.1.1's
    /// did (`len(since(0))` tells what is still kept). On a copy of a state's stream
    /// (`state.channel(task_id).outbox`) it trims that stream of the state too (the
    /// core's `ConnectionState::trim_through`), as 0.1.1's live log did.
    fn ack(&mut self, py: Python<'_>, seq: u64) -> PyResult<()> {
        if self.bounds.is_none() {
            let Some((state, task_id, attempt)) = &self.origin else {
                return Err(read_only("OutboxLog"));
            };
            state
                .borrow_mut(py)
                .inner
                .trim_through(task_id, *attempt, seq);
        }
        self.inner.ack(seq);
        Ok(())
    }

    /// `(max_frames, max_bytes)` of a standalone log; `None` for a read-only copy.
    #[getter]
    fn bounds(&self) -> Option<(usize, usize)> {
        self.bounds
    }

    /// Highest seq assigned so far (0 before anything is emitted).
    #[getter]
    fn last_seq(&self) -> u64 {
        self.inner.last_seq()
    }
    /// The seq the next emitted frame gets.
    #[getter]
    fn next_seq(&self) -> u64 {
        self.inner.next_seq()
    }
    /// The lowest seq still kept for replay (`next_seq` when nothing is kept).
    #[getter]
    fn first_available(&self) -> u64 {
        self.inner.first_available()
    }
    /// Encoded bytes kept.
    #[getter]
    fn kept_bytes(&self) -> usize {
        self.inner.kept_bytes()
    }
    /// The first seq stamped before the peer's position on this stream was known
    /// (provisional: re-stamped after the peer's position once it is); `next_seq` when
    /// no kept frame is provisional.
    #[getter]
    fn unconfirmed_from(&self) -> u64 {
        self.inner.unconfirmed_from()
    }
    /// `True` while the peer's position on this stream is known (nothing stamped from
    /// now on is provisional).
    #[getter]
    fn is_confirmed(&self) -> bool {
        self.inner.is_confirmed()
    }
    /// The kept frames as `(seq, frame)` pairs, ascending.
    fn frames(&self) -> Vec<(u64, String)> {
        self.inner
            .kept()
            .map(|f| (f.seq, f.frame.clone()))
            .collect()
    }
    /// Kept messages with `seq > last_seq` (the replay tail), decoded from the kept frames
    /// (the core's `OutboxLog::since`). Raises `ProtocolStateError` (`undecodable_frame`)
    /// when one of them no longer decodes (an internal invariant broke), never skipping it.
    fn since<'py>(&self, py: Python<'py>, last_seq: u64) -> PyResult<Bound<'py, PyList>> {
        let msgs = self
            .inner
            .since(last_seq)
            .map_err(|e| state_error(py, e.to_string(), e.code()))?;
        let list = PyList::empty(py);
        for m in msgs {
            list.append(message_to_py(py, m)?)?;
        }
        Ok(list)
    }
    fn __repr__(&self) -> String {
        format!(
            "OutboxLog(last_seq={}, first_available={}, kept={})",
            self.inner.last_seq(),
            self.inner.first_available(),
            self.inner.kept().len()
        )
    }
}

/// The tracker of one inbound stream.
///
/// `InboxTracker(*, window=1024)` is a standalone tracker (stapel-runner-protocol 0.1.1's
/// `InboxTracker()`): `receive(seq)` returns `True` for a new seq and `False` for a
/// duplicate; `last_seq` (the contiguous high-water mark) advances across a gap only once
/// it fills. At most `window` seqs are recorded above `last_seq`: a seq beyond it, and
/// seq 0, raise `ProtocolStateError` (`beyond_window`, `invalid_seq`) and record nothing.
/// The trackers of `ConnectionState.channel(task_id).inbound` are read-only copies.
#[pyclass(module = "stapel_runner_protocol.state", name = "InboxTracker")]
pub struct PyInboxTracker {
    inner: seq::InboxTracker,
    /// The window of a standalone tracker; `None` for a read-only copy.
    window: Option<u64>,
}

impl PyInboxTracker {
    fn view(inner: seq::InboxTracker) -> Self {
        Self {
            inner,
            window: None,
        }
    }
}

#[pymethods]
impl PyInboxTracker {
    #[new]
    #[pyo3(signature = (*, window = DEFAULT_INBOUND_WINDOW))]
    fn new(window: u64) -> Self {
        Self {
            inner: seq::InboxTracker::new(),
            window: Some(window),
        }
    }

    /// Record `seq`: `True` when it is new, `False` for a duplicate.
    fn receive(&mut self, py: Python<'_>, seq: u64) -> PyResult<bool> {
        self.receive_arrival(py, seq).map(|a| a != "duplicate")
    }

    /// Record `seq` and say how it arrived: `"in_order"`, `"ahead"` (new, after a gap) or
    /// `"duplicate"`.
    fn receive_arrival(&mut self, py: Python<'_>, seq: u64) -> PyResult<&'static str> {
        let window = self.window.ok_or_else(|| read_only("InboxTracker"))?;
        self.inner
            .receive(seq, window)
            .map(Arrival::as_str)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// The out-of-order window of a standalone tracker; `None` for a read-only copy.
    #[getter]
    fn window(&self) -> Option<u64> {
        self.window
    }

    /// Highest seq such that every seq in `1..=last_seq` was received.
    #[getter]
    fn last_seq(&self) -> u64 {
        self.inner.watermark()
    }
    /// Seqs received above `last_seq` (ahead of a gap), ascending.
    #[getter]
    fn ahead(&self) -> Vec<u64> {
        self.inner.ahead().collect()
    }
    /// `True` once anything was received.
    #[getter]
    fn has_received(&self) -> bool {
        self.inner.has_received()
    }
    fn __repr__(&self) -> String {
        format!(
            "InboxTracker(last_seq={}, ahead={:?})",
            self.inner.watermark(),
            self.inner.ahead().collect::<Vec<_>>()
        )
    }
}

/// The streams of one task.
///
/// `TaskChannel(task_id, *, max_frames=4096, max_bytes=16 MiB, window=1024)` is a
/// standalone channel (stapel-runner-protocol 0.1.1's `TaskChannel(task_id)`): one
/// standalone `outbox` (`OutboxLog`) and one `inbox` (`InboxTracker`); `emit(message)`
/// stamps and keeps, `receive(message)` records its seq (`False` for a duplicate),
/// `replay(peer_last_seq)` is the outbox's tail and `last_received` the inbox's
/// high-water mark.
///
/// `ConnectionState.channel(task_id)` and `.channels` give read-only copies of a
/// state's task instead: outbound logs and inbound trackers keyed by attempt (`None` for
/// hub→runner command streams); their `outbox` / `inbox` are copies of the task's
/// latest stream (the highest attempt), and only `replay` and the getters work on them.
#[pyclass(module = "stapel_runner_protocol.state", name = "TaskChannel", frozen)]
pub struct PyTaskChannel {
    #[pyo3(get)]
    task_id: String,
    inner: seq::TaskChannel,
    /// The outbox and inbox of a standalone channel; `None` for a read-only copy.
    own: Option<(Py<PyOutboxLog>, Py<PyInboxTracker>)>,
    /// The state a read-only copy was taken from (its outbox copies' `ack` trims it).
    state: Option<Py<PyConnectionState>>,
}

impl PyTaskChannel {
    fn view(task_id: String, inner: seq::TaskChannel, state: Py<PyConnectionState>) -> Self {
        Self {
            task_id,
            inner,
            own: None,
            state: Some(state),
        }
    }

    /// Where an outbox copy of stream `attempt` comes from.
    fn origin(
        &self,
        py: Python<'_>,
        attempt: Option<u64>,
    ) -> Option<(Py<PyConnectionState>, String, Option<u64>)> {
        self.state
            .as_ref()
            .map(|s| (s.clone_ref(py), self.task_id.clone(), attempt))
    }

    /// The standalone outbox and inbox, or the error for a read-only copy.
    fn owned(&self) -> PyResult<&(Py<PyOutboxLog>, Py<PyInboxTracker>)> {
        self.own.as_ref().ok_or_else(|| read_only("TaskChannel"))
    }

    /// A copy of the task's latest outbound log (an empty one when it has none).
    fn latest_outbound(&self, py: Python<'_>) -> PyOutboxLog {
        let latest = self.inner.outbound().max_by_key(|(a, _)| *a);
        let attempt = latest.as_ref().and_then(|(a, _)| *a);
        let log = latest.map(|(_, l)| l.clone()).unwrap_or_default();
        PyOutboxLog::view(log, self.origin(py, attempt))
    }
}

#[pymethods]
impl PyTaskChannel {
    #[new]
    #[pyo3(signature = (task_id, *, max_frames = DEFAULT_MAX_OUTBOX_FRAMES,
                        max_bytes = DEFAULT_MAX_OUTBOX_BYTES, window = DEFAULT_INBOUND_WINDOW))]
    fn new(
        py: Python<'_>,
        task_id: String,
        max_frames: usize,
        max_bytes: usize,
        window: u64,
    ) -> PyResult<Self> {
        let outbox = Py::new(py, PyOutboxLog::new(max_frames, max_bytes))?;
        let inbox = Py::new(py, PyInboxTracker::new(window))?;
        Ok(Self {
            task_id,
            inner: seq::TaskChannel::default(),
            own: Some((outbox, inbox)),
            state: None,
        })
    }

    /// The outbound log: a standalone channel's own; a copy of the latest stream's for a
    /// read-only copy.
    #[getter]
    fn outbox(&self, py: Python<'_>) -> PyResult<Py<PyOutboxLog>> {
        match &self.own {
            Some((outbox, _)) => Ok(outbox.clone_ref(py)),
            None => Py::new(py, self.latest_outbound(py)),
        }
    }

    /// The inbound tracker: a standalone channel's own; a copy of the latest stream's for
    /// a read-only copy.
    #[getter]
    fn inbox(&self, py: Python<'_>) -> PyResult<Py<PyInboxTracker>> {
        match &self.own {
            Some((_, inbox)) => Ok(inbox.clone_ref(py)),
            None => {
                let t = self.inner.inbound().max_by_key(|(a, _)| *a).map(|(_, t)| t);
                Py::new(py, PyInboxTracker::view(t.cloned().unwrap_or_default()))
            }
        }
    }

    /// Stamp `message` with the outbox's next seq and keep it (standalone channels).
    fn emit<'py>(&self, message: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (outbox, _) = self.owned()?;
        outbox.borrow_mut(message.py()).emit(message)
    }

    /// Record an inbound message's seq: `False` for a duplicate (standalone channels).
    fn receive(&self, message: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = message.py();
        let (_, inbox) = self.owned()?;
        let seq: u64 = message.getattr("seq")?.extract()?;
        inbox.borrow_mut(py).receive(py, seq)
    }

    /// The outbound messages the peer is missing (`seq > peer_last_seq`).
    fn replay<'py>(&self, py: Python<'py>, peer_last_seq: u64) -> PyResult<Bound<'py, PyList>> {
        match &self.own {
            Some((outbox, _)) => outbox.borrow(py).since(py, peer_last_seq),
            None => self.latest_outbound(py).since(py, peer_last_seq),
        }
    }

    /// `{attempt: OutboxLog}` of the task's outbound streams (read-only copies; a
    /// standalone channel: `{None: outbox}`, a copy).
    #[getter]
    fn outbound<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match &self.own {
            Some((outbox, _)) => d.set_item(
                py.None(),
                PyOutboxLog::view(outbox.borrow(py).inner.clone(), None),
            )?,
            None => {
                for (a, log) in self.inner.outbound() {
                    d.set_item(a, PyOutboxLog::view(log.clone(), self.origin(py, a)))?;
                }
            }
        }
        Ok(d)
    }
    /// `{attempt: InboxTracker}` of the task's inbound streams (read-only copies; a
    /// standalone channel: `{None: inbox}`, a copy).
    #[getter]
    fn inbound<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match &self.own {
            Some((_, inbox)) => d.set_item(
                py.None(),
                PyInboxTracker::view(inbox.borrow(py).inner.clone()),
            )?,
            None => {
                for (a, t) in self.inner.inbound() {
                    d.set_item(a, PyInboxTracker::view(t.clone()))?;
                }
            }
        }
        Ok(d)
    }
    /// Last contiguously received inbound seq of the task's highest inbound stream that
    /// has received anything: exactly what `resume_map` declares for the task (the core
    /// answers both), 0 when nothing was received. A standalone channel: its inbox's
    /// `last_seq`.
    #[getter]
    fn last_received(&self, py: Python<'_>) -> u64 {
        match &self.own {
            Some((_, inbox)) => inbox.borrow(py).inner.watermark(),
            None => self.inner.last_received(),
        }
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        match &self.own {
            Some((outbox, inbox)) => format!(
                "TaskChannel(task_id={:?}, last_seq={}, last_received={})",
                self.task_id,
                outbox.borrow(py).inner.last_seq(),
                inbox.borrow(py).inner.watermark()
            ),
            None => format!(
                "TaskChannel(task_id={:?}, outbound={}, inbound={})",
                self.task_id,
                self.inner.outbound().count(),
                self.inner.inbound().count()
            ),
        }
    }
}

/// Sequencing state of one end of a hub↔runner connection (the core's
/// `ConnectionState`): stamps outbound seqs and keeps frames for replay, suppresses
/// inbound duplicates, and answers resume/replay after a reconnect.
///
/// `role` is `"hub"` or `"runner"`. Bounds (keywords): `inbound_window` (1024),
/// `max_outbox_frames` (4096), `max_outbox_bytes` (16 MiB), `max_streams` (10000),
/// `max_tombstones` (10000 forgotten tasks remembered, oldest evicted first).
/// Errors are `ProtocolStateError` with the core's code (`not_sequenced`,
/// `role_cannot_emit`, `wrong_direction`, `backpressure`, …).
#[pyclass(module = "stapel_runner_protocol.state", name = "ConnectionState")]
pub struct PyConnectionState {
    inner: ConnectionState,
}

impl PyConnectionState {
    /// Wrap a core state.
    pub fn from_core(inner: ConnectionState) -> Self {
        Self { inner }
    }

    /// The core state.
    pub fn core(&self) -> &ConnectionState {
        &self.inner
    }
}

fn arrival_str(a: Arrival) -> &'static str {
    a.as_str()
}

#[pymethods]
impl PyConnectionState {
    #[new]
    #[pyo3(signature = (role, *, inbound_window = None, max_outbox_frames = None,
                        max_outbox_bytes = None, max_streams = None, max_tombstones = None))]
    fn new(
        role: &str,
        inbound_window: Option<u64>,
        max_outbox_frames: Option<usize>,
        max_outbox_bytes: Option<usize>,
        max_streams: Option<usize>,
        max_tombstones: Option<usize>,
    ) -> PyResult<Self> {
        let role = Role::from_name(role).ok_or_else(|| {
            PyValueError::new_err(format!("role must be \"hub\" or \"runner\", not {role:?}"))
        })?;
        let mut config = SequencingConfig::default();
        if let Some(v) = inbound_window {
            config.inbound_window = v;
        }
        if let Some(v) = max_outbox_frames {
            config.max_outbox_frames = v;
        }
        if let Some(v) = max_outbox_bytes {
            config.max_outbox_bytes = v;
        }
        if let Some(v) = max_streams {
            config.max_streams = v;
        }
        if let Some(v) = max_tombstones {
            config.max_tombstones = v;
        }
        Ok(Self {
            inner: ConnectionState::with_config(role, config),
        })
    }

    /// `"hub"` or `"runner"`.
    #[getter]
    fn role(&self) -> &'static str {
        self.inner.role().as_str()
    }

    /// The bounds in force, as a dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::json::value_to_py(py, &self.inner.config().to_value())
    }

    /// Stamp the next seq of the message's stream on `message` (in place), keep its
    /// encoded frame for replay, and return `message`.
    fn emit<'py>(&mut self, message: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = message.py();
        check_sequenced_arg(&message)?;
        let outcome = with_message(&message, |m| match self.inner.emit(m) {
            Ok(stamped) => (Ok(stamped.seq().unwrap_or(0)), stamped),
            Err(e) => {
                let err = (e.error.to_string(), e.code());
                (Err(err), e.into_message())
            }
        })?;
        match outcome {
            Ok(seq) => {
                set_seq(&message, seq)?;
                Ok(message)
            }
            Err((text, code)) => Err(state_error(py, text, code)),
        }
    }

    /// As `emit`, also returning the exact frame that was kept (what to transmit).
    fn emit_encoded<'py>(
        &mut self,
        message: Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, String)> {
        let py = message.py();
        let m = sequenced_message(&message)?;
        match self.inner.emit_encoded(m) {
            Ok((stamped, frame)) => {
                set_seq(&message, stamped.seq().unwrap_or(0))?;
                Ok((message, frame))
            }
            Err(e) => Err(state_error(py, e.error.to_string(), e.code())),
        }
    }

    /// Record a received message; `True` when it is new (apply it), `False` for a
    /// duplicate.
    fn receive(&mut self, message: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = message.py();
        let m = sequencing_view(message)?;
        self.inner
            .receive(&m)
            .map(Arrival::is_new)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// Record a received message and return how it arrived: `"in_order"`, `"ahead"` (new,
    /// after a gap) or `"duplicate"`.
    fn receive_arrival(&mut self, message: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let py = message.py();
        let m = sequencing_view(message)?;
        self.inner
            .receive(&m)
            .map(arrival_str)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// How `message` would arrive, without recording it.
    fn classify(&self, message: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let py = message.py();
        let m = sequencing_view(message)?;
        self.inner
            .classify(&m)
            .map(arrival_str)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// Record `message` only if it is exactly the next seq of its stream: `"in_order"`
    /// (recorded), `"duplicate"`, or `"ahead"` (not recorded; hold it until the gap fills).
    fn accept_in_order(&mut self, message: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let py = message.py();
        let m = sequencing_view(message)?;
        self.inner
            .accept_in_order(&m)
            .map(arrival_str)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// Per task, the last seq received contiguously — what goes into `hello.resume`.
    fn resume_map<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.inner.resume_map().to_py(py)
    }

    /// Given a peer's `hello.resume` map, the messages to re-send per task
    /// (`{task_id: [messages]}`). Also acknowledges what the peer declared. The map is
    /// the first argument (`resume_map=`, or `resume=`).
    #[pyo3(signature = (resume_map = None, *, resume = None))]
    fn replay_for<'py>(
        &mut self,
        py: Python<'py>,
        resume_map: Option<&Bound<'py, PyAny>>,
        resume: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let resume = match (resume_map, resume) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err(
                    "replay_for() takes the resume map once (resume_map= or resume=)",
                ))
            }
            (a, b) => a.or(b),
        };
        let r = self.inner.replay_for(&parse_resume(resume)?);
        check_replay(py, &r)?;
        replay_messages(py, &r)
    }

    /// `replay_for` with the full answer: `{"streams": [{"task_id", "attempt"?,
    /// "frames": [...]}], "resync": [...], "peer_ahead": [...], "unknown": [...]}`.
    #[pyo3(signature = (resume = None))]
    fn replay_report<'py>(
        &mut self,
        py: Python<'py>,
        resume: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner.replay_for(&parse_resume(resume)?);
        check_replay(py, &r)?;
        replay_to_py(py, &r)
    }

    /// What to re-send given exact per-stream declarations (`[{"task_id", "attempt"?,
    /// "seq"}]`), in the form of `replay_report`.
    fn replay_positions<'py>(
        &mut self,
        positions: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let list = parse_positions(positions)?;
        let r = self.inner.replay_positions(&list);
        check_replay(positions.py(), &r)?;
        replay_to_py(positions.py(), &r)
    }

    /// The peer acknowledged everything up to `seq` on an outbound stream: drop those
    /// kept frames; returns how many were dropped.
    ///
    /// An acknowledgement at or above the stream's first provisional seq, or beyond its
    /// last emitted seq, means this state is older than the peer's: the provisional (or,
    /// without provisional frames, all) kept frames after `seq` are re-stamped after it
    /// and numbering continues after them (0 is returned; re-send them, see `unacked`).
    /// An acknowledgement (`seq > 0`) of an unknown stream creates it with numbering at
    /// `seq + 1`; one of a forgotten task, or above 2^53 - 1, is ignored.
    /// Raises `ProtocolStateError` (`restamp_failed`) when a kept frame to re-stamp no
    /// longer decodes (it was dropped; the rest of the acknowledgement applied).
    #[pyo3(signature = (task_id, attempt, seq))]
    fn ack(
        &mut self,
        py: Python<'_>,
        task_id: &str,
        attempt: Option<u64>,
        seq: u64,
    ) -> PyResult<usize> {
        self.inner
            .ack(task_id, attempt, seq)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// The peer is known to hold everything up to `seq` on an outbound stream (e.g. a
    /// checkpoint against a hub that sends no acknowledgements): drop the kept frames at
    /// or below `seq`. Unlike `ack` it never re-stamps, moves numbering or creates a
    /// stream. Returns how many were dropped.
    #[pyo3(signature = (task_id, attempt, seq))]
    fn trim_through(&mut self, task_id: &str, attempt: Option<u64>, seq: u64) -> usize {
        self.inner.trim_through(task_id, attempt, seq)
    }

    /// `True` when a declared position `seq` of an outbound stream is ahead of this state
    /// (it collides with provisional frames or lies beyond the last emitted seq).
    #[pyo3(signature = (task_id, attempt, seq))]
    fn is_ahead(&self, task_id: &str, attempt: Option<u64>, seq: u64) -> bool {
        self.inner.is_ahead(task_id, attempt, seq)
    }

    /// Treat every frame emitted from now on as provisional until the peer's positions
    /// are known (`confirm_all`): for a state that may be older than the peer's (fresh
    /// after a loss, or restored). The session machines call it on every state they are
    /// given.
    fn mark_unconfirmed(&mut self) {
        self.inner.mark_unconfirmed();
    }

    /// The peer's position is known for every stream: provisional frames still kept are
    /// final from now on.
    fn confirm_all(&mut self) {
        self.inner.confirm_all();
    }

    /// `True` once the peer's positions are known (`confirm_all`): frames emitted from
    /// then on are final.
    #[getter]
    fn is_confirmed(&self) -> bool {
        self.inner.is_confirmed()
    }

    /// `True` when no frame of the task is kept for replay: everything emitted on it was
    /// acknowledged (also `True` for unknown and forgotten tasks). Once the task's
    /// terminal frame is acknowledged it can be forgotten safely.
    fn is_fully_acknowledged(&self, task_id: &str) -> bool {
        self.inner.is_fully_acknowledged(task_id)
    }

    /// `True` when the task was forgotten and its tombstone is still kept.
    fn is_forgotten(&self, task_id: &str) -> bool {
        self.inner.is_forgotten(task_id)
    }

    /// Number of tombstones kept (forgotten tasks, at most `max_tombstones`).
    #[getter]
    fn forgotten_count(&self) -> usize {
        self.inner.forgotten_count()
    }

    /// The sender of an inbound stream can no longer send seqs below `first_available`:
    /// returns the skipped range `(from, to)` or `None`.
    #[pyo3(signature = (task_id, attempt, first_available))]
    fn skip_to(
        &mut self,
        py: Python<'_>,
        task_id: &str,
        attempt: Option<u64>,
        first_available: u64,
    ) -> PyResult<Option<(u64, u64)>> {
        self.inner
            .skip_to(task_id, attempt, first_available)
            .map_err(|e| state_error(py, e.to_string(), e.code()))
    }

    /// Inbound positions to acknowledge (`[{"task_id", "attempt"?, "seq"}]`).
    fn ack_positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        positions_to_py(py, &self.inner.ack_positions())
    }

    /// Per emitted outbound stream, the lowest seq still sendable.
    fn replay_from<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        positions_to_py(py, &self.inner.replay_from())
    }

    /// Every kept frame: `(task_id, attempt, seq, frame)`, stream by stream.
    fn unacked(&self) -> Vec<(String, Option<u64>, u64, String)> {
        self.inner
            .unacked()
            .map(|(t, a, f)| (t.to_owned(), a, f.seq, f.frame.clone()))
            .collect()
    }

    /// Drop every stream of a task in both directions and keep a tombstone of it: its
    /// late or replayed frames at or below the tombstone are duplicates, acks,
    /// `skip_to` and declarations for it create no state, and a frame above it or an
    /// emit revives it with its numbering. At most `max_tombstones` are kept (the oldest
    /// is evicted and unknown again). Safe once `is_fully_acknowledged(task_id)` holds
    /// and its last inbound frame was applied. `True` when the task was known.
    fn forget_task(&mut self, task_id: &str) -> bool {
        self.inner.forget_task(task_id)
    }

    /// Frames kept for replay, over all streams.
    #[getter]
    fn outbox_frames(&self) -> usize {
        self.inner.outbox_frames()
    }

    /// Encoded bytes kept for replay, over all streams.
    #[getter]
    fn outbox_bytes(&self) -> usize {
        self.inner.outbox_bytes()
    }

    /// `(outbound, inbound)` stream counts.
    fn stream_counts(&self) -> (usize, usize) {
        self.inner.stream_counts()
    }

    /// A read-only view of one task's streams (empty for an unknown task); an empty
    /// task id raises `ProtocolStateError` (`missing_task_id`, the core's check). Its
    /// outbox copies' `ack(seq)` trims this state's stream (0.1.1's live log).
    fn channel(slf: &Bound<'_, Self>, task_id: &str) -> PyResult<PyTaskChannel> {
        let py = slf.py();
        let inner = slf
            .borrow()
            .inner
            .channel(task_id)
            .map_err(|e| state_error(py, e.to_string(), e.code()))?;
        Ok(PyTaskChannel::view(
            task_id.to_owned(),
            inner,
            slf.clone().unbind(),
        ))
    }

    /// `{task_id: TaskChannel}` views of every known task, in first-seen order.
    #[getter]
    fn channels<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let d = PyDict::new(py);
        let this = slf.borrow();
        for (t, c) in this.inner.tasks() {
            let view = PyTaskChannel::view(t.to_owned(), c.clone(), slf.clone().unbind());
            d.set_item(t, view)?;
        }
        Ok(d)
    }

    /// The whole state as versioned bytes (`stapel-seq-snapshot/1`).
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.snapshot())
    }

    /// A state read back from `snapshot()` bytes; `ProtocolStateError` with code
    /// `not_a_snapshot`, `unsupported_snapshot_version` or `corrupt_snapshot`.
    #[staticmethod]
    fn restore(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let bytes: Vec<u8> = if let Ok(b) = data.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else if let Ok(b) = data.cast::<pyo3::types::PyByteArray>() {
            b.to_vec()
        } else {
            return Err(PyTypeError::new_err(format!(
                "restore() takes bytes, not {}",
                type_name(data)
            )));
        };
        ConnectionState::restore(&bytes)
            .map(|inner| Self { inner })
            .map_err(|e| raise(py, "snapshot", e.to_string(), e.code()))
    }

    /// Estimated bytes held by this state.
    fn memory_footprint(&self) -> usize {
        self.inner.memory_footprint()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        let py = other.py();
        match other.cast::<PyConnectionState>() {
            Ok(o) => pyo3::types::PyBool::new(py, o.borrow().inner == self.inner)
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        }
    }

    fn __repr__(&self) -> String {
        let (o, i) = self.inner.stream_counts();
        format!(
            "ConnectionState({:?}, outbound_streams={o}, inbound_streams={i}, outbox_frames={})",
            self.inner.role().as_str(),
            self.inner.outbox_frames()
        )
    }
}
