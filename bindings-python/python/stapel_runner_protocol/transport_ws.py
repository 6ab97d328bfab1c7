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
import hmac
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
    Tuple,
    Type,
    Union,
)

from ._native import Hello, TaskAssign, TaskCancel, TaskProgress, TaskReportMessage
from .errors import AdapterUnavailableError
from .session import HubSession, RunnerSession, SessionMachine

__all__ = ["RunnerConnection", "HubConnection", "HubServer", "HubRunner", "Event",
           "Authenticate", "EVENT_QUEUE_SIZE", "CLOSE_TIMEOUT_S", "MAX_IDLE_RUNNERS"]

#: A sequenced message a connection sends.
Sequenced = Union[TaskAssign, TaskProgress, TaskReportMessage, TaskCancel]

#: ``bearer token -> runner id`` (``None``: refuse the connection).
Authenticate = Callable[[str], Optional[str]]

#: An application event: ``(kind, value)``.
Event = Tuple[str, Any]

Clock = Callable[[], float]

#: Events a connection queues for the application before its reader waits.
EVENT_QUEUE_SIZE = 1024

#: Seconds a close handshake with a live peer may take before the TCP connection is
#: aborted.
CLOSE_TIMEOUT_S = 2.0

#: Disconnected, fully idle runners a :class:`HubServer` keeps (oldest dropped first).
MAX_IDLE_RUNNERS = 1024

_log = logging.getLogger(__name__)

_MISSING_WEBSOCKETS = (
    'websockets >= 14 is not installed; install it with: '
    'pip install "stapel-runner-protocol[websockets]"'
)


def _websockets_connect() -> Callable[..., Any]:
    try:
        from websockets.asyncio.client import connect
    except ImportError as exc:
        raise AdapterUnavailableError(_MISSING_WEBSOCKETS, code="adapter_unavailable") from exc
    return connect


def _websockets_serve() -> Callable[..., Any]:
    try:
        from websockets.asyncio.server import serve
    except ImportError as exc:
        raise AdapterUnavailableError(_MISSING_WEBSOCKETS, code="adapter_unavailable") from exc
    return serve


def _socket_closed_errors() -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the socket went away" (a normal disconnect)."""
    errors: Tuple[Type[BaseException], ...] = (OSError, EOFError)
    try:
        from websockets.exceptions import ConnectionClosed
    except ImportError:
        return errors
    return errors + (ConnectionClosed,)


def _abort(socket: Any) -> bool:
    """Drop the socket's TCP connection at once (no close handshake); ``False`` when the
    socket has no transport to abort (an injected one)."""
    transport = getattr(socket, "transport", None)
    abort = getattr(transport, "abort", None)
    if abort is None:
        return False
    abort()
    return True


