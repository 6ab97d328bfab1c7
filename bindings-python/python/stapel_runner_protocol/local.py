"""The local-run machine (seed 002) in the Rust core: the runner side of the
``paperclip`` local runner protocol — controller commands and receipts, harness
supervision as actions (spawn, signal, close stdin, exit), canonical events with
deterministic ids, terminal reconciliation. The host performs the I/O.
"""

from __future__ import annotations

from ._native import LocalRun

__all__ = ["LocalRun"]
