"""``python -m stapel_runner_protocol.hub serve|enqueue|status``: a hub cluster over one
PostgreSQL database (extra ``postgres``).

* ``serve --store DSN --hub-id ID --port P --token-file F`` — one hub process (run
  several, one database). It takes ownership of every runner that connects (a new
  lease epoch), rebuilds its session from the store, hands it queued tasks while it has
  capacity (``--capacity``, default 4; ``task.assign`` attempt 1 with invocation
  ``{"backend": BACKEND}``, default ``fake``), and applies its progress and reports
  exactly once into ``srp_hub_progress`` / ``srp_hub_reports``. Lines on stdout:
  ``{"listening": URL, "hub_id": ID}`` first, then operator events (``owned``,
  ``fenced``, ``dropped``, ``lease_expired``, …) and, on SIGTERM/SIGINT, ``{"stopped":
  counters}``. The token file holds one token (the runner id is ``--runner-id``,
  default ``runner``) or a JSON object ``{token: runner_id}`` for several runners.
* ``enqueue --store DSN TASK_ID...`` — adds tasks (an id already queued is left alone);
  prints ``{"enqueued": N, "already": M}``.
* ``status --store DSN`` — one JSON line per task attempt, in enqueue order:
  ``{"task_id", "attempt", "seqs": [applied seqs in applied order], "report": obj|null,
  "state": "queued"|"assigned"|"reported", "runner_id"}`` (a task not yet assigned has
  attempt ``null``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Any, Dict, List, Optional, Sequence, TextIO

from .pgstore import DEFAULT_LEASE_MS, PgStore, StoreError, connect, migrate

__all__ = ["main", "serve", "enqueue", "status", "cli_effect", "cli_claim"]


def _emit(out: TextIO, obj: Dict[str, Any]) -> None:
    out.write(json.dumps(obj, sort_keys=True, default=str) + "\n")
    out.flush()


def cli_effect(hub_id: str) -> Any:
    """The CLI hub's application effect: progress rows and reports (one per attempt),
    the queue row marked reported — in the apply transaction."""
    from psycopg.types.json import Jsonb

    from ._native import TaskProgress, TaskReportMessage

    async def effect(cur: Any, runner_id: str, messages: List[Any]) -> None:
        progress = [(runner_id, m.task_id, m.attempt, m.seq, m.kind, Jsonb(m.payload), hub_id)
                    for m in messages if isinstance(m, TaskProgress)]
        if progress:
            await cur.executemany(
                "INSERT INTO srp_hub_progress (runner_id, task_id, attempt, seq, kind, payload, "
                "hub_id) VALUES (%s, %s, %s, %s, %s, %s, %s)", progress)
        for m in messages:
            if isinstance(m, TaskReportMessage):
                await cur.execute(
                    "INSERT INTO srp_hub_reports (runner_id, task_id, attempt, seq, report, hub_id) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (runner_id, m.task_id, m.attempt, m.seq, Jsonb(m.report), hub_id))
                await cur.execute(
                    "UPDATE srp_hub_queue SET state = 'reported' WHERE task_id = %s AND attempt = %s "
                    "AND runner_id = %s", (m.task_id, m.attempt, runner_id))

    return effect


def cli_claim(hub_id: str, capacity: int, backend: str) -> Any:
    """The CLI hub's claim: up to ``capacity`` assigned-and-unreported tasks per runner;
    queued tasks taken in enqueue order with ``FOR UPDATE SKIP LOCKED`` (hubs claiming at
    once take different tasks)."""
    from .hub import task_assign

    async def claim(cur: Any, runner_id: str) -> List[Any]:
        await cur.execute("SELECT count(*) FROM srp_hub_queue WHERE runner_id = %s "
                          "AND state = 'assigned'", (runner_id,))
        row = await cur.fetchone()
        free = capacity - int(row[0])
        if free <= 0:
            return []
        await cur.execute(
            "UPDATE srp_hub_queue q SET state = 'assigned', runner_id = %s, "
            "attempt = q.attempt + 1, hub_id = %s WHERE task_id IN (SELECT task_id FROM "
            "srp_hub_queue WHERE state = 'queued' ORDER BY enqueued LIMIT %s "
            "FOR UPDATE SKIP LOCKED) RETURNING task_id, attempt, enqueued",
            (runner_id, hub_id, free))
        rows = sorted(await cur.fetchall(), key=lambda r: r[2])
        return [task_assign(t, invocation={"backend": backend}, attempt=int(a))
                for t, a, _ in rows]

    return claim


def _tokens(text: str, runner_id: str) -> Dict[str, str]:
    text = text.strip()
    if text.startswith("{"):
        table = json.loads(text)
        if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and v for k, v in table.items()):
            raise ValueError("a JSON token file must be an object {token: runner_id}")
        return dict(table)
    if not text:
        raise ValueError("the token is empty")
    return {text: runner_id}


async def serve(dsn: str, hub_id: str, host: str, port: int, tokens: Dict[str, str], *,
                capacity: int = 4, backend: str = "fake", lease: Optional[Dict[str, Any]] = None,
                session: Optional[Dict[str, Any]] = None, max_batch: int = 256,
                pool_size: int = 4, out: Optional[TextIO] = None,
                stop: Optional[asyncio.Event] = None) -> int:
    """Run one hub process until ``stop`` is set (or SIGTERM/SIGINT)."""
    from .pghub import StoreHub

    out = out or sys.stdout
    lease = dict(lease or {})
    store = PgStore(dsn, hub_id, lease_ms=int(lease.get("lease_ms", DEFAULT_LEASE_MS)),
                    pool_size=pool_size)
    await store.open()
    hub = StoreHub(store, effect=cli_effect(hub_id), claim=cli_claim(hub_id, capacity, backend),
                   tokens=tokens, session=session, lease=lease, max_batch=max_batch,
                   on_event=lambda e: _emit(out, e))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        async with hub.serve(host, port) as ws_server:
            bound = ws_server.sockets[0].getsockname()
            _emit(out, {"listening": f"ws://{bound[0]}:{bound[1]}/", "hub_id": hub_id})
            await stop.wait()
    finally:
        _emit(out, {"stopped": {**hub.counters, "store": dict(store.stats)}})
        await store.close()
    return 0


def enqueue(dsn: str, task_ids: Sequence[str]) -> Dict[str, int]:
    with connect(dsn) as conn:
        migrate(conn)
        with conn.transaction():
            cur = conn.cursor()
            cur.executemany("INSERT INTO srp_hub_queue (task_id) VALUES (%s) "
                            "ON CONFLICT (task_id) DO NOTHING RETURNING task_id",
                            [(t,) for t in task_ids], returning=True)
            added = 0
            while True:
                if cur.fetchone() is not None:
                    added += 1
                if not cur.nextset():
                    break
    return {"enqueued": added, "already": len(task_ids) - added}


def status(dsn: str) -> List[Dict[str, Any]]:
    """One dict per task attempt (see the module docs)."""
    with connect(dsn) as conn:
        migrate(conn)
        rows = conn.execute("""
            WITH attempts AS (
                SELECT task_id, attempt FROM srp_hub_progress
                UNION SELECT task_id, attempt FROM srp_hub_reports
                UNION SELECT task_id, attempt FROM srp_hub_queue WHERE attempt > 0)
            SELECT q.task_id, a.attempt, q.state, q.runner_id, q.enqueued,
                   (SELECT coalesce(array_agg(p.seq ORDER BY p.applied), '{}')
                      FROM srp_hub_progress p
                     WHERE p.task_id = q.task_id AND p.attempt = a.attempt),
                   (SELECT r.report FROM srp_hub_reports r
                     WHERE r.task_id = q.task_id AND r.attempt = a.attempt)
              FROM srp_hub_queue q LEFT JOIN attempts a ON a.task_id = q.task_id
             ORDER BY q.enqueued, a.attempt""").fetchall()
    return [{"task_id": t, "attempt": None if a is None else int(a), "state": st,
             "runner_id": r, "seqs": [int(x) for x in seqs], "report": rep}
            for t, a, st, r, _e, seqs, rep in rows]


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m stapel_runner_protocol.hub",
                                description="A hub cluster over PostgreSQL.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run one hub process")
    s.add_argument("--store", required=True, metavar="DSN", help="PostgreSQL connection string")
    s.add_argument("--hub-id", required=True, help="this process's name (unique per process)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--token-file", help="one token, or a JSON object {token: runner_id}")
    g.add_argument("--token-env", metavar="NAME", help="an environment variable holding it")
    s.add_argument("--runner-id", default="runner", help="the runner id of a single token")
    s.add_argument("--capacity", type=int, default=4, help="tasks per runner at once (4)")
    s.add_argument("--backend", default="fake", help="invocation backend of assigned tasks")
    s.add_argument("--lease-config", metavar="JSON",
                   help="the core's Lease keys (lease_ms, renew_every_ms, margin_ms)")
    s.add_argument("--session-config", metavar="JSON", help="the core's session keys")
    s.add_argument("--max-batch", type=int, default=256, help="frames applied per transaction")
    s.add_argument("--pool-size", type=int, default=4, help="store connections (plus one for leases)")
    e = sub.add_parser("enqueue", help="add tasks for the runners")
    e.add_argument("--store", required=True, metavar="DSN")
    e.add_argument("task_ids", nargs="+", metavar="TASK_ID")
    st = sub.add_parser("status", help="one JSON line per task attempt")
    st.add_argument("--store", required=True, metavar="DSN")
    a = p.parse_args(argv)
    try:
        if a.command == "enqueue":
            _emit(sys.stdout, enqueue(a.store, a.task_ids))
            return 0
        if a.command == "status":
            for line in status(a.store):
                _emit(sys.stdout, line)
            return 0
        if a.token_file:
            try:
                with open(a.token_file, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                p.error(f"cannot read --token-file: {exc.strerror}")
        else:
            text = os.environ.get(a.token_env, "")
        try:
            tokens = _tokens(text, a.runner_id)
        except ValueError as exc:
            p.error(str(exc))
        lease = json.loads(a.lease_config) if a.lease_config else None
        session = json.loads(a.session_config) if a.session_config else None
        return asyncio.run(serve(a.store, a.hub_id, a.host, a.port, tokens,
                                 capacity=a.capacity, backend=a.backend, lease=lease,
                                 session=session, max_batch=a.max_batch,
                                 pool_size=a.pool_size))
    except StoreError as exc:
        print(f"hub {a.command}: {exc.code}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
