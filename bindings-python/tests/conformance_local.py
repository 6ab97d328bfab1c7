"""Area ``local``: LocalRun through the public Python API (see conformance/README.md)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from conftest import json_equal
from stapel_runner_protocol import ProtocolStateError
from conformance_session import check_config
from stapel_runner_protocol.local import LocalRun


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _bytes(inp: Dict[str, Any], key: str) -> Optional[bytes]:
    if key in inp:
        return (json.dumps(inp[key], separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    if f"{key}_text" in inp:
        return str(inp[f"{key}_text"]).encode("utf-8")
    if f"{key}_hex" in inp:
        return bytes.fromhex(inp[f"{key}_hex"])
    return None


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("to_controller", "to_harness"):
        return {kind: json.loads(value)}
    if kind == "spawn":
        return {"spawn": {**value, "env": [list(p) for p in value["env"]]}}
    if kind == "close_harness_stdin":
        return {"close_harness_stdin": True}
    if kind in ("signal", "exit", "timeout"):
        return {kind: value}
    raise AssertionError(f"unknown output {kind}")


def _summary(o: Dict[str, Any]) -> str:
    if "to_controller" in o:
        msg = o["to_controller"]["message"]
        kind = msg.get("kind")
        if kind == "event":
            return f"event {msg['event'].get('eventType', '?')}"
        if kind == "command_receipt":
            return f"receipt {msg.get('commandId', '?')} {msg.get('status', '?')}"
        if kind == "diagnostic":
            return f"diagnostic {msg.get('level', '?')}"
        return "controller ?"
    if "to_harness" in o:
        return f"harness {o['to_harness'].get('type', '?')}"
    if "spawn" in o:
        return "spawn"
    if "close_harness_stdin" in o:
        return "close_harness_stdin"
    if "signal" in o:
        return f"signal {o['signal']['signal']}"
    if "exit" in o:
        return f"exit {o['exit']}"
    return "timeout none" if o["timeout"] is None else f"timeout {o['timeout']}"


def _projection(e: Dict[str, Any]) -> Dict[str, Any]:
    out = {"eventType": e.get("eventType")}
    for k in ("turnId", "itemId"):
        if k in e:
            out[k] = e[k]
    out["payload"] = e.get("payload")
    return out


def _feed(machine: LocalRun, now: int, inp: Dict[str, Any]) -> None:
    for key, method in (("controller", machine.controller_bytes),
                        ("harness", machine.harness_stdout), ("stderr", machine.harness_stderr)):
        data = _bytes(inp, key)
        if data is not None:
            method(now, data)
            return
    if "controller_eof" in inp:
        machine.controller_eof(now)
    elif "harness_spawned" in inp:
        machine.harness_spawned(now, inp["harness_spawned"]["pid"])
    elif "harness_spawn_failed" in inp:
        machine.harness_spawn_failed(now, inp["harness_spawn_failed"]["message"])
    elif "harness_exited" in inp:
        e = inp["harness_exited"]
        machine.harness_exited(now, e.get("code"), e.get("signal"))
    elif "timeout" in inp:
        machine.timeout(now)
    else:
        raise AssertionError(f"unknown input {inp}")


def run_local(vector: Dict[str, Any]) -> None:
    try:
        machine = LocalRun(vector.get("config", {}))
    except ProtocolStateError as e:  # a refused config (the core's code and key on it)
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    now = 0
    all_events: List[Dict[str, Any]] = []
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        now = int(inp.get("now_ms", now))
        error: Optional[str] = None
        try:
            _feed(machine, now, inp)
        except ProtocolStateError as e:
            error = e.code
        outputs = [_output_json(k, v) for k, v in machine.drain_outputs()]
        _eq(f"step {i} error", error, expect.get("error"))
        messages = [o["to_controller"]["message"] for o in outputs if "to_controller" in o]
        events = [m["event"] for m in messages if m.get("kind") == "event"]
        all_events.extend(events)
        checks: Dict[str, Callable[[], Any]] = {
            "outputs": lambda: outputs,
            "summary": lambda: [_summary(o) for o in outputs],
            "events": lambda: [_projection(e) for e in events],
            "receipts": lambda: [
                {k: m.get(k) for k in ("commandId", "controllerSeq", "status", "detail")}
                for m in messages if m.get("kind") == "command_receipt"
            ],
            "diagnostics": lambda: [
                {"level": m.get("level"), "message": m.get("message")}
                for m in messages if m.get("kind") == "diagnostic"
            ],
            "harness_commands": lambda: [o["to_harness"] for o in outputs if "to_harness" in o],
            "event_codes": lambda: [e["payload"]["code"] for e in events
                                    if isinstance(e.get("payload"), dict) and "code" in e["payload"]],
            "terminal": lambda: next((e["payload"] for e in events
                                      if e.get("eventType") == "run.terminal"), None),
            "all_event_types": lambda: [e.get("eventType") for e in all_events],
        }
        checked = False
        for key, got in checks.items():
            if key in expect:
                _eq(f"step {i} {key}", got(), expect[key])
                checked = True
        assert checked or "error" in expect, f"step {i}: expect checks nothing"
