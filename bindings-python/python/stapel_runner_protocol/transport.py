"""Transport-agnostic encode / decode of JSON text frames (the Rust core's codec).

``encode`` is deterministic and byte-stable: declared keys in the fixed per-type order,
then unknown fields in arrival order; empty optional fields omitted; compact JSON, UTF-8
without ASCII escaping. ``decode`` dispatches on ``type`` and, with ``validate=True``,
checks every schema rule. Errors: ``RunnerProtocolError`` (``not_json``,
``duplicate_key``, ``not_object``), ``UnknownMessageError`` (``unknown_type``),
``SchemaValidationError`` (``schema_violation``), each with its ``code``.
"""

from __future__ import annotations

from typing import Any, Dict, Union

# The native function: a vectorcall function that reads a ``str``
# without copying it (see ``src/fastcall.rs``); ``decode(frame, *, validate=False)``.
from ._native import decode
from ._native import encode
# 0.1.1's names in this module.
from .errors import RunnerProtocolError as RunnerProtocolError
from .errors import UnknownMessageError as UnknownMessageError
from .messages import MESSAGES as MESSAGES
from .messages import Message

__all__ = ["encode", "decode", "to_frame"]


def to_frame(message: Union[Message, Dict[str, Any]]) -> str:
    """Alias of :func:`encode` (a frame is one JSON text message)."""
    return encode(message)
