"""Unit tests of ConnectionState and its views."""

from __future__ import annotations

import copy
import doctest
import json
import pickle
from typing import List, Tuple, Union

import pytest

import stapel_runner_protocol.state
from stapel_runner_protocol import (
    ConnectionState,
    Hello,
    InboxTracker,
    OutboxLog,
    Ping,
    ProtocolStateError,
    TaskAssign,
    TaskCancel,
    TaskChannel,
    TaskProgress,
    TaskReportMessage,
    decode,
    encode,
    is_sequenced,
)


def test_emit_stamps_the_given_object() -> None:
    hub = ConnectionState("hub")
    c = TaskCancel(task_id="T-1", reason="a")
    assert hub.emit(c) is c and c.seq == 1
    c2, frame = hub.emit_encoded(TaskCancel(task_id="T-1", reason="b"))
    assert c2.seq == 2 and frame == encode(c2)
    assert hub.emit(TaskCancel(task_id="T-2", reason="x")).seq == 1  # one stream per task
    assert (hub.outbox_frames, hub.stream_counts()) == (3, (2, 0))
    assert hub.outbox_bytes == sum(len(f.encode()) for (_, _, _, f) in hub.unacked())


@pytest.mark.parametrize(
    "role, message, code",
    [
        ("hub", Hello(project_id="p", runner_version="1"), "not_sequenced"),
        ("hub", TaskCancel(task_id="", reason="r"), "missing_task_id"),
        ("hub", TaskProgress(task_id="T", kind="state"), "role_cannot_emit"),
        ("runner", TaskAssign(task_id="T"), "role_cannot_emit"),
    ],
)
def test_emit_errors_leave_the_message_unchanged(role: str, message: object, code: str) -> None:
    state = ConnectionState(role)
    before = encode(message)  # type: ignore[arg-type]
    with pytest.raises(ProtocolStateError) as info:
        state.emit(message)  # type: ignore[call-overload]
    assert info.value.code == code
    assert encode(message) == before  # type: ignore[arg-type]
    assert state.outbox_frames == 0


def test_receive_duplicates_and_gaps() -> None:
    runner = ConnectionState("runner")

    def c(seq: int) -> TaskCancel:
        return TaskCancel(task_id="T-1", reason="r", seq=seq)

    assert runner.receive(c(1)) is True
    assert runner.receive(c(1)) is False
    assert runner.classify(c(3)) == "ahead"
    assert runner.receive_arrival(c(3)) == "ahead"
    assert runner.resume_map() == {"T-1": 1}
    assert runner.accept_in_order(c(2)) == "in_order"
    assert runner.resume_map() == {"T-1": 3}
    with pytest.raises(ProtocolStateError) as info:
        runner.receive(c(0))
    assert info.value.code == "invalid_seq"
    with pytest.raises(ProtocolStateError) as info:
        runner.receive(TaskProgress(task_id="T-1", seq=1))
    assert info.value.code == "wrong_direction"
    with pytest.raises(TypeError):
        runner.receive({"type": "task.cancel"})  # type: ignore[arg-type]


def test_receive_reads_only_the_sequencing_key() -> None:
    """receive/classify/accept_in_order look at (type, task_id, attempt, seq) only: the
    payload is neither converted nor checked (a container the core cannot encode is
    reported by encode/validate), and every sequencing error is the core's."""
    hub = ConnectionState("hub")
    payload = {"odd": {1, 2}}  # not JSON: encode() would reject it
    p = TaskProgress(task_id="T-1", kind="k", attempt=2, payload=payload, seq=1)
    assert hub.classify(p) == "in_order"
    assert hub.receive(p) is True and hub.receive(p) is False
    assert p.payload is payload
    assert hub.accept_in_order(TaskProgress(task_id="T-1", attempt=2, seq=3)) == "ahead"
    assert hub.receive(TaskReportMessage(task_id="T-1", attempt=2, seq=2)) is True
    assert hub.channel("T-1").inbound[2].last_seq == 2
    # attempt separates streams; commands are per task
    assert hub.receive(TaskProgress(task_id="T-1", attempt=3, seq=1)) is True
    runner = ConnectionState("runner")
    assert runner.receive(TaskAssign(task_id="T-1", seq=1, attempt=7)) is True
    assert runner.receive(TaskCancel(task_id="T-1", reason="r", seq=1)) is False
    cases: List[Tuple[ConnectionState, Union[Hello, Ping, TaskCancel, TaskProgress, TaskReportMessage], str]] = [
        (hub, TaskProgress(task_id="", seq=1), "missing_task_id"),
        (hub, TaskCancel(task_id="T", reason="r", seq=1), "wrong_direction"),
        (runner, TaskReportMessage(task_id="T", seq=1), "wrong_direction"),
        (hub, TaskProgress(task_id="T-1", attempt=2, seq=0), "invalid_seq"),
        (hub, TaskProgress(task_id="T-1", attempt=2, seq=10**6), "beyond_window"),
        (hub, Hello(project_id="p", runner_version="1"), "not_sequenced"),
        (runner, Ping(), "not_sequenced"),
    ]
    for state, message, code in cases:
        for call in (state.receive, state.classify, state.accept_in_order):
            with pytest.raises(ProtocolStateError) as info:
                call(message)
            assert info.value.code == code, (message, call)
    with pytest.raises(TypeError):
        hub.receive(object())  # type: ignore[arg-type]


