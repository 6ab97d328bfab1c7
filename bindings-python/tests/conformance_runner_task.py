"""Area ``runner_task``: the connected runner's task policy through the public
``runner_task_call`` (see conformance/README.md, "Area ``runner_task``")."""

from __future__ import annotations

from typing import Any, Dict

from conftest import json_equal
from stapel_runner_protocol import ProtocolStateError
from stapel_runner_protocol._native import runner_task_call


def run_runner_task(vector: Dict[str, Any]) -> None:
    for i, step in enumerate(vector["steps"]):
        expect = step["expect"]
        assert ("result" in expect) != ("error" in expect), f"step {i}: result or error"
        try:
            got = runner_task_call(step["input"])
        except ProtocolStateError as e:
            assert "error" in expect, f"step {i}: unexpected error {e.code}"
            assert e.code == expect["error"], f"step {i}: error {e.code}, want {expect['error']}"
            continue
        assert "result" in expect, f"step {i}: expected error {expect['error']}, got {got!r}"
        assert json_equal(got, expect["result"]), f"step {i}: got {got!r}, want {expect['result']!r}"
