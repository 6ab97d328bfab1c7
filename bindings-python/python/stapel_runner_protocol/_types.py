"""Typed shapes of the JSON-form values the sequencing API returns."""

from __future__ import annotations

from typing import List, TypedDict

__all__ = ["Position", "StreamReplay", "Resync", "ReplayReport"]


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
