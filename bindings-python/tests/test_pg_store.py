"""The PostgreSQL store against a real server (tests/pgcluster.py starts Debian's
PostgreSQL 15): migrations, fencing in the database, exactly-once apply, durable
commands, rows, pruning, limits, an unreachable server."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, List, Tuple, TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgcluster import PgCluster, pg_cluster  # noqa: E402,F401  (the fixture)

import psycopg  # noqa: E402  (the [postgres] extra; scripts/test installs it)

from stapel_runner_protocol import pgstore  # noqa: E402
from stapel_runner_protocol.errors import FencedError, StoreError  # noqa: E402
from stapel_runner_protocol.pgstore import (  # noqa: E402
    Fenced,
    Ownership,
    PgStore,
    StoreLimitError,
    StoreUnavailable,
)

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro
    return asyncio.run(main())


@dataclass
class Frame:
    task_id: str
    attempt: int
    seq: int


def sql(dsn: str, query: str, params: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.execute(query, params or None)
        return list(cur.fetchall()) if cur.description else []


@pytest.fixture
def dsn(pg_cluster: PgCluster) -> str:
    d = pg_cluster.new_database("store")
    with pgstore.connect(d) as c:
        pgstore.migrate(c)
    return d


def with_stores(dsn: str, n: int, body: Callable[..., Awaitable[T]], **kw: Any) -> T:
    async def main() -> T:
        stores = [await PgStore(dsn, f"hub-{i}", **kw).open() for i in range(n)]
        try:
            return await body(*stores)
        finally:
            for s in stores:
                await s.close()
    return asyncio.run(main())


# --- migrations ----------------------------------------------------------------------


def test_migrate_is_idempotent(pg_cluster: PgCluster) -> None:
    d = pg_cluster.new_database("mig")
    with pgstore.connect(d) as c:
        assert pgstore.schema_version(c) == 0
        assert pgstore.migrate(c) == len(pgstore.MIGRATIONS)
        assert pgstore.migrate(c) == 0
        assert pgstore.schema_version(c) == pgstore.SCHEMA_VERSION
    versions = sql(d, "SELECT version FROM srp_schema_version ORDER BY version")
    assert [v for (v,) in versions] == [m[0] for m in pgstore.MIGRATIONS]
    tables = {t for (t,) in sql(d, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'srp_%'")}
    assert set(pgstore.STORE_TABLES) <= tables
    assert {"srp_hub_queue", "srp_hub_progress", "srp_hub_reports"} <= tables


def test_migrate_concurrently(pg_cluster: PgCluster) -> None:
    """Eight hubs starting at once: the schema is created once, nobody fails."""
    d = pg_cluster.new_database("migc")
    barrier = threading.Barrier(8)
    results: List[int] = []
    errors: List[BaseException] = []

    def hub() -> None:
        try:
            with pgstore.connect(d) as c:
                barrier.wait()
                results.append(pgstore.migrate(c))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=hub) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [0] * 7 + [len(pgstore.MIGRATIONS)]
    assert sql(d, "SELECT count(*) FROM srp_schema_version") == [(len(pgstore.MIGRATIONS),)]


def test_newer_schema_is_refused(dsn: str) -> None:
    sql(dsn, "INSERT INTO srp_schema_version (version, description) VALUES (999, 'future')")
    with pgstore.connect(dsn) as c:
        with pytest.raises(StoreError) as e:
            pgstore.migrate(c)
    assert e.value.code == "schema_too_new"


# --- ownership and fencing -----------------------------------------------------------


def test_takeover_raises_the_epoch_and_fences_the_old_owner(dsn: str) -> None:
    async def body(a: PgStore, b: PgStore) -> None:
        own_a, rows, _ = await a.take_ownership("R")
        assert own_a == Ownership("R", "hub-0", 1)
        assert rows == {"tasks": [], "inbound": [], "commands": []}
        await a.write(own_a, [{"op": "put_task", "task_id": "T1", "next_seq": 2,
                               "assigned_attempt": 1, "forgotten": False}])
        own_b, rows_b, _ = await b.take_ownership("R")
        assert own_b.epoch == 2
        assert rows_b["tasks"] == [{"task_id": "T1", "next_seq": 2, "assigned_attempt": 1,
                                    "forgotten": False}]
        # The stale owner's write: refused by the database, nothing of it written.
        with pytest.raises(Fenced) as e:
            await a.write(own_a, [{"op": "put_task", "task_id": "T2", "next_seq": 1,
                                   "assigned_attempt": 1, "forgotten": False},
                                  {"op": "put_command", "task_id": "T2", "seq": 1,
                                   "frame": "{}"}])
        assert e.value.code == "fenced"
        assert isinstance(e.value, FencedError) and isinstance(e.value, StoreError)
        assert (e.value.current_owner, e.value.current_epoch, e.value.epoch) == ("hub-1", 2, 1)
        assert not e.value.expired
        with pytest.raises(Fenced):
            await a.apply(own_a, [Frame("T1", 1, 1)])
        assert a.stats["fenced"] == 2
        # b writes fine; the old epoch matches no row.
        await b.write(own_b, [{"op": "delete_task", "task_id": "T1"}])
    with_stores(dsn, 2, body)
    assert sql(dsn, "SELECT count(*) FROM srp_tasks") == [(0,)]
    assert sql(dsn, "SELECT count(*) FROM srp_commands") == [(0,)]
    assert sql(dsn, "SELECT count(*) FROM srp_inbound") == [(0,)]
    # The fencing statement itself, with the stale epoch: 0 rows.
    assert sql(dsn, "SELECT 1 FROM srp_leases WHERE runner_id = 'R' AND owner = 'hub-0' "
                    "AND epoch = 1 AND expires_at > now() FOR SHARE") == []
    assert sql(dsn, "SELECT owner, epoch FROM srp_leases") == [("hub-1", 2)]


def test_epoch_never_goes_down(dsn: str) -> None:
    async def body(a: PgStore) -> None:
        await a.take_ownership("R")
        await a.take_ownership("R")
    with_stores(dsn, 1, body)
    with pytest.raises(psycopg.errors.RaiseException, match="only grows"):
        sql(dsn, "UPDATE srp_leases SET epoch = 1 WHERE runner_id = 'R'")
    # Another owner at the same epoch, or a deleted row (a new one would restart at 1):
    # both refused by the database.
    with pytest.raises(psycopg.errors.RaiseException, match="needs a higher epoch"):
        sql(dsn, "UPDATE srp_leases SET owner = 'hub-x' WHERE runner_id = 'R'")
    with pytest.raises(psycopg.errors.RaiseException, match="never deleted"):
        sql(dsn, "DELETE FROM srp_leases WHERE runner_id = 'R'")
    assert sql(dsn, "SELECT owner, epoch FROM srp_leases") == [("hub-0", 2)]


def test_takeover_waits_for_the_old_owners_transaction(dsn: str) -> None:
    """The lease row lock orders a takeover after a transaction in flight: the new
    owner's rows include what the old owner committed."""
    async def body(a: PgStore, b: PgStore) -> None:
        own_a, _, _ = await a.take_ownership("R")
        inside = asyncio.Event()
        release = asyncio.Event()

        async def slow_write() -> None:
            async def in_tx(cur: Any) -> None:
                inside.set()
                await release.wait()
            await a.write(own_a, [{"op": "put_task", "task_id": "T9", "next_seq": 4,
                                   "assigned_attempt": 1, "forgotten": False}], in_tx)

        writer = asyncio.ensure_future(slow_write())
        await inside.wait()
        takeover = asyncio.ensure_future(b.take_ownership("R"))
        await asyncio.sleep(0.3)
        assert not takeover.done()  # blocked on the lease row
        release.set()
        await writer
        own_b, rows, _ = await takeover
        assert own_b.epoch == 2
        assert [t["task_id"] for t in rows["tasks"]] == ["T9"]
    with_stores(dsn, 2, body)


