"""transport_ws over a real WebSocket on 127.0.0.1 (skipped without websockets)."""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

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
