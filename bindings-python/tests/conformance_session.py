"""Area ``session``: HubSession / RunnerSession through the public Python API (see
conformance/README.md)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from conftest import json_equal
from stapel_runner_protocol import (ConfigError, ConnectionState, Hello, ProtocolStateError,
                                    StoreError, decode, encode)
from stapel_runner_protocol.session import HubSession, RunnerSession
from stapel_runner_protocol.store import RowTracker, close_for

_CONFIG_KEYS = ("validate", "ping_interval_ms", "peer_timeout_ms", "ack_every_frames",
                "ack_delay_ms", "max_ack_entries", "max_control_frame_bytes",
                "max_held_frames", "max_held_bytes", "min_protocol_version",
                "max_protocol_version", "max_line_bytes", "sequencing",
                "probe_every_frames", "durable_acks")


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def check_config(vector: Dict[str, Any], refused: Optional[BaseException]) -> bool:
    """The configuration outcome every area runner checks before its steps (see
    conformance/README.md, "Configuration errors"): ``refused`` is the exception building
    the machine from ``config`` raised (``None``: accepted). A vector whose first step
    expects ``config_error`` must be refused with exactly that ``code`` and ``key``; any
    other vector must be accepted. ``True``: the vector is done."""
    steps = vector.get("steps") or [{}]
    want = steps[0].get("expect", {}).get("config_error")
    if refused is None:
        assert want is None, f"config accepted, expected config_error {want}"
        return False
    got = {"code": getattr(refused, "code", None), "key": getattr(refused, "key", None)}
    assert want is not None, f"config refused: {got} ({refused})"
    _eq("config_error", got, want)
    return True


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("transmit", "close", "timeout"):
        return {kind: value}
    if kind in ("hello", "received"):
        return {"event": {kind: encode(value)}}
    if kind in ("inbound_gap", "outbound_resync"):
        return {"event": {kind: value}}
    if kind == "peer_error":
        return {"event": {"peer_error": value["code"]}}
    raise AssertionError(f"unknown output {kind}")


def run_session(vector: Dict[str, Any]) -> None:
    cfg = vector["config"]
    unknown = set(cfg) - set(_CONFIG_KEYS) - {"side", "hello"}
    assert not unknown, f"config keys this runner does not know: {sorted(unknown)}"
    kwargs: Dict[str, Any] = {k: cfg[k] for k in _CONFIG_KEYS if k in cfg}
    session: Union[HubSession, RunnerSession]
    hello: Any = None
    if cfg["side"] != "hub":
        hello = decode(cfg["hello"]) if "hello" in cfg else Hello(project_id="p-1",
                                                                   runner_version="0.1.0")
        assert isinstance(hello, Hello)
    try:
        session = HubSession(**kwargs) if hello is None else RunnerSession(hello, **kwargs)
    except ConfigError as e:  # a refused config (the core's code and key on it)
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    now = 0
    saved: Optional[bytes] = None
    # Area `store`: what the store holds of the hub (see conformance/README.md).
    tracker = RowTracker()
    writes: Optional[List[Dict[str, Any]]] = None
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        now = int(inp.get("now", now))
        code = None
        try:
            if "rows" in inp or "close_for" in inp:
                pass  # read by the expectations below
            elif "writes" in inp:
                assert isinstance(session, HubSession), f"step {i}: writes on a runner"
                writes = tracker.writes(session)
                if inp["writes"] == "failed":
                    tracker.failed()
                else:
                    tracker.committed()
            elif "from_rows" in inp:
                assert isinstance(session, HubSession), f"step {i}: from_rows on a runner"
                rows = session.rows() if inp["from_rows"] is True else inp["from_rows"]
                session = HubSession.from_rows(rows, {k: cfg[k] for k in kwargs})
                tracker = RowTracker(rows)
            elif "connected" in inp:
                session.connected(now)
            elif "disconnected" in inp:
                session.disconnected(now)
            elif "tick" in inp:
                session.tick(now)
            elif "frame" in inp:
                session.frame(now, inp["frame"])
            elif "bytes" in inp or "bytes_hex" in inp:
                data = (inp["bytes"].encode("utf-8") if "bytes" in inp
                        else bytes.fromhex(inp["bytes_hex"]))
                session.bytes(now, data)
            elif "send" in inp:
                session.send(now, decode(inp["send"]))  # type: ignore[arg-type]
            elif "resend" in inp:
                session.resend(now, decode(inp["resend"]))  # type: ignore[arg-type]
            elif "save_snapshot" in inp:
                saved = session.state.snapshot()
            elif "forget_task" in inp:
                session.forget_task(inp["forget_task"])
            elif "confirm" in inp:
                c = inp["confirm"]
                session.confirm(now, c["task_id"], c.get("attempt"), c["seq"])
            elif "restart" in inp:
                how = inp["restart"]
                if how is True:
                    # Persist, drop and restore the state into a new session.
                    state = ConnectionState.restore(session.state.snapshot())
                elif how == "saved":
                    assert saved is not None, f"step {i}: restart \"saved\" without save_snapshot"
                    state = ConnectionState.restore(saved)
                elif how == "fresh":
                    # A restart that lost its state.
                    state = ConnectionState(cfg["side"], **cfg.get("sequencing", {}))
                else:
                    raise AssertionError(f"step {i}: unknown restart {how!r}")
                if isinstance(session, HubSession):
                    session = HubSession(state=state, **kwargs)
                else:
                    session = RunnerSession(hello, state=state, **kwargs)
            else:
                raise AssertionError(f"step {i}: unknown input {inp}")
        except (ProtocolStateError, StoreError) as e:
            code = e.code
        if code is None:
            assert "error" not in expect, f"step {i}: expected error {expect['error']}"
        else:
            assert "error" in expect, f"step {i}: unexpected error {code}"
            _eq(f"step {i} error", code, expect["error"])
        if inp.get("poll") is False:
            # Outputs stay queued for a later step (e.g. to be dropped by `disconnected`).
            assert "outputs" not in expect, f"step {i}: outputs expected without polling"
        else:
            outputs: List[Dict[str, Any]] = [_output_json(k, v)
                                             for k, v in session.drain_outputs()]
            if "outputs" in expect:
                _eq(f"step {i} outputs", outputs, expect["outputs"])
        if "rows" in expect:
            assert isinstance(session, HubSession), f"step {i}: rows on a runner"
            _eq(f"step {i} rows", session.rows(), expect["rows"])
        if "writes" in expect:
            assert writes is not None, f"step {i}: writes expected without a writes input"
            _eq(f"step {i} writes", writes, expect["writes"])
            writes = None
        if "close" in expect:
            _eq(f"step {i} close", list(close_for(inp["close_for"])), expect["close"])
        if "resume_map" in expect:
            _eq(f"step {i} resume_map", session.resume_map(), expect["resume_map"])
        if "outbox_frames" in expect:
            _eq(f"step {i} outbox_frames", session.outbox_frames, expect["outbox_frames"])
