"""Unit tests of usage mapping, RoleSpec and TurnResult."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from stapel_taskspecs import UsageSplit

from stapel_runner_protocol import (
    AdapterError,
    RoleSpec,
    SchemaValidationError,
    TurnResult,
    usage_from_anthropic,
    usage_from_mapping,
    usage_from_openai,
)


def split(u: UsageSplit) -> Any:
    return (u.cache_read, u.cache_write, u.fresh_input, u.output, u.thinking)


def test_anthropic() -> None:
    raw = {"input_tokens": 1, "cache_read_input_tokens": 30433,
           "cache_creation_input_tokens": 287, "output_tokens": 67}
    u = usage_from_anthropic(raw)
    assert isinstance(u, UsageSplit)
    assert split(u) == (30433, 287, 1, 67, 0) and u.total_tokens == 30433 + 287 + 1 + 67
    # an SDK-style object with attributes, thinking counted inside output
    obj = SimpleNamespace(input_tokens=5, output_tokens=10, cache_read_input_tokens=None)
    assert split(usage_from_anthropic(obj, thinking=4)) == (0, 0, 5, 6, 4)
    with pytest.raises(AdapterError) as info:
        usage_from_anthropic({"input_tokens": -1})
    assert info.value.code == "invalid_usage"


def test_openai_and_mapping() -> None:
    codex = {"input_tokens": 26549, "cached_input_tokens": 22272, "output_tokens": 1590,
             "reasoning_output_tokens": 1152, "total_tokens": 28139}
    assert split(usage_from_openai(codex)) == (22272, 0, 4277, 438, 1152)
    assert split(usage_from_mapping(codex)) == (22272, 0, 4277, 438, 1152)
    five = {"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4, "thinking": 5}
    assert split(usage_from_mapping(five)) == (1, 2, 3, 4, 5)
    # a partial split: the absent components are 0 (as in 0.1.1); the split stays closed
    assert split(usage_from_mapping({"output": 1})) == (0, 0, 0, 1, 0)
    with pytest.raises(AdapterError):
        usage_from_mapping({"output": 1, "total": 1})
    with pytest.raises(AdapterError):
        usage_from_mapping({"cache_read_input_tokens": 1, "cached_input_tokens": 1})


def test_role_spec_from_invocation() -> None:
    r = RoleSpec.from_invocation({})
    assert (r.role, r.session, r.allowed_tools, r.backend, r.budget) == (
        "coder", "per-task", [], None, {},
    )
    assert "budget" not in r.to_dict()
    inv = {"backend": "subprocess", "model": "m", "allowed_tools": ["Read"], "budget": 5,
           "system_prompt": "hi", "zeta": True}
    r = RoleSpec.from_invocation(inv, role="reviewer")
    assert (r.role, r.backend, r.model, r.allowed_tools, r.budget) == (
        "reviewer", "subprocess", "m", ["Read"], 5,
    )
    assert r.extra == {"zeta": True}  # the inline prompt is the field
    assert r.system_prompt == "hi"
    assert r.to_dict() == {"role": "reviewer", "backend": "subprocess", "model": "m",
                           "session": "per-task", "allowed_tools": ["Read"], "budget": 5,
                           "system_prompt": "hi", "zeta": True}
    assert list(r.to_dict())[:3] == ["role", "backend", "model"]
    for bad in ({"model": 3}, {"allowed_tools": "Read"}):
        with pytest.raises(AdapterError) as info:
            RoleSpec.from_invocation(bad)
        assert info.value.code == "invalid_invocation"
    assert RoleSpec.from_invocation({"role": "planner"}).extra == {"role": "planner"}


def test_turn_result_checks_usage() -> None:
    t = TurnResult(text="done", usage=UsageSplit(1, 2, 3, 4, 5))
    assert t["text"] == "done" and t["usage"].total_tokens == 15
    assert t.to_dict() == {"text": "done", "usage": {"cache_read": 1, "cache_write": 2,
                                                     "fresh_input": 3, "output": 4, "thinking": 5}}
    with pytest.raises(TypeError):
        TurnResult(text="x", usage={"output": 1})  # type: ignore[arg-type]
    with pytest.raises(SchemaValidationError) as info:
        TurnResult(text="x", usage=UsageSplit(output=-1))
    assert [(v.location, v.rule) for v in info.value.violations] == [("output", "minimum")]
    with pytest.raises(KeyError):
        t["raw"]


def test_defaults_are_the_cores() -> None:
    """The Python-visible defaults are the core's constants (unchanged values)."""
    import inspect

    from stapel_runner_protocol import _native
    from stapel_runner_protocol.subprocess_adapter import (
        DEFAULT_GRACE_S,
        SubprocessAdapter,
    )

    assert (_native.DEFAULT_ROLE, _native.DEFAULT_SESSION) == ("coder", "per-task")
    assert (_native.DEFAULT_GRACE_MS, _native.DEFAULT_TURN_MAX_LINE_BYTES) == (2000, 1048576)
    spec = RoleSpec()
    assert (spec.role, spec.session) == ("coder", "per-task")
    assert RoleSpec.from_invocation({}).role == "coder"
    assert DEFAULT_GRACE_S == 2.0
    params = inspect.signature(SubprocessAdapter.__init__).parameters
    assert params["max_line_bytes"].default == 1048576
    assert params["grace_s"].default == 2.0