def test_replay_and_ack() -> None:
    hub = ConnectionState("hub", max_outbox_frames=2)
    for r in "abc"[:2]:
        hub.emit(TaskCancel(task_id="T-1", reason=r))
    with pytest.raises(ProtocolStateError) as info:
        hub.emit(TaskCancel(task_id="T-1", reason="c"))
    assert info.value.code == "backpressure"
    report = hub.replay_report({"T-1": 1, "T-9": 0})
    assert report["streams"] == [{"task_id": "T-1", "frames": [
        '{"schema_version":1,"type":"task.cancel","task_id":"T-1","reason":"b","seq":2}'
    ]}]
    assert report["unknown"] == ["T-9"] and report["resync"] == [] and report["peer_ahead"] == []
    assert hub.outbox_frames == 1  # the declaration acknowledged seq 1
    assert hub.ack("T-1", None, 2) == 1 and hub.outbox_frames == 0
    assert hub.replay_for({"T-1": 0}) == {}
    assert hub.replay_from() == [{"task_id": "T-1", "seq": 3}]
    with pytest.raises(ValueError):
        hub.replay_for({"T-1": -1})


def test_views() -> None:
    runner = ConnectionState("runner")
    runner.emit(TaskProgress(task_id="T", kind="state", attempt=2))
    runner.receive(TaskCancel(task_id="T", reason="r", seq=2))
    ch = runner.channel("T")
    assert isinstance(ch, TaskChannel) and ch.task_id == "T"
    out = ch.outbound[2]
    assert isinstance(out, OutboxLog) and (out.last_seq, out.next_seq, out.first_available) == (1, 2, 1)
    assert [m.seq for m in out.since(0)] == [1] and out.frames()[0][0] == 1
    inb = ch.inbound[None]
    assert isinstance(inb, InboxTracker) and (inb.last_seq, inb.ahead, inb.has_received) == (0, [2], True)
    assert ch.last_received == 0
    assert list(runner.channels) == ["T"]
    assert runner.channel("unknown").outbound == {}
    with pytest.raises(ProtocolStateError) as info:
        runner.channel("")
    assert info.value.code == "missing_task_id" and "task_id" in str(info.value)
    assert out.since(1) == [] and out.since(99) == []
    assert runner.ack_positions() == []
    assert runner.skip_to("T", None, 2) == (1, 1)
    assert runner.ack_positions() == [{"task_id": "T", "seq": 2}]
    assert runner.forget_task("T") and not runner.forget_task("T")


def test_snapshot_restore() -> None:
    hub = ConnectionState("hub", inbound_window=8)
    hub.emit(TaskCancel(task_id="T", reason="r"))
    hub.receive(TaskProgress(task_id="T", seq=1, kind="k", attempt=1))
    data = hub.snapshot()
    assert data.startswith(b"stapel-seq-snapshot/1\n")
    back = ConnectionState.restore(data)
    assert back == hub and back.snapshot() == data and back.config["inbound_window"] == 8
    assert back != ConnectionState("hub")
    for bad, code in [(b"nope", "not_a_snapshot"), (b"stapel-seq-snapshot/9\n{}", "unsupported_snapshot_version"),
                      (b"stapel-seq-snapshot/1\n{", "corrupt_snapshot")]:
        with pytest.raises(ProtocolStateError) as info:
            ConnectionState.restore(bad)
        assert info.value.code == code
    with pytest.raises(ValueError):
        ConnectionState("")


def test_is_sequenced_and_copying() -> None:
    assert is_sequenced(TaskCancel()) and is_sequenced("task.progress")
    assert not is_sequenced(Hello()) and not is_sequenced("ping") and not is_sequenced(object())
    m = decode('{"type":"task.progress","task_id":"T","seq":1,"kind":"k","payload":{"a":[1]},"z":1}')
    for clone in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert clone == m and clone is not m and type(clone) is type(m)


def test_module_doctest() -> None:
    result = doctest.testmod(stapel_runner_protocol.state)
    assert result.attempted > 0 and result.failed == 0


def test_session_module_doctest() -> None:
    import stapel_runner_protocol.session

    result = doctest.testmod(stapel_runner_protocol.session)
    assert result.attempted > 0 and result.failed == 0


