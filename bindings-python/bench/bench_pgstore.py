"""Figures of the PostgreSQL hub store (issue 28), rerunnable:

1. **Applied progress frames/s per hub process** with the store on: one ``hub serve``
   process; a load-generator process with ``--runners`` Python ``RunnerClient``s, each
   streaming ``task.progress`` frames as fast as the link lets it (durable
   acknowledgements: a frame is acknowledged only after its transaction committed).
   Measured from the database (rows of ``srp_hub_progress`` over time) and the hub
   process's CPU time. Batching: every transaction applies what arrived while the
   previous one ran (``--max-batch``, default 256); the mean batch size is printed.
2. **Failover time**: 2 hub processes behind a TCP proxy, the Rust runner
   (``stapel-runner connect``, fake harness, long tasks); the hub serving the runner is
   SIGKILLed (and replaced) ``--kills`` times; failover = from the kill to the first
   progress row applied afterwards (``applied_at``, the database's clock — same machine).
3. **Rows and bytes per runner at rest** after 1. and 2.: rows of the store's tables
   per runner, and their size (``pg_column_size`` of the rows; index and page overhead
   not included).

Run: ``.venv/bin/python bench/bench_pgstore.py`` (``--quick`` for a short run). Needs
PostgreSQL 15 (``/usr/lib/postgresql/15/bin``; a temp cluster with fsync on) and the
runner binary (``STAPEL_RUNNER_BIN`` or a cargo build, as the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import psycopg  # noqa: E402
from pgcluster import PgCluster  # noqa: E402


def load_generator(url: str, tokens: List[str], frames: int, payload_bytes: int) -> None:
    """(Child process) ``len(tokens)`` runners, each sending ``frames`` progress frames."""
    from stapel_runner_protocol import Hello, TaskProgress
    from stapel_runner_protocol.transport_ws import RunnerClient

    async def runner(i: int, token: str) -> None:
        client = RunnerClient(url, hello=Hello(project_id="bench", runner_version="1"),
                              auth_token=token, backoff_initial_ms=20, backoff_max_ms=200)
        await client.start()
        pad = "x" * payload_bytes
        for n in range(frames):
            await client.send(TaskProgress(task_id=f"T-{i}", attempt=1, kind="state",
                                           payload={"state": "running", "n": n, "pad": pad}))
        # wait until everything was acknowledged (the kept log is empty)
        while client.link.outbox_frames:
            await asyncio.sleep(0.05)
        await client.stop()

    async def main() -> None:
        await asyncio.gather(*(runner(i, t) for i, t in enumerate(tokens)))

    asyncio.run(main())


async def _hub(dsn: str, hub_id: str, token_file: Path, tmp: Path, extra: List[str]) -> Any:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stapel_runner_protocol.hub", "serve", "--store", dsn,
        "--hub-id", hub_id, "--port", "0", "--token-file", str(token_file), *extra,
        stdout=asyncio.subprocess.PIPE, stderr=open(tmp / f"{hub_id}.err", "wb"))
    assert proc.stdout is not None
    line = json.loads(await proc.stdout.readline())
    port = int(line["listening"].rsplit(":", 1)[1].rstrip("/"))
    return proc, port


def _count(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM srp_hub_progress").fetchone()
        return int(row[0]) if row else 0


async def throughput(pg: PgCluster, tmp: Path, runners: int, frames: int,
                     max_batch: int) -> Dict[str, Any]:
    dsn = pg.new_database("bench_tp")
    tokens = {f"tok-{i}": f"runner-{i}" for i in range(runners)}
    token_file = tmp / "tokens.json"
    token_file.write_text(json.dumps(tokens))
    proc, port = await _hub(dsn, "bench-hub", token_file, tmp, ["--max-batch", str(max_batch)])
    cpu0 = _cpu(proc.pid)
    gen = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--loadgen", f"ws://127.0.0.1:{port}/", str(frames),
        *tokens.keys())
    total = runners * frames
    samples: List[tuple[float, int]] = []
    t0 = time.monotonic()
    while True:
        n = await asyncio.to_thread(_count, dsn)
        samples.append((time.monotonic(), n))
        if n >= total or time.monotonic() - t0 > 600:
            break
        await asyncio.sleep(0.1)
    cpu1 = _cpu(proc.pid)
    await gen.wait()
    proc.send_signal(signal.SIGTERM)
    out, _ = await proc.communicate()
    stopped = [json.loads(x) for x in out.decode().splitlines() if '"stopped"' in x]
    counters = stopped[-1]["stopped"] if stopped else {}
    # steady state: from 10% to 90% of the frames
    lo = next(s for s in samples if s[1] >= total * 0.1)
    hi = next(s for s in samples if s[1] >= total * 0.9)
    rate = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else float("nan")
    return {"runners": runners, "frames": total, "frames_per_s": rate,
            "hub_cpu_s": cpu1 - cpu0, "hub_cpu_us_per_frame": (cpu1 - cpu0) / total * 1e6,
            "mean_batch": counters.get("applied", 0) / max(1, counters.get("batches", 1)),
            "dsn": dsn}


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


async def failover(pg: PgCluster, tmp: Path, kills: int) -> Dict[str, Any]:
    from test_pg_cluster import ClusterRun, runner_binary  # the tests' harness

    dsn = pg.new_database("bench_fo")
    (tmp / "fo").mkdir()
    run = ClusterRun(pg, dsn, tmp / "fo", runner_binary(), 1, n_hubs=2, delay_ms=10)
    await run.start()
    from stapel_runner_protocol.pghub_cli import enqueue

    await asyncio.to_thread(enqueue, dsn, [f"F-{i}" for i in range(kills * 40 + 40)])
    times: List[float] = []
    try:
        for _ in range(kills):
            before = await run.applied("F-")
            await run.wait_for("progress", lambda: _more(run, before + 20))
            hub = await run.serving_hub()
            killed_at = time.time()
            hub.live = False
            hub.proc.kill()
            await hub.proc.wait()
            run.hubs.remove(hub)
            await run.add_hub()
            deadline = time.monotonic() + 60
            while True:
                rows = await run.query("SELECT extract(epoch FROM min(applied_at)) FROM "
                                       "srp_hub_progress WHERE applied_at > to_timestamp(%s)",
                                       (killed_at,))
                if rows[0][0] is not None:
                    times.append(float(rows[0][0]) - killed_at)
                    break
                assert time.monotonic() < deadline, "no progress after the kill"
                await asyncio.sleep(0.02)
        # At rest: drop what is still queued, let the running tasks report, and wait
        # until every command was acknowledged.
        await run.query("DELETE FROM srp_hub_queue WHERE state = 'queued' RETURNING 1")

        async def quiet() -> bool:
            rows = await run.query("SELECT (SELECT count(*) FROM srp_hub_queue WHERE state = "
                                   "'assigned') + (SELECT count(*) FROM srp_commands)")
            return int(rows[0][0]) == 0
        await run.wait_for("rest", quiet, timeout=120)
        await asyncio.sleep(1.0)
    finally:
        await run.stop()
    times.sort()
    return {"kills": kills, "median_ms": statistics.median(times) * 1000,
            "p90_ms": times[max(0, int(len(times) * 0.9) - 1)] * 1000,
            "max_ms": times[-1] * 1000, "dsn": dsn}


async def _more(run: Any, n: int) -> bool:
    return bool(await run.applied("F-") >= n)


def at_rest(dsn: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as c:
        runners = [r for (r,) in c.execute("SELECT runner_id FROM srp_leases ORDER BY runner_id")]
        for table in ("srp_leases", "srp_tasks", "srp_inbound", "srp_commands"):
            row = c.execute(f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t"
                            ).fetchone()
            assert row is not None
            out[table] = {"rows_per_runner": int(row[0]) / max(1, len(runners)),
                          "bytes_per_runner": int(row[1]) / max(1, len(runners))}
    out["runners"] = len(runners)
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--loadgen":
        load_generator(sys.argv[2], sys.argv[4:], int(sys.argv[3]), 64)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runners", type=int, default=8)
    p.add_argument("--frames", type=int, default=5000, help="per runner")
    p.add_argument("--max-batch", type=int, default=256)
    p.add_argument("--kills", type=int, default=20)
    a = p.parse_args()
    if a.quick:
        a.frames, a.kills = 1000, 5
    tmp = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    pg = PgCluster(fsync=True).start()
    try:
        print(f"load average before: {os.getloadavg()}", flush=True)
        tp = asyncio.run(throughput(pg, tmp, a.runners, a.frames, a.max_batch))
        print("throughput:", json.dumps({k: v for k, v in tp.items() if k != "dsn"}), flush=True)
        print("at rest after the throughput run (each runner streamed one task, never "
              "reported):", json.dumps(at_rest(tp["dsn"])), flush=True)
        fo = asyncio.run(failover(pg, tmp, a.kills))
        print("failover:", json.dumps({k: v for k, v in fo.items() if k != "dsn"}), flush=True)
        print("at rest after the failover run (tasks reported and forgotten):",
              json.dumps(at_rest(fo["dsn"])), flush=True)
        print(f"load average after: {os.getloadavg()}; hub CPU {resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.1f}s user (children)")
    finally:
        pg.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
