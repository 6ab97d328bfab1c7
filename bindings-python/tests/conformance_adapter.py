"""Area ``adapter``: RoleSpec, TurnResult, usage mapping and the subprocess JSONL turn
machine, through the public Python API."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

from conftest import json_equal
from stapel_runner_protocol import (
    AdapterError,
    RoleSpec,
    TurnResult,
    usage_from_anthropic,
    usage_from_mapping,
    usage_from_openai,
)
from stapel_runner_protocol import _native
from stapel_runner_protocol.adapters import SubprocessTurnMachine
from stapel_runner_protocol.agent_sdk_adapter import agent_options, turn_text, turn_usage

USAGE = {"anthropic": usage_from_anthropic, "openai": usage_from_openai,
         "mapping": usage_from_mapping}


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _check_error(i: int, err: Optional[AdapterError], expect: Dict[str, Any]) -> None:
    if err is None:
        assert "error" not in expect, f"step {i}: expected error {expect['error']}"
        return
    assert "error" in expect, f"step {i}: unexpected error {err.code}: {err}"
    for key, want in expect["error"].items():
        _eq(f"step {i} error.{key}", err.details.get(key), want)


def _as_object(value: Any) -> Any:
    """Usage as an SDK-style object: every key an attribute (nested objects too)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _as_object(v) for k, v in value.items()})
    return value


def _usage(spec: Dict[str, Any]) -> Any:
    value = _as_object(spec["value"]) if spec.get("as_object") else spec["value"]
    if "thinking" in spec:
        assert spec["shape"] == "anthropic", "thinking is an anthropic override"
        return usage_from_anthropic(value, thinking=spec["thinking"])
    return USAGE[spec["shape"]](value)


def _agent_messages(spec: Dict[str, Any]) -> List[Any]:
    """SDK-shaped messages: one assistant message per text block, then (when given) a
    result message carrying the usage."""
    messages: List[Any] = [
        SimpleNamespace(content=[SimpleNamespace(type="text", text=t)])
        for t in spec["text_blocks"]
    ]
    if "result" in spec:
        messages.append(SimpleNamespace(total_cost_usd=0.0,
                                        usage=spec["result"].get("usage")))
    return messages


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind == "spawn":
        return {"type": "spawn", "request": value}
    if kind in ("close_stdin", "close_stdout"):
        assert value is None
        return {"type": kind}
    if kind == "signal":
        target, signal = value
        return {"type": "signal", "target": target, "signal": signal}
    if kind == "write_stdin":
        return {"type": "write_stdin", "data": value}
    if kind == "progress":
        return {"type": "progress", "event": value}
    if kind == "turn_result":
        return {"type": "turn_result", "text": value.text, "usage": value.usage.to_dict()}
    if kind == "error":
        return {"type": "error", **value.details}
    raise AssertionError(f"unknown output kind {kind}")


def run_adapter(vector: Dict[str, Any]) -> None:
    config = vector.get("config", {})
    start = config.get("start", "attached")
    assert start in ("attached", "new"), f"unknown config.start {start!r}"
    # Absent config keys are left to the binding's defaults (the core's constants).
    sizes = {k: config[k] for k in ("max_line_bytes", "grace_ms") if k in config}
    machine = SubprocessTurnMachine(**sizes, attached=start == "attached",
                                    process_group=config.get("process_group", False),
                                    map_usage=config.get("map_usage", True))
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        value: Any = None
        err: Optional[AdapterError] = None
        if any(k in inp for k in ("role_spec", "agent_options", "usage", "turn_result",
                                  "agent_turn", "host_fault")):
            try:
                if "agent_options" in inp:
                    r = inp["agent_options"]
                    spec = RoleSpec.from_invocation(r["invocation"],
                                                    role=r.get("role", _native.DEFAULT_ROLE))
                    if "system_prompt" in r:
                        spec = dataclasses.replace(spec, system_prompt=r["system_prompt"])
                    value = agent_options(spec)
                elif "role_spec" in inp:
                    r = inp["role_spec"]
                    spec = RoleSpec.from_invocation(r["invocation"],
                                                    role=r.get("role", _native.DEFAULT_ROLE))
                    if "system_prompt" in expect:
                        _eq(f"step {i} system_prompt", spec.system_prompt,
                            expect["system_prompt"])
                    value = spec.to_dict()
                elif "agent_turn" in inp:
                    messages = _agent_messages(inp["agent_turn"])
                    value = {"text": turn_text(messages),
                             "usage": turn_usage(messages).to_dict()}
                elif "host_fault" in inp:
                    f = inp["host_fault"]
                    try:
                        built = _native.host_adapter_error(f["code"], f["message"])
                    except ValueError:
                        value = None
                    else:
                        assert built.code == f["code"], f"step {i}: built {built.code}"
                        raise built
                elif "usage" in inp:
                    split = _usage(inp["usage"])
                    if "total_tokens" in expect:
                        _eq(f"step {i} total_tokens", split.total_tokens, expect["total_tokens"])
                    value = split.to_dict()
                else:
                    value = TurnResult.from_dict(inp["turn_result"]).to_dict()
            except AdapterError as e:
                err = e
            _check_error(i, err, expect)
            if err is None:
                _eq(f"step {i} value", value, expect.get("value"))
            continue
        outputs: List[Dict[str, Any]] = []
        now = int(inp.get("now_ms", 0))
        try:
            if "open" in inp:
                o = inp["open"]
                machine.open(o["command"], env=list(o.get("env", {}).items()),
                             path=o.get("path", ""), llm_base_url=o.get("llm_base_url"),
                             cwd=o.get("cwd"), now_ms=now)
            elif "spawned" in inp:
                machine.spawned(inp["spawned"].get("pid"),
                                process_group=inp["spawned"].get("process_group", False),
                                now_ms=now)
            elif "spawn_failed" in inp:
                machine.spawn_failed(inp["spawn_failed"], now)
            elif "stdin_write_failed" in inp:
                machine.stdin_write_failed(inp["stdin_write_failed"], now)
            elif "exited" in inp:
                machine.exited(now)
            elif "close" in inp:
                machine.close(now)
            elif "timeout" in inp:
                machine.timeout(now)
            elif "start_turn" in inp:
                machine.start_turn(inp["start_turn"], now)
            elif "stdout" in inp or "stdout_hex" in inp:
                data = (inp["stdout"].encode("utf-8") if "stdout" in inp
                        else bytes.fromhex(inp["stdout_hex"]))
                size = int(inp.get("chunk_size") or 0) or max(len(data), 1)
                for j in range(0, max(len(data), 1), size):
                    machine.feed_stdout(data[j : j + size], now)
                    outputs += [_output_json(k, v) for k, v in machine.drain()]
            elif "eof" in inp:
                machine.feed_eof(now)
            else:
                raise AssertionError(f"step {i}: unknown input {inp}")
        except AdapterError as e:
            err = e
        outputs += [_output_json(k, v) for k, v in machine.drain()]
        _check_error(i, err, expect)
        _eq(f"step {i} outputs", outputs, expect.get("outputs", []))
        if "state" in expect:
            state = "closed" if machine.closed else "in_turn" if machine.in_turn else "idle"
            _eq(f"step {i} state", state, expect["state"])
        if "lifecycle" in expect:
            _eq(f"step {i} lifecycle", machine.state, expect["lifecycle"])
        if "timeout" in expect:
            _eq(f"step {i} timeout", machine.poll_timeout(), expect["timeout"])
        if "result_line" in expect:
            _eq(f"step {i} result_line", machine.result_line, expect["result_line"])
