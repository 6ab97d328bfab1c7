"""Hub state in PostgreSQL (extra ``postgres``: psycopg ≥ 3.2).

Errors are the core's store errors (:mod:`.errors`): :class:`StoreError` (codes
``store_unavailable``, ``store_limit``; ``schema_too_new`` from :func:`migrate`) and
:class:`FencedError` (``fenced``), raised here as :class:`StoreUnavailable`,
:class:`StoreLimitError` and :class:`Fenced` with the details.

What a hub keeps per runner is the core's decision (``HubLink.rows()``, ``RowTracker``):
its command streams (``tasks``), the runner's progress streams applied so far
(``inbound``), the unacknowledged commands (``commands``, exact frame text), and the
runner's lease (``owner``, ``epoch``, ``expires_at``). This module is only the SQL:

* :func:`migrate` creates and migrates the schema (versioned, in ``srp_schema_version``;
  idempotent, and safe when several hubs start at once: one advisory lock).
* :class:`PgStore` — one hub process's access: :meth:`~PgStore.take_ownership` (a new
  epoch for the runner, then its rows, in one transaction), :meth:`~PgStore.write`
  (the core's write dicts), :meth:`~PgStore.apply` (exactly-once application of
  progress/report frames with the application's effect in the same transaction),
  :meth:`~PgStore.renew` (lease renewal from the database clock).

**Fencing.** Every write transaction begins with
``SELECT … FROM srp_leases WHERE runner_id = $r AND owner = $hub AND epoch = $epoch AND
expires_at > now() FOR SHARE``: a row lock that a takeover (``UPDATE … SET epoch = epoch
+ 1``) must wait for, and that is re-checked against the newest row version when a
takeover committed first. No row: :class:`Fenced` (code ``fenced``), the transaction is
rolled back, nothing of it is written. The database refuses, not a check in this
process. ``epoch`` only grows (a trigger refuses anything else).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from .errors import FencedError, StoreError

_log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

__all__ = [
    "StoreError", "FencedError", "Fenced", "StoreUnavailable", "StoreLimitError", "Ownership",
    "PgStore",
    "migrate", "schema_version", "MIGRATIONS", "SCHEMA_VERSION", "STORE_TABLES",
    "DEFAULT_LEASE_MS", "DEFAULT_MAX_COMMANDS", "DEFAULT_MAX_TASKS", "Rows", "Effect",
]

_MISSING_PSYCOPG = ('psycopg >= 3.2 is not installed; install it with: '
                    'pip install "stapel-runner-protocol[postgres]"')

#: The lease a hub takes for a runner (the core's ``Lease`` default ``lease_ms``).
DEFAULT_LEASE_MS = 10_000
#: Unacknowledged commands kept per runner before a write is refused.
DEFAULT_MAX_COMMANDS = 4096
#: Task rows (live and forgotten) kept per runner before a write is refused: above the
#: core's default max_tombstones (10,000) plus live tasks.
DEFAULT_MAX_TASKS = 20_000

#: The store's own tables (the hub CLI's application tables are ``srp_hub_*``).
STORE_TABLES = ("srp_leases", "srp_tasks", "srp_inbound", "srp_commands")

#: ``{"tasks": [...], "inbound": [...], "commands": [...]}`` — the core's row dicts.
Rows = Dict[str, List[Dict[str, Any]]]

#: The application's effect: called inside the apply transaction with its cursor and the
#: messages that are new (duplicates are never passed).
Effect = Callable[["psycopg.AsyncCursor[Any]", List[Any]], Awaitable[None]]


class Fenced(FencedError):
    """This hub no longer owns the runner (a newer epoch, another owner, or its lease
    expired): the database refused the transaction and it was rolled back. Close that
    runner's socket. ``current_owner``/``current_epoch``: the lease row as the refusing
    transaction saw it; ``expired``: whether its lease time had passed."""

    def __init__(self, message: str, *, runner_id: str, epoch: int,
                 current_owner: Optional[str] = None, current_epoch: Optional[int] = None,
                 expired: bool = False) -> None:
        super().__init__(message, code="fenced")
        self.runner_id = runner_id
        self.epoch = epoch
        self.current_owner = current_owner
        self.current_epoch = current_epoch
        self.expired = expired


class StoreUnavailable(StoreError):
    """The database could not be reached or the connection broke (code
    ``store_unavailable``). Whether the transaction in flight committed is unknown: drop
    the runner's in-memory state (its next socket reloads it from the rows)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="store_unavailable")


