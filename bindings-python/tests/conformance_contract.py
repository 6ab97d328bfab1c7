"""Area ``contract``: models, resolution, safety helpers and the gateway through the
public Python API (see conformance/README.md)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from conftest import json_equal
from stapel_runner_protocol import _native, contract
from stapel_runner_protocol.errors import AdapterError, ContractError, ResolutionRefused


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _check_error(i: int, got: Dict[str, Any], want: Dict[str, Any]) -> None:
    for key, value in want.items():
        _eq(f"step {i} error.{key}", got.get(key), value)


def _outcome(i: int, value: Any, error: Optional[Dict[str, Any]], expect: Dict[str, Any]) -> None:
    if error is None:
        assert "error" not in expect, f"step {i}: expected error {expect['error']}, got {value!r}"
        _eq(f"step {i} value", value, expect.get("value"))
    else:
        assert "error" in expect, f"step {i}: unexpected error {error}"
        _check_error(i, error, expect["error"])


def run_contract(vector: Dict[str, Any]) -> None:
    cfg = vector.get("config", {})
    gateway: Optional[contract.GatewayMachine] = None
    rein: Optional[contract.ReinSession] = None
    session_ids = _native.ReinSessionIds()
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        value: Any = None
        error: Optional[Dict[str, Any]] = None
        if "parse" in inp or "parse_catalog" in inp:
            try:
                if "parse" in inp:
                    value = contract.parse_model(inp["parse"]["model"], inp["parse"]["value"])
                else:
                    value = contract.parse_catalog(inp["parse_catalog"])
            except ContractError as e:
                error = {"code": e.code, "model": e.model, "field": e.field}
            _outcome(i, value, error, expect)
        elif "model_names" in inp:
            _outcome(i, list(contract.CONTRACT_MODELS), None, expect)
        elif "resolve" in inp:
            try:
                ok = contract.resolve(inp["resolve"], cfg.get("catalog", {}))
                value = {"profile_id": ok["profile"]["profile_id"],
                         "rein_id": ok["rein"]["rein_id"]}
            except ResolutionRefused as e:
                error = {"code": e.code, "reasons": e.reasons}
            if error is None:
                assert "refusal" not in expect, f"step {i}: expected refusal, got {value}"
                _eq(f"step {i} resolved", value, expect["resolved"])
            else:
                assert "refusal" in expect, f"step {i}: unexpected refusal {error}"
                _check_error(i, error, expect["refusal"])
        elif "safe_identifier" in inp:
            text, redacted = contract.safe_identifier(inp["safe_identifier"], inp.get("kind"))
            _outcome(i, {"text": text, "redacted": redacted}, None, expect)
        elif "looks_like_credential" in inp:
            _outcome(i, contract.looks_like_credential(inp["looks_like_credential"]), None, expect)
        elif "is_sensitive_key" in inp:
            _outcome(i, contract.is_sensitive_key(inp["is_sensitive_key"]), None, expect)
        elif "is_credential_reference" in inp:
            _outcome(i, contract.is_credential_reference(inp["is_credential_reference"]), None,
                     expect)
        elif "gateway" in inp:
            if gateway is None:
                gateway = contract.GatewayMachine(
                    cfg.get("catalog", {}),
                    max_tool_calls=cfg.get("max_tool_calls"),
                    max_evidence_refs=cfg.get("max_evidence_refs"),
                    max_evidence_artifacts=cfg.get("max_evidence_artifacts"),
                )
            try:
                gateway.handle_input(int(inp.get("now_ms", 0)), inp["gateway"])
            except ContractError as e:
                error = {"code": e.code}
            outputs = gateway.drain()
            if error is None:
                assert "error" not in expect, f"step {i}: expected error {expect['error']}"
            else:
                assert "error" in expect, f"step {i}: unexpected error {error}"
                _check_error(i, error, expect["error"])
            _eq(f"step {i} outputs", outputs, expect.get("outputs", []))
            if "finished" in expect:
                _eq(f"step {i} finished", gateway.finished, expect["finished"])
            if "stage" in expect:
                _eq(f"step {i} stage", gateway.stage, expect["stage"])
            _eq(f"step {i} poll_timeout", gateway.poll_timeout(), None)
        elif "rein_role_spec" in inp:
            _outcome(i, _native.rein_role_spec(inp["rein_role_spec"]), None, expect)
        elif "rein_session_map" in inp:
            m = inp["rein_session_map"]
            _outcome(i, _native.rein_session_map(m["n"], m["sandbox"]), None, expect)
        elif "rein_initial_prompt" in inp:
            _outcome(i, _native.rein_initial_prompt(inp["rein_initial_prompt"]), None, expect)
        elif "rein_start" in inp:
            rein = contract.ReinSession(inp["rein_start"], int(inp.get("now_ms", 0)))
            _outcome(i, None, None, expect)
        elif "rein_tool_call_prompt" in inp:
            assert rein is not None, f"step {i}: no rein_start"
            _outcome(i, rein.tool_call_prompt(inp["rein_tool_call_prompt"]), None, expect)
        elif "rein_turn" in inp:
            assert rein is not None, f"step {i}: no rein_start"
            try:
                rein.record_turn(inp["rein_turn"])
            except AdapterError as e:
                error = {"code": e.code}
            _outcome(i, None, error, expect)
        elif "rein_open_session" in inp:
            _outcome(i, session_ids.open(inp["rein_open_session"]), None, expect)
        elif "rein_tool_result" in inp:
            _outcome(i, _native.rein_tool_result(inp["rein_tool_result"]), None, expect)
        elif "rein_turn_error" in inp:
            turn_error = inp["rein_turn_error"]
            _outcome(i, _native.rein_turn_error_result(turn_error["code"], turn_error["message"]),
                     None, expect)
        elif "rein_summary" in inp:
            assert rein is not None, f"step {i}: no rein_start"
            _outcome(i, rein.summary(int(inp.get("now_ms", 0))), None, expect)
        else:
            raise AssertionError(f"step {i}: unknown input {inp}")
        # What the rein session counts after the step: the token split summed so far (the
        # summary's tokens) and the tool calls counted so far.
        if "usage" in expect or "tool_calls" in expect:
            assert rein is not None, f"step {i}: usage and tool_calls need a rein_start"
            if "usage" in expect:
                _eq(f"step {i} usage", rein.summary(0)["tokens"], expect["usage"])
            if "tool_calls" in expect:
                _eq(f"step {i} tool_calls", rein.tool_calls, expect["tool_calls"])