def test_emit_keeps_decoded_containers() -> None:
    runner = ConnectionState("runner", max_outbox_frames=1)
    m = decode('{"type":"task.progress","task_id":"T","kind":"k","payload":{"a":1},"z":2}')
    assert isinstance(m, TaskProgress)
    runner.emit(m)
    assert (m.seq, m.payload, m.extra) == (1, {"a": 1}, {"z": 2})
    again = decode('{"type":"task.progress","task_id":"T","kind":"k","payload":{"b":2}}')
    assert isinstance(again, TaskProgress)
    with pytest.raises(ProtocolStateError):
        runner.emit(again)  # backpressure: the message comes back unchanged
    assert (again.seq, again.payload) == (0, {"b": 2})


def test_trim_through_never_restamps_or_creates() -> None:
    hub = ConnectionState("hub")
    for r in "abc":
        hub.emit(TaskCancel(task_id="T-1", reason=r))
    assert not hub.is_ahead("T-1", None, 3) and hub.is_ahead("T-1", None, 4)
    assert hub.trim_through("T-1", None, 2) == 2 and hub.outbox_frames == 1
    assert hub.trim_through("T-1", None, 9) == 1 and hub.outbox_frames == 0
    assert hub.emit(TaskCancel(task_id="T-1", reason="d")).seq == 4  # numbering kept
    assert hub.trim_through("T-2", None, 5) == 0 and hub.stream_counts() == (1, 0)
    # An ack beyond the last emitted seq is a peer ahead of this state: it moves
    # numbering (and creates an unknown stream), unlike trim_through.
    assert hub.ack("T-2", None, 5) == 0 and hub.stream_counts() == (2, 0)
    assert hub.emit(TaskCancel(task_id="T-2", reason="e")).seq == 6


def test_provisional_frames_are_restamped_then_confirmed() -> None:
    runner = ConnectionState("runner")
    assert runner.is_confirmed
    runner.mark_unconfirmed()
    assert not runner.is_confirmed
    for kind in ("a", "b"):
        runner.emit(TaskProgress(task_id="T", kind=kind, attempt=1))
    log = runner.channel("T").outbound[1]
    assert (log.unconfirmed_from, log.is_confirmed, log.next_seq) == (1, False, 3)
    # The peer has seen seq 1 (from a state this one lost): both provisional frames are
    # re-stamped after it, none is dropped.
    assert runner.is_ahead("T", 1, 1)
    assert runner.ack("T", 1, 1) == 0
    kept = [(s, json.loads(f)["seq"], json.loads(f)["kind"]) for (_, _, s, f) in runner.unacked()]
    assert kept == [(2, 2, "a"), (3, 3, "b")]
    runner.confirm_all()
    log = runner.channel("T").outbound[1]
    assert runner.is_confirmed and log.is_confirmed and log.unconfirmed_from == log.next_seq == 4
    assert runner.ack("T", 1, 3) == 2 and runner.is_fully_acknowledged("T")


def test_forget_task_keeps_bounded_tombstones() -> None:
    runner = ConnectionState("runner", max_tombstones=1)
    assert runner.config["max_tombstones"] == 1
    runner.receive(TaskCancel(task_id="T-1", reason="r", seq=1))
    runner.emit(TaskProgress(task_id="T-1", kind="k", attempt=1))
    assert not runner.is_fully_acknowledged("T-1")
    assert runner.forget_task("T-1") and runner.is_forgotten("T-1")
    assert runner.forgotten_count == 1 and runner.is_fully_acknowledged("T-1")
    assert runner.outbox_frames == 0 and runner.resume_map() == {}
    # A late or replayed frame of the forgotten task is a duplicate.
    assert runner.receive_arrival(TaskCancel(task_id="T-1", reason="r", seq=1)) == "duplicate"
    assert not runner.forget_task("T-9") and runner.forgotten_count == 1
    runner.receive(TaskCancel(task_id="T-2", reason="r", seq=1))
    assert runner.forget_task("T-2")  # evicts the oldest tombstone
    assert runner.is_forgotten("T-2") and not runner.is_forgotten("T-1")
    assert runner.forgotten_count == 1
    back = ConnectionState.restore(runner.snapshot())
    assert back == runner and back.is_forgotten("T-2")


def test_last_received_matches_resume_map_after_forget_and_revive() -> None:
    hub = ConnectionState("hub")
    hub.receive(TaskProgress(task_id="T", kind="state", attempt=1, seq=1))
    hub.receive(TaskProgress(task_id="T", kind="state", attempt=2, seq=2))  # ahead
    assert hub.resume_map() == {"T": 0} and hub.channel("T").last_received == 0
    assert hub.forget_task("T")
    # Above the tombstone of attempt 1: revives both streams; attempt 2 comes back
    # with nothing received, so attempt 1 answers for the task.
    assert hub.receive_arrival(TaskProgress(task_id="T", kind="state", attempt=1, seq=2)) == "in_order"
    assert hub.resume_map() == {"T": 2}
    assert hub.channel("T").last_received == 2
    assert hub.channel("T").inbound[2].has_received is False
