"""Area ``host``: the connection host policy (``SocketHost``, ``HubHost``) through the
public Python API (see conformance/README.md, "Area ``host``")."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from conftest import json_equal
from stapel_runner_protocol import ConfigError, ProtocolStateError
from stapel_runner_protocol._native import bearer_authorization, host_config
from stapel_runner_protocol.transport_ws import HubHost, SocketHost

_INPUT_KEYS = {"now", "poll", "opened", "text", "binary", "binary_hex", "transmit",
               "session_close", "close", "failed", "socket_closed", "timeout", "request",
               "upgraded", "authenticated", "runner_added", "parse_config",
               "authorization_for"}
_EXPECT_KEYS = {"outputs", "error", "timeout", "state", "runners", "pending", "value",
                "config", "config_error"}


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _socket_output(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("attach", "detach", "abort"):
        return {kind: True}
    if kind in ("deliver", "send"):
        return {kind: value}
    if kind == "peer_error":
        return {"peer_error": value["code"]}
    if kind == "close":
        code, reason, deadline = value
        return {"close": {"code": code, "reason": reason, "deadline": deadline}}
    raise AssertionError(f"unknown socket output {kind} {value!r}")


def _hub_output(kind: str, value: Any) -> Dict[str, Any]:
    if kind == "authenticate":
        conn, token = value
        return {"authenticate": {"conn": conn, "token": token}}
    if kind == "accept":
        conn, runner_id = value
        return {"accept": {"conn": conn, "runner_id": runner_id}}
    if kind == "reject":
        conn, status, body, refusal = value
        return {"reject": {"conn": conn, "status": status, "body": body, "refusal": refusal}}
    if kind == "refuse":
        conn, code, reason, refusal = value
        return {"refuse": {"conn": conn, "code": code, "reason": reason, "refusal": refusal}}
    if kind == "attach":
        conn, runner_id, announce = value
        return {"attach": {"conn": conn, "runner_id": runner_id, "announce": announce}}
    if kind == "evict":
        return {"evict": value}
    raise AssertionError(f"unknown hub output {kind} {value!r}")


def _headers(v: Dict[str, Any]) -> List[Tuple[str, str]]:
    return [(name, value) for name, value in v.get("headers", [])]


def _activity(a: Dict[str, Any]) -> Tuple[str, int, int, int, int, bool]:
    return (a["runner_id"], a.get("sockets", 0), a.get("kept_frames", 0),
            a.get("queued_events", 0), a.get("waiting_readers", 0),
            bool(a.get("awaiting_accept", False)))


def _feed_socket(m: SocketHost, now: int, inp: Dict[str, Any]) -> None:
    if "opened" in inp:
        m.opened(now)
    elif "text" in inp:
        m.frame(now, inp["text"])
    elif "binary" in inp:
        m.frame(now, inp["binary"].encode("utf-8"))
    elif "binary_hex" in inp:
        m.frame(now, bytes.fromhex(inp["binary_hex"]))
    elif "transmit" in inp:
        m.transmit(now, inp["transmit"])
    elif "session_close" in inp:
        m.session_close(now, inp["session_close"])
    elif "close" in inp:
        m.close(now, inp["close"].get("code", 1000), inp["close"].get("reason", ""))
    elif "failed" in inp:
        m.failed(now)
    elif "socket_closed" in inp:
        m.socket_closed(now)
    elif "timeout" in inp:
        m.timeout(now)
    else:
        raise AssertionError(f"unknown socket input {inp}")


def _feed_hub(m: HubHost, now: int, inp: Dict[str, Any]) -> None:
    if "request" in inp:
        m.request(now, inp["request"]["conn"], _headers(inp["request"]))
    elif "upgraded" in inp:
        m.upgraded(now, inp["upgraded"]["conn"], _headers(inp["upgraded"]))
    elif "authenticated" in inp:
        a = inp["authenticated"]
        m.authenticated(now, a["conn"], a.get("runner_id"))
    elif "runner_added" in inp:
        r = inp["runner_added"]
        m.runner_added(now, r["runner_id"], [_activity(a) for a in r["activity"]])
    elif "timeout" in inp:
        m.timeout(now)
    else:
        raise AssertionError(f"unknown hub input {inp}")


def run_host(vector: Dict[str, Any]) -> None:
    config = dict(vector.get("config", {}))
    kind = config.pop("machine", None)
    machine: Union[SocketHost, HubHost]
    if kind == "socket":
        machine = SocketHost(config)
    elif kind == "hub":
        machine = HubHost(config)
    else:
        raise AssertionError(f"config.machine must be socket or hub, not {kind!r}")
    now = 0
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        assert set(inp) <= _INPUT_KEYS, f"step {i}: unknown input keys {set(inp) - _INPUT_KEYS}"
        assert set(expect) <= _EXPECT_KEYS, f"step {i}: unknown expect keys"
        if "authorization_for" in inp:
            assert "value" in expect, f"step {i}: authorization_for needs expect.value"
            _eq(f"step {i} value", bearer_authorization(inp["authorization_for"]),
                expect["value"])
            continue
        assert "value" not in expect, f"step {i}: value is an authorization_for expectation"
        if "parse_config" in inp:
            # The parsed config as the core describes it, or the refusal's code and key
            # (raised by the public SocketHost as by host_config); nothing is fed to the
            # machine.
            assert set(expect) <= {"config", "config_error"}, \
                f"step {i}: {set(expect)} are not parse_config expectations"
            try:
                SocketHost(inp["parse_config"])
                got = host_config(inp["parse_config"])
            except ConfigError as e:
                assert "config_error" in expect, f"step {i}: unexpected config error {e.code}"
                _eq(f"step {i} config_error", {"code": e.code, "key": getattr(e, "key", None)},
                    expect["config_error"])
                continue
            assert "config" in expect, f"step {i}: parse_config succeeded, expected {expect}"
            _eq(f"step {i} config", got, expect["config"])
            continue
        assert "config" not in expect and "config_error" not in expect, \
            f"step {i}: config and config_error are parse_config expectations"
        now = inp.get("now", now)
        poll = inp.get("poll", True)
        error: Optional[str] = None
        outputs: List[Dict[str, Any]] = []
        try:
            if isinstance(machine, SocketHost):
                _feed_socket(machine, now, inp)
            else:
                _feed_hub(machine, now, inp)
        except ProtocolStateError as e:
            error = e.code
        if poll:
            if isinstance(machine, SocketHost):
                outputs = [_socket_output(k, v) for k, v in machine.drain_outputs()]
            else:
                outputs = [_hub_output(k, v) for k, v in machine.drain_outputs()]
        _eq(f"step {i} error", error, expect.get("error"))
        if poll:
            _eq(f"step {i} outputs", outputs, expect.get("outputs", []))
        else:
            assert "outputs" not in expect, f"step {i}: outputs expected with poll: false"
        if "timeout" in expect:
            _eq(f"step {i} timeout", machine.poll_timeout(), expect["timeout"])
        if "state" in expect:
            assert isinstance(machine, SocketHost), f"step {i}: state is a socket expectation"
            _eq(f"step {i} state", machine.state, expect["state"])
        if "runners" in expect:
            assert isinstance(machine, HubHost), f"step {i}: runners is a hub expectation"
            _eq(f"step {i} runners", machine.runners, expect["runners"])
        if "pending" in expect:
            assert isinstance(machine, HubHost), f"step {i}: pending is a hub expectation"
            _eq(f"step {i} pending", machine.pending_connections, expect["pending"])
