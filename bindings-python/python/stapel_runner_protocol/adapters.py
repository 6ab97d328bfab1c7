"""The harness-adapter seam (seed 000)::

    adapter.open_session(role_spec) -> Session
    Session.turn(prompt)            -> TurnResult   # {text, usage}
    adapter.oneshot(role_spec, prompt) -> TurnResult
    Session.close() / adapter.close()

:class:`SubprocessTurnMachine` is the core's sans-IO subprocess session machine: it decides
the spawn request, the JSONL turns and the stop escalation (close stdin, TERM, KILL, group
KILL, with deadlines from ``poll_timeout()``); the host performs its actions and reports
what happened. :class:`RoleSpec` is built from a ``task.assign`` invocation by the Rust
core (:meth:`RoleSpec.from_invocation`); :class:`TurnResult` always carries a valid
five-component :class:`stapel_taskspecs.UsageSplit`, checked by the core on
construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from . import _native
from ._native import SubprocessTurnMachine
from .errors import SchemaValidationError

if TYPE_CHECKING:
    from stapel_taskspecs import UsageSplit as UsageSplit

__all__ = ["RoleSpec", "TurnResult", "Session", "HarnessAdapter", "SubprocessTurnMachine"]


def __getattr__(name: str) -> Any:
    # ``adapters.UsageSplit`` (0.1.1 imported it here), without importing
    # stapel_taskspecs before it is used.
    if name == "UsageSplit":
        from stapel_taskspecs import UsageSplit

        return UsageSplit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _require_taskspecs(what: str) -> None:
    """Raise :class:`~stapel_runner_protocol.errors.AdapterUnavailableError`
    (``taskspecs_unavailable``, the ``ImportError`` as its cause) unless
    ``stapel_taskspecs`` imports: every harness turn returns a :class:`TurnResult`,
    whose usage is a ``stapel_taskspecs.UsageSplit``, so ``what`` cannot work without
    it (a dependency, missing only from a broken install)."""
    try:
        import stapel_taskspecs  # noqa: F401
    except ImportError as exc:
        from .errors import AdapterUnavailableError

        raise AdapterUnavailableError(
            f"{what} needs stapel-taskspecs: its turns return a TurnResult whose usage is "
            "a stapel_taskspecs.UsageSplit, and stapel-taskspecs requires Python >= 3.11 "
            '(pip install "stapel-taskspecs>=0.1,<0.2")',
            code="taskspecs_unavailable",
        ) from exc


@dataclass
class RoleSpec:
    """The role an adapter plays and the model↔harness pairing it runs.

    Fields follow seed 000's invocation (``backend``, ``model``, ``session``,
    ``system_prompt_ref``, ``allowed_tools``, ``llm_base_url``, ``budget``); absent
    optional string fields are ``None``, an absent ``budget`` is ``{}``; invocation keys
    the seed does not name are kept in ``extra`` in arrival order (a ``role`` key too:
    the role is the assign's). ``system_prompt`` is an inline prompt string the
    invocation carried as ``system_prompt`` (for reference/testing harnesses only; in
    the core's JSON form, :meth:`to_dict`, it is ``extra["system_prompt"]``).
    """

    role: str = _native.DEFAULT_ROLE
    backend: Optional[str] = None
    model: Optional[str] = None
    session: str = _native.DEFAULT_SESSION
    system_prompt: Optional[str] = None
    system_prompt_ref: Optional[str] = None
    allowed_tools: List[str] = field(default_factory=list)
    llm_base_url: Optional[str] = None
    budget: Any = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_invocation(
        cls, invocation: Optional[Mapping[str, Any]], *, role: str = _native.DEFAULT_ROLE
    ) -> "RoleSpec":
        """Build from a ``task.assign`` invocation (the core's rules: ``null`` fields are
        absent, wrong types raise :class:`~stapel_runner_protocol.errors.AdapterError`
        with code ``invalid_invocation``)."""
        data = _native.role_spec_from_invocation(
            dict(invocation) if invocation is not None else None, role
        )
        extra: Dict[str, Any] = data["extra"]
        # The core keeps an inline prompt in extra; this class has a field for it.
        system_prompt = _native.role_spec_system_prompt(extra)
        if system_prompt is not None:
            del extra["system_prompt"]
        budget = data["budget"]
        return cls(
            role=data["role"],
            backend=data["backend"],
            model=data["model"],
            session=data["session"],
            system_prompt=system_prompt,
            system_prompt_ref=data["system_prompt_ref"],
            allowed_tools=list(data["allowed_tools"]),
            llm_base_url=data["llm_base_url"],
            budget={} if budget is None else budget,
            extra=extra,
        )

    def to_dict(self) -> Dict[str, Any]:
        """JSON form (the core's): ``role``, the invocation fields in seed order (absent
        optional ones omitted, an empty ``budget`` too), then ``extra`` (keys colliding
        with a field skipped) with the inline ``system_prompt``."""
        extra = dict(self.extra)
        if self.system_prompt is not None:
            extra["system_prompt"] = self.system_prompt
        out: Dict[str, Any] = _native.role_spec_to_dict(
            self.role,
            self.backend,
            self.model,
            self.session,
            self.system_prompt_ref,
            list(self.allowed_tools),
            self.llm_base_url,
            None if self.budget == {} else self.budget,
            extra,
        )
        return out


@dataclass
class TurnResult:
    """The result of one :meth:`Session.turn`: ``{text, usage}`` plus the raw answer.

    ``usage`` must be a :class:`stapel_taskspecs.UsageSplit` with exactly five
    non-negative integer components (≤ 2^53 − 1); the core checks it on construction
    (``TypeError`` for another type, ``SchemaValidationError`` for a bad split).
    Mapping-style access (``result["text"]``, ``result["usage"]``) is supported.
    """

    text: str
    usage: "UsageSplit"
    raw: Any = None

    def __post_init__(self) -> None:
        _require_taskspecs("TurnResult")
        from stapel_taskspecs import UsageSplit

        if not isinstance(self.usage, UsageSplit):
            raise TypeError("TurnResult.usage must be a stapel_taskspecs.UsageSplit")
        try:
            _native.check_usage_split(self.usage.to_dict())
        except SchemaValidationError as exc:
            raise _usage_error(exc) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TurnResult":
        """Parse ``{"text": str, "usage": {five components}}`` strictly (the core's rules:
        no other keys; :class:`~stapel_runner_protocol.errors.AdapterError` with code
        ``invalid_result`` or ``invalid_usage``)."""
        text, usage = _native.turn_result_from_value(dict(data))
        return cls(text=text, usage=usage)

    def to_dict(self) -> Dict[str, Any]:
        """``{"text": ..., "usage": {five components}}``."""
        return {"text": self.text, "usage": self.usage.to_dict()}

    def __getitem__(self, key: str) -> Any:
        if key == "text":
            return self.text
        if key == "usage":
            return self.usage
        raise KeyError(key)


def _usage_error(exc: SchemaValidationError) -> SchemaValidationError:
    """``exc`` as an error that is also a ``stapel_taskspecs.SchemaValidationError``
    (what stapel-runner-protocol 0.1.1's ``TurnResult`` raised for a bad split, through
    ``UsageSplit.validate``), so code catching either class catches it."""
    global _UsageSplitError
    if _UsageSplitError is None:
        import stapel_taskspecs

        _UsageSplitError = type(
            "UsageSplitError",
            (SchemaValidationError, stapel_taskspecs.SchemaValidationError),
            {
                "__module__": __name__,
                "__doc__": "A usage split broke its schema: this package's "
                "SchemaValidationError and stapel_taskspecs.SchemaValidationError at once.",
            },
        )
    error: SchemaValidationError = _UsageSplitError(
        str(exc), exc.errors, violations=exc.violations, code=exc.code
    )
    return error


_UsageSplitError: Optional[type] = None


class Session(ABC):
    """A live harness session. Persistent by default (append-only, cache-friendly)."""

    @abstractmethod
    def turn(self, prompt: str) -> TurnResult:
        """Send ``prompt`` and return the ``{text, usage}`` result."""

    @abstractmethod
    def close(self) -> None:
        """Release the session's resources. Idempotent."""

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HarnessAdapter(ABC):
    """Opens sessions for one model↔harness backend."""

    @abstractmethod
    def open_session(self, role_spec: RoleSpec) -> Session:
        """Open a :class:`Session` configured by ``role_spec``."""

    def oneshot(self, role_spec: RoleSpec, prompt: str) -> TurnResult:
        """Open a session, run one turn, close the session."""
        session = self.open_session(role_spec)
        try:
            return session.turn(prompt)
        finally:
            session.close()

    def close(self) -> None:
        """Release adapter-level resources. Default: nothing; idempotent."""
