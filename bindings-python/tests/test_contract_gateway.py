"""Seed 001's Rein lifecycle through contract.Gateway (the core's machine underneath)."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from stapel_runner_protocol.contract import Gateway, Rein, Sandboxer
from stapel_runner_protocol.errors import ContractError

CATALOG = {
    "profiles": [{"contract_version": "1.0", "profile_id": "coder", "rein": "fake",
                  "model": "m-1", "sandbox_profile": "repo-rw",
                  "tool_policy": {"allowed_tools": ["read_file", "run_task"]}}],
    "reins": [{"rein_id": "fake", "contract_version": "1.0", "tool_event_visibility": "complete"}],
}
REQUEST = {"harness_profile_ref": "coder", "repository": "github.com/acme/w",
           "title": "t", "description": "d"}
SUMMARY = {"tokens": {"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4,
                      "thinking": 5}, "duration_ms": 10, "tool_event_visibility": "complete",
           "tool_event_count": 2}


class FakeRein(Rein):
    def __init__(self, fail_tool: bool = False, bad_summary: bool = False) -> None:
        self.log: List[str] = []
        self.fail_tool = fail_tool
        self.bad_summary = bad_summary

    def start_session(self, profile: Dict[str, Any], inputs: Dict[str, str],
                      sandbox: Dict[str, Any]) -> Dict[str, str]:
        self.log.append(f"start {profile['profile_id']} {sandbox['sandbox_id']} {inputs}")
        return {"s": "1"}

    def dispatch_tool(self, session: Dict[str, str], tool_call: Dict[str, Any]) -> Dict[str, Any]:
        self.log.append(f"tool {tool_call['name']}")
        if self.fail_tool:
            raise RuntimeError("tool exploded")
        return {"ok": True, "output": f"ran {tool_call['name']}"}

    def end_session(self, session: Dict[str, str]) -> Dict[str, Any]:
        self.log.append("end")
        return {"nonsense": True} if self.bad_summary else SUMMARY


class FakeSandboxer(Sandboxer):
    def __init__(self) -> None:
        self.live: List[str] = []

    def create(self, harness_profile_ref: str, sandbox_profile: str, repository: str) -> Dict[str, Any]:
        self.live.append("sb-1")
        return {"sandbox_id": "sb-1"}

    def destroy(self, sandbox: Dict[str, Any]) -> None:
        self.live.remove(sandbox["sandbox_id"])


CALLS: List[Dict[str, Any]] = [{"call_id": "c1", "name": "read_file", "arguments": {"path": "x"}},
         {"call_id": "c2", "name": "run_task"}]


def test_happy_path() -> None:
    rein, sandboxer = FakeRein(), FakeSandboxer()
    gw = Gateway(CATALOG, reins={"fake": rein}, sandboxer=sandboxer)
    result = gw.execute(REQUEST, inputs={"prompt": "p"}, tool_calls=CALLS)
    assert result["ok"] is True and result["tool_output"] == "ran run_task"
    ev = result["evidence"]
    assert (ev["outcome"], ev["teardown"], ev["tools_used"]) == (
        "succeeded", "destroyed", ["read_file", "run_task"])
    assert rein.log == ["start coder sb-1 {'prompt': 'p'}", "tool read_file", "tool run_task", "end"]
    assert sandboxer.live == []


@pytest.mark.parametrize("rein", [FakeRein(fail_tool=True), FakeRein(bad_summary=True)])
def test_failures_still_tear_down(rein: FakeRein) -> None:
    sandboxer = FakeSandboxer()
    result = Gateway(CATALOG, reins={"fake": rein}, sandboxer=sandboxer).execute(
        REQUEST, tool_calls=CALLS)
    assert result["ok"] is False and result["evidence"]["outcome"] == "failed"
    assert result["evidence"]["teardown"] == "destroyed" and sandboxer.live == []
    assert "exploded" not in str(result["evidence"])


def test_refusal_and_invalid_request() -> None:
    sandboxer = FakeSandboxer()
    gw = Gateway(CATALOG, reins={}, sandboxer=sandboxer)
    result = gw.execute(dict(REQUEST, harness_profile_ref="nope"))
    assert result["evidence"]["outcome"] == "refused" and sandboxer.live == []
    with pytest.raises(ContractError) as info:
        gw.execute({"title": "t"})
    assert info.value.code == "missing_field"
    # no rein registered for the resolved profile: the session start fails, teardown runs
    result = gw.execute(REQUEST)
    assert result["evidence"]["failure_stage"] == "session_start" and sandboxer.live == []
