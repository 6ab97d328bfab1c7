"""Code written the way a user of the published pure-Python stapel-runner-protocol 0.1.1
writes it runs unchanged against this package (issue 13, "Drop-in API"). Each test uses
0.1.1's public names, signatures and defaults only, and checks the behaviour 0.1.1
documents — plus, where this package deliberately differs (bounded windows with typed
errors), that difference."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import pytest
from stapel_taskspecs import UsageSplit

import stapel_runner_protocol as srp
from stapel_runner_protocol import (
    AdapterError,
    ConnectionState,
    Hello,
    InboxTracker,
    OutboxLog,
    ProtocolStateError,
    RoleSpec,
    SubprocessAdapter,
    TaskAssign,
    TaskCancel,
    TaskChannel,
    TaskProgress,
    usage_from_anthropic,
    usage_from_mapping,
)
from stapel_runner_protocol import state as state_module
from stapel_runner_protocol import validation
from stapel_runner_protocol.agent_sdk_adapter import extract_text, extract_usage

# 0.1.1's package-level names (its ``__all__``).
NAMES_011 = """Hello TaskAssign TaskProgress TaskReportMessage TaskCancel Ping Pong MESSAGES
encode decode to_frame ConnectionState TaskChannel OutboxLog InboxTracker is_sequenced
RoleSpec TurnResult Session HarnessAdapter SubprocessAdapter SubprocessSession
AgentSdkAdapter AgentSdkSession usage_from_anthropic usage_from_mapping validate is_valid
iter_errors load_schema message_types SCHEMA_FILES SCHEMA_VERSION PROTOCOL_VERSION
RunnerProtocolError SchemaValidationError UnknownMessageError ProtocolStateError
AdapterError AdapterUnavailableError""".split()


def test_every_011_package_name_is_exported() -> None:
    missing = [n for n in NAMES_011 if not hasattr(srp, n)]
    assert missing == []
    assert set(NAMES_011) <= set(srp.__all__)


def test_every_011_submodule_name_exists() -> None:
    import importlib

    names = {
        "state": ["ConnectionState", "TaskChannel", "OutboxLog", "InboxTracker",
                  "is_sequenced", "SEQUENCED_TYPES"],
        "validation": ["validate", "is_valid", "iter_errors", "load_schema", "message_types",
                       "SCHEMA_FILES", "SCHEMA_VERSION", "PROTOCOL_VERSION"],
        "usage": ["usage_from_anthropic", "usage_from_mapping"],
        "adapters": ["RoleSpec", "TurnResult", "Session", "HarnessAdapter"],
        "subprocess_adapter": ["SubprocessAdapter", "SubprocessSession"],
        "agent_sdk_adapter": ["AgentSdkAdapter", "AgentSdkSession", "build_agent_options",
                              "extract_text", "extract_usage"],
        "transport_ws": ["RunnerConnection", "iter_messages", "send", "recv"],
        "messages": ["Hello", "TaskAssign", "TaskProgress", "TaskReportMessage", "TaskCancel",
                     "Ping", "Pong", "MESSAGES", "PROTOCOL_VERSION"],
        "errors": ["RunnerProtocolError", "SchemaValidationError", "UnknownMessageError",
                   "ProtocolStateError", "AdapterError", "AdapterUnavailableError"],
    }
    missing = [f"{m}.{n}" for m, ns in names.items()
               for n in ns if not hasattr(importlib.import_module(f"stapel_runner_protocol.{m}"), n)]
    assert missing == []


# --- validation --------------------------------------------------------------------

def _progress(**over: Any) -> Dict[str, Any]:
    frame: Dict[str, Any] = {"schema_version": 1, "type": "task.progress", "task_id": "T-1",
                             "seq": 1, "kind": "state", "payload": {}}
    frame.update(over)
    return frame


def test_is_valid_holds_the_named_schemas_type_and_version() -> None:
    assert validation.is_valid(_progress(), "task.progress")
    assert not validation.is_valid(_progress(type="task.assign"), "task.progress")
    assert not validation.is_valid(_progress(schema_version=2), "task.progress")
    errors = validation.iter_errors(_progress(type="task.assign"), "task.progress")
    assert len(errors) == 1 and errors[0].startswith("type:")
    with pytest.raises(srp.SchemaValidationError) as info:
        validation.validate(_progress(type="task.assign"), "task.progress")
    assert info.value.errors == errors


# --- state: standalone pieces --------------------------------------------------------

def test_outbox_log_standalone() -> None:
    log = OutboxLog()
    a = log.emit(TaskCancel(task_id="T-1", reason="a"))
    b = log.emit(TaskCancel(task_id="T-1", reason="b"))
    assert (a.seq, b.seq, log.last_seq) == (1, 2, 2)
    assert [m.to_dict()["reason"] for m in log.since(0)] == ["a", "b"]
    assert [m.seq for m in log.since(1)] == [2]
    log.ack(1)
    assert [m.seq for m in log.since(0)] == [2]
    assert log.last_seq == 2  # ack never moves numbering
    assert log.emit(TaskCancel(task_id="T-1", reason="c")).seq == 3


def test_outbox_log_is_bounded_with_typed_errors() -> None:
    log = OutboxLog(max_frames=1)
    log.emit(TaskCancel(task_id="T-1", reason="a"))
    late = TaskCancel(task_id="T-1", reason="b")
    with pytest.raises(ProtocolStateError) as info:
        log.emit(late)
    assert info.value.code == "backpressure" and late.seq == 0
    log.ack(1)
    assert log.emit(late).seq == 2


def test_inbox_tracker_standalone() -> None:
    inbox = InboxTracker()
    assert inbox.last_seq == 0
    assert inbox.receive(1) is True
    assert inbox.receive(1) is False  # duplicate
    assert inbox.receive(3) is True and inbox.last_seq == 1  # a gap holds the mark
    assert inbox.receive(2) is True and inbox.last_seq == 3  # filled: it jumps


def test_inbox_tracker_is_bounded_with_typed_errors() -> None:
    inbox = InboxTracker(window=4)
    with pytest.raises(ProtocolStateError) as info:
        inbox.receive(6)
    assert info.value.code == "beyond_window" and inbox.last_seq == 0
    with pytest.raises(ProtocolStateError) as info:
        inbox.receive(0)
    assert info.value.code == "invalid_seq"


def test_task_channel_standalone() -> None:
    hub, runner = TaskChannel("T-1"), TaskChannel("T-1")
    c1 = hub.emit(TaskCancel(task_id="T-1", reason="a"))
    c2 = hub.emit(TaskCancel(task_id="T-1", reason="b"))
    assert runner.receive(c1) is True and runner.receive(c1) is False
    assert runner.last_received == 1 and runner.inbox.last_seq == 1
    assert [m.seq for m in hub.replay(runner.last_received)] == [c2.seq]
    assert hub.outbox.last_seq == 2 and hub.task_id == "T-1"


def test_state_views_are_read_only_copies() -> None:
    hub = ConnectionState("hub")
    hub.emit(TaskCancel(task_id="T-1", reason="a"))
    view = hub.channel("T-1").outbox
    assert view.last_seq == 1
    with pytest.raises(TypeError):
        view.emit(TaskCancel(task_id="T-1", reason="b"))
    assert [m.seq for m in hub.channel("T-1").replay(0)] == [1]


def test_a_state_channels_outbox_ack_trims_the_state() -> None:
    """0.1.1's hub trims its replay after a ``hello.resume`` with
    ``state.channel(task_id).outbox.ack(last)`` (the seed-only hub in
    conformance/peers does): the state's stream is trimmed, numbering goes on."""
    hub = ConnectionState("hub")
    for r in "abc":
        hub.emit(TaskCancel(task_id="T-1", reason=r))
    hub.channel("T-1").outbox.ack(2)
    assert hub.outbox_frames == 1
    assert [m.seq for m in hub.replay_for({"T-1": 0})["T-1"]] == [3]
    next(iter(hub.channels.values())).outbox.ack(3)
    assert hub.outbox_frames == 0
    assert hub.emit(TaskCancel(task_id="T-1", reason="d")).seq == 4


