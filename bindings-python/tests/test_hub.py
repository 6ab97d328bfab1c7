"""The reference hub (``python -m stapel_runner_protocol.hub``): a Python runner over
``RunnerConnection`` takes its assignment, reports progress and a report, and the hub
prints them and exits; a wrong token is refused before the upgrade."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any, Dict, List

import os

import pytest

try:
    import websockets  # noqa: F401
except ImportError:  # pragma: no cover
    if os.environ.get("CI"):
        pytest.fail("websockets is not installed, and CI is set: these tests must run",
                    pytrace=False)
    pytest.skip("websockets is not installed", allow_module_level=True)

from stapel_runner_protocol import Hello, TaskAssign, TaskProgress, TaskReportMessage  # noqa: E402
from stapel_runner_protocol.hub import run_hub, task_assign  # noqa: E402
from stapel_runner_protocol.transport_ws import RunnerConnection  # noqa: E402

ZERO = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0}


async def _url(out: io.StringIO) -> str:
    for _ in range(500):
        first = out.getvalue().split("\n", 1)[0]
        if first:
            return str(json.loads(first)["listening"])
        await asyncio.sleep(0.01)
    raise AssertionError("the hub did not print its address")


def test_hub_assigns_prints_progress_and_reports_then_exits() -> None:
    async def scenario() -> Dict[str, Any]:
        out = io.StringIO()
        hub = asyncio.ensure_future(run_hub("127.0.0.1", 0, "tok", [task_assign("T-1", "do it")],
                                            exit_after_reports=True, out=out))
        url = await _url(out)
        refused = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                   auth_token="wrong")
        with pytest.raises(Exception) as refusal:
            await refused.connect()
        assert _status_of(refusal.value) == 401, refusal.value
        runner = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                  auth_token="tok")
        await runner.connect()
        assign: Any = None
        while not isinstance(assign, TaskAssign):
            kind, assign = await asyncio.wait_for(runner.recv(), 5)
        assert assign.task_id == "T-1" and assign.task_spec.goal == "do it"
        await runner.send(TaskProgress(task_id="T-1", kind="state", attempt=assign.attempt,
                                       payload={"event": "working"}))
        await runner.send(TaskReportMessage(task_id="T-1", attempt=assign.attempt, report={
            "schema_version": 1, "task_id": "T-1", "status": "done", "usage": ZERO}))
        status = await asyncio.wait_for(hub, 10)
        await runner.close()
        lines: List[Dict[str, Any]] = [json.loads(x) for x in out.getvalue().splitlines()]
        return {"status": status, "lines": lines}

    got = asyncio.run(scenario())
    assert got["status"] == 0
    kinds = [next(iter(line)) for line in got["lines"]]
    assert kinds[0] == "listening" and "hello" in kinds
    progress = [line["progress"] for line in got["lines"] if "progress" in line]
    assert [(p["task_id"], p["seq"], p["kind"]) for p in progress] == [("T-1", 1, "state")]
    reports = [line["report"] for line in got["lines"] if "report" in line]
    assert len(reports) == 1 and reports[0]["seq"] == 2 and reports[0]["report"]["status"] == "done"


def _status_of(error: BaseException) -> Any:
    """The HTTP status of a refused WebSocket handshake (websockets' new and legacy
    exception shapes)."""
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None) or getattr(error, "status_code", None)


def test_a_wrong_token_is_refused_with_401_before_the_upgrade() -> None:
    async def scenario() -> Dict[str, Any]:
        out = io.StringIO()
        hub = asyncio.ensure_future(run_hub("127.0.0.1", 0, "tok", [task_assign("T-1")], out=out))
        url = await _url(out)
        # Through the WebSocket client: the handshake fails with HTTP 401.
        refused = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                   auth_token="wrong")
        client_status = None
        try:
            await refused.connect()
        except Exception as e:  # noqa: BLE001 - the exception type depends on websockets' version
            client_status = _status_of(e)
        # On the wire: an upgrade request with a wrong bearer gets a 401 status line, not
        # 101 Switching Protocols, and no WebSocket frame follows.
        host, port = url[len("ws://"):].rstrip("/").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(("GET / HTTP/1.1\r\nHost: {}:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                      "Authorization: Bearer wrong\r\n\r\n").format(host, port).encode())
        await writer.drain()
        status_line = (await asyncio.wait_for(reader.readline(), 5)).decode()
        writer.close()
        hub.cancel()
        try:
            await hub
        except asyncio.CancelledError:
            pass
        return {"client": client_status, "wire": status_line, "out": out.getvalue()}

    got = asyncio.run(scenario())
    assert got["client"] == 401, got
    assert got["wire"].startswith("HTTP/1.1 401"), got["wire"]
    assert '"hello"' not in got["out"], "a refused runner must never reach the session"


def test_the_cli_assigns_tasks_from_a_file_and_exits_with_the_reports(tmp_path: Any) -> None:
    """``python -m stapel_runner_protocol.hub`` (``main``) with ``--tasks FILE``,
    ``--assign``, ``--token-file`` and ``--exit-after-reports``: every task reaches the
    runner as written, every report is printed, and the exit status is 1 because one
    report is not ``done``."""
    import subprocess
    import sys

    (tmp_path / "token").write_text("cli-token\n")
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"task_id": "F-1", "goal": "write the docs", "role": "writer", "attempt": 2,
                    "invocation": {"backend": "subprocess", "model": "m1"}}) + "\n\n"
        + json.dumps({"task_id": "F-2"}) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stapel_runner_protocol.hub", "--port", "0", "--token-file",
         str(tmp_path / "token"), "--tasks", str(tmp_path / "tasks.jsonl"), "--assign", "A-1",
         "--exit-after-reports"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["listening"]

        async def runner() -> List[Any]:
            conn = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                    auth_token="cli-token")
            await conn.connect()
            got: List[Any] = []
            while len(got) < 3:
                kind, value = await asyncio.wait_for(conn.recv(), 10)
                if kind == "received" and isinstance(value, TaskAssign):
                    got.append(value)
            for a in got:
                status = "failed" if a.task_id == "F-2" else "done"
                await conn.send(TaskProgress(task_id=a.task_id, kind="tool", attempt=a.attempt,
                                             payload={"event": "tool"}))
                report = {"schema_version": 1, "task_id": a.task_id, "status": status, "usage": ZERO}
                if status == "failed":
                    report["failure_type"] = "harness_failed"
                await conn.send(TaskReportMessage(task_id=a.task_id, attempt=a.attempt,
                                                  report=report))
            await asyncio.sleep(0.3)
            await conn.close()
            return got

        assigns = asyncio.run(runner())
        status = proc.wait(timeout=10)
        lines = [json.loads(x) for x in proc.stdout.read().splitlines() if x.strip()]
    finally:
        proc.kill()
        proc.wait()
    by_id = {a.task_id: a for a in assigns}
    assert sorted(by_id) == ["A-1", "F-1", "F-2"]
    f1 = by_id["F-1"]
    assert (f1.attempt, f1.role, f1.task_spec.goal) == (2, "writer", "write the docs")
    assert f1.invocation == {"backend": "subprocess", "model": "m1"}
    assert by_id["F-2"].invocation == {"backend": "fake"} and by_id["F-2"].attempt == 1
    assert by_id["A-1"].invocation == {"backend": "fake"}
    reports = {line["report"]["task_id"]: line["report"] for line in lines if "report" in line}
    assert sorted(reports) == ["A-1", "F-1", "F-2"]
    assert reports["F-1"]["attempt"] == 2 and reports["F-2"]["report"]["status"] == "failed"
    progress = [line["progress"] for line in lines if "progress" in line]
    assert sorted((p["task_id"], p["seq"], p["kind"]) for p in progress) == [
        ("A-1", 1, "tool"), ("F-1", 1, "tool"), ("F-2", 1, "tool")]
    assert status == 1, "one report is not done"


def test_the_cli_needs_a_token() -> None:
    from stapel_runner_protocol.hub import main

    with pytest.raises(SystemExit) as e:
        main(["--port", "0"])
    assert e.value.code == 2


def test_the_hub_with_durable_acks_acknowledges_what_it_printed() -> None:
    """``--durable-acks``: the hub confirms each frame once its line is written; the
    runner's kept frames are acknowledged (its kept log empties), and the run ends as
    without durable acks."""
    async def scenario() -> Dict[str, Any]:
        out = io.StringIO()
        hub = asyncio.ensure_future(run_hub("127.0.0.1", 0, "tok", [task_assign("T-1")],
                                            exit_after_reports=False, out=out,
                                            durable_acks=True,
                                            session={"ack_delay_ms": 20}))
        url = await _url(out)
        runner = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                  auth_token="tok")
        await runner.connect()
        assign: Any = None
        while not isinstance(assign, TaskAssign):
            kind, assign = await asyncio.wait_for(runner.recv(), 5)
        for i in range(3):
            await runner.send(TaskProgress(task_id="T-1", kind="state", attempt=1,
                                           payload={"i": i}))
        for _ in range(100):
            if runner.link.outbox_frames == 0 and out.getvalue().count('"progress"') == 3:
                break
            await asyncio.sleep(0.02)
        kept = runner.link.outbox_frames
        await runner.close()
        hub.cancel()
        try:
            await hub
        except asyncio.CancelledError:
            pass
        return {"kept": kept, "lines": out.getvalue()}

    got = asyncio.run(scenario())
    assert got["kept"] == 0 and got["lines"].count('"progress"') == 3
