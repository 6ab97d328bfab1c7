"""WebSocket transport (optional extra ``websockets``): a pump around the core's links.

Every decision about a connection is the Rust core's link machine
(:mod:`stapel_runner_protocol.link`): :class:`RunnerLink` for the runner (when to
connect and reconnect, with what backoff, the connect deadline, the session over one
socket at a time, what a frame is, the bounds of the event queue and of a paused
socket's backlog, abort of a dead peer or a bounded close handshake, every error code)
and :class:`HubLink` for one runner on the hub (its session across sockets, which socket
serves it, the same bounds and close policy, durable acknowledgements); the hub's door
(the bearer-token check, eviction of idle runners) is :class:`HubHost`. This module only
pumps them: it opens, reads, writes, pauses, closes and aborts sockets when a link says
so, arms one timer at the link's deadline, reports what the sockets did, and hands the
link's events to the application as ``(kind, value)`` pairs, reporting each one taken.

Events: the session's ``("hello", hello)``, ``("received", message)`` (exactly once and
in order per stream), ``("inbound_gap", resync)``, ``("outbound_resync", resync)``,
``("peer_error", {"code", "detail"})``; the link's ``("connected", None)``,
``("disconnected", reason)`` (a code: ``peer_closed``, ``peer_timeout``, ``stopped``,
``closed``, ``replaced``, ``transport_failed``, ``backlog_full``, …),
``("reconnecting", {"delay_ms", "failures"})``, ``("error", TransportError)`` (the
link's code: ``upgrade_refused`` with ``status``, ``connect_failed``,
``connect_timeout``, ``no_token``, ``transport_failed``, ``backlog_full``; also logged at
WARNING on the ``stapel_runner_protocol.transport_ws`` logger), ``("stalled", {...})`` /
``("unstalled", None)`` (the kept log is full: hold sends) and ``("stopped", None)``.

* runner side — :class:`RunnerClient`: the reconnecting client (the core's schedule,
  resume from a snapshot, ``send`` that waits while stalled); :class:`RunnerConnection`:
  one connection at a time driven by ``connect()`` / ``close()`` (0.1.1's form
  ``RunnerConnection(url, auth_token=...)`` included).
* hub side — :class:`HubServer`: the door (HTTP 401 before the upgrade for a wrong,
  missing or repeated token) and one :class:`HubRunner` (one :class:`HubLink`) per
  runner across reconnects; :class:`HubConnection`: one accepted socket over a link the
  caller may keep across sockets.

A panic inside the core (a bug: :class:`~stapel_runner_protocol.errors.PanicError`, or
PyO3's ``PanicException``) never leaves a connection half-attached: its sockets are
aborted, its tasks end, and the application gets ``("error", exc)``; every later call
raises it.

Secrets: the bearer token is never logged. The loggers handed to ``websockets`` (which
logs handshake headers at DEBUG) redact ``Authorization`` values and anything that looks
like a bearer credential (:class:`RedactingLogger`), on both ends; no event or error
text carries the token.

``websockets`` (≥ 14, the extra ``websockets``) is imported only when a runner connects
or a hub serves; importing this module does not need it. Without it, connecting and
serving raise :class:`~stapel_runner_protocol.errors.AdapterUnavailableError`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import re
import time
import weakref
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    List,
    Mapping,
    MutableMapping,
    Optional,
    Set,
    Tuple,
    Type,
    Union,
    cast,
)

from ._native import (
    HOST_MAX_IDLE_RUNNERS,
    LINK_CONFIG_KEYS,
    SESSION_CONFIG_KEYS,
    ConnectionState,
    Hello,
    HubHost,
    HubLink,
    Ping,
    Pong,
    RunnerLink,
    SocketHost,
    TaskAssign,
    TaskCancel,
    TaskProgress,
    TaskReportMessage,
    bearer_authorization,
    bearer_token,
    decode,
    encode,
    host_adapter_error,
    link_config,
    runner_is_idle,
)
from .errors import (  # noqa: F401 (AdapterUnavailableError: 0.1.1's name here)
    AdapterUnavailableError,
    PanicError,
    ProtocolStateError,
    TransportError,
    class_for,
)

__all__ = ["RunnerClient", "RunnerConnection", "HubConnection", "HubServer", "HubRunner",
           "Event", "Authenticate", "RedactingLogger", "EVENT_QUEUE_SIZE", "CLOSE_TIMEOUT_S",
           "MAX_IDLE_RUNNERS", "SocketHost", "HubHost", "RunnerLink", "HubLink", "send",
           "recv", "iter_messages"]

#: A sequenced message a connection sends.
Sequenced = Union[TaskAssign, TaskProgress, TaskReportMessage, TaskCancel]

#: ``bearer token -> runner id`` (``None``: refuse the connection).
Authenticate = Callable[[str], Optional[str]]

#: An application event: ``(kind, value)``.
Event = Tuple[str, Any]

Clock = Callable[[], float]

_DEFAULTS: Dict[str, Any] = link_config()

#: Events a connection's application may leave untaken before its socket is paused (the
#: core's default ``max_queued_events``).
EVENT_QUEUE_SIZE: int = _DEFAULTS["max_queued_events"]

#: Seconds a close handshake with a live peer may take before the TCP connection is
#: aborted (the core's default ``close_timeout_ms``).
CLOSE_TIMEOUT_S: float = _DEFAULTS["close_timeout_ms"] / 1000

#: Disconnected, fully idle runners a :class:`HubServer` keeps (oldest dropped first;
#: the core's default).
MAX_IDLE_RUNNERS: int = HOST_MAX_IDLE_RUNNERS

_log = logging.getLogger(__name__)

_MISSING_WEBSOCKETS = (
    'websockets >= 14 is not installed; install it with: '
    'pip install "stapel-runner-protocol[websockets]"'
)


# --- secrets ---------------------------------------------------------------------------

#: Header names whose values are credentials.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s,;\"']+")
_REDACTED = "[redacted]"


def _redact_text(text: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} {_REDACTED}", text)


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger for ``websockets`` that never lets a credential through: the value of a
    logged header named ``Authorization`` (``Proxy-Authorization``, ``Cookie``,
    ``Set-Cookie``) is replaced, and so is anything that reads ``Bearer <token>`` or
    ``Basic <credentials>`` in the message or its arguments. ``websockets`` logs every
    handshake header at DEBUG (``"> %s: %s"``); this package hands it one of these on
    both ends (pass your own ``logger=`` to wrap it in one too)."""

    def __init__(self, logger: Union[logging.Logger, logging.LoggerAdapter]) -> None:  # type: ignore[type-arg]
        super().__init__(logger, {})  # type: ignore[arg-type]

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        if (len(args) == 2 and isinstance(args[0], str)
                and args[0].strip().lower() in _SECRET_HEADERS):
            args = (args[0], _REDACTED)
        args = tuple(_redact_text(a) if isinstance(a, str) else a for a in args)
        if isinstance(msg, str):
            msg = _redact_text(msg)
        self.logger.log(level, msg, *args, **kwargs)


