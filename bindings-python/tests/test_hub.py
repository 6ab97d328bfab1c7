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
        with pytest.raises(Exception):
            await refused.connect()
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
