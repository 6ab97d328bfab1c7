"""Typed shapes (``TypedDict``) of the JSON-form values the API accepts and returns.

The values stay plain dicts with the wire's keys — this module only names their shapes
so that code using them type-checks (``mypy --strict``). The public submodules re-export
the shapes of their area: :mod:`~stapel_runner_protocol.state` and
:mod:`~stapel_runner_protocol.session` (sequencing), :mod:`~stapel_runner_protocol.contract`
(seed 001's models and the gateway machine's inputs and outputs),
:mod:`~stapel_runner_protocol.local` and :mod:`~stapel_runner_protocol.reducer` (seed 002).

Where a shape is both accepted and returned, the keys an input may omit are optional
(``total=False``); the core's canonical output always carries every key of the models
whose fields are "always present" (noted on each class), so reading them with ``[]``
is safe.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

__all__ = [
    # sequencing and sessions
    "Position",
    "StreamReplay",
    "Resync",
    "ReplayReport",
    "SequencingConfig",
    "PeerError",
    "RoleSpecDict",
    # harness contract (seed 001)
    "ToolEventVisibility",
    "ToolPolicy",
    "ExecutionRequest",
    "HarnessProfile",
    "ReinDescriptor",
    "SandboxHandle",
    "ToolCall",
    "ToolResult",
    "UsageSplitDict",
    "ExecutionSummary",
    "ToolCallCounts",
    "ExecutionEvidence",
    "GatewayResultDict",
    "Catalog",
    "CatalogCounts",
    "Resolution",
    "ExecuteInput",
    "SandboxCreatedInput",
    "SessionStartedInput",
    "ToolDispatchedInput",
    "SessionEndedInput",
    "StageFailedInput",
    "SandboxDestroyedInput",
    "AbortInput",
    "AnswerInput",
    "AnswerInvalidInput",
    "ActionFailedInput",
    "GatewayInput",
    "CreateSandboxAction",
    "StartSessionAction",
    "DispatchToolAction",
    "EndSessionAction",
    "DestroySandboxAction",
    "DiscardSandboxAction",
    "GatewayAction",
    "ResultOutput",
    "GatewayOutput",
    # local run and reducer (seed 002)
    "LocalConfig",
    "SpawnAction",
    "SignalAction",
    "ReducerConfig",
    "CanonicalEvent",
    "ReduceOutcome",
    "ReducerCursor",
    "ReducerGap",
    "RunView",
    "SessionView",
    "ReducerTurn",
    "ReducerItem",
    "ReducerRequest",
    "ReducerLimits",
    "ReducerSnapshot",
    "OutOfOrderRecord",
    "DeliveryReport",
]

# --------------------------------------------------------------------------------------
# Sequencing and sessions (seed 000)


class _PositionRequired(TypedDict):
    task_id: str
    seq: int


class Position(_PositionRequired, total=False):
    """A position in one stream; ``attempt`` is absent for hub→runner command streams."""

    attempt: int


class _StreamReplayRequired(TypedDict):
    task_id: str
    frames: List[str]


class StreamReplay(_StreamReplayRequired, total=False):
    """The kept frames of one stream to re-send, ascending by seq."""

    attempt: int


class _ResyncRequired(TypedDict):
    task_id: str
    declared: int
    missing_from: int
    missing_to: int


class Resync(_ResyncRequired, total=False):
    """A stream whose declared position is older than the kept log."""

    attempt: int


class ReplayReport(TypedDict):
    """What to re-send after a peer declared its positions."""

    streams: List[StreamReplay]
    resync: List[Resync]
    peer_ahead: List[Position]
    unknown: List[str]


class SequencingConfig(TypedDict, total=False):
    """The bounds of a :class:`~stapel_runner_protocol.ConnectionState` (every key is
    present in ``ConnectionState.config``; a session's ``sequencing=`` may give some)."""

    inbound_window: int
    max_outbox_frames: int
    max_outbox_bytes: int
    max_streams: int
    max_tombstones: int


class PeerError(TypedDict):
    """A session's ``("peer_error", …)`` event: the peer broke the protocol."""

    code: str
    detail: str


class RoleSpecDict(TypedDict):
    """``RoleSpec.to_dict()``'s input: the core's role spec (absent fields ``None``)."""

    role: str
    backend: Optional[str]
    model: Optional[str]
    session: str
    system_prompt_ref: Optional[str]
    allowed_tools: List[str]
    llm_base_url: Optional[str]
    budget: Any
    extra: Dict[str, Any]


# --------------------------------------------------------------------------------------
# Harness contract 1.0 (seed 001). Unknown keys are errors (only ``metadata`` is open).

#: A rein's tool-event visibility.
ToolEventVisibility = Union[Literal["complete"], Literal["partial"], Literal["unavailable"]]


class ToolPolicy(TypedDict):
    """The tools a profile allows."""

    allowed_tools: List[str]


class _ExecutionRequestRequired(TypedDict):
    harness_profile_ref: str
    repository: str
    title: str
    description: str


class ExecutionRequest(_ExecutionRequestRequired, total=False):
    """A consumer's request (absent optional references are omitted on output)."""

    assignment_ref: Optional[str]
    role_ref: Optional[str]
    duty_ref: Optional[str]
    goal_refs: List[str]
    resource_envelope_refs: List[str]


class _HarnessProfileRequired(TypedDict):
    contract_version: str
    profile_id: str
    rein: str
    model: str
    sandbox_profile: str
    tool_policy: ToolPolicy


class HarnessProfile(_HarnessProfileRequired, total=False):
    """A harness profile (every key present on output; ``enabled`` defaults to true)."""

    enabled: bool
    credential_refs: List[str]
    metadata: Dict[str, Any]


class _ReinDescriptorRequired(TypedDict):
    rein_id: str
    contract_version: str


class ReinDescriptor(_ReinDescriptorRequired, total=False):
    """A rein's descriptor (every key present on output)."""

    tool_event_visibility: ToolEventVisibility
    metadata: Dict[str, Any]


class _SandboxHandleRequired(TypedDict):
    sandbox_id: str


class SandboxHandle(_SandboxHandleRequired, total=False):
    """What a sandboxer returns for a created sandbox."""

    metadata: Dict[str, Any]


class _ToolCallRequired(TypedDict):
    name: str


class ToolCall(_ToolCallRequired, total=False):
    """One tool call of a request."""

    call_id: Optional[str]
    arguments: Dict[str, Any]


class _ToolResultRequired(TypedDict):
    ok: bool


class ToolResult(_ToolResultRequired, total=False):
    """A rein's result of one tool call (``ok: false`` fails the execution stage)."""

    output: Any
    error: Optional[str]
    metadata: Dict[str, Any]


class UsageSplitDict(TypedDict):
    """The closed five-component token split in JSON form."""

    cache_read: int
    cache_write: int
    fresh_input: int
    output: int
    thinking: int


class ExecutionSummary(TypedDict, total=False):
    """A rein's normalised facts at session end; unknown measurements are ``None``.
    ``tool_event_count`` must be present for ``complete`` and absent for
    ``unavailable`` visibility."""

    tokens: Optional[UsageSplitDict]
    duration_ms: Optional[int]
    resolved_model: Optional[str]
    commit: Optional[str]
    artifacts: Optional[List[str]]
    tool_event_visibility: ToolEventVisibility
    tool_event_count: Optional[int]
    metadata: Dict[str, Any]


class ToolCallCounts(TypedDict):
    """Counts of the tool calls of one execution."""

    requested: int
    dispatched: int
    succeeded: int
    unsuccessful: int
    dispatch_failed: int
    denied: int
    skipped: int
    abandoned: int


class ExecutionEvidence(TypedDict):
    """Compact, content-free evidence of one execution (every key always present)."""

    contract_version: str
    outcome: Literal["succeeded", "refused", "failed"]
    failure_stage: Optional[
        Literal["resolution", "sandbox_create", "session_start", "execution", "session_end",
                "teardown"]
    ]
    failure_code: Optional[str]
    failure_reasons: List[str]
    harness_profile_ref: str
    rein_id: Optional[str]
    model: Optional[str]
    repository: str
    assignment_ref: Optional[str]
    role_ref: Optional[str]
    duty_ref: Optional[str]
    goal_refs: List[str]
    resource_envelope_refs: List[str]
    sandbox_id: Optional[str]
    session_end: Literal["not_attempted", "ended", "failed", "abandoned"]
    teardown: Literal["not_needed", "destroyed", "failed", "abandoned"]
    tool_calls: ToolCallCounts
    tools_used: List[str]
    duration_ms: int
    rein_duration_ms: Optional[int]
    tokens: Optional[UsageSplitDict]
    resolved_model: Optional[str]
    commit: Optional[str]
    artifacts: Optional[List[str]]
    tool_event_visibility: ToolEventVisibility
    tool_event_count: Optional[int]
    redacted_fields: List[str]


class GatewayResultDict(TypedDict):
    """The JSON form of a gateway result (see ``contract.GatewayResult``)."""

    ok: bool
    evidence: ExecutionEvidence
    tool_output: Any
    tool_error: Optional[str]


class Catalog(TypedDict, total=False):
    """Profiles and rein descriptors to resolve against."""

    profiles: List[HarnessProfile]
    reins: List[ReinDescriptor]


class CatalogCounts(TypedDict):
    """``parse_catalog``'s answer."""

    profiles: int
    reins: int


class Resolution(TypedDict):
    """A resolved profile and its rein."""

    profile: HarnessProfile
    rein: ReinDescriptor


class _ExecuteInputRequired(TypedDict):
    type: Literal["execute"]
    request: ExecutionRequest


class ExecuteInput(_ExecuteInputRequired, total=False):
    """Gateway input: run one request."""

    inputs: Dict[str, str]
    tool_calls: List[ToolCall]


class SandboxCreatedInput(TypedDict):
    """Gateway input: the answer to ``create_sandbox``."""

    type: Literal["sandbox_created"]
    sandbox: SandboxHandle


class SessionStartedInput(TypedDict):
    """Gateway input: the answer to ``start_session``."""

    type: Literal["session_started"]
    session: Dict[str, str]


class ToolDispatchedInput(TypedDict):
    """Gateway input: the answer to ``dispatch_tool``."""

    type: Literal["tool_dispatched"]
    result: ToolResult


class SessionEndedInput(TypedDict):
    """Gateway input: the answer to ``end_session``."""

    type: Literal["session_ended"]
    summary: ExecutionSummary


class _StageFailedInputRequired(TypedDict):
    type: Literal[
        "sandbox_create_failed",
        "session_start_failed",
        "tool_dispatch_failed",
        "session_end_failed",
        "sandbox_destroy_failed",
    ]


class StageFailedInput(_StageFailedInputRequired, total=False):
    """Gateway input: the outstanding action failed (``message`` goes to the direct
    caller only, never into evidence)."""

    message: Optional[str]


class SandboxDestroyedInput(TypedDict):
    """Gateway input: the answer to ``destroy_sandbox``."""

    type: Literal["sandbox_destroyed"]


class AbortInput(TypedDict):
    """Gateway input: the host gives up on the outstanding action."""

    type: Literal["abort"]
    code: str


class _AnswerInputRequired(TypedDict):
    type: Literal["answer"]


class AnswerInput(_AnswerInputRequired, total=False):
    """Gateway input: the callback for the outstanding action returned ``value`` (the
    core validates it as that action's answer; an invalid one fails the stage)."""

    value: Any


class _AnswerInvalidInputRequired(TypedDict):
    type: Literal["answer_invalid"]


class AnswerInvalidInput(_AnswerInvalidInputRequired, total=False):
    """Gateway input: the callback's return value could not be turned into JSON."""

    message: Optional[str]


class _ActionFailedInputRequired(TypedDict):
    type: Literal["action_failed"]


class ActionFailedInput(_ActionFailedInputRequired, total=False):
    """Gateway input: the callback for the outstanding action raised."""

    message: Optional[str]


#: Any input of the gateway machine.
GatewayInput = Union[
    ExecuteInput,
    SandboxCreatedInput,
    SessionStartedInput,
    ToolDispatchedInput,
    SessionEndedInput,
    StageFailedInput,
    SandboxDestroyedInput,
    AbortInput,
    AnswerInput,
    AnswerInvalidInput,
    ActionFailedInput,
]


class CreateSandboxAction(TypedDict):
    """Gateway action: create a sandbox."""

    type: Literal["create_sandbox"]
    harness_profile_ref: str
    sandbox_profile: str
    repository: str


class StartSessionAction(TypedDict):
    """Gateway action: start the rein's session."""

    type: Literal["start_session"]
    profile: HarnessProfile
    inputs: Dict[str, str]
    sandbox: SandboxHandle


class DispatchToolAction(TypedDict):
    """Gateway action: dispatch one tool call."""

    type: Literal["dispatch_tool"]
    session: Dict[str, str]
    call: ToolCall


class EndSessionAction(TypedDict):
    """Gateway action: end the rein's session."""

    type: Literal["end_session"]
    session: Dict[str, str]


class DestroySandboxAction(TypedDict):
    """Gateway action: destroy the sandbox."""

    type: Literal["destroy_sandbox"]
    sandbox: SandboxHandle


class DiscardSandboxAction(TypedDict):
    """Gateway action: the sandboxer's answer was not a valid handle; pass whatever it
    returned to ``destroy``, best effort."""

    type: Literal["discard_sandbox"]


#: An action of the gateway machine for the host.
GatewayAction = Union[
    CreateSandboxAction,
    StartSessionAction,
    DispatchToolAction,
    EndSessionAction,
    DestroySandboxAction,
    DiscardSandboxAction,
]


class ResultOutput(TypedDict):
    """The gateway machine's last output."""

    type: Literal["result"]
    result: GatewayResultDict


#: Any output of the gateway machine.
GatewayOutput = Union[
    CreateSandboxAction,
    StartSessionAction,
    DispatchToolAction,
    EndSessionAction,
    DestroySandboxAction,
    DiscardSandboxAction,
    ResultOutput,
]

# --------------------------------------------------------------------------------------
# Local run and reducer (seed 002)


class LocalConfig(TypedDict, total=False):
    """The local-run machine's configuration (unknown keys are an error; see
    conformance/README.md for the defaults)."""

    run_id: str
    normalized_session_id: str
    source_instance_id: str
    clock_start_ms: int
    clock_step_ms: int
    harness_program: str
    harness_args: List[str]
    harness_env: Dict[str, str]
    env_allow: List[str]
    driver_kind: str
    max_line_bytes: int
    max_controller_line_bytes: int
    log_max_lines: int
    log_max_bytes: int
    ledger_max_entries: int
    ledger_max_bytes: int
    ready_timeout_ms: int
    shutdown_grace_ms: int
    request_timeout_ms: int
    exit_timeout_ms: int
    max_queued_commands: int
    max_pending_requests: int
    working_directory: Optional[str]


class SpawnAction(TypedDict):
    """``("spawn", …)``: start the harness (the environment is complete: start from an
    empty one)."""

    program: str
    args: List[str]
    env: Dict[str, str]
    new_process_group: bool


class SignalAction(TypedDict):
    """``("signal", …)``: signal the harness's process group."""

    group: int
    signal: Literal["TERM", "KILL"]


class ReducerConfig(TypedDict, total=False):
    """The reducer's configuration (unknown keys are an error)."""

    run_id: str
    normalized_session_id: Optional[str]
    max_turns: int
    max_items: int
    max_deltas_per_item: int
    max_requests: int
    max_diagnostics: int
    max_gaps: int
    max_out_of_order_records: int
    max_tracked_event_ids: int


_CanonicalEventRequired = TypedDict(
    "_CanonicalEventRequired",
    {
        "schema": str,
        "schemaVersion": int,
        "sourceEventId": str,
        "sourceSeq": int,
        "sourceInstanceId": str,
        "sourceKind": Literal["runner", "control_plane"],
        "runId": str,
        "eventType": str,
        "priority": int,
        "emittedAt": str,
        "payload": Dict[str, Any],
    },
)


class CanonicalEvent(_CanonicalEventRequired, total=False):
    """A canonical ``paperclip.prp.event.v1`` event (other optional keys, e.g.
    ``observedAt`` and ``debug``, are kept by the core)."""

    normalizedSessionId: Optional[str]
    turnId: Optional[str]
    itemId: Optional[str]
    observedAt: str
    debug: Any


#: What ``SessionReducer.apply`` did with an accepted event.
ReduceOutcome = Union[
    Literal["applied"], Literal["applied_after_gap"], Literal["duplicate"], Literal["out_of_order"]
]


class ReducerCursor(TypedDict):
    """The last applied ``sourceSeq`` of one source."""

    sourceKind: str
    sourceInstanceId: str
    lastSourceSeq: int


class ReducerGap(TypedDict):
    """A forward gap in one source."""

    sourceKind: str
    sourceInstanceId: str
    expectedSourceSeq: int
    receivedSourceSeq: int


class RunView(TypedDict):
    """The run in a snapshot."""

    state: str
    phase: Optional[str]
    workspaceReady: bool
    result: Any


class SessionView(TypedDict):
    """The session in a snapshot."""

    state: str
    driverSessionId: Optional[str]


class ReducerTurn(TypedDict):
    """One turn in a snapshot."""

    turnId: Optional[str]
    state: str
    text: Optional[str]
    reason: Optional[str]


class ReducerItem(TypedDict):
    """One item in a snapshot."""

    itemId: str
    turnId: Optional[str]
    kind: Optional[str]
    state: str
    text: Optional[str]
    message: Optional[str]
    deltas: List[Any]
    droppedDeltas: int


# A runtime (permission / input) request in a snapshot; ``type`` is one of its keys.
ReducerRequest = TypedDict(
    "ReducerRequest",
    {
        "requestId": str,
        "status": str,
        "type": Optional[str],
        "prompt": Optional[str],
        "response": Any,
        "request": Any,
    },
)


class ReducerLimits(TypedDict):
    """What the bounds dropped."""

    droppedTurns: int
    droppedItems: int
    droppedRequests: int
    droppedDiagnostics: int
    droppedGaps: int


class ReducerSnapshot(TypedDict):
    """The reducer's snapshot of one run and its session (every key always present)."""

    runId: str
    normalizedSessionId: Optional[str]
    appliedEvents: int
    eventCounts: Dict[str, int]
    cursors: List[ReducerCursor]
    gaps: List[ReducerGap]
    run: RunView
    harness: Dict[str, Any]
    session: SessionView
    turns: List[ReducerTurn]
    items: List[ReducerItem]
    pendingRequests: List[ReducerRequest]
    answeredRequests: List[ReducerRequest]
    logs: Any
    diagnostics: List[Dict[str, Any]]
    terminal: Any
    limits: ReducerLimits


class OutOfOrderRecord(TypedDict):
    """One out-of-order delivery."""

    sourceEventId: str
    sourceSeq: int
    cursor: int


class DeliveryReport(TypedDict):
    """Delivery anomalies (they do not affect the snapshot)."""

    duplicates: int
    outOfOrderCount: int
    outOfOrder: List[OutOfOrderRecord]
    rejected: int