def _redacting(logger: Any, default: str) -> RedactingLogger:
    if logger is None:
        logger = logging.getLogger(default)
    elif isinstance(logger, str):
        logger = logging.getLogger(logger)
    return logger if isinstance(logger, RedactingLogger) else RedactingLogger(logger)


# --- websockets ------------------------------------------------------------------------


def _websockets_connect() -> Callable[..., Any]:
    try:
        from websockets.asyncio.client import connect
    except ImportError as exc:
        raise host_adapter_error("adapter_unavailable", _MISSING_WEBSOCKETS) from exc
    return connect


def _websockets_serve() -> Callable[..., Any]:
    try:
        from websockets.asyncio.server import serve
    except ImportError as exc:
        raise host_adapter_error("adapter_unavailable", _MISSING_WEBSOCKETS) from exc
    return serve


def _closed_errors() -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the socket went away" (a normal end of a socket)."""
    errors: Tuple[Type[BaseException], ...] = (OSError, EOFError)
    try:
        from websockets.exceptions import ConnectionClosed
    except ImportError:
        return errors
    return errors + (ConnectionClosed,)


def _refused_status(exc: BaseException) -> Optional[int]:
    """The HTTP status of a refused upgrade (``websockets``' ``InvalidStatus``)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) and type(exc).__name__ == "InvalidStatus" else None


def _describe(exc: BaseException) -> str:
    """An exception as event detail (its type and message, any credential redacted)."""
    text = str(exc)
    return _redact_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _is_panic(exc: BaseException) -> bool:
    return isinstance(exc, PanicError) or type(exc).__name__ == "PanicException"


def _abort_socket(ws: Any) -> None:
    """Drop a socket's TCP connection at once (no close handshake)."""
    transport = getattr(ws, "transport", None)
    abort = getattr(transport, "abort", None)
    if abort is not None:
        abort()
        return
    # An injected socket without a transport: the nearest it has is a close that
    # nobody waits for.
    close = getattr(ws, "close", None)
    if close is not None:
        try:
            asyncio.ensure_future(close())
        except Exception:  # pragma: no cover - a socket whose close() is not a coroutine
            pass


class _NoToken(Exception):
    """The token source gave nothing to present."""


def _cancel(tasks: List["asyncio.Future[Any]"]) -> None:
    current = asyncio.current_task()
    for t in tasks:
        if t is not current and not t.done():
            t.cancel()


# --- the pump --------------------------------------------------------------------------


class _Socket:
    """One socket a link drives: the websocket once open, its tasks, its write queue
    and whether reading is paused."""

    def __init__(self, sid: int, ws: Any = None) -> None:
        self.id = sid
        self.ws = ws
        self.tasks: List["asyncio.Future[Any]"] = []
        self.out: Deque[str] = collections.deque()
        self.out_ready = asyncio.Event()
        self.writer: Optional["asyncio.Task[None]"] = None
        self.readable = asyncio.Event()
        self.readable.set()
        self.gone = asyncio.Event()


