"""The session reducer (seed 002): folds canonical ``paperclip.prp.event.v1`` events into a
snapshot of one run and its session, in the Rust core. Live equals replay: the snapshot
depends only on the events applied, in order.

Shapes: ``SessionReducer(config: ReducerConfig)``, ``apply(event: CanonicalEvent) ->
ReduceOutcome``, ``snapshot() -> ReducerSnapshot``, ``delivery() -> DeliveryReport``.
"""

from __future__ import annotations

from ._native import SessionReducer
from ._types import (
    CanonicalEvent,
    DeliveryReport,
    OutOfOrderRecord,
    ReduceOutcome,
    ReducerConfig,
    ReducerCursor,
    ReducerGap,
    ReducerItem,
    ReducerLimits,
    ReducerRequest,
    ReducerSnapshot,
    ReducerTurn,
    RunView,
    SessionView,
)

__all__ = [
    "SessionReducer",
    "CanonicalEvent",
    "DeliveryReport",
    "OutOfOrderRecord",
    "ReduceOutcome",
    "ReducerConfig",
    "ReducerCursor",
    "ReducerGap",
    "ReducerItem",
    "ReducerLimits",
    "ReducerRequest",
    "ReducerSnapshot",
    "ReducerTurn",
    "RunView",
    "SessionView",
]
