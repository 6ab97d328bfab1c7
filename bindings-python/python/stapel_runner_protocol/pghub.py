"""A hub whose runner state lives in PostgreSQL (:mod:`.pgstore`): several hub processes,
one database, any of them may die or stall.

Per accepted runner socket (the bearer token checked by the core's ``HubHost``, as in
:class:`~.transport_ws.HubServer`):

1. **Take ownership** (:meth:`PgStore.take_ownership`): the runner's lease epoch + 1,
   this hub as owner, then its rows — before the runner's hello is read. A new socket
   always takes ownership again and reloads: nothing in memory is trusted across sockets.
2. **Rebuild** the runner's :class:`HubLink` from the rows (the core's rule) with
   durable acknowledgements on, and a ``RowTracker`` over the same rows.
3. **Pump** the socket; every step's outputs wait until the rows the core says that step
   changed (``RowTracker.writes``) are committed: a command is durable before it is sent.
4. **Apply** the runner's progress and reports in batches, one fenced transaction each
   (:meth:`PgStore.apply` with the application's ``effect``), then confirm them to the
   link: no acknowledgement for anything not committed.
5. **Claim** work: ``claim(cursor, runner_id)`` runs inside a fenced transaction and
   returns the ``task.assign`` messages to send; they are sent through the link and their
   rows written in that same transaction, before anything goes out.
6. **Lease**: the core's ``Lease`` machine says when to renew (batched for every runner
   this hub holds, one statement) and when to give up (``expiring``: stop confirming,
   close the socket) before the lease could have expired in the database.

Any store failure for a runner — :class:`~.pgstore.Fenced`, unavailable database, a
limit — drops that runner's socket without performing anything the link queued (its
in-memory state is discarded); the runner reconnects, through any hub, and the next
owner rebuilds from the rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ._native import HubLink, TaskProgress, TaskReportMessage, link_config
from .errors import ConfigError
from .pgstore import Fenced, Ownership, PgStore, StoreError, StoreUnavailable
from .transport_ws import HubConnection, HubServer, _abort_socket, _Pump, _closed_errors

__all__ = ["StoreHub", "Claim", "Effect", "CLOSE_CODE"]

_log = logging.getLogger(__name__)

#: The application's effect: ``effect(cursor, runner_id, messages)`` inside the apply
#: transaction (``messages``: the new ``TaskProgress``/``TaskReportMessage``s, in order).
Effect = Callable[[Any, str, List[Any]], Awaitable[None]]
#: ``claim(cursor, runner_id)`` inside a fenced transaction → ``TaskAssign``s to send.
Claim = Callable[[Any, str], Awaitable[List[Any]]]

#: WebSocket close code for a runner dropped because of the store (the core's
#: ``CLOSE_STORE``, 1012: try again); the reason is the error code.
CLOSE_CODE = 1012


def _close_for(code: str) -> Tuple[int, str]:
    """The core's close (code, reason) for a store error code."""
    from . import _native

    native = getattr(_native, "close_for", None)
    if native is not None:
        c, reason = native(code)
        return int(c), str(reason)
    reason = code if code in ("fenced", "lease_expired", "store_limit") else "store_unavailable"
    return CLOSE_CODE, reason


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _core() -> Tuple[Any, Any]:
    """The core's store rules (``RowTracker``, ``Lease``)."""
    from . import _native

    return getattr(_native, "RowTracker"), getattr(_native, "Lease")


class _GatedPump(_Pump):
    """The transport's pump, except that outputs the outside can see (frames, closes,
    aborts, pauses) are performed only once the rows the link changed are committed
    (``RowTracker.writes`` empty), and never while a transaction of this runner is open.
    A step whose outputs are only application events performs them at once, without
    asking the tracker (its rows are committed before the next visible output)."""

    held: "_Held"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: List[Tuple[str, Any]] = []

    def perform(self, checked: bool = False) -> None:
        h = self.held
        if h.dropped:
            return
        if not h.hub.covers(h):
            # The runner's lease may have run out: nothing more goes out (no frame, no
            # acknowledgement); the socket is dropped.
            h.expiring = True
            h.spawn(h.hub._drop(h, "lease_expired", None))
            return
        self.pending.extend(self.link.drain_outputs())  # type: ignore[arg-type]
        if h.busy:
            h.deferred = True
            self._rearm()
            return
        if (not checked and any(kind != "event" for kind, _ in self.pending)
                and h.tracker.writes(self.link)):
            # Commit first (the flush computes the writes again under the runner's lock:
            # the tracker's list is always everything not yet held).
            h.deferred = True
            h.busy = True
            h.spawn(h.hub._flush(h))
            self._rearm()
            return
        outputs, self.pending = self.pending, []
        h.deferred = False
        self.perform_outputs(outputs)

    def _rearm(self) -> None:
        deadline = self.link.poll_timeout()
        if deadline != self.timer_at:
            self.arm(deadline)


