"""Seed-only peers, both directions: the peers in ``conformance/peers/`` are written with
stapel-runner-protocol 0.1.1's public names only and run under the published 0.1.1
package (its wheel unpacked by ``scripts/diff-011-api`` into
``.pip-cache/ref-0.1.1/unpacked``, put first on ``PYTHONPATH``) and under this package.

* A seed-only runner against our hubs (the CLI hub and a ``HubServer``): it sends no
  ``attempt`` and never acknowledges; every report is matched to its assignment (the
  core maps the attempt), the hub's kept command log is trimmed by the runner's plain
  pongs (bounded memory), the hub exits. More than 40,960 frames (10× the kept-log
  bound) in one run, with cuts.
* A seed-only hub against our ``RunnerClient``: plain pongs, no acks, replay from
  ``hello.resume``, TCP aborted every N frames; every task reports once and seqs 1..n
  are applied once (the hub's exit status says so).

Under this package the seed-only runner's own ``ConnectionState("runner")`` keeps at
most ``max_outbox_frames`` (4,096) frames — it never trims it (0.1.1 had no bound) — so
its runs under this package stay below that.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from stapel_runner_protocol import (
    Hello,
    TaskAssign,
    TaskProgress,
    TaskReportMessage,
)

pytest.importorskip("websockets") if not os.environ.get("CI") else __import__("websockets")

from proxy import Proxy  # noqa: E402
from stapel_runner_protocol.hub import task_assign  # noqa: E402
from stapel_runner_protocol.transport_ws import HubServer, RunnerClient  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent.parent / "conformance" / "peers"
REF = HERE.parent / ".pip-cache" / "ref-0.1.1" / "unpacked"
TOKEN = "seed-only-token"
USAGE = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0}

#: The kept-log bound (the core's default ``max_outbox_frames``) and 10× it.
KEPT_LOG_BOUND = 4096
MANY_FRAMES = 10 * KEPT_LOG_BOUND


def _env(flavour: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if flavour == "0.1.1":
        if not (REF / "stapel_runner_protocol").is_dir():
            if os.environ.get("CI"):
                pytest.fail(f"the 0.1.1 wheel is not unpacked at {REF} "
                            "(scripts/diff-011-api --fetch-only)")
            pytest.skip("the published 0.1.1 package is not unpacked (scripts/diff-011-api)")
        env["PYTHONPATH"] = str(REF)
    return env


def _check_flavour(flavour: str) -> None:
    """The peer really runs the package it is meant to (0.1.1's is pure Python)."""
    out = subprocess.run([sys.executable, "-c", "import stapel_runner_protocol as s, os;"
                          "print(os.path.dirname(s.__file__))"], env=_env(flavour),
                         capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    assert (out == str(REF / "stapel_runner_protocol")) == (flavour == "0.1.1"), out


def _lines(text: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def _first_line(proc: "asyncio.subprocess.Process") -> Dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    first: Dict[str, Any] = json.loads(line)
    return first


# --- a seed-only runner against our hubs ------------------------------------------------

RUNNER_RUNS = {
    # flavour: (tasks, progress frames per task)
    "0.1.1": (20, 2100),  # 42,020 frames
    "ours": (3, 1300),    # 3,903 frames: below the peer's own kept-log bound here
}


@pytest.mark.parametrize("flavour", sorted(RUNNER_RUNS))
def test_a_seed_only_runner_against_the_cli_hub(flavour: str, tmp_path: Path) -> None:
    """``python -m stapel_runner_protocol.hub --exit-after-reports`` serves a seed-only
    runner to the end: every progress frame once, every report on the attempt it was
    assigned, and the hub exits 0. (The peer's reports carry no ``usage``, which the
    seed's schema requires: the hub takes its frames without validation.)"""
    _check_flavour(flavour)
    tasks, progress = RUNNER_RUNS[flavour]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"task_id": f"S-{i}", "attempt": 1 + i % 2}) + "\n"
                                 for i in range(tasks)), encoding="utf-8")

    async def main() -> Tuple[int, str, str, int, str]:
        hub = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stapel_runner_protocol.hub", "--port", "0",
            "--token-file", str(token_file), "--tasks", str(task_file),
            "--exit-after-reports", "--session-config", '{"validate": false}',
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        runner: Optional[asyncio.subprocess.Process] = None
        try:
            url = (await _first_line(hub))["listening"]
            runner = await asyncio.create_subprocess_exec(
                sys.executable, str(PEERS / "seed_only_runner.py"), "--url", url,
                "--token-file", str(token_file), "--progress", str(progress),
                "--exit-after", str(tasks), env=_env(flavour),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            hub_out, hub_err = await asyncio.wait_for(hub.communicate(), 240)
            run_out, run_err = await asyncio.wait_for(runner.communicate(), 30)
            assert hub.returncode is not None and runner.returncode is not None
            return hub.returncode, hub_out.decode(), hub_err.decode(), runner.returncode, \
                run_out.decode() + run_err.decode()
        finally:
            for p in (hub, runner):
                if p is not None and p.returncode is None:
                    p.kill()

    hub_rc, hub_out, hub_err, runner_rc, runner_text = asyncio.run(main())
    assert hub_rc == 0, hub_err[-2000:]
    assert runner_rc == 0, runner_text[-2000:]
    lines = _lines(hub_out)
    seen = [(p["progress"]["task_id"], p["progress"]["attempt"], p["progress"]["seq"])
            for p in lines if "progress" in p]
    assert len(seen) == len(set(seen)) == tasks * progress >= (
        MANY_FRAMES if flavour == "0.1.1" else 0)
    reports = {r["report"]["task_id"]: r["report"] for r in lines if "report" in r}
    assert sorted(reports) == sorted(f"S-{i}" for i in range(tasks))
    for i in range(tasks):
        # matched to its assignment: the attempt the hub assigned, after its progress
        r = reports[f"S-{i}"]
        assert (r["attempt"], r["seq"], r["report"]["status"]) == (1 + i % 2, progress + 1, "done")


CUT_RUNS = {
    "0.1.1": (10, 4200),  # 42,010 frames, 9 cuts
    "ours": (3, 1300),
}


@pytest.mark.parametrize("flavour", sorted(CUT_RUNS))
def test_a_seed_only_runner_against_a_hub_server_with_cuts(flavour: str, tmp_path: Path) -> None:
    """A ``HubServer`` serves a seed-only runner one task at a time; between tasks the
    connection is cut (the proxy aborts the TCP connection, or the hub closes the
    socket). Every progress frame arrives once and in order, every report on its
    attempt; the kept command log is trimmed by the runner's plain pongs (implied
    acknowledgements), so the hub's memory stays bounded. Cuts happen while the runner
    is idle: a seed-only runner re-sends only unfinished tasks after a reconnect, so a
    report lost in flight would be lost for good — that is the 0.1.1 runner's rule, not
    the hub's."""
    _check_flavour(flavour)
    tasks, progress = CUT_RUNS[flavour]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")

    async def main() -> Dict[str, Any]:
        server = HubServer(tokens={TOKEN: "R"}, ping_interval_ms=50, validate=False)
        async with server.serve("127.0.0.1", 0) as ws_server:
            proxy = Proxy(ws_server.sockets[0].getsockname()[1])
            url = f"ws://127.0.0.1:{await proxy.start()}/"
            hub = server.runner("R")
            runner = await asyncio.create_subprocess_exec(
                sys.executable, str(PEERS / "seed_only_runner.py"), "--url", url,
                "--token-file", str(token_file), "--progress", str(progress),
                "--exit-after", str(tasks), env=_env(flavour),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            kept: List[int] = []
            applied: Dict[str, List[int]] = {}
            reports: Dict[str, Tuple[Optional[int], int]] = {}
            hellos = 0
            try:
                for i in range(tasks):
                    task_id = f"S-{i}"
                    await hub.send(task_assign(task_id, attempt=1 + i % 2))
                    while task_id not in reports:
                        kind, value = await asyncio.wait_for(hub.recv(), 60)
                        if kind == "hello":
                            hellos += 1
                        elif kind == "received" and isinstance(value, TaskProgress):
                            assert value.attempt == 1 + i % 2
                            applied.setdefault(value.task_id, []).append(value.seq)
                        elif kind == "received" and isinstance(value, TaskReportMessage):
                            reports[value.task_id] = (value.attempt, value.seq)
                        elif kind in ("peer_error", "inbound_gap", "stalled"):
                            raise AssertionError(f"{kind}: {value}")
                    await asyncio.sleep(0.12)  # a ping or two: the runner's plain pongs
                    kept.append(hub.link.outbox_frames)
                    if i < tasks - 1:
                        if i % 2 == 0:
                            proxy.cut()
                        else:
                            await hub.close()
                run_out, run_err = await asyncio.wait_for(runner.communicate(), 30)
            finally:
                if runner.returncode is None:
                    runner.kill()
                await proxy.close()
            return {"rc": runner.returncode, "out": run_out.decode() + run_err.decode(),
                    "kept": kept, "applied": applied, "reports": reports, "hellos": hellos,
                    "stats": hub.link.session_stats, "cuts": proxy.cuts}

    got = asyncio.run(main())
    assert got["rc"] == 0, got["out"][-2000:]
    assert got["hellos"] >= tasks  # one connection per task: cut after every one
    for i in range(tasks):
        assert got["applied"][f"S-{i}"] == list(range(1, progress + 1))
        assert got["reports"][f"S-{i}"] == (1 + i % 2, progress + 1)
    assert sum(len(v) for v in got["applied"].values()) >= (
        MANY_FRAMES if flavour == "0.1.1" else 0)
    # bounded: each assignment was dropped from the kept log once a pong proved it
    # received (the runner never acknowledges; after its last report it stops reading)
    assert got["kept"][:-1] == [0] * (tasks - 1) and got["kept"][-1] <= 1, got["kept"]
    if flavour == "0.1.1":  # our package's runner session acknowledges explicitly
        assert got["stats"]["implied_acked"] >= 1


# --- a seed-only hub against our RunnerClient -------------------------------------------

HUB_RUNS = {
    # flavour: (tasks, progress frames per task, cut every N applied frames)
    "0.1.1": (20, 2100, 7000),  # 42,020 frames, 6 cuts
    "ours": (20, 2100, 9000),   # 42,020 frames, 4 cuts
}


async def _runner_app(client: RunnerClient, progress: int, counts: Dict[str, int]) -> None:
    async for kind, value in client.events():
        if kind == "received" and isinstance(value, TaskAssign):
            for i in range(progress):
                await client.send(TaskProgress(task_id=value.task_id, attempt=value.attempt,
                                               kind="state", payload={"step": i}))
            await client.send(TaskReportMessage(
                task_id=value.task_id, attempt=value.attempt,
                report={"schema_version": 1, "task_id": value.task_id, "status": "done",
                        "usage": USAGE}))
            counts["tasks"] += 1
        elif kind == "stalled":
            counts["stalls"] += 1
        elif kind == "connected":
            counts["connects"] += 1


@pytest.mark.parametrize("flavour", sorted(HUB_RUNS))
def test_our_runner_client_against_a_seed_only_hub(flavour: str, tmp_path: Path) -> None:
    _check_flavour(flavour)
    tasks, progress, cut_every = HUB_RUNS[flavour]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")

    async def main() -> Dict[str, Any]:
        args = ["--port", "0", "--token-file", str(token_file), "--tasks", str(tasks),
                "--inflight", "4"]
        if cut_every:
            args += ["--cut-every", str(cut_every)]
        hub = await asyncio.create_subprocess_exec(
            sys.executable, str(PEERS / "seed_only_hub.py"), *args, env=_env(flavour),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        counts = {"tasks": 0, "stalls": 0, "connects": 0}
        client: Optional[RunnerClient] = None
        app: Optional["asyncio.Task[None]"] = None
        try:
            url = (await _first_line(hub))["listening"]
            client = RunnerClient(url, hello=Hello(project_id="p", runner_version="1"),
                                  auth_token=lambda: token_file.read_text().strip(),
                                  backoff_initial_ms=20, backoff_max_ms=100)
            await client.start()
            app = asyncio.ensure_future(_runner_app(client, progress, counts))
            out, err = await asyncio.wait_for(hub.communicate(), 240)
            stats = dict(client.link.session_stats, kept=client.link.outbox_frames)
        finally:
            if hub.returncode is None:
                hub.kill()
            if app is not None:
                app.cancel()
            if client is not None:
                await client.stop()
        lines = _lines(out.decode())
        return {"rc": hub.returncode, "err": err.decode(), "done": lines[-1].get("done"),
                "reports": [x["report"] for x in lines if "report" in x], "counts": counts,
                "stats": stats}

    got = asyncio.run(main())
    assert got["rc"] == 0, (got["done"], got["err"][-2000:])
    done = got["done"]
    assert done["reports"] == tasks and done["gaps"] == 0
    assert done["progress"] == tasks * progress >= (MANY_FRAMES if cut_every else 0)
    assert sorted(r["task_id"] for r in got["reports"]) == sorted(f"S-{i}" for i in range(tasks))
    if cut_every:
        assert done["cuts"] == (tasks * (progress + 1)) // cut_every
        assert got["counts"]["connects"] == done["cuts"] + 1
    # bounded: the hub never acknowledges; its plain pongs to the probe pings trimmed
    # the kept log (the client never held more than the bound)
    assert got["stats"]["implied_acked"] > 0 and got["stats"]["probes"] > 0
    assert got["stats"]["kept"] <= KEPT_LOG_BOUND
