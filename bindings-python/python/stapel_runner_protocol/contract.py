"""The harness contract (seed 001): strict contract-1.0 models, profile resolution, the
gateway lifecycle and evidence, in the Rust core; models travel in their canonical JSON
form (dicts).

* :func:`parse_model` / :func:`parse_catalog` — strict parsing (unknown fields are
  errors): :class:`~stapel_runner_protocol.errors.ContractError` with ``code``,
  ``model`` and ``field``;
* :func:`resolve` — a profile reference against a catalog, or
  :class:`~stapel_runner_protocol.errors.ResolutionRefused` (``code``, ``reasons``);
* :class:`GatewayMachine` — the core's sans-IO gateway lifecycle machine (``stage``,
  ``handle_input``, ``poll_output`` / ``drain``, ``poll_timeout``);
* :class:`Rein`, :class:`Sandboxer` and :class:`Gateway` — seed 001's rein lifecycle
  (``start_session`` / ``dispatch_tool`` / ``end_session``) and a blocking gateway that
  drives the machine with them: resolve the profile, create the sandbox, start the
  session, dispatch the tool calls, end the session, destroy the sandbox (on every path
  once it exists), and return a :class:`GatewayResult` with its evidence;
* :class:`SubprocessRein` — the reference rein: one JSONL harness child per session
  (seed 000's subprocess protocol, through
  :class:`~stapel_runner_protocol.subprocess_adapter.SubprocessAdapter`), whose rules
  are the core's :class:`ReinSession` and ``rein_*`` functions.

The models' JSON shapes are ``TypedDict``s re-exported here (``ExecutionRequest``,
``HarnessProfile``, ``ToolCall``, ``ToolResult``, ``ExecutionSummary``,
``ExecutionEvidence``, the gateway machine's ``GatewayInput`` / ``GatewayOutput``, …).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ._native import (
    CONTRACT_MODELS,
    GatewayMachine,
    ReinSession,
    ReinSessionIds,
    is_credential_reference,
    is_sensitive_key,
    looks_like_credential,
    parse_catalog,
    parse_model,
    rein_initial_prompt,
    rein_role_spec,
    rein_tool_result,
    rein_turn_error_result,
    resolve,
    safe_identifier,
)
from ._types import (
    AbortInput,
    ActionFailedInput,
    AnswerInput,
    AnswerInvalidInput,
    Catalog,
    CatalogCounts,
    CreateSandboxAction,
    DestroySandboxAction,
    DiscardSandboxAction,
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
    "ReinSession",
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
    "ActionFailedInput",
    "AnswerInput",
    "AnswerInvalidInput",
    "Catalog",
    "CatalogCounts",
    "CreateSandboxAction",
    "DestroySandboxAction",
    "DiscardSandboxAction",
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


def _message(exc: BaseException) -> Optional[str]:
    text = str(exc)
    return text or None


class Gateway:
    """Executes requests through the core's gateway machine with injected reins (by
    ``rein_id``) and a sandboxer. This class only performs the machine's actions — it
    calls the rein or sandboxer the action names and reports back what happened; every
    decision is the core's (see ``GatewayMachine`` and the transition table of the
    core's ``Gateway``).

    A rein or sandboxer that raises, or returns a model the core rejects, fails that
    stage; its message goes to the direct caller only (``tool_error``), never into
    evidence. Once a sandbox exists, its teardown is attempted on every path — also when
    the sandboxer returned a handle the core rejects (the stage is aborted with
    ``invalid_sandbox_handle``, the evidence says ``teardown: abandoned``, and the
    machine asks for that handle to be passed to ``destroy``, ignoring errors).

    A value the core cannot even take as JSON (``NaN``, a non-string key, an arbitrary
    object) fails its stage the same way, and ``start_session`` must return a ``dict``
    of strings. A rein or sandboxer that raises a ``BaseException`` that is not an
    ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, …) fails its stage too; the
    machine then asks only for cleanup (ending a started session, destroying the
    sandbox — each at most once), and the gateway re-raises that exception instead of
    returning a result."""

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
        machine.handle_input(self._now(), execute)
        run = _Run()
        while True:
            output = machine.poll_output()
            if output is None:
                raise RuntimeError("the gateway machine stopped without a result")
            if output["type"] == "result":
                if run.interrupted is not None:
                    raise run.interrupted
                return GatewayResult.from_dict(output["result"])
            try:
                value = self._call(output, run)
            except Exception as exc:
                self._report_failure(machine, exc)
                continue
            except BaseException as exc:
                # Kept and re-raised at the result; the machine asks only for cleanup.
                if run.interrupted is None:
                    run.interrupted = exc
                self._report_failure(machine, exc)
                continue
            answer: AnswerInput = {"type": "answer", "value": value}
            try:
                machine.handle_input(self._now(), answer)
            except (TypeError, ValueError) as exc:
                # The value is not even JSON (NaN, a non-string key, an arbitrary object).
                invalid: AnswerInvalidInput = {"type": "answer_invalid", "message": _message(exc)}
                machine.handle_input(self._now(), invalid)

    def _report_failure(self, machine: GatewayMachine, exc: BaseException) -> None:
        failed: ActionFailedInput = {"type": "action_failed", "message": _message(exc)}
        machine.handle_input(self._now(), failed)

    def _call(self, action: GatewayAction, run: "_Run") -> Any:
        """Call the rein or sandboxer ``action`` names; return what it returned
        (exceptions propagate to :meth:`execute`)."""
        if action["type"] == "create_sandbox":
            run.created = self._sandboxer.create(
                action["harness_profile_ref"], action["sandbox_profile"], action["repository"]
            )
            return run.created
        if action["type"] == "destroy_sandbox":
            self._sandboxer.destroy(action["sandbox"])
            return None
        if action["type"] == "discard_sandbox":
            self._sandboxer.destroy(run.created)
            return None
        if action["type"] == "start_session":
            run.rein = self._reins.get(action["profile"]["rein"])
        if run.rein is None:
            raise LookupError("no rein is registered for the resolved profile")
        if action["type"] == "start_session":
            return run.rein.start_session(action["profile"], action["inputs"], action["sandbox"])
        if action["type"] == "dispatch_tool":
            return run.rein.dispatch_tool(action["session"], action["call"])
        return run.rein.end_session(action["session"])


class _Run:
    """Per-``execute`` host state: the rein of the resolved profile, what the sandboxer
    returned (the machine may ask for it to be discarded), and the interruption to
    re-raise once cleanup is done."""

    def __init__(self) -> None:
        self.rein: Optional[Rein] = None
        self.created: Any = None
        self.interrupted: Optional[BaseException] = None


class SubprocessRein(Rein):
    """The reference rein: one JSONL harness child per session (seed 000's subprocess
    protocol), started by a :class:`~stapel_runner_protocol.subprocess_adapter.SubprocessAdapter`
    — so the child gets a cleared environment, bounded lines, and its whole process
    group ends when the session does.

    The rules below are the core's (``stapel_runner_protocol`` core, ``contract::rein``;
    :class:`ReinSession` is its per-session bookkeeping); this class runs the children.

    * ``start_session`` builds a :class:`~stapel_runner_protocol.adapters.RoleSpec` from
      the profile (``role`` = ``profile_id``, ``model``, the tool policy's
      ``allowed_tools``) and opens a harness session, numbered ``s-1``, ``s-2``, … per
      rein (:class:`ReinSessionIds`, the core's numbering); with an ``inputs["prompt"]``
      it runs that turn first, and a failed initial turn fails ``start_session`` (the
      session is closed and forgotten, and the error propagates).
    * ``dispatch_tool`` runs one turn whose prompt is the tool call as compact JSON
      (``{"call_id", "name", "arguments"}``): the turn's text is the ``output``; a
      harness ``error`` line is an unsuccessful result (``ok: false``), any other fault
      raises (the gateway records a failed dispatch).
    * ``end_session`` closes the child and reports the summed token split, the
      session's duration, the profile's model and the number of tool calls
      (``tool_event_visibility: complete``).

    ``adapter`` defaults to ``SubprocessAdapter(command=command, env=env)``. Harness
    turns carry a ``stapel_taskspecs.UsageSplit``, so without ``stapel-taskspecs``
    (a dependency; missing only from a broken install) the constructor raises
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
        self._ids = ReinSessionIds()
        self._lock = threading.Lock()
        self._sessions: Dict[str, "_ReinSession"] = {}

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def start_session(
        self, profile: HarnessProfile, inputs: Dict[str, str], sandbox: SandboxHandle
    ) -> Dict[str, str]:
        spec = rein_role_spec(profile)
        role = RoleSpec(
            role=spec["role"],
            model=spec.get("model"),
            session=spec["session"],
            allowed_tools=list(spec["allowed_tools"]),
        )
        harness = self._adapter.open_session(role)
        state = _ReinSession(harness, ReinSession(profile, self._now()))
        with self._lock:
            session = self._ids.open(sandbox)
            self._sessions[session["session_id"]] = state
        prompt = rein_initial_prompt(inputs)
        if prompt is not None:
            try:
                state.turn(prompt)
            except BaseException:
                self._drop(session["session_id"])
                raise
        return session

    def dispatch_tool(self, session: Dict[str, str], tool_call: ToolCall) -> ToolResult:
        state = self._state(session)
        prompt = state.rules.tool_call_prompt(tool_call)
        try:
            text = state.turn(prompt)
        except AdapterError as exc:
            message = exc.details.get("message")
            result = rein_turn_error_result(
                exc.code or "", message if isinstance(message, str) else str(exc)
            )
            if result is None:
                raise
            return result
        return rein_tool_result(text)

    def end_session(self, session: Dict[str, str]) -> ExecutionSummary:
        state = self._drop(session.get("session_id", ""))
        if state is None:
            raise KeyError("unknown rein session")
        return state.rules.summary(self._now())
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
    """One harness session of a :class:`SubprocessRein`: the child (I/O) and the core's
    bookkeeping of it."""

    def __init__(self, harness: Session, rules: ReinSession) -> None:
        self.harness = harness
        self.rules = rules

    def turn(self, prompt: str) -> str:
        result = self.harness.turn(prompt)
        self.rules.record_turn(result.usage.to_dict())
        return result.text
