"""AgentSdkAdapter against a fake async client (no SDK, no network)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List

import pytest

from stapel_runner_protocol import (
    AdapterError,
    AdapterUnavailableError,
    AgentSdkAdapter,
    AgentSdkSession,
    RoleSpec,
)
from stapel_runner_protocol.agent_sdk_adapter import turn_text, turn_usage


@dataclass
class TextBlock:
    text: str


@dataclass
class AssistantMessage:
    content: List[Any]


@dataclass
class ResultMessage:
    usage: Dict[str, int]
    total_cost_usd: float = 0.01


@dataclass
class FakeClient:
    role: RoleSpec
    log: List[str] = field(default_factory=list)
    fail_connect: bool = False

    async def connect(self) -> None:
        if self.fail_connect:
            raise RuntimeError("no network")
        self.log.append("connect")

    async def query(self, prompt: str) -> None:
        self.log.append(f"query:{prompt}")

    async def receive_response(self) -> AsyncIterator[Any]:
        yield AssistantMessage([TextBlock("Hello "), object()])
        yield AssistantMessage([TextBlock("world")])
        yield ResultMessage({"input_tokens": 3, "cache_read_input_tokens": 100,
                             "cache_creation_input_tokens": 20, "output_tokens": 7})
        yield AssistantMessage([TextBlock("after the result: not part of the turn")])

    async def disconnect(self) -> None:
        self.log.append("disconnect")


def test_persistent_session_turns() -> None:
    clients: List[FakeClient] = []

    def factory(role: RoleSpec) -> FakeClient:
        clients.append(FakeClient(role))
        return clients[-1]

    adapter = AgentSdkAdapter(client_factory=factory)
    role = RoleSpec.from_invocation({"model": "m"}, role="coder")
    session = adapter.open_session(role)
    assert isinstance(session, AgentSdkSession)
    for prompt in ("a", "b"):
        r = session.turn(prompt)
        assert r.text == "Hello world"
        assert (r.usage.cache_read, r.usage.cache_write, r.usage.fresh_input, r.usage.output) == (
            100, 20, 3, 7)
    session.close()
    session.close()
    assert clients[0].log == ["connect", "query:a", "query:b", "disconnect"]
    assert clients[0].role.model == "m"
    with pytest.raises(AdapterError) as info:
        session.turn("c")
    assert info.value.code == "session_closed"
    assert adapter.oneshot(role, "x").text == "Hello world"
    adapter.close()


def test_connect_failure() -> None:
    adapter = AgentSdkAdapter(client_factory=lambda role: FakeClient(role, fail_connect=True))
    with pytest.raises(AdapterError) as info:
        adapter.open_session(RoleSpec())
    assert info.value.code == "connect_failed"


def test_helpers() -> None:
    assert turn_text([AssistantMessage([TextBlock("x")]), "not a message"]) == "x"
    assert turn_usage([]).total_tokens == 0


@pytest.mark.skipif(importlib.util.find_spec("claude_agent_sdk") is not None,
                    reason="the SDK is installed")
def test_missing_sdk_only_when_used() -> None:
    adapter = AgentSdkAdapter()  # constructing is fine
    assert "claude_agent_sdk" not in sys.modules
    with pytest.raises(AdapterUnavailableError) as info:
        adapter.open_session(RoleSpec())
    assert info.value.code == "adapter_unavailable"


def test_agent_options_come_from_the_core() -> None:
    """The options are the core's choice; the Python dataclass's own ``system_prompt``
    field is the inline prompt it passes on (the ``extra`` copy is only its source)."""
    from stapel_runner_protocol.agent_sdk_adapter import agent_options

    role = RoleSpec.from_invocation({"model": "m", "allowed_tools": ["Read"],
                                     "llm_base_url": "http://gw", "system_prompt": "hi",
                                     "budget": {"max_turns": 3, "other": 1}})
    assert agent_options(role) == {"model": "m", "allowed_tools": ["Read"],
                                   "system_prompt": "hi",
                                   "env": {"ANTHROPIC_BASE_URL": "http://gw"},
                                   "max_turns": 3}
    assert agent_options(RoleSpec(system_prompt="direct")) == {"system_prompt": "direct"}
    assert agent_options(RoleSpec(extra={"system_prompt": "stale"})) == {}


def test_host_faults_are_core_errors() -> None:
    """connect/turn failures carry the core's code, message and JSON form; the missing
    backend is an AdapterUnavailableError built by the core too."""
    from stapel_runner_protocol import _native

    adapter = AgentSdkAdapter(client_factory=lambda role: FakeClient(role, fail_connect=True))
    with pytest.raises(AdapterError) as info:
        adapter.open_session(RoleSpec())
    assert info.value.details == {"code": "connect_failed", "line_number": None,
                                  "message": str(info.value.__cause__)}
    assert str(info.value.__cause__) in str(info.value)

    unavailable = _native.host_adapter_error("adapter_unavailable", "install it")
    assert isinstance(unavailable, AdapterUnavailableError)
    assert (unavailable.code, str(unavailable)) == ("adapter_unavailable", "install it")
    turn = _native.host_adapter_error("turn_failed", "reset")
    assert type(turn) is AdapterError and turn.details["message"] == "reset"
    with pytest.raises(ValueError):
        _native.host_adapter_error("harness_error", "not a host fault")


def test_a_client_failure_propagates_as_it_is() -> None:
    """As in stapel-runner-protocol 0.1.1: the SDK's own exception reaches the caller,
    and the session stays usable."""
    class StreamReset(Exception):
        pass

    class Exploding(FakeClient):
        fail = True

        async def query(self, prompt: str) -> None:
            if Exploding.fail:
                Exploding.fail = False
                raise StreamReset("stream reset")
            await super().query(prompt)

    session = AgentSdkAdapter(client_factory=lambda role: Exploding(role)).open_session(
        RoleSpec())
    with pytest.raises(StreamReset):
        session.turn("x")
    assert not session.closed
    session.close()


def test_turn_fold_through_the_core() -> None:
    """Text blocks join with no separator; the result's usage is mapped; a result
    without usage is zero usage."""
    messages = [AssistantMessage([TextBlock("a"), TextBlock("")]),
                AssistantMessage([TextBlock("b")]),
                ResultMessage(usage={"input_tokens": 4, "output_tokens": 2})]
    assert turn_text(messages) == "ab"
    assert turn_usage(messages).to_dict() == {"cache_read": 0, "cache_write": 0,
                                              "fresh_input": 4, "output": 2, "thinking": 0}
    no_usage = ResultMessage(usage=None)  # type: ignore[arg-type]
    assert turn_usage([no_usage]).total_tokens == 0
