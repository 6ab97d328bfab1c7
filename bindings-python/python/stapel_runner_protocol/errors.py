"""Exception classes of stapel-runner-protocol.

Pure Python and dependency-free, so callers can catch the package's errors without
loading the native extension. Every error carries a stable snake_case ``code`` (the
core's code, e.g. ``not_json``, ``schema_violation``, ``invalid_usage``) when it came from
the core, and ``None`` when raised without one.

Hierarchy::

    RunnerProtocolError
    ├── SchemaValidationError      (.violations, .errors)
    ├── UnknownMessageError
    ├── ProtocolStateError
    ├── AdapterError
    │   └── AdapterUnavailableError
    ├── ReducerError               (.detail_code)
    ├── ContractError              (.model, .field)
    └── ResolutionRefused          (.reasons)
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

__all__ = [
    "Violation",
    "RunnerProtocolError",
    "SchemaValidationError",
    "UnknownMessageError",
    "ProtocolStateError",
    "AdapterError",
    "AdapterUnavailableError",
    "ReducerError",
    "ContractError",
    "ResolutionRefused",
]


class Violation(NamedTuple):
    """One broken schema rule.

    ``location`` is a slash-separated path from the frame's root without a leading slash
    (``payload/usage/thinking``, ``task/criteria/0/id``; ``""`` is the frame itself);
    ``rule`` a stable code (``required``, ``type``, ``const``, ``min_length``,
    ``minimum``, ``range``, ``additional_property``, ``mismatch``); ``message`` a
    human-readable explanation (not stable).
    """

    location: str
    rule: str
    message: str = ""


class RunnerProtocolError(Exception):
    """Base class of every error raised by stapel-runner-protocol."""

    code: Optional[str]

    def __init__(self, message: str = "", *, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code


class SchemaValidationError(RunnerProtocolError):
    """A message broke schema rules.

    ``violations`` lists every broken rule (sorted by location); ``errors`` holds one
    human-readable line per violation (``"location: message (rule)"``).
    """

    violations: List[Violation]
    errors: List[str]

    def __init__(
        self,
        message: str = "",
        errors: Optional[List[str]] = None,
        *,
        violations: Optional[Sequence[Violation]] = None,
        code: Optional[str] = "schema_violation",
    ) -> None:
        super().__init__(message, code=code)
        self.violations = list(violations or [])
        if errors is None:
            errors = [
                f"{v.location or '<root>'}: {v.message} ({v.rule})" for v in self.violations
            ]
        self.errors = errors


class UnknownMessageError(RunnerProtocolError):
    """A frame's ``type`` is absent, not a string, or not a known message type."""

    def __init__(self, message: str = "", *, code: Optional[str] = "unknown_type") -> None:
        super().__init__(message, code=code)


class ProtocolStateError(RunnerProtocolError):
    """A sequencing or state-machine rule was broken (by the caller or by the peer)."""


class AdapterError(RunnerProtocolError):
    """A harness adapter could not open a session or complete a turn, or its data
    (usage, invocation, result) is invalid.

    From the core: ``code`` (``invalid_usage``, ``invalid_invocation``, ``harness_error``,
    ``unexpected_eof``, ``line_too_long``, …), ``line_number`` (the harness stdout line
    the error is about, or ``None``) and ``details`` (the core's JSON form: ``code``,
    ``line_number``, and ``message`` for ``harness_error``).
    """

    line_number: Optional[int]
    details: Dict[str, Any]

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        line_number: Optional[int] = None,
        details: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message, code=code)
        self.line_number = line_number
        self.details = dict(details) if details is not None else {
            "code": code,
            "line_number": line_number,
        }


class AdapterUnavailableError(AdapterError):
    """A reference adapter's optional backend dependency is not installed (raised when
    the adapter is used, never at import time)."""


class ReducerError(RunnerProtocolError):
    """The session reducer rejected an event before reduction (``code``:
    ``invalid_event``, ``wrong_run``, …; ``detail_code``: the inner cause, when there is
    one). The snapshot is unchanged."""

    detail_code: Optional[str]

    def __init__(
        self, message: str = "", *, code: Optional[str] = None, detail_code: Optional[str] = None
    ) -> None:
        super().__init__(message, code=code)
        self.detail_code = detail_code


class ContractError(RunnerProtocolError):
    """A harness-contract model is invalid (``model`` and ``field`` locate it), or the
    gateway was misused (``code``: ``unexpected_input``, ``invalid_input``, …; ``model``
    and ``field`` are ``None``)."""

    model: Optional[str]
    field: Optional[str]

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        model: Optional[str] = None,
        field: Optional[str] = None,
    ) -> None:
        super().__init__(message, code=code)
        self.model = model
        self.field = field


class ResolutionRefused(RunnerProtocolError):
    """A harness profile reference was refused (``code``: the refusal kind; ``reasons``:
    every reason code of that kind, sorted)."""

    reasons: List[str]

    def __init__(
        self, message: str = "", *, code: Optional[str] = None, reasons: Optional[List[str]] = None
    ) -> None:
        super().__init__(message, code=code)
        self.reasons = list(reasons or [])
