"""transport_ws over a real WebSocket on 127.0.0.1 (skipped without websockets)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

import pytest

from stapel_runner_protocol import Hello, TaskCancel, TaskProgress
from stapel_runner_protocol.session import HubSession
from stapel_runner_protocol.transport_ws import Event, HubConnection, RunnerConnection

websockets = pytest.importorskip("websockets")


async def next_of(conn: Any, kind: str) -> Any:
    while True:
        k, v = await asyncio.wait_for(conn.recv(), 5)
        if k == kind:
            return v


def test_runner_and_hub_over_websocket_with_resume() -> None:
    async def main() -> None:
        hub_session = HubSession()
        hubs: "asyncio.Queue[HubConnection]" = asyncio.Queue()
        headers: List[Optional[str]] = []

        async def handler(ws: Any) -> None:
            headers.append(ws.request.headers.get("Authorization"))
            hub = HubConnection(ws, session=hub_session)
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


def test_missing_hello_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        RunnerConnection("ws://127.0.0.1:1")


def test_event_alias() -> None:
    event: Event = ("received", None)
    assert event[0] == "received"


def test_dead_peer_timeout_closes_the_socket() -> None:
    async def main() -> None:
        hubs: "asyncio.Queue[HubConnection]" = asyncio.Queue()

        async def handler(ws: Any) -> None:
            hub = HubConnection(ws, ping_interval_ms=0, peer_timeout_ms=150)
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
            # the runner sends nothing more: the hub's timer declares it dead and closes
            await asyncio.wait_for(next_of(hub, "disconnected"), 5)
            await asyncio.wait_for(next_of(runner, "disconnected"), 5)
            await runner.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------
# HubServer: bearer token, one session per runner, resume across dropped connections


class Proxy:
    """A TCP relay on 127.0.0.1 between the runner and the hub that can cut every
    connection abruptly (no close handshake; bytes in flight are lost)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.writers: List[asyncio.StreamWriter] = []
        self.tasks: List["asyncio.Task[None]"] = []
        self.server: Optional[asyncio.AbstractServer] = None
        self.cuts = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(4096):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        self.tasks += [asyncio.ensure_future(pipe(reader, up_writer)),
                       asyncio.ensure_future(pipe(up_reader, writer))]

    def cut(self) -> None:
        self.cuts += 1
        for w in self.writers:
            w.transport.abort()
        self.writers = []

    async def close(self) -> None:
        for w in self.writers:
            w.transport.abort()
        for t in self.tasks:
            t.cancel()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


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
