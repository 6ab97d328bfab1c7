"""A throwaway PostgreSQL 15 cluster for the store tests: Debian's server binaries
(``/usr/lib/postgresql/15/bin``, or ``$STAPEL_PG_BIN``), ``initdb`` in a temp dir,
listening on a Unix socket in that dir only (no TCP), trust authentication for the
``postgres`` role. As root (CI) the server runs as the ``postgres`` user
(``runuser -u postgres --``, the temp dir chowned to it): PostgreSQL refuses to run as
root. A missing server FAILS the tests that use it, with the reason: the store is
tested against a real server, never skipped.

``fsync = off``: the tests crash the *server process* (``pg_ctl restart -m immediate``,
SIGKILL of hubs), never the machine, and a committed transaction's WAL has been written
to the kernel before the commit returns, so it survives a server crash without fsync;
``synchronous_commit`` stays ``on`` (a commit returns only after its WAL is written).
The benchmark keeps fsync on.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

PG_BIN = Path(os.environ.get("STAPEL_PG_BIN", "/usr/lib/postgresql/15/bin"))

MISSING = (
    "PostgreSQL 15's server binaries are not at {bin} (Debian: apt-get install "
    "postgresql-15, or set STAPEL_PG_BIN to a PostgreSQL 15 bin directory); the store "
    "tests need a real server"
)


class PgCluster:
    """One ``initdb`` cluster in a temp dir. :meth:`start` / :meth:`stop`, and
    :meth:`restart_immediate` (a crash restart: ``pg_ctl restart -m immediate``)."""

    def __init__(self, *, fsync: bool = False, port: int = 5432,
                 settings: Optional[Dict[str, str]] = None) -> None:
        for tool in ("initdb", "pg_ctl", "postgres"):
            if not (PG_BIN / tool).exists():
                raise RuntimeError(MISSING.format(bin=PG_BIN))
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="srp-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._user: Optional[str] = None
        if os.geteuid() == 0:
            # The server refuses to run as root: hand the dir to the postgres user.
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError("running as root, and there is no 'postgres' user to "
                                   "run the server as") from exc
            self._user = "postgres"
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o755)
        self.settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.root}'",
            "port": str(port),
            "fsync": "on" if fsync else "off",
            "max_connections": "200",
            "log_min_messages": "warning",
        }
        self.settings.update(settings or {})
        self._dbs = itertools.count(1)
        self.running = False

    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> "subprocess.CompletedProcess[str]":
        cmd: List[str] = list(argv)
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}"
                               f"{proc.stderr}\n{self.server_log()}")
        return proc

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def start(self) -> "PgCluster":
        if not self.data.exists():
            self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                      "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
            with open(self.data / "postgresql.conf", "a", encoding="utf-8") as f:
                for key, value in self.settings.items():
                    f.write(f"{key} = {value}\n")
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-w", "-t", "60", "start")
        self.running = True
        return self

    def stop(self) -> None:
        if self.running:
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                      "stop", check=False)
            self.running = False

    def restart_immediate(self) -> None:
        """Crash the server (``-m immediate``: no checkpoint, every backend killed) and
        start it again; returns once it accepts connections."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-m", "immediate", "-w", "-t", "60", "restart")

    def stop_immediate(self) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                  "stop")
        self.running = False

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.root} port={self.port} user=postgres dbname={dbname}"

    def new_database(self, prefix: str = "t") -> str:
        """A fresh, empty database; returns its DSN."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._dbs)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.dsn(), autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                return self.dsn(name)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's cluster (started once, removed at the end). Fails, never skips,
    when PostgreSQL 15 is missing."""
    try:
        cluster = PgCluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
