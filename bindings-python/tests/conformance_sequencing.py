"""Area ``sequencing``: one ConnectionState per vector, driven through the public API
(see conformance/README.md)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from conftest import json_equal
from stapel_runner_protocol import (
    ConnectionState,
    InboxTracker,
    OutboxLog,
    ProtocolStateError,
    decode,
    encode,
)


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _error(i: int, code: Optional[str], expect: Dict[str, Any]) -> None:
    if code is None:
        assert "error" not in expect, f"step {i}: expected error {expect['error']}, got success"
    else:
        assert "error" in expect, f"step {i}: unexpected error {code}"
        _eq(f"step {i} error", code, expect["error"])


def _bytes(inp: Dict[str, Any], key: str) -> Optional[bytes]:
    if key in inp:
        return str(inp[key]).encode("utf-8")
    if f"{key}_hex" in inp:
        return bytes.fromhex(inp[f"{key}_hex"])
    return None


def _standalone_outbox(spec: Dict[str, Any]) -> List[Any]:
    """``outbox_log``: one standalone ``OutboxLog``, the result of every op in order."""
    bounds = {k: spec[k] for k in ("max_frames", "max_bytes") if k in spec}
    log = OutboxLog(**bounds)
    results: List[Any] = []
    for op in spec["ops"]:
        if "emit" in op:
            msg = decode(op["emit"])
            before = (encode(msg), getattr(msg, "seq", None))
            try:
                stamped = log.emit(msg)
                assert stamped is msg, "emit must return the object it was given"
                results.append({"frame": encode(stamped)})
            except ProtocolStateError as e:
                assert (encode(msg), getattr(msg, "seq", None)) == before, "emit error changed the message"
                results.append({"error": e.code})
        elif "ack" in op:
            kept = len(log.since(0))
            assert log.ack(op["ack"]) is None  # type: ignore[func-returns-value]
            results.append({"dropped": kept - len(log.since(0))})
        elif "since" in op:
            try:
                results.append({"frames": [encode(m) for m in log.since(op["since"])]})
            except ProtocolStateError as e:
                results.append({"error": e.code})
        elif "last_seq" in op:
            results.append({"value": log.last_seq})
        else:
            raise AssertionError(f"unknown outbox_log op {op}")
    return results


def _standalone_inbox(spec: Dict[str, Any]) -> Tuple[List[Any], int]:
    """``inbox_tracker``: one standalone ``InboxTracker``; every arrival and the final
    high-water mark."""
    tracker = InboxTracker(**({"window": spec["window"]} if "window" in spec else {}))
    arrivals: List[Any] = []
    for seq in spec["receive"]:
        try:
            arrivals.append(tracker.receive_arrival(seq))
        except ProtocolStateError as e:
            arrivals.append({"error": e.code})
    return arrivals, tracker.last_seq


def run_sequencing(vector: Dict[str, Any]) -> None:
    config = dict(vector["config"])
    role = config.pop("role")
    state = ConnectionState(role, **config)
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        code: Optional[str] = None
        if "emit" in inp:
            msg = decode(inp["emit"])
            before = (encode(msg), getattr(msg, "seq", None))
            try:
                stamped = state.emit(msg)
                assert stamped is msg, "emit must return the object it was given"
                if "frame" in expect:
                    _eq(f"step {i} frame", encode(stamped), expect["frame"])
            except ProtocolStateError as e:
                code = e.code
                assert (encode(msg), getattr(msg, "seq", None)) == before, "emit error changed the message"
            _error(i, code, expect)
        elif "receive" in inp or "classify" in inp:
            msg = decode(inp.get("receive", inp.get("classify")))
            try:
                if "receive" in inp:
                    arrival = state.receive_arrival(msg)
                else:
                    arrival = state.classify(msg)
                if "arrival" in expect:
                    _eq(f"step {i} arrival", arrival, expect["arrival"])
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        elif "resume_map" in inp:
            _eq(f"step {i} resume_map", state.resume_map(), expect["resume_map"])
        elif "replay_for" in inp:
            _eq(f"step {i} replay", state.replay_report(inp["replay_for"]), expect["replay"])
        elif "replay_positions" in inp:
            got = state.replay_positions(inp["replay_positions"])
            _eq(f"step {i} replay", got, expect["replay"])
        elif "ack" in inp:
            p = inp["ack"]
            try:
                dropped = state.ack(p["task_id"], p.get("attempt"), p["seq"])
                _eq(f"step {i} dropped", dropped, expect["dropped"])
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        elif "trim_through" in inp:
            p = inp["trim_through"]
            _eq(f"step {i} dropped",
                state.trim_through(p["task_id"], p.get("attempt"), p["seq"]), expect["dropped"])
        elif "mark_unconfirmed" in inp:
            state.mark_unconfirmed()
            assert not state.is_confirmed, f"step {i}: still confirmed after mark_unconfirmed"
        elif "confirm_all" in inp:
            state.confirm_all()
            assert state.is_confirmed, f"step {i}: not confirmed after confirm_all"
        elif "is_fully_acknowledged" in inp:
            _eq(f"step {i} value", state.is_fully_acknowledged(inp["is_fully_acknowledged"]),
                expect["value"])
        elif "last_received" in inp:
            _eq(f"step {i} value", state.channel(inp["last_received"]).last_received,
                expect["value"])
        elif "is_forgotten" in inp:
            _eq(f"step {i} value", state.is_forgotten(inp["is_forgotten"]), expect["value"])
        elif "skip_to" in inp:
            p = inp["skip_to"]
            try:
                gap = state.skip_to(p["task_id"], p.get("attempt"), p["seq"])
                _eq(f"step {i} gap", list(gap) if gap else None, expect.get("gap"))
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        elif "ack_positions" in inp:
            _eq(f"step {i} positions", state.ack_positions(), expect["positions"])
        elif "replay_from" in inp:
            _eq(f"step {i} positions", state.replay_from(), expect["positions"])
        elif "unacked" in inp:
            frames: List[str] = [f for (_, _, _, f) in state.unacked()]
            _eq(f"step {i} frames", frames, expect["frames"])
        elif "forget_task" in inp:
            _eq(f"step {i} known", state.forget_task(inp["forget_task"]), expect["known"])
        elif "channel" in inp:
            try:
                ch = state.channel(inp["channel"])
                _eq(f"step {i} channel",
                    {"outbound": len(ch.outbound), "inbound": len(ch.inbound),
                     "last_received": ch.last_received}, expect["channel"])
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        elif "outbox_since" in inp:
            p = inp["outbox_since"]
            logs = state.channel(p["task_id"]).outbound
            assert p.get("attempt") in logs, f"step {i}: no outbound stream {p}"
            try:
                msgs = logs[p.get("attempt")].since(p["seq"])
                _eq(f"step {i} frames", [encode(m) for m in msgs], expect["frames"])
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        elif "outbox_log" in inp:
            _eq(f"step {i} results", _standalone_outbox(inp["outbox_log"]), expect["results"])
        elif "inbox_tracker" in inp:
            arrivals, last_seq = _standalone_inbox(inp["inbox_tracker"])
            _eq(f"step {i} arrivals", arrivals, expect["arrivals"])
            _eq(f"step {i} last_seq", last_seq, expect["last_seq"])
        elif "snapshot_roundtrip" in inp:
            data = state.snapshot()
            restored = ConnectionState.restore(data)
            assert restored == state, f"step {i}: restored state differs"
            assert restored.snapshot() == data, f"step {i}: re-snapshot differs"
            state = restored
        elif _bytes(inp, "restore") is not None:
            try:
                state = ConnectionState.restore(_bytes(inp, "restore") or b"")
            except ProtocolStateError as e:
                code = e.code
            _error(i, code, expect)
        else:
            raise AssertionError(f"step {i}: unknown input {inp}")
        if "outbox" in expect:
            _eq(f"step {i} outbox",
                {"frames": state.outbox_frames, "bytes": state.outbox_bytes}, expect["outbox"])
        if "streams" in expect:
            out, inb = state.stream_counts()
            _eq(f"step {i} streams", {"outbound": out, "inbound": inb}, expect["streams"])
        if "confirmed" in expect:
            _eq(f"step {i} confirmed", state.is_confirmed, expect["confirmed"])