class _EventQueue:
    """The application's FIFO of events. Events the peer's frames produce are bounded:
    the reader waits for space (:meth:`wait_for_space`) before it reads the next frame.
    Events of local origin (a send, a timer, the disconnect) are queued at once
    (:meth:`put_nowait`), so a task that both sends and receives never waits on its own
    queue; there are few of those. Created inside the running loop."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("max_queued_events must be at least 1")
        self.maxsize = maxsize
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
    """Runs one session machine over one socket: a reader task, a timer task, and a
    flush after every input. Once :meth:`lost` ran it never touches the session again
    (a newer driver may own it)."""

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
        self.deadline: Optional[int] = None
        self.wake = asyncio.Event()
        self.gone = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.tasks: List["asyncio.Task[None]"] = []
        self.open = False

    def now(self) -> int:
        return int(self.clock() * 1000)

    async def start(self) -> None:
        self.session.connected(self.now())
        self.open = True
        await self.flush()
        self.tasks = [asyncio.ensure_future(self.read()), asyncio.ensure_future(self.timer())]

    def failed(self, where: str, exc: BaseException) -> None:
        """Surface a failure of this transport: log it and queue ``("error", exc)``."""
        _log.warning("transport_ws: the %s failed: %r", where, exc, exc_info=exc)
        self.events.put_nowait(("error", exc))

    async def flush(self) -> None:
        if not self.open:
            return  # the session may already belong to a newer driver
        frames: List[str] = []
        close: Optional[str] = None
        for kind, value in self.session.drain_outputs():
            if kind == "transmit" and isinstance(value, str):
                frames.append(value)
            elif kind == "timeout":
                self.deadline = value if isinstance(value, int) else None
                self.wake.set()
            elif kind == "close":
                close = value if isinstance(value, str) else "close"
            else:
                self.events.put_nowait((kind, value))
        if frames:
            # One writer at a time, batches in the order they were drained (the lock
            # is FIFO), so frames reach the socket in the session's order.
            async with self.send_lock:
                for frame in frames:
                    if not self.open:
                        break
                    try:
                        await self.socket.send(frame)
                    except _socket_closed_errors():
                        await self.drop()
                    except Exception as exc:
                        self.failed("send", exc)
                        await self.drop()
        if close is not None:
            # The session gave up on this connection. A dead peer (peer_timeout) gets
            # no close handshake: the transport is aborted, so nothing waits for it.
            self.lost()
            if close == "peer_timeout":
                await self.close_socket(handshake=False)
            else:
                await self.close_socket(handshake=True)

    def lost(self) -> None:
        """The socket is gone (or given up): tell the session, queue the events it
        still has and ``("disconnected", None)``. Idempotent; never waits."""
        if not self.open:
            return
        self.open = False
        try:
            self.session.disconnected(self.now())
            for kind, value in self.session.drain_outputs():
                if kind not in ("transmit", "timeout", "close"):
                    self.events.put_nowait((kind, value))
        finally:
            self.events.put_nowait(("disconnected", None))
            self.gone.set()
            self.wake.set()

    async def drop(self) -> None:
        """Give up on a broken connection: :meth:`lost`, then abort the transport (the
        reader's pending read ends with it)."""
        self.lost()
        await self.close_socket(handshake=False)

    async def close_socket(self, *, handshake: bool) -> None:
        """Close the socket: with a close handshake bounded by
        :data:`CLOSE_TIMEOUT_S`, else (or when that times out) by aborting it."""
        if handshake:
            try:
                await asyncio.wait_for(self.socket.close(), CLOSE_TIMEOUT_S)
                return
            except asyncio.TimeoutError:
                pass
            except _socket_closed_errors():
                pass
            except Exception as exc:
                self.failed("close handshake", exc)
        if not _abort(self.socket):
            # no transport to abort (an injected socket): a bounded close is all there is
            try:
                await asyncio.wait_for(self.socket.close(), CLOSE_TIMEOUT_S)
            except (asyncio.TimeoutError, Exception):
                pass

    async def read(self) -> None:
        try:
            frames = self.socket.__aiter__()
            while self.open:
                await self.events.wait_for_space()
                if not self.open:
                    break
                try:
                    frame = await frames.__anext__()
                except StopAsyncIteration:
                    break
                if not self.open:
                    break
                if isinstance(frame, str):
                    text = frame
                else:
                    try:
                        text = bytes(frame).decode("utf-8")
                    except UnicodeDecodeError as exc:
                        self.events.put_nowait(("peer_error", {
                            "code": "invalid_utf8",
                            "detail": f"a binary frame that is not UTF-8 was dropped: {exc}",
                        }))
                        continue
                self.session.frame(self.now(), text)
                await self.flush()
        except _socket_closed_errors():
            pass  # the socket went away: a normal disconnect
        except Exception as exc:
            self.failed("reader", exc)
            await self.drop()
        finally:
            self.lost()

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
                    await self.flush()
        except Exception as exc:
            # Without its timer the connection has no keepalive: give it up (the
            # application reconnects and resumes).
            self.failed("timer", exc)
            await self.drop()

    async def send(self, message: Any) -> None:
        self.session.send(self.now(), message)
        await self.flush()

    async def stop(self, *, handshake: Optional[bool] = None) -> None:
        """Detach from the session, end the tasks, close the socket: with a bounded
        close handshake when ``handshake`` (default: the connection was still open),
        else by aborting it."""
        if handshake is None:
            handshake = self.open
        self.lost()
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
        await self.close_socket(handshake=handshake)


class _Connection:
    _driver: Optional[_Driver]
    _clock: Clock
    _event_queue: Optional[_EventQueue] = None
    _max_queued_events: int = EVENT_QUEUE_SIZE
    session: SessionMachine

    @property
    def _events(self) -> _EventQueue:
        # Created inside the running loop (Python 3.9 binds asyncio primitives to a loop).
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
        driver = self._driver
        if driver is None or not driver.open:
            self.session.send(int(self._clock() * 1000), message)
            for kind, value in self.session.drain_outputs():
                if kind not in ("transmit", "timeout", "close"):
                    self._events.put_nowait((kind, value))
            return
        await driver.send(message)

    async def recv(self) -> Event:
        """The next application event (events survive reconnects: nothing the session
        delivered is dropped)."""
        return await self._events.get()

    async def events(self) -> AsyncIterator[Event]:
        """Every application event until the socket is gone: ``("disconnected", None)``
        is the last one, unless a newer socket is already attached when it is taken
        (say, ``connect()`` on an open connection) — then the events go on."""
        while True:
            event = await self.recv()
            yield event
            if event[0] == "disconnected" and not self.connected:
                return

    async def close(self) -> None:
        """Close the socket (the session state is kept): a close handshake of at most
        :data:`CLOSE_TIMEOUT_S` while the connection is alive, an abort otherwise.
        Idempotent."""
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.stop()


class RunnerConnection(_Connection):
    """The runner's outbound connection to the hub::

        async with RunnerConnection(url, hello=Hello(project_id=..., runner_version=...),
                                    auth_token=token) as conn:
            await conn.send(progress)
            async for kind, value in conn.events():
                ...

    ``session`` defaults to a new :class:`RunnerSession` over ``hello`` (extra keyword
    arguments other than the ones below go to it, e.g. ``ping_interval_ms``).
    ``connect`` replaces ``websockets.connect`` (it is awaited with the url and the
    connect keywords, e.g. ``additional_headers``). ``max_queued_events`` bounds the
    event queue (:data:`EVENT_QUEUE_SIZE`).
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
        **session_kwargs: Any,
    ) -> None:
        if session is None:
            if hello is None:
                raise TypeError("RunnerConnection needs hello= (or session=)")
            session = RunnerSession(hello, **session_kwargs)
        self.session = session
        self.url = url
        self._connect = connect
        self._clock = clock
        self._max_queued_events = max_queued_events
        self._connect_kwargs = dict(connect_kwargs or {})
        if auth_token:
            headers = dict(self._connect_kwargs.pop("additional_headers", None) or {})
            headers["Authorization"] = f"Bearer {auth_token}"
            self._connect_kwargs["additional_headers"] = headers
        self._driver = None
        self._connecting: Optional[asyncio.Lock] = None

    async def connect(self) -> "RunnerConnection":
        """Open the socket (closing the current one first); the session sends its hello
        (with resume) and replays. Concurrent calls run one after the other: the last
        one's socket stays, every earlier one is closed."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            await self.close()
            connect = self._connect or _websockets_connect()
            socket = await connect(self.url, **self._connect_kwargs)
            driver = _Driver(self.session, socket, self._clock, self._events)
            self._driver = driver
            await driver.start()
        return self

    async def __aenter__(self) -> "RunnerConnection":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


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
        self._arrived = False  # announced by HubServer.accept (once per handle)
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
        :meth:`HubServer.accept`."""
        queue = self._event_queue
        return (
            self._driver is None
            and self._serving == 0
            and not self._announced
            and self.session.outbox_frames == 0
            and (queue is None or (queue.qsize() == 0 and queue.getters == 0))
        )

    async def _serve(self, socket: Any) -> None:
        """Drive the session over ``socket`` until it is gone; a newer socket of the same
        runner replaces an older one. The swap happens under the lock; closing the older
        socket (a bounded handshake, or an abort when it is already dead) does not, so
        the newer socket's hello is processed at once."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        self._serving += 1
        try:
            async with self._lock:
                old, self._driver = self._driver, None
                old_alive = old is not None and old.open
                if old is not None:
                    old.lost()  # the session sees the old socket go before the new one
                driver = _Driver(self.session, socket, self._clock, self._events)
                self._driver = driver
                await driver.start()
            try:
                if old is not None:
                    await old.stop(handshake=old_alive)
                await driver.gone.wait()
            finally:
                if self._driver is driver:
                    self._driver = None
                await driver.stop()
        finally:
            self._serving -= 1


def _authorization(headers: Any) -> Optional[str]:
    """The one ``Authorization`` header value, or ``None`` when there is none or more
    than one (a repeated header is refused, never guessed at)."""
    get_all = getattr(headers, "get_all", None)
    if get_all is None:
        value = headers.get("Authorization")
        return value if isinstance(value, str) else None
    values = get_all("Authorization")
    return values[0] if len(values) == 1 else None


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
        if tokens is not None:
            table = dict(tokens)

            def by_table(token: str) -> Optional[str]:
                found: Optional[str] = None
                for known, runner_id in table.items():
                    if hmac.compare_digest(known.encode(), token.encode()):
                        found = runner_id
                return found

            authenticate = by_table
        assert authenticate is not None
        self._authenticate: Authenticate = authenticate
        self._session_factory = session_factory or (lambda _id: HubSession(**session_kwargs))
        self._clock = clock
        self._max_idle_runners = max_idle_runners
        self._max_queued_events = max_queued_events
        self._runners: Dict[str, HubRunner] = {}
        self._arrivals: "Optional[asyncio.Queue[HubRunner]]" = None
        # runner id found by process_request, for the handler of that connection
        self._authenticated: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()

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
            self._evict_idle(keep=runner)
        return runner

    def _evict_idle(self, keep: HubRunner) -> None:
        """Drop the oldest idle runners beyond the bound (never ``keep``, the handle
        just created for a caller)."""
        idle = [r for r in self._runners.values() if r.idle]
        for runner in idle[: max(0, len(idle) - self._max_idle_runners)]:
            if runner is not keep:
                del self._runners[runner.runner_id]

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
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self._authenticate(token.strip())

    def serve(self, host: Optional[str] = None, port: Optional[int] = None,
              **serve_kwargs: Any) -> Any:
        """``websockets.asyncio.server.serve`` with this server's handler and token
        check: an async context manager (and awaitable) yielding the ``Server``."""
        serve = _websockets_serve()
        from http import HTTPStatus

        def process_request(connection: Any, request: Any) -> Any:
            runner_id = self.runner_id_for(_authorization(request.headers))
            if runner_id is None:
                return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required\n")
            self._authenticated[connection] = runner_id
            return None

        return serve(self.handler, host, port, process_request=process_request, **serve_kwargs)

    async def handler(self, socket: Any) -> None:
        """The connection handler (for a server you start yourself: it checks the token
        and closes the socket with code 1008 when it is not valid; behind
        :meth:`serve` the check already happened)."""
        runner_id = self._authenticated.pop(socket, None)
        if runner_id is None:
            runner_id = self.runner_id_for(_authorization(socket.request.headers))
        if runner_id is None:
            await socket.close(1008, "a valid bearer token is required")
            return
        runner = self.runner(runner_id)
        if not runner._arrived:
            runner._arrived = runner._announced = True
            self._arrivals_queue().put_nowait(runner)
        await runner._serve(socket)
