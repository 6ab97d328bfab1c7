"""The hub and runner session machines (the Rust core's sans-IO ``HubSession`` and
``RunnerSession``) over :class:`~stapel_runner_protocol.ConnectionState`: hello with
resume, replay, duplicate suppression, in-order delivery, acknowledgements, keepalive
and the dead-peer timeout. A transport (WebSocket, JSONL pipe) moves the frames; time is
the ``now_ms`` the host passes in. Over a fresh or restored state a runner follows its
hello with a barrier ping and holds provisional frames until the pong; the session's
own state is reached through ``forget_task``, ``trim_through``,
``is_fully_acknowledged`` and ``is_forgotten`` (``state`` is a copy). The keyword
configuration is read by the core's one config reader: a bad ``sequencing`` dict (an
unknown key, a wrong type, a negative number) raises ``ValueError`` carrying the core's
``code`` (``unknown_key``, ``wrong_type``, ``out_of_range``, ``not_an_object``) and the
offending ``key`` (``sequencing.max_streams``).

>>> from stapel_runner_protocol import Hello, TaskCancel
>>> hub, runner = HubSession(), RunnerSession(Hello(project_id="p-1", runner_version="0.1.0"))
>>> hub.connected(0); runner.connected(0)
>>> hub.send(0, TaskCancel(task_id="T-1", reason="stop"))
>>> def pump(src, dst):
...     events = []
...     for kind, value in src.drain_outputs():
...         if kind == "transmit":
...             dst.frame(0, value)
...         elif kind != "timeout":
...             events.append((kind, value))
...     return events
>>> pump(runner, hub)   # the hello
[]
>>> pump(hub, runner)   # the hub's events: the hello; then its frames go to the runner
[('hello', Hello(project_id='p-1', runner_version='0.1.0', protocol_version=1, capabilities=[], resume={}, schema_version=1, extra={}))]
>>> pump(runner, hub)   # the runner's events: the command, exactly once, in order
[('received', TaskCancel(task_id='T-1', reason='stop', seq=1, schema_version=1, extra={}))]
"""

from __future__ import annotations

from ._native import HubSession, RunnerSession, SessionMachine
from ._types import PeerError, Resync, SequencingConfig

__all__ = ["SessionMachine", "HubSession", "RunnerSession", "PeerError", "Resync",
           "SequencingConfig"]
