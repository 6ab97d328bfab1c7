"""Area ``adapter``: RoleSpec, TurnResult, usage mapping and the subprocess JSONL turn
machine, through the public Python API."""

from __future__ import annotations

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
from stapel_runner_protocol.adapters import SubprocessTurnMachine

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


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
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
    machine = SubprocessTurnMachine(config.get("max_line_bytes", 1048576))
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        value: Any = None
        err: Optional[AdapterError] = None
        if "role_spec" in inp or "usage" in inp or "turn_result" in inp:
            try:
                if "role_spec" in inp:
                    r = inp["role_spec"]
                    value = RoleSpec.from_invocation(r["invocation"],
                                                     role=r.get("role", "coder")).to_dict()
                elif "usage" in inp:
                    split = USAGE[inp["usage"]["shape"]](inp["usage"]["value"])
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
            if "start_turn" in inp:
                machine.start_turn(inp["start_turn"], now)
                outputs += [_output_json(k, v) for k, v in machine.drain()]
            elif "stdout" in inp or "stdout_hex" in inp:
                data = (inp["stdout"].encode("utf-8") if "stdout" in inp
                        else bytes.fromhex(inp["stdout_hex"]))
                size = int(inp.get("chunk_size") or 0) or max(len(data), 1)
                for j in range(0, max(len(data), 1), size):
                    machine.feed_stdout(data[j : j + size], now)
                    outputs += [_output_json(k, v) for k, v in machine.drain()]
            elif "eof" in inp:
                machine.feed_eof(now)
                outputs += [_output_json(k, v) for k, v in machine.drain()]
            else:
                raise AssertionError(f"step {i}: unknown input {inp}")
        except AdapterError as e:
            err = e
        _check_error(i, err, expect)
        _eq(f"step {i} outputs", outputs, expect.get("outputs", []))
        if "state" in expect:
            state = "closed" if machine.closed else "in_turn" if machine.in_turn else "idle"
            _eq(f"step {i} state", state, expect["state"])
