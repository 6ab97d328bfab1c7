"""WebSocket transport (optional extra ``websockets``) driven by the session machines.

Everything the protocol decides — hello with resume, replay, duplicate suppression,
in-order delivery, acknowledgements, keepalive pings and the dead-peer timeout — is the
Rust core's :class:`~stapel_runner_protocol.session.RunnerSession` /
:class:`~stapel_runner_protocol.session.HubSession`. This module only moves their
frames over a WebSocket, feeds them the clock, and hands their events to the
application as ``(kind, value)`` pairs (``("received", message)``, ``("hello",
hello)``, ``("inbound_gap", resync)``, ``("outbound_resync", resync)``, ``("peer_error",
{"code", "detail"})``, ``("error", exception)`` when this transport itself failed — it
is also logged at WARNING on the ``stapel_runner_protocol.transport_ws`` logger — and
``("disconnected", None)`` when the socket is gone).

* runner side — :class:`RunnerConnection`: the outbound connection (the container has no
  inbound ports), authorised with a bearer token. Reconnecting with the same connection
  object keeps the session's sequencing state: the hello declares the resume positions
  and both sides replay what the other missed.
* hub side — :class:`HubServer`: accepts runner sockets, checks the bearer token
  (a wrong, missing or repeated one is refused with HTTP 401 before the WebSocket
  opens), and keeps one :class:`HubSession` per runner across reconnects
  (:class:`HubRunner`), so a reconnecting runner resumes: both sides replay what the
  other missed, nothing is delivered twice. :class:`HubConnection` is the lower-level
  piece (one accepted socket, a session the caller supplies).

Each connection object keeps one event queue for its whole life, so events the
session produced before a reconnect are never dropped. Frames of one connection are
written in the order the session produced them. Text frames carry the protocol; a
binary frame is decoded strictly as UTF-8 (one that is not is dropped with a
``("peer_error", {"code": "invalid_utf8", ...})`` event).

Every decision about the sockets — the token check and its order, HTTP 401 or close
code 1008, abort or bounded close handshake, binary frames, which idle runner is
evicted, when a runner is announced — is the Rust core's connection host policy
(:class:`SocketHost` per socket, :class:`HubHost` for the server, ``core/src/host/``);
this module performs their outputs (reads, writes, closes, aborts, queues events) and
nothing else.

Bounds and timing:

* the event queue holds :data:`EVENT_QUEUE_SIZE` events (``max_queued_events=``): when
  it is full the reader stops reading frames until the application takes events
  (backpressure down to TCP; nothing is dropped — frames not yet read are not
  acknowledged, so a reconnect replays them). An application that stops reading
  events for longer than the peer's dead-peer timeout loses the connection (and then
  resumes);
* closing a connection that is still alive performs the WebSocket close handshake for
  at most :data:`CLOSE_TIMEOUT_S` seconds, then aborts the TCP connection; a
  connection the session declared dead (``peer_timeout``) or that failed is aborted
  at once — a reconnect never waits for a dead peer;
* :class:`HubServer` keeps every runner that is connected or has state in flight; of
  the disconnected, fully idle ones it keeps at most :data:`MAX_IDLE_RUNNERS`
  (``max_idle_runners=``), dropping the oldest first.

``websockets`` (≥ 14, the extra ``websockets``) is imported only when a runner connects
or a hub serves; importing this module does not need it. Without it,
:meth:`RunnerConnection.connect` and :meth:`HubServer.serve` raise
:class:`~stapel_runner_protocol.errors.AdapterUnavailableError`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import weakref
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
)

from ._native import (
    host_adapter_error,
    HOST_CLOSE_TIMEOUT_MS,
    HOST_MAX_IDLE_RUNNERS,
    HOST_MAX_QUEUED_EVENTS,
    HOST_REPLACED_REASON,
    Hello,
    HubHost,
    Ping,
    Pong,
    SocketHost,
    TaskAssign,
    TaskCancel,
    TaskProgress,
    TaskReportMessage,
    bearer_authorization,
    bearer_token,
    decode,
    encode,
    runner_is_idle,
)
from .errors import AdapterUnavailableError, ProtocolStateError
from .session import HubSession, RunnerSession, SessionMachine

__all__ = ["RunnerConnection", "HubConnection", "HubServer", "HubRunner", "Event",
           "Authenticate", "EVENT_QUEUE_SIZE", "CLOSE_TIMEOUT_S", "MAX_IDLE_RUNNERS",
           "SocketHost", "HubHost", "send", "recv", "iter_messages"]

#: A sequenced message a connection sends.
Sequenced = Union[TaskAssign, TaskProgress, TaskReportMessage, TaskCancel]

#: ``bearer token -> runner id`` (``None``: refuse the connection).
Authenticate = Callable[[str], Optional[str]]

#: An application event: ``(kind, value)``.
Event = Tuple[str, Any]

Clock = Callable[[], float]

#: Events a connection queues for the application before its reader waits (the core's
#: default).
EVENT_QUEUE_SIZE: int = HOST_MAX_QUEUED_EVENTS

#: Seconds a close handshake with a live peer may take before the TCP connection is
#: aborted (the core's default).
CLOSE_TIMEOUT_S: float = HOST_CLOSE_TIMEOUT_MS / 1000

#: Disconnected, fully idle runners a :class:`HubServer` keeps (oldest dropped first;
#: the core's default).
MAX_IDLE_RUNNERS: int = HOST_MAX_IDLE_RUNNERS

_log = logging.getLogger(__name__)

_MISSING_WEBSOCKETS = (
    'websockets >= 14 is not installed; install it with: '
    'pip install "stapel-runner-protocol[websockets]"'
)


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


def _socket_closed_errors() -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the socket went away" (a normal disconnect)."""
    errors: Tuple[Type[BaseException], ...] = (OSError, EOFError)
    try:
        from websockets.exceptions import ConnectionClosed
    except ImportError:
        return errors
    return errors + (ConnectionClosed,)