def test_readme_resume_example_and_keyword_resume_map() -> None:
    hub, runner = ConnectionState("hub"), ConnectionState("runner")
    c1 = hub.emit(TaskCancel(task_id="T-1", reason="a"))
    c2 = hub.emit(TaskCancel(task_id="T-1", reason="b"))
    runner.receive(c1)
    resume = runner.resume_map()
    assert resume == {"T-1": 1}
    replay = hub.replay_for(resume_map=resume)
    assert [m.to_dict()["reason"] for m in replay["T-1"]] == [c2.reason]
    assert state_module.SEQUENCED_TYPES == frozenset(
        {"task.assign", "task.cancel", "task.progress", "task.report"})


# --- usage ----------------------------------------------------------------------------

def test_usage_from_mapping_accepts_a_partial_split() -> None:
    u = usage_from_mapping({"cache_read": 1, "output": 2})
    assert isinstance(u, UsageSplit)
    assert u.to_dict() == {"cache_read": 1, "cache_write": 0, "fresh_input": 0, "output": 2,
                           "thinking": 0}
    assert usage_from_mapping({}).total_tokens == 0
    assert usage_from_mapping(None).total_tokens == 0
    for bad in ({"output": 2, "outptu": 1}, {"output": -1}):
        with pytest.raises(AdapterError) as info:
            usage_from_mapping(bad)
        assert info.value.code == "invalid_usage"


