"""Type stubs of the native extension (the Rust core's bindings)."""

from typing import (
    Any,
    ClassVar,
    Dict,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from typing_extensions import Self, TypeAlias, disjoint_base, final

from ._types import (
    Catalog,
    CatalogCounts,
    CanonicalEvent,
    DeliveryReport,
    ExecutionEvidence,
    ExecutionRequest,
    ExecutionSummary,
    GatewayInput,
    GatewayOutput,
    GatewayResultDict,
    HarnessProfile,
    LocalConfig,
    PeerError,
    Position,
    ReduceOutcome,
    ReducerConfig,
    ReducerSnapshot,
    ReinDescriptor,
    ReplayReport,
    Resolution,
    Resync,
    RoleSpecDict,
    SandboxHandle,
    SequencingConfig,
    SignalAction,
    SpawnAction,
    ToolCall,
    ToolResult,
)
from .adapters import TurnResult
from .errors import AdapterError

import stapel_taskspecs

__all__ = [
    "SCHEMA_VERSION",
    "PROTOCOL_VERSION",
    "DEFAULT_MAX_LINE_BYTES",
    "Hello",
    "TaskAssign",
    "TaskProgress",
    "TaskReportMessage",
    "TaskCancel",
    "Ping",
    "Pong",
    "ConnectionState",
    "TaskChannel",
    "OutboxLog",
    "InboxTracker",
    "LineFramer",
    "LineError",
    "encode",
    "decode",
    "validate",
    "is_valid",
    "iter_errors",
    "message_types",
    "is_sequenced",
    "usage_from_anthropic",
    "usage_from_openai",
    "usage_from_mapping",
    "check_usage_split",
    "role_spec_from_invocation",
    "role_spec_to_dict",
    "turn_result_from_value",
    "SubprocessTurnMachine",
    "SessionMachine",
    "HubSession",
    "RunnerSession",
    "SessionReducer",
    "LocalRun",
    "CONTRACT_MODELS",
    "parse_model",
    "parse_catalog",
    "resolve",
    "safe_identifier",
    "looks_like_credential",
    "is_sensitive_key",
    "is_credential_reference",
    "GatewayMachine",
]

SCHEMA_VERSION: int
PROTOCOL_VERSION: int
DEFAULT_MAX_LINE_BYTES: int

_JSONObject: TypeAlias = Dict[str, Any]
_Nonce: TypeAlias = Union[str, int, None]
_SentAt: TypeAlias = Union[str, int, float, None]
_Frame: TypeAlias = Union[str, bytes, bytearray, Dict[str, Any]]
_Arrival: TypeAlias = Literal["in_order", "ahead", "duplicate"]

class _MessageBase:
    ARTIFACT: ClassVar[str]
    schema_version: int
    @property
    def extra(self) -> Dict[str, Any]: ...
    @extra.setter
    def extra(self, value: Dict[str, Any]) -> None: ...
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self: ...
    @classmethod
    def parse(cls, data: Mapping[str, Any], *, validate: bool = True) -> Self: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def validate(self) -> Self: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Dict[str, Any]]]: ...