def _next_output(machine: Union[SocketHost, HubHost]) -> Optional[Tuple[str, Any]]:
    """The machine's next ``(kind, value)`` output, ``None`` when drained."""
    output: Optional[Tuple[str, Any]] = machine.poll_output()
    return output


def _now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


async def _abort(socket: Any) -> None:
    """Drop the socket's TCP connection at once (no close handshake). A socket without a
    transport to abort (an injected one) gets a close bounded by :data:`CLOSE_TIMEOUT_S`
    instead, the nearest it has."""
    transport = getattr(socket, "transport", None)
    abort = getattr(transport, "abort", None)
    if abort is not None:
        abort()
        return
    try:
        await asyncio.wait_for(socket.close(), CLOSE_TIMEOUT_S)
    except Exception:
        pass


async def _handshake(socket: Any, host: SocketHost, clock: Clock, code: int, reason: str,
                     deadline_ms: int, failed: Callable[[str, BaseException], None]) -> None:
    """Run the close handshake the host machine asked for until its deadline and report
    how it ended (the machine then asks for an abort, or nothing)."""
    try:
        await asyncio.wait_for(socket.close(code, reason),
                               max(0.0, deadline_ms / 1000 - clock()))
    except asyncio.TimeoutError:
        host.timeout(max(_now_ms(clock), deadline_ms))
        return
    except _socket_closed_errors():
        pass
    except Exception as exc:
        failed("close handshake", exc)
        host.failed(_now_ms(clock))
        return
    host.socket_closed(_now_ms(clock))


async def _refuse(socket: Any, code: int, reason: str, clock: Clock) -> None:
    """Close a socket the hub refused, as its own :class:`SocketHost` decides."""
    host = SocketHost()
    host.close(_now_ms(clock), code, reason)

    def failed(where: str, exc: BaseException) -> None:
        _log.warning("transport_ws: the %s failed: %r", where, exc, exc_info=exc)

    while (output := _next_output(host)) is not None:
        kind, value = output
        if kind == "close":
            code, reason, deadline_ms = value
            await _handshake(socket, host, clock, code, reason, deadline_ms, failed)
        elif kind == "abort":
            await _abort(socket)


