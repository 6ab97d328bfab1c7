"""RunnerClient (the reconnecting runner over the core's RunnerLink) and the hub's
durable acknowledgements, over real WebSockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List

import pytest

from stapel_runner_protocol import Hello, TaskCancel, TaskProgress
from stapel_runner_protocol.transport_ws import HubRunner, HubServer, RunnerClient

pytest.importorskip("websockets") if not os.environ.get("CI") else __import__("websockets")

from proxy import Proxy  # noqa: E402


def hello() -> Hello:
    return Hello(project_id="p", runner_version="1")


async def next_of(conn: Any, kind: str, timeout: float = 10) -> Any:
    while True:
        k, v = await asyncio.wait_for(conn.recv(), timeout)
        if k == kind:
            return v


def test_the_client_reconnects_on_the_links_schedule_and_loses_nothing() -> None:
    """The proxy cuts the TCP connection three times while both sides stream: the
    client reconnects by itself (``reconnecting`` with the core's delay), resumes, and
    every command and progress frame is applied exactly once, in order."""
    total = 120

    async def main() -> Dict[str, Any]:
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            proxy = Proxy(ws_server.sockets[0].getsockname()[1])
            url = f"ws://127.0.0.1:{await proxy.start()}"
            hub = server.runner("R")
            client = RunnerClient(url, hello=hello(), auth_token="t", seed=11,
                                  backoff_initial_ms=20, backoff_max_ms=100)
            commands: List[str] = []
            progress: List[int] = []
            kinds: List[str] = []
            done = asyncio.Event()

            def check() -> None:
                if len(commands) >= total and len(progress) >= total:
                    done.set()

            async def hub_app() -> None:
                async for kind, value in hub.events():
                    if kind == "received":
                        progress.append(value.payload["i"])
                    check()

            async def runner_app() -> None:
                async for kind, value in client.events():
                    kinds.append(kind)
                    if kind == "received":
                        commands.append(value.reason)
                    check()

            async def senders() -> None:
                for i in range(total):
                    await hub.send(TaskCancel(task_id="T", reason=f"c{i}"))
                    await client.send(TaskProgress(task_id="T", attempt=1, kind="state",
                                                   payload={"i": i}))
                    await asyncio.sleep(0.002)

            async def cutter() -> None:
                for fraction in (4, 2, 1.2):
                    while len(progress) < total / fraction:
                        await asyncio.sleep(0.002)
                    proxy.cut()

            await client.start()
            tasks = [asyncio.ensure_future(t()) for t in (hub_app, runner_app, senders, cutter)]
            try:
                await asyncio.wait_for(done.wait(), 60)
                await asyncio.sleep(0.2)  # anything delivered twice would show up now
            finally:
                for t in tasks:
                    if t is not tasks[1]:
                        t.cancel()
                await client.stop()
                await asyncio.wait_for(tasks[1], 5)  # events() ends with "stopped"
                await proxy.close()
            return {"commands": commands, "progress": progress, "kinds": kinds,
                    "cuts": proxy.cuts, "connections": client.link.stats["connections"]}

    got = asyncio.run(main())
    assert got["cuts"] == 3
    assert got["commands"] == [f"c{i}" for i in range(total)]
    assert got["progress"] == list(range(total))
    assert got["connections"] >= 4 and got["kinds"].count("reconnecting") >= 3
    assert got["kinds"][-2:] == ["disconnected", "stopped"]


def test_the_client_resumes_from_a_snapshot_after_a_restart() -> None:
    """A runner persists ``client.snapshot()``, dies (its process state is gone), and a
    new client built from the snapshot goes on: numbering continues, the frames the
    hub never got are replayed, nothing is applied twice."""

    async def main() -> Dict[str, Any]:
        server = HubServer(tokens={"t": "R"}, ack_delay_ms=5_000, ack_every_frames=100)
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            hub = server.runner("R")
            first = RunnerClient(url, hello=hello(), auth_token="t")
            await first.start()
            for i in range(5):
                await first.send(TaskProgress(task_id="T", attempt=1, kind="state",
                                              payload={"i": i}))
            got = [(await next_of(hub, "received")).seq for _ in range(5)]
            saved = first.snapshot()  # not acknowledged yet: all five are kept
            await first.stop()
            second = RunnerClient(url, hello=hello(), auth_token="t", snapshot=saved)
            seq = await second.send(TaskProgress(task_id="T", attempt=1, kind="state",
                                                 payload={"i": 5}))
            await second.start()
            got.append((await next_of(hub, "received")).seq)
            await asyncio.sleep(0.2)
            extra = [v for k, v in hub._pump().events if k == "received"]
            await second.stop()
            return {"got": got, "seq": seq, "extra": extra}

    got = asyncio.run(main())
    assert got["got"] == [1, 2, 3, 4, 5, 6] and got["seq"] == 6
    assert got["extra"] == []  # the replayed 1..5 were duplicates: applied once


def test_durable_acks_hold_the_runner_until_the_hub_confirms() -> None:
    """With ``durable_acks=True`` the hub acknowledges nothing it has not confirmed:
    the runner keeps every frame, its kept log fills (``stalled``) and
    ``client.send`` waits; the hub confirms, the acknowledgement trims the runner's
    log (``unstalled``) and the waiting send completes."""

    async def main() -> Dict[str, Any]:
        server = HubServer(tokens={"t": "R"}, durable_acks=True, ack_delay_ms=10,
                           ack_every_frames=1)
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            hub: HubRunner = server.runner("R")
            client = RunnerClient(url, hello=hello(), auth_token="t",
                                  session={"sequencing": {"max_outbox_frames": 4},
                                           "probe_every_frames": 0})
            await client.start()
            for i in range(4):
                await client.send(TaskProgress(task_id="T", attempt=1, kind="state",
                                               payload={"i": i}))
            seqs = [(await next_of(hub, "received")).seq for _ in range(4)]
            await asyncio.sleep(0.2)  # the hub's ack timer ran: nothing confirmed
            kept_before = client.link.outbox_frames
            fifth = asyncio.ensure_future(client.send(
                TaskProgress(task_id="T", attempt=1, kind="state", payload={"i": 4})))
            stalled = await next_of(client, "stalled")
            await asyncio.sleep(0.1)
            waiting = not fifth.done()
            hub.confirm("T", 1, 3)  # the store committed 1..3
            seq = await asyncio.wait_for(fifth, 5)
            await next_of(client, "unstalled")
            kept_after = client.link.outbox_frames
            await client.stop()
            return {"seqs": seqs, "kept_before": kept_before, "stalled": stalled,
                    "waiting": waiting, "seq": seq, "kept_after": kept_after}

    got = asyncio.run(main())
    assert got["seqs"] == [1, 2, 3, 4] and got["kept_before"] == 4
    assert got["stalled"]["bound"] == "max_outbox_frames" and got["waiting"]
    assert got["seq"] == 5 and got["kept_after"] == 2  # 4 (unconfirmed) and 5


def test_a_send_that_waits_is_bounded_by_its_timeout() -> None:
    async def main() -> Any:
        client = RunnerClient("ws://127.0.0.1:9", hello=hello(),
                              session={"sequencing": {"max_outbox_frames": 1}})
        await client.send(TaskProgress(task_id="T", attempt=1, kind="state"))
        await client.start()  # nobody listens: nothing is ever acknowledged
        try:
            await client.send(TaskProgress(task_id="T", attempt=1, kind="state"), timeout=0.2)
        except Exception as exc:  # the core's refusal, after the wait
            return exc
        finally:
            await client.stop()

    exc = asyncio.run(main())
    assert getattr(exc, "code", None) == "backpressure"


def test_a_connect_that_hangs_is_aborted_at_the_links_deadline() -> None:
    """A server that accepts TCP connections and never answers the upgrade: the link's
    connect deadline aborts each attempt (the pump cancels the opening task and closes
    the TCP connection), reports ``connect_timeout`` and backs off."""

    async def main() -> Dict[str, Any]:
        accepted: List[asyncio.StreamWriter] = []
        ended: List[asyncio.StreamWriter] = []

        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            try:
                await reader.read()  # the upgrade request, then nothing until the client goes
            finally:
                ended.append(writer)
                writer.close()  # else the socket stays half-open and wait_closed waits for it

        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = RunnerClient(f"ws://127.0.0.1:{port}", hello=hello(), seed=5,
                              connect_timeout_ms=150, backoff_initial_ms=10,
                              backoff_max_ms=20)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await client.start()
        errors: List[Any] = []
        while len(errors) < 2:
            kind, value = await asyncio.wait_for(client.recv(), 10)
            if kind == "error":
                errors.append(value)
        elapsed = loop.time() - started
        await client.stop()
        for _ in range(100):  # every aborted attempt's TCP connection ends
            if len(ended) == len(accepted):
                break
            await asyncio.sleep(0.01)
        closed = len(ended) == len(accepted)
        for w in accepted:
            w.close()
        server.close()
        await asyncio.wait_for(server.wait_closed(), 10)
        return {"codes": [e.code for e in errors], "elapsed": elapsed, "closed": closed,
                "accepted": len(accepted), "pending": len(client._pump().sockets)}

    got = asyncio.run(main())
    assert got["codes"] == ["connect_timeout", "connect_timeout"]
    assert got["elapsed"] >= 0.3 and got["accepted"] >= 2 and got["pending"] == 0
    assert got["closed"]


def test_a_panic_in_a_hub_runners_link_tears_its_socket_down_and_the_runner_comes_back() -> None:
    """The hub's link panics (its test hook): the hub application gets
    ``("error", PanicError)``, the runner's socket is aborted (the client sees the loss
    and reconnects by itself), and the server serves the runner again on a new link."""
    from stapel_runner_protocol import PanicError

    async def main() -> Dict[str, Any]:
        server = HubServer(tokens={"t": "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            first = server.runner("R")
            client = RunnerClient(url, hello=hello(), auth_token="t", seed=2,
                                  backoff_initial_ms=10, backoff_max_ms=20)
            await client.start()
            await next_of(first, "hello")
            first.link._panic_on_next_call()
            try:
                await first.send(TaskCancel(task_id="T", reason="x"))
                raised = None
            except PanicError as e:
                raised = e
            error = await next_of(first, "error")
            await next_of(client, "disconnected")
            await next_of(client, "reconnecting")
            second = server.runner("R")
            again = await next_of(second, "hello")
            await second.send(TaskCancel(task_id="T", reason="after"))
            got = await next_of(client, "received")
            await client.stop()
            return {"raised": raised, "error": error, "same": second is first,
                    "again": again, "got": got.reason}

    got = asyncio.run(main())
    assert isinstance(got["raised"], PanicError) and got["error"] is got["raised"]
    assert not got["same"] and got["again"].project_id == "p" and got["got"] == "after"