@final
class Hello(_MessageBase):
    ARTIFACT: ClassVar[str]
    project_id: str
    runner_version: str
    protocol_version: int
    def __new__(
        cls,
        project_id: str = "",
        runner_version: str = "",
        protocol_version: int = 1,
        capabilities: Optional[List[str]] = None,
        resume: Optional[Dict[str, int]] = None,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @property
    def capabilities(self) -> List[str]: ...
    @capabilities.setter
    def capabilities(self, value: List[str]) -> None: ...
    @property
    def resume(self) -> Dict[str, int]: ...
    @resume.setter
    def resume(self, value: Dict[str, int]) -> None: ...

@final
class TaskAssign(_MessageBase):
    ARTIFACT: ClassVar[str]
    task_id: str
    role: str
    seq: int
    attempt: int
    def __new__(
        cls,
        task_id: str = "",
        task: Optional[Dict[str, Any]] = None,
        role: str = "",
        invocation: Optional[Dict[str, Any]] = None,
        seq: int = 0,
        attempt: int = 0,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @property
    def task(self) -> Dict[str, Any]: ...
    @task.setter
    def task(self, value: Dict[str, Any]) -> None: ...
    @property
    def invocation(self) -> Dict[str, Any]: ...
    @invocation.setter
    def invocation(self, value: Dict[str, Any]) -> None: ...
    @property
    def task_spec(self) -> stapel_taskspecs.TaskSpec: ...

@final
class TaskProgress(_MessageBase):
    ARTIFACT: ClassVar[str]
    task_id: str
    seq: int
    kind: str
    attempt: int
    def __new__(
        cls,
        task_id: str = "",
        seq: int = 0,
        kind: str = "",
        payload: Optional[Dict[str, Any]] = None,
        attempt: int = 0,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @property
    def payload(self) -> Dict[str, Any]: ...
    @payload.setter
    def payload(self, value: Dict[str, Any]) -> None: ...

@final
class TaskReportMessage(_MessageBase):
    ARTIFACT: ClassVar[str]
    task_id: str
    seq: int
    attempt: int
    def __new__(
        cls,
        task_id: str = "",
        report: Optional[Dict[str, Any]] = None,
        seq: int = 0,
        attempt: int = 0,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @property
    def report(self) -> Dict[str, Any]: ...
    @report.setter
    def report(self, value: Dict[str, Any]) -> None: ...
    @property
    def report_model(self) -> stapel_taskspecs.TaskReport: ...

@final
class TaskCancel(_MessageBase):
    ARTIFACT: ClassVar[str]
    task_id: str
    reason: str
    seq: int
    def __new__(
        cls,
        task_id: str = "",
        reason: str = "",
        seq: int = 0,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...

@final
class Ping(_MessageBase):
    ARTIFACT: ClassVar[str]
    def __new__(
        cls,
        nonce: _Nonce = None,
        sent_at: _SentAt = None,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @property
    def nonce(self) -> _Nonce: ...
    @nonce.setter
    def nonce(self, value: _Nonce) -> None: ...
    @property
    def sent_at(self) -> _SentAt: ...
    @sent_at.setter
    def sent_at(self, value: _SentAt) -> None: ...

@final
class Pong(_MessageBase):
    ARTIFACT: ClassVar[str]
    def __new__(
        cls,
        nonce: _Nonce = None,
        schema_version: int = 1,
        extra: Optional[Dict[str, Any]] = None,
    ) -> Self: ...
    @classmethod
    def answer(cls, ping: Ping) -> Pong: ...
    @property
    def nonce(self) -> _Nonce: ...
    @nonce.setter
    def nonce(self, value: _Nonce) -> None: ...

_Message: TypeAlias = Union[Hello, TaskAssign, TaskProgress, TaskReportMessage, TaskCancel, Ping, Pong]
_Sequenced: TypeAlias = Union[TaskAssign, TaskProgress, TaskReportMessage, TaskCancel]
_S = TypeVar("_S", TaskAssign, TaskProgress, TaskReportMessage, TaskCancel)

def encode(message: Union[_Message, Dict[str, Any]]) -> str: ...
def decode(frame: _Frame, *, validate: bool = False) -> _Message: ...
def validate(instance: Any, name: str) -> None: ...
def is_valid(instance: Any, name: str) -> bool: ...
def iter_errors(instance: Any, name: str) -> List[str]: ...
def message_types() -> List[str]: ...
def is_sequenced(message: object) -> bool: ...

_SessionOutput: TypeAlias = Union[
    Tuple[Literal["transmit"], str],
    Tuple[Literal["close"], str],
    Tuple[Literal["timeout"], Optional[int]],
    Tuple[Literal["hello"], Hello],
    Tuple[Literal["received"], _Sequenced],
    Tuple[Literal["inbound_gap"], Resync],
    Tuple[Literal["outbound_resync"], Resync],
    Tuple[Literal["peer_error"], PeerError],
    # an event kind this binding does not know yet (its debug form)
    Tuple[Literal["unknown_event"], str],
]

@disjoint_base
class SessionMachine:
    def connected(self, now_ms: int) -> None: ...
    def disconnected(self, now_ms: int) -> None: ...
    def frame(self, now_ms: int, frame: str) -> None: ...
    def bytes(self, now_ms: int, data: bytes) -> None: ...
    def send(self, now_ms: int, message: _Sequenced) -> None: ...
    def tick(self, now_ms: int) -> None: ...
    def poll_output(self) -> _SessionOutput: ...
    def drain_outputs(self) -> List[_SessionOutput]: ...
    @property
    def is_connected(self) -> bool: ...
    @property
    def state(self) -> ConnectionState: ...
    def resume_map(self) -> Dict[str, int]: ...
    @property
    def outbox_frames(self) -> int: ...
    def forget_task(self, task_id: str) -> bool: ...
    def trim_through(self, task_id: str, attempt: Optional[int], seq: int) -> int: ...
    def is_fully_acknowledged(self, task_id: str) -> bool: ...
    def is_forgotten(self, task_id: str) -> bool: ...

@final
class HubSession(SessionMachine):
    def __new__(
        cls,
        *,
        state: Optional[ConnectionState] = None,
        validate: bool = True,
        ping_interval_ms: Optional[int] = None,
        peer_timeout_ms: Optional[int] = None,
        ack_every_frames: Optional[int] = None,
        ack_delay_ms: Optional[int] = None,
        max_ack_entries: Optional[int] = None,
        max_control_frame_bytes: Optional[int] = None,
        max_held_frames: Optional[int] = None,
        max_held_bytes: Optional[int] = None,
        min_protocol_version: Optional[int] = None,
        max_protocol_version: Optional[int] = None,
        max_line_bytes: Optional[int] = None,
        sequencing: Optional[SequencingConfig] = None,
    ) -> Self: ...

@final
class RunnerSession(SessionMachine):
    def __new__(
        cls,
        hello: Hello,
        *,
        state: Optional[ConnectionState] = None,
        validate: bool = True,
        ping_interval_ms: Optional[int] = None,
        peer_timeout_ms: Optional[int] = None,
        ack_every_frames: Optional[int] = None,
        ack_delay_ms: Optional[int] = None,
        max_ack_entries: Optional[int] = None,
        max_control_frame_bytes: Optional[int] = None,
        max_held_frames: Optional[int] = None,
        max_held_bytes: Optional[int] = None,
        min_protocol_version: Optional[int] = None,
        max_protocol_version: Optional[int] = None,
        max_line_bytes: Optional[int] = None,
        sequencing: Optional[SequencingConfig] = None,
    ) -> Self: ...

_LocalOutput: TypeAlias = Union[
    Tuple[Literal["to_controller", "to_harness"], str],
    Tuple[Literal["spawn"], SpawnAction],
    Tuple[Literal["signal"], SignalAction],
    Tuple[Literal["close_harness_stdin"], None],
    Tuple[Literal["exit"], int],
    Tuple[Literal["timeout"], Optional[int]],
    # an output kind this binding does not know yet (its debug form)
    Tuple[Literal["unknown"], str],
]

CONTRACT_MODELS: List[str]

@overload
def parse_model(name: Literal["ExecutionRequest"], value: object) -> ExecutionRequest: ...
@overload
def parse_model(name: Literal["HarnessProfile"], value: object) -> HarnessProfile: ...
@overload
def parse_model(name: Literal["ReinDescriptor"], value: object) -> ReinDescriptor: ...
@overload
def parse_model(name: Literal["SandboxHandle"], value: object) -> SandboxHandle: ...
@overload
def parse_model(name: Literal["ToolCall"], value: object) -> ToolCall: ...
@overload
def parse_model(name: Literal["ToolResult"], value: object) -> ToolResult: ...
@overload
def parse_model(name: Literal["ExecutionSummary"], value: object) -> ExecutionSummary: ...
@overload
def parse_model(name: Literal["ExecutionEvidence"], value: object) -> ExecutionEvidence: ...
@overload
def parse_model(name: Literal["GatewayResult"], value: object) -> GatewayResultDict: ...
@overload
def parse_model(name: str, value: object) -> Mapping[str, Any]: ...
def parse_catalog(catalog: Catalog) -> CatalogCounts: ...
def resolve(harness_profile_ref: str, catalog: Catalog) -> Resolution: ...
def safe_identifier(s: str, kind: Optional[str] = None) -> Tuple[str, bool]: ...
def looks_like_credential(s: str) -> bool: ...
def is_sensitive_key(key: str) -> bool: ...
def is_credential_reference(s: str) -> bool: ...

@final
class GatewayMachine:
    def __new__(
        cls,
        catalog: Optional[Catalog] = None,
        *,
        max_tool_calls: Optional[int] = None,
        max_evidence_refs: Optional[int] = None,
        max_evidence_artifacts: Optional[int] = None,
    ) -> Self: ...
    def handle_input(self, now_ms: int, input: GatewayInput) -> None: ...
    def poll_output(self) -> Optional[GatewayOutput]: ...
    def drain(self) -> List[GatewayOutput]: ...
    @property
    def finished(self) -> bool: ...

@final
class LocalRun:
    def __new__(cls, config: Optional[LocalConfig] = None) -> Self: ...
    def controller_bytes(self, now_ms: int, data: bytes) -> None: ...
    def controller_eof(self, now_ms: int) -> None: ...
    def harness_stdout(self, now_ms: int, data: bytes) -> None: ...
    def harness_stderr(self, now_ms: int, data: bytes) -> None: ...
    def harness_spawned(self, now_ms: int, pid: int) -> None: ...
    def harness_spawn_failed(self, now_ms: int, message: str) -> None: ...
    def harness_exited(self, now_ms: int, code: Optional[int] = None, signal: Optional[int] = None) -> None: ...
    def timeout(self, now_ms: int) -> None: ...
    def poll_output(self) -> _LocalOutput: ...
    def drain_outputs(self) -> List[_LocalOutput]: ...

@final
class SessionReducer:
    def __new__(cls, config: Optional[ReducerConfig] = None) -> Self: ...
    def apply(self, event: CanonicalEvent) -> ReduceOutcome: ...
    def apply_line(self, line: str) -> ReduceOutcome: ...
    def snapshot(self) -> ReducerSnapshot: ...
    def delivery(self) -> DeliveryReport: ...
    @staticmethod
    def replay(
        events: Sequence[CanonicalEvent], config: Optional[ReducerConfig] = None
    ) -> ReducerSnapshot: ...

@final
class LineError:
    @property
    def code(self) -> str: ...
    @property
    def line_number(self) -> int: ...
    @property
    def message(self) -> str: ...
    def __new__(cls, code: str, line_number: int, message: str = "") -> Self: ...
    def __eq__(self, value: object, /) -> bool: ...

@final
class LineFramer:
    def __new__(
        cls,
        max_line_bytes: int = 65536,
        *,
        skip_empty_lines: bool = True,
        max_ready_lines: Optional[int] = None,
        max_ready_bytes: Optional[int] = None,
    ) -> Self: ...
    def push(self, data: Union[bytes, bytearray, str]) -> int: ...
    def push_all(self, data: Union[bytes, bytearray, str]) -> List[Union[str, LineError]]: ...
    def finish(self) -> None: ...
    def poll(self) -> Union[str, LineError, None]: ...
    def drain(self) -> List[Union[str, LineError]]: ...
    def __iter__(self) -> Iterator[Union[str, LineError]]: ...
    def __next__(self) -> Union[str, LineError]: ...
    @property
    def buffered_bytes(self) -> int: ...
    @property
    def ready(self) -> int: ...
    @property
    def ready_bytes(self) -> int: ...
    @property
    def full(self) -> bool: ...
    @property
    def max_ready_lines(self) -> int: ...
    @property
    def max_ready_bytes(self) -> int: ...
    @property
    def finished(self) -> bool: ...
    @property
    def max_line_bytes(self) -> int: ...
    @property
    def skip_empty_lines(self) -> bool: ...

def usage_from_anthropic(usage: Any, *, thinking: int = 0) -> stapel_taskspecs.UsageSplit: ...
def usage_from_openai(usage: Any) -> stapel_taskspecs.UsageSplit: ...
def usage_from_mapping(data: Mapping[str, Any]) -> stapel_taskspecs.UsageSplit: ...
def check_usage_split(data: Any) -> None: ...
def role_spec_from_invocation(
    invocation: Optional[Mapping[str, Any]], role: Optional[str] = None
) -> RoleSpecDict: ...
def turn_result_from_value(value: Any) -> Tuple[str, stapel_taskspecs.UsageSplit]: ...

_TurnOutput: TypeAlias = Union[
    Tuple[Literal["write_stdin"], str],
    Tuple[Literal["progress"], Dict[str, Any]],
    Tuple[Literal["turn_result"], "TurnResult"],
    Tuple[Literal["error"], "AdapterError"],
    # an output kind this binding does not know yet (its JSON form)
    Tuple[Literal["unknown"], Any],
]

@final
class SubprocessTurnMachine:
    def __new__(cls, max_line_bytes: int = 1048576) -> Self: ...
    def start_turn(self, prompt: str, now_ms: int = 0) -> None: ...
    def feed_stdout(self, data: bytes, now_ms: int = 0) -> None: ...
    def feed_eof(self, now_ms: int = 0) -> None: ...
    def poll(self) -> Optional[_TurnOutput]: ...
    def drain(self) -> List[_TurnOutput]: ...
    @property
    def in_turn(self) -> bool: ...
    @property
    def closed(self) -> bool: ...

def role_spec_to_dict(
    role: str,
    backend: Optional[str],
    model: Optional[str],
    session: str,
    system_prompt_ref: Optional[str],
    allowed_tools: Sequence[str],
    llm_base_url: Optional[str],
    budget: Any,
    extra: Dict[str, Any],
) -> Dict[str, Any]: ...

@final
class OutboxLog:
    @property
    def last_seq(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def first_available(self) -> int: ...
    @property
    def kept_bytes(self) -> int: ...
    @property
    def unconfirmed_from(self) -> int: ...
    @property
    def is_confirmed(self) -> bool: ...
    def frames(self) -> List[Tuple[int, str]]: ...
    def since(self, last_seq: int) -> List[_Sequenced]: ...

@final
class InboxTracker:
    @property
    def last_seq(self) -> int: ...
    @property
    def ahead(self) -> List[int]: ...
    @property
    def has_received(self) -> bool: ...

@final
class TaskChannel:
    @property
    def task_id(self) -> str: ...
    @property
    def outbound(self) -> Dict[Optional[int], OutboxLog]: ...
    @property
    def inbound(self) -> Dict[Optional[int], InboxTracker]: ...
    @property
    def last_received(self) -> int: ...

@final
class ConnectionState:
    def __new__(
        cls,
        role: str,
        *,
        inbound_window: Optional[int] = None,
        max_outbox_frames: Optional[int] = None,
        max_outbox_bytes: Optional[int] = None,
        max_streams: Optional[int] = None,
        max_tombstones: Optional[int] = None,
    ) -> Self: ...
    @property
    def role(self) -> str: ...
    @property
    def config(self) -> SequencingConfig: ...
    @overload
    def emit(self, message: _S) -> _S: ...
    @overload
    def emit(self, message: _Message) -> _Message: ...
    @overload
    def emit_encoded(self, message: _S) -> Tuple[_S, str]: ...
    @overload
    def emit_encoded(self, message: _Message) -> Tuple[_Message, str]: ...
    def receive(self, message: _Message) -> bool: ...
    def receive_arrival(self, message: _Message) -> _Arrival: ...
    def classify(self, message: _Message) -> _Arrival: ...
    def accept_in_order(self, message: _Message) -> _Arrival: ...
    def resume_map(self) -> Dict[str, int]: ...
    def replay_for(self, resume: Optional[Mapping[str, int]] = None) -> Dict[str, List[_Sequenced]]: ...
    def replay_report(self, resume: Optional[Mapping[str, int]] = None) -> ReplayReport: ...
    def replay_positions(self, positions: Sequence[Mapping[str, Any]]) -> ReplayReport: ...
    def ack(self, task_id: str, attempt: Optional[int], seq: int) -> int: ...
    def trim_through(self, task_id: str, attempt: Optional[int], seq: int) -> int: ...
    def is_ahead(self, task_id: str, attempt: Optional[int], seq: int) -> bool: ...
    def mark_unconfirmed(self) -> None: ...
    def confirm_all(self) -> None: ...
    @property
    def is_confirmed(self) -> bool: ...
    def is_fully_acknowledged(self, task_id: str) -> bool: ...
    def is_forgotten(self, task_id: str) -> bool: ...
    @property
    def forgotten_count(self) -> int: ...
    def skip_to(self, task_id: str, attempt: Optional[int], first_available: int) -> Optional[Tuple[int, int]]: ...
    def ack_positions(self) -> List[Position]: ...
    def replay_from(self) -> List[Position]: ...
    def unacked(self) -> List[Tuple[str, Optional[int], int, str]]: ...
    def forget_task(self, task_id: str) -> bool: ...
    @property
    def outbox_frames(self) -> int: ...
    @property
    def outbox_bytes(self) -> int: ...
    def stream_counts(self) -> Tuple[int, int]: ...
    def channel(self, task_id: str) -> TaskChannel: ...
    @property
    def channels(self) -> Dict[str, TaskChannel]: ...
    def snapshot(self) -> bytes: ...
    @staticmethod
    def restore(data: Union[bytes, bytearray]) -> ConnectionState: ...
    def memory_footprint(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