class StoreLimitError(StoreError):
    """A per-runner bound of the store (code ``store_limit``; the message names the
    bound, ``max_commands`` or ``max_tasks``); the transaction was rolled back."""

    def __init__(self, message: str, *, code: str, runner_id: str, limit: int) -> None:
        super().__init__(message, code=code)
        self.runner_id = runner_id
        self.limit = limit


# --- schema --------------------------------------------------------------------------

#: ``(version, description, statements)``, applied in order; never edit a released one,
#: add the next.
MIGRATIONS: Tuple[Tuple[int, str, Tuple[str, ...]], ...] = (
    (1, "store: leases, command streams, inbound positions, command log", (
        """CREATE TABLE srp_leases (
               runner_id  text PRIMARY KEY,
               owner      text NOT NULL,
               epoch      bigint NOT NULL CHECK (epoch > 0),
               expires_at timestamptz NOT NULL)""",
        """CREATE FUNCTION srp_epoch_grows() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
             IF NEW.epoch < OLD.epoch THEN
               RAISE EXCEPTION 'srp_leases.epoch only grows (% -> %)', OLD.epoch, NEW.epoch;
             END IF;
             RETURN NEW;
           END $$""",
        """CREATE TRIGGER srp_epoch_grows BEFORE UPDATE ON srp_leases
           FOR EACH ROW EXECUTE FUNCTION srp_epoch_grows()""",
        """CREATE TABLE srp_tasks (
               runner_id        text NOT NULL,
               task_id          text NOT NULL,
               next_seq         bigint NOT NULL,
               assigned_attempt bigint NOT NULL,
               forgotten        boolean NOT NULL,
               PRIMARY KEY (runner_id, task_id))""",
        """CREATE TABLE srp_inbound (
               runner_id text NOT NULL,
               task_id   text NOT NULL,
               attempt   bigint NOT NULL,
               through   bigint NOT NULL,
               PRIMARY KEY (runner_id, task_id, attempt))""",
        """CREATE TABLE srp_commands (
               runner_id text NOT NULL,
               task_id   text NOT NULL,
               seq       bigint NOT NULL,
               frame     text NOT NULL,
               PRIMARY KEY (runner_id, task_id, seq))""",
    )),
    (2, "hub CLI: task queue, applied progress, reports", (
        """CREATE TABLE srp_hub_queue (
               task_id   text PRIMARY KEY,
               enqueued  bigserial,
               state     text NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'assigned', 'reported')),
               runner_id text,
               attempt   bigint NOT NULL DEFAULT 0,
               hub_id    text)""",
        "CREATE INDEX srp_hub_queue_waiting ON srp_hub_queue (enqueued) WHERE state = 'queued'",
        """CREATE TABLE srp_hub_progress (
               applied   bigserial PRIMARY KEY,
               runner_id text NOT NULL,
               task_id   text NOT NULL,
               attempt   bigint NOT NULL,
               seq       bigint NOT NULL,
               kind      text NOT NULL,
               payload   jsonb,
               hub_id    text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
               UNIQUE (runner_id, task_id, attempt, seq))""",
        """CREATE TABLE srp_hub_reports (
               applied   bigserial PRIMARY KEY,
               runner_id text NOT NULL,
               task_id   text NOT NULL,
               attempt   bigint NOT NULL,
               seq       bigint NOT NULL,
               report    jsonb NOT NULL,
               hub_id    text NOT NULL,
               UNIQUE (task_id, attempt))""",
    )),
    (3, "store: a lease row's owner changes only with a higher epoch; lease rows are never deleted", (
        """CREATE OR REPLACE FUNCTION srp_epoch_grows() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
             IF TG_OP = 'DELETE' THEN
               RAISE EXCEPTION 'srp_leases rows are never deleted (runner %): a new row would restart its epoch',
                               OLD.runner_id;
             END IF;
             IF NEW.epoch < OLD.epoch THEN
               RAISE EXCEPTION 'srp_leases.epoch only grows (% -> %)', OLD.epoch, NEW.epoch;
             END IF;
             IF NEW.owner IS DISTINCT FROM OLD.owner AND NEW.epoch <= OLD.epoch THEN
               RAISE EXCEPTION 'srp_leases: a new owner (% -> %) needs a higher epoch',
                               OLD.owner, NEW.owner;
             END IF;
             RETURN NEW;
           END $$""",
        """CREATE TRIGGER srp_leases_kept BEFORE DELETE ON srp_leases
           FOR EACH ROW EXECUTE FUNCTION srp_epoch_grows()""",
    )),
)