# --- subprocess adapter with an injected fake child ------------------------------------

class FakeChild:
    """A 0.1.1-style fake child: text-mode stdin/stdout, poll/terminate/wait."""

    def __init__(self, lines: List[Dict[str, Any]]) -> None:
        self.stdin = io.StringIO()
        self.written: List[str] = []
        self.stdin.write = self._write  # type: ignore[method-assign]
        self.stdout = io.StringIO("".join(json.dumps(line) + "\n" for line in lines))
        self.returncode: Optional[int] = None
        self.calls: List[str] = []

    def _write(self, s: str) -> int:
        self.written.append(s)
        return len(s)

    def poll(self) -> Optional[int]:
        return self.returncode

    def terminate(self) -> None:
        self.calls.append("terminate")
        self.returncode = -15

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        self.calls.append("wait")
        return self.returncode


def test_subprocess_adapter_drives_an_injected_child() -> None:
    children: List[FakeChild] = []

    def spawn(role_spec: RoleSpec) -> FakeChild:
        child = FakeChild([{"type": "progress", "step": 1},
                           {"type": "result", "text": "done", "usage": {"output": 5}}])
        children.append(child)
        return child

    progress: List[Dict[str, Any]] = []
    adapter = SubprocessAdapter(spawn=spawn, on_progress=progress.append)
    session = adapter.open_session(RoleSpec.from_invocation({"backend": "x"}))
    result = session.turn("implement the task")
    assert result.text == "done" and result["usage"].output == 5
    assert progress == [{"type": "progress", "step": 1}]
    child = children[0]
    assert [json.loads(line) for line in child.written] == [
        {"type": "turn", "prompt": "implement the task"}]
    assert all(isinstance(line, str) for line in child.written)  # text, as 0.1.1 wrote
    session.close()
    assert "terminate" in child.calls and child.calls[-1] == "wait"
    assert child.stdin.closed
    session.close()  # idempotent
    assert child.calls.count("terminate") == 1
    with pytest.raises(AdapterError):
        session.turn("again")


def test_subprocess_turn_result_raw_is_the_result_line() -> None:
    line = {"type": "result", "text": "done", "usage": {"output": 5},
            "session_id": "s-1", "cost_usd": 0.25}
    child = FakeChild([{"type": "progress", "step": 1}, line,
                       {"type": "result", "text": "again", "usage": {"output": 1}}])
    session = SubprocessAdapter(spawn=lambda role: child).open_session(RoleSpec())
    result = session.turn("p")
    # As 0.1.1 code reads it: the raw answer is the whole result line.
    assert result.raw == line and result.raw["session_id"] == "s-1"
    second = session.turn("q")
    assert second.raw == {"type": "result", "text": "again", "usage": {"output": 1}}
    assert result.raw == line  # the first result keeps its own line
    session.close()


