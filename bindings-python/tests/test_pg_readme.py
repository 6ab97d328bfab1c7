"""The README's store example, run as written: a runner's progress frames through one
hub process, then — that hub gone — through a second one that takes the runner over;
every frame applied once, in order, by the README's ``effect``."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgcluster import PgCluster, pg_cluster  # noqa: E402,F401  (the fixture)

import psycopg  # noqa: E402

from stapel_runner_protocol import Hello, TaskProgress  # noqa: E402
from stapel_runner_protocol.transport_ws import RunnerClient  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Hub state in PostgreSQL"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_readme_store_example(pg_cluster: PgCluster) -> None:
    code = readme_example()
    assert len(code.splitlines()) < 30
    ns: Dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), ns)
    dsn = pg_cluster.new_database("readme")
    with psycopg.connect(dsn, autocommit=True) as c:
        # ``n``: the order the effect inserted in (the README's INSERT names its columns).
        c.execute("CREATE TABLE my_progress (n bigserial, runner_id text, task_id text, "
                  "attempt bigint, seq bigint, body jsonb, "
                  "UNIQUE (runner_id, task_id, attempt, seq))")
    port = free_port()

    def applied() -> List[int]:
        with psycopg.connect(dsn, autocommit=True) as c:
            return [s for (s,) in c.execute("SELECT seq FROM my_progress ORDER BY n")]

    async def main() -> None:
        client = RunnerClient(f"ws://127.0.0.1:{port}/", hello=Hello(project_id="p",
                              runner_version="1"), auth_token="secret-token",
                              backoff_initial_ms=20, backoff_max_ms=200)
        for hub_id, first in (("hub-a", 1), ("hub-b", 6)):
            stop = asyncio.Event()
            hub = asyncio.ensure_future(ns["serve"](dsn, hub_id, "secret-token", port, stop))
            if first == 1:
                await client.start()
            for seq in range(first, first + 5):
                await client.send(TaskProgress(task_id="T-1", attempt=1, kind="state",
                                               payload={"state": "running", "n": seq}))
            deadline = asyncio.get_running_loop().time() + 30
            while len(await asyncio.to_thread(applied)) < first + 4:
                assert asyncio.get_running_loop().time() < deadline, await asyncio.to_thread(applied)
                await asyncio.sleep(0.05)
            stop.set()
            await hub
        await client.stop()

    asyncio.run(main())
    assert applied() == list(range(1, 11))
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute("SELECT owner, epoch FROM srp_leases WHERE runner_id = 'runner-A'").fetchone()
    assert row is not None and row[0] == "hub-b" and row[1] >= 2
