"""``pghub.StoreHub`` against a real PostgreSQL 15 (tests/pgcluster.py): fencing of a hub
that is alive and still has the runner's socket, the lease configuration it refuses, and
a stopped hub that renews nothing any more."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgcluster import PgCluster, pg_cluster  # noqa: E402,F401  (the fixture)

import psycopg  # noqa: E402

from stapel_runner_protocol import Hello, TaskProgress  # noqa: E402
from stapel_runner_protocol.errors import ConfigError  # noqa: E402
from stapel_runner_protocol.pghub import StoreHub  # noqa: E402
from stapel_runner_protocol.pgstore import PgStore  # noqa: E402
from stapel_runner_protocol.transport_ws import RunnerClient  # noqa: E402

#: Renewals far apart: within a test, only the first renewal runs, so what refuses the
#: stale hub is its own apply transaction, not a renewal.
SLOW_LEASE = {"renew_every_ms": 20_000, "margin_ms": 10_000, "retry_ms": 500}
LEASE_MS = 60_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def progress(n: int) -> TaskProgress:
    return TaskProgress(task_id="T-1", attempt=1, kind="state",
                        payload={"state": "running", "n": n})


def test_a_live_hub_whose_runner_was_taken_over_is_refused_by_the_database(
        pg_cluster: PgCluster) -> None:
    dsn = pg_cluster.new_database("fence")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE applied (n bigserial, hub text, seq bigint, "
                  "UNIQUE (seq))")
    events: List[Dict[str, Any]] = []
    port = free_port()

    def seqs() -> List[int]:
        with psycopg.connect(dsn, autocommit=True) as c:
            return [s for (s,) in c.execute("SELECT seq FROM applied ORDER BY n")]

    async def wait_for(n: int) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while len(await asyncio.to_thread(seqs)) < n:
            assert asyncio.get_running_loop().time() < deadline, (seqs(), events)
            await asyncio.sleep(0.05)

    async def main() -> None:
        async with PgStore(dsn, "hub-a", lease_ms=LEASE_MS) as store_a, \
                PgStore(dsn, "hub-b", lease_ms=LEASE_MS) as store_b:

            async def effect(cur: Any, runner_id: str, messages: List[Any]) -> None:
                for m in messages:
                    await cur.execute("INSERT INTO applied (hub, seq) VALUES ('hub-a', %s)",
                                      (m.seq,))

            hub = StoreHub(store_a, effect=effect, tokens={"tok": "R"}, lease=SLOW_LEASE,
                           on_event=events.append)
            client = RunnerClient(f"ws://127.0.0.1:{port}/",
                                  hello=Hello(project_id="p", runner_version="1"),
                                  auth_token="tok", backoff_initial_ms=20, backoff_max_ms=200)
            async with hub.serve("127.0.0.1", port):
                await client.start()
                for n in (1, 2, 3):
                    await client.send(progress(n))
                await wait_for(3)
                # Another hub process takes the runner (a higher epoch) while hub-a is
                # alive and still holds the socket.
                own_b, _rows, _t = await store_b.take_ownership("R")
                assert own_b.epoch == 2
                await client.send(progress(4))
                # hub-a's apply transaction is refused by the database; the runner
                # keeps frame 4 (not acknowledged), reconnects, and hub-a takes it back
                # (epoch 3) and applies it, once.
                await wait_for(4)
                await client.stop()

    asyncio.run(main())
    assert seqs() == [1, 2, 3, 4]
    fenced = [e["fenced"] for e in events if "fenced" in e]
    assert any(f["during"] == "apply" and f["epoch"] == 1 and f["current_owner"] == "hub-b"
               and f["current_epoch"] == 2 for f in fenced), events
    owned = [e["owned"]["epoch"] for e in events if "owned" in e]
    assert owned[0] == 1 and owned[-1] >= 3, owned


def test_the_hub_lease_is_the_stores(pg_cluster: PgCluster) -> None:
    dsn = pg_cluster.new_database("leasecfg")

    async def main() -> None:
        async with PgStore(dsn, "hub-a", lease_ms=10_000) as store:
            async def effect(cur: Any, runner_id: str, messages: List[Any]) -> None:
                pass
            with pytest.raises(ConfigError, match="differs from the store's") as info:
                StoreHub(store, effect=effect, tokens={"t": "R"}, lease={"lease_ms": 30_000})
            assert info.value.code == "out_of_range"
            hub = StoreHub(store, effect=effect, tokens={"t": "R"})
            assert hub.lease_config["lease_ms"] == 10_000
            assert {"renew_every_ms", "margin_ms", "retry_ms"} <= set(hub.lease_config)

    asyncio.run(main())


def test_a_stopped_hub_renews_nothing(pg_cluster: PgCluster) -> None:
    dsn = pg_cluster.new_database("stopped")
    port = free_port()

    def expires() -> Any:
        with psycopg.connect(dsn, autocommit=True) as c:
            row = c.execute("SELECT expires_at FROM srp_leases WHERE runner_id = 'R'").fetchone()
            return row[0] if row else None

    async def main() -> None:
        async with PgStore(dsn, "hub-a", lease_ms=1500) as store:
            async def effect(cur: Any, runner_id: str, messages: List[Any]) -> None:
                pass
            hub = StoreHub(store, effect=effect, tokens={"tok": "R"},
                           lease={"renew_every_ms": 100, "margin_ms": 500, "retry_ms": 50})
            client = RunnerClient(f"ws://127.0.0.1:{port}/",
                                  hello=Hello(project_id="p", runner_version="1"),
                                  auth_token="tok", backoff_initial_ms=20, backoff_max_ms=200)
            async with hub.serve("127.0.0.1", port):
                await client.start()
                await client.send(progress(1))
                deadline = asyncio.get_running_loop().time() + 10
                while await asyncio.to_thread(expires) is None:
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
                first = await asyncio.to_thread(expires)
                await asyncio.sleep(0.5)
                assert await asyncio.to_thread(expires) > first  # renewed while serving
            await client.stop()
            stopped = await asyncio.to_thread(expires)
            await asyncio.sleep(0.6)  # six renewal periods
            assert await asyncio.to_thread(expires) == stopped
            assert not hub.lease_held()

    asyncio.run(main())
