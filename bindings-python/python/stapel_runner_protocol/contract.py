"""The harness contract (seed 001): strict contract-1.0 models, profile resolution, the
gateway lifecycle and evidence, in the Rust core; models travel in their canonical JSON
form (dicts).

* :func:`parse_model` / :func:`parse_catalog` — strict parsing (unknown fields are
  errors): :class:`~stapel_runner_protocol.errors.ContractError` with ``code``,
  ``model`` and ``field``;
* :func:`resolve` — a profile reference against a catalog, or
  :class:`~stapel_runner_protocol.errors.ResolutionRefused` (``code``, ``reasons``);
* :class:`GatewayMachine` — the core's sans-IO gateway lifecycle machine;
* :class:`Rein`, :class:`Sandboxer` and :class:`Gateway` — seed 001's rein lifecycle
  (``start_session`` / ``dispatch_tool`` / ``end_session``) and a blocking gateway that
  drives the machine with them: resolve the profile, create the sandbox, start the
  session, dispatch the tool calls, end the session, destroy the sandbox (on every path
  once it exists), and return the ``GatewayResult`` with its evidence.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ._native import (
    CONTRACT_MODELS,
    GatewayMachine,
    is_credential_reference,
    is_sensitive_key,
    looks_like_credential,
    parse_catalog,
    parse_model,
    resolve,
    safe_identifier,
)
from .errors import ContractError

__all__ = [
    "CONTRACT_MODELS",
    "Gateway",
    "GatewayMachine",
    "Rein",
    "Sandboxer",
    "parse_model",
    "parse_catalog",
    "resolve",
    "safe_identifier",
    "looks_like_credential",
    "is_sensitive_key",
    "is_credential_reference",
]

JSON = Dict[str, Any]


class Rein(ABC):
    """A concrete harness backend: owns its inner agentic loop. Models are canonical
    JSON dicts (``HarnessProfile``, ``SandboxHandle``, ``ToolCall``; return a
    ``ToolResult`` and an ``ExecutionSummary``); the core validates what a rein
    returns."""

    @abstractmethod
    def start_session(
        self, profile: JSON, inputs: Dict[str, str], sandbox: JSON
    ) -> Dict[str, str]:
        """Set up a session in ``sandbox``; return the session (string map)."""

    @abstractmethod
    def dispatch_tool(self, session: Dict[str, str], tool_call: JSON) -> JSON:
        """Run one tool call; return a ``ToolResult``."""

    @abstractmethod
    def end_session(self, session: Dict[str, str]) -> JSON:
        """End the session; return its ``ExecutionSummary`` (normalised facts)."""


class Sandboxer(ABC):
    """Environment provisioning."""

    @abstractmethod
    def create(self, harness_profile_ref: str, sandbox_profile: str, repository: str) -> JSON:
        """Create a sandbox; return its ``SandboxHandle``."""

    @abstractmethod
    def destroy(self, sandbox: JSON) -> None:
        """Destroy the sandbox."""


_FAILED_BY_ACTION = {
    "create_sandbox": "sandbox_create_failed",
    "destroy_sandbox": "sandbox_destroy_failed",
    "start_session": "session_start_failed",
    "dispatch_tool": "tool_dispatch_failed",
    "end_session": "session_end_failed",
}

_FAILED_BY_REPORT = {
    "sandbox_created": "sandbox_create_failed",
    "sandbox_destroyed": "sandbox_destroy_failed",
    "session_started": "session_start_failed",
    "tool_dispatched": "tool_dispatch_failed",
    "session_ended": "session_end_failed",
}


def _message(exc: BaseException) -> Optional[str]:
    text = str(exc)
    return text or None


class Gateway:
    """Executes requests through the core's gateway machine with injected reins (by
    ``rein_id``) and a sandboxer. A rein or sandboxer that raises is reported to the
    machine as the failure of that stage (its message goes to the direct caller only,
    never into evidence)."""

    def __init__(
        self,
        catalog: Mapping[str, Any],
        *,
        reins: Mapping[str, Rein],
        sandboxer: Sandboxer,
        clock: Callable[[], float] = time.monotonic,
        max_tool_calls: Optional[int] = None,
        max_evidence_refs: Optional[int] = None,
        max_evidence_artifacts: Optional[int] = None,
    ) -> None:
        self._catalog = dict(catalog)
        self._reins = dict(reins)
        self._sandboxer = sandboxer
        self._clock = clock
        self._limits = {
            "max_tool_calls": max_tool_calls,
            "max_evidence_refs": max_evidence_refs,
            "max_evidence_artifacts": max_evidence_artifacts,
        }

    def execute(
        self,
        request: Mapping[str, Any],
        *,
        inputs: Optional[Mapping[str, str]] = None,
        tool_calls: Sequence[Mapping[str, Any]] = (),
    ) -> JSON:
        """Run one ``ExecutionRequest``; return the ``GatewayResult`` (``ok``,
        ``evidence``, ``tool_output``, ``tool_error``). An invalid request raises
        :class:`~stapel_runner_protocol.errors.ContractError`."""
        machine = GatewayMachine(self._catalog, **self._limits)
        pending: List[JSON] = [{
            "type": "execute",
            "request": dict(request),
            "inputs": dict(inputs or {}),
            "tool_calls": [dict(c) for c in tool_calls],
        }]
        rein: Optional[Rein] = None
        while pending:
            report = pending.pop(0)
            try:
                machine.handle_input(int(self._clock() * 1000), report)
            except ContractError as exc:
                failed = _FAILED_BY_REPORT.get(report["type"])
                if failed is None:
                    raise
                # A rein or sandboxer returned an invalid model: that stage failed.
                machine.handle_input(int(self._clock() * 1000),
                                     {"type": failed, "message": _message(exc)})
            for action in machine.drain():
                kind = action["type"]
                if kind == "result":
                    result: JSON = action["result"]
                    return result
                if kind == "start_session":
                    rein = self._reins.get(action["profile"]["rein"])
                pending.append(self._perform(kind, action, rein))
        raise RuntimeError("the gateway machine stopped without a result")

    def _perform(self, kind: str, action: JSON, rein: Optional[Rein]) -> JSON:
        try:
            if kind == "create_sandbox":
                sandbox = self._sandboxer.create(
                    action["harness_profile_ref"], action["sandbox_profile"], action["repository"]
                )
                return {"type": "sandbox_created", "sandbox": sandbox}
            if kind == "destroy_sandbox":
                self._sandboxer.destroy(action["sandbox"])
                return {"type": "sandbox_destroyed"}
            if rein is None:
                raise LookupError("no rein is registered for the resolved profile")
            if kind == "start_session":
                session = rein.start_session(action["profile"], action["inputs"], action["sandbox"])
                return {"type": "session_started", "session": session}
            if kind == "dispatch_tool":
                return {"type": "tool_dispatched",
                        "result": rein.dispatch_tool(action["session"], action["call"])}
            if kind == "end_session":
                return {"type": "session_ended", "summary": rein.end_session(action["session"])}
        except Exception as exc:
            return {"type": _FAILED_BY_ACTION[kind], "message": _message(exc)}
        raise RuntimeError(f"unknown gateway action {kind!r}")
