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
        [--progress N] [--exit-after K]

For each ``task.assign`` it sends N ``task.progress`` frames and one ``task.report``
(status ``done``); a ``task.cancel`` of a running task ends it ``failed``. It prints
``{"connected": n}`` after each connect and ``{"assigned": task_id}`` per new task, and
exits 0 after reporting K tasks (``--exit-after``) and seeing the connection close or
after 2 s more; it reconnects after a lost connection (with a short pause).
"""

import argparse
import asyncio
import json
import sys

from stapel_runner_protocol import (ConnectionState, Hello, TaskProgress,
                                    TaskReportMessage)
from stapel_runner_protocol.transport_ws import RunnerConnection


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


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
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--progress", type=int, default=3)
    parser.add_argument("--exit-after", type=int, default=0)
    args = parser.parse_args()
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    state = ConnectionState("runner")
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
                        frames = [state.emit(TaskProgress(task_id=msg.task_id, kind="state",
                                                          payload={"step": i}))
                                  for i in range(args.progress)]
                        # A stapel-taskspecs TaskReport (usage is required).
                        usage = {"cache_read": 0, "cache_write": 0, "fresh_input": 0,
                                 "output": 0, "thinking": 0}
                        report = {"schema_version": 1, "task_id": msg.task_id,
                                  "status": "done", "usage": usage}
                        frames.append(state.emit(TaskReportMessage(task_id=msg.task_id,
                                                                   report=report)))
                        for frame in frames:
                            await conn.send(frame)
                        reported += 1
                        if args.exit_after and reported >= args.exit_after:
                            # Serve 2 s more (pings are answered: the pongs tell the hub
                            # its last commands arrived), or until the hub closes.
                            await linger(conn, 2.0)
                            return 0
                    elif kind == "task.cancel":
                        state.receive(msg)
        except Exception as exc:  # the hub went away: reconnect
            emit({"disconnected": type(exc).__name__})
        await asyncio.sleep(0.2)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