class _Connection(HubConnection):
    def __init__(self, socket: Any, link: HubLink, pump: _GatedPump) -> None:
        super().__init__(socket, link=link)
        self._gated = pump

    def _make_pump(self) -> _Pump:
        return self._gated


class _Held:
    """One runner socket this hub owns."""

    def __init__(self, hub: "StoreHub", own: Ownership, link: HubLink, tracker: Any,
                 socket: Any) -> None:
        self.hub = hub
        self.own = own
        self.runner_id = own.runner_id
        self.link = link
        self.tracker = tracker
        self.socket = socket
        self.pump = _GatedPump(link, time.monotonic)
        self.pump.held = self
        self.conn = _Connection(socket, link, self.pump)
        self.lock = asyncio.Lock()
        #: A transaction of this runner is open, or a flush is scheduled: outputs wait,
        #: and only the holder of ``lock`` asks the tracker for writes.
        self.busy = False
        #: Outputs are waiting for a commit.
        self.deferred = False
        self.dropped = False
        self.expiring = False
        #: Local monotonic ms at which the takeover's transaction began (its lease row
        #: expires no earlier than a lease after that, by the database's clock).
        self.took_at = 0
        #: A renewal that included this runner succeeded: from then on the hub's Lease
        #: machine covers it.
        self.renewed = False
        self.tasks: Set["asyncio.Task[Any]"] = set()
        self.claim_wanted = asyncio.Event()
        self.to_forget: Set[str] = set()

    def spawn(self, coro: Awaitable[Any]) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)


