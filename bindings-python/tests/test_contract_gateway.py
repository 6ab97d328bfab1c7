"""Seed 001's Rein lifecycle through contract.Gateway (the core's machine underneath):
every failure stage, teardown whenever a sandbox exists, and the reference
SubprocessRein against a real JSONL harness child."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from stapel_runner_protocol.contract import (
    CONTRACT_MODELS,
    Catalog,
    ExecutionRequest,
    ExecutionSummary,
    Gateway,
    GatewayMachine,
    GatewayResult,
    HarnessProfile,
    Rein,
    ReinSession,
    SandboxHandle,
    Sandboxer,
    SubprocessRein,
    ToolCall,
    ToolResult,
    parse_model,
)
from stapel_runner_protocol.errors import AdapterError, ContractError

CATALOG: Catalog = {
    "profiles": [
        {"contract_version": "1.0", "profile_id": "coder", "rein": "fake", "model": "m-1",
         "sandbox_profile": "repo-rw",
         "tool_policy": {"allowed_tools": ["read_file", "run_task"]}},
        {"contract_version": "1.0", "profile_id": "off", "rein": "fake", "model": "m-1",
         "sandbox_profile": "repo-rw", "enabled": False,
         "tool_policy": {"allowed_tools": []}},
    ],
    "reins": [{"rein_id": "fake", "contract_version": "1.0",
               "tool_event_visibility": "complete"}],
}
REQUEST: ExecutionRequest = {"harness_profile_ref": "coder", "repository": "github.com/acme/w",
                             "title": "t", "description": "d"}
SUMMARY: ExecutionSummary = {
    "tokens": {"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4, "thinking": 5},
    "duration_ms": 10, "tool_event_visibility": "complete", "tool_event_count": 2,
}
CALLS: List[ToolCall] = [{"call_id": "c1", "name": "read_file", "arguments": {"path": "x"}},
                         {"call_id": "c2", "name": "run_task"}]
SECRET = "boom-7f3a"  # a failure message: may reach tool_error, never the evidence


_UNSET: Any = object()


class FakeRein(Rein):
    """A rein that fails where told: ``fail`` names a method that raises ``error``
    (default ``RuntimeError(SECRET)``), ``bad`` one that returns a model the core must
    reject, or ``returns`` (e.g. ``NaN`` in a dict) in place of its normal result."""

    def __init__(self, fail: str = "", bad: str = "", unsuccessful: bool = False,
                 error: Optional[BaseException] = None, returns: Any = _UNSET) -> None:
        self.log: List[str] = []
        self.fail, self.bad, self.unsuccessful = fail, bad, unsuccessful
        self.error = error if error is not None else RuntimeError(SECRET)
        self.returns = returns

    def _fault(self, method: str) -> None:
        if self.fail == method:
            raise self.error

    def start_session(self, profile: HarnessProfile, inputs: Dict[str, str],
                      sandbox: SandboxHandle) -> Dict[str, str]:
        self.log.append(f"start {profile['profile_id']} {sandbox['sandbox_id']} {inputs}")
        self._fault("start")
        if self.bad == "start":
            if self.returns is not _UNSET:
                return self.returns  # type: ignore[no-any-return]
            return {"s": 1}  # type: ignore[dict-item]
        return {"s": "1"}

    def dispatch_tool(self, session: Dict[str, str], tool_call: ToolCall) -> ToolResult:
        self.log.append(f"tool {tool_call['name']}")
        self._fault("tool")
        if self.bad == "tool":
            if self.returns is not _UNSET:
                return self.returns  # type: ignore[no-any-return]
            return {"ok": "yes"}  # type: ignore[typeddict-item]
        if self.unsuccessful:
            return {"ok": False, "error": SECRET}
        return {"ok": True, "output": f"ran {tool_call['name']}"}

    def end_session(self, session: Dict[str, str]) -> ExecutionSummary:
        self.log.append("end")
        self._fault("end")
        if self.bad == "end":
            if self.returns is not _UNSET:
                return self.returns  # type: ignore[no-any-return]
            return {"nonsense": True}  # type: ignore[typeddict-unknown-key]
        return SUMMARY


class FakeSandboxer(Sandboxer):
    """A sandboxer that fails where told (``fail``: ``create`` / ``destroy`` raise
    ``error``), returns an invalid handle (``bad``) or ``returns`` in place of the
    handle. ``live`` lists the sandboxes created and not yet destroyed."""

    def __init__(self, fail: str = "", bad: bool = False,
                 error: Optional[BaseException] = None, returns: Any = _UNSET) -> None:
        self.fail, self.bad = fail, bad
        self.error = error if error is not None else RuntimeError(SECRET)
        self.returns = returns
        self.log: List[str] = []
        self.live: List[str] = []

    def create(self, harness_profile_ref: str, sandbox_profile: str,
               repository: str) -> SandboxHandle:
        self.log.append(f"create {harness_profile_ref} {sandbox_profile} {repository}")
        if self.fail == "create":
            raise self.error
        self.live.append("sb-1")
        if self.returns is not _UNSET:
            return self.returns  # type: ignore[no-any-return]
        if self.bad:
            return {"sandbox_id": "sb-1", "secret_extra": 1}  # type: ignore[typeddict-unknown-key]
        return {"sandbox_id": "sb-1"}

    def destroy(self, sandbox: SandboxHandle) -> None:
        self.log.append(f"destroy {sandbox['sandbox_id']}")
        if self.fail == "destroy":
            raise self.error
        self.live.remove(sandbox["sandbox_id"])


def run(rein: FakeRein, sandboxer: FakeSandboxer, *, calls: Optional[List[ToolCall]] = None,
        request: ExecutionRequest = REQUEST) -> GatewayResult:
    gateway = Gateway(CATALOG, reins={"fake": rein}, sandboxer=sandboxer)
    return gateway.execute(request, inputs={"prompt": "p"},
                           tool_calls=CALLS if calls is None else calls)


def test_happy_path() -> None:
    rein, sandboxer = FakeRein(), FakeSandboxer()
    result = run(rein, sandboxer)
    assert isinstance(result, GatewayResult)
    assert result.ok is True and result.tool_output == "ran run_task" and result.tool_error is None
    assert (result.outcome, result.failure_stage) == ("succeeded", None)
    ev = result.evidence
    assert (ev["outcome"], ev["teardown"], ev["session_end"], ev["tools_used"]) == (
        "succeeded", "destroyed", "ended", ["read_file", "run_task"])
    assert ev["tokens"] == SUMMARY["tokens"] and ev["sandbox_id"] == "sb-1"
    assert ev["tool_calls"]["succeeded"] == 2
    assert rein.log == ["start coder sb-1 {'prompt': 'p'}", "tool read_file", "tool run_task",
                        "end"]
    assert sandboxer.log == ["create coder repo-rw github.com/acme/w", "destroy sb-1"]
    assert sandboxer.live == []
    assert GatewayResult.from_dict(result.to_dict()) == result


# (case, rein keywords, sandboxer keywords, tool calls, failure_stage, session_end,
#  teardown, rein log); the fakes are built per test.
STAGES: List[Any] = [
    ("sandbox create raises", {}, {"fail": "create"}, CALLS,
     "sandbox_create", "not_attempted", "not_needed", []),
    ("sandbox handle invalid", {}, {"bad": True}, CALLS,
     "sandbox_create", "not_attempted", "abandoned", []),
    ("session start raises", {"fail": "start"}, {}, CALLS,
     "session_start", "not_attempted", "destroyed", ["start"]),
    ("session invalid", {"bad": "start"}, {}, CALLS,
     "session_start", "not_attempted", "destroyed", ["start"]),
    ("tool raises", {"fail": "tool"}, {}, CALLS,
     "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("tool result invalid", {"bad": "tool"}, {}, CALLS,
     "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("tool unsuccessful", {"unsuccessful": True}, {}, CALLS,
     "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("tool denied by policy", {}, {},
     [{"name": "rm_rf"}], "execution", "ended", "destroyed", ["start", "end"]),
    ("session end raises", {"fail": "end"}, {}, CALLS,
     "session_end", "failed", "destroyed", ["start", "tool", "tool", "end"]),
    ("summary invalid", {"bad": "end"}, {}, CALLS,
     "session_end", "failed", "destroyed", ["start", "tool", "tool", "end"]),
    ("teardown raises", {}, {"fail": "destroy"}, CALLS,
     "teardown", "ended", "failed", ["start", "tool", "tool", "end"]),
    ("tool and teardown fail", {"fail": "tool"}, {"fail": "destroy"}, CALLS,
     "execution", "ended", "failed", ["start", "tool", "end"]),
    # values that are not JSON at all (the conversion raises TypeError / ValueError)
    ("session not a dict (None)", {"bad": "start", "returns": None}, {}, CALLS,
     "session_start", "not_attempted", "destroyed", ["start"]),
    ("session with a NaN", {"bad": "start", "returns": {"s": float("nan")}}, {}, CALLS,
     "session_start", "not_attempted", "destroyed", ["start"]),
    ("session with an int key", {"bad": "start", "returns": {1: "2"}}, {}, CALLS,
     "session_start", "not_attempted", "destroyed", ["start"]),
    ("tool output NaN", {"bad": "tool", "returns": {"ok": True, "output": float("nan")}}, {},
     CALLS, "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("tool output an object", {"bad": "tool", "returns": {"ok": True, "output": object()}},
     {}, CALLS, "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("tool output an int key", {"bad": "tool", "returns": {"ok": True, "output": {1: 2}}},
     {}, CALLS, "execution", "ended", "destroyed", ["start", "tool", "end"]),
    ("summary an object", {"bad": "end", "returns": object()}, {}, CALLS,
     "session_end", "failed", "destroyed", ["start", "tool", "tool", "end"]),
    ("summary with a NaN", {"bad": "end", "returns": {**SUMMARY, "duration_ms": float("inf")}},
     {}, CALLS, "session_end", "failed", "destroyed", ["start", "tool", "tool", "end"]),
    ("sandbox handle with an int key", {}, {"returns": {"sandbox_id": "sb-1", 3: 4}}, CALLS,
     "sandbox_create", "not_attempted", "abandoned", []),
    ("sandbox handle with a NaN", {}, {"returns": {"sandbox_id": "sb-1", "x": float("nan")}},
     CALLS, "sandbox_create", "not_attempted", "abandoned", []),
]


@pytest.mark.parametrize("case,rein_kw,sandboxer_kw,calls,stage,session_end,teardown,rein_log",
                         STAGES, ids=[s[0] for s in STAGES])
def test_every_failure_stage(case: str, rein_kw: Dict[str, Any], sandboxer_kw: Dict[str, Any],
                             calls: List[ToolCall], stage: str, session_end: str,
                             teardown: str, rein_log: List[str]) -> None:
    rein, sandboxer = FakeRein(**rein_kw), FakeSandboxer(**sandboxer_kw)
    result = run(rein, sandboxer, calls=calls)
    ev = result.evidence
    assert result.ok is False and ev["outcome"] == "failed"
    assert (ev["failure_stage"], ev["session_end"], ev["teardown"]) == (stage, session_end,
                                                                       teardown)
    assert [entry.split(" ")[0] for entry in rein.log] == rein_log
    created = [e for e in sandboxer.log if e.startswith("create")]
    destroyed = [e for e in sandboxer.log if e.startswith("destroy")]
    if sandboxer.fail == "create":
        assert destroyed == [] and sandboxer.live == []
    elif teardown == "abandoned":
        # The handle was rejected: the machine cannot name the sandbox ("abandoned"),
        # so the gateway destroyed what the sandboxer returned itself.
        assert destroyed == ["destroy sb-1"] and sandboxer.live == []
        assert ev["failure_reasons"] == ["invalid_sandbox_handle"]
    else:
        # A sandbox existed: its teardown was attempted exactly once.
        assert len(created) == 1 and destroyed == ["destroy sb-1"]
        if sandboxer.fail != "destroy":
            assert sandboxer.live == []
    assert SECRET not in str(ev)


# (rein keywords, sandboxer keywords, rein log, destroy calls, sandboxes left live)
INTERRUPTS: List[Any] = [
    ({}, {"fail": "create"}, [], 0, []),
    ({"fail": "start"}, {}, ["start"], 1, []),
    ({"fail": "tool"}, {}, ["start", "tool", "end"], 1, []),
    ({"fail": "end"}, {}, ["start", "tool", "tool", "end"], 1, []),
    ({}, {"fail": "destroy"}, ["start", "tool", "tool", "end"], 1, ["sb-1"]),
]


@pytest.mark.parametrize("rein_kw,sandboxer_kw,rein_log,destroys,live", INTERRUPTS,
                         ids=["create", "start", "tool", "end", "destroy"])
@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_cleans_up_then_propagates(
        error: type, rein_kw: Dict[str, Any], sandboxer_kw: Dict[str, Any],
        rein_log: List[str], destroys: int, live: List[str]) -> None:
    """A BaseException from a rein or the sandboxer: the started session is ended and
    the sandbox destroyed (each once, nothing else runs), then it propagates."""
    rein = FakeRein(**rein_kw, error=error("stop"))
    sandboxer = FakeSandboxer(**sandboxer_kw, error=error("stop"))
    with pytest.raises(error):
        run(rein, sandboxer)
    assert [entry.split(" ")[0] for entry in rein.log] == rein_log
    assert [e for e in sandboxer.log if e.startswith("destroy")] == ["destroy sb-1"] * destroys
    assert sandboxer.live == live


def test_a_failing_discard_of_an_invalid_handle_still_returns_the_result() -> None:
    """The core asks for the invalid handle to be discarded; a destroy that raises there
    changes nothing (teardown stays abandoned, the invalid handle stays the failure)."""
    rein, sandboxer = FakeRein(), FakeSandboxer(bad=True, fail="destroy")
    result = run(rein, sandboxer)
    ev = result.evidence
    assert (ev["failure_stage"], ev["failure_code"], ev["failure_reasons"], ev["teardown"]) == (
        "sandbox_create", "aborted", ["invalid_sandbox_handle"], "abandoned")
    assert sandboxer.log[1:] == ["destroy sb-1"] and rein.log == []
    assert SECRET not in str(ev)


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_while_discarding_propagates_after_the_result(error: type) -> None:
    sandboxer = FakeSandboxer(bad=True, fail="destroy", error=error("stop"))
    with pytest.raises(error):
        run(FakeRein(), sandboxer)
    assert [e.split(" ")[0] for e in sandboxer.log] == ["create", "destroy"]


def test_gateway_machine_vocabulary() -> None:
    """The machine exposes its stage and has no timers."""
    machine = GatewayMachine(CATALOG)
    assert (machine.stage, machine.poll_timeout(), machine.poll_output()) == ("idle", None, None)
    machine.handle_input(0, {"type": "execute", "request": REQUEST})
    assert machine.stage == "creating_sandbox"
    assert [o["type"] for o in machine.drain()] == ["create_sandbox"]
    machine.handle_input(1, {"type": "answer", "value": {"sandbox_id": 5}})
    assert machine.stage == "discarding_sandbox"
    assert machine.drain() == [{"type": "discard_sandbox"}]
    machine.handle_input(2, {"type": "action_failed", "message": "gone"})
    out = machine.drain()
    assert machine.finished and [o["type"] for o in out] == ["result"]
    with pytest.raises(ContractError) as info:
        machine.handle_input(3, {"type": "answer"})
    assert info.value.code == "unexpected_input"


def test_refusals_create_nothing() -> None:
    for ref in ("nope", "off"):
        rein, sandboxer = FakeRein(), FakeSandboxer()
        request: ExecutionRequest = {**REQUEST, "harness_profile_ref": ref}
        result = run(rein, sandboxer, request=request)
        ev = result.evidence
        assert (result.ok, ev["outcome"], ev["failure_stage"], ev["teardown"]) == (
            False, "refused", "resolution", "not_needed")
        assert sandboxer.log == [] and rein.log == []


def test_invalid_request_and_missing_rein() -> None:
    sandboxer = FakeSandboxer()
    gw = Gateway(CATALOG, reins={}, sandboxer=sandboxer)
    with pytest.raises(ContractError) as info:
        gw.execute({"title": "t"})  # type: ignore[typeddict-item]
    assert info.value.code == "missing_field" and sandboxer.log == []
    # no rein registered for the resolved profile: the session start fails, teardown runs
    result = gw.execute(REQUEST)
    assert result.failure_stage == "session_start" and result.evidence["teardown"] == "destroyed"
    assert sandboxer.live == []


HARNESS = textwrap.dedent(
    """
    import json, os, sys
    for line in sys.stdin:
        prompt = json.loads(line)["prompt"]
        if prompt.startswith("{"):
            call = json.loads(prompt)
            if call["name"] == "fail":
                print(json.dumps({"type": "error", "message": "tool said no"}), flush=True)
                continue
            if call["name"] == "crash":
                sys.exit(9)
            text = call["name"] + ":" + json.dumps(call["arguments"], sort_keys=True)
            if call["name"] == "env":
                text = ",".join(sorted(os.environ))
        elif prompt == "refuse":
            print(json.dumps({"type": "error", "message": "no initial turn"}), flush=True)
            continue
        else:
            text = "prompt:" + prompt
        print(json.dumps({"type": "result", "text": text,
                          "usage": {"input_tokens": 10, "output_tokens": 5}}), flush=True)
    """
)


@pytest.fixture
def harness(tmp_path: Path) -> List[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    return [sys.executable, str(script)]


def subprocess_catalog(tools: List[str]) -> Catalog:
    return {
        "profiles": [{"contract_version": "1.0", "profile_id": "coder", "rein": "subprocess",
                      "model": "m-9", "sandbox_profile": "repo-rw",
                      "tool_policy": {"allowed_tools": tools}}],
        "reins": [{"rein_id": "subprocess", "contract_version": "1.0",
                   "tool_event_visibility": "complete"}],
    }


def test_subprocess_rein_is_a_working_reference(harness: List[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-parent-secret")
    rein = SubprocessRein(harness)
    sandboxer = FakeSandboxer()
    gw = Gateway(subprocess_catalog(["read_file", "env"]), reins={"subprocess": rein},
                 sandboxer=sandboxer)
    calls: List[ToolCall] = [{"call_id": "1", "name": "read_file", "arguments": {"path": "a"}},
                             {"name": "env"}]
    result = gw.execute(REQUEST, inputs={"prompt": "hi"}, tool_calls=calls)
    assert result.ok, result
    names = str(result.tool_output).split(",")
    # the child saw a real (cleared) environment: PATH, but not the parent's secret
    assert "PATH" in names and "ANTHROPIC_API_KEY" not in names
    ev = result.evidence
    # three turns (the prompt and two calls) of 10 fresh input + 5 output tokens each
    assert ev["tokens"] == {"cache_read": 0, "cache_write": 0, "fresh_input": 30, "output": 15,
                            "thinking": 0}
    assert (ev["tool_event_count"], ev["resolved_model"], ev["teardown"]) == (2, "m-9",
                                                                             "destroyed")
    assert sandboxer.live == []


def test_subprocess_rein_failures(harness: List[str]) -> None:
    rein = SubprocessRein(harness)
    gw = Gateway(subprocess_catalog(["fail", "crash"]), reins={"subprocess": rein},
                 sandboxer=FakeSandboxer())
    # a harness error line is a rein-declared unsuccessful result
    result = gw.execute(REQUEST, tool_calls=[{"name": "fail"}])
    assert result.failure_stage == "execution" and result.tool_error == "tool said no"
    assert result.evidence["tool_calls"]["unsuccessful"] == 1
    assert result.evidence["session_end"] == "ended"
    # a dying harness is a failed dispatch; the session still ends normally (the rein
    # reports the usage it saw and closes the already gone child)
    result = gw.execute(REQUEST, tool_calls=[{"name": "crash"}])
    assert result.failure_stage == "execution"
    assert result.evidence["tool_calls"]["dispatch_failed"] == 1
    assert result.evidence["session_end"] == "ended"
    assert result.evidence["teardown"] == "destroyed"
    rein.close()
    rein.close()


def test_subprocess_rein_closes_children(harness: List[str]) -> None:
    rein = SubprocessRein(harness)
    session = rein.start_session(
        {"contract_version": "1.0", "profile_id": "p", "rein": "subprocess", "model": "m",
         "sandbox_profile": "s", "tool_policy": {"allowed_tools": []}},
        {}, {"sandbox_id": "sb"})
    state = rein._state(session)
    pid = state.harness.process.pid  # type: ignore[attr-defined]
    os.kill(pid, 0)
    rein.close()
    assert state.harness.process.poll() is not None  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        rein.end_session(session)
    with pytest.raises(ValueError):
        SubprocessRein()


PROFILE: HarnessProfile = {
    "contract_version": "1.0", "profile_id": "p", "rein": "subprocess", "model": "m",
    "sandbox_profile": "s", "tool_policy": {"allowed_tools": []}}


def test_subprocess_rein_numbers_sessions_and_a_failed_initial_turn_fails_start(
        harness: List[str]) -> None:
    rein = SubprocessRein(harness)
    first = rein.start_session(PROFILE, {}, {"sandbox_id": "sb-1"})
    assert first == {"session_id": "s-1", "sandbox_id": "sb-1"}
    # a harness error on the initial turn is not a result: start_session raises, and the
    # session is closed and forgotten (its number is not reused)
    with pytest.raises(AdapterError) as info:
        rein.start_session(PROFILE, {"prompt": "refuse"}, {"sandbox_id": "sb-2"})
    assert info.value.code == "harness_error"
    with pytest.raises(KeyError):
        rein.end_session({"session_id": "s-2", "sandbox_id": "sb-2"})
    third = rein.start_session(PROFILE, {"prompt": "hi"}, {"sandbox_id": "sb-3"})
    assert third == {"session_id": "s-3", "sandbox_id": "sb-3"}
    assert rein.end_session(third)["tokens"] == {
        "cache_read": 0, "cache_write": 0, "fresh_input": 10, "output": 5, "thinking": 0}
    rein.close()


def test_model_names_and_an_unknown_model_come_from_the_core() -> None:
    assert list(CONTRACT_MODELS) == [
        "ExecutionRequest", "HarnessProfile", "ReinDescriptor", "SandboxHandle", "ToolCall",
        "ToolResult", "ExecutionSummary", "ExecutionEvidence", "GatewayResult"]
    with pytest.raises(ContractError) as info:
        parse_model("Nope", {})
    assert (info.value.code, info.value.model, info.value.field) == ("unknown_model", "", "")
    assert "Nope" in str(info.value)


@pytest.mark.parametrize("bad", [{"cache_read": 2**60}, {"output": -1}, {"thinking": 2**53},
                                 {"fresh_input": 1.5}])
def test_rein_session_refuses_an_invalid_split_with_a_code(bad: Dict[str, Any]) -> None:
    session = ReinSession(PROFILE, 0)
    split = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0}
    with pytest.raises(AdapterError) as info:
        session.record_turn({**split, **bad})
    assert info.value.code == "invalid_usage"
    session.record_turn({**split, "output": 2**53 - 1})
    assert session.summary(0)["tokens"] == {**split, "output": 2**53 - 1}
