"""The Python package's ``RunnerClient`` under ``stapel-conformance runner``.

    stapel-conformance runner --report DIR -- PYTHON conformance/scenarios/targets/python-runner-client.py

A minimal runner on ``stapel_runner_protocol.transport_ws.RunnerClient``: it connects to
``STAPEL_HUB_URL`` with the token in ``STAPEL_TOKEN_FILE`` (re-read on every connect),
keeps its session snapshot in ``STAPEL_STATE_DIR/session.snapshot`` (written when a
command arrives, before it is acted on, and after every frame sent, so a runner killed
and started again resumes), and plays the conformance workload the task's ``goal`` names (see
``conformance/scenarios/README.md``): ``conformance quick N`` sends N ``state``
progress frames and a ``done`` report, ``conformance hold`` sends one and waits for its
cancel (then a ``failed`` report, ``failure_type`` ``cancelled``). At most two tasks run
at once; a further assignment gets a ``failed`` report with ``failure_type``
``runner_busy`` at once. A cancel of a task that already reported changes nothing.

Everything the protocol decides (hello and resume, replay, duplicates, ordering,
acknowledgements, keepalive, reconnects) is the client's, i.e. the core's. The short
keepalive and reconnect timings are this target's settings (as in rust-runner.sh), not
the protocol's.
"""

import asyncio
import os
import re
import signal
import sys

from stapel_runner_protocol import Hello, TaskProgress, TaskReportMessage
from stapel_runner_protocol.transport_ws import RunnerClient

MAX_TASKS = 2
USAGE = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0}


def read_token():
    with open(os.environ["STAPEL_TOKEN_FILE"], encoding="utf-8") as f:
        return f.read().strip()


class Runner:
    def __init__(self):
        self.state_dir = os.environ["STAPEL_STATE_DIR"]
        os.makedirs(self.state_dir, exist_ok=True)
        self.snapshot_path = os.path.join(self.state_dir, "session.snapshot")
        snapshot = None
        if os.path.exists(self.snapshot_path):
            with open(self.snapshot_path, "rb") as f:
                snapshot = f.read()
        self.client = RunnerClient(
            os.environ["STAPEL_HUB_URL"],
            hello=Hello(project_id="conformance-python", runner_version="0.2.0",
                        capabilities=["conformance"]),
            auth_token=read_token, snapshot=snapshot,
            ping_interval_ms=500, peer_timeout_ms=1500,
            backoff_initial_ms=50, backoff_max_ms=300)
        self.running = {}  # task_id -> (asyncio.Task, cancel event)
        self.finished = set()

    def persist(self):
        tmp = self.snapshot_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.client.snapshot())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.snapshot_path)

    async def send(self, message):
        await self.client.send(message)
        self.persist()

    async def report(self, task_id, attempt, status, summary, failure_type=None):
        report = {"schema_version": 1, "task_id": task_id, "status": status,
                  "summary_business": summary, "usage": dict(USAGE)}
        if failure_type is not None:
            report["failure_type"] = failure_type
        await self.send(TaskReportMessage(task_id=task_id, report=report, attempt=attempt))

    async def work(self, msg, cancelled):
        task_id, attempt = msg.task_id, msg.attempt
        goal = str(msg.task.get("goal", ""))
        try:
            m = re.search(r"conformance quick (\d+)", goal)
            steps = 1 if "conformance hold" in goal else (int(m.group(1)) if m else 3)
            for i in range(steps):
                if cancelled.is_set():
                    break
                state = "holding" if "conformance hold" in goal else "step %d" % i
                await self.send(TaskProgress(task_id=task_id, kind="state",
                                             payload={"state": state}, attempt=attempt))
            if "conformance hold" in goal:
                await cancelled.wait()
            if cancelled.is_set():
                await self.report(task_id, attempt, "failed", "cancelled by the hub",
                                  failure_type="cancelled")
            else:
                await self.report(task_id, attempt, "done", "the conformance workload finished")
        finally:
            self.running.pop(task_id, None)
            self.finished.add(task_id)

    async def on_message(self, msg):
        kind = msg.ARTIFACT
        if kind == "task.assign":
            if msg.task_id in self.running or msg.task_id in self.finished:
                return
            if len(self.running) >= MAX_TASKS:
                self.finished.add(msg.task_id)
                await self.report(msg.task_id, msg.attempt, "failed",
                                  "the runner already runs %d tasks" % MAX_TASKS,
                                  failure_type="runner_busy")
                return
            cancelled = asyncio.Event()
            self.running[msg.task_id] = (asyncio.ensure_future(self.work(msg, cancelled)),
                                         cancelled)
        elif kind == "task.cancel":
            entry = self.running.get(msg.task_id)
            if entry is not None:
                entry[1].set()

    async def run(self):
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with self.client:
            async def events():
                async for kind, value in self.client.events():
                    if kind == "received":
                        # The command's receipt is kept before any work it starts can
                        # send (a runner killed right after must declare it on resume).
                        self.persist()
                        await self.on_message(value)
                        self.persist()
                    elif kind in ("error", "disconnected", "peer_error"):
                        print("runner-client:", kind, value, file=sys.stderr, flush=True)
            pump = asyncio.ensure_future(events())
            await asyncio.wait([pump, asyncio.ensure_future(stop.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            for task, _ in list(self.running.values()):
                task.cancel()
            pump.cancel()
            self.persist()
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(Runner().run()))
