"""transport_ws over a real WebSocket on 127.0.0.1 (skipped without websockets, except
on CI: with the environment variable ``CI`` set a missing websockets fails)."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from stapel_runner_protocol import (
    ConfigError,
    Hello,
    PanicError,
    ProtocolStateError,
    TaskCancel,
    TaskProgress,
    TransportError,
)
from stapel_runner_protocol.link import HubLink
from stapel_runner_protocol.transport_ws import Event, HubConnection, RunnerConnection

try:
    import websockets
except ImportError:  # pragma: no cover - depends on the environment
    if os.environ.get("CI"):
        pytest.fail("websockets is not installed, and CI is set: these tests must run",
                    pytrace=False)
    pytest.skip("websockets is not installed", allow_module_level=True)


async def next_of(conn: Any, kind: str) -> Any:
    while True:
        k, v = await asyncio.wait_for(conn.recv(), 5)
        if k == kind:
            return v


def test_runner_and_hub_over_websocket_with_resume() -> None:
    async def main() -> None:
        hub_link = HubLink()  # the runner's session on the hub, across its sockets
        hubs: "asyncio.Queue[HubConnection]" = asyncio.Queue()
        headers: List[Optional[str]] = []

        async def handler(ws: Any) -> None:
            headers.append(ws.request.headers.get("Authorization"))
            hub = HubConnection(ws, link=hub_link)
            await hub.start()
            await hubs.put(hub)
            await ws.wait_closed()
            await hub.close()

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            url = f"ws://127.0.0.1:{port}"
            runner = RunnerConnection(url, hello=Hello(project_id="p-1", runner_version="0.1.0"),
                                      auth_token="tok")
            await runner.connect()
            hub = await asyncio.wait_for(hubs.get(), 5)
            hello = await next_of(hub, "hello")
            assert isinstance(hello, Hello) and hello.project_id == "p-1"
            assert headers == ["Bearer tok"]

            c1 = TaskCancel(task_id="T-1", reason="a")
            await hub.send(c1)
            assert c1.seq == 1
            got = await next_of(runner, "received")
            assert isinstance(got, TaskCancel) and (got.reason, got.seq) == ("a", 1)

            p = TaskProgress(task_id="T-1", kind="state", attempt=1, payload={"state": "running"})
            await runner.send(p)
            assert p.seq == 1
            got = await next_of(hub, "received")
            assert isinstance(got, TaskProgress) and got.payload == {"state": "running"}

            # the runner goes away; the hub keeps sending; the runner comes back
            await runner.close()
            await next_of(hub, "disconnected")
            await hub.send(TaskCancel(task_id="T-1", reason="b"))
            await runner.connect()
            hub2 = await asyncio.wait_for(hubs.get(), 5)
            hello = await next_of(hub2, "hello")
            assert hello.resume == {"T-1": 1}
            got = await next_of(runner, "received")
            assert (got.reason, got.seq) == ("b", 2)
            await runner.close()

    asyncio.run(main())


def test_without_hello_the_first_send_must_be_a_hello() -> None:
    # 0.1.1's form: the session starts with the Hello the application sends.
    async def main() -> None:
        conn = RunnerConnection("ws://127.0.0.1:1")
        with pytest.raises(TypeError, match="Hello first"):
            await conn.send(TaskProgress(task_id="T-1", kind="state"))
        await conn.send(Hello(project_id="p", runner_version="1"))
        progress = TaskProgress(task_id="T-1", kind="state")
        await conn.send(progress)  # kept for the first connect
        assert progress.seq == 1

    asyncio.run(main())


def test_event_alias() -> None:
    event: Event = ("received", None)
    assert event[0] == "received"


def test_dead_peer_timeout_closes_the_socket() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        hubs: "asyncio.Queue[HubConnection]" = asyncio.Queue()

        async def handler(ws: Any) -> None:
            hub = HubConnection(ws, ping_interval_ms=0, peer_timeout_ms=1000)
            await hub.start()
            await hubs.put(hub)
            await ws.wait_closed()

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            runner = RunnerConnection(f"ws://127.0.0.1:{port}",
                                      hello=Hello(project_id="p", runner_version="1"),
                                      ping_interval_ms=0)
            await runner.connect()
            hub = await asyncio.wait_for(hubs.get(), 5)
            await next_of(hub, "hello")
            declared = loop.time()
            # the runner sends nothing more: the hub's timer declares it dead and closes
            await asyncio.wait_for(next_of(hub, "disconnected"), 10)
            # not before the timeout (a meaningful check), and the runner sees it too
            assert loop.time() - declared >= 0.5
            await asyncio.wait_for(next_of(runner, "disconnected"), 10)
            await runner.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------
# HubServer: bearer token, one session per runner, resume across dropped connections

from proxy import Proxy  # noqa: E402


def test_hub_server_resumes_a_runner_across_dropped_connections() -> None:
    """Both sides stream sequenced frames while the TCP connection is cut twice under
    them: every command and every progress frame is applied exactly once, in order."""
    from stapel_runner_protocol.transport_ws import HubServer

    total = 150

    async def main() -> None:
        server = HubServer(tokens={"tok-A": "runner-A"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            proxy = Proxy(ws_server.sockets[0].getsockname()[1])
            url = f"ws://127.0.0.1:{await proxy.start()}"
            hub = server.runner("runner-A")
            runner = RunnerConnection(url, hello=Hello(project_id="p-A", runner_version="1"),
                                      auth_token="tok-A")
            commands: List[str] = []
            progress: List[int] = []
            hellos: List[Dict[str, int]] = []
            done = asyncio.Event()

            def check_done() -> None:
                if len(commands) >= total and len(progress) >= total:
                    done.set()

            async def hub_app() -> None:
                async for kind, value in hub.events():
                    if kind == "received":
                        assert isinstance(value, TaskProgress)
                        progress.append(value.payload["i"])
                    elif kind == "hello":
                        hellos.append(dict(value.resume))
                    check_done()

            async def runner_app() -> None:
                while True:
                    kind, value = await runner.recv()
                    if kind == "received":
                        assert isinstance(value, TaskCancel)
                        commands.append(value.reason)
                    elif kind == "disconnected":
                        while not runner.connected:  # reconnect (the proxy is still up)
                            try:
                                await runner.connect()
                            except OSError:
                                await asyncio.sleep(0.01)
                    check_done()

            async def hub_sender() -> None:
                for i in range(total):
                    await hub.send(TaskCancel(task_id="T-1", reason=f"c{i}"))
                    await asyncio.sleep(0.001)

            async def runner_sender() -> None:
                for i in range(total):
                    await runner.send(TaskProgress(task_id="T-1", attempt=1, kind="state",
                                                   payload={"i": i}))
                    await asyncio.sleep(0.001)

            async def cutter() -> None:
                # cut while both directions are mid-stream
                for fraction in (3, 2):
                    while len(commands) < total // fraction or len(progress) < total // fraction:
                        await asyncio.sleep(0.001)
                    proxy.cut()

            await runner.connect()
            tasks = [asyncio.ensure_future(t()) for t in (hub_app, runner_app, hub_sender,
                                                          runner_sender, cutter)]
            try:
                await asyncio.wait_for(done.wait(), 30)
                await asyncio.wait_for(tasks[4], 5)
                await asyncio.sleep(0.2)  # anything delivered twice would show up now
            finally:
                for t in tasks:
                    t.cancel()
                await runner.close()
                await proxy.close()
            assert proxy.cuts == 2
            assert commands == [f"c{i}" for i in range(total)]
            assert progress == list(range(total))
            assert len(hellos) >= 3 and hellos[0] == {}  # first connect, then resumes
            assert all(h.get("T-1", 0) > 0 for h in hellos[1:])
            assert list(server.runners) == ["runner-A"]

    asyncio.run(main())


def test_hub_server_refuses_bad_tokens_and_replaces_old_sockets() -> None:
    from websockets.exceptions import InvalidStatus

    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        server = HubServer(authenticate=lambda token: "R" if token == "good" else None)
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            for token in (None, "bad"):
                conn = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                        auth_token=token)
                with pytest.raises(InvalidStatus) as info:
                    await conn.connect()
                assert info.value.response.status_code == 401
            assert server.runners == {}
            first = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                     auth_token="good")
            await first.connect()
            hub = await asyncio.wait_for(server.accept(), 5)
            assert hub.runner_id == "R"
            await next_of(hub, "hello")
            # the same runner id connects again (say, a restarted runner process): the
            # older socket is closed, the hub keeps the runner's session
            await hub.send(TaskCancel(task_id="T", reason="r"))
            assert (await next_of(first, "received")).seq == 1
            second = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                      auth_token="good")
            await second.connect()
            await next_of(first, "disconnected")
            assert (await next_of(hub, "hello")).resume == {}
            got = await next_of(second, "received")  # replayed: it declared nothing
            assert (got.reason, got.seq) == ("r", 1)
            assert not first.connected and second.connected
            await second.close()
            await first.close()
        with pytest.raises(TypeError):
            HubServer()

    asyncio.run(main())


# --------------------------------------------------------------------------------------
# Dead and half-open peers, bounds, failures, concurrency


def hello_of(name: str = "p") -> Hello:
    return Hello(project_id=name, runner_version="1")


def test_runner_reconnects_at_once_after_declaring_the_hub_dead() -> None:
    """The hub goes mute (TCP open, nothing passes): the runner's session declares it
    dead; the reconnect must not wait for a close handshake with it (websockets would
    wait its 10 s close_timeout)."""
    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            proxy = Proxy(ws_server.sockets[0].getsockname()[1])
            url = f"ws://127.0.0.1:{await proxy.start()}"
            runner = RunnerConnection(url, hello=hello_of(), auth_token="t",
                                      ping_interval_ms=200, peer_timeout_ms=1000)
            await runner.connect()
            hub = await asyncio.wait_for(server.accept(), 5)
            await next_of(hub, "hello")
            proxy.blackhole()
            await asyncio.wait_for(next_of(runner, "disconnected"), 10)
            started = loop.time()
            await asyncio.wait_for(runner.connect(), 8)
            assert loop.time() - started < 3, "connect() waited for the dead hub"
            hello = await next_of(hub, "hello")  # the new socket resumes the session
            assert isinstance(hello, Hello)
            await runner.close()
            await proxy.close()

    asyncio.run(main())


def test_hub_takes_the_resumed_hello_at_once_while_the_old_socket_is_half_open() -> None:
    """The runner's side of the connection is cut; the hub's TCP connection stays open
    and silent. The runner reconnects: the hub must process its hello without waiting
    for a close handshake on the half-open socket (nor hold its lock across one)."""
    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            proxy = Proxy(ws_server.sockets[0].getsockname()[1])
            url = f"ws://127.0.0.1:{await proxy.start()}"
            hub = server.runner("R")
            runner = RunnerConnection(url, hello=hello_of(), auth_token="t")
            await runner.connect()
            await next_of(hub, "hello")
            await hub.send(TaskCancel(task_id="T", reason="one"))
            assert (await next_of(runner, "received")).reason == "one"
            proxy.cut_runner_side()
            await asyncio.wait_for(next_of(runner, "disconnected"), 10)
            assert hub.connected  # the hub cannot know yet
            started = loop.time()
            await asyncio.wait_for(runner.connect(), 8)
            hello = await asyncio.wait_for(next_of(hub, "hello"), 8)
            assert loop.time() - started < 3, "the hub waited for the half-open socket"
            assert hello.resume == {"T": 1}
            # and the session runs over the new socket
            await hub.send(TaskCancel(task_id="T", reason="two"))
            assert (await next_of(runner, "received")).reason == "two"
            await runner.close()
            await proxy.close()

    asyncio.run(main())


def test_a_duplicated_authorization_header_is_refused_with_401() -> None:
    from websockets.datastructures import Headers
    from websockets.exceptions import InvalidStatus

    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        calls: List[str] = []

        def authenticate(token: str) -> Optional[str]:
            calls.append(token)
            return "R" if token == "good" else None

        server = HubServer(authenticate=authenticate)
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            for values in (["Bearer good", "Bearer good"], ["Bearer good", "Bearer bad"]):
                headers = Headers()
                for value in values:
                    headers["Authorization"] = value  # Headers appends
                conn = RunnerConnection(url, hello=hello_of(),
                                        connect_kwargs={"additional_headers": headers})
                with pytest.raises(InvalidStatus) as info:
                    await conn.connect()
                assert info.value.response.status_code == 401
            assert server.runners == {} and calls == []
            # one header: accepted, and the token is checked once per connection
            good = RunnerConnection(url, hello=hello_of(), auth_token="good")
            await good.connect()
            await next_of(await asyncio.wait_for(server.accept(), 5), "hello")
            assert calls == ["good"]
            await good.close()

    asyncio.run(main())


def test_concurrent_connects_leave_one_socket() -> None:
    """Two connect() calls at once: they run one after the other, and the socket of
    the first is closed (not orphaned while still driving the session)."""

    async def main() -> None:
        open_sockets: List[Any] = []
        one_closed = asyncio.Event()

        async def handler(ws: Any) -> None:
            open_sockets.append(ws)
            await ws.wait_closed()
            open_sockets.remove(ws)
            one_closed.set()

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            runner = RunnerConnection(url, hello=hello_of())
            await asyncio.gather(runner.connect(), runner.connect())
            await asyncio.wait_for(one_closed.wait(), 5)
            assert len(open_sockets) == 1 and runner.connected
            await runner.close()

    asyncio.run(main())


def test_events_go_on_after_connect_on_an_open_connection() -> None:
    """connect() on a connection that is still open replaces its socket; an events()
    loop must not end on the old socket's ("disconnected", None)."""
    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            hub = server.runner("R")
            runner = RunnerConnection(url, hello=hello_of(), auth_token="t")
            await runner.connect()
            await next_of(hub, "hello")
            await runner.connect()  # still open: the old socket goes, a new one comes
            await next_of(hub, "hello")
            await hub.send(TaskCancel(task_id="T", reason="after"))
            kinds: List[str] = []

            async def consume() -> None:
                async for kind, value in runner.events():
                    kinds.append(kind)
                    if kind == "received":
                        assert value.reason == "after"
                        return

            await asyncio.wait_for(consume(), 5)
            # the first socket's events, its end ("stopped" by connect()), the next one's
            assert kinds[0] == "connected" and kinds[-1] == "received"
            assert kinds.index("disconnected") < len(kinds) - 1 - kinds[::-1].index("connected")
            await runner.close()

    asyncio.run(main())