class _Pump:
    """Pumps one link: performs its outputs in order, runs its one timer, feeds it what
    the sockets did, and queues its events for the application, reporting the ones
    taken (``events_taken``, batched before the next input; at once while a socket is
    paused). Feeding and performing are synchronous; only socket I/O runs in tasks.
    Created inside the running loop."""

    def __init__(self, link: Union[RunnerLink, HubLink], clock: Clock,
                 opener: Optional[Callable[[], Awaitable[Any]]] = None) -> None:
        self.link = link
        self.clock = clock
        self.opener = opener
        self.loop = asyncio.get_running_loop()
        self.sockets: Dict[int, _Socket] = {}
        self.paused: Set[int] = set()
        self.events: Deque[Event] = collections.deque()
        self.nonempty = asyncio.Event()
        self.getters = 0
        self.taken = 0
        self.timer: Optional[asyncio.TimerHandle] = None
        self.timer_at: Optional[int] = None
        self.dead: Optional[BaseException] = None
        #: Set while no socket is open (after ``stopped``, before a connect).
        self.stopped = asyncio.Event()
        self.stopped.set()
        self.unstalled = asyncio.Event()
        self.unstalled.set()
        self.connected = asyncio.Event()
        #: ``connect()`` waiting for the next socket: it takes its failure (the error
        #: event is not queued) or its success.
        self.connect_waiter: Optional["asyncio.Future[None]"] = None
        #: The exception behind the error event of the input being fed.
        self.cause: Optional[BaseException] = None

    def now(self) -> int:
        return int(self.clock() * 1000)

    # feeding -------------------------------------------------------------------------

    def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Feed the link one input (or a send) on behalf of the application: its own
        refusal (``ProtocolStateError``, ``TypeError``) is raised to the caller, a panic
        tears the connection down and is raised too."""
        self.check_alive()
        try:
            self.report_taken()
            result = method(self.now(), *args, **kwargs)
        except BaseException as exc:
            if _is_panic(exc):
                self.die(exc)
            else:
                self.perform()
            raise
        self.perform()
        return result

    def feed(self, method: Optional[Callable[..., Any]], *args: Any) -> None:
        """Feed the link what a socket or the timer did (``None``: only the events taken
        since the last input). Any failure here is the binding's or the core's bug: the
        connection is torn down."""
        if self.dead is not None:
            return
        try:
            now = int(self.clock() * 1000)
            if self.taken:
                n, self.taken = self.taken, 0
                self.link.events_taken(now, n)
            if method is not None:
                method(now, *args)
            self.perform()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self.die(exc)

    def feed_failure(self, exc: BaseException, method: Callable[..., Any], *args: Any) -> None:
        """:meth:`feed` a failure: the error event it causes carries ``exc`` as its
        cause."""
        self.cause = exc
        try:
            self.feed(method, *args)
        finally:
            self.cause = None

    def report_taken(self) -> None:
        if self.taken:
            n, self.taken = self.taken, 0
            self.link.events_taken(self.now(), n)

    def check_alive(self) -> None:
        if self.dead is not None:
            raise self.dead

    # performing ----------------------------------------------------------------------

    def perform(self) -> None:
        """Perform every queued output of the link, in order, then arm the timer."""
        self.perform_outputs(self.link.drain_outputs())  # type: ignore[arg-type]

    def perform_outputs(self, outputs: List[Tuple[str, Any]]) -> None:
        """Perform ``outputs`` (drained from the link), in order, then arm the timer."""
        events = self.events
        for kind, value in outputs:
            if kind == "event":
                if value[0] == "received":  # the firehose: nothing to do but queue it
                    events.append(value)
                    self.nonempty.set()
                else:
                    self.event(value)
            elif kind == "send":
                sid, frame = value
                s = self.sockets.get(sid)
                if s is not None:
                    s.out.append(frame)
                    if s.writer is None:
                        s.writer = asyncio.ensure_future(self.write(s))
                    s.out_ready.set()
            elif kind == "pause":
                s = self.sockets.get(value)
                if s is not None:
                    s.readable.clear()
                    self.paused.add(value)
            elif kind == "resume":
                s = self.sockets.get(value)
                self.paused.discard(value)
                if s is not None:
                    s.readable.set()
            elif kind == "close":
                sid, code, reason = value
                s = self.sockets.get(sid)
                if s is not None and s.ws is not None:
                    s.tasks.append(asyncio.ensure_future(self.close_socket(s, code, reason)))
            elif kind == "abort":
                self.abort(value)
            elif kind == "connect":
                s = _Socket(value)
                self.sockets[value] = s
                self.stopped.clear()
                s.tasks.append(asyncio.ensure_future(self.open(s)))
        deadline = self.link.poll_timeout()
        if deadline != self.timer_at:
            self.arm(deadline)

    def event(self, event: Event) -> None:
        kind, value = event
        if kind == "error":
            status = value["status"]
            cls: Any = class_for("transport", value["code"])
            exc = cls(value["detail"], code=value["code"], status=status)
            cause, self.cause = self.cause, None
            if cause is not None:
                exc.__cause__ = cause
            waiter = self.connect_waiter
            if waiter is not None and not waiter.done():
                # connect() is waiting for its socket (none is attached): this is its
                # failure, and connect() raises it itself (0.1.1's behaviour).
                self.taken += 1
                waiter.set_exception(exc if cause is None or isinstance(cause, _NoToken)
                                     else cause)
                return
            _log.warning("transport_ws: %s: %s", value["code"], value["detail"],
                         exc_info=cause)
            event = ("error", exc)
        elif kind == "connected":
            self.connected.set()
            waiter = self.connect_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        elif kind == "disconnected":
            self.connected.clear()
        elif kind == "stalled":
            self.unstalled.clear()
        elif kind == "unstalled":
            self.unstalled.set()
        elif kind == "stopped":
            self.stopped.set()
        self.events.append(event)
        self.nonempty.set()

    def arm(self, deadline: Optional[int]) -> None:
        """One timer, at the link's deadline."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.timer_at = deadline
        if deadline is not None:
            self.timer = self.loop.call_later(max(0.0, deadline / 1000 - self.clock()),
                                              self.fire)

    def fire(self) -> None:
        self.timer = None
        deadline, self.timer_at = self.timer_at, None
        if deadline is not None and self.now() < deadline:
            self.arm(deadline)  # woke early (clock granularity): wait the rest
            return
        self.feed(self.link.tick)

    # sockets -------------------------------------------------------------------------

    async def open(self, s: _Socket) -> None:
        """Open socket ``s`` (the link asked for it) and report how that went."""
        assert self.opener is not None, "a hub link never asks to connect"
        try:
            ws = await self.opener()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            status = _refused_status(exc)
            failure, detail = (
                ("no_token", str(exc)) if isinstance(exc, _NoToken)
                else ("refused", f"the hub answered the upgrade with HTTP {status}")
                if status is not None else ("failed", _describe(exc)))
            self.feed_failure(exc, lambda now: self.link.connect_failed(
                now, s.id, failure, status=status, detail=detail))
            return
        if self.sockets.get(s.id) is not s:
            _abort_socket(ws)  # aborted while connecting
            return
        s.ws = ws
        self.feed(self.link.opened, s.id)
        if self.sockets.get(s.id) is s:
            s.tasks.append(asyncio.ensure_future(self.read(s)))

    def add(self, sid: int, ws: Any) -> _Socket:
        """A socket the host opened (hub): read it once attached."""
        s = _Socket(sid, ws)
        self.sockets[sid] = s
        self.stopped.clear()
        return s

    def start_reading(self, s: _Socket) -> None:
        if self.sockets.get(s.id) is s:
            s.tasks.append(asyncio.ensure_future(self.read(s)))

    async def read(self, s: _Socket) -> None:
        closed = _closed_errors()
        try:
            frames = s.ws.__aiter__()
            while True:
                if not s.readable.is_set():
                    await s.readable.wait()
                try:
                    frame = await frames.__anext__()
                except StopAsyncIteration:
                    break
                self.feed(self.link.frame, s.id, frame)
                if self.sockets.get(s.id) is not s:
                    return
        except asyncio.CancelledError:
            raise
        except closed:
            pass
        except Exception as exc:
            self.feed_failure(exc, self.link.failed, s.id, _describe(exc))
            self.gone(s)
            return
        self.feed(self.link.socket_closed, s.id)
        self.gone(s)

    async def write(self, s: _Socket) -> None:
        closed = _closed_errors()
        try:
            while True:
                while not s.out:
                    s.out_ready.clear()
                    await s.out_ready.wait()
                frame = s.out.popleft()
                await s.ws.send(frame)
        except asyncio.CancelledError:
            raise
        except closed:
            self.feed(self.link.socket_closed, s.id)
            self.gone(s)
        except Exception as exc:
            self.feed_failure(exc, self.link.failed, s.id, _describe(exc))
            self.gone(s)

    async def close_socket(self, s: _Socket, code: int, reason: str) -> None:
        """The close handshake the link asked for (its deadline is the link's: it asks
        for an abort when it passes)."""
        try:
            await s.ws.close(code, reason)
        except asyncio.CancelledError:
            raise
        except _closed_errors():
            pass
        except Exception as exc:
            self.feed(self.link.failed, s.id, _describe(exc))
            self.gone(s)
            return
        self.feed(self.link.socket_closed, s.id)
        self.gone(s)

    def gone(self, s: _Socket) -> None:
        """Socket ``s`` is finished (reported, or aborted): forget it and end its other
        tasks."""
        if self.sockets.get(s.id) is s:
            del self.sockets[s.id]
        elif s.gone.is_set():
            return
        self.paused.discard(s.id)
        if s.writer is not None:
            _cancel([s.writer])
        _cancel(s.tasks)
        s.gone.set()
        if not self.sockets and self.link.side == "hub":
            self.stopped.set()

    def abort(self, sid: int) -> None:
        s = self.sockets.get(sid)
        if s is None:
            return
        if s.ws is not None:
            _abort_socket(s.ws)
        self.gone(s)

    def die(self, exc: BaseException) -> None:
        """The link cannot be trusted any more (a panic, or a bug in this pump): abort
        every socket, end every task, tell the application."""
        if self.dead is not None:
            return
        if _is_panic(exc):
            _log.error("transport_ws: the core panicked; the connection is torn down: %s",
                       exc)
        else:
            _log.error("transport_ws: the connection failed and is torn down: %r", exc,
                       exc_info=exc)
        self.dead = exc
        for s in list(self.sockets.values()):
            if s.ws is not None:
                _abort_socket(s.ws)
            self.gone(s)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.connected.clear()
        self.stopped.set()
        self.unstalled.set()
        waiter = self.connect_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.events.append(("error", exc))
        self.nonempty.set()

    # the application's side ----------------------------------------------------------

    async def get(self) -> Event:
        """The next event (reported taken)."""
        self.getters += 1
        try:
            while not self.events:
                if self.dead is not None:
                    raise self.dead
                self.nonempty.clear()
                await self.nonempty.wait()
        finally:
            self.getters -= 1
        event = self.events.popleft()
        if self.dead is None:
            self.taken += 1
            if self.paused or not self.sockets:
                # A paused socket waits for room, and without a socket no input will
                # come soon: tell the link now.
                self.feed(None)
        return event

    async def wait_stopped(self, timeout: Optional[float] = None) -> None:
        await asyncio.wait_for(self.stopped.wait(), timeout)