#: The newest schema version this package knows.
SCHEMA_VERSION = MIGRATIONS[-1][0]

#: The advisory lock key ``migrate`` holds (concurrent hubs migrate one at a time).
MIGRATION_LOCK_KEY = 0x53525001


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        from .errors import AdapterUnavailableError

        raise AdapterUnavailableError(_MISSING_PSYCOPG, code="adapter_unavailable") from exc
    return psycopg


def migrate(conn: "psycopg.Connection[Any]") -> int:
    """Bring the schema to :data:`SCHEMA_VERSION` (creating it if needed) in one
    transaction under an advisory lock, so hubs starting together migrate once;
    idempotent. Returns the number of migrations applied. A database whose schema is
    newer than this package raises :class:`StoreError` (``schema_too_new``)."""
    applied = 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute("""CREATE TABLE IF NOT EXISTS srp_schema_version (
                            version     integer PRIMARY KEY,
                            description text NOT NULL,
                            applied_at  timestamptz NOT NULL DEFAULT now())""")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM srp_schema_version").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StoreError(f"the database's schema is version {current}, newer than this "
                             f"package's {SCHEMA_VERSION}: upgrade stapel-runner-protocol",
                             code="schema_too_new")
        for version, description, statements in MIGRATIONS:
            if version <= current:
                continue
            for sql in statements:
                conn.execute(sql)
            conn.execute("INSERT INTO srp_schema_version (version, description) VALUES (%s, %s)",
                         (version, description))
            applied += 1
    return applied


def schema_version(conn: "psycopg.Connection[Any]") -> int:
    """The schema version of the database (0: none)."""
    row = conn.execute("SELECT to_regclass('srp_schema_version') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM srp_schema_version").fetchone()
    return int(row[0]) if row else 0


def connect(dsn: str, **kwargs: Any) -> "psycopg.Connection[Any]":
    """A blocking connection (autocommit; transactions are explicit);
    :class:`StoreUnavailable` when the database cannot be reached."""
    pg = _psycopg()
    kwargs.setdefault("connect_timeout", 5)
    try:
        conn: "psycopg.Connection[Any]" = pg.connect(dsn, autocommit=True, **kwargs)
    except pg.OperationalError as exc:
        raise StoreUnavailable(f"cannot connect to the store: {exc}") from exc
    return conn


# --- the store -----------------------------------------------------------------------


@dataclass(frozen=True)
class Ownership:
    """A hub's hold on a runner: the epoch its takeover wrote."""

    runner_id: str
    owner: str
    epoch: int


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


_FENCE = ("SELECT 1 FROM srp_leases WHERE runner_id = %s AND owner = %s AND epoch = %s "
          "AND expires_at > now() FOR SHARE")