def test_subprocess_child_that_exits_on_stdin_close_is_not_terminated() -> None:
    child = FakeChild([])
    child.returncode = 0  # already exited: poll() reports it
    adapter = SubprocessAdapter(spawn=lambda role: child)
    adapter.open_session(RoleSpec()).close()
    assert "terminate" not in child.calls


def test_subprocess_usage_mapper_keyword() -> None:
    child = FakeChild([{"type": "result", "text": "t",
                        "usage": {"input_tokens": 3, "cache_read_input_tokens": 4,
                                  "output_tokens": 5}}])
    adapter = SubprocessAdapter(spawn=lambda role: child, usage_mapper=usage_from_anthropic)
    result = adapter.oneshot(RoleSpec(), "p")
    assert (result.usage.fresh_input, result.usage.cache_read, result.usage.output) == (3, 4, 5)
    with pytest.raises(TypeError):
        SubprocessAdapter(spawn=lambda role: child, usage_mapper=42)  # type: ignore[arg-type]


def test_subprocess_custom_usage_mapper() -> None:
    # A harness with its own usage shape and the caller's own mapping, as 0.1.1 ran it:
    # the mapper gets the result line's usage ({} when it has none) and its split is the
    # turn's usage.
    seen: List[Any] = []

    def my_mapper(usage: Any) -> UsageSplit:
        seen.append(usage)
        return UsageSplit(cache_read=0, cache_write=0, fresh_input=usage.get("in", 0),
                          output=usage.get("out", 0), thinking=0)

    line = {"type": "result", "text": "t", "usage": {"in": 7, "out": 2}, "model": "m"}
    child = FakeChild([line, {"type": "result", "text": "u"}])
    session = SubprocessAdapter(spawn=lambda role: child,
                                usage_mapper=my_mapper).open_session(RoleSpec())
    result = session.turn("p")
    assert (result.usage.fresh_input, result.usage.output, result.text) == (7, 2, "t")
    assert result.raw == line
    second = session.turn("q")  # no usage on the line: the mapper gets {}
    assert (second.usage.fresh_input, second.usage.output) == (0, 0)
    assert seen == [{"in": 7, "out": 2}, {}]
    session.close()

    # What the mapper raises comes out of turn() as it is; what it returns must be a split.
    # After it raised the session goes on: the machine's outputs were all performed.
    calls: List[Any] = []

    def flaky(usage: Any) -> UsageSplit:
        calls.append(usage)
        if len(calls) == 1:
            raise KeyError("tokens")
        return my_mapper(usage)

    child = FakeChild([line, line])
    session = SubprocessAdapter(spawn=lambda role: child,
                                usage_mapper=flaky).open_session(RoleSpec())
    with pytest.raises(KeyError):
        session.turn("p")
    again = session.turn("q")
    assert (again.text, again.usage.fresh_input) == ("t", 7)
    session.close()
    assert "terminate" in child.calls
    child = FakeChild([line])
    with pytest.raises(TypeError):
        SubprocessAdapter(spawn=lambda role: child,
                          usage_mapper=lambda u: {"output": 1}).oneshot(RoleSpec(), "p")


def test_subprocess_custom_usage_mapper_with_a_real_child(tmp_path: Any) -> None:
    # The adapter's own spawn path (a real process) with the caller's mapping.
    script = tmp_path / "harness.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'type': 'result', 'text': 'ok', 'usage': {'n': 9}}), flush=True)\n"
    )
    adapter = SubprocessAdapter(
        [sys.executable, str(script)],
        usage_mapper=lambda u: UsageSplit(cache_read=0, cache_write=0, fresh_input=0,
                                          output=u["n"], thinking=0))
    try:
        result = adapter.oneshot(RoleSpec(), "p")
    finally:
        adapter.close()
    assert result.usage.output == 9 and result.raw["usage"] == {"n": 9}


# --- agent sdk helpers ------------------------------------------------------------------