#: The one pump of each link, by the link's ``id`` (handles that share a link share its
#: pump, its event queue and its sockets). A pump lives while a handle holds it, and it
#: holds its link, so an id is not reused while its entry exists.
_PUMPS: "weakref.WeakValueDictionary[int, _Pump]" = weakref.WeakValueDictionary()


def _pump_of(link: Union[RunnerLink, HubLink], clock: Clock,
             opener: Optional[Callable[[], Awaitable[Any]]] = None) -> _Pump:
    pump = _PUMPS.get(id(link))
    loop = asyncio.get_running_loop()
    if pump is None or (pump.loop is not loop and not pump.sockets):
        pump = _PUMPS[id(link)] = _Pump(link, clock, opener)
    return pump


class _PumpOwner:
    """What the runner and hub handles share: the link's pump (created in the running
    loop) and the application's event methods."""

    _pump_: Optional[_Pump] = None
    _clock: Clock = time.monotonic

    @property
    def link(self) -> Union[RunnerLink, HubLink]:
        """The link this handle pumps (read its ``stats``, ``session_stats``,
        ``outbox_frames``, … ; feed it only through this handle)."""
        raise NotImplementedError

    def _pump(self) -> _Pump:
        if self._pump_ is None or self._pump_.loop is not asyncio.get_running_loop():
            self._pump_ = self._make_pump()
        return self._pump_

    def _make_pump(self) -> _Pump:
        return _pump_of(self.link, self._clock)

    @property
    def connected(self) -> bool:
        """``True`` while a socket serves the session."""
        return self._pump_ is not None and self._pump_.dead is None and self.link.is_connected

    async def recv(self) -> Event:
        """The next application event ``(kind, value)`` (events survive reconnects:
        nothing the session delivered is dropped)."""
        return await self._pump().get()

    def _queued(self) -> int:
        return 0 if self._pump_ is None else len(self._pump_.events)

    def _getters(self) -> int:
        return 0 if self._pump_ is None else self._pump_.getters


# --- configuration ---------------------------------------------------------------------


