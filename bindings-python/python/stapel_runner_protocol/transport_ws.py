"""WebSocket transport (optional extra ``websockets``) driven by the session machines.

Everything the protocol decides — hello with resume, replay, duplicate suppression,
in-order delivery, acknowledgements, keepalive pings and the dead-peer timeout — is the
Rust core's :class:`~stapel_runner_protocol.session.RunnerSession` /
:class:`~stapel_runner_protocol.session.HubSession`. This module only moves their
frames over a WebSocket, feeds them the clock, and hands their events to the
application as ``(kind, value)`` pairs (``("received", message)``, ``("hello",
hello)``, ``("inbound_gap", resync)``, ``("outbound_resync", resync)``, ``("peer_error",
{"code", "detail"})``, and ``("disconnected", None)`` when the socket is gone).

* runner side — :class:`RunnerConnection`: the outbound connection (the container has no
  inbound ports), authorised with a bearer token. Reconnecting with the same connection
  object keeps the session's sequencing state: the hello declares the resume positions
  and both sides replay what the other missed.
* hub side — :class:`HubServer`: accepts runner sockets, checks the bearer token
  (a wrong or missing one is refused with HTTP 401 before the WebSocket opens), and
  keeps one :class:`HubSession` per runner across reconnects (:class:`HubRunner`), so
  a reconnecting runner resumes: both sides replay what the other missed, nothing is
  delivered twice. :class:`HubConnection` is the lower-level piece (one accepted
  socket, a session the caller supplies).

Each connection object keeps one event queue for its whole life, so events the
session produced before a reconnect are never dropped. Frames of one connection are
written in the order the session produced them.

``websockets`` (≥ 14, the extra ``websockets``) is imported only when a runner connects
or a hub serves; importing this module does not need it. Without it,
:meth:`RunnerConnection.connect` and :meth:`HubServer.serve` raise
:class:`~stapel_runner_protocol.errors.AdapterUnavailableError`.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

from ._native import Hello, TaskAssign, TaskCancel, TaskProgress, TaskReportMessage
from .errors import AdapterUnavailableError
from .session import HubSession, RunnerSession, SessionMachine

__all__ = ["RunnerConnection", "HubConnection", "HubServer", "HubRunner", "Event",
           "Authenticate"]

#: A sequenced message a connection sends.
Sequenced = Union[TaskAssign, TaskProgress, TaskReportMessage, TaskCancel]

#: ``bearer token -> runner id`` (``None``: refuse the connection).
Authenticate = Callable[[str], Optional[str]]

#: An application event: ``(kind, value)``.
Event = Tuple[str, Any]

Clock = Callable[[], float]


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


class _Driver:
    """Runs one session machine over one socket: a reader task, a timer task, and a
    flush after every input."""

    def __init__(
        self,
        session: SessionMachine,
        socket: Any,
        clock: Clock,
        events: "asyncio.Queue[Event]",
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

    async def flush(self) -> None:
        frames: List[str] = []
        closing = False
        for kind, value in self.session.drain_outputs():
            if kind == "transmit" and isinstance(value, str):
                frames.append(value)
            elif kind == "timeout":
                self.deadline = value if isinstance(value, int) else None
                self.wake.set()
            elif kind == "close":
                closing = True
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
                    except Exception:
                        await self.lost()
        if closing:
            await self.lost()
            try:
                await self.socket.close()
            except Exception:
                pass

    async def lost(self) -> None:
        if self.open:
            self.open = False
            self.session.disconnected(self.now())
            self.events.put_nowait(("disconnected", None))
            self.gone.set()
            self.wake.set()
            await self.flush()

    async def read(self) -> None:
        try:
            async for frame in self.socket:
                if not self.open:
                    break
                text = frame if isinstance(frame, str) else bytes(frame).decode("utf-8", "replace")
                self.session.frame(self.now(), text)
                await self.flush()
        except Exception:
            pass
        finally:
            await self.lost()

    async def timer(self) -> None:
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

    async def send(self, message: Any) -> None:
        self.session.send(self.now(), message)
        await self.flush()

    async def stop(self) -> None:
        await self.lost()
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            try:
                await t
            except BaseException:
                pass
        self.tasks = []
        try:
            await self.socket.close()
        except Exception:
            pass


class _Connection:
    _driver: Optional[_Driver]
    _clock: Clock
    _event_queue: "Optional[asyncio.Queue[Event]]" = None
    session: SessionMachine

    @property
    def _events(self) -> "asyncio.Queue[Event]":
        # Created inside the running loop (Python 3.9 binds a queue to a loop).
        if self._event_queue is None:
            self._event_queue = asyncio.Queue()
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
        """Every application event until the socket is gone (``("disconnected", None)``
        is the last one)."""
        while True:
            event = await self.recv()
            yield event
            if event[0] == "disconnected":
                return

    async def close(self) -> None:
        """Close the socket (the session state is kept). Idempotent."""
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
    connect keywords, e.g. ``additional_headers``).
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
        self._connect_kwargs = dict(connect_kwargs or {})
        if auth_token:
            headers = dict(self._connect_kwargs.pop("additional_headers", None) or {})
            headers["Authorization"] = f"Bearer {auth_token}"
            self._connect_kwargs["additional_headers"] = headers
        self._driver = None

    async def connect(self) -> "RunnerConnection":
        """Open the socket; the session sends its hello (with resume) and replays."""
        await self.close()
        connect = self._connect or _websockets_connect()
        socket = await connect(self.url, **self._connect_kwargs)
        self._driver = _Driver(self.session, socket, self._clock, self._events)
        await self._driver.start()
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
    """

    def __init__(
        self,
        socket: Any,
        *,
        session: Optional[HubSession] = None,
        clock: Clock = time.monotonic,
        **session_kwargs: Any,
    ) -> None:
        self.session = session if session is not None else HubSession(**session_kwargs)
        self._socket = socket
        self._clock = clock
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

    def __init__(self, runner_id: str, session: HubSession, clock: Clock) -> None:
        self.runner_id = runner_id
        self.session = session
        self._clock = clock
        self._driver = None
        self._lock: Optional[asyncio.Lock] = None

    async def events(self) -> AsyncIterator[Event]:
        """Every event of this runner, across reconnects (it never ends by itself)."""
        while True:
            yield await self.recv()

    async def _serve(self, socket: Any) -> None:
        """Drive the session over ``socket`` until it is gone; a newer socket of the same
        runner replaces an older one (the older is closed first)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self.close()
            driver = _Driver(self.session, socket, self._clock, self._events)
            self._driver = driver
            await driver.start()
        await driver.gone.wait()
        async with self._lock:
            if self._driver is driver:
                self._driver = None
            await driver.stop()


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
    is refused with HTTP 401. Each runner id has one :class:`HubRunner` with one
    :class:`HubSession` for the server's life, so a reconnect resumes the runner's
    streams. ``session_factory(runner_id)`` builds the sessions (e.g. over a persisted
    state); otherwise extra keyword arguments go to :class:`HubSession`.
    """

    def __init__(
        self,
        *,
        tokens: Optional[Mapping[str, str]] = None,
        authenticate: Optional[Authenticate] = None,
        session_factory: Optional[Callable[[str], HubSession]] = None,
        clock: Clock = time.monotonic,
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
        self._runners: Dict[str, HubRunner] = {}
        self._arrivals: "Optional[asyncio.Queue[HubRunner]]" = None
        self._connected_once: Dict[str, bool] = {}

    @property
    def runners(self) -> Dict[str, HubRunner]:
        """Every runner seen or addressed so far, by id (a copy)."""
        return dict(self._runners)

    def runner(self, runner_id: str) -> HubRunner:
        """The runner's handle (created on first use; it keeps its session forever)."""
        runner = self._runners.get(runner_id)
        if runner is None:
            runner = HubRunner(runner_id, self._session_factory(runner_id), self._clock)
            self._runners[runner_id] = runner
        return runner

    async def accept(self) -> HubRunner:
        """The next runner that connects for the first time."""
        return await self._arrivals_queue().get()

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
            if self.runner_id_for(request.headers.get("Authorization")) is None:
                return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required\n")
            return None

        return serve(self.handler, host, port, process_request=process_request, **serve_kwargs)

    async def handler(self, socket: Any) -> None:
        """The connection handler (for a server you start yourself: it re-checks the
        token and closes the socket with code 1008 when it is not valid)."""
        runner_id = self.runner_id_for(socket.request.headers.get("Authorization"))
        if runner_id is None:
            await socket.close(1008, "a valid bearer token is required")
            return
        runner = self.runner(runner_id)
        if not self._connected_once.get(runner_id):
            self._connected_once[runner_id] = True
            self._arrivals_queue().put_nowait(runner)
        await runner._serve(socket)
