"""Hostile input never panics across the FFI boundary: every entry point fed random or
malformed data either succeeds or raises the documented error class with one of the
documented codes (a Rust panic would be ``pyo3_runtime.PanicException``, a
``BaseException``; any other exception type or code fails these tests too)."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any, Callable, Dict, List, Set, Type

from stapel_runner_protocol import (
    ConnectionState,
    LineError,
    LineFramer,
    ProtocolStateError,
    DecodeError,
    RunnerProtocolError,
    SchemaValidationError,
    UnknownMessageError,
    decode,
)
from stapel_runner_protocol.adapters import SubprocessTurnMachine
from stapel_runner_protocol.contract import GatewayMachine, parse_model
from stapel_runner_protocol.errors import ContractError, ReducerError
from stapel_runner_protocol.local import LocalRun
from stapel_runner_protocol.reducer import SessionReducer
from stapel_runner_protocol.session import HubSession

SEEDS = [
    b'{"type":"task.progress","task_id":"T","seq":1,"kind":"usage","payload":{"usage":{}}}',
    b'{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1"}',
    b'{"type":"result","text":"x","usage":{"output":1}}\n',
    b"stapel-seq-snapshot/1\n{}",
]

# The error classes and codes each entry point documents for bad input.
DECODE_ERRORS: Dict[Type[Exception], Set[str]] = {
    DecodeError: {"not_json", "duplicate_key", "not_object"},
    UnknownMessageError: {"unknown_type"},
    SchemaValidationError: {"schema_violation"},
}
RESTORE_ERRORS: Dict[Type[Exception], Set[str]] = {
    ProtocolStateError: {"not_a_snapshot", "unsupported_snapshot_version", "corrupt_snapshot"},
}
NONE: Dict[Type[Exception], Set[str]] = {}
REDUCER_CODES = {"invalid_event", "run_id_mismatch", "session_id_mismatch"}
CONTRACT_CODES = {"not_object", "unknown_field", "missing_field", "invalid_field", "sensitive_metadata"}
GATEWAY_CODES = {"unexpected_input", "too_many_tool_calls", "invalid_input"}



def mutations(rng: random.Random, n: int) -> List[bytes]:
    out: List[bytes] = []
    for _ in range(n):
        data = bytearray(rng.choice(SEEDS))
        for _ in range(rng.randint(1, 6)):
            op = rng.randint(0, 2)
            pos = rng.randint(0, len(data))
            if op == 0 and data:
                del data[min(pos, len(data) - 1)]
            elif op == 1:
                data[pos:pos] = bytes([rng.randint(0, 255)])
            else:
                data[pos:pos] = rng.choice([b"{", b"}", b'"', b"[", b"\n", b"\\u0000", b"9" * 30])
        out.append(bytes(data))
    return out


def outcomes(
    fn: Callable[[Any], Any], inputs: List[Any], allowed: Dict[Type[Exception], Set[str]]
) -> "Counter[Any]":
    """Run ``fn`` on every input; every exception must be exactly one of the ``allowed``
    classes (not a subclass of it) with one of its codes."""
    seen: "Counter[Any]" = Counter()
    for data in inputs:
        try:
            fn(data)
        except Exception as e:  # classified and asserted below
            cls = type(e)
            assert cls in allowed, f"unexpected {cls.__name__}: {e} (input {data!r})"
            code = getattr(e, "code", None)
            assert code in allowed[cls], f"{cls.__name__} with code {code!r}: {e} (input {data!r})"
            seen[(cls.__name__, code)] += 1
        else:
            seen["ok"] += 1
    return seen


def test_decode_random_bytes() -> None:
    inputs = mutations(random.Random(7), 400)
    got = outcomes(lambda d: decode(d, validate=True), inputs, DECODE_ERRORS)
    # The mutations reach every class of error.
    assert {k[0] for k in got if k != "ok"} == {c.__name__ for c in DECODE_ERRORS}, got
    text = outcomes(lambda d: decode(d.decode("utf-8", "replace")), inputs, DECODE_ERRORS)
    assert sum(n for k, n in text.items() if k != "ok") > 0, text


def test_restore_random_bytes() -> None:
    inputs = mutations(random.Random(7), 400)
    got = outcomes(ConnectionState.restore, inputs, RESTORE_ERRORS)
    assert got[("ProtocolStateError", "not_a_snapshot")] > 0, got


def test_framer_random_bytes() -> None:
    # Line errors are items, not exceptions; a push never raises before finish().
    framer = LineFramer(32)
    items: List[Any] = []

    def feed(d: bytes) -> None:
        items.extend(framer.push_all(d))

    outcomes(feed, mutations(random.Random(7), 400), NONE)
    codes = {i.code for i in items if isinstance(i, LineError)}
    assert codes == {"line_too_long", "invalid_utf8"}, codes
    assert all(isinstance(i, str) and len(i.encode()) <= 32 for i in items if not isinstance(i, LineError))


def test_machines_random_bytes() -> None:
    # Bad bytes from the peer are events or outputs of these machines, never exceptions.
    inputs = mutations(random.Random(7), 400)
    machine = SubprocessTurnMachine(64)
    machine.start_turn("go")
    hub = HubSession()
    hub.connected(0)
    run = LocalRun()

    def feed_machine(d: bytes) -> None:
        machine.feed_stdout(d)
        machine.drain()

    def feed_hub(d: bytes) -> None:
        hub.bytes(1, d + b"\n")
        hub.drain_outputs()

    def feed_run(d: bytes) -> None:
        run.controller_bytes(0, d + b"\n")
        run.drain_outputs()

    for fn in (feed_machine, feed_hub, feed_run):
        assert outcomes(fn, inputs, NONE)["ok"] == len(inputs)


def test_reducer_random_lines() -> None:
    reducer = SessionReducer()
    inputs = [d.decode("utf-8", "replace") for d in mutations(random.Random(7), 400)]
    got = outcomes(reducer.apply_line, inputs, {ReducerError: REDUCER_CODES})
    assert sum(n for k, n in got.items() if k != "ok") > 0, got


def test_random_json_into_models_and_gateway() -> None:
    rng = random.Random(11)
    values: List[Any] = [None, True, -1, 2**70, 1.5, "", "x" * 100, [], {}, {"a": [1, {}]}]
    gateway = GatewayMachine({})
    docs = []
    for _ in range(300):
        doc = {k: rng.choice(values) for k in rng.sample(
            ["type", "request_id", "harness_profile_ref", "tool_calls", "code", "result", "x"],
            rng.randint(0, 4))}
        json.dumps(doc)  # the inputs themselves are plain JSON
        docs.append(doc)
    models: "Counter[Any]" = Counter()
    for name in ("ExecutionRequest", "HarnessProfile", "ToolCall", "GatewayResult"):
        models += outcomes(lambda d: parse_model(name, d), docs, {ContractError: CONTRACT_CODES})

    def feed_gateway(d: Any) -> None:
        gateway.handle_input(0, d)
        gateway.drain()

    gw = outcomes(feed_gateway, docs, {ContractError: GATEWAY_CODES})
    assert sum(n for k, n in models.items() if k != "ok") > 0, models
    assert sum(n for k, n in gw.items() if k != "ok") > 0, gw