def _queue_bound(maxsize: int) -> int:
    """``maxsize`` if the core accepts it as an event queue bound, else ``ValueError``."""
    try:
        SocketHost({"max_queued_events": maxsize})
    except (ProtocolStateError, OverflowError, TypeError) as exc:
        raise ValueError(f"max_queued_events must be at least 1 ({exc})") from None
    return maxsize


class _EventQueue:
    """The application's FIFO of events. Events the peer's frames produce are bounded:
    the reader waits for space (:meth:`wait_for_space`) before it reads the next frame.
    Events of local origin (a send, a timer, the disconnect) are queued at once
    (:meth:`put_nowait`), so a task that both sends and receives never waits on its own
    queue; there are few of those. Created inside the running loop."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = _queue_bound(maxsize)
        self._items: Deque[Event] = collections.deque()
        self._nonempty = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self.getters = 0

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, event: Event) -> None:
        self._items.append(event)
        self._nonempty.set()
        if len(self._items) >= self.maxsize:
            self._space.clear()

    async def wait_for_space(self) -> None:
        while len(self._items) >= self.maxsize:
            self._space.clear()
            await self._space.wait()

    async def get(self) -> Event:
        self.getters += 1
        try:
            while not self._items:
                self._nonempty.clear()
                await self._nonempty.wait()
        finally:
            self.getters -= 1
        event = self._items.popleft()
        if not self._items:
            self._nonempty.clear()
        if len(self._items) < self.maxsize:
            self._space.set()
        return event


class _Driver:
    """Runs one session machine over one socket, as the socket's :class:`SocketHost`
    decides: a reader task, a timer task for the session's deadlines, and the machine's
    outputs performed after every input. The outputs that need no waiting (attach,
    deliver, peer error, detach) are performed at once; the rest (send, close, abort)
    go through :attr:`io` in order, so a task cancelled while writing leaves them for
    the next one. Once detached it never touches the session again (a newer driver may
    own it)."""

    def __init__(
        self,
        session: SessionMachine,
        socket: Any,
        clock: Clock,
        events: _EventQueue,
    ) -> None:
        self.session = session
        self.socket = socket
        self.clock = clock
        self.events = events
        self.host = SocketHost()
        self.io: Deque[Tuple[str, Any]] = collections.deque()
        self.deadline: Optional[int] = None
        self.wake = asyncio.Event()
        self.gone = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.tasks: List["asyncio.Task[None]"] = []

    @property
    def open(self) -> bool:
        """``True`` while the socket is open and the session attached."""
        return self.host.is_open

    def now(self) -> int:
        return _now_ms(self.clock)

    async def start(self) -> None:
        self.host.opened(self.now())
        await self.flush()
        self.tasks = [asyncio.ensure_future(self.read()), asyncio.ensure_future(self.timer())]

    def failed(self, where: str, exc: BaseException) -> None:
        """Surface a failure of this transport: log it and queue ``("error", exc)``."""
        _log.warning("transport_ws: the %s failed: %r", where, exc, exc_info=exc)
        self.events.put_nowait(("error", exc))

    def relay(self) -> None:
        """Hand the session's outputs on: frames and close requests to the socket's
        machine, the deadline to the timer, events to the application."""
        outputs: Sequence[Tuple[str, Any]] = self.session.drain_outputs()
        for kind, value in outputs:
            if kind == "transmit":
                self.host.transmit(self.now(), value)
            elif kind == "close":
                self.host.session_close(self.now(), value if isinstance(value, str) else "close")
            elif kind == "timeout":
                self.deadline = value if isinstance(value, int) else None
                self.wake.set()
            else:
                self.events.put_nowait((kind, value))

    def step(self) -> None:
        """Perform the machine's outputs that need no waiting; queue the others."""
        while (output := _next_output(self.host)) is not None:
            kind, value = output
            if kind == "attach":
                self.session.connected(self.now())
                self.relay()
            elif kind == "deliver":
                self.session.frame(self.now(), value)
                self.relay()
            elif kind == "peer_error":
                self.events.put_nowait(("peer_error", value))
            elif kind == "detach":
                try:
                    self.session.disconnected(self.now())
                    self.relay()
                finally:
                    self.events.put_nowait(("disconnected", None))
                    self.gone.set()
                    self.wake.set()
            else:
                self.io.append(output)

    async def flush(self) -> None:
        """:meth:`step`, then perform the queued writes, closes and aborts in order."""
        self.step()
        while self.io:
            kind, value = self.io.popleft()
            if kind == "send":
                frames = [value]
                while self.io and self.io[0][0] == "send":
                    frames.append(self.io.popleft()[1])
                # One writer at a time, batches in the order they were queued (the lock
                # is FIFO), so frames reach the socket in the session's order.
                async with self.send_lock:
                    for frame in frames:
                        try:
                            await self.socket.send(frame)
                        except _socket_closed_errors():
                            self.host.socket_closed(self.now())
                            break
                        except Exception as exc:
                            self.failed("send", exc)
                            self.host.failed(self.now())
                            break
            elif kind == "close":
                code, reason, deadline_ms = value
                await _handshake(self.socket, self.host, self.clock, code, reason, deadline_ms,
                                 self.failed)
            elif kind == "abort":
                await _abort(self.socket)
            self.step()

    async def read(self) -> None:
        ended = False
        try:
            frames = self.socket.__aiter__()
            while self.open:
                await self.events.wait_for_space()
                if not self.open:
                    break
                try:
                    frame = await frames.__anext__()
                except StopAsyncIteration:
                    ended = True
                    break
                self.host.frame(self.now(), frame)
                await self.flush()
        except _socket_closed_errors():
            ended = True  # the socket went away: a normal disconnect
        except Exception as exc:
            self.failed("reader", exc)
            self.host.failed(self.now())
            await self.flush()
            return
        if ended:
            self.host.socket_closed(self.now())
            await self.flush()

    async def timer(self) -> None:
        try:
            while self.open:
                self.wake.clear()
                if self.deadline is None:
                    await self.wake.wait()
                    continue
                delay = self.deadline / 1000 - self.clock()
                if delay > 0:
                    try:
                        await asyncio.wait_for(self.wake.wait(), delay)
                        continue
                    except asyncio.TimeoutError:
                        pass
                self.deadline = None
                if self.open:
                    self.session.tick(self.now())
                    self.relay()
                    await self.flush()
        except Exception as exc:
            # Without its timer the connection has no keepalive: give it up (the
            # application reconnects and resumes).
            self.failed("timer", exc)
            self.host.failed(self.now())
            await self.flush()

    async def send(self, message: Any, resend: bool = False) -> None:
        if resend:
            self.session.resend(self.now(), message)
        else:
            self.session.send(self.now(), message)
        self.relay()
        await self.flush()

    def begin_stop(self, reason: str = "") -> None:
        """Ask the socket's machine to close (detaching the session now); the close
        itself waits for :meth:`finish_stop`."""
        self.host.close(self.now(), reason=reason)
        self.step()

    async def finish_stop(self) -> None:
        """End the tasks, then perform the close the machine decided (a bounded
        handshake with a live socket, an abort of one being closed, nothing for one
        gone)."""
        current = asyncio.current_task()
        tasks = [t for t in self.tasks if t is not current]
        self.tasks = []
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for t in tasks:
            if not t.cancelled() and t.exception() is not None:
                self.failed("connection task", t.exception())  # type: ignore[arg-type]
        await self.flush()

    async def stop(self) -> None:
        """Detach from the session, end the tasks, close the socket."""
        self.begin_stop()
        await self.finish_stop()


