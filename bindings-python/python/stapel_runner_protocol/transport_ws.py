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
* hub side — :class:`HubConnection` over an accepted server socket.

``websockets`` is imported only when a runner connects; importing this module does not
need it. Without it, :meth:`RunnerConnection.connect` raises
:class:`~stapel_runner_protocol.errors.AdapterUnavailableError`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Callable, List, Optional, Tuple

from ._native import Hello
from .errors import AdapterUnavailableError
from .session import HubSession, RunnerSession, SessionMachine

__all__ = ["RunnerConnection", "HubConnection", "Event"]

#: An application event: ``(kind, value)``.
Event = Tuple[str, Any]

Clock = Callable[[], float]


def _websockets_connect() -> Callable[..., Any]:
    try:
        import websockets
    except ImportError as exc:
        raise AdapterUnavailableError(
            'websockets is not installed; install it with: pip install "stapel-runner-protocol[websockets]"',
            code="adapter_unavailable",
        ) from exc
    connect: Callable[..., Any] = websockets.connect
    return connect


class _Driver:
    """Runs one session machine over one socket: a reader task, a timer task, and a
    flush after every input."""

    def __init__(self, session: SessionMachine, socket: Any, clock: Clock) -> None:
        self.session = session
        self.socket = socket
        self.clock = clock
        self.events: "asyncio.Queue[Event]" = asyncio.Queue()
        self.deadline: Optional[int] = None
        self.wake = asyncio.Event()
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
        for kind, value in self.session.drain_outputs():
            if kind == "transmit":
                if self.open:
                    try:
                        await self.socket.send(value)
                    except Exception:
                        await self.lost()
            elif kind == "timeout":
                self.deadline = value if isinstance(value, int) else None
                self.wake.set()
            elif kind == "close":
                await self.lost()
                try:
                    await self.socket.close()
                except Exception:
                    pass
            else:
                self.events.put_nowait((kind, value))

    async def lost(self) -> None:
        if self.open:
            self.open = False
            self.session.disconnected(self.now())
            self.events.put_nowait(("disconnected", None))
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
    session: SessionMachine

    async def send(self, message: Any) -> None:
        """Send a sequenced message (stamped with its seq, kept for replay). While
        disconnected it is kept and sent after the next connect."""
        if self._driver is None:
            self.session.send(int(time.monotonic() * 1000), message)
            self.session.drain_outputs()
            return
        await self._driver.send(message)

    async def recv(self) -> Event:
        """The next application event."""
        if self._driver is None:
            raise RuntimeError("not connected")
        return await self._driver.events.get()

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
        self._driver = _Driver(self.session, socket, self._clock)
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
            self._driver = _Driver(self.session, self._socket, self._clock)
            await self._driver.start()
        return self

    async def __aenter__(self) -> "HubConnection":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
