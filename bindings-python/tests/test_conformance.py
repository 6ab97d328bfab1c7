"""Runs the conformance vectors (``conformance/vectors/<area>/*.json``) through the
public Python API and reports ``conformance[python]: N vectors passed``.

Every vector file is collected and runs as one test. A vector of an area this package
has no runner for fails (counted separately as "not supported"): a binding that skips a
vector fails (DESIGN §5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from conformance_adapter import run_adapter
from conformance_admission import run_admission
from conformance_lease import run_lease
from conformance_contract import run_contract
from conformance_errors import run_errors
from conformance_host import run_host
from conformance_link import run_link
from conformance_local import run_local
from conformance_reducer import run_reducer
from conformance_runner_task import run_runner_task
from conformance_sequencing import run_sequencing
from conformance_session import run_session
from conftest import CONFORMANCE, conformance_dir, json_equal
from stapel_runner_protocol import (
    LineError,
    LineFramer,
    ProtocolStateError,
    RunnerProtocolError,
    SchemaValidationError,
    decode,
    encode,
    validation,
)

ROOT = conformance_dir() / "vectors"
FILES = sorted(ROOT.glob("*/*.json"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _text_or_hex(step_input: Dict[str, Any], key: str) -> Optional[bytes]:
    if key in step_input:
        return str(step_input[key]).encode("utf-8")
    if f"{key}_hex" in step_input:
        return bytes.fromhex(step_input[f"{key}_hex"])
    return None


def _check(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


# --- area wire -------------------------------------------------------------------------


def _error_json(e: RunnerProtocolError) -> Dict[str, Any]:
    violations = getattr(e, "violations", [])
    return {
        "code": e.code,
        "violations": [{"location": v.location, "rule": v.rule} for v in violations],
        "lines": getattr(e, "errors", None),
    }


def _nested(depth: int) -> List[Any]:
    """``depth`` nested empty lists (``[]`` is one level)."""
    value: List[Any] = []
    for _ in range(1, depth):
        value = [value]
    return value


def _with_nest(inp: Dict[str, Any], obj: Any) -> Any:
    """``obj`` with the ``nest`` input's generated value added (vector files cannot nest
    deeply themselves)."""
    if "nest" in inp and isinstance(obj, dict):
        obj = dict(obj)
        obj[inp["nest"]["key"]] = _nested(int(inp["nest"]["depth"]))
    return obj


def run_wire(vector: Dict[str, Any]) -> None:
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        validate = bool(inp.get("validate", False))
        raw = _text_or_hex(inp, "decode")
        msg: Any = None
        try:
            if raw is not None:
                msg = decode(raw, validate=validate)
            elif "decode_utf16_hex" in inp:
                # UTF-16 code units (big-endian), which can hold a lone surrogate.
                text = bytes.fromhex(inp["decode_utf16_hex"]).decode("utf-16-be", "surrogatepass")
                msg = decode(text, validate=validate)
            elif "check" in inp:
                validation.validate(inp["check"], inp["as"])
            elif "encode" in inp:
                msg = decode(_with_nest(inp, inp["encode"]), validate=validate)
            elif "build" in inp:
                # Declared fields first, then unknown fields set through `extra`.
                msg = decode(inp["build"]["fields"], validate=validate)
                msg.extra = dict(_with_nest(inp, inp["build"]["extra"]))
            else:
                raise AssertionError(f"step {i}: unknown input {inp}")
            # Every message a step produces is encoded (encode refuses what decode would).
            encoded = encode(msg) if msg is not None else None
        except RunnerProtocolError as e:
            assert "error" in expect, f"step {i}: unexpected error {e.code}: {e}"
            got = _error_json(e)
            _check(f"step {i} error code", got["code"], expect["error"]["code"])
            if "violations" in expect["error"]:
                _check(f"step {i} violations", got["violations"], expect["error"]["violations"])
            if "lines" in expect["error"]:
                _check(f"step {i} lines", got["lines"], expect["error"]["lines"])
            if "text" in expect["error"]:
                _check(f"step {i} text", str(e), expect["error"]["text"])
            continue
        assert "error" not in expect, f"step {i}: expected {expect['error']}, got {encoded}"
        if msg is None:
            # A `check` step: only its type is known on success.
            if "type" in expect:
                _check(f"step {i} type", inp["as"], expect["type"])
            continue
        if "type" in expect:
            _check(f"step {i} type", msg.ARTIFACT, expect["type"])
        if "message" in expect:
            _check(f"step {i} message", msg.to_dict(), expect["message"])
        if "encoded" in expect:
            assert encoded == expect["encoded"], f"step {i} encoded: {encoded}"


# --- area framing ----------------------------------------------------------------------


def _item_json(item: Any) -> Dict[str, Any]:
    if isinstance(item, LineError):
        return {"error": item.code, "line_number": item.line_number}
    return {"line": item}


def _check_bounds(i: int, framer: LineFramer) -> None:
    assert framer.buffered_bytes <= framer.max_line_bytes, f"step {i}: buffered too much"
    assert framer.ready <= framer.max_ready_lines, f"step {i}: too many lines ready"


def run_framing(vector: Dict[str, Any]) -> None:
    config = vector.get("config", {})
    framer = LineFramer(
        config.get("max_line_bytes", 65536),
        skip_empty_lines=config.get("skip_empty_lines", True),
        max_ready_lines=config.get("max_ready_lines"),
        max_ready_bytes=config.get("max_ready_bytes"),
    )
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        output: List[Dict[str, Any]] = []
        error: Optional[str] = None
        accepted: Optional[int] = None
        data = _text_or_hex(inp, "push")
        push_all = _text_or_hex(inp, "push_all")
        if data is not None and inp.get("drain", True) is False:
            # One push, nothing pulled: what the bounded queue takes.
            try:
                accepted = framer.push(data)
            except ProtocolStateError as e:
                error = e.code
            _check_bounds(i, framer)
        elif data is not None:
            size = int(inp.get("chunk_size") or 0)
            chunks = [data[j : j + size] for j in range(0, len(data), size)] if size > 0 else [data]
            for chunk in chunks:
                try:
                    while True:
                        taken = framer.push(chunk)
                        _check_bounds(i, framer)
                        output.extend(_item_json(x) for x in framer)
                        chunk = chunk[taken:]
                        if not chunk:
                            break
                        assert taken > 0, f"step {i}: push into a drained framer took nothing"
                except ProtocolStateError as e:
                    error = e.code
                    break
        elif push_all is not None:
            try:
                output.extend(_item_json(x) for x in framer.push_all(push_all))
            except ProtocolStateError as e:
                error = e.code
        elif inp.get("pull"):
            output.extend(_item_json(x) for x in framer)
        elif inp.get("finish"):
            framer.finish()
            output.extend(_item_json(x) for x in framer)
        else:
            raise AssertionError(f"step {i}: unknown input {inp}")
        _check(f"step {i} output", output, expect.get("output", []))
        _check(f"step {i} error", error, expect.get("error"))
        if "accepted" in expect:
            _check(f"step {i} accepted", accepted, expect["accepted"])
        if "ready" in expect:
            _check(f"step {i} ready", framer.ready, expect["ready"])
        if "buffered_bytes" in expect:
            _check(f"step {i} buffered_bytes", framer.buffered_bytes, expect["buffered_bytes"])


RUNNERS: Dict[str, Callable[[Dict[str, Any]], None]] = {
    "wire": run_wire,
    "framing": run_framing,
}

RUNNERS["sequencing"] = run_sequencing
RUNNERS["adapter"] = run_adapter
RUNNERS["session"] = run_session
RUNNERS["reducer"] = run_reducer
RUNNERS["local"] = run_local
RUNNERS["contract"] = run_contract
RUNNERS["host"] = run_host
RUNNERS["runner_task"] = run_runner_task
RUNNERS["link"] = run_link
RUNNERS["errors"] = run_errors
RUNNERS["admission"] = run_admission
RUNNERS["store"] = run_session
RUNNERS["lease"] = run_lease


def test_vectors_exist() -> None:
    assert FILES, f"no conformance vectors under {ROOT}"


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_vector(path: Path) -> None:
    rel = _rel(path)
    vector = json.loads(path.read_text(encoding="utf-8"))
    area = vector.get("area")
    assert area == rel.split("/")[0], f"area {area!r} does not match the folder"
    assert vector.get("steps"), "vector has no steps"
    # Every step checks something (conformance/README.md, "Vector format").
    for i, step in enumerate(vector["steps"]):
        expect = step.get("expect")
        assert isinstance(expect, dict) and expect, f"step {i}: `expect` is missing or empty"
    runner = RUNNERS.get(area)
    if runner is None:
        CONFORMANCE["unsupported"].append(rel)
        pytest.fail(f"area {area!r} is not supported by the Python package")
    try:
        runner(vector)
    except BaseException:
        CONFORMANCE["failed"].append(rel)
        raise
    CONFORMANCE["passed"].append(rel)


def test_schema_violation_error_is_public() -> None:
    # The runner above relies on these attributes of the public error class.
    e = SchemaValidationError("x")
    assert e.code == "schema_violation" and e.violations == [] and e.errors == []