def test_the_event_queue_is_bounded_and_loses_nothing() -> None:
    """An application that does not take its events: the reader stops reading at the
    bound (backpressure down to TCP) instead of queueing without limit; once the
    application reads, every message arrives, exactly once and in order."""
    from stapel_runner_protocol.transport_ws import EVENT_QUEUE_SIZE, HubServer

    assert EVENT_QUEUE_SIZE >= 64
    total, bound = 60, 4

    async def main() -> None:
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            hub = server.runner("R")
            runner = RunnerConnection(url, hello=hello_of(), auth_token="t",
                                      max_queued_events=bound)
            await runner.connect()
            await next_of(hub, "hello")
            for i in range(total):
                await hub.send(TaskCancel(task_id="T", reason=f"c{i}"))
            # the queue fills up to the bound (the link counts the untaken events and
            # pauses the socket) ...
            async def filled() -> None:
                while runner.link.queued_events < bound:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(filled(), 5)
            # ... and then stays there while the application does not read: watch it
            # for a while (this window is not synchronisation — a slow machine only
            # makes it less likely to catch an unbounded reader, never a false failure)
            for _ in range(20):
                await asyncio.sleep(0.01)
                assert runner.link.queued_events <= bound + 2  # one frame's events may overshoot
            got = [(await next_of(runner, "received")).reason for _ in range(total)]
            assert got == [f"c{i}" for i in range(total)]
            await runner.close()

    asyncio.run(main())


