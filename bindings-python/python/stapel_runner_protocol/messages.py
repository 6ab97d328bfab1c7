"""The seven hub-protocol messages (seed 000).

Each class is a mutable object backed by the Rust core: attributes carry the wire field
names, unknown top-level fields live in ``extra`` (a dict, re-emitted by ``encode``), and

* ``Cls.from_dict(data)`` builds a message with the tolerant decoding rules (absent fields
  take defaults, ``null`` counts as absent, unknown keys go to ``extra``);
* ``Cls.parse(data, validate=True)`` does the same and checks every schema rule;
* ``msg.to_dict()`` is the message exactly as :func:`~stapel_runner_protocol.encode`
  writes it; ``msg.validate()`` raises
  :class:`~stapel_runner_protocol.errors.SchemaValidationError` or returns ``msg``.

``TaskAssign.task_spec`` and ``TaskReportMessage.report_model`` give the embedded
artifacts as ``stapel_taskspecs`` models. Roles, progress kinds, capabilities and
statuses are open strings.
"""

from __future__ import annotations

from typing import Dict, Type, Union

from ._native import (
    PROTOCOL_VERSION,
    Hello,
    Ping,
    Pong,
    TaskAssign,
    TaskCancel,
    TaskProgress,
    TaskReportMessage,
)

__all__ = [
    "Hello",
    "TaskAssign",
    "TaskProgress",
    "TaskReportMessage",
    "TaskCancel",
    "Ping",
    "Pong",
    "Message",
    "MESSAGES",
    "PROTOCOL_VERSION",
]

#: Any of the seven message classes.
Message = Union[Hello, TaskAssign, TaskProgress, TaskReportMessage, TaskCancel, Ping, Pong]

#: wire ``type`` -> message class, in the seed's order.
MESSAGES: Dict[str, Type[Message]] = {
    Hello.ARTIFACT: Hello,
    TaskAssign.ARTIFACT: TaskAssign,
    TaskProgress.ARTIFACT: TaskProgress,
    TaskReportMessage.ARTIFACT: TaskReportMessage,
    TaskCancel.ARTIFACT: TaskCancel,
    Ping.ARTIFACT: Ping,
    Pong.ARTIFACT: Pong,
}
