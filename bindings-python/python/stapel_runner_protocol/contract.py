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
  once it exists), and return a :class:`GatewayResult` with its evidence;
* :class:`SubprocessRein` — the reference rein: one JSONL harness child per session
  (seed 000's subprocess protocol, through
  :class:`~stapel_runner_protocol.subprocess_adapter.SubprocessAdapter`).

The models' JSON shapes are ``TypedDict``s re-exported here (``ExecutionRequest``,
``HarnessProfile``, ``ToolCall``, ``ToolResult``, ``ExecutionSummary``,
``ExecutionEvidence``, the gateway machine's ``GatewayInput`` / ``GatewayOutput``, …).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
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
from ._types import (
    AbortInput,
    Catalog,
    CatalogCounts,
    CreateSandboxAction,
    DestroySandboxAction,
    DispatchToolAction,
    EndSessionAction,
    ExecuteInput,
    ExecutionEvidence,
    ExecutionRequest,
    ExecutionSummary,
    GatewayAction,
    GatewayInput,
    GatewayOutput,
    GatewayResultDict,
    HarnessProfile,
    ReinDescriptor,
    Resolution,
    ResultOutput,
    SandboxCreatedInput,
    SandboxDestroyedInput,
    SandboxHandle,
    SessionEndedInput,
    SessionStartedInput,
    StageFailedInput,
    StartSessionAction,
    ToolCall,
    ToolCallCounts,
    ToolDispatchedInput,
    ToolEventVisibility,
    ToolPolicy,
    ToolResult,
    UsageSplitDict,
)
from .adapters import HarnessAdapter, RoleSpec, Session, _require_taskspecs
from .errors import AdapterError, ContractError

__all__ = [
    "CONTRACT_MODELS",
    "Gateway",
    "GatewayMachine",
    "GatewayResult",
    "Rein",
    "Sandboxer",
    "SubprocessRein",
    "parse_model",
    "parse_catalog",
    "resolve",
    "safe_identifier",
    "looks_like_credential",
    "is_sensitive_key",
    "is_credential_reference",
    # JSON shapes
    "AbortInput",
    "Catalog",
    "CatalogCounts",
    "CreateSandboxAction",
    "DestroySandboxAction",
    "DispatchToolAction",
    "EndSessionAction",
    "ExecuteInput",
    "ExecutionEvidence",
    "ExecutionRequest",
    "ExecutionSummary",
    "GatewayAction",
    "GatewayInput",
    "GatewayOutput",
    "GatewayResultDict",
    "HarnessProfile",
    "ReinDescriptor",
    "Resolution",
    "ResultOutput",
    "SandboxCreatedInput",
    "SandboxDestroyedInput",
    "SandboxHandle",
    "SessionEndedInput",
    "SessionStartedInput",
    "StageFailedInput",
    "StartSessionAction",
    "ToolCall",
    "ToolCallCounts",
    "ToolDispatchedInput",
    "ToolEventVisibility",
    "ToolPolicy",
    "ToolResult",
    "UsageSplitDict",
]


@dataclass
class GatewayResult:
    """What :meth:`Gateway.execute` returns (seed 001's ``GatewayResult``).

    ``ok`` is derived from the evidence's outcome; ``evidence`` is compact and
    content-free (the only part fit for the State Hub); ``tool_output`` and
    ``tool_error`` are for the direct caller only. :meth:`to_dict` gives the canonical
    JSON form, :meth:`from_dict` parses it strictly with the core.
    """

    ok: bool
    evidence: ExecutionEvidence
    tool_output: Any = None
    tool_error: Optional[str] = None

    @property
    def outcome(self) -> str:
        """``succeeded``, ``refused`` or ``failed``."""
        return self.evidence["outcome"]

    @property
    def failure_stage(self) -> Optional[str]:
        """The first stage that refused or failed, or ``None``."""
        return self.evidence["failure_stage"]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GatewayResult":
        """Parse the JSON form strictly (the core's rules;
        :class:`~stapel_runner_protocol.errors.ContractError` on a violation)."""
        parsed = parse_model("GatewayResult", dict(data))
        return cls(
            ok=parsed["ok"],
            evidence=parsed["evidence"],
            tool_output=parsed["tool_output"],
            tool_error=parsed["tool_error"],
        )

    def to_dict(self) -> GatewayResultDict:
        """The canonical JSON form ``{"ok", "evidence", "tool_output", "tool_error"}``."""
        return {
            "ok": self.ok,
            "evidence": self.evidence,
            "tool_output": self.tool_output,
            "tool_error": self.tool_error,
        }


