"""The local-run machine (seed 002) in the Rust core: the runner side of the
``paperclip`` local runner protocol — controller commands and receipts, harness
supervision as actions (spawn, signal, close stdin, exit), canonical events with
deterministic ids, terminal reconciliation. The host performs the I/O.

Shapes: ``LocalRun(config: LocalConfig)``; its ``("spawn", SpawnAction)`` and
``("signal", SignalAction)`` outputs.
"""

from __future__ import annotations

from ._native import LocalRun
from ._types import LocalConfig, SignalAction, SpawnAction

__all__ = ["LocalRun", "LocalConfig", "SpawnAction", "SignalAction"]