_LEASE_ROW = ("SELECT owner, epoch, expires_at <= now() FROM srp_leases WHERE runner_id = %s")
_TAKE = ("INSERT INTO srp_leases AS l (runner_id, owner, epoch, expires_at) "
         "VALUES (%s, %s, 1, now() + %s * interval '1 millisecond') "
         "ON CONFLICT (runner_id) DO UPDATE SET owner = EXCLUDED.owner, epoch = l.epoch + 1, "
         "expires_at = EXCLUDED.expires_at RETURNING epoch")
_INBOUND = ("INSERT INTO srp_inbound AS i (runner_id, task_id, attempt, through) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (runner_id, task_id, attempt) "
            "DO UPDATE SET through = EXCLUDED.through WHERE i.through < EXCLUDED.through "
            "RETURNING through")
_PUT_TASK = ("INSERT INTO srp_tasks (runner_id, task_id, next_seq, assigned_attempt, forgotten) "
             "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (runner_id, task_id) DO UPDATE SET "
             "next_seq = EXCLUDED.next_seq, assigned_attempt = EXCLUDED.assigned_attempt, "
             "forgotten = EXCLUDED.forgotten")
_PUT_COMMAND = ("INSERT INTO srp_commands (runner_id, task_id, seq, frame) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (runner_id, task_id, seq) DO UPDATE SET frame = EXCLUDED.frame")
_DELETE_COMMANDS = "DELETE FROM srp_commands WHERE runner_id = %s AND task_id = %s AND seq <= %s"
_RENEW = ("UPDATE srp_leases SET expires_at = now() + %s * interval '1 millisecond' "
          "WHERE owner = %s AND expires_at > now() AND (runner_id, epoch) IN "
          "(SELECT * FROM unnest(%s::text[], %s::bigint[])) RETURNING runner_id, epoch")


