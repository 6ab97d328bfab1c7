"""A hub written against stapel-runner-protocol 0.1.1's public API only.

It uses nothing but the names the seed's README documents — ``ConnectionState``,
``decode``/``encode``, ``TaskAssign``, ``Pong.answer`` — and a plain ``websockets``
server, as a hub author who read only the seed would write it. It never acknowledges
(0.1.1 knows no ``ack``), answers every ping with ``Pong.answer(ping)``, replays commands
from ``hello.resume`` after a reconnect, and drops duplicate progress with
``ConnectionState.receive``. Run it with the published 0.1.1 package on ``PYTHONPATH`` or
with this project's package installed: it must behave the same with both.

    python seed_only_hub.py --port 0 --token-file TOKEN --tasks 100 [--inflight 4]
        [--cut-every N] [--cut-limit M] [--backend fake] [--silent-for SECONDS]

stdout, one JSON object per line: ``{"listening": "ws://127.0.0.1:PORT/"}`` first, then
``{"report": {"task_id", "status", "failure_type"}}`` for each task's first report, and at the end
``{"done": {"tasks", "reports", "progress", "duplicates", "cuts", "gaps"}}``; the hub exits
0 once every task reported exactly once with every progress seq 1..n applied once and in
order (``gaps`` counts tasks whose applied seqs were not exactly that), else 1.
``--cut-every N`` aborts the runner's TCP connection after every N applied frames (at
most ``--cut-limit`` times): the runner must reconnect and lose nothing.
``--silent-for S`` leaves pings unanswered for the first S seconds (a hub that gives
the runner no proof of receipt at all: its kept log fills, and it must say so).
"""

import argparse
import asyncio
import json
import sys
import time

from stapel_runner_protocol import ConnectionState, Ping, Pong, TaskAssign, decode, encode

try:
    from websockets.asyncio.server import serve
except ImportError:  # websockets < 14
    from websockets.server import serve  # type: ignore


def task_spec(task_id):
    return {"schema_version": 1, "id": task_id, "type": "code", "goal": "run the task",
            "criteria": [{"id": "c1", "text": "run the task"}], "budget": {"iterations": 1}}


class Hub:
    def __init__(self, args, token):
        self.args = args
        self.token = token
        self.state = ConnectionState("hub")
        self.pending = ["S-%d" % i for i in range(args.tasks)]
        self.running = set()
        self.reported = {}
        self.applied = {}  # task_id -> list of applied progress seqs
        self.progress = 0
        self.duplicates = 0
        self.frames = 0
        self.cuts = 0
        self.finished = asyncio.Event()
        self.silent_until = time.monotonic() + args.silent_for

    def emit(self, obj):
        sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
        sys.stdout.flush()

    def refuse(self, connection, request):
        if request.headers.get("Authorization") != "Bearer " + self.token:
            return connection.respond(401, "a valid bearer token is required\n")
        return None

    async def assign_more(self, ws):
        while self.pending and len(self.running) < self.args.inflight:
            task_id = self.pending.pop(0)
            self.running.add(task_id)
            msg = self.state.emit(TaskAssign(task_id=task_id, task=task_spec(task_id),
                                             role="coder",
                                             invocation={"backend": self.args.backend},
                                             attempt=1))
            await ws.send(encode(msg))

    async def handler(self, ws):
        try:
            async for frame in ws:
                msg = decode(frame)
                kind = msg.ARTIFACT
                if kind == "hello":
                    # The seed: replay everything after the runner's declared positions.
                    # A task the runner never received anything of is not in its resume:
                    # it counts as 0, so its commands are replayed too.
                    resume = {t: 0 for t in self.state.channels}
                    resume.update(msg.resume or {})
                    for task_id, last in resume.items():
                        self.state.channel(task_id).outbox.ack(int(last))
                    for frames in self.state.replay_for(resume).values():
                        for m in frames:
                            await ws.send(encode(m))
                    await self.assign_more(ws)
                elif kind == "ping":
                    if time.monotonic() >= self.silent_until:
                        await ws.send(encode(Pong.answer(msg)))
                elif kind in ("task.progress", "task.report"):
                    if not self.state.receive(msg):
                        self.duplicates += 1
                        continue
                    self.frames += 1
                    if kind == "task.progress":
                        self.progress += 1
                        self.applied.setdefault(msg.task_id, []).append(msg.seq)
                        if self.args.status_file:
                            with open(self.args.status_file, "a", encoding="utf-8") as f:
                                f.write(json.dumps({"progress": {"task_id": msg.task_id,
                                                                 "seq": msg.seq}}) + "\n")
                    elif msg.task_id not in self.reported:
                        self.reported[msg.task_id] = msg.report.get("status")
                        self.running.discard(msg.task_id)
                        self.emit({"report": {"task_id": msg.task_id,
                                              "status": msg.report.get("status"),
                                              "failure_type": msg.report.get("failure_type")}})
                        if len(self.reported) == self.args.tasks:
                            self.finished.set()
                            return
                        await self.assign_more(ws)
                    if (self.args.cut_every and self.frames % self.args.cut_every == 0
                            and self.cuts < self.args.cut_limit):
                        self.cuts += 1
                        ws.transport.abort()
                        return
        except Exception as exc:  # a cut or a dropped connection: the runner comes back
            if not isinstance(exc, (OSError, EOFError)) and "ConnectionClosed" not in type(exc).__name__:
                raise

    def summary(self):
        gaps = 0
        for task_id in self.reported:
            seqs = self.applied.get(task_id, [])
            # Progress and the report share one stream per task: progress is 1..n-1 here.
            if seqs != list(range(1, len(seqs) + 1)):
                gaps += 1
        return {"tasks": self.args.tasks, "reports": len(self.reported),
                "progress": self.progress, "duplicates": self.duplicates,
                "cuts": self.cuts, "gaps": gaps}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--cut-every", type=int, default=0)
    parser.add_argument("--cut-limit", type=int, default=1 << 30)
    parser.add_argument("--backend", default="fake")
    parser.add_argument("--silent-for", type=float, default=0.0)
    parser.add_argument("--status-file", default=None,
                        help="append {\"progress\": {task_id, seq}} per applied progress frame "
                             "(the conformance kit's status hook)")
    args = parser.parse_args()
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    hub = Hub(args, token)
    async with serve(hub.handler, "127.0.0.1", args.port, process_request=hub.refuse,
                     max_size=None) as server:
        port = list(server.sockets)[0].getsockname()[1]
        hub.emit({"listening": "ws://127.0.0.1:%d/" % port})
        await hub.finished.wait()
    summary = hub.summary()
    hub.emit({"done": summary})
    ok = summary["reports"] == args.tasks and summary["gaps"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
