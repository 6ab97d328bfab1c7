"""Area ``link``: ``RunnerLink`` / ``HubLink`` through the public Python API
(``stapel_runner_protocol.link``; see conformance/README.md, "Area ``link``")."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from conformance_session import check_config
from conftest import json_equal
from stapel_runner_protocol import ConfigError, Hello, ProtocolStateError, decode, encode
from stapel_runner_protocol.link import HubLink, RunnerLink

_VECTOR_KEYS = ("side", "hello", "seed")


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _event_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("hello", "received"):
        return {kind: encode(value)}
    if kind in ("inbound_gap", "outbound_resync"):
        return {kind: value}
    if kind == "peer_error":
        return {"peer_error": value["code"]}
    if kind == "connected":
        assert value is None
        return {"connected": True}
    if kind == "disconnected":
        assert isinstance(value, str)
        return {"disconnected": value}
    if kind == "reconnecting":
        return {"reconnecting": {"delay_ms": value["delay_ms"], "failures": value["failures"]}}
    if kind == "error":
        assert isinstance(value["detail"], str)
        error = {"code": value["code"]}
        if value["status"] is not None:
            error["status"] = value["status"]
        return {"error": error}
    if kind == "stalled":
        assert isinstance(value["detail"], str) and value["detail"]
        return {"stalled": {k: value[k] for k in ("bound", "kept_frames", "kept_bytes")}}
    if kind in ("unstalled", "stopped"):
        assert value is None
        return {kind: True}
    raise AssertionError(f"unknown event {kind} {value!r}")


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("connect", "pause", "resume", "abort"):
        return {kind: value}
    if kind == "send":
        socket, frame = value
        return {"send": {"socket": socket, "frame": frame}}
    if kind == "close":
        socket, code, reason = value
        return {"close": {"socket": socket, "code": code, "reason": reason}}
    if kind == "event":
        return {"event": _event_json(*value)}
    raise AssertionError(f"unknown output {kind} {value!r}")


def _close_args(v: Dict[str, Any]) -> Dict[str, Any]:
    return {"code": v.get("code", 1000), "reason": v.get("reason", "")}


def _feed(link: Union[RunnerLink, HubLink], now: int, inp: Dict[str, Any], i: int) -> None:
    if "configure" in inp:
        return
    if "start" in inp:
        link.start(now)
    elif "stop" in inp:
        link.stop(now, **_close_args(inp["stop"]))
    elif "opened" in inp:
        link.opened(now, inp["opened"])
    elif "connect_failed" in inp:
        v = inp["connect_failed"]
        link.connect_failed(now, v["socket"], v["failure"], status=v.get("status"),
                            detail=v.get("detail", ""))
    elif "attach" in inp:
        link.attach(now, inp["attach"])
    elif "close" in inp:
        link.close(now, **_close_args(inp["close"]))
    elif "frame" in inp:
        v = inp["frame"]
        if "text" in v:
            data: Union[str, bytes] = v["text"]
        elif "binary" in v:
            data = v["binary"].encode("utf-8")
        else:
            data = bytes.fromhex(v["binary_hex"])
        link.frame(now, v["socket"], data)
    elif "socket_closed" in inp:
        link.socket_closed(now, inp["socket_closed"])
    elif "failed" in inp:
        v = inp["failed"]
        link.failed(now, v["socket"], v.get("detail", ""))
    elif "events_taken" in inp:
        link.events_taken(now, inp["events_taken"])
    elif "confirm" in inp:
        c = inp["confirm"]
        link.confirm(now, c["task_id"], c.get("attempt"), c["seq"])
    elif "tick" in inp:
        link.tick(now)
    elif "send" in inp:
        message = decode(inp["send"])
        seq = link.send(now, message)  # type: ignore[arg-type]
        assert message.seq == seq  # type: ignore[union-attr]
    elif "resend" in inp:
        link.resend(now, decode(inp["resend"]))  # type: ignore[arg-type]
    elif "forget_task" in inp:
        link.forget_task(inp["forget_task"])
    else:
        raise AssertionError(f"step {i}: unknown input {inp}")


def run_link(vector: Dict[str, Any]) -> None:
    cfg = vector["config"]
    config = {k: v for k, v in cfg.items() if k not in _VECTOR_KEYS}
    link: Union[RunnerLink, HubLink]
    try:
        if cfg["side"] == "runner":
            hello = decode(cfg["hello"]) if "hello" in cfg else Hello(project_id="p-1",
                                                                       runner_version="0.1.0")
            assert isinstance(hello, Hello)
            link = RunnerLink(hello, config, seed=cfg.get("seed", 0))
        else:
            assert cfg["side"] == "hub", f"config.side {cfg['side']!r}"
            link = HubLink(config)
    except ConfigError as e:
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    now = 0
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step["expect"]
        now = int(inp.get("now", now))
        code: Optional[str] = None
        try:
            _feed(link, now, inp, i)
        except ProtocolStateError as e:
            code = e.code
        if code is None:
            assert "error" not in expect, f"step {i}: expected error {expect['error']}"
        else:
            assert "error" in expect, f"step {i}: unexpected error {code}"
            _eq(f"step {i} error", code, expect["error"])
        outputs: List[Dict[str, Any]] = [_output_json(k, v) for k, v in link.drain_outputs()]
        outputs.append({"timeout": link.poll_timeout()})
        if "outputs" in expect:
            _eq(f"step {i} outputs", outputs, expect["outputs"])
        if "config" in expect:
            _eq(f"step {i} config", link.config, expect["config"])
        if "phase" in expect:
            assert isinstance(link, RunnerLink), f"step {i}: phase is a runner expectation"
            _eq(f"step {i} phase", link.phase, expect["phase"])
        if "queued_events" in expect:
            _eq(f"step {i} queued_events", link.queued_events, expect["queued_events"])
        if "outbox_frames" in expect:
            _eq(f"step {i} outbox_frames", link.outbox_frames, expect["outbox_frames"])
        if "stats" in expect:
            stats = dict(link.stats, connected=link.is_connected)
            _eq(f"step {i} stats", stats, expect["stats"])
