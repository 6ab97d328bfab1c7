"""Hostile input never panics across the FFI boundary: every entry point fed random or
malformed data either succeeds or raises an ordinary ``Exception`` (a Rust panic would
be ``pyo3_runtime.PanicException``, a ``BaseException``, and fail these tests)."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, List

from stapel_runner_protocol import ConnectionState, LineFramer, decode
from stapel_runner_protocol.adapters import SubprocessTurnMachine
from stapel_runner_protocol.contract import GatewayMachine, parse_model
from stapel_runner_protocol.local import LocalRun
from stapel_runner_protocol.reducer import SessionReducer
from stapel_runner_protocol.session import HubSession

SEEDS = [
    b'{"type":"task.progress","task_id":"T","seq":1,"kind":"usage","payload":{"usage":{}}}',
    b'{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1"}',
    b'{"type":"result","text":"x","usage":{"output":1}}\n',
    b"stapel-seq-snapshot/1\n{}",
]


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


def never_panics(fn: Callable[[bytes], Any], inputs: List[bytes]) -> None:
    for data in inputs:
        try:
            fn(data)
        except Exception:
            pass


def test_random_bytes_everywhere() -> None:
    inputs = mutations(random.Random(7), 400)
    never_panics(lambda d: decode(d, validate=True), inputs)
    never_panics(lambda d: decode(d.decode("utf-8", "replace")), inputs)
    never_panics(lambda d: ConnectionState.restore(d), inputs)
    framer = LineFramer(32)
    machine = SubprocessTurnMachine(64)
    machine.start_turn("go")
    hub = HubSession()
    hub.connected(0)
    reducer = SessionReducer()
    run = LocalRun()

    def feed_framer(d: bytes) -> None:
        framer.push(d)
        framer.drain()

    def feed_machine(d: bytes) -> None:
        machine.feed_stdout(d)
        machine.drain()

    def feed_hub(d: bytes) -> None:
        hub.bytes(1, d + b"\n")
        hub.drain_outputs()

    def feed_run(d: bytes) -> None:
        run.controller_bytes(0, d + b"\n")
        run.drain_outputs()

    for fn in (feed_framer, feed_machine, feed_hub, feed_run):
        never_panics(fn, inputs)
    never_panics(lambda d: reducer.apply_line(d.decode("utf-8", "replace")), inputs)


def test_random_json_into_models_and_gateway() -> None:
    rng = random.Random(11)
    values: List[Any] = [None, True, -1, 2**70, 1.5, "", "x" * 100, [], {}, {"a": [1, {}]}]
    gateway = GatewayMachine({})
    for _ in range(300):
        doc = {k: rng.choice(values) for k in rng.sample(
            ["type", "request_id", "harness_profile_ref", "tool_calls", "code", "result", "x"],
            rng.randint(0, 4))}
        for name in ("ExecutionRequest", "HarnessProfile", "ToolCall", "GatewayResult"):
            try:
                parse_model(name, doc)
            except Exception:
                pass
        try:
            gateway.handle_input(0, doc)  # type: ignore[arg-type]  # fuzzed on purpose
            gateway.drain()
        except Exception:
            pass
        json.dumps(doc)  # the inputs themselves are plain JSON