def test_hub_server_keeps_busy_runners_and_bounds_idle_ones() -> None:
    from stapel_runner_protocol.transport_ws import MAX_IDLE_RUNNERS, HubServer

    assert MAX_IDLE_RUNNERS >= 64

    async def main() -> None:
        server = HubServer(tokens={"t": "R"}, max_idle_runners=3)
        busy = server.runner("busy")
        await busy.send(TaskCancel(task_id="T", reason="kept for replay"))
        waiting = server.runner("waiting")
        waiter = asyncio.ensure_future(waiting.recv())
        await asyncio.sleep(0)  # the waiter is waiting now
        for i in range(20):
            server.runner(f"idle-{i}")
        kept = server.runners
        assert kept["busy"] is busy and kept["waiting"] is waiting
        assert sorted(k for k in kept if k.startswith("idle")) == ["idle-17", "idle-18",
                                                                  "idle-19"]
        assert not busy.idle and not waiting.idle and kept["idle-19"].idle
        waiter.cancel()
        # a connected runner is kept whatever the bound
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            runner = RunnerConnection(url, hello=hello_of(), auth_token="t")
            await runner.connect()
            hub = await asyncio.wait_for(server.accept(), 5)
            await next_of(hub, "hello")
            for i in range(20, 30):
                server.runner(f"idle-{i}")
            assert server.runners["R"] is hub and not hub.idle
            await runner.close()

    asyncio.run(main())