def test_extract_text_and_usage() -> None:
    class ResultMessage:
        def __init__(self, usage: Any) -> None:
            self.usage = usage
            self.total_cost_usd = 0.01

    block = SimpleNamespace
    messages = [SimpleNamespace(content=[block(text="Hello, "), block(name="tool")]),
                SimpleNamespace(content=[block(text="world")]),
                ResultMessage({"input_tokens": 2, "cache_read_input_tokens": 7,
                               "output_tokens": 3})]
    assert extract_text(messages) == "Hello, world"
    usage = extract_usage(messages)
    assert isinstance(usage, UsageSplit)
    assert (usage.fresh_input, usage.cache_read, usage.output) == (2, 7, 3)
    assert extract_usage(messages[:2]).total_tokens == 0
    assert extract_usage([ResultMessage(None)]).total_tokens == 0
    assert extract_text([]) == ""


# --- transport_ws: RunnerConnection(url, auth_token=...) -------------------------------

def _websockets() -> Any:
    """The ``websockets`` module for the tests that open sockets: skipped without it,
    except under CI, which must run them."""
    if os.environ.get("CI"):
        return importlib.import_module("websockets")
    return pytest.importorskip("websockets")


def test_runner_connection_011_form() -> None:
    _websockets()
    from stapel_runner_protocol.transport_ws import HubServer, RunnerConnection

    async def main() -> None:
        server = HubServer(tokens={"tok": "runner-1"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            port = ws_server.sockets[0].getsockname()[1]
            url = f"ws://127.0.0.1:{port}"
            async with RunnerConnection(url, auth_token="tok") as conn:
                await conn.send(Hello(project_id="p-1", runner_version="0.1.0",
                                      capabilities=["subprocess"]))
                runner = await asyncio.wait_for(server.accept(), 5)
                hub_hello = None
                while hub_hello is None:
                    kind, value = await asyncio.wait_for(runner.recv(), 5)
                    if kind == "hello":
                        hub_hello = value
                assert hub_hello.project_id == "p-1"
                await runner.send(TaskAssign(task_id="T-1", task={"id": "T-1"}, role="coder"))
                msg = await asyncio.wait_for(conn.recv(), 5)  # a message, as in 0.1.1
                assert isinstance(msg, TaskAssign) and msg.task_id == "T-1"
                await conn.send(TaskProgress(task_id="T-1", kind="state", payload={"s": 1}))
                while True:
                    kind, value = await asyncio.wait_for(runner.recv(), 5)
                    if kind == "received":
                        assert isinstance(value, TaskProgress) and value.payload == {"s": 1}
                        break
                await conn.answer_ping(srp.Ping(nonce="n"))  # the session answers pings
                await runner.send(TaskCancel(task_id="T-1", reason="stop"))

                async def first() -> Any:
                    async for message in conn:
                        return message
                    return None

                got = await asyncio.wait_for(first(), 5)
                assert isinstance(got, TaskCancel) and got.reason == "stop"

    asyncio.run(main())


def test_runner_connection_builds_its_hello_from_keywords() -> None:
    """``RunnerConnection(url, auth_token=..., project_id=..., runner_version=...)``: the
    hello the hub gets on the wire is built from the keywords, the bearer token is in
    the handshake, other keywords go to ``websockets.connect``."""
    websockets = _websockets()
    from stapel_runner_protocol.transport_ws import RunnerConnection

    async def main() -> None:
        frames: List[str] = []
        headers: List[Optional[str]] = []
        got_hello = asyncio.Event()

        async def handler(ws: Any) -> None:
            headers.append(ws.request.headers.get("Authorization"))
            async for frame in ws:
                frames.append(frame)
                msg = srp.decode(frame)
                if isinstance(msg, Hello):
                    got_hello.set()
                elif isinstance(msg, srp.Ping):
                    await ws.send(srp.encode(srp.Pong.answer(msg)))

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            conn = RunnerConnection(f"ws://127.0.0.1:{port}", auth_token="t", project_id="p",
                                    runner_version="1", capabilities=["subprocess"],
                                    open_timeout=3)
            async with conn:
                await asyncio.wait_for(got_hello.wait(), 5)
        hello = srp.decode(frames[0], validate=True)
        assert isinstance(hello, Hello)
        assert (hello.project_id, hello.runner_version, hello.capabilities) == (
            "p", "1", ["subprocess"])
        assert headers == ["Bearer t"]

    asyncio.run(main())
    with pytest.raises(TypeError):
        RunnerConnection("ws://x", hello=Hello(project_id="p"), project_id="q")


def test_011_runner_code_against_a_011_style_hub() -> None:
    """Both ends written as 0.1.1 code: the hub reads a raw socket with ``iter_messages``,
    numbers its commands with ``ConnectionState("hub")`` and answers pings."""
    websockets = _websockets()
    from stapel_runner_protocol.transport_ws import RunnerConnection, iter_messages, send

    async def main() -> None:
        seen: List[Any] = []
        got_progress = asyncio.Event()
        hub_state = ConnectionState("hub")

        async def handler(ws: Any) -> None:
            async for msg in iter_messages(ws, validate=True):
                seen.append(msg)
                if isinstance(msg, TaskProgress):
                    got_progress.set()
                if isinstance(msg, Hello):
                    assign = TaskAssign(task_id="T-1", task={"id": "T-1"}, role="coder")
                    await send(ws, hub_state.emit(assign))
                elif isinstance(msg, srp.Ping):
                    await send(ws, srp.Pong.answer(msg))

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            async with RunnerConnection(f"ws://127.0.0.1:{port}", auth_token="t") as conn:
                await conn.send(Hello(project_id="p", runner_version="1"))
                msg = await asyncio.wait_for(conn.recv(), 5)
                assert isinstance(msg, TaskAssign) and msg.seq == 1
                await conn.send(TaskProgress(task_id="T-1", kind="state", payload={"a": 1}))
                await asyncio.wait_for(got_progress.wait(), 5)
        progress = [m for m in seen if isinstance(m, TaskProgress)]
        assert isinstance(seen[0], Hello) and seen[0].project_id == "p"
        assert [(p.seq, p.payload) for p in progress] == [(1, {"a": 1})]

    asyncio.run(main())


def test_state_module_examples() -> None:
    import doctest

    result = doctest.testmod(state_module)
    assert result.attempted > 0 and result.failed == 0


def test_subprocess_child_ignoring_terminate_is_killed() -> None:
    class Stubborn(FakeChild):
        def terminate(self) -> None:
            self.calls.append("terminate")  # ignored: still running

        def kill(self) -> None:
            self.calls.append("kill")
            self.returncode = -9

    child = Stubborn([])
    SubprocessAdapter(spawn=lambda role: child).open_session(RoleSpec()).close()
    assert [c for c in child.calls if c != "wait"] == ["terminate", "kill"]
    assert child.returncode == -9


# --- issue 13 audit: each 0.1.1 behaviour, written as 0.1.1 code ---------------------

def test_resend_from_checkpoint_is_applied_once() -> None:
    """0.1.1's state module: "a runner may safely re-send from its last checkpoint ...
    duplicates are dropped". The runner numbers its progress with its own
    ``ConnectionState("runner")`` and sends the same frame again; a 0.1.1-style hub
    (``iter_messages`` + ``ConnectionState("hub").receive``) applies each seq once. A
    plain dict is sent as the message it describes."""
    websockets = _websockets()
    from stapel_runner_protocol.transport_ws import RunnerConnection, iter_messages, send

    async def main() -> None:
        applied: List[Any] = []
        arrivals: List[Any] = []
        done = asyncio.Event()
        hub_state = ConnectionState("hub")

        async def handler(ws: Any) -> None:
            async for msg in iter_messages(ws):
                if isinstance(msg, srp.Ping):
                    await send(ws, srp.Pong.answer(msg))
                elif isinstance(msg, TaskProgress):
                    arrivals.append(msg.seq)
                    if hub_state.receive(msg):
                        applied.append((msg.seq, msg.payload))
                    if len(applied) == 3:
                        done.set()

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            state = ConnectionState("runner")
            async with RunnerConnection(f"ws://127.0.0.1:{port}", auth_token="t") as conn:
                await conn.send(Hello(project_id="p", runner_version="1",
                                      resume=state.resume_map()))
                p1 = state.emit(TaskProgress(task_id="T-1", kind="state", payload={"n": 1}))
                p2 = state.emit(TaskProgress(task_id="T-1", kind="state", payload={"n": 2}))
                await conn.send(p1)
                await conn.send(p2)
                await conn.send(p1)  # re-sent from the checkpoint
                await conn.send(p2)
                await conn.send({"schema_version": 1, "type": "task.progress",
                                 "task_id": "T-1", "seq": 3, "kind": "state",
                                 "payload": {"n": 3}})
                await asyncio.wait_for(done.wait(), 5)
        assert applied == [(1, {"n": 1}), (2, {"n": 2}), (3, {"n": 3})]
        assert (p1.seq, p2.seq) == (1, 2)
        assert sorted(set(arrivals)) == [1, 2, 3]

    asyncio.run(main())


def test_the_applications_hello_resume_is_sent() -> None:
    """0.1.1's form: the application tracks the hub's commands itself and sends
    ``Hello(resume=...)``; that resume reaches the hub (found by the wire-level
    conformance kit, case runner/030: the session used to replace it with its own,
    empty one, and the hub replayed commands the application already had)."""
    websockets = _websockets()
    from stapel_runner_protocol.transport_ws import RunnerConnection

    async def main() -> Any:
        hellos: List[Any] = []
        got = asyncio.Event()

        async def handler(ws: Any) -> None:
            async for text in ws:
                msg = srp.decode(text)
                if isinstance(msg, Hello):
                    hellos.append(msg.resume)
                    got.set()

        async with websockets.serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            async with RunnerConnection(f"ws://127.0.0.1:{port}", auth_token="t") as conn:
                await conn.send(Hello(project_id="p", runner_version="1",
                                      resume={"K-1": 1, "K-2": 4}))
                await asyncio.wait_for(got.wait(), 5)
        return hellos[0]

    assert asyncio.run(main()) == {"K-1": 1, "K-2": 4}


def test_sending_before_the_hello_is_refused() -> None:
    """Listed difference: the session starts with the application's Hello (seed 000:
    the hello is the first frame of a connection)."""
    from stapel_runner_protocol.transport_ws import RunnerConnection

    conn = RunnerConnection("ws://127.0.0.1:1", auth_token="t")
    # Python-level misuse (the core has no code for it, and the binding invents none).
    with pytest.raises(TypeError, match="Hello first"):
        asyncio.run(conn.send(TaskProgress(task_id="T-1", kind="state")))


def test_validation_requires_the_type() -> None:
    frame = _progress()
    del frame["type"]
    assert not validation.is_valid(frame, "task.progress")
    assert [e.split(":")[0] for e in validation.iter_errors(frame, "task.progress")] == ["type"]
    with pytest.raises(srp.SchemaValidationError):
        validation.validate(frame, "task.progress")


def test_validation_of_the_seed_shapes_without_task_id() -> None:
    """Listed difference: seed 000 defines task.assign as {task, role, invocation, seq}
    and task.report as {report, seq} (the id is the artifact's); a task_id that names
    another task than the artifact is refused."""
    assign = {"schema_version": 1, "type": "task.assign", "seq": 1, "role": "coder",
              "invocation": {}, "task": {"schema_version": 1, "id": "T-1", "type": "feature",
                                         "goal": "g", "criteria": [{"id": "c1", "text": "t"}],
                                         "budget": {"iterations": 1}}}
    assert validation.is_valid(assign, "task.assign")
    assert not validation.is_valid({**assign, "task_id": "T-2"}, "task.assign")
    assert validation.is_valid({**assign, "task_id": "T-1"}, "task.assign")


def test_role_spec_defaults_and_invocation_keys_as_011() -> None:
    spec = RoleSpec()
    assert spec.budget == {} and spec.budget.get("max_turns") is None
    spec = RoleSpec.from_invocation({})
    assert spec.budget.get("max_turns", 10) == 10
    spec = RoleSpec.from_invocation({"role": "reviewer", "session": "", "zeta": 1,
                                     "system_prompt": "Be brief."}, role="coder")
    assert spec.role == "coder" and spec.session == ""
    assert spec.extra == {"role": "reviewer", "zeta": 1}
    assert spec.system_prompt == "Be brief."
    assert spec.to_dict()["system_prompt"] == "Be brief."
    spec = RoleSpec.from_invocation({"budget": {"max_turns": 3}})
    assert spec.budget["max_turns"] == 3


def test_turn_result_bad_split_is_both_schema_errors() -> None:
    import stapel_taskspecs

    for catch in (stapel_taskspecs.SchemaValidationError, srp.SchemaValidationError):
        with pytest.raises(catch) as info:
            srp.TurnResult("t", UsageSplit(output=-1))
        assert isinstance(info.value, srp.SchemaValidationError)
        assert info.value.errors


def test_usage_counts_as_text_and_pairs() -> None:
    u = usage_from_anthropic({"input_tokens": None, "output_tokens": "10"})
    assert (u.fresh_input, u.output) == (0, 10)
    u = usage_from_anthropic({"input_tokens": "3", "output_tokens": 10}, thinking=4)
    assert (u.fresh_input, u.output, u.thinking) == (3, 6, 4)
    assert usage_from_mapping([("output", 3)]).output == 3
    assert usage_from_mapping((("cache_read", 1), ("output", 2))).to_dict()["cache_read"] == 1


def test_agent_sdk_turn_lets_the_sdk_exception_through() -> None:
    class Boom(Exception):
        pass

    class Client:
        async def connect(self) -> None:
            pass

        async def query(self, prompt: str) -> None:
            raise Boom("sdk failure")

        async def receive_response(self) -> Any:
            if False:
                yield None

        async def disconnect(self) -> None:
            pass

    session = srp.AgentSdkAdapter(client_factory=lambda role: Client()).open_session(RoleSpec())
    with pytest.raises(Boom):
        session.turn("x")
    session.close()


def test_message_classes_can_be_subclassed() -> None:
    class MyProgress(TaskProgress):
        def describe(self) -> str:
            return f"{self.task_id}#{self.seq}"

    m = MyProgress(task_id="T-1", seq=2, kind="state", payload={"a": 1})
    assert m.describe() == "T-1#2" and isinstance(m, TaskProgress)
    assert srp.decode(srp.encode(m)) == m
    again = MyProgress.from_dict(m.to_dict())
    assert type(again) is MyProgress and again.payload == {"a": 1}
    assert type(MyProgress.parse(m.to_dict())) is MyProgress
    state = ConnectionState("runner")
    assert state.emit(m) is m and m.seq == 1


def test_011_names_of_the_submodules() -> None:
    from stapel_runner_protocol import adapters, agent_sdk_adapter, subprocess_adapter, transport

    assert adapters.UsageSplit is UsageSplit
    assert subprocess_adapter.usage_from_mapping is usage_from_mapping
    assert agent_sdk_adapter.AdapterUnavailableError is srp.AdapterUnavailableError
    assert agent_sdk_adapter.usage_from_anthropic is usage_from_anthropic
    assert transport.MESSAGES is srp.MESSAGES
    assert transport.RunnerProtocolError is srp.RunnerProtocolError
    assert transport.UnknownMessageError is srp.UnknownMessageError


def test_outbox_log_ack_returns_none_and_role_is_fixed() -> None:
    log = OutboxLog()
    log.emit(TaskCancel(task_id="T-1", reason="a"))
    assert log.ack(1) is None  # type: ignore[func-returns-value]
    assert log.since(0) == []
    # Listed difference: the role decides each stream's direction, so it is fixed.
    state = ConnectionState("hub")
    with pytest.raises(AttributeError):
        state.role = "runner"  # type: ignore[misc]


def test_fake_child_whose_wait_takes_no_timeout() -> None:
    class Plain(FakeChild):
        def wait(self) -> Optional[int]:  # type: ignore[override]
            self.calls.append("wait")
            return self.returncode

    child = Plain([])
    SubprocessAdapter(spawn=lambda role: child).open_session(RoleSpec()).close()
    assert child.calls[0] == "terminate" and child.returncode == -15
