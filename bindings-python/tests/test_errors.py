"""One error table: ``errors.py`` is generated from the core's table (drift check), and
real core errors raised through the public API are the class the table names
(``error_class(kind, code)``) with the core's code — the same class name and code the
Node and Kotlin bindings raise for them."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest

from stapel_runner_protocol import (
    ConfigError,
    ConnectionState,
    Hello,
    PanicError,
    ProtocolStateError,
    RunnerProtocolError,
    TaskCancel,
    TaskProgress,
    decode,
    errors,
)
from stapel_runner_protocol.contract import parse_model
from stapel_runner_protocol.link import HubLink, RunnerLink
from stapel_runner_protocol.local import LocalRun
from stapel_runner_protocol.reducer import SessionReducer
from stapel_runner_protocol.session import HubSession, RunnerSession
from stapel_runner_protocol.transport_ws import HubHost, SocketHost
from stapel_runner_protocol.usage import usage_from_mapping

HERE = Path(__file__).resolve().parent
GENERATOR = HERE.parent / "scripts" / "gen_errors.py"


def test_errors_py_is_generated_from_the_core_table() -> None:
    spec = importlib.util.spec_from_file_location("gen_errors", GENERATOR)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.render(gen.table()) == gen.TARGET.read_text(encoding="utf-8"), (
        "errors.py is stale; regenerate with: "
        "bindings-python/.venv/bin/python bindings-python/scripts/gen_errors.py")
    # and the check mode says the same
    subprocess.run([sys.executable, str(GENERATOR), "--check"], check=True)


def test_classes_follow_the_table() -> None:
    from stapel_runner_protocol._native import error_table

    table = error_table()
    for c in table["classes"]:
        cls = getattr(errors, c["name"])
        parent = cls.__bases__[0]
        assert (parent.__name__ if parent is not Exception else None) == c["parent"]
        assert c["doc"] in " ".join((cls.__doc__ or "").split())
    for r in table["rules"]:
        assert errors.error_class(r["kind"], r["code"] or "any_code") == r["class"] or \
            r["code"] is None
    # The one documented compatibility exception: a ConfigError is also a ValueError.
    assert [b for c in table["classes"] for b in getattr(errors, c["name"]).__bases__[1:]] \
        == [ValueError]


def _hello() -> Hello:
    return Hello(project_id="p", runner_version="1")


def _raises(fn: Callable[[], Any]) -> RunnerProtocolError:
    try:
        fn()
    except RunnerProtocolError as e:
        return e
    raise AssertionError("no error raised")


def _full_outbox() -> None:
    state = ConnectionState("runner", max_outbox_frames=1)
    state.emit(TaskProgress(task_id="T", attempt=1, kind="state"))
    state.emit(TaskProgress(task_id="T", attempt=1, kind="state"))


def _stalled_link() -> None:
    link = RunnerLink(_hello(), {"session": {"sequencing": {"max_outbox_frames": 1}}})
    link.send(0, TaskProgress(task_id="T", attempt=1, kind="state"))
    link.send(0, TaskProgress(task_id="T", attempt=1, kind="state"))


def _panicking_link() -> None:
    link = HubLink()
    link._panic_on_next_call()
    link.tick(0)


# (kind, what, call): the core error each call raises, through the public API.
CASES: List[Tuple[str, str, Callable[[], Any]]] = [
    ("decode", "unknown_type", lambda: decode('{"type":"task.nope"}')),
    ("decode", "not_json", lambda: decode("{")),
    ("decode", "schema_violation",
     lambda: decode('{"schema_version":1,"type":"task.cancel","task_id":""}', validate=True)),
    ("config", "link: unknown_key", lambda: HubLink({"close_timeout": 1})),
    ("config", "session: unknown_key",
     lambda: RunnerSession(_hello(), sequencing={"x": 1})),  # type: ignore[arg-type]
    ("config", "reducer: unknown_key",
     lambda: SessionReducer({"nope": 1})),  # type: ignore[arg-type]
    ("config", "local: unknown_key", lambda: LocalRun({"nope": 1})),  # type: ignore[arg-type]
    ("config", "host: unknown_key", lambda: SocketHost({"nope": 1})),
    ("config", "hub host: wrong_type", lambda: HubHost({"max_idle_runners": "3"})),
    ("sequencing", "backpressure", _full_outbox),
    ("session", "backpressure (link send)", _stalled_link),
    ("session", "not_durable", lambda: HubSession().confirm(0, "T", 1, 1)),
    ("link", "wrong_side", lambda: HubLink().start(0)),
    ("link", "invalid_close_code", lambda: RunnerLink(_hello()).stop(0, 1005)),
    ("snapshot", "not_a_snapshot", lambda: ConnectionState.restore(b"nope")),
    ("reducer", "invalid_event",
     lambda: SessionReducer().apply({"nope": 1})),  # type: ignore[typeddict-item,typeddict-unknown-key]
    ("adapter", "invalid_usage", lambda: usage_from_mapping({"bogus": 1})),
    ("contract", "invalid model", lambda: parse_model("HarnessProfile", {})),
    ("panic", "panic", _panicking_link),
]


@pytest.mark.parametrize("kind,what,call", CASES, ids=[f"{k}-{w}" for k, w, _ in CASES])
def test_a_core_error_is_the_class_the_table_names(kind: str, what: str,
                                                   call: Callable[[], Any]) -> None:
    e = _raises(call)
    assert isinstance(e.code, str) and e.code
    assert type(e).__name__ == errors.error_class(kind, e.code), (kind, e.code, type(e))
    assert type(e) is errors.class_for(kind, e.code)


def test_one_config_error_everywhere() -> None:
    """The same core ConfigError is one class wherever a config is read (before, Python
    raised ValueError, ProtocolStateError or ReducerError for it), with code and key;
    it stays a ValueError and a ProtocolStateError for code written against either."""
    for make in (lambda: RunnerSession(_hello(), sequencing={"max_streams": -1}),
                 lambda: HubLink({"session": {"sequencing": {"max_streams": -1}}}),
                 lambda: RunnerLink(_hello(), '{"session": {"sequencing": {"max_streams": -1}}}')):
        e = _raises(make)
        assert type(e) is ConfigError and isinstance(e, ValueError)
        assert isinstance(e, ProtocolStateError)
        assert (e.code, e.key) == ("out_of_range", "sequencing.max_streams") or \
            (e.code, e.key) == ("out_of_range", "session.sequencing.max_streams")


def test_a_transport_error_event_is_the_tables_class() -> None:
    """A link's error event reaches the application as the table's class of kind
    ``transport`` with the link's code."""
    from stapel_runner_protocol.transport_ws import RunnerClient

    async def main() -> Any:
        # a port nobody listens on: connect_failed, then the core's backoff
        client = RunnerClient("ws://127.0.0.1:9", hello=_hello(), seed=1,
                              backoff_initial_ms=10_000)
        await client.start()
        while True:
            kind, value = await asyncio.wait_for(client.recv(), 10)
            if kind == "error":
                break
        await client.stop()
        return value

    pytest.importorskip("websockets")
    e = asyncio.run(main())
    assert type(e).__name__ == errors.error_class("transport", e.code) == "TransportError"
    assert e.code == "connect_failed" and e.status is None


def test_send_refusal_keeps_the_message() -> None:
    link = HubLink({"session": {"sequencing": {"max_outbox_frames": 1}}})
    link.send(0, TaskCancel(task_id="T", reason="a"))
    refused = TaskCancel(task_id="T", reason="b")
    with pytest.raises(ProtocolStateError) as info:
        link.send(0, refused)
    assert info.value.code == "backpressure" and refused.seq == 0  # not stamped
    kinds = [v[0] for k, v in link.drain_outputs() if k == "event" and isinstance(v, tuple)]
    assert kinds == ["stalled"]  # once
    with pytest.raises(PanicError):
        _panicking_link()
