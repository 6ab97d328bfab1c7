"""A small runnable reference hub: ``python -m stapel_runner_protocol.hub``.

It accepts runners that present the bearer token (anything else is refused with HTTP
401 before the WebSocket opens), assigns the tasks given on the command line or in a
file, and prints every progress frame and report as one JSON line on stdout. Everything
the protocol decides (hello and resume, replay, duplicate suppression, acknowledgements,
keepalive) is the Rust core's ``HubSession`` behind :class:`~.transport_ws.HubServer`.

The subcommands ``serve``, ``enqueue`` and ``status`` run a hub cluster over PostgreSQL
(extra ``postgres``; see :mod:`.pghub_cli`)::

    python -m stapel_runner_protocol.hub serve --store DSN --hub-id ID --port P --token-file F
    python -m stapel_runner_protocol.hub enqueue --store DSN TASK_ID...
    python -m stapel_runner_protocol.hub status --store DSN

Without a subcommand, the single-process reference hub below. Two terminals::

    python -m stapel_runner_protocol.hub --port 8765 --token-file token --assign T-1
    stapel-runner connect --url ws://127.0.0.1:8765/ --token-file token --state-dir st

The first stdout line is ``{"listening": "ws://HOST:PORT/"}`` (useful with ``--port
0``); then ``{"hello": …}``, ``{"progress": {task_id, attempt, seq, kind, payload}}``,
``{"report": {task_id, attempt, seq, report}}`` lines. With ``--exit-after-reports``
the hub exits once every assigned task has reported (exit status 0 when every report
is ``done``, 1 otherwise).

A task file holds one JSON object per line: ``{"task_id", "goal"?, "invocation"?,
"role"?, "attempt"?}``; ``--assign ID`` is the same with the defaults (invocation
``{"backend": BACKEND}``).

The token comes from a file (``--token-file``) or an environment variable
(``--token-env NAME``), never from the command line (argv is visible to every user of
the machine); it is never printed or logged. ``--durable-acks`` holds acknowledgements
until the hub has printed (and flushed) each frame's line: a crash loses nothing the
runner was told is safe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, TextIO

from ._native import TaskAssign, TaskCancel, TaskProgress, TaskReportMessage
from .transport_ws import HubServer

__all__ = ["task_assign", "run_hub", "main"]


def task_assign(task_id: str, goal: str = "run the task", invocation: Optional[Dict[str, Any]] = None,
                role: str = "coder", attempt: int = 1) -> TaskAssign:
    """A ``task.assign`` with a minimal valid TaskSpec for ``task_id``."""
    task = {"schema_version": 1, "id": task_id, "type": "code", "goal": goal,
            "criteria": [{"id": "c1", "text": goal}], "budget": {"iterations": 1}}
    return TaskAssign(task_id=task_id, task=task, role=role,
                      invocation=dict(invocation or {}), attempt=attempt)


def _emit(out: TextIO, obj: Dict[str, Any]) -> None:
    out.write(json.dumps(obj, sort_keys=True) + "\n")
    out.flush()


async def run_hub(host: str, port: int, token: str, tasks: Sequence[TaskAssign], *,
                  runner_id: str = "runner", cancel: Sequence[str] = (),
                  exit_after_reports: bool = False, out: Optional[TextIO] = None,
                  session: Optional[Dict[str, Any]] = None,
                  durable_acks: bool = False) -> int:
    """Serve until interrupted (or, with ``exit_after_reports``, until every task in
    ``tasks`` reported). Returns the exit status. Lines go to ``out`` (default: the
    ``sys.stdout`` of the moment). ``session``: the core's session config keys;
    ``durable_acks``: acknowledge a frame only once its line is written."""
    if out is None:
        out = sys.stdout
    session = dict(session or {})
    if durable_acks:
        session["durable_acks"] = True
    server = HubServer(tokens={token: runner_id}, session=session)
    async with server.serve(host, port) as ws_server:
        bound = ws_server.sockets[0].getsockname()
        _emit(out, {"listening": f"ws://{bound[0]}:{bound[1]}/"})
        runner = server.runner(runner_id)
        for t in tasks:
            await runner.send(t)
        for task_id in cancel:
            await runner.send(TaskCancel(task_id=task_id, reason="hub"))
        waiting = {(t.task_id, t.attempt) for t in tasks}
        statuses: List[str] = []
        async for kind, value in runner.events():
            if kind == "hello":
                _emit(out, {"hello": {"project_id": value.project_id,
                                      "runner_version": value.runner_version}})
            elif kind == "received" and isinstance(value, TaskProgress):
                _emit(out, {"progress": {"task_id": value.task_id, "attempt": value.attempt,
                                         "seq": value.seq, "kind": value.kind,
                                         "payload": value.payload}})
                if durable_acks:
                    runner.confirm(value.task_id, value.attempt, value.seq)
            elif kind == "received" and isinstance(value, TaskReportMessage):
                body = value.report
                _emit(out, {"report": {"task_id": value.task_id, "attempt": value.attempt,
                                       "seq": value.seq, "report": body}})
                if durable_acks:
                    runner.confirm(value.task_id, value.attempt, value.seq)
                if (value.task_id, value.attempt) in waiting:
                    waiting.discard((value.task_id, value.attempt))
                    statuses.append(str(body.get("status")))
                if exit_after_reports and not waiting:
                    return 0 if all(s == "done" for s in statuses) else 1
            elif kind in ("inbound_gap", "peer_error", "error", "stalled"):
                _emit(out, {kind: str(value)})
    return 0


def _read_tasks(path: str, backend: str) -> List[TaskAssign]:
    tasks = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            tasks.append(task_assign(d["task_id"], d.get("goal", "run the task"),
                                     d.get("invocation", {"backend": backend}),
                                     d.get("role", "coder"), int(d.get("attempt", 1))))
    return tasks


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("serve", "enqueue", "status"):
        from . import pghub_cli

        return pghub_cli.main(args)
    return _main_flags(args)


def _main_flags(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m stapel_runner_protocol.hub",
                                description="A reference hub: assigns tasks to one runner and prints what it reports.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--token-file", help="a file holding the bearer token runners must present")
    g.add_argument("--token-env", metavar="NAME",
                   help="an environment variable holding the token")
    p.add_argument("--runner-id", default="runner")
    p.add_argument("--assign", action="append", default=[], metavar="TASK_ID")
    p.add_argument("--tasks", metavar="FILE", help="JSON lines: {task_id, goal?, invocation?, role?, attempt?}")
    p.add_argument("--backend", default="fake", help="invocation backend of --assign tasks (default fake)")
    p.add_argument("--cancel", action="append", default=[], metavar="TASK_ID")
    p.add_argument("--exit-after-reports", action="store_true")
    p.add_argument("--durable-acks", action="store_true",
                   help="acknowledge a frame only after its line is written")
    p.add_argument("--session-config", metavar="JSON",
                   help='the core\'s session config keys, e.g. \'{"validate": false}\' to take '
                        "a runner's frames without schema validation")
    a = p.parse_args(argv)
    if a.token_file:
        try:
            with open(a.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            p.error(f"cannot read --token-file: {exc.strerror}")
    else:
        token = os.environ.get(a.token_env, "").strip()
    if not token:
        p.error("the token is empty (give it in --token-file or the --token-env variable)")
    tasks = [task_assign(t, invocation={"backend": a.backend}) for t in a.assign]
    if a.tasks:
        tasks.extend(_read_tasks(a.tasks, a.backend))
    try:
        session = json.loads(a.session_config) if a.session_config else None
        if session is not None and not isinstance(session, dict):
            p.error("--session-config must be a JSON object")
        return asyncio.run(run_hub(a.host, a.port, token, tasks, runner_id=a.runner_id,
                                   cancel=a.cancel, exit_after_reports=a.exit_after_reports,
                                   session=session, durable_acks=a.durable_acks))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
