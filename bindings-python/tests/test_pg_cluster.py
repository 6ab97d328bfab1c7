"""Hub processes failing over through PostgreSQL (issue 28 §4), end to end and for real:
two or three ``python -m stapel_runner_protocol.hub serve`` processes over one database
(tests/pgcluster.py: Debian's PostgreSQL 15), a TCP proxy that sends each new connection
to a live hub at random (seeded), and the Rust runner ``stapel-runner connect`` (its
built-in fake harness) taking the tasks ``hub enqueue`` queued.

Seeded schedules: each enqueues a batch of tasks and, once the batch's progress reached
a seeded point, injects one fault, in rotation —

* ``kill``: the hub serving the runner is SIGKILLed (a fresh hub process replaces it);
* ``stop``: it is SIGSTOPped past its lease; the runner reconnects through the proxy to
  another hub, which takes it over (a higher epoch) and progress resumes; then SIGCONT:
  the old hub's writes for the runner are refused by the database (its ``fenced``
  event names its stale epoch and the newer one — it tried);
* ``pg_restart``: ``pg_ctl restart -m immediate`` mid-stream (hubs report
  ``store_unavailable``, the runner reconnects, work resumes);
* ``cut``: the proxy cuts every connection;
* ``none``.

The oracle, per task of the batch (``hub status``): exactly one attempt; its applied
seqs are exactly 1..n in applied order (each ``(task, attempt, seq)`` once — the
database's unique key — and none lost); one report, at seq n + 1, ``done``; n the same
for every task (the fake harness's fixed script). No acknowledgement went out for an
uncommitted frame: the runner drops a frame once acknowledged, so such a frame, lost with
its hub, would be a gap (or a missing report), which the oracle refuses. At the end every
command was acknowledged and pruned (no ``srp_commands`` row).

Knobs: ``STAPEL_PG_SCHEDULES`` (default 100), ``STAPEL_PG_SEED`` (default 1),
``STAPEL_PG_SOAK=N`` (N schedules instead, for a longer run). The runner binary is
``$STAPEL_RUNNER_BIN``, else ``cargo build --locked -p stapel-runner`` (debug, honouring
``CARGO_TARGET_DIR``) builds it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgcluster import PgCluster, pg_cluster  # noqa: E402,F401  (the fixture)

import psycopg  # noqa: E402

from stapel_runner_protocol.pghub_cli import enqueue, status  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LEASE = {"lease_ms": 1500, "renew_every_ms": 300, "margin_ms": 500, "retry_ms": 100}
CAPACITY = 4
FAULTS = ("kill", "stop", "pg_restart", "cut", "none")
#: Why a hub may drop a runner's socket in these schedules.
EXPECTED_DROPS = {"store_unavailable", "lease_expired", "fenced", "replaced", "stopped"}


def runner_binary() -> Path:
    env = os.environ.get("STAPEL_RUNNER_BIN")
    if env:
        path = Path(env)
        if not path.is_file():
            pytest.fail(f"STAPEL_RUNNER_BIN={env} is not a file", pytrace=False)
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    try:
        subprocess.run(["cargo", "build", "--locked", "-q", "-p", "stapel-runner"], cwd=REPO,
                       check=True, timeout=1800)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"the runner binary is needed: set STAPEL_RUNNER_BIN or make cargo "
                    f"available ({exc})", pytrace=False)
    return target / "debug" / "stapel-runner"


class Hub:
    """One ``hub serve`` process and the JSON lines it printed."""

    def __init__(self, hub_id: str, proc: "asyncio.subprocess.Process") -> None:
        self.hub_id = hub_id
        self.proc = proc
        self.port = 0
        self.live = True
        self.events: List[Dict[str, Any]] = []
        self.listening = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            event = json.loads(line)
            self.events.append(event)
            if "listening" in event:
                self.port = int(event["listening"].rsplit(":", 1)[1].rstrip("/"))
                self.listening.set()

    def fenced(self, runner_id: str = "runner") -> List[Dict[str, Any]]:
        return [e["fenced"] for e in self.events
                if "fenced" in e and e["fenced"]["runner_id"] == runner_id]


class Proxy:
    """Each new connection goes to a live hub chosen by the seeded generator; ``cut``
    closes every relayed connection."""

    def __init__(self, hubs: List[Hub], rng: random.Random) -> None:
        self.hubs = hubs
        self.rng = rng
        self.port = 0
        self.pairs: Set[Tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.server: Optional[asyncio.AbstractServer] = None
        self.connections: Dict[str, int] = {}

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        live = [h for h in self.hubs if h.live and h.port]
        if not live:
            w.close()
            return
        hub = self.rng.choice(live)
        try:
            hr, hw = await asyncio.open_connection("127.0.0.1", hub.port)
        except OSError:
            w.close()
            return
        self.connections[hub.hub_id] = self.connections.get(hub.hub_id, 0) + 1
        pair = (w, hw)
        self.pairs.add(pair)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(r, hw), pipe(hr, w))
        self.pairs.discard(pair)

    def cut(self) -> None:
        for a, b in list(self.pairs):
            for w in (a, b):
                t = w.transport
                if t is not None:
                    t.abort()
        self.pairs.clear()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.cut()


class ClusterRun:
    """The processes of one test run."""

    def __init__(self, pg: PgCluster, dsn: str, tmp: Path, runner_bin: Path, seed: int,
                 n_hubs: int, delay_ms: int = 3) -> None:
        self.delay_ms = delay_ms
        self.pg, self.dsn, self.tmp, self.runner_bin = pg, dsn, tmp, runner_bin
        self.rng = random.Random(seed)
        self.n_hubs = n_hubs
        self.hubs: List[Hub] = []
        self.all_hubs: List[Hub] = []
        self.proxy = Proxy(self.hubs, random.Random(seed * 7919 + 1))
        self.runner: Optional["asyncio.subprocess.Process"] = None
        self.token = tmp / "token"
        self.token.write_text("cluster-token\n")
        self.next_hub = 0
        self.log: List[str] = []

    async def add_hub(self) -> Hub:
        self.next_hub += 1
        hub_id = f"hub-{self.next_hub}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stapel_runner_protocol.hub", "serve", "--store", self.dsn,
            "--hub-id", hub_id, "--port", "0", "--token-file", str(self.token),
            "--capacity", str(CAPACITY), "--lease-config", json.dumps(LEASE),
            "--session-config", json.dumps({"ping_interval_ms": 300, "peer_timeout_ms": 1200}),
            stdout=asyncio.subprocess.PIPE, stderr=open(self.tmp / f"{hub_id}.err", "wb"))
        hub = Hub(hub_id, proc)
        await asyncio.wait_for(hub.listening.wait(), 30)
        self.hubs.append(hub)
        self.all_hubs.append(hub)
        return hub

    async def start(self) -> None:
        for _ in range(self.n_hubs):
            await self.add_hub()
        await self.proxy.start()
        state = self.tmp / "runner-state"
        state.mkdir()
        self.runner = await asyncio.create_subprocess_exec(
            str(self.runner_bin), "connect", "--url", f"ws://127.0.0.1:{self.proxy.port}/",
            "--token-file", str(self.token), "--state-dir", str(state),
            "--max-tasks", str(CAPACITY), "--script", "happy-path", "--delay-ms", str(self.delay_ms),
            "--backoff-initial-ms", "20", "--backoff-max-ms", "300", "--no-pid-namespace",
            "--session-config", json.dumps({"ping_interval_ms": 300, "peer_timeout_ms": 1200}),
            stdout=open(self.tmp / "runner.out", "wb"), stderr=open(self.tmp / "runner.err", "wb"))

    async def stop(self) -> None:
        if self.runner is not None and self.runner.returncode is None:
            self.runner.kill()
            await self.runner.wait()
        for hub in self.all_hubs:
            if hub.proc.returncode is None:
                try:
                    hub.proc.send_signal(signal.SIGCONT)
                    hub.proc.kill()
                except ProcessLookupError:
                    pass
                await hub.proc.wait()
            hub.reader.cancel()
        await self.proxy.close()

    # what the database says -----------------------------------------------------------

    async def query(self, sql: str, params: Any = None) -> List[Tuple[Any, ...]]:
        def run() -> List[Tuple[Any, ...]]:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=3) as c:
                return list(c.execute(sql, params).fetchall())
        while True:
            try:
                return await asyncio.to_thread(run)
            except psycopg.OperationalError:
                await asyncio.sleep(0.1)  # the server is restarting

    async def applied(self, prefix: str) -> int:
        rows = await self.query("SELECT count(*) FROM srp_hub_progress WHERE task_id LIKE %s",
                                (prefix + "%",))
        return int(rows[0][0])

    async def owner(self) -> Optional[Tuple[str, int]]:
        rows = await self.query("SELECT owner, epoch FROM srp_leases WHERE runner_id = 'runner'")
        return (rows[0][0], int(rows[0][1])) if rows else None

    def hub(self, hub_id: str) -> Optional[Hub]:
        return next((h for h in self.hubs if h.hub_id == hub_id), None)

    async def wait_for(self, what: str, check: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not await check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; log: {self.log[-20:]}; "
                                     f"{self.diagnostics()}")
            await asyncio.sleep(0.05)

    def diagnostics(self) -> str:
        out = []
        for h in self.all_hubs:
            out.append(f"{h.hub_id} live={h.live} rc={h.proc.returncode} "
                       f"events={[e for e in h.events if 'stopped' not in e][-6:]}")
        try:
            out.append("runner.err: " + (self.tmp / "runner.err").read_text()[-1500:])
        except OSError:
            pass
        return "\n".join(out)

    # faults ---------------------------------------------------------------------------

    async def serving_hub(self) -> Hub:
        async def known() -> bool:
            o = await self.owner()
            return o is not None and self.hub(o[0]) is not None
        await self.wait_for("a hub serving the runner", known)
        o = await self.owner()
        assert o is not None
        hub = self.hub(o[0])
        assert hub is not None
        return hub

    async def fault(self, kind: str, prefix: str) -> None:
        self.log.append(f"{prefix}: {kind}")
        if kind == "kill":
            hub = await self.serving_hub()
            hub.live = False
            hub.proc.kill()
            await hub.proc.wait()
            self.hubs.remove(hub)
            await self.add_hub()
        elif kind == "stop":
            await self.stop_past_lease(prefix)
        elif kind == "pg_restart":
            await asyncio.to_thread(self.pg.restart_immediate)
        elif kind == "cut":
            self.proxy.cut()

    async def stop_past_lease(self, prefix: str) -> None:
        hub = await self.serving_hub()
        own = await self.owner()
        assert own is not None
        stopped_at = time.monotonic()
        hub.live = False
        hub.proc.send_signal(signal.SIGSTOP)
        before = await self.applied(prefix)

        async def taken_over() -> bool:
            o = await self.owner()
            return o is not None and o[0] != hub.hub_id and o[1] > own[1]
        await self.wait_for(f"a takeover from stopped {hub.hub_id}", taken_over)

        async def resumed() -> bool:
            return await self.applied(prefix) > before or await self.batch_done(prefix)
        await self.wait_for("progress after the takeover", resumed)
        rest = LEASE["lease_ms"] / 1000 - (time.monotonic() - stopped_at)
        if rest > 0:
            await asyncio.sleep(rest + 0.1)  # past the lease, whatever happened first
        hub.proc.send_signal(signal.SIGCONT)
        hub.live = True

        async def refused() -> bool:
            return any(f["epoch"] == own[1] for f in hub.fenced())
        await self.wait_for(f"{hub.hub_id}'s refused write with its stale epoch {own[1]}", refused)
        f = next(f for f in hub.fenced() if f["epoch"] == own[1])
        assert f["code"] == "fenced"
        # The database refused: its lease row names a newer epoch (or the lease expired).
        assert f["expired"] or (f["current_epoch"] is not None and f["current_epoch"] > own[1])
        self.log.append(f"{prefix}: {hub.hub_id} fenced at epoch {own[1]} during "
                        f"{f['during']} (current {f['current_owner']}@{f['current_epoch']})")

    async def batch_done(self, prefix: str) -> bool:
        rows = await self.query("SELECT count(*) FILTER (WHERE state <> 'reported'), count(*) "
                                "FROM srp_hub_queue WHERE task_id LIKE %s", (prefix + "%",))
        return int(rows[0][0]) == 0

    # one schedule ---------------------------------------------------------------------

    async def schedule(self, seed: int, baseline: List[int]) -> str:
        rng = random.Random(seed)
        prefix = f"s{seed}-"
        n_tasks = rng.randint(2, 7)
        fault = FAULTS[seed % len(FAULTS)]
        ids = [f"{prefix}{i}" for i in range(n_tasks)]
        await asyncio.to_thread(enqueue, self.dsn, ids)
        per_task = baseline[0] if baseline else 20
        trigger = rng.randint(1, max(1, n_tasks * per_task // 2))

        async def reached() -> bool:
            return await self.applied(prefix) >= trigger or await self.batch_done(prefix)
        await self.wait_for(f"{prefix} progress {trigger}", reached)
        await self.fault(fault, prefix)

        async def done() -> bool:
            return await self.batch_done(prefix)
        await self.wait_for(f"{prefix} all {n_tasks} reports", done, timeout=90)
        self.check(prefix, ids, baseline)
        return fault

    def check(self, prefix: str, ids: List[str], baseline: List[int]) -> None:
        lines = [s for s in status(self.dsn) if s["task_id"].startswith(prefix)]
        by_task: Dict[str, List[Dict[str, Any]]] = {}
        for s in lines:
            by_task.setdefault(s["task_id"], []).append(s)
        assert sorted(by_task) == sorted(ids)
        with psycopg.connect(self.dsn, autocommit=True) as c:
            report_seqs: Dict[str, int] = dict(c.execute(
                "SELECT task_id, seq FROM srp_hub_reports WHERE task_id LIKE %s",
                (prefix + "%",)).fetchall())
        for task_id, attempts in by_task.items():
            assert len(attempts) == 1, (task_id, attempts)
            a = attempts[0]
            assert a["attempt"] == 1 and a["state"] == "reported", a
            n = len(a["seqs"])
            assert a["seqs"] == list(range(1, n + 1)), (task_id, a["seqs"], self.log[-5:])
            assert a["report"] is not None and a["report"]["status"] == "done", a
            assert report_seqs[task_id] == n + 1, (task_id, report_seqs[task_id], n)
            if not baseline:
                baseline.append(n)
            assert n == baseline[0], (task_id, n, baseline)


def _schedules() -> Tuple[int, int]:
    soak = os.environ.get("STAPEL_PG_SOAK")
    count = int(soak) if soak else int(os.environ.get("STAPEL_PG_SCHEDULES", "100"))
    return int(os.environ.get("STAPEL_PG_SEED", "1")), count


def test_hub_cluster_seeded_schedules(pg_cluster: PgCluster, tmp_path: Path) -> None:
    first, count = _schedules()
    runner_bin = runner_binary()
    dsn = pg_cluster.new_database("cluster")
    started = time.monotonic()

    async def main() -> Dict[str, int]:
        run = ClusterRun(pg_cluster, dsn, tmp_path, runner_bin, first, n_hubs=3)
        await run.start()
        faults: Dict[str, int] = {}
        baseline: List[int] = []
        try:
            for seed in range(first, first + count):
                fault = await run.schedule(seed, baseline)
                faults[fault] = faults.get(fault, 0) + 1

            async def pruned() -> bool:
                rows = await run.query("SELECT count(*) FROM srp_commands")
                return int(rows[0][0]) == 0
            await run.wait_for("every command acknowledged and pruned", pruned, timeout=20)
            fenced = sum(len(h.fenced()) for h in run.all_hubs)
            faults["fenced_refusals"] = fenced
            # Every drop has a store reason (no application or hub bug hides behind a
            # reconnect), and no hub logged a traceback.
            codes = {e["dropped"]["code"] for h in run.all_hubs for e in h.events
                     if "dropped" in e}
            assert codes <= EXPECTED_DROPS, codes - EXPECTED_DROPS
            for err in sorted(tmp_path.glob("*.err")):
                text = err.read_text(errors="replace")
                assert "Traceback" not in text, (err.name, text[-3000:])
            faults["connections"] = sum(run.proxy.connections.values())
            print("\n".join(l for l in run.log if "fenced" in l))
        except BaseException:
            print("\n".join(run.log[-30:]), file=sys.stderr)
            raise
        finally:
            await run.stop()
        return faults

    faults = asyncio.run(main())
    rows = psycopg.connect(dsn, autocommit=True).execute(
        "SELECT count(*), count(DISTINCT task_id) FROM srp_hub_progress").fetchone()
    assert rows is not None
    print(f"\npg cluster: {count} schedules (seeds {first}..{first + count - 1}) in "
          f"{time.monotonic() - started:.0f}s: {rows[1]} tasks, {rows[0]} progress frames "
          f"applied once each; faults {faults}")
    if count >= len(FAULTS):
        assert faults.get("stop", 0) >= 1 and faults["fenced_refusals"] >= faults["stop"]


def test_cli_enqueue_and_status(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """The CLI's ``enqueue``/``status`` as operators run them (no runner: queued tasks)."""
    dsn = pg_cluster.new_database("cli")
    hub = [sys.executable, "-m", "stapel_runner_protocol.hub"]
    out = subprocess.run([*hub, "enqueue", "--store", dsn, "A", "B"], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == {"enqueued": 2, "already": 0}
    out = subprocess.run([*hub, "enqueue", "--store", dsn, "B", "C"], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == {"enqueued": 1, "already": 1}
    out = subprocess.run([*hub, "status", "--store", dsn], capture_output=True, text=True,
                         check=True).stdout
    assert [json.loads(line) for line in out.splitlines()] == [
        {"task_id": t, "attempt": None, "state": "queued", "runner_id": None, "seqs": [],
         "report": None} for t in ("A", "B", "C")]
    bad = subprocess.run([*hub, "status", "--store", "host=/nonexistent dbname=x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "store_unavailable" in bad.stderr