class FakeSocket:
    """An injected socket: yields ``frames`` (an ``Exception`` instance is raised
    instead), then waits until closed. No ``transport`` to abort."""

    def __init__(self, frames: List[Any]) -> None:
        self.frames = list(frames)
        self.sent: List[str] = []
        self.closed = asyncio.Event()

    def __aiter__(self) -> "FakeSocket":
        return self

    async def __anext__(self) -> Any:
        if self.frames:
            frame = self.frames.pop(0)
            if isinstance(frame, Exception):
                raise frame
            return frame
        await self.closed.wait()
        raise StopAsyncIteration

    async def send(self, frame: str) -> None:
        self.sent.append(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed.set()


def hello_frame() -> str:
    from stapel_runner_protocol import encode

    return encode(hello_of())


def test_reader_failures_surface_as_error_events_and_log(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        socket = FakeSocket([hello_frame(), RuntimeError("reader bug")])
        hub = HubConnection(socket)
        await hub.start()
        assert isinstance(await next_of(hub, "hello"), Hello)
        kind, value = await asyncio.wait_for(hub.recv(), 5)
        # the link's code, the reader's exception as the cause
        assert kind == "error" and isinstance(value, TransportError)
        assert value.code == "transport_failed" and isinstance(value.__cause__, RuntimeError)
        assert await asyncio.wait_for(hub.recv(), 5) == ("disconnected", "transport_failed")
        await asyncio.sleep(0)
        assert socket.closed.is_set()  # the failed connection was closed
        await hub.close()

    with caplog.at_level("WARNING", logger="stapel_runner_protocol.transport_ws"):
        asyncio.run(main())
    assert any("reader bug" in r.getMessage() for r in caplog.records)


def test_a_closed_socket_is_a_plain_disconnect(caplog: pytest.LogCaptureFixture) -> None:
    from websockets.exceptions import ConnectionClosedError

    async def main() -> None:
        hub = HubConnection(FakeSocket([hello_frame(), ConnectionClosedError(None, None)]))
        await hub.start()
        events = [event async for event in hub.events()]
        assert [kind for kind, _ in events] == ["connected", "hello", "disconnected"]
        assert events[-1] == ("disconnected", "peer_closed")
        await hub.close()

    with caplog.at_level("WARNING", logger="stapel_runner_protocol.transport_ws"):
        asyncio.run(main())
    assert caplog.records == []


def test_a_panic_in_the_core_tears_the_connection_down(
        caplog: pytest.LogCaptureFixture) -> None:
    """A panic inside a link call (the link's test hook) never leaves the connection
    half-attached: the socket is aborted, the pump's tasks end, the application gets
    ``("error", PanicError)`` and every later call raises it."""

    async def main() -> None:
        socket = FakeSocket([hello_frame()])
        link = HubLink({"session": {"ping_interval_ms": 20, "peer_timeout_ms": 60_000}})
        hub = HubConnection(socket, link=link)
        await hub.start()
        await next_of(hub, "hello")
        link._panic_on_next_call()  # the next timer tick panics inside the core
        kind, value = await asyncio.wait_for(hub.recv(), 5)
        assert kind == "error" and isinstance(value, PanicError) and value.code == "panic"
        await asyncio.sleep(0)
        assert socket.closed.is_set() and not hub.connected and link.is_poisoned
        pump = hub._pump()
        assert pump.sockets == {} and pump.timer is None
        assert all(t.done() for t in hub._attached.tasks)  # type: ignore[union-attr]
        with pytest.raises(PanicError):
            await hub.send(TaskCancel(task_id="T", reason="after"))
        with pytest.raises(PanicError):
            await asyncio.wait_for(hub.recv(), 5)
        await hub.close()

    with caplog.at_level("WARNING", logger="stapel_runner_protocol.transport_ws"):
        asyncio.run(main())
    assert any("panicked" in r.getMessage() for r in caplog.records)


def test_binary_frames_are_decoded_strictly() -> None:
    async def main() -> None:
        hub = HubConnection(FakeSocket([b"\xff\xfe not utf-8", hello_frame().encode()]))
        await hub.start()
        assert await asyncio.wait_for(hub.recv(), 5) == ("connected", None)
        kind, value = await asyncio.wait_for(hub.recv(), 5)
        assert kind == "peer_error" and value["code"] == "invalid_utf8"
        kind, value = await asyncio.wait_for(hub.recv(), 5)  # valid UTF-8 is taken
        assert kind == "hello" and value.project_id == "p"
        assert hub.connected
        await hub.close()

    asyncio.run(main())


def test_a_cancelled_hub_runner_serve_ends_its_socket() -> None:
    from stapel_runner_protocol.transport_ws import HubServer

    async def main() -> None:
        server = HubServer(tokens={"t": "R"})
        runner = server.runner("R")
        socket = FakeSocket([hello_frame()])
        serving = asyncio.ensure_future(runner._serve(socket, 1))
        await next_of(runner, "hello")
        pump = runner._pump()
        s = pump.sockets[1]
        assert runner.connected
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        await asyncio.sleep(0)
        assert not runner.connected and pump.sockets == {} and s.gone.is_set()
        assert all(t.done() for t in s.tasks) and socket.closed.is_set()
        assert await asyncio.wait_for(runner.recv(), 5) == ("disconnected", "peer_closed")

    asyncio.run(main())


def test_host_config_follows_the_one_config_policy() -> None:
    """A refused host config raises ProtocolStateError with the core's config code and
    the offending key (never a token); a HubServer's bad bound surfaces the same way,
    and a bad event queue bound is a ValueError, as before."""
    from stapel_runner_protocol import ProtocolStateError
    from stapel_runner_protocol._native import HubHost, SocketHost, host_config
    from stapel_runner_protocol.transport_ws import HubServer, RunnerClient

    cases: List[Tuple[Dict[str, Any], str, str]] = [
        ({"close_timeout": 5}, "unknown_key", "close_timeout"),
        ({"max_queued_events": 0}, "out_of_range", "max_queued_events"),
        ({"close_timeout_ms": -1}, "out_of_range", "close_timeout_ms"),
        ({"max_idle_runners": "3"}, "wrong_type", "max_idle_runners"),
        ({"tokens": {"secret-token": 1}}, "wrong_type", "tokens"),
    ]
    for config, code, key in cases:
        for make in (SocketHost, HubHost, host_config):
            with pytest.raises(ProtocolStateError) as info:
                make(config)
            assert (info.value.code, getattr(info.value, "key", None)) == (code, key)
            assert "secret-token" not in str(info.value)
    with pytest.raises(ProtocolStateError) as info:
        HubServer(tokens={"t": "R"}, max_idle_runners=-1)
    assert (info.value.code, getattr(info.value, "key", None)) == ("out_of_range",
                                                                   "max_idle_runners")
    # a bad link bound is the core's ConfigError (a ValueError, as before), at once
    builders: List[Callable[[], Any]] = [
        lambda: HubServer(tokens={"t": "R"}, max_queued_events=0),
        lambda: RunnerConnection("ws://x", hello=hello_of(), max_queued_events=0),
        lambda: RunnerClient("ws://x", hello=hello_of(), max_queued_events=0)]
    for build in builders:
        with pytest.raises(ValueError, match="max_queued_events") as refused:
            build()
        assert isinstance(refused.value, ConfigError)
        assert (refused.value.code, refused.value.key) == ("out_of_range", "max_queued_events")
    assert host_config({"tokens": {"a": "R", "b": "R"}})["tokens"] == 2
    assert host_config() == {"close_timeout_ms": 2000, "max_idle_runners": 1024,
                             "max_pending_connections": 1024, "max_queued_events": 1024,
                             "max_backlog_bytes": 1048576, "tokens": None}
