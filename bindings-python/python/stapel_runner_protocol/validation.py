"""Schema validation of hub-protocol messages by name (the Rust core's rules).

``validate(instance, name)`` raises :class:`~stapel_runner_protocol.errors.SchemaValidationError`
listing every violation; ``iter_errors`` returns one line per violation; ``is_valid`` a
bool. ``instance`` is a dict or a message object; its ``type`` must be ``name``, as the
message's schema requires (absent: a ``required`` violation at ``type``).
The JSON Schemas the rules correspond to ship with the package (``load_schema``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from ._native import (
    PROTOCOL_VERSION,
    SCHEMA_VERSION,
    is_valid,
    iter_errors,
    message_types,
    schema_files,
    validate,
)
from .errors import SchemaValidationError, UnknownMessageError  # noqa: F401 (0.1.1's names)

__all__ = [
    "validate",
    "is_valid",
    "iter_errors",
    "load_schema",
    "message_types",
    "SCHEMA_FILES",
    "SCHEMA_VERSION",
    "PROTOCOL_VERSION",
]

_SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"

#: wire message ``type`` -> schema file name (in the package's ``schemas/`` folder): the
#: core's manifest.
SCHEMA_FILES: Dict[str, str] = dict(schema_files())


def load_schema(name: str) -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12) of message ``name``, parsed (cached)."""
    cached = _SCHEMAS.get(name)
    if cached is None:
        cached = _SCHEMAS[name] = _read_schema(name)
    return cached


_SCHEMAS: Dict[str, Dict[str, Any]] = {}


def _read_schema(name: str) -> Dict[str, Any]:
    try:
        filename = SCHEMA_FILES[name]
    except KeyError:
        raise UnknownMessageError(
            f"unknown message type {name!r}; known: {sorted(SCHEMA_FILES)}"
        ) from None
    schema: Dict[str, Any] = json.loads((_SCHEMA_DIR / filename).read_text(encoding="utf-8"))
    return schema
