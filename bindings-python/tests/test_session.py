"""Unit tests of the session machines' Python surface (the protocol itself is pinned
down by the `session` conformance vectors)."""

from __future__ import annotations

import json
from typing import Any, List, Sequence, Tuple

from stapel_runner_protocol import ConnectionState, Hello, TaskCancel, TaskProgress
from stapel_runner_protocol.session import HubSession, RunnerSession


def _frames(outputs: Sequence[Tuple[str, Any]]) -> List[Any]:
    return [json.loads(v) for k, v in outputs if k == "transmit"]


def _hello() -> Hello:
    return Hello(project_id="p-1", runner_version="0.1.0")


def test_runner_sends_a_barrier_ping_and_holds_provisional_frames() -> None:
    runner = RunnerSession(_hello(), ping_interval_ms=0, peer_timeout_ms=0)
    runner.connected(0)
    sent = _frames(runner.drain_outputs())
    assert [f["type"] for f in sent] == ["hello", "ping"] and sent[1].get("barrier") is True
    progress = TaskProgress(task_id="T", kind="k", attempt=1)
    runner.send(0, progress)
    assert progress.seq == 1 and runner.outbox_frames == 1
    assert _frames(runner.drain_outputs()) == []  # provisional until the barrier's pong
    runner.frame(0, json.dumps({"schema_version": 1, "type": "pong", "nonce": sent[1]["nonce"]}))
    assert [f["type"] for f in _frames(runner.drain_outputs())] == ["task.progress"]


def test_session_state_operations_act_on_the_sessions_own_state() -> None:
    runner = RunnerSession(_hello(), ping_interval_ms=0, peer_timeout_ms=0)
    runner.send(0, TaskProgress(task_id="T", kind="k", attempt=1))
    copy = runner.state
    assert copy.forget_task("T") and not runner.is_forgotten("T")  # `state` is a copy
    assert not runner.is_fully_acknowledged("T")
    assert runner.trim_through("T", 1, 1) == 1 and runner.outbox_frames == 0
    assert runner.is_fully_acknowledged("T")
    assert runner.forget_task("T") and runner.is_forgotten("T") and runner.state.is_forgotten("T")
    assert not runner.forget_task("T")


def test_new_bounds_are_keywords_of_both_machines() -> None:
    hub = HubSession(max_control_frame_bytes=4096, max_held_bytes=1024,
                     sequencing={"max_tombstones": 2})
    hub.send(0, TaskCancel(task_id="T", reason="r"))
    assert hub.forget_task("T") and hub.state.config["max_tombstones"] == 2
    RunnerSession(_hello(), max_control_frame_bytes=4096, max_held_bytes=1024)


def _hub_with_queued_command() -> HubSession:
    hub = HubSession(state=ConnectionState("hub"), ping_interval_ms=0, peer_timeout_ms=0)
    hub.connected(0)
    hub.frame(0, '{"schema_version":1,"type":"hello","protocol_version":1,'
                 '"project_id":"p","runner_version":"1"}')
    hub.send(0, TaskCancel(task_id="T", reason="r"))
    return hub


def test_disconnect_drops_queued_outputs() -> None:
    assert [k for k, _ in _hub_with_queued_command().drain_outputs()] == [
        "hello", "transmit", "timeout"]
    hub = _hub_with_queued_command()
    hub.disconnected(0)
    # The queued transmit is gone; the hello event is kept.
    assert [k for k, _ in hub.drain_outputs()] == ["hello", "timeout"]
    assert hub.outbox_frames == 1  # kept for replay after the next hello