class Rein(ABC):
    """A concrete harness backend: owns its inner agentic loop. The core validates
    what a rein returns (a malformed model fails that stage)."""

    @abstractmethod
    def start_session(
        self, profile: HarnessProfile, inputs: Dict[str, str], sandbox: SandboxHandle
    ) -> Dict[str, str]:
        """Set up a session in ``sandbox``; return the session (string map)."""

    @abstractmethod
    def dispatch_tool(self, session: Dict[str, str], tool_call: ToolCall) -> ToolResult:
        """Run one tool call; return a ``ToolResult``."""

    @abstractmethod
    def end_session(self, session: Dict[str, str]) -> ExecutionSummary:
        """End the session; return its ``ExecutionSummary`` (normalised facts)."""


class Sandboxer(ABC):
    """Environment provisioning."""

    @abstractmethod
    def create(
        self, harness_profile_ref: str, sandbox_profile: str, repository: str
    ) -> SandboxHandle:
        """Create a sandbox; return its ``SandboxHandle``."""

    @abstractmethod
    def destroy(self, sandbox: SandboxHandle) -> None:
        """Destroy the sandbox."""


_FAILED_BY_REPORT: Dict[str, StageFailedInput] = {
    "sandbox_created": {"type": "sandbox_create_failed"},
    "sandbox_destroyed": {"type": "sandbox_destroy_failed"},
    "session_started": {"type": "session_start_failed"},
    "tool_dispatched": {"type": "tool_dispatch_failed"},
    "session_ended": {"type": "session_end_failed"},
}


#: The report that answers each gateway action.
_ANSWERS: Dict[str, str] = {
    "create_sandbox": "sandbox_created",
    "destroy_sandbox": "sandbox_destroyed",
    "start_session": "session_started",
    "dispatch_tool": "tool_dispatched",
    "end_session": "session_ended",
}

#: The actions still performed after an interruption (a ``BaseException``).
_CLEANUP = frozenset({"end_session", "destroy_sandbox"})


class _Run:
    """Per-``execute`` state: the interruption to re-raise once cleanup is done."""

    def __init__(self) -> None:
        self.interrupted: Optional[BaseException] = None


def _message(exc: BaseException) -> Optional[str]:
    text = str(exc)
    return text or None


def _failed(report_type: str, exc: BaseException) -> StageFailedInput:
    failed: StageFailedInput = {"type": _FAILED_BY_REPORT[report_type]["type"]}
    failed["message"] = _message(exc)
    return failed