class _Connection:
    _driver: Optional[_Driver]
    _clock: Clock
    _event_queue: Optional[_EventQueue] = None
    _max_queued_events: int = EVENT_QUEUE_SIZE
    session: SessionMachine

    @property
    def _events(self) -> _EventQueue:
        # Created inside the running loop, which owns it.
        if self._event_queue is None:
            self._event_queue = _EventQueue(self._max_queued_events)
        return self._event_queue

    @property
    def connected(self) -> bool:
        """``True`` while a socket is attached and open."""
        return self._driver is not None and self._driver.open

    async def send(self, message: Sequenced) -> None:
        """Send a sequenced message (stamped with its seq, kept for replay). While
        disconnected it is kept and sent after the next connect."""
        await self._send(message, resend=False)

    async def _send(self, message: Any, resend: bool) -> None:
        driver = self._driver
        if driver is None or not driver.open:
            now = int(self._clock() * 1000)
            if resend:
                self.session.resend(now, message)
            else:
                self.session.send(now, message)
            for kind, value in self.session.drain_outputs():
                if kind not in ("transmit", "timeout", "close"):
                    self._events.put_nowait((kind, value))
            return
        await driver.send(message, resend)

    async def recv(self) -> Event:
        """The next application event (events survive reconnects: nothing the session
        delivered is dropped)."""
        return await self._events.get()

    async def events(self) -> AsyncIterator[Event]:
        """Every application event until the socket is gone: ``("disconnected", None)``
        is the last one, unless a newer socket is already attached when it is taken
        (say, ``connect()`` on an open connection) — then the events go on."""
        while True:
            event = await self._events.get()
            yield event
            if event[0] == "disconnected" and not self.connected:
                return

    async def close(self) -> None:
        """Close the socket (the session state is kept), as its :class:`SocketHost`
        decides: a close handshake of at most :data:`CLOSE_TIMEOUT_S` while the
        connection is alive, an abort while it is being closed. Idempotent."""
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.stop()


