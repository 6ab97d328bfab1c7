"""Sequencing, idempotency and resume/replay (seed 000), in the Rust core.

* **runner → hub** ``task.progress`` / ``task.report`` form one stream per
  ``(task_id, attempt)``; the hub applies each seq once, so a runner may re-send from its
  last checkpoint after a reconnect and the duplicates are dropped.
* **hub → runner** ``task.assign`` / ``task.cancel`` form one stream per task; the hub
  keeps its frames and, after a reconnect, replays everything after the ``last_seq`` the
  runner declares in ``hello.resume``.

>>> from stapel_runner_protocol import ConnectionState, TaskCancel
>>> hub, runner = ConnectionState("hub"), ConnectionState("runner")
>>> c1 = hub.emit(TaskCancel(task_id="T-1", reason="a"))
>>> c2 = hub.emit(TaskCancel(task_id="T-1", reason="b"))
>>> c1.seq, c2.seq
(1, 2)
>>> runner.receive(c1), runner.receive(c1)
(True, False)
>>> hub.replay_for(runner.resume_map())
{'T-1': [TaskCancel(task_id='T-1', reason='b', seq=2, schema_version=1, extra={})]}

Every bound (inbound window, kept frames and bytes, streams, tombstones) is a keyword
of :class:`ConnectionState`; the state persists with ``snapshot()`` /
``ConnectionState.restore(data)``.

* A finished task is dropped with ``forget_task(task_id)`` once
  ``is_fully_acknowledged(task_id)``; a bounded tombstone (``max_tombstones``,
  ``is_forgotten``) keeps its late or replayed frames duplicates.
* ``trim_through(task_id, attempt, seq)`` drops kept frames the peer is known to hold
  (e.g. a checkpoint) without re-stamping or moving numbering, unlike ``ack``.
* Provisional numbering: after ``mark_unconfirmed()`` (a fresh or restored state that may
  be older than the peer's) emitted frames are provisional; an ``ack`` or declaration at
  or above them (``is_ahead``) re-stamps them after the peer's position instead of
  dropping them, and ``confirm_all()`` makes them final. The session machines do this
  themselves.

>>> runner = ConnectionState("runner", max_tombstones=100)
>>> from stapel_runner_protocol import TaskProgress
>>> p = runner.emit(TaskProgress(task_id="T-1", kind="state", attempt=1))
>>> runner.is_fully_acknowledged("T-1"), runner.trim_through("T-1", 1, p.seq)
(False, 1)
>>> runner.is_fully_acknowledged("T-1") and runner.forget_task("T-1"), runner.is_forgotten("T-1")
(True, True)

Standalone pieces (stapel-runner-protocol 0.1.1's): ``OutboxLog()`` (``emit`` /
``since`` / ``ack`` / ``last_seq``), ``InboxTracker()`` (``receive(seq)`` /
``last_seq``) and ``TaskChannel(task_id)`` (``outbox``, ``inbox``, ``emit``, ``receive``,
``replay``, ``last_received``), each bounded — ``max_frames`` / ``max_bytes`` kept,
a ``window`` of seqs above ``last_seq`` — with ``ProtocolStateError`` codes
(``backpressure``, ``frame_too_large``, ``beyond_window``, ``invalid_seq``) at the bound:

>>> from stapel_runner_protocol import InboxTracker, OutboxLog, TaskCancel
>>> log = OutboxLog(max_frames=2)
>>> [log.emit(TaskCancel(task_id="T-1", reason=r)).seq for r in "ab"]
[1, 2]
>>> [m.reason for m in log.since(1)], log.ack(1), log.last_seq
(['b'], None, 2)
>>> inbox = InboxTracker()
>>> inbox.receive(1), inbox.receive(3), inbox.receive(1), inbox.last_seq
(True, True, False, 1)

The :class:`TaskChannel`, :class:`OutboxLog` and :class:`InboxTracker` objects a
state gives (``state.channel(task_id)``, ``state.channels``) are copies of its streams:
emitting or receiving through them raises ``TypeError``, but ``outbox.ack(seq)`` trims
the state's stream, as 0.1.1's live log did.
"""

from __future__ import annotations

from typing import FrozenSet

from ._native import (
    ConnectionState,
    InboxTracker,
    OutboxLog,
    TaskChannel,
    is_sequenced,
    message_types,
)

from ._types import Position, ReplayReport, Resync, SequencingConfig, StreamReplay
from .errors import ProtocolStateError  # noqa: F401 (0.1.1's name here)

#: The message types that take part in per-task sequencing (the core's list).
SEQUENCED_TYPES: FrozenSet[str] = frozenset(t for t in message_types() if is_sequenced(t))

__all__ = [
    "SEQUENCED_TYPES",
    "ConnectionState",
    "TaskChannel",
    "OutboxLog",
    "InboxTracker",
    "is_sequenced",
    # JSON shapes
    "Position",
    "ReplayReport",
    "Resync",
    "SequencingConfig",
    "StreamReplay",
]