class Gateway:
    """Executes requests through the core's gateway machine with injected reins (by
    ``rein_id``) and a sandboxer. A rein or sandboxer that raises (or returns a model
    the core rejects) is reported to the machine as the failure of that stage; its
    message goes to the direct caller only (``tool_error``), never into evidence. Once
    a sandbox exists, its teardown is attempted on every path — also when the sandboxer
    returned a handle the core rejects (the stage is aborted with
    ``invalid_sandbox_handle``, the evidence says ``teardown: abandoned``, and the
    gateway passes that handle to ``destroy`` itself, ignoring errors).

    A value the core cannot even take as JSON (``NaN``, a non-string key, an arbitrary
    object: ``TypeError`` / ``ValueError`` while converting) fails its stage the same
    way, and ``start_session`` must return a ``dict`` (anything else fails the session
    start). A rein or sandboxer that raises a ``BaseException`` that is not an
    ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, …) fails its stage too; the
    gateway then performs only the cleanup the machine asks for (ending a started
    session, destroying the sandbox — each at most once) and re-raises that exception
    instead of returning a result."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        reins: Mapping[str, Rein],
        sandboxer: Sandboxer,
        clock: Callable[[], float] = time.monotonic,
        max_tool_calls: Optional[int] = None,
        max_evidence_refs: Optional[int] = None,
        max_evidence_artifacts: Optional[int] = None,
    ) -> None:
        self._catalog = catalog
        self._reins = dict(reins)
        self._sandboxer = sandboxer
        self._clock = clock
        self._max_tool_calls = max_tool_calls
        self._max_evidence_refs = max_evidence_refs
        self._max_evidence_artifacts = max_evidence_artifacts

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def execute(
        self,
        request: ExecutionRequest,
        *,
        inputs: Optional[Mapping[str, str]] = None,
        tool_calls: Sequence[ToolCall] = (),
    ) -> GatewayResult:
        """Run one ``ExecutionRequest``; return the :class:`GatewayResult`. An invalid
        request raises :class:`~stapel_runner_protocol.errors.ContractError`."""
        machine = GatewayMachine(
            self._catalog,
            max_tool_calls=self._max_tool_calls,
            max_evidence_refs=self._max_evidence_refs,
            max_evidence_artifacts=self._max_evidence_artifacts,
        )
        execute: ExecuteInput = {
            "type": "execute",
            "request": request,
            "inputs": dict(inputs or {}),
            "tool_calls": list(tool_calls),
        }
        pending: List[GatewayInput] = [execute]
        rein: Optional[Rein] = None
        run = _Run()
        while pending:
            report = pending.pop(0)
            try:
                machine.handle_input(self._now(), report)
            except (ContractError, TypeError, ValueError) as exc:
                # ContractError: the core rejects the model; TypeError / ValueError: the
                # value is not even JSON (NaN, a non-string key, an arbitrary object).
                if report["type"] == "sandbox_created":
                    # The sandboxer created something but returned a handle the core
                    # rejects: the machine cannot name it, so the gateway gives up on
                    # the stage (evidence: teardown "abandoned") and cleans up itself.
                    abort: AbortInput = {"type": "abort", "code": "invalid_sandbox_handle"}
                    machine.handle_input(self._now(), abort)
                    self._destroy_quietly(report["sandbox"])
                elif report["type"] in _FAILED_BY_REPORT:
                    # A rein returned an invalid model: that stage failed.
                    machine.handle_input(self._now(), _failed(report["type"], exc))
                else:
                    raise
            for output in machine.drain():
                if output["type"] == "result":
                    if run.interrupted is not None:
                        raise run.interrupted
                    return GatewayResult.from_dict(output["result"])
                if output["type"] == "start_session":
                    rein = self._reins.get(output["profile"]["rein"])
                pending.append(self._perform(output, rein, run))
        raise RuntimeError("the gateway machine stopped without a result")

    def _destroy_quietly(self, sandbox: SandboxHandle) -> None:
        try:
            self._sandboxer.destroy(sandbox)
        except Exception:
            pass

    def _perform(self, action: GatewayAction, rein: Optional[Rein], run: "_Run") -> GatewayInput:
        """Perform one action; an exception becomes the stage's ``*_failed`` input. A
        ``BaseException`` that is not an ``Exception`` does too, and is kept in ``run``
        (re-raised once the machine has cleaned up); after it only the cleanup actions
        (``end_session``, ``destroy_sandbox``) are still performed."""
        answer = _ANSWERS[action["type"]]
        if run.interrupted is not None and action["type"] not in _CLEANUP:
            return _failed(answer, run.interrupted)
        try:
            return self._call(action, rein)
        except Exception as exc:
            return _failed(answer, exc)
        except BaseException as exc:
            if run.interrupted is None:
                run.interrupted = exc
            return _failed(answer, exc)

    def _call(self, action: GatewayAction, rein: Optional[Rein]) -> GatewayInput:
        """Perform one action (exceptions propagate to :meth:`_perform`)."""
        if action["type"] == "create_sandbox":
            sandbox = self._sandboxer.create(
                action["harness_profile_ref"], action["sandbox_profile"], action["repository"]
            )
            created: SandboxCreatedInput = {"type": "sandbox_created", "sandbox": sandbox}
            return created
        if action["type"] == "destroy_sandbox":
            self._sandboxer.destroy(action["sandbox"])
            destroyed: SandboxDestroyedInput = {"type": "sandbox_destroyed"}
            return destroyed
        if rein is None:
            raise LookupError("no rein is registered for the resolved profile")
        if action["type"] == "start_session":
            session = rein.start_session(action["profile"], action["inputs"], action["sandbox"])
            if not isinstance(session, dict):
                raise TypeError(
                    f"start_session returned {type(session).__name__}, not a dict of strings"
                )
            started: SessionStartedInput = {"type": "session_started", "session": session}
            return started
        if action["type"] == "dispatch_tool":
            result = rein.dispatch_tool(action["session"], action["call"])
            dispatched: ToolDispatchedInput = {"type": "tool_dispatched", "result": result}
            return dispatched
        summary = rein.end_session(action["session"])
        ended: SessionEndedInput = {"type": "session_ended", "summary": summary}
        return ended


_ZERO_USAGE: UsageSplitDict = {
    "cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0,
}


class SubprocessRein(Rein):
    """The reference rein: one JSONL harness child per session (seed 000's subprocess
    protocol), started by a :class:`~stapel_runner_protocol.subprocess_adapter.SubprocessAdapter`
    — so the child gets a cleared environment, bounded lines, and its whole process
    group ends when the session does.

    * ``start_session`` builds a :class:`~stapel_runner_protocol.adapters.RoleSpec` from
      the profile (``role`` = ``profile_id``, ``model``, the tool policy's
      ``allowed_tools``) and opens a harness session; with an ``inputs["prompt"]`` it
      runs that turn first.
    * ``dispatch_tool`` runs one turn whose prompt is the tool call as compact JSON
      (``{"call_id", "name", "arguments"}``): the turn's text is the ``output``; a
      harness ``error`` line is an unsuccessful result (``ok: false``), any other fault
      raises (the gateway records a failed dispatch).
    * ``end_session`` closes the child and reports the summed token split, the
      session's duration, the profile's model and the number of tool calls
      (``tool_event_visibility: complete``).

    ``adapter`` defaults to ``SubprocessAdapter(command=command, env=env)``. Harness
    turns carry a ``stapel_taskspecs.UsageSplit``, so without ``stapel-taskspecs``
    (Python 3.9/3.10) the constructor raises
    :class:`~stapel_runner_protocol.errors.AdapterUnavailableError` with code
    ``taskspecs_unavailable`` instead of every session failing later.
    """

    def __init__(
        self,
        command: Optional[Sequence[str]] = None,
        *,
        adapter: Optional[HarnessAdapter] = None,
        env: Optional[Mapping[str, str]] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _require_taskspecs("SubprocessRein")
        if adapter is None:
            from .subprocess_adapter import SubprocessAdapter

            if not command:
                raise ValueError("SubprocessRein needs a command or an adapter")
            adapter = SubprocessAdapter(command=list(command), env=env)
        self._adapter = adapter
        self._clock = clock
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sessions: Dict[str, "_ReinSession"] = {}

    def start_session(
        self, profile: HarnessProfile, inputs: Dict[str, str], sandbox: SandboxHandle
    ) -> Dict[str, str]:
        role = RoleSpec(
            role=profile["profile_id"],
            model=profile["model"],
            allowed_tools=list(profile["tool_policy"]["allowed_tools"]),
        )
        harness = self._adapter.open_session(role)
        state = _ReinSession(harness, profile["model"], self._clock())
        with self._lock:
            session_id = f"s-{next(self._ids)}"
            self._sessions[session_id] = state
        prompt = inputs.get("prompt")
        if prompt:
            try:
                state.turn(prompt)
            except BaseException:
                self._drop(session_id)
                raise
        return {"session_id": session_id, "sandbox_id": sandbox["sandbox_id"]}

    def dispatch_tool(self, session: Dict[str, str], tool_call: ToolCall) -> ToolResult:
        state = self._state(session)
        prompt = json.dumps(
            {
                "call_id": tool_call.get("call_id"),
                "name": tool_call["name"],
                "arguments": tool_call.get("arguments", {}),
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        state.tool_calls += 1
        try:
            text = state.turn(prompt)
        except AdapterError as exc:
            if exc.code != "harness_error":
                raise
            message = exc.details.get("message")
            return {"ok": False, "output": None,
                    "error": message if isinstance(message, str) else str(exc)}
        return {"ok": True, "output": text}

    def end_session(self, session: Dict[str, str]) -> ExecutionSummary:
        state = self._drop(session.get("session_id", ""))
        if state is None:
            raise KeyError("unknown rein session")
        return {
            "tokens": state.usage,
            "duration_ms": max(0, int((self._clock() - state.started) * 1000)),
            "resolved_model": state.model,
            "tool_event_visibility": "complete",
            "tool_event_count": state.tool_calls,
        }

    def close(self) -> None:
        """Close every open session's child. Idempotent."""
        with self._lock:
            states, self._sessions = list(self._sessions.values()), {}
        for state in states:
            state.harness.close()

    def _state(self, session: Mapping[str, str]) -> "_ReinSession":
        with self._lock:
            state = self._sessions.get(session.get("session_id", ""))
        if state is None:
            raise KeyError("unknown rein session")
        return state

    def _drop(self, session_id: str) -> Optional["_ReinSession"]:
        with self._lock:
            state = self._sessions.pop(session_id, None)
        if state is not None:
            state.harness.close()
        return state


class _ReinSession:
    """One harness session of a :class:`SubprocessRein`."""

    def __init__(self, harness: Session, model: str, started: float) -> None:
        self.harness = harness
        self.model = model
        self.started = started
        self.tool_calls = 0
        self.usage: UsageSplitDict = _ZERO_USAGE.copy()

    def turn(self, prompt: str) -> str:
        result = self.harness.turn(prompt)
        u, total = result.usage, self.usage
        self.usage = {
            "cache_read": total["cache_read"] + u.cache_read,
            "cache_write": total["cache_write"] + u.cache_write,
            "fresh_input": total["fresh_input"] + u.fresh_input,
            "output": total["output"] + u.output,
            "thinking": total["thinking"] + u.thinking,
        }
        return result.text