#: The keyword arguments of :class:`RunnerSession` a :class:`RunnerConnection` passes on.
_SESSION_KEYWORDS = frozenset({
    "state", "validate", "ping_interval_ms", "peer_timeout_ms", "ack_every_frames",
    "ack_delay_ms", "max_ack_entries", "max_control_frame_bytes", "max_held_frames",
    "max_held_bytes", "min_protocol_version", "max_protocol_version", "max_line_bytes",
    "sequencing",
})

#: The :class:`Hello` fields a :class:`RunnerConnection` builds its hello from.
_HELLO_KEYWORDS = frozenset({"project_id", "runner_version", "capabilities",
                             "protocol_version"})


class RunnerConnection(_Connection):
    """The runner's outbound connection to the hub::

        async with RunnerConnection(url, hello=Hello(project_id=..., runner_version=...),
                                    auth_token=token) as conn:
            await conn.send(progress)
            async for kind, value in conn.events():
                ...

    ``session`` defaults to a new :class:`RunnerSession` over ``hello``. Keyword
    arguments: ``RunnerSession``'s (``ping_interval_ms``, ``validate``, …) go to it,
    ``Hello``'s fields (``project_id``, ``runner_version``, ``capabilities``,
    ``protocol_version``) build the hello when ``hello`` is not given, and any other
    goes to ``websockets.connect`` (as do ``connect_kwargs``, e.g.
    ``additional_headers``). ``connect`` replaces ``websockets.connect`` (it is awaited
    with the url and the connect keywords). ``max_queued_events`` bounds the event queue
    (:data:`EVENT_QUEUE_SIZE`).

    **stapel-runner-protocol 0.1.1's form** — ``RunnerConnection(url, auth_token=...)``
    without ``hello`` or ``session`` — works as 0.1.1 code expects: the session is
    created from the first :class:`Hello` the application sends (``await
    conn.send(hello)``; the session sends it, with ``resume``, and does so by itself
    on every later connect), ``recv()`` returns the next received message and
    ``async for message in conn`` yields them until the socket is gone. Received
    frames are validated only with ``validate=True`` (0.1.1's default is ``False``).
    Keepalive is the session's: it pings and answers the hub's pings itself, so a
    ``Ping`` never reaches the application, :meth:`answer_ping` has nothing to do and
    ``send`` of a ``Ping`` or ``Pong`` sends nothing. In the other form, ``recv()``
    returns ``(kind, value)`` events.
    """

    def __init__(
        self,
        url: str,
        *,
        hello: Optional[Hello] = None,
        auth_token: Optional[str] = None,
        session: Optional[RunnerSession] = None,
        connect: Optional[Callable[..., Any]] = None,
        clock: Clock = time.monotonic,
        connect_kwargs: Optional[dict] = None,  # type: ignore[type-arg]
        max_queued_events: int = EVENT_QUEUE_SIZE,
        **kwargs: Any,
    ) -> None:
        session_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _SESSION_KEYWORDS}
        hello_fields = {k: kwargs.pop(k) for k in list(kwargs) if k in _HELLO_KEYWORDS}
        #: 0.1.1's form: messages (not events) from recv() and iteration.
        self._messages_only = hello is None and session is None
        if hello_fields:
            if hello is not None or session is not None:
                raise TypeError(
                    f"RunnerConnection takes hello fields ({', '.join(sorted(hello_fields))}) "
                    "only without hello= or session="
                )
            hello = Hello(**hello_fields)
        if self._messages_only:
            session_kwargs.setdefault("validate", False)
        self._session_kwargs = session_kwargs
        if session is None and hello is not None:
            session = RunnerSession(hello, **session_kwargs)
        elif session is not None and session_kwargs:
            raise TypeError(
                f"RunnerConnection got session keywords ({', '.join(sorted(session_kwargs))}) "
                "next to session="
            )
        if session is not None:
            self.session = session
        self._has_session = session is not None
        self.url = url
        self._connect = connect
        self._clock = clock
        self._max_queued_events = max_queued_events
        self._connect_kwargs = dict(connect_kwargs or {})
        self._connect_kwargs.update(kwargs)
        authorization = bearer_authorization(auth_token or "")
        if authorization is not None:
            headers = dict(self._connect_kwargs.pop("additional_headers", None) or {})
            headers["Authorization"] = authorization
            self._connect_kwargs["additional_headers"] = headers
        self._driver = None
        self._connecting: Optional[asyncio.Lock] = None
        #: A socket opened before the session exists (0.1.1's form, before its Hello).
        self._waiting_socket: Any = None

    async def connect(self) -> "RunnerConnection":
        """Open the socket (closing the current one first); the session sends its hello
        (with resume) and replays. Concurrent calls run one after the other: the last
        one's socket stays, every earlier one is closed. In 0.1.1's form, before the
        first ``Hello`` is sent, the socket waits for it."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            await self.close()
            connect = self._connect or _websockets_connect()
            socket = await connect(self.url, **self._connect_kwargs)
            if self._has_session:
                await self._attach(socket)
            else:
                self._waiting_socket = socket
        return self

    async def _attach(self, socket: Any) -> None:
        driver = _Driver(self.session, socket, self._clock, self._events)
        self._driver = driver
        await driver.start()

    async def send(self, message: Any) -> None:
        """Send a sequenced message (stamped with its seq, kept for replay). While
        disconnected it is kept and sent after the next connect. A ``Hello`` creates the
        session in 0.1.1's form (and is sent as its hello); once the session exists, a
        ``Hello``, ``Ping`` or ``Pong`` sends nothing (the session sends its own).

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
            if not self._has_session:
                self.session = RunnerSession(message, **self._session_kwargs)
                self._has_session = True
                socket, self._waiting_socket = self._waiting_socket, None
                if socket is not None:
                    await self._attach(socket)
            return
        if isinstance(message, (Ping, Pong)):
            return
        if not self._has_session:
            raise ProtocolStateError(
                "send a Hello first: the connection's session starts with it",
                code="no_hello",
            )
        await self._send(message, resend=self._messages_only)

    async def recv(self) -> Any:
        """The next application event ``(kind, value)`` (events survive reconnects:
        nothing the session delivered is dropped). In 0.1.1's form: the next received
        message; a transport failure is raised, and the end of the socket raises
        ``websockets.exceptions.ConnectionClosedOK``."""
        if not self._messages_only:
            return await super().recv()
        while True:
            kind, value = await self._events.get()
            if kind == "received":
                return value
            if kind == "error" and isinstance(value, BaseException):
                raise value
            if kind == "disconnected" and not self.connected:
                raise _connection_closed()
            _log.debug("transport_ws: %s event not delivered by recv(): %r", kind, value)

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
        """Close the socket (the session state is kept). Idempotent."""
        socket, self._waiting_socket = self._waiting_socket, None
        if socket is not None:
            await _close_quietly(socket)
        await super().close()

    async def __aenter__(self) -> "RunnerConnection":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _close_quietly(socket: Any) -> None:
    """Close a socket no session ever used (bounded by :data:`CLOSE_TIMEOUT_S`)."""
    try:
        await asyncio.wait_for(socket.close(), CLOSE_TIMEOUT_S)
    except Exception:
        await _abort(socket)


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
    socket; :class:`HubServer` is the session-driven hub)."""
    async for frame in websocket:
        yield decode(frame, validate=validate)


class HubConnection(_Connection):
    """The hub's side of one accepted runner socket::

        async def handler(websocket):
            hub = HubConnection(websocket)
            await hub.start()
            async for kind, value in hub.events():
                ...

    ``session`` defaults to a new :class:`HubSession` (extra keyword arguments go to
    it); pass one built over a persisted state to resume a runner's task streams.
    ``max_queued_events`` bounds the event queue (:data:`EVENT_QUEUE_SIZE`).
    """

    def __init__(
        self,
        socket: Any,
        *,
        session: Optional[HubSession] = None,
        clock: Clock = time.monotonic,
        max_queued_events: int = EVENT_QUEUE_SIZE,
        **session_kwargs: Any,
    ) -> None:
        self.session = session if session is not None else HubSession(**session_kwargs)
        self._socket = socket
        self._clock = clock
        self._max_queued_events = max_queued_events
        self._driver = None

    async def start(self) -> "HubConnection":
        """Start driving the session over the socket."""
        if self._driver is None:
            self._driver = _Driver(self.session, self._socket, self._clock, self._events)
            await self._driver.start()
        return self

    async def wait_closed(self) -> None:
        """Wait until the socket is gone."""
        if self._driver is not None:
            await self._driver.gone.wait()

    async def __aenter__(self) -> "HubConnection":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class HubRunner(_Connection):
    """One runner as the hub sees it, across all its connections: one
    :class:`HubSession` (sequencing state, replay, duplicate suppression) and one event
    queue. :meth:`send` works whether or not the runner is connected (commands are kept
    and replayed); :meth:`recv` / :meth:`events` deliver the session's events —
    ``("hello", hello)`` after each (re)connect, ``("received", message)`` exactly once
    and in order per stream, ``("disconnected", None)`` when a socket goes away."""

    def __init__(self, runner_id: str, session: HubSession, clock: Clock,
                 max_queued_events: int = EVENT_QUEUE_SIZE) -> None:
        self.runner_id = runner_id
        self.session = session
        self._clock = clock
        self._max_queued_events = max_queued_events
        self._driver = None
        self._lock: Optional[asyncio.Lock] = None
        self._announced = False  # in the arrivals queue, not yet taken by accept()
        self._serving = 0

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
        queue = self._event_queue
        return (
            self.runner_id,
            self._serving + (self._driver is not None),
            self.session.outbox_frames,
            0 if queue is None else queue.qsize(),
            0 if queue is None else queue.getters,
            self._announced,
        )

    async def _serve(self, socket: Any) -> None:
        """Drive the session over ``socket`` until it is gone; a newer socket of the same
        runner replaces an older one. The swap happens under the lock (the older socket's
        machine detaches the session before the newer one attaches); closing the older
        socket (as its machine decides: a bounded handshake, or an abort when it is
        already being closed) does not, so the newer socket's hello is processed at
        once."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        self._serving += 1
        try:
            async with self._lock:
                old, self._driver = self._driver, None
                if old is not None:
                    old.begin_stop(HOST_REPLACED_REASON)
                driver = _Driver(self.session, socket, self._clock, self._events)
                self._driver = driver
                await driver.start()
            try:
                if old is not None:
                    await old.finish_stop()
                await driver.gone.wait()
            finally:
                if self._driver is driver:
                    self._driver = None
                await driver.stop()
        finally:
            self._serving -= 1


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
    — including a repeated ``Authorization`` header — is refused with HTTP 401. Each
    runner id has one :class:`HubRunner` with one :class:`HubSession`, so a reconnect
    resumes the runner's streams. ``session_factory(runner_id)`` builds the sessions
    (e.g. over a persisted state); otherwise extra keyword arguments go to
    :class:`HubSession`.

    Memory: runners that are connected, have frames kept for replay, queued events, a
    waiting reader, or wait to be taken by :meth:`accept` are always kept. Beyond ``max_idle_runners``
    (:data:`MAX_IDLE_RUNNERS`) disconnected, fully idle runners
    (:attr:`HubRunner.idle`), the oldest are dropped; such a runner that connects again
    gets a new :class:`HubRunner` and session (announced by :meth:`accept` again; build
    sessions over persisted state with ``session_factory`` to keep its positions).
    ``max_queued_events`` bounds each runner's event queue (:data:`EVENT_QUEUE_SIZE`).
    """

    def __init__(
        self,
        *,
        tokens: Optional[Mapping[str, str]] = None,
        authenticate: Optional[Authenticate] = None,
        session_factory: Optional[Callable[[str], HubSession]] = None,
        clock: Clock = time.monotonic,
        max_idle_runners: int = MAX_IDLE_RUNNERS,
        max_queued_events: int = EVENT_QUEUE_SIZE,
        **session_kwargs: Any,
    ) -> None:
        if (tokens is None) == (authenticate is None):
            raise TypeError("HubServer needs exactly one of tokens= and authenticate=")
        config: Dict[str, Any] = {"max_idle_runners": max_idle_runners}
        if tokens is not None:
            config["tokens"] = dict(tokens)  # compared in constant time by the core
        self._host = HubHost(config)
        self._authenticate = authenticate
        self._session_factory = session_factory or (lambda _id: HubSession(**session_kwargs))
        self._clock = clock
        self._max_queued_events = max_queued_events
        self._runners: Dict[str, HubRunner] = {}
        self._arrivals: "Optional[asyncio.Queue[HubRunner]]" = None
        # the host machine's connection ids (process_request and the handler of one
        # connection get the same connection object)
        self._conn_ids: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self._next_conn = 0

    def _now(self) -> int:
        return _now_ms(self._clock)

    def _conn_id(self, connection: Any) -> int:
        conn = self._conn_ids.get(connection)
        if conn is None:
            self._next_conn += 1
            conn = self._conn_ids[connection] = self._next_conn
        return conn

    def _decide(self) -> List[Tuple[str, Any]]:
        """The host machine's outputs, its questions to ``authenticate`` answered."""
        outputs: List[Tuple[str, Any]] = []
        while (output := _next_output(self._host)) is not None:
            kind, value = output
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
        if runner is None:
            runner = HubRunner(runner_id, self._session_factory(runner_id), self._clock,
                               self._max_queued_events)
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
        """``websockets.asyncio.server.serve`` with this server's handler and token
        check: an async context manager (and awaitable) yielding the ``Server``."""
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

        return serve(self.handler, host, port, process_request=process_request, **serve_kwargs)

    async def handler(self, socket: Any) -> None:
        """The connection handler (for a server you start yourself: it checks the token
        and closes the socket with code 1008 when it is not valid; behind
        :meth:`serve` the check already happened)."""
        self._host.upgraded(self._now(), self._conn_id(socket),
                            _header_pairs(socket.request.headers))
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
                await runner._serve(socket)
                return