def test_takeover_ends_a_stalled_owner_transaction(dsn: str) -> None:
    """A hub stopped inside a transaction holds the lease row lock (a raw session with
    no idle timeout stands for one stalled mid-pipeline, where no server timeout
    applies): the takeover ends it after a lease and goes on; it committed nothing."""
    stalled = psycopg.connect(dsn, autocommit=True, application_name="srp-hub/stalled")

    async def body(a: PgStore, b: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        stalled.execute("BEGIN")
        stalled.execute("SELECT 1 FROM srp_leases WHERE runner_id = 'R' FOR SHARE")
        stalled.execute("INSERT INTO srp_tasks VALUES ('R', 'ghost', 1, 1, false)")
        t0 = time.monotonic()
        own_b, rows, _ = await b.take_ownership("R")
        assert own_b.epoch == own.epoch + 1
        assert time.monotonic() - t0 < 3
        assert b.stats["reaped"] == 1
        assert rows["tasks"] == []
    try:
        with_stores(dsn, 2, body, lease_ms=300)
        with pytest.raises(psycopg.OperationalError):
            stalled.execute("COMMIT")
    finally:
        stalled.close()
    assert sql(dsn, "SELECT count(*) FROM srp_tasks") == [(0,)]


def test_expired_lease_is_fenced_and_not_renewed(dsn: str) -> None:
    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        await asyncio.sleep(0.4)
        with pytest.raises(Fenced) as e:
            await a.write(own, [])
        assert e.value.expired and e.value.current_epoch == own.epoch
        _, refused = await a.renew([own])
        assert refused == [own]
    with_stores(dsn, 1, body, lease_ms=200)


def test_renew_keeps_own_leases_and_reports_lost_ones(dsn: str) -> None:
    async def body(a: PgStore, b: PgStore) -> None:
        r1, _, _ = await a.take_ownership("R1")
        r2, _, _ = await a.take_ownership("R2")
        await b.take_ownership("R2")
        before = sql(dsn, "SELECT expires_at FROM srp_leases WHERE runner_id = 'R1'")[0][0]
        await asyncio.sleep(0.05)
        started, refused = await a.renew([r1, r2])
        assert refused == [r2]
        after = sql(dsn, "SELECT expires_at FROM srp_leases WHERE runner_id = 'R1'")[0][0]
        assert after > before
        lease = await a.lease("R2")
        assert lease is not None and (lease["owner"], lease["epoch"]) == ("hub-1", 2)
    with_stores(dsn, 2, body)


# --- exactly-once apply ----------------------------------------------------------------


async def _effect(cur: Any, new: List[Any]) -> None:
    await cur.executemany(
        "INSERT INTO srp_hub_progress (runner_id, task_id, attempt, seq, kind, hub_id) "
        "VALUES ('R', %s, %s, %s, 'state', 'h')", [(m.task_id, m.attempt, m.seq) for m in new])


def test_duplicate_apply_is_detected_and_its_effect_not_run(dsn: str) -> None:
    calls: List[List[int]] = []

    async def effect(cur: Any, new: List[Any]) -> None:
        calls.append([m.seq for m in new])
        await _effect(cur, new)

    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        new = await a.apply(own, [Frame("T", 1, s) for s in (1, 2, 3)], effect)
        assert [m.seq for m in new] == [1, 2, 3]
        new = await a.apply(own, [Frame("T", 1, s) for s in (2, 3, 4)], effect)
        assert [m.seq for m in new] == [4]
        new = await a.apply(own, [Frame("T", 1, 4), Frame("T", 2, 1)], effect)
        assert [(m.attempt, m.seq) for m in new] == [(2, 1)]
        assert a.stats["duplicates"] == 3
    with_stores(dsn, 1, body)
    assert calls == [[1, 2, 3], [4], [1]]
    assert sql(dsn, "SELECT attempt, seq FROM srp_hub_progress ORDER BY applied") == [
        (1, 1), (1, 2), (1, 3), (1, 4), (2, 1)]
    assert sql(dsn, "SELECT task_id, attempt, through FROM srp_inbound ORDER BY attempt") == [
        ("T", 1, 4), ("T", 2, 1)]
    # The effect's own unique key refuses a second row for the same frame.
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql(dsn, "INSERT INTO srp_hub_progress (runner_id, task_id, attempt, seq, kind, hub_id) "
                 "VALUES ('R', 'T', 1, 2, 'state', 'x')")


def test_failed_effect_rolls_back_the_position(dsn: str) -> None:
    async def boom(cur: Any, new: List[Any]) -> None:
        await _effect(cur, new)
        raise RuntimeError("the application failed")

    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        with pytest.raises(RuntimeError):
            await a.apply(own, [Frame("T", 1, 1), Frame("T", 1, 2)], boom)
        assert (await a.load_rows("R"))["inbound"] == []
        new = await a.apply(own, [Frame("T", 1, 1), Frame("T", 1, 2)], _effect)
        assert len(new) == 2
    with_stores(dsn, 1, body)
    assert sql(dsn, "SELECT seq FROM srp_hub_progress ORDER BY applied") == [(1,), (2,)]


# --- commands, rows, pruning, limits -------------------------------------------------


def test_commands_are_durable_rows_and_pruned_when_acknowledged(dsn: str) -> None:
    frames = [f'{{"type":"task.assign","task_id":"T","seq":{s}}}' for s in (1, 2, 3)]

    async def body(a: PgStore, b: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        await a.write(own, [{"op": "put_task", "task_id": "T", "next_seq": 4,
                             "assigned_attempt": 1, "forgotten": False}]
                      + [{"op": "put_command", "task_id": "T", "seq": s, "frame": f}
                         for s, f in zip((1, 2, 3), frames)])
        # Committed: a freshly connected reader sees them before anything is sent.
        assert sql(dsn, "SELECT seq, frame FROM srp_commands ORDER BY seq") == list(
            zip((1, 2, 3), frames))
        await a.apply(own, [Frame("T", 1, 1)], writes=[{"op": "delete_commands",
                                                        "task_id": "T", "through": 2}])
        own_b, rows, _ = await b.take_ownership("R")
        assert rows == {
            "tasks": [{"task_id": "T", "next_seq": 4, "assigned_attempt": 1, "forgotten": False}],
            "inbound": [{"task_id": "T", "attempt": 1, "through": 1}],
            "commands": [{"task_id": "T", "seq": 3, "frame": frames[2]}],
        }
        await b.write(own_b, [{"op": "put_task", "task_id": "T", "next_seq": 4,
                               "assigned_attempt": 1, "forgotten": True},
                              {"op": "delete_commands", "task_id": "T", "through": 3}])
        rows = await b.load_rows("R")
        assert rows["commands"] == [] and rows["tasks"][0]["forgotten"] is True
        await b.write(own_b, [{"op": "delete_task", "task_id": "T"}])
        assert await b.load_rows("R") == {"tasks": [], "inbound": [], "commands": []}
    with_stores(dsn, 2, body)


def test_per_runner_limits(dsn: str) -> None:
    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        cmds = [{"op": "put_command", "task_id": "T", "seq": s, "frame": "{}"} for s in (1, 2, 3)]
        await a.write(own, cmds)
        with pytest.raises(StoreLimitError) as e:
            await a.write(own, [{"op": "put_command", "task_id": "T", "seq": 4, "frame": "{}"}])
        assert e.value.code == "store_limit" and e.value.limit == 3
        assert "max_commands" in str(e.value)
        tasks = [{"op": "put_task", "task_id": f"T{i}", "next_seq": 1, "assigned_attempt": 1,
                  "forgotten": False} for i in range(3)]
        await a.write(own, tasks)
        with pytest.raises(StoreLimitError) as e:
            await a.write(own, [dict(tasks[0], task_id="T9")])
        assert e.value.code == "store_limit" and "max_tasks" in str(e.value)
        rows = await a.load_rows("R")
        assert len(rows["commands"]) == 3 and len(rows["tasks"]) == 3
    with_stores(dsn, 1, body, max_commands=3, max_tasks=3)


def test_unknown_write_is_refused(dsn: str) -> None:
    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        with pytest.raises(ValueError, match="unknown store write"):
            await a.write(own, [{"op": "drop_everything"}])
    with_stores(dsn, 1, body)


def test_server_crash_is_store_unavailable_then_recovers(pg_cluster: PgCluster, dsn: str) -> None:
    async def body(a: PgStore) -> None:
        own, _, _ = await a.take_ownership("R")
        await a.apply(own, [Frame("T", 1, 1)], _effect)
        pg_cluster.restart_immediate()
        with pytest.raises(StoreUnavailable) as e:
            await a.apply(own, [Frame("T", 1, 2)], _effect)
        assert e.value.code == "store_unavailable" and isinstance(e.value, StoreError)
        # The broken connection was dropped; the next transaction reconnects.
        new = await a.apply(own, [Frame("T", 1, 2)], _effect)
        assert [m.seq for m in new] == [2]
    with_stores(dsn, 1, body)
    assert sql(dsn, "SELECT seq FROM srp_hub_progress ORDER BY applied") == [(1,), (2,)]
