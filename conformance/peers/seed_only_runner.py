"""A runner written against stapel-runner-protocol 0.1.1's public API only.

It uses nothing but the names the seed's README documents — ``RunnerConnection``,
``ConnectionState``, ``Hello``, ``TaskProgress``, ``TaskReportMessage`` — as a runner
author who read only the seed would write it: no ``attempt`` on its frames, no
acknowledgements, no state kept across restarts. It answers pings (``answer_ping``),
declares ``hello.resume`` on every connect, and after a reconnect re-sends every frame
it holds (its checkpoint: without acknowledgements it cannot know what arrived), relying
on the hub to drop duplicates. Run it with the published 0.1.1 package on ``PYTHONPATH`` or with this
project's package installed.

    python seed_only_runner.py --url ws://127.0.0.1:PORT/ --token-file TOKEN
        [--progress N] [--exit-after K] [--workload conformance]

For each ``task.assign`` it sends N ``task.progress`` frames and one ``task.report``
(status ``done``); a ``task.cancel`` of a running task ends it ``failed``. It prints
``{"connected": n}`` after each connect and ``{"assigned": task_id}`` per new task, and
exits 0 after reporting K tasks (``--exit-after``) and seeing the connection close or
after 2 s more; it reconnects after a lost connection (with a short pause).

``--workload conformance`` plays the task's ``goal`` instead, as ``stapel-conformance
runner`` expects (``conformance quick N``: N progress frames and a ``done`` report;
``conformance hold``: one, then a ``failed`` report, failure_type ``cancelled``, when
its cancel arrives). ``--url`` and ``--token-file`` default to ``STAPEL_HUB_URL`` and
``STAPEL_TOKEN_FILE``, the variables the kit sets:

    stapel-conformance runner --report DIR -- python seed_only_runner.py --workload conformance
"""

import argparse
import asyncio
import json
import os
import re
import sys

from stapel_runner_protocol import (ConnectionState, Hello, TaskProgress,
                                    TaskReportMessage)
from stapel_runner_protocol.transport_ws import RunnerConnection


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def report_of(task_id, status, failure_type=None):
    """A ``task.report`` carrying a stapel-taskspecs TaskReport (usage is required)."""
    usage = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0,
             "thinking": 0}
    report = {"schema_version": 1, "task_id": task_id, "status": status, "usage": usage}
    if failure_type is not None:
        report["failure_type"] = failure_type
    return TaskReportMessage(task_id=task_id, report=report)


async def linger(conn, seconds):
    async def serve():
        async for msg in conn:
            if msg.ARTIFACT == "ping":
                await conn.answer_ping(msg)
    try:
        await asyncio.wait_for(serve(), seconds)
    except Exception:  # the time is up, or the hub closed: either ends the run
        pass


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=os.environ.get("STAPEL_HUB_URL"))
    parser.add_argument("--token-file", default=os.environ.get("STAPEL_TOKEN_FILE"))
    parser.add_argument("--workload", choices=["fixed", "conformance"], default="fixed")
    parser.add_argument("--progress", type=int, default=3)
    parser.add_argument("--exit-after", type=int, default=0)
    args = parser.parse_args()
    if not args.url or not args.token_file:
        parser.error("--url and --token-file (or STAPEL_HUB_URL and STAPEL_TOKEN_FILE) are required")
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    state = ConnectionState("runner")
    holding = set()  # conformance workload: tasks waiting for their cancel
    reported = 0
    connects = 0
    while True:
        try:
            async with RunnerConnection(args.url, auth_token=token) as conn:
                connects += 1
                emit({"connected": connects})
                await conn.send(Hello(project_id="seed-only", runner_version="0.1.1",
                                      capabilities=["subprocess"],
                                      resume=state.resume_map()))
                # The checkpoint: it cannot know what reached the hub (0.1.1 has no
                # acknowledgement), so every frame it holds goes again; the hub drops the
                # duplicates.
                for channel in state.channels.values():
                    for msg in channel.outbox.since(0):
                        await conn.send(msg)
                async for msg in conn:
                    kind = msg.ARTIFACT
                    if kind == "ping":
                        await conn.answer_ping(msg)
                    elif kind == "task.assign":
                        if not state.receive(msg):
                            continue
                        emit({"assigned": msg.task_id})
                        # The task's frames are numbered and kept first, then sent: a
                        # connection lost mid-way loses nothing (the checkpoint re-sends).
                        steps, hold = args.progress, False
                        if args.workload == "conformance":
                            goal = str((msg.task or {}).get("goal", ""))
                            hold = "conformance hold" in goal
                            quick = re.search(r"conformance quick (\d+)", goal)
                            steps = 1 if hold else (int(quick.group(1)) if quick else 3)
                        frames = [state.emit(TaskProgress(task_id=msg.task_id, kind="state",
                                                          payload={"step": i}))
                                  for i in range(steps)]
                        if hold:
                            holding.add(msg.task_id)
                        else:
                            frames.append(state.emit(report_of(msg.task_id, "done")))
                        for frame in frames:
                            await conn.send(frame)
                        reported += 1
                        if args.exit_after and reported >= args.exit_after:
                            # Serve 2 s more (pings are answered: the pongs tell the hub
                            # its last commands arrived), or until the hub closes.
                            await linger(conn, 2.0)
                            return 0
                    elif kind == "task.cancel":
                        if state.receive(msg) and msg.task_id in holding:
                            holding.discard(msg.task_id)
                            await conn.send(state.emit(report_of(msg.task_id, "failed",
                                                                 "cancelled")))
        except Exception as exc:  # the hub went away: reconnect
            emit({"disconnected": type(exc).__name__})
        await asyncio.sleep(0.2)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
