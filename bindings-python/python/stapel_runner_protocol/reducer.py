"""The session reducer (seed 002): folds canonical ``paperclip.prp.event.v1`` events into a
snapshot of one run and its session, in the Rust core. Live equals replay: the snapshot
depends only on the events applied, in order.
"""

from __future__ import annotations

from ._native import SessionReducer

__all__ = ["SessionReducer"]
