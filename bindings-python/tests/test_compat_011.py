"""Code written the way a user of the published pure-Python stapel-runner-protocol 0.1.1
writes it runs unchanged against this package (issue 13, "Drop-in API"). Each test uses
0.1.1's public names, signatures and defaults only, and checks the behaviour 0.1.1
documents — plus, where this package deliberately differs (bounded windows with typed
errors), that difference."""

from __future__ import annotations

import asyncio
import io
import json
import os
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
        SubprocessAdapter(spawn=lambda role: child, usage_mapper=lambda u: u)


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

websockets = pytest.importorskip("websockets") if not os.environ.get("CI") else __import__(
    "websockets")


def test_runner_connection_011_form() -> None:
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
    from stapel_runner_protocol.session import RunnerSession
    from stapel_runner_protocol.transport_ws import RunnerConnection

    conn = RunnerConnection("ws://127.0.0.1:1", auth_token="t", project_id="p",
                            runner_version="1", open_timeout=3)
    assert isinstance(conn.session, RunnerSession)
    assert conn._connect_kwargs["open_timeout"] == 3
    assert conn._connect_kwargs["additional_headers"] == {"Authorization": "Bearer t"}
    with pytest.raises(TypeError):
        RunnerConnection("ws://x", hello=Hello(project_id="p"), project_id="q")


def test_011_runner_code_against_a_011_style_hub() -> None:
    """Both ends written as 0.1.1 code: the hub reads a raw socket with ``iter_messages``,
    numbers its commands with ``ConnectionState("hub")`` and answers pings."""
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
