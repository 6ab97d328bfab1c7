"""Area ``admission``: the live server's admission machine through the public
``Admission`` class and its helper functions (see conformance/README.md, "Area
``admission``")."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from conftest import json_equal
from stapel_runner_protocol import ProtocolStateError
from stapel_runner_protocol._native import (
    Admission,
    admission_config,
    admission_error_body,
    admission_response_headers,
)

QUERY_EXPECT = {"parse_config": {"config", "config_error"}, "error_body": {"value"},
                "response_headers": {"value"}}
_HEX = re.compile(r"^(?:[0-9a-f]{2})*$")


def _check(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _body_bytes(form: Any) -> Optional[bytes]:
    """The bytes of a well-formed ``body`` input (fed through ``Admission.body``); ``None``
    for a malformed one (fed as JSON, where the core refuses it)."""
    if not isinstance(form, dict) or not isinstance(form.get("id"), int):
        return None
    if set(form) == {"id", "data"} and isinstance(form["data"], str):
        return form["data"].encode("utf-8")
    if set(form) == {"id", "data_hex"} and isinstance(form["data_hex"], str) and _HEX.match(form["data_hex"]):
        return bytes.fromhex(form["data_hex"])
    return None


def _query(i: int, key: str, arg: Any, expect: Dict[str, Any]) -> None:
    extra = set(expect) - QUERY_EXPECT[key]
    assert not extra, f"step {i}: {extra} is not a {key} expectation"
    if key == "parse_config":
        try:
            got = admission_config(arg)
        except ProtocolStateError as e:
            assert "config_error" in expect, f"step {i}: unexpected config error {e.code}"
            _check(f"step {i} config_error", {"code": e.code, "key": getattr(e, "key", None)},
                   expect["config_error"])
            return
        assert "config" in expect, f"step {i}: config accepted, expected {expect}"
        _check(f"step {i} config", got, expect["config"])
    elif key == "error_body":
        _check(f"step {i} value", admission_error_body(arg), expect["value"])
    else:
        _check(f"step {i} value", [list(p) for p in admission_response_headers()], expect["value"])


def run_admission(vector: Dict[str, Any]) -> None:
    machine = Admission(vector.get("config", {}))
    now = 0
    for i, step in enumerate(vector["steps"]):
        inp: Dict[str, Any] = dict(step["input"])
        expect: Dict[str, Any] = step["expect"]
        now = int(inp.pop("now", now))
        query = next((k for k in QUERY_EXPECT if k in inp), None)
        if query is not None:
            _query(i, query, inp[query], expect)
            continue
        for k in ("config", "config_error", "value"):
            assert k not in expect, f"step {i}: {k} is a query expectation"
        error: Optional[str] = None
        data = _body_bytes(inp["body"]) if set(inp) == {"body"} else None
        try:
            if data is not None:
                machine.body(now, inp["body"]["id"], data)
            else:
                machine.handle_input(now, inp)
        except ProtocolStateError as e:
            error = e.code
        outputs: List[Dict[str, Any]] = machine.drain_outputs()
        _check(f"step {i} error", error, expect.get("error"))
        _check(f"step {i} outputs", outputs, expect.get("outputs", []))
        if "timeout" in expect:
            _check(f"step {i} timeout", machine.poll_timeout(), expect["timeout"])
        if "runs" in expect:
            _check(f"step {i} runs", machine.runs, expect["runs"])
        if "pending" in expect:
            _check(f"step {i} pending", machine.pending_bodies, expect["pending"])
