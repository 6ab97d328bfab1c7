"""What a hub persists, and when (the Rust core's ``store`` module); SQL is the host's.

* :meth:`HubSession.rows() <stapel_runner_protocol.session.HubSession.rows>` /
  :meth:`HubLink.rows() <stapel_runner_protocol.link.HubLink.rows>` — the rows a store
  holds of one runner: ``tasks`` (``task_id``, ``next_seq``, ``assigned_attempt``,
  ``forgotten``), ``inbound`` (``task_id``, ``attempt``, ``through``: applied through
  that seq) and ``commands`` (``task_id``, ``seq``, ``frame``: unacknowledged, byte for
  byte); ``HubSession.from_rows(rows, config)`` and ``HubLink(config, rows=rows)``
  rebuild the session on a takeover.
* :class:`RowTracker` — the writes each step needs before its outputs are performed.
* :class:`Lease` — when a hub renews its runners' leases, and when it must stop serving
  them; :func:`close_for` — the close code and reason for a store error.
* ``StoreError`` / ``FencedError`` (:mod:`stapel_runner_protocol.errors`).

What is written when (the host's duties):

1. On every new socket of a runner, before its hello: raise the lease's epoch and read
   the runner's rows in one transaction; build the link over them
   (``durable_acks`` on) and a ``RowTracker`` over the same rows.
2. After every input: commit ``tracker.writes(link)`` (commands durable before they
   are sent), then perform the link's outputs.
3. Apply each delivered progress frame or report in one transaction with its effect:
   ``through := seq`` where ``through < seq`` (0 rows: a duplicate, skip the effect);
   commit; then ``link.confirm(...)``.
4. Renew when the :class:`Lease` says ``"renew"``; on ``"expiring"`` stop confirming and
   close every runner with ``close_for("lease_expired")``.

>>> from stapel_runner_protocol import TaskCancel
>>> from stapel_runner_protocol.session import HubSession
>>> hub = HubSession(durable_acks=True)
>>> tracker = RowTracker()
>>> hub.send(0, TaskCancel(task_id="T-1", reason="stop"))
>>> [w["op"] for w in tracker.writes(hub)]
['put_task', 'put_command']
>>> tracker.committed()
>>> tracker.writes(hub)
[]
>>> again = HubSession.from_rows(hub.rows(), {"durable_acks": True})
>>> again.rows() == hub.rows()
True
>>> close_for("fenced")
(1012, 'fenced')
"""

from __future__ import annotations

from ._native import LEASE_CONFIG_KEYS, Lease, RowTracker, close_for
from .errors import FencedError, StoreError

__all__ = ["RowTracker", "Lease", "close_for", "LEASE_CONFIG_KEYS", "StoreError",
           "FencedError"]