class PgStore:
    """One hub process's store: a small pool of connections to ``dsn`` (``pool_size``;
    transactions of different runners run side by side, those of one runner are the
    caller's to order) and one more for lease renewals (never queued behind writes).

    ``hub_id`` is this process's owner name in the lease rows (unique per process);
    ``lease_ms`` the lease a takeover or renewal writes (from the database's ``now()``);
    ``max_commands``/``max_tasks`` the per-runner bounds (:class:`StoreLimitError`).
    Every failure to reach the database is :class:`StoreUnavailable`."""

    def __init__(self, dsn: str, hub_id: str, *, lease_ms: int = DEFAULT_LEASE_MS,
                 pool_size: int = 4, max_commands: int = DEFAULT_MAX_COMMANDS,
                 max_tasks: int = DEFAULT_MAX_TASKS, connect_timeout_s: float = 5.0,
                 migrate_schema: bool = True) -> None:
        if not hub_id:
            raise ValueError("hub_id must not be empty")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self.dsn = dsn
        self.hub_id = hub_id
        self.lease_ms = int(lease_ms)
        self.max_commands = int(max_commands)
        self.max_tasks = int(max_tasks)
        self.connect_timeout_s = connect_timeout_s
        self.migrate_schema = migrate_schema
        self._pool_size = pool_size
        self._idle: List[Any] = []
        self._slots: Optional[asyncio.Semaphore] = None
        self._lease_conn: Any = None
        self._lease_lock: Optional[asyncio.Lock] = None
        self._closed = False
        self._psycopg = _psycopg()
        #: Counters: transactions committed, refused by fencing, failed.
        self.stats: Dict[str, int] = {"committed": 0, "fenced": 0, "unavailable": 0,
                                      "applied": 0, "duplicates": 0, "reaped": 0}

    # connections ----------------------------------------------------------------------

    async def open(self) -> "PgStore":
        """Migrate the schema (unless ``migrate_schema=False``) and check the database is
        reachable."""
        self._slots = asyncio.Semaphore(self._pool_size)
        self._lease_lock = asyncio.Lock()
        if self.migrate_schema:
            def run() -> None:
                with connect(self.dsn, connect_timeout=max(1, int(self.connect_timeout_s))) as c:
                    migrate(c)
            try:
                await asyncio.to_thread(run)
            except self._psycopg.OperationalError as exc:
                raise StoreUnavailable(f"cannot migrate the store: {exc}") from exc
        return self

    async def close(self) -> None:
        """Close every connection, and each one in use as soon as it is returned; later
        transactions and renewals raise :class:`StoreUnavailable`."""
        self._closed = True
        conns, self._idle = self._idle, []
        if self._lease_conn is not None:
            conns.append(self._lease_conn)
            self._lease_conn = None
        for c in conns:
            try:
                await c.close()
            except Exception:
                pass

    async def __aenter__(self) -> "PgStore":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _connect(self, *, lease: bool = False) -> Any:
        if self._closed:
            raise StoreUnavailable("the store was closed")
        options = f"-c idle_in_transaction_session_timeout={self.lease_ms}"
        if lease:
            # A renewal never waits long behind a row lock (its own hub's write
            # transactions hold FOR SHARE locks on the lease rows) nor on a dead network:
            # it fails, and the Lease machine retries it before the margin runs out.
            options += (f" -c lock_timeout={max(1, self.lease_ms // 10)}"
                        f" -c statement_timeout={max(1, self.lease_ms // 4)}")
        try:
            # A hub stalled inside a transaction (SIGSTOP, a long pause) would hold its
            # lease row lock and block a takeover: the server ends such a session after a
            # lease's time when it is idle in the transaction (take_ownership reaps the
            # other cases).
            return await self._psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True,
                connect_timeout=max(1, int(self.connect_timeout_s)),
                application_name=f"srp-hub/{self.hub_id}"[:63],
                options=options, keepalives=1, keepalives_idle=5, keepalives_interval=2,
                keepalives_count=3)
        except self._psycopg.OperationalError as exc:
            self.stats["unavailable"] += 1
            raise StoreUnavailable(f"cannot connect to the store: {exc}") from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        if self._slots is None:
            raise RuntimeError("PgStore.open() was not called")
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                yield conn
            except self._psycopg.errors.LockNotAvailable:
                raise  # a lock_timeout of ours, not a failure of the store
            except self._psycopg.OperationalError as exc:
                self.stats["unavailable"] += 1
                # After a server restart every idle connection is dead too: close them
                # all, so that each does not cost one more runner a failed transaction.
                stale, self._idle = self._idle, []
                for c in stale:
                    try:
                        await c.close()
                    except Exception:
                        pass
                raise StoreUnavailable(f"the store connection failed: {exc}") from exc
            finally:
                idle = self._psycopg.pq.TransactionStatus.IDLE
                if (self._closed or conn.closed or conn.broken
                        or conn.info.transaction_status != idle):
                    try:
                        await conn.close()
                    except Exception:
                        pass
                else:
                    self._idle.append(conn)

    # fencing ---------------------------------------------------------------------------

    async def _fence(self, cur: Any, own: Ownership) -> None:
        await cur.execute(_FENCE, (own.runner_id, own.owner, own.epoch))
        if await cur.fetchone() is not None:
            return
        await cur.execute(_LEASE_ROW, (own.runner_id,))
        row = await cur.fetchone()
        self.stats["fenced"] += 1
        if row is None:
            raise Fenced(f"runner {own.runner_id!r} has no lease row", runner_id=own.runner_id,
                         epoch=own.epoch)
        owner, epoch, expired = row
        if owner == own.owner and epoch == own.epoch:
            why = "its lease expired"
        else:
            why = f"it is owned by {owner!r} at epoch {epoch}"
        raise Fenced(f"fenced: hub {own.owner!r} (epoch {own.epoch}) no longer owns runner "
                     f"{own.runner_id!r}: {why}", runner_id=own.runner_id, epoch=own.epoch,
                     current_owner=owner, current_epoch=int(epoch), expired=bool(expired))

    @asynccontextmanager
    async def transaction(self, own: Ownership) -> AsyncIterator[Any]:
        """A write transaction for ``own``'s runner: the fencing check runs first
        (:class:`Fenced` when it fails), then the body with the transaction's cursor;
        committed when the body returns, rolled back when it raises."""
        async with self._connection() as conn:
            async with conn.transaction():
                async with conn.cursor() as cur:
                    await self._fence(cur, own)
                    yield cur
            self.stats["committed"] += 1

    # ownership -------------------------------------------------------------------------

    async def take_ownership(self, runner_id: str) -> Tuple[Ownership, Rows, int]:
        """Take the runner: ``epoch + 1``, this hub as owner, ``expires_at = now() +
        lease`` (the row is created at epoch 1), then its rows — one transaction, which
        waits for a previous owner's transaction in flight. Returns the ownership, the
        rows (the core rebuilds the runner's link from them) and the local monotonic ms
        at which the transaction began.

        A previous owner stalled *inside* a transaction (stopped, or paused longer than
        a lease) would hold the lease row's lock for ever — in the middle of a pipeline
        no server timeout ends it. So while the takeover waits, every half lease it ends
        the hub sessions (``application_name`` ``srp-hub/…``) that block *this* takeover
        (``pg_blocking_pids``) and whose transaction has been open longer than a lease
        (:meth:`reap_stalled`: rolled back, nothing of it committed, so nothing it
        confirmed). A blocker younger than a lease is waited for. After four leases
        without the lock: :class:`StoreUnavailable`."""
        async with self._connection() as conn:
            reaper = asyncio.ensure_future(self._reap_blockers_of(conn.info.backend_pid))
            try:
                started = _now_ms()
                async with conn.transaction():
                    async with conn.cursor() as cur:
                        await cur.execute(
                            f"SET LOCAL lock_timeout = {max(1, 4 * self.lease_ms)}")
                        try:
                            await cur.execute(_TAKE, (runner_id, self.hub_id, self.lease_ms))
                        except self._psycopg.errors.LockNotAvailable as exc:
                            raise StoreUnavailable(
                                f"runner {runner_id!r}: its lease row stayed locked by "
                                "another transaction") from exc
                        row = await cur.fetchone()
                        assert row is not None
                        own = Ownership(runner_id, self.hub_id, int(row[0]))
                        rows = await self._rows(cur, runner_id)
            finally:
                reaper.cancel()
                await asyncio.gather(reaper, return_exceptions=True)
        self.stats["committed"] += 1
        return own, rows, started

    async def _reap_blockers_of(self, pid: int) -> None:
        """While the session ``pid`` waits, every half lease: end its stalled blockers."""
        while True:
            await asyncio.sleep(max(0.001, self.lease_ms / 2000))
            try:
                await self.reap_stalled(pid)
            except (StoreError, self._psycopg.Error) as exc:
                _log.warning("pgstore: reaping the blockers of a takeover failed: %s", exc)

    async def reap_stalled(self, waiter: int) -> int:
        """End the hub sessions (any hub's) that block the session ``waiter`` and whose
        transaction has been open longer than a lease; returns how many. Their
        transactions roll back. Its own connection, outside the pool (the pool may be
        full of waiting takeovers)."""
        conn = await self._connect()
        try:
            cur = await conn.execute(
                "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a "
                "WHERE a.pid = ANY (pg_blocking_pids(%s)) "
                "AND a.datname = current_database() AND a.application_name LIKE 'srp-hub/%%' "
                "AND a.xact_start < now() - %s * interval '1 millisecond'",
                (waiter, self.lease_ms))
            row = await cur.fetchone()
        except self._psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot reap stalled sessions: {exc}") from exc
        finally:
            await conn.close()
        n = int(row[0]) if row else 0
        self.stats["reaped"] += n
        return n

    async def _rows(self, cur: Any, runner_id: str) -> Rows:
        await cur.execute("SELECT task_id, next_seq, assigned_attempt, forgotten FROM srp_tasks "
                          "WHERE runner_id = %s ORDER BY task_id", (runner_id,))
        tasks = [{"task_id": t, "next_seq": int(n), "assigned_attempt": int(a),
                  "forgotten": bool(f)} for t, n, a, f in await cur.fetchall()]
        await cur.execute("SELECT task_id, attempt, through FROM srp_inbound WHERE runner_id = %s "
                          "ORDER BY task_id, attempt", (runner_id,))
        inbound = [{"task_id": t, "attempt": int(a), "through": int(s)}
                   for t, a, s in await cur.fetchall()]
        await cur.execute("SELECT task_id, seq, frame FROM srp_commands WHERE runner_id = %s "
                          "ORDER BY task_id, seq", (runner_id,))
        commands = [{"task_id": t, "seq": int(s), "frame": f} for t, s, f in await cur.fetchall()]
        return {"tasks": tasks, "inbound": inbound, "commands": commands}

    async def load_rows(self, runner_id: str) -> Rows:
        """The runner's rows as committed (a read; no ownership taken)."""
        async with self._connection() as conn:
            async with conn.cursor() as cur:
                return await self._rows(cur, runner_id)

    async def lease(self, runner_id: str) -> Optional[Dict[str, Any]]:
        """The runner's lease row: ``{runner_id, owner, epoch, expires_at}`` or ``None``."""
        async with self._connection() as conn:
            async with conn.cursor() as cur:
                await cur.execute("SELECT owner, epoch, expires_at FROM srp_leases "
                                  "WHERE runner_id = %s", (runner_id,))
                row = await cur.fetchone()
        if row is None:
            return None
        return {"runner_id": runner_id, "owner": row[0], "epoch": int(row[1]),
                "expires_at": row[2]}

    async def release(self, own: Ownership) -> bool:
        """Give the runner up at once (its lease ends now; the epoch stays): a clean
        shutdown. ``False`` when this hub no longer held it."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "UPDATE srp_leases SET expires_at = now() WHERE runner_id = %s AND owner = %s "
                "AND epoch = %s AND expires_at > now()", (own.runner_id, own.owner, own.epoch))
            return bool(cur.rowcount)

    # writes ----------------------------------------------------------------------------

    async def _writes(self, cur: Any, runner_id: str, writes: Sequence[Mapping[str, Any]]) -> None:
        commands = tasks = False
        for w in writes:
            op = w["op"]
            if op == "put_task":
                await cur.execute(_PUT_TASK, (runner_id, w["task_id"], w["next_seq"],
                                              w["assigned_attempt"], bool(w["forgotten"])))
                tasks = True
            elif op == "put_command":
                await cur.execute(_PUT_COMMAND, (runner_id, w["task_id"], w["seq"], w["frame"]))
                commands = True
            elif op == "delete_commands":
                await cur.execute(_DELETE_COMMANDS, (runner_id, w["task_id"], w["through"]))
            elif op == "delete_task":
                for table in STORE_TABLES[1:]:
                    await cur.execute(f"DELETE FROM {table} WHERE runner_id = %s AND task_id = %s",
                                      (runner_id, w["task_id"]))
            else:
                raise ValueError(f"unknown store write {op!r}")
        if commands:
            await cur.execute("SELECT count(*) FROM srp_commands WHERE runner_id = %s", (runner_id,))
            n = int((await cur.fetchone())[0])
            if n > self.max_commands:
                raise StoreLimitError(
                    f"runner {runner_id!r} would keep {n} unacknowledged commands, more than "
                    f"max_commands ({self.max_commands}); the runner is not acknowledging",
                    code="store_limit", runner_id=runner_id, limit=self.max_commands)
        if tasks:
            await cur.execute("SELECT count(*) FROM srp_tasks WHERE runner_id = %s", (runner_id,))
            n = int((await cur.fetchone())[0])
            if n > self.max_tasks:
                raise StoreLimitError(
                    f"runner {runner_id!r} would keep {n} task rows, more than max_tasks "
                    f"({self.max_tasks}); forget finished tasks", code="store_limit",
                    runner_id=runner_id, limit=self.max_tasks)

    async def write(self, own: Ownership, writes: Sequence[Mapping[str, Any]],
                    body: Optional[Callable[[Any], Awaitable[None]]] = None) -> None:
        """Commit the core's write dicts (``put_task``, ``put_command``,
        ``delete_commands``, ``delete_task``) in one fenced transaction, with ``body``
        (the caller's own statements, given the cursor) after them."""
        async with self.transaction(own) as cur:
            await self._writes(cur, own.runner_id, writes)
            if body is not None:
                await body(cur)

    async def apply(self, own: Ownership, messages: Sequence[Any], effect: Optional[Effect] = None,
                    writes: Sequence[Mapping[str, Any]] = ()) -> List[Any]:
        """Apply the runner's ``task.progress``/``task.report`` messages (anything with
        ``task_id``, ``attempt``, ``seq``; in the order the link delivered them) exactly
        once, in ONE transaction: the fencing check; per message ``UPDATE srp_inbound SET
        through = seq WHERE … AND through < seq`` (inserted when absent) — no row means
        the database has it already, a duplicate; ``effect(cursor, new_messages)``; the
        ``writes``; commit. Returns the new messages: confirm them to the link only now
        (``link.confirm``), never before this returns."""
        if not messages:
            if writes:
                await self.write(own, writes)
            return []
        rid = own.runner_id
        async with self.transaction(own) as cur:
            await cur.executemany(_INBOUND, [(rid, m.task_id, m.attempt, m.seq) for m in messages],
                                  returning=True)
            new: List[Any] = []
            for m in messages:
                if await cur.fetchone() is not None:
                    new.append(m)
                cur.nextset()
            if new and effect is not None:
                await effect(cur, new)
            if writes:
                await self._writes(cur, rid, writes)
        self.stats["applied"] += len(new)
        self.stats["duplicates"] += len(messages) - len(new)
        return new

    # leases ----------------------------------------------------------------------------

    async def renew(self, owned: Sequence[Ownership]) -> Tuple[int, List[Ownership]]:
        """Renew every lease in ``owned`` (``expires_at = now() + lease``, only where this
        hub still holds that epoch and the lease has not expired) in one statement on the
        lease connection (also with none: the database's answer is what renews the hub's
        lease time). Returns the local monotonic ms at which it began (the core's
        ``renewed.started_at``) and the ownerships refused — fenced: close those
        runners. :class:`StoreUnavailable` when the database cannot be reached."""
        if self._lease_lock is None:
            raise RuntimeError("PgStore.open() was not called")
        async with self._lease_lock:
            started = _now_ms()
            try:
                if self._lease_conn is None or self._lease_conn.closed or self._lease_conn.broken:
                    self._lease_conn = None
                    self._lease_conn = await self._connect(lease=True)
                cur = await self._lease_conn.execute(
                    _RENEW, (self.lease_ms, self.hub_id, [o.runner_id for o in owned],
                             [o.epoch for o in owned]))
                kept = {(r, int(e)) for r, e in await cur.fetchall()}
            except self._psycopg.OperationalError as exc:
                self.stats["unavailable"] += 1
                raise StoreUnavailable(f"lease renewal failed: {exc}") from exc
        refused = [o for o in owned if (o.runner_id, o.epoch) not in kept]
        self.stats["fenced"] += len(refused)
        return started, refused


def dumps(value: Any) -> str:
    """Compact JSON for ``jsonb`` parameters."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
