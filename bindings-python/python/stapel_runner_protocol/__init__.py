"""stapel-runner-protocol: the Stapel hub↔runner wire protocol and harness-adapter seam,
backed by the Rust ``stapel-runner-protocol`` core.

The API is seed 000's: the seven messages (:mod:`.messages`), ``encode``/``decode``, schema
validation, the sequencing state machine, the harness-adapter seam and usage mapping.
All parsing, validation, encoding and sequencing run in the Rust core
(:mod:`stapel_runner_protocol._native`); the Python modules only arrange the names.

Imports are lazy (PEP 562): ``import stapel_runner_protocol`` loads neither the native
extension nor ``stapel_taskspecs``, ``websockets``, ``jsonschema`` or
``claude_agent_sdk`` until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

__version__ = "0.2.0"

_LAZY = {
    # messages
    "Hello": "messages",
    "TaskAssign": "messages",
    "TaskProgress": "messages",
    "TaskReportMessage": "messages",
    "TaskCancel": "messages",
    "Ping": "messages",
    "Pong": "messages",
    "MESSAGES": "messages",
    # transport core
    "encode": "transport",
    "decode": "transport",
    "to_frame": "transport",
    # sequencing
    "ConnectionState": "state",
    "TaskChannel": "state",
    "OutboxLog": "state",
    "InboxTracker": "state",
    "is_sequenced": "state",
    # adapters
    "RoleSpec": "adapters",
    "TurnResult": "adapters",
    "Session": "adapters",
    "HarnessAdapter": "adapters",
    "SubprocessAdapter": "subprocess_adapter",
    "SubprocessSession": "subprocess_adapter",
    "AgentSdkAdapter": "agent_sdk_adapter",
    "AgentSdkSession": "agent_sdk_adapter",
    # usage
    "usage_from_anthropic": "usage",
    "usage_from_openai": "usage",
    "usage_from_mapping": "usage",
    # framing
    "LineFramer": "framing",
    "LineError": "framing",
    # validation
    "validate": "validation",
    "is_valid": "validation",
    "iter_errors": "validation",
    "load_schema": "validation",
    "message_types": "validation",
    "SCHEMA_FILES": "validation",
    "SCHEMA_VERSION": "validation",
    "PROTOCOL_VERSION": "validation",
    # errors
    "RunnerProtocolError": "errors",
    "SchemaValidationError": "errors",
    "UnknownMessageError": "errors",
    "ProtocolStateError": "errors",
    "AdapterError": "errors",
    "AdapterUnavailableError": "errors",
    "Violation": "errors",
    "DecodeError": "errors",
    "ConfigError": "errors",
    "ReducerError": "errors",
    "ContractError": "errors",
    "ResolutionRefused": "errors",
    "TransportError": "errors",
    "StoreError": "errors",
    "FencedError": "errors",
    "PanicError": "errors",
}

__all__ = [
    "__version__",
    "Hello",
    "TaskAssign",
    "TaskProgress",
    "TaskReportMessage",
    "TaskCancel",
    "Ping",
    "Pong",
    "MESSAGES",
    "encode",
    "decode",
    "to_frame",
    "ConnectionState",
    "TaskChannel",
    "OutboxLog",
    "InboxTracker",
    "is_sequenced",
    "RoleSpec",
    "TurnResult",
    "Session",
    "HarnessAdapter",
    "SubprocessAdapter",
    "SubprocessSession",
    "AgentSdkAdapter",
    "AgentSdkSession",
    "usage_from_anthropic",
    "usage_from_openai",
    "usage_from_mapping",
    "LineFramer",
    "LineError",
    "validate",
    "is_valid",
    "iter_errors",
    "load_schema",
    "message_types",
    "SCHEMA_FILES",
    "SCHEMA_VERSION",
    "PROTOCOL_VERSION",
    "RunnerProtocolError",
    "SchemaValidationError",
    "UnknownMessageError",
    "ProtocolStateError",
    "AdapterError",
    "AdapterUnavailableError",
    "Violation",
    "DecodeError",
    "ConfigError",
    "ReducerError",
    "ContractError",
    "ResolutionRefused",
    "TransportError",
    "StoreError",
    "FencedError",
    "PanicError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from .adapters import HarnessAdapter, RoleSpec, Session, TurnResult
    from .agent_sdk_adapter import AgentSdkAdapter, AgentSdkSession
    from .errors import (
        AdapterError,
        AdapterUnavailableError,
        ConfigError,
        ContractError,
        DecodeError,
        FencedError,
        PanicError,
        ProtocolStateError,
        ReducerError,
        ResolutionRefused,
        RunnerProtocolError,
        SchemaValidationError,
        StoreError,
        TransportError,
        UnknownMessageError,
        Violation,
    )
    from .framing import LineError, LineFramer
    from .messages import (
        MESSAGES,
        Hello,
        Ping,
        Pong,
        TaskAssign,
        TaskCancel,
        TaskProgress,
        TaskReportMessage,
    )
    from .subprocess_adapter import SubprocessAdapter, SubprocessSession
    from .state import ConnectionState, InboxTracker, OutboxLog, TaskChannel, is_sequenced
    from .transport import decode, encode, to_frame
    from .usage import usage_from_anthropic, usage_from_mapping, usage_from_openai
    from .validation import (
        PROTOCOL_VERSION,
        SCHEMA_FILES,
        SCHEMA_VERSION,
        is_valid,
        iter_errors,
        load_schema,
        message_types,
        validate,
    )
