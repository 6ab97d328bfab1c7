"""Links: each side's whole connection driver as one sans-IO machine of the Rust core
(``core/src/link/``).

* :class:`RunnerLink` — the runner's outbound connection: when to connect (at once,
  then after the core's backoff with jitter from a seed the host gives once), the
  connect deadline, the :class:`~stapel_runner_protocol.session.RunnerSession` attached
  to one socket at a time, what a frame is (text, or binary decoded strictly as UTF-8),
  the bound of the application's event queue and of a paused socket's backlog, abort
  of a dead peer, a bounded close handshake otherwise, and the error codes.
* :class:`HubLink` — one runner as a hub serves it, across its sockets: the
  :class:`~stapel_runner_protocol.session.HubSession`, which socket serves it (a newer one
  replaces an older one), the same bounds and close policy, and durable
  acknowledgements (``{"session": {"durable_acks": True}}`` + :meth:`~LinkMachine.confirm`).

A host only pumps a link (see :mod:`stapel_runner_protocol.transport_ws`): after every
input, drain ``poll_output()`` and perform each output; arm one timer at
``poll_timeout()``; report the sockets' frames, ends and failures with their ids, and
the events the application took with ``events_taken``.

>>> from stapel_runner_protocol import Hello
>>> link = RunnerLink(Hello(project_id="p-1", runner_version="0.1.0"), seed=7)
>>> link.start(0)
>>> link.drain_outputs(), link.poll_timeout()
([('connect', 1)], 10000)
>>> link.opened(5, 1)
>>> [kind for kind, _ in link.drain_outputs()]
['event', 'send', 'send']
>>> link.connect_failed(6, 2, "failed")   # a socket that is not being connected: ignored
>>> link.phase, link.is_connected
('open', True)
"""

from __future__ import annotations

from ._native import (
    LINK_CONFIG_KEYS,
    LINK_CONNECT_TIMEOUT_MS,
    LINK_MAX_CLOSING_SOCKETS,
    LINK_NEWS_ALLOWANCE,
    SESSION_CONFIG_KEYS,
    HubLink,
    LinkMachine,
    RunnerLink,
    link_config,
)

__all__ = ["LinkMachine", "RunnerLink", "HubLink", "link_config", "LINK_CONFIG_KEYS",
           "SESSION_CONFIG_KEYS", "LINK_NEWS_ALLOWANCE", "LINK_CONNECT_TIMEOUT_MS",
           "LINK_MAX_CLOSING_SOCKETS"]