class StoreHub(HubServer):
    """A :class:`HubServer` whose runners' state is in ``store`` (a :class:`PgStore`,
    opened). ``effect`` applies the runner's progress and reports (exactly once, in the
    transaction that records their seqs); ``claim`` (optional) hands out work. Events
    for operators go to ``on_event(dict)`` (``owned``, ``fenced``, ``dropped``,
    ``lease_expired``; default: logged). ``config``/``session``: the core's link and
    session keys (``durable_acks`` is always on); ``lease``: the core's ``Lease`` keys
    (``lease_ms`` defaults to the store's). ``max_batch``: frames applied per
    transaction; ``claim_every_s``: how often a connected runner's ``claim`` runs."""

    def __init__(self, store: PgStore, *, effect: Effect, claim: Optional[Claim] = None,
                 tokens: Optional[Mapping[str, str]] = None,
                 authenticate: Optional[Callable[[str], Optional[str]]] = None,
                 config: Optional[Mapping[str, Any]] = None,
                 session: Optional[Mapping[str, Any]] = None,
                 lease: Optional[Mapping[str, Any]] = None,
                 on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
                 max_batch: int = 256, claim_every_s: float = 0.5) -> None:
        session = dict(session or {})
        session["durable_acks"] = True
        super().__init__(tokens=tokens, authenticate=authenticate, config=config,
                         session=session)
        cfg = dict(config or {})
        nested = dict(cfg.get("session") or {})
        nested.update(session)
        cfg["session"] = nested
        link_config(cfg)  # refuse a bad configuration now
        self._link_cfg = cfg
        self.store = store
        self.effect = effect
        self.claim = claim
        lease = dict(lease or {})
        if lease.setdefault("lease_ms", store.lease_ms) != store.lease_ms:
            raise ConfigError(f"lease_ms {lease['lease_ms']} differs from the store's "
                              f"{store.lease_ms}: the rows' lease and the hub's self-fence "
                              "must be the same time (set it on PgStore)", code="out_of_range")
        _RowTracker, Lease = _core()
        #: The core's Lease configuration, every key filled (the store's ``lease_ms``).
        self.lease_config: Dict[str, int] = dict(Lease(lease).config)
        self.on_event = on_event or (lambda e: _log.info("store hub: %s", e))
        self.max_batch = max_batch
        self.claim_every_s = claim_every_s
        self.held: Dict[str, _Held] = {}
        self._lease: Any = None
        #: Ownerships given up by a self-fence, checked by the next renewal.
        self._lapsed: List[Ownership] = []
        self._lease_timer: Optional[asyncio.TimerHandle] = None
        self._renewing: Optional["asyncio.Task[None]"] = None
        self._stopped = False
        self._background: Set["asyncio.Task[Any]"] = set()
        #: Counters for operators and tests.
        self.counters: Dict[str, int] = {"owned": 0, "fenced": 0, "dropped": 0,
                                         "lease_expired": 0, "applied": 0, "batches": 0,
                                         "assigned": 0}

    # the door --------------------------------------------------------------------------

    async def handler(self, socket: Any) -> None:
        conn = self._conn_id(socket)
        from .transport_ws import _header_pairs, _refuse

        self._host.upgraded(self._now(), conn, _header_pairs(socket.request.headers))
        for kind, value in self._decide():
            if kind == "refuse":
                _conn, code, reason, _refusal = value
                await _refuse(socket, code, reason, self._clock)
                return
            if kind == "attach":
                await self._serve_runner(socket, value[1])
                return

    # one socket ------------------------------------------------------------------------

    async def _serve_runner(self, socket: Any, runner_id: str) -> None:
        RowTracker, _Lease = _core()
        if not self.lease_held():
            self.on_event({"dropped": {"runner_id": runner_id, "code": "lease_expired",
                                       "during": "take_ownership"}})
            await _close(socket, *_close_for("lease_expired"))
            return
        try:
            own, rows, took_at = await self.store.take_ownership(runner_id)
        except StoreError as exc:
            self.on_event({"dropped": {"runner_id": runner_id, "code": exc.code,
                                       "detail": str(exc), "during": "take_ownership"}})
            await _close(socket, *_close_for(exc.code or "store_unavailable"))
            return
        try:
            link = HubLink(self._link_cfg, rows=rows)  # type: ignore[call-arg]
        except Exception as exc:  # rows the core refuses: an operator must look
            self.on_event({"dropped": {"runner_id": runner_id, "code": "invalid_rows",
                                       "detail": str(exc), "during": "take_ownership"}})
            await _close(socket, *_close_for("store_unavailable"))
            return
        h = _Held(self, own, link, RowTracker(rows), socket)
        h.took_at = took_at
        old = self.held.get(runner_id)
        self.held[runner_id] = h
        if old is not None:
            await self._drop(old, "replaced", None)
        if not self.covers(h):  # the hub's lease lapsed while the takeover waited
            await self._drop(h, "lease_expired", None, during="take_ownership")
            return
        # Until a renewal includes it, the runner's row is covered by its takeover only.
        asyncio.get_running_loop().call_later(
            max(0.0, (self._takeover_cover_ends(h) - _now_ms()) / 1000), self._check_cover, h)
        self.counters["owned"] += 1
        self.on_event({"owned": {"runner_id": runner_id, "epoch": own.epoch,
                                 "tasks": len(rows["tasks"]), "commands": len(rows["commands"]),
                                 "inbound": len(rows["inbound"])}})
        try:
            await h.conn.start()
        except Exception as exc:
            await self._drop(h, "attach_failed", exc)
            return
        h.spawn(self._events(h))
        if self.claim is not None:
            h.spawn(self._claims(h))
        try:
            await h.conn.wait_closed()
        finally:
            if not h.dropped:
                h.dropped = True
                self._cleanup(h)

    def _cleanup(self, h: _Held) -> None:
        if self.held.get(h.runner_id) is h:
            del self.held[h.runner_id]
        for t in list(h.tasks):
            if t is not asyncio.current_task():
                t.cancel()

    async def _drop(self, h: _Held, code: str, exc: Optional[BaseException],
                    during: Optional[str] = None) -> None:
        """Drop a runner's socket without performing anything its link queued: the close
        frame carries ``code`` as its reason, then the TCP connection is aborted."""
        if h.dropped:
            return
        h.dropped = True
        self.counters["dropped"] += 1
        if code == "fenced":
            self.counters["fenced"] += 1
        event: Dict[str, Any] = {"runner_id": h.runner_id, "epoch": h.own.epoch, "code": code}
        if exc is not None:
            event["detail"] = str(exc)
        if during is not None:
            event["during"] = during
        if isinstance(exc, Fenced):
            event.update(current_owner=exc.current_owner, current_epoch=exc.current_epoch,
                         expired=exc.expired)
        self.on_event({"fenced" if code == "fenced" else "dropped": event})
        if code in ("store_unavailable", "lease_expired") and h.own not in self._lapsed:
            # Did another hub take the runner meanwhile? The next renewal tells.
            self._lapsed.append(h.own)
        pump = h.pump
        pump.dead = exc if exc is not None else StoreError(code, code=code)
        if pump.timer is not None:
            pump.timer.cancel()
            pump.timer = None
        self._cleanup(h)
        for s in list(pump.sockets.values()):
            if s.ws is not None:
                await _close(s.ws, *_close_for(code))
            pump.gone(s)
        pump.stopped.set()
        pump.events.append(("error", pump.dead))
        pump.nonempty.set()

    async def _step_failed(self, h: _Held, exc: BaseException, during: str) -> None:
        """A transaction of ``h`` (``during``: flush, apply, claim) raised: the runner's
        step is over (not busy), its socket is dropped for the error, and a cancellation
        goes on up."""
        h.busy = False
        await self._fail(h, exc, during)
        if isinstance(exc, asyncio.CancelledError):
            raise exc

    async def _fail(self, h: _Held, exc: BaseException, during: str) -> None:
        if isinstance(exc, asyncio.CancelledError):
            # The socket ended (or the hub stops) while a transaction of the runner was
            # open: rolled back, nothing acknowledged; not an error.
            await self._drop(h, "stopped", None, during)
            return
        code = exc.code if isinstance(exc, StoreError) and exc.code else "store_unavailable"
        if not isinstance(exc, StoreError):
            _log.error("store hub: runner %s: %r", h.runner_id, exc, exc_info=exc)
        await self._drop(h, code, exc, during)

    # committing a step's writes --------------------------------------------------------

    async def _flush(self, h: _Held) -> None:
        """Commit the writes the pump found, and any more the link has by then, then
        perform the outputs."""
        async with h.lock:
            h.busy = True
            try:
                while not h.dropped:
                    writes = h.tracker.writes(h.link)
                    if not writes:
                        break
                    await self.store.write(h.own, writes)
                    h.tracker.committed()
            except BaseException as exc:
                await self._step_failed(h, exc, "flush")
                return
            h.busy = False
            if not h.dropped:
                h.pump.perform(checked=True)  # the loop just found nothing to write

    def _release(self, h: _Held) -> None:
        """A transaction of ``h`` ended: perform what waited (or commit it first)."""
        h.busy = False
        if not h.dropped and h.deferred:
            h.pump.perform()

    # applying ------------------------------------------------------------------------

    async def _events(self, h: _Held) -> None:
        conn = h.conn
        pump = h.pump
        while not h.dropped:
            kind, value = await conn.recv()
            if kind == "received":
                batch = [value]
                while (len(batch) < self.max_batch and pump.events
                       and pump.events[0][0] == "received"):
                    batch.append((await conn.recv())[1])
                await self._apply(h, batch)
            elif kind == "hello":
                h.claim_wanted.set()
            elif kind == "error" and h.dropped:
                return
            elif kind in ("inbound_gap", "peer_error", "error", "stalled"):
                self.on_event({kind: {"runner_id": h.runner_id, "detail": str(value)}})

    async def _apply(self, h: _Held, batch: List[Any]) -> None:
        messages = [m for m in batch if isinstance(m, (TaskProgress, TaskReportMessage))]
        if not messages:
            return
        rid = h.runner_id

        async def effect(cur: Any, new: List[Any]) -> None:
            await self.effect(cur, rid, new)

        async with h.lock:
            h.busy = True
            try:
                writes = h.tracker.writes(h.link)
                await self.store.apply(h.own, messages, effect, writes)
                if writes:
                    h.tracker.committed()
            except BaseException as exc:
                await self._step_failed(h, exc, "apply")
                return
            self.counters["batches"] += 1
            self.counters["applied"] += len(messages)
            if h.expiring or h.dropped or not self.covers(h):
                # Self-fenced: committed, but nothing is acknowledged any more.
                h.busy = False
                h.expiring = True
                h.spawn(self._drop(h, "lease_expired", None, during="apply"))
                return
            last: Dict[Tuple[str, int], int] = {}
            for m in messages:
                last[(m.task_id, m.attempt)] = max(m.seq, last.get((m.task_id, m.attempt), 0))
                if isinstance(m, TaskReportMessage):
                    h.to_forget.add(m.task_id)
            try:
                now = h.pump.now()
                h.pump.report_taken()
                for (task_id, attempt), seq in last.items():
                    h.link.confirm(now, task_id, attempt, seq)
                for task_id in list(h.to_forget):
                    if h.link.is_fully_acknowledged(task_id):
                        h.link.forget_task(task_id)
                        h.to_forget.discard(task_id)
            except Exception as exc:
                h.busy = False
                await self._fail(h, exc, "confirm")
                return
            h.deferred = True
        self._release(h)
        if any(isinstance(m, TaskReportMessage) for m in messages):
            h.claim_wanted.set()

    # claiming work ---------------------------------------------------------------------

    async def _claims(self, h: _Held) -> None:
        assert self.claim is not None
        while not h.dropped:
            try:
                await asyncio.wait_for(h.claim_wanted.wait(), self.claim_every_s)
            except asyncio.TimeoutError:
                pass
            h.claim_wanted.clear()
            if h.dropped or h.expiring or not h.link.is_connected:
                continue
            await self._claim(h)

    async def _claim(self, h: _Held) -> None:
        assert self.claim is not None
        claim = self.claim
        sent = 0
        async with h.lock:
            h.busy = True
            try:
                async with self.store.transaction(h.own) as cur:
                    assigns = await claim(cur, h.runner_id)
                    if assigns:
                        h.pump.report_taken()
                        now = h.pump.now()
                        for a in assigns:
                            h.link.send(now, a)
                            sent += 1
                    writes = h.tracker.writes(h.link)
                    if writes:
                        await self.store._writes(cur, h.runner_id, writes)
                if writes:
                    h.tracker.committed()
            except BaseException as exc:
                await self._step_failed(h, exc, "claim")
                return
            h.deferred = True
        self.counters["assigned"] += sent
        self._release(h)

    # the lease ---------------------------------------------------------------------

    def _lease_input(self, kind: str, started_at: int = 0) -> None:
        """Feed the hub's one ``Lease`` machine (``tick``, ``renewed``, ``renew_failed``)
        and do what it says."""
        lease = self._lease
        if self._stopped or lease is None:
            return
        now = _now_ms()
        if kind == "renewed":
            lease.renewed(now, started_at)
        elif kind == "renew_failed":
            lease.renew_failed(now)
        else:
            lease.tick(now)
        while (out := lease.poll_output()) is not None:
            if out == "renew":
                self._renewing = asyncio.ensure_future(self._renew())
            elif out == "expiring":
                self._expiring()
            elif out == "held":
                self.on_event({"lease_held": {"hub_id": self.store.hub_id}})
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = None
        deadline = lease.poll_timeout()
        if deadline is not None:
            self._lease_timer = asyncio.get_running_loop().call_later(
                max(0.0, (deadline - _now_ms()) / 1000), self._lease_input, "tick")

    def lease_held(self) -> bool:
        """``True`` while this hub may serve runners (its leases cannot have expired)."""
        return (not self._stopped and self._lease is not None
                and bool(self._lease.is_held(_now_ms())))

    def _takeover_cover_ends(self, h: _Held) -> int:
        return h.took_at + self.lease_config["lease_ms"] - self.lease_config["margin_ms"]

    def covers(self, h: _Held) -> bool:
        """``True`` while ``h``'s lease row cannot have expired: the hub's lease is held
        and either a renewal included the runner or its takeover is recent enough (a
        runner taken while a renewal was in flight is not in that renewal)."""
        return self.lease_held() and (h.renewed or _now_ms() < self._takeover_cover_ends(h))

    def _check_cover(self, h: _Held) -> None:
        if not h.dropped and not self.covers(h):
            h.expiring = True
            if h.own not in self._lapsed:
                self._lapsed.append(h.own)
            h.spawn(self._drop(h, "lease_expired", None))

    def _expiring(self) -> None:
        """Self-fence: the leases may expire soon and were not renewed — stop confirming
        and close every runner socket before any lease can have expired. The runners'
        ownerships go into the next renewal, which tells (``fenced`` events) which of
        them another hub took meanwhile."""
        self.counters["lease_expired"] += 1
        self.on_event({"lease_expired": {"hub_id": self.store.hub_id,
                                         "runners": sorted(self.held)}})
        for h in list(self.held.values()):
            h.expiring = True
            if h.own not in self._lapsed:
                self._lapsed.append(h.own)
            h.spawn(self._drop(h, "lease_expired", None))

    async def _renew(self) -> None:
        """One renewal of every lease this hub holds. Whatever happens, the Lease machine
        hears ``renewed`` or ``renew_failed`` (otherwise it would wait for ever), and it
        hears it before the margin can run out: the statement is bounded in time."""
        held = [h for h in self.held.values() if not h.dropped]
        lapsed, self._lapsed = self._lapsed, []
        budget_s = max(0.001, (self.lease_config["lease_ms"]
                               - self.lease_config["margin_ms"]) / 2000)
        try:
            owned = list(dict.fromkeys([h.own for h in held] + lapsed))
            started, refused = await asyncio.wait_for(self.store.renew(owned), budget_s)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # StoreUnavailable, a timeout, a bug: not renewed
            self._lapsed.extend(o for o in lapsed if o not in self._lapsed)
            if not isinstance(exc, (StoreError, asyncio.TimeoutError)):
                _log.error("store hub: lease renewal failed: %r", exc, exc_info=exc)
            self.on_event({"renew_failed": {"hub_id": self.store.hub_id,
                                            "detail": str(exc) or type(exc).__name__}})
            self._lease_input("renew_failed")
            return
        refused_set = set(refused)
        for h in held:
            if h.own not in refused_set:
                h.renewed = True
        self._lease_input("renewed", started)
        if refused:
            self.spawn_background(self._refused(held, refused))

    async def _refused(self, held: List[_Held], refused: List[Ownership]) -> None:
        """Close the runners a renewal found fenced, naming who holds them now."""
        by_runner = {h.own: h for h in held}
        for own in refused:
            h = by_runner.get(own)
            if h is not None and not h.dropped:
                h.expiring = True  # nothing more goes out while the owner is looked up
            exc2 = Fenced(f"lease renewal refused: runner {own.runner_id!r} at epoch "
                          f"{own.epoch} is no longer this hub's", runner_id=own.runner_id,
                          epoch=own.epoch)
            try:
                row = await self.store.lease(own.runner_id)
            except Exception:
                row = None
            if row is not None:
                exc2.current_owner, exc2.current_epoch = row["owner"], row["epoch"]
            if h is not None and not h.dropped:
                await self._drop(h, "fenced", exc2, during="renew")
            else:
                self._fenced_event(own, exc2, "renew")

    def spawn_background(self, coro: Awaitable[Any]) -> None:
        """Run ``coro`` as a task of the hub (kept until it ends)."""
        t = asyncio.ensure_future(coro)
        self._background.add(t)
        t.add_done_callback(self._background.discard)

    def _fenced_event(self, own: Ownership, exc: Fenced, during: str) -> None:
        self.counters["fenced"] += 1
        self.on_event({"fenced": {"runner_id": own.runner_id, "epoch": own.epoch,
                                  "code": "fenced", "detail": str(exc), "during": during,
                                  "current_owner": exc.current_owner,
                                  "current_epoch": exc.current_epoch,
                                  "expired": exc.expired}})

    async def start(self) -> None:
        """Start the lease (the first renewal; runners are taken once it is held)."""
        if self._lease is None:
            _RowTracker, Lease = _core()
            self._lease = Lease(self.lease_config)
            self._lease_input("tick")
            if self._renewing is not None:
                await asyncio.wait([self._renewing], timeout=self.store.connect_timeout_s)

    async def stop(self) -> None:
        """Stop renewing; close every runner socket (the leases run out)."""
        self._stopped = True
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = None
        tasks = [t for t in [self._renewing, *self._background] if t is not None and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for h in list(self.held.values()):
            await self._drop(h, "stopped", None)

    def serve(self, host: Optional[str] = None, port: Optional[int] = None,
              **serve_kwargs: Any) -> Any:
        """:meth:`HubServer.serve`, with the lease started first and stopped last."""
        return _LeasedServing(self, super().serve(host, port, **serve_kwargs))


class _LeasedServing:
    """The async context of :meth:`StoreHub.serve`: the hub's lease starts before the
    server does and stops after it."""

    def __init__(self, hub: StoreHub, inner: Any) -> None:
        self._hub = hub
        self._inner = inner

    async def __aenter__(self) -> Any:
        await self._hub.start()
        return await self._inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        await self._hub.stop()
        return await self._inner.__aexit__(*exc)


async def _close(ws: Any, code: int, reason: str) -> None:
    try:
        await asyncio.wait_for(ws.close(code, reason), 2.0)
    except Exception:  # timed out, or already closed: the abort below ends it
        pass
    _abort_socket(ws)