def _config(config: Optional[Mapping[str, Any]], kwargs: MutableMapping[str, Any],
            session: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A link config: ``config`` (the core's ``LinkConfig`` keys), then the keyword
    arguments that name a link key or a session key (``ping_interval_ms``,
    ``durable_acks``, …), and ``session`` (a dict of session keys). The keys taken are
    removed from ``kwargs``."""
    out: Dict[str, Any] = dict(config or {})
    nested: Dict[str, Any] = dict(out.get("session") or {})
    for key in list(kwargs):
        if key in LINK_CONFIG_KEYS and key != "session":
            out[key] = kwargs.pop(key)
        elif key in SESSION_CONFIG_KEYS:
            nested[key] = kwargs.pop(key)
    nested.update(session or {})
    if nested:
        out["session"] = nested
    return out


def _seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


# --- runner side -----------------------------------------------------------------------


class _Runner(_PumpOwner):
    """The runner handles' common part: a :class:`RunnerLink` and how to open its
    sockets."""

    _link: Optional[RunnerLink] = None
    url: str
    _connect_kwargs: Dict[str, Any]
    _connect: Optional[Callable[..., Any]]
    _token: Union[str, Callable[[], Optional[str]], None]
    _logger: Any

    @property
    def link(self) -> RunnerLink:
        if self._link is None:
            raise TypeError("no link yet: in 0.1.1's form the connection's session starts "
                            "with the Hello the application sends")
        return self._link

    def _make_pump(self) -> _Pump:
        return _pump_of(self.link, self._clock, self._open_socket)

    async def _open_socket(self) -> Any:
        kwargs = dict(self._connect_kwargs)
        if callable(self._token):
            try:
                token = self._token()
            except Exception as exc:
                raise _NoToken(f"the token source failed: {_describe(exc)}") from None
            if not token:
                raise _NoToken("the token source gave no token")
        else:
            token = self._token
        authorization = bearer_authorization(token or "")
        if authorization is not None:
            from collections.abc import Mapping as _Mapping

            headers = kwargs.pop("additional_headers", None)
            if headers is None:
                headers = {}
            if isinstance(headers, _Mapping) and not hasattr(headers, "raw_items"):
                headers = dict(headers)
                headers["Authorization"] = authorization
            else:  # websockets' Headers or a list of pairs
                headers = list(headers.raw_items() if hasattr(headers, "raw_items")
                               else headers) + [("Authorization", authorization)]
            kwargs["additional_headers"] = headers
        if self._connect is not None:
            return await self._connect(self.url, **kwargs)
        kwargs.setdefault("open_timeout", None)  # the link's connect deadline decides
        kwargs.setdefault("ping_interval", None)  # keepalive is the session's
        kwargs["logger"] = _redacting(kwargs.get("logger"), "websockets.client")
        return await _websockets_connect()(self.url, **kwargs)

    def snapshot(self) -> bytes:
        """The session's sequencing state as bytes (``ConnectionState.snapshot()``):
        persist it (say, after each send and when stopping) and pass it as
        ``snapshot=`` to resume after a restart — kept frames are replayed, numbering
        goes on, nothing is applied twice."""
        return self.link.snapshot()

    def forget_task(self, task_id: str) -> bool:
        """Forget a finished task in the link's state (safe once
        ``link.is_fully_acknowledged(task_id)``); ``True`` when it was known."""
        return self.link.forget_task(task_id)


#: The :class:`Hello` fields a :class:`RunnerConnection` builds its hello from.
_HELLO_KEYWORDS = frozenset({"project_id", "runner_version", "capabilities",
                             "protocol_version"})


class RunnerClient(_Runner):
    """The runner's reconnecting connection to its hub::

        client = RunnerClient(url, hello=Hello(project_id=..., runner_version=...),
                              auth_token=token, snapshot=saved_or_None)
        async with client:
            await client.send(progress)          # waits while the kept log is full
            async for kind, value in client.events():
                ...
            saved = client.snapshot()            # persist it to resume after a restart

    A :class:`RunnerLink` driven by this pump: it connects at once, reconnects on the
    core's schedule (backoff with jitter from ``seed``, default ``os.urandom``) after a
    lost connection or a failed connect, resumes the session on every socket (hello
    with resume, replay), bounds the application's events and aborts a dead hub. Give
    ``snapshot=`` (bytes from :meth:`snapshot`) or ``state=`` to resume a runner's
    streams after a restart.

    ``auth_token``: the bearer token, or a callable returning it (called for every
    connect, e.g. to re-read a file; a callable that returns nothing or raises is the
    link's ``no_token``). ``config``: the core's link config keys; keyword arguments
    naming a link key (``max_queued_events``, ``backoff_initial_ms``, …) or a session
    key (``ping_interval_ms``, ``peer_timeout_ms``, …) go into it; any other goes to
    ``websockets.connect`` (as do ``connect_kwargs``). ``connect`` replaces
    ``websockets.connect``.

    Events (:meth:`events`, :meth:`recv`): see the module docs; ``("error",
    TransportError)`` for every failed connect or lost socket, followed by
    ``("reconnecting", {"delay_ms", "failures"})``. :meth:`events` ends after
    ``("stopped", None)``.
    """

    def __init__(
        self,
        url: str,
        *,
        hello: Hello,
        auth_token: Union[str, Callable[[], Optional[str]], None] = None,
        snapshot: Optional[bytes] = None,
        state: Optional[ConnectionState] = None,
        config: Optional[Mapping[str, Any]] = None,
        session: Optional[Mapping[str, Any]] = None,
        seed: Optional[int] = None,
        clock: Clock = time.monotonic,
        connect: Optional[Callable[..., Any]] = None,
        connect_kwargs: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        cfg = _config(config, kwargs, session)
        if snapshot is not None:
            if state is not None:
                raise TypeError("RunnerClient takes snapshot= or state=, not both")
            state = ConnectionState.restore(snapshot)
        self._link = RunnerLink(hello, cfg, seed=_seed() if seed is None else seed,
                                state=state)
        self.url = url
        self._token = auth_token
        self._clock = clock
        self._connect = connect
        self._connect_kwargs = dict(connect_kwargs or {})
        self._connect_kwargs.update(kwargs)

    async def start(self) -> "RunnerClient":
        """Start connecting (and keep reconnecting until :meth:`stop`)."""
        pump = self._pump()
        pump.call(self.link.start)
        return self

    async def wait_connected(self, timeout: Optional[float] = None) -> None:
        """Wait until a socket serves the session."""
        pump = self._pump()
        await asyncio.wait_for(pump.connected.wait(), timeout)
        pump.check_alive()

    async def send(self, message: Sequenced, *, timeout: Optional[float] = None) -> int:
        """Send a sequenced message (stamped with its seq, kept for replay, transmitted
        when connected); returns the seq. While the kept log is full (the link's
        ``stalled``: the hub has not acknowledged the kept frames) it waits for
        ``unstalled`` — at most ``timeout`` seconds (``None``: until then or until the
        client stops), then raises the core's ``backpressure`` error."""
        pump = self._pump()
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while True:
            try:
                seq: int = pump.call(self.link.send, message)
                return seq
            except ProtocolStateError as exc:
                if exc.code != "backpressure":
                    raise
                if pump.stopped.is_set() and self.link.phase == "idle":
                    raise
                left = None if end is None else end - loop.time()
                if left is not None and left <= 0:
                    raise
                waits = [asyncio.ensure_future(pump.unstalled.wait()),
                         asyncio.ensure_future(pump.stopped.wait())]
                try:
                    await asyncio.wait(waits, timeout=left,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                pump.check_alive()

    async def resend(self, message: Any) -> int:
        """Send a message that may have been sent before (a ``seq`` its stream already
        emitted is not sent again: the session replays it itself)."""
        seq: int = self._pump().call(self.link.resend, message)
        return seq

    async def events(self) -> AsyncIterator[Event]:
        """Every event, across reconnects, until ``("stopped", None)`` (included)."""
        while True:
            event = await self.recv()
            yield event
            if event[0] == "stopped":
                return

    async def stop(self, code: int = 1000, reason: str = "",
                   timeout: Optional[float] = None) -> None:
        """Close the socket and stop reconnecting; returns once every socket is gone
        (the close handshake is bounded by the link)."""
        pump = self._pump()
        if pump.dead is not None:
            return
        pump.call(self.link.stop, code, reason)
        await pump.wait_stopped(timeout)

    async def __aenter__(self) -> "RunnerClient":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class RunnerConnection(_Runner):
    """The runner's outbound connection to the hub, one socket per :meth:`connect`::

        async with RunnerConnection(url, hello=Hello(project_id=..., runner_version=...),
                                    auth_token=token) as conn:
            await conn.send(progress)
            async for kind, value in conn.events():
                ...

    A :class:`RunnerLink` without reconnects (``reconnect: false``): :meth:`connect`
    opens a socket (closing the current one first) and the session resumes on it (hello
    with resume, replay); a lost socket stays lost until the next :meth:`connect`
    (:class:`RunnerClient` reconnects by itself). ``link=`` a :class:`RunnerLink` of
    your own (its config as you built it), else ``state=`` to resume. Keyword arguments
    naming a link or session key (``ping_interval_ms``, ``validate``, …) configure the
    link, ``Hello``'s fields (``project_id``, ``runner_version``, ``capabilities``,
    ``protocol_version``) build the hello when ``hello`` is not given, and any other
    goes to ``websockets.connect`` (as do ``connect_kwargs``, e.g.
    ``additional_headers``). ``connect`` replaces ``websockets.connect``.
    ``max_queued_events`` bounds the events the application may leave untaken
    (:data:`EVENT_QUEUE_SIZE`) before the socket is paused.

    **stapel-runner-protocol 0.1.1's form** — ``RunnerConnection(url, auth_token=...)``
    without ``hello`` — works as 0.1.1 code expects: :meth:`connect` opens the socket,
    the link is created from the first :class:`Hello` the application sends (``await
    conn.send(hello)``; the session sends it, with ``resume``, and does so by itself on
    every later connect), ``recv()`` returns the next received message and ``async for
    message in conn`` yields them until the socket is gone. Received frames are
    validated only with ``validate=True`` (0.1.1's default is ``False``). Keepalive is
    the session's: it pings and answers the hub's pings itself, so a ``Ping`` never
    reaches the application, :meth:`answer_ping` has nothing to do and ``send`` of a
    ``Ping`` or ``Pong`` sends nothing. A failed :meth:`connect` raises what
    ``websockets`` raised (0.1.1 code catches ``InvalidStatus``, ``OSError``). In the
    other form, ``recv()`` returns ``(kind, value)`` events.
    """

    def __init__(
        self,
        url: str,
        *,
        hello: Optional[Hello] = None,
        auth_token: Optional[str] = None,
        link: Optional[RunnerLink] = None,
        state: Optional[ConnectionState] = None,
        connect: Optional[Callable[..., Any]] = None,
        clock: Clock = time.monotonic,
        connect_kwargs: Optional[dict] = None,  # type: ignore[type-arg]
        config: Optional[Mapping[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        hello_fields = {k: kwargs.pop(k) for k in list(kwargs) if k in _HELLO_KEYWORDS}
        #: 0.1.1's form: messages (not events) from recv() and iteration.
        self._messages_only = hello is None and link is None and not hello_fields
        if hello_fields:
            if hello is not None or link is not None:
                raise TypeError(
                    f"RunnerConnection takes hello fields ({', '.join(sorted(hello_fields))}) "
                    "only without hello= or link="
                )
            hello = Hello(**hello_fields)
        cfg = _config(config, kwargs)
        if link is not None and (len(cfg) > 0 or state is not None):
            raise TypeError(f"RunnerConnection got link configuration ({', '.join(sorted(cfg))})"
                            " or state= next to link=")
        cfg["reconnect"] = False
        if self._messages_only:
            cfg.setdefault("session", {}).setdefault("validate", False)
        self._cfg = cfg
        self._state = state
        if link is None and hello is not None:
            link = RunnerLink(hello, cfg, seed=_seed(), state=state)
        self._link = link
        self.url = url
        self._token = auth_token
        self._connect = connect
        self._clock = clock
        self._connect_kwargs = dict(connect_kwargs or {})
        self._connect_kwargs.update(kwargs)
        self._connecting: Optional[asyncio.Lock] = None
        #: A socket opened before the link exists (0.1.1's form, before its Hello).
        self._waiting_socket: Any = None

    async def _open_socket(self) -> Any:
        socket, self._waiting_socket = self._waiting_socket, None
        if socket is not None:
            return socket
        return await super()._open_socket()

    async def connect(self) -> "RunnerConnection":
        """Open a socket (closing the current one first); the session sends its hello
        (with resume) and replays. Concurrent calls run one after the other: the last
        one's socket stays. In 0.1.1's form, before the first ``Hello`` is sent, the
        socket waits for it. A failed connect raises what ``websockets`` raised."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._link is None:
                socket, self._waiting_socket = self._waiting_socket, None
                if socket is not None:
                    _abort_socket(socket)
                self._waiting_socket = await super()._open_socket()
                return self
            await self._start()
        return self

    async def _start(self) -> None:
        pump = self._pump()
        pump.check_alive()
        if self.link.phase != "idle":
            pump.call(self.link.stop)
        waiter: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        pump.connect_waiter = waiter
        try:
            pump.call(self.link.start)
            await waiter
        finally:
            if pump.connect_waiter is waiter:
                pump.connect_waiter = None

    async def send(self, message: Any) -> None:
        """Send a sequenced message (stamped with its seq, kept for replay). While
        disconnected it is kept and sent after the next connect; a full kept log raises
        the core's ``backpressure`` (after a ``("stalled", …)`` event). A ``Hello``
        creates the link in 0.1.1's form (and is sent as its hello); once the link
        exists, a ``Hello``, ``Ping`` or ``Pong`` sends nothing (the session sends its
        own).

        In 0.1.1's form the application numbers its frames (its own
        :class:`ConnectionState`) and may send one again, say from a checkpoint after a
        reconnect: a message whose ``seq`` the session already sent on its stream is not
        sent again (the session keeps it until the hub acknowledges it and replays it
        after a reconnect, so the hub gets it exactly once — the core's ``resend``); any
        other is numbered by the session. A ``dict`` is sent as the message it describes
        (built with ``decode``'s tolerant rules)."""
        if isinstance(message, dict) and self._messages_only:
            message = decode(message)
        if isinstance(message, Hello):
            if self._link is None:
                state = self._state
                if state is None and message.resume:
                    # 0.1.1's form: the application keeps its own ConnectionState and its
                    # Hello says how far it has each task's commands; the session starts
                    # from there, so its hellos (on every reconnect) carry that resume and
                    # the hub replays only what lies above it.
                    state = ConnectionState("runner")
                    for task_id, seq in message.resume.items():
                        state.skip_to(task_id, None, seq + 1)
                self._link = RunnerLink(message, self._cfg, seed=_seed(), state=state)
                if self._waiting_socket is not None:
                    await self._start()
            return
        if isinstance(message, (Ping, Pong)):
            return
        if self._link is None:
            raise TypeError("send a Hello first: in 0.1.1's form the connection's session "
                            "starts with the Hello the application sends")
        pump = self._pump()
        if self._messages_only:
            pump.call(self.link.resend, message)
        else:
            pump.call(self.link.send, message)

    async def recv(self) -> Any:
        """The next application event ``(kind, value)`` (events survive reconnects:
        nothing the session delivered is dropped). In 0.1.1's form: the next received
        message; a transport failure is raised, and the end of the socket raises
        ``websockets.exceptions.ConnectionClosedOK``."""
        if not self._messages_only:
            return await super().recv()
        while True:
            kind, value = await super().recv()
            if kind == "received":
                return value
            if kind == "error" and isinstance(value, BaseException):
                raise value
            if kind == "disconnected" and not self._connecting_or_connected():
                raise _connection_closed()

    def _connecting_or_connected(self) -> bool:
        return self._link is not None and self.link.phase in ("connecting", "open")

    async def events(self) -> AsyncIterator[Event]:
        """Every application event until the socket is gone: ``("disconnected",
        reason)`` is the last one, unless a newer socket is already being opened or
        attached when it is taken (say, ``connect()`` on an open connection) — then the
        events go on."""
        while True:
            event = await _PumpOwner.recv(self)
            yield event
            if event[0] == "disconnected" and not self._connecting_or_connected():
                return

    def __aiter__(self) -> AsyncIterator[Any]:
        """The received messages, in order, until the socket is gone (0.1.1's
        ``async for message in conn``; in either form)."""
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        async for kind, value in self.events():
            if kind == "received":
                yield value
            elif kind == "error" and isinstance(value, BaseException):
                raise value

    async def answer_ping(self, ping: Ping) -> None:
        """Nothing to do: the session answers every ping itself (0.1.1's method, kept so
        its code runs)."""

    async def close(self) -> None:
        """Close the socket (the session state is kept): a close handshake bounded by
        the link while the connection is alive, an abort of a dead one. Idempotent."""
        socket, self._waiting_socket = self._waiting_socket, None
        if socket is not None:
            _abort_socket(socket)
        if self._link is None or self._pump_ is None or self._pump_.dead is not None:
            return
        pump = self._pump_
        if self.link.phase != "idle" or pump.sockets:
            pump.call(self.link.stop)
            await pump.wait_stopped()

    async def __aenter__(self) -> "RunnerConnection":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _connection_closed() -> BaseException:
    """``websockets.exceptions.ConnectionClosedOK`` (0.1.1's ``recv`` on a closed socket
    raised it), or ``ConnectionError`` without websockets."""
    try:
        from websockets.exceptions import ConnectionClosedOK
    except ImportError:
        return ConnectionError("the connection is closed")
    return ConnectionClosedOK(None, None)


async def send(websocket: Any, message: Any) -> None:
    """Encode ``message`` (a message or a dict) and send it over ``websocket`` as one text
    frame (0.1.1's helper; no session: nothing is sequenced or kept)."""
    await websocket.send(encode(message))


async def recv(websocket: Any, *, validate: bool = False) -> Any:
    """Receive one frame from ``websocket`` and decode it (0.1.1's helper)."""
    return decode(await websocket.recv(), validate=validate)


async def iter_messages(websocket: Any, *, validate: bool = False) -> AsyncIterator[Any]:
    """Decode every frame of ``websocket`` until it closes (0.1.1's helper for a hub-side
    socket; :class:`HubServer` is the link-driven hub)."""
    async for frame in websocket:
        yield decode(frame, validate=validate)


# --- hub side --------------------------------------------------------------------------

#: Socket ids of the sockets :class:`HubConnection` attaches (unique per process, so a
#: link kept across sockets never sees an id twice).
_hub_socket_ids = itertools.count(1)


class _Hub(_PumpOwner):
    """The hub handles' common part: a :class:`HubLink` and its sockets."""

    _link: HubLink

    @property
    def link(self) -> HubLink:
        return self._link

    async def send(self, message: Sequenced) -> int:
        """Send a command (stamped with its seq, kept for replay); kept while the runner
        is away and replayed after its next hello. Returns the seq. A full kept log
        raises the core's ``backpressure`` (after a ``("stalled", …)`` event)."""
        seq: int = self._pump().call(self.link.send, message)
        return seq

    def confirm(self, task_id: str, attempt: Optional[int], seq: int) -> None:
        """Durable acknowledgements (``durable_acks=True``): the store committed the
        runner's stream ``(task_id, attempt)`` through ``seq``; nothing above it is
        acknowledged to the runner before this. Refused with ``ProtocolStateError``
        ``not_durable`` or ``confirm_ahead``."""
        self._pump().call(self.link.confirm, task_id, attempt, seq)

    def _attach(self, socket: Any, sid: int) -> _Socket:
        """Attach ``socket`` as socket ``sid`` (a newer socket replaces an older one: the
        link closes it) and start reading it."""
        pump = self._pump()
        pump.check_alive()
        s = pump.add(sid, socket)
        try:
            pump.call(self.link.attach, sid)
        except BaseException:
            if pump.sockets.get(sid) is s:
                _abort_socket(socket)
                pump.gone(s)
            raise
        pump.start_reading(s)
        return s

    async def _serve(self, socket: Any, sid: int) -> None:
        """:meth:`_attach`, then pump the socket until it is gone."""
        pump = self._pump()
        s = self._attach(socket, sid)
        try:
            await s.gone.wait()
        except asyncio.CancelledError:
            # The handler is cancelled (say, the server shuts down): the socket is gone.
            if pump.sockets.get(sid) is s:
                pump.feed(self.link.socket_closed, sid)
                pump.gone(s)
            raise

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the runner's socket (the link's state is kept; the runner may connect
        again)."""
        pump = self._pump()
        if pump.dead is not None or not pump.sockets:
            return
        pump.call(self.link.close, code, reason)
        await pump.wait_stopped()


class HubConnection(_Hub):
    """The hub's side of one accepted runner socket::

        async def handler(websocket):
            hub = HubConnection(websocket)
            await hub.start()
            async for kind, value in hub.events():
                ...

    ``link`` defaults to a new :class:`HubLink` (``config``, and keyword arguments naming
    a link or session key, configure it); pass one to keep a runner's session across its
    sockets (or build it over a persisted ``ConnectionState`` to resume its streams).
    """

    def __init__(
        self,
        socket: Any,
        *,
        link: Optional[HubLink] = None,
        clock: Clock = time.monotonic,
        config: Optional[Mapping[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        cfg = _config(config, kwargs)
        if kwargs:
            raise TypeError(f"HubConnection got unexpected keywords: {', '.join(sorted(kwargs))}")
        if link is not None and cfg:
            raise TypeError("HubConnection takes a link or its configuration, not both")
        self._link = link if link is not None else HubLink(cfg)
        self._socket = socket
        self._clock = clock
        self._attached: Optional[_Socket] = None

    async def start(self) -> "HubConnection":
        """Attach the socket to the link and start pumping it."""
        if self._attached is None:
            self._attached = self._attach(self._socket, next(_hub_socket_ids))
        return self

    async def events(self) -> AsyncIterator[Event]:
        """Every event until the socket is gone (``("disconnected", reason)`` last)."""
        while True:
            event = await self.recv()
            yield event
            if event[0] == "disconnected" and not self.connected:
                return

    async def wait_closed(self) -> None:
        """Wait until the socket is gone."""
        if self._attached is not None:
            await self._attached.gone.wait()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close this socket (bounded by the link; the link's state and its queued
        events are kept for the next socket over it). Idempotent."""
        s = self._attached
        if s is None or s.gone.is_set() or self._pump_ is None or self._pump_.dead is not None:
            return
        if self.link.socket == s.id:
            self._pump_.call(self.link.close, code, reason)
        await s.gone.wait()

    async def __aenter__(self) -> "HubConnection":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class HubRunner(_Hub):
    """One runner as the hub sees it, across all its connections: one :class:`HubLink`
    (the session's sequencing state, replay, duplicate suppression) and one event
    queue. :meth:`send` works whether or not the runner is connected (commands are kept
    and replayed); :meth:`recv` / :meth:`events` deliver the link's events —
    ``("connected", None)`` and ``("hello", hello)`` after each (re)connect,
    ``("received", message)`` exactly once and in order per stream,
    ``("disconnected", reason)`` when a socket goes away."""

    def __init__(self, runner_id: str, link: HubLink, clock: Clock) -> None:
        self.runner_id = runner_id
        self._link = link
        self._clock = clock
        self._announced = False  # in the arrivals queue, not yet taken by accept()
        self._server: Optional["weakref.ReferenceType[HubServer]"] = None

    async def events(self) -> AsyncIterator[Event]:
        """Every event of this runner, across reconnects (it never ends by itself)."""
        while True:
            yield await self.recv()

    @property
    def idle(self) -> bool:
        """``True`` when nothing depends on this handle: no socket, no frame kept for
        replay, no event queued, nobody waiting for one, not waiting in
        :meth:`HubServer.accept` (the core's rule)."""
        return runner_is_idle(self._activity())

    def _activity(self) -> Tuple[str, int, int, int, int, bool]:
        """What this handle is doing, for the core's eviction decision."""
        return (self.runner_id, self.link.sockets, self.link.outbox_frames, self._queued(),
                self._getters(), self._announced)


def _header_pairs(headers: Any) -> List[Tuple[str, str]]:
    """The request's headers as name/value pairs in arrival order, repeats included."""
    raw_items = getattr(headers, "raw_items", None)
    items = raw_items() if raw_items is not None else headers.items()
    return [(str(name), str(value)) for name, value in items]


class HubServer:
    """The hub's WebSocket server for runners::

        server = HubServer(tokens={"token-for-A": "runner-A"})
        async with server.serve("0.0.0.0", 8765):
            runner = server.runner("runner-A")      # usable before it connects
            await runner.send(TaskAssign(...))
            async for kind, value in runner.events():
                ...

    The runner's ``Authorization: Bearer <token>`` header is checked before the
    WebSocket opens (``tokens`` maps accepted tokens to runner ids, compared in
    constant time; or pass ``authenticate(token) -> runner id | None``); anything else
    — including a repeated ``Authorization`` header — is refused with HTTP 401 (the
    core's :class:`HubHost`). Each runner id has one :class:`HubRunner` with one
    :class:`HubLink`, so a reconnect resumes the runner's streams.
    ``link_factory(runner_id)`` builds the links (e.g. over a persisted state);
    otherwise ``config`` (the core's link keys) and keyword arguments naming a link or
    session key configure them — ``durable_acks=True`` holds acknowledgements until
    :meth:`HubRunner.confirm` (a hub whose store must commit first; the default
    acknowledges automatically).

    Memory: runners that are connected, have frames kept for replay, queued events, a
    waiting reader, or wait to be taken by :meth:`accept` are always kept. Beyond
    ``max_idle_runners`` (:data:`MAX_IDLE_RUNNERS`) disconnected, fully idle runners
    (:attr:`HubRunner.idle`), the oldest are dropped; such a runner that connects again
    gets a new :class:`HubRunner` and link (announced by :meth:`accept` again; build
    links over persisted state with ``link_factory`` to keep its positions). A runner
    whose link panicked is dropped the same way. ``max_queued_events`` bounds each
    runner's untaken events (:data:`EVENT_QUEUE_SIZE`) before its socket is paused.
    """

    def __init__(
        self,
        *,
        tokens: Optional[Mapping[str, str]] = None,
        authenticate: Optional[Authenticate] = None,
        link_factory: Optional[Callable[[str], HubLink]] = None,
        clock: Clock = time.monotonic,
        max_idle_runners: int = MAX_IDLE_RUNNERS,
        config: Optional[Mapping[str, Any]] = None,
        session: Optional[Mapping[str, Any]] = None,
        logger: Any = None,
        **kwargs: Any,
    ) -> None:
        if (tokens is None) == (authenticate is None):
            raise TypeError("HubServer needs exactly one of tokens= and authenticate=")
        cfg = _config(config, kwargs, session)
        if kwargs:
            raise TypeError(f"HubServer got unexpected keywords: {', '.join(sorted(kwargs))}")
        link_config(cfg)  # refuse a bad config now (ConfigError), not at the first runner
        host: Dict[str, Any] = {"max_idle_runners": max_idle_runners}
        if tokens is not None:
            host["tokens"] = dict(tokens)  # compared in constant time by the core
        self._host = HubHost(host)
        self._authenticate = authenticate
        self._link_factory = link_factory or (lambda _id: HubLink(cfg))
        self._clock = clock
        self._logger = _redacting(logger, "websockets.server")
        self._runners: Dict[str, HubRunner] = {}
        self._arrivals: "Optional[asyncio.Queue[HubRunner]]" = None
        # the host machine's connection ids (process_request and the handler of one
        # connection get the same connection object)
        self._conn_ids: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self._next_conn = 0

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _conn_id(self, connection: Any) -> int:
        conn = self._conn_ids.get(connection)
        if conn is None:
            self._next_conn += 1
            conn = self._conn_ids[connection] = self._next_conn
        return conn

    def _decide(self) -> List[Tuple[str, Any]]:
        """The host machine's outputs, its questions to ``authenticate`` answered (a
        raising authenticator refuses the connection and the exception propagates)."""
        outputs: List[Tuple[str, Any]] = []
        while (output := self._host.poll_output()) is not None:
            kind, value = cast(Tuple[str, Any], output)
            if kind != "authenticate":
                outputs.append(output)
                continue
            conn, token = value
            assert self._authenticate is not None
            try:
                runner_id = self._authenticate(token)
            except BaseException:
                self._host.authenticated(self._now(), conn, None)
                self._host.drain_outputs()
                raise
            self._host.authenticated(self._now(), conn, runner_id)
        return outputs

    @property
    def runners(self) -> Dict[str, HubRunner]:
        """Every runner kept, by id (a copy; see the class docs for which are kept)."""
        return dict(self._runners)

    def runner(self, runner_id: str) -> HubRunner:
        """The runner's handle (created on first use; kept while it is connected or
        not idle, see the class docs)."""
        runner = self._runners.get(runner_id)
        if runner is not None and runner._pump_ is not None and runner._pump_.dead is not None:
            del self._runners[runner_id]
            runner = None
        if runner is None:
            runner = HubRunner(runner_id, self._link_factory(runner_id), self._clock)
            self._runners[runner_id] = runner
            self._host.runner_added(self._now(), runner_id,
                                    [r._activity() for r in self._runners.values()])
            for kind, value in self._decide():
                if kind == "evict":
                    self._runners.pop(value, None)
        return runner

    async def accept(self) -> HubRunner:
        """The next runner that connects for the first time (or again after it was
        dropped as idle)."""
        runner = await self._arrivals_queue().get()
        runner._announced = False
        return runner

    def _arrivals_queue(self) -> "asyncio.Queue[HubRunner]":
        if self._arrivals is None:
            self._arrivals = asyncio.Queue()
        return self._arrivals

    def runner_id_for(self, authorization: Optional[str]) -> Optional[str]:
        """The runner id an ``Authorization`` header value authenticates, else ``None``."""
        if not authorization:
            return None
        if self._host.has_token_table:
            return self._host.runner_id_for(authorization)
        token = bearer_token(authorization)
        if token is None or self._authenticate is None:
            return None
        return self._authenticate(token)

    def serve(self, host: Optional[str] = None, port: Optional[int] = None,
              **serve_kwargs: Any) -> Any:
        """``websockets.asyncio.server.serve`` with this server's handler, token check
        and redacting logger: an async context manager (and awaitable) yielding the
        ``Server``."""
        serve = _websockets_serve()
        from http import HTTPStatus

        def process_request(connection: Any, request: Any) -> Any:
            self._host.request(self._now(), self._conn_id(connection),
                               _header_pairs(request.headers))
            for kind, value in self._decide():
                if kind == "reject":
                    _conn, status, body, refusal = value
                    _log.debug("transport_ws: upgrade refused (%s)", refusal)
                    return connection.respond(HTTPStatus(status), body)
            return None

        serve_kwargs.setdefault("ping_interval", None)  # keepalive is the session's
        serve_kwargs["logger"] = _redacting(serve_kwargs.get("logger", self._logger),
                                            "websockets.server")
        return serve(self.handler, host, port, process_request=process_request,
                     **serve_kwargs)

    async def handler(self, socket: Any) -> None:
        """The connection handler (for a server you start yourself: it checks the token
        and closes the socket with code 1008 when it is not valid; behind
        :meth:`serve` the check already happened)."""
        conn = self._conn_id(socket)
        self._host.upgraded(self._now(), conn, _header_pairs(socket.request.headers))
        for kind, value in self._decide():
            if kind == "refuse":
                _conn, code, reason, refusal = value
                _log.debug("transport_ws: socket refused (%s)", refusal)
                await _refuse(socket, code, reason, self._clock)
                return
            if kind == "attach":
                _conn, runner_id, announce = value
                runner = self.runner(runner_id)
                if announce:
                    runner._announced = True
                    self._arrivals_queue().put_nowait(runner)
                await runner._serve(socket, conn)
                return


async def _refuse(socket: Any, code: int, reason: str, clock: Clock) -> None:
    """Close a socket the hub refused (an upgraded socket whose token is not valid) as
    its own :class:`SocketHost` decides: a close handshake until the machine's
    deadline, then an abort."""
    host = SocketHost()
    host.close(int(clock() * 1000), code, reason)
    while (output := host.poll_output()) is not None:
        kind, value = cast(Tuple[str, Any], output)
        if kind == "close":
            code, reason, deadline_ms = value
            try:
                await asyncio.wait_for(socket.close(code, reason),
                                       max(0.0, deadline_ms / 1000 - clock()))
            except asyncio.TimeoutError:
                host.timeout(max(int(clock() * 1000), deadline_ms))
                continue
            except _closed_errors():
                pass
            except Exception:
                host.failed(int(clock() * 1000))
                continue
            host.socket_closed(int(clock() * 1000))
        elif kind == "abort":
            _abort_socket(socket)
