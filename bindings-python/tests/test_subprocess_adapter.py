"""SubprocessAdapter / SubprocessSession against real child processes and a fake one."""

from __future__ import annotations

import io
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from stapel_runner_protocol import AdapterError, RoleSpec, SubprocessAdapter, SubprocessSession
from stapel_runner_protocol.subprocess_adapter import SubprocessSession as _Session

HARNESS = textwrap.dedent(
    """
    import json, os, sys
    for line in sys.stdin:
        msg = json.loads(line)
        prompt = msg["prompt"]
        if prompt == "env":
            text = ",".join(sorted(os.environ))
        elif prompt == "fail":
            print(json.dumps({"type": "error", "message": "nope"}), flush=True)
            continue
        elif prompt == "die":
            sys.exit(3)
        elif prompt == "huge":
            print("x" * 5000, flush=True)
            continue
        elif prompt == "stubborn":
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            sys.stdin.close()
            text = "ignoring SIGTERM"
            print(json.dumps({"type": "result", "text": text,
                              "usage": {"input_tokens": 1, "output_tokens": 1}}), flush=True)
            import time
            time.sleep(60)
        elif prompt == "spawn-child":
            import subprocess
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            text = str(child.pid)
        else:
            text = "done: " + prompt
        print(json.dumps({"type": "progress", "step": 1}), flush=True)
        print(json.dumps({"type": "result", "text": text,
                          "usage": {"input_tokens": 30, "output_tokens": 12}}), flush=True)
    """
)


@pytest.fixture
def harness(tmp_path: Path) -> List[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    return [sys.executable, str(script)]


def test_real_child_turns(harness: List[str]) -> None:
    progress: List[Dict[str, Any]] = []
    adapter = SubprocessAdapter(command=harness, on_progress=progress.append,
                                env={"EXTRA": "1"}, max_line_bytes=1024)
    role = RoleSpec.from_invocation({"llm_base_url": "http://gw.invalid"})
    with adapter.open_session(role) as session:
        r = session.turn("hello")
        assert (r.text, r.usage.total_tokens, r.usage.fresh_input) == ("done: hello", 42, 30)
        assert progress == [{"type": "progress", "step": 1}]
        env = session.turn("env").text.split(",")
        assert set(env) <= {"PATH", "EXTRA", "ANTHROPIC_BASE_URL", "LC_CTYPE", "PWD"}
        assert {"PATH", "EXTRA", "ANTHROPIC_BASE_URL"} <= set(env)
        with pytest.raises(AdapterError) as info:
            session.turn("fail")
        assert info.value.code == "harness_error" and info.value.details["message"] == "nope"
        assert session.turn("again").text == "done: again"  # still usable
        with pytest.raises(AdapterError) as info:
            session.turn("huge")
        assert info.value.code == "line_too_long"
        with pytest.raises(AdapterError) as info:
            session.turn("x")
        assert info.value.code == "session_closed"
    assert isinstance(session, SubprocessSession)
    assert session.process.poll() is not None
    adapter.close()
    adapter.close()


def test_child_exit_is_unexpected_eof(harness: List[str]) -> None:
    session = SubprocessAdapter(command=harness).open_session(RoleSpec())
    with pytest.raises(AdapterError) as info:
        session.turn("die")
    assert info.value.code == "unexpected_eof"
    session.close()


def test_close_ends_the_whole_group(harness: List[str]) -> None:
    session = SubprocessAdapter(command=harness, grace_s=0.5).open_session(RoleSpec())
    child = int(session.turn("spawn-child").text)
    os.kill(child, 0)  # alive
    session.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the harness's child survived close()")
    session.close()  # idempotent


def test_oneshot_and_missing_command(harness: List[str]) -> None:
    result = SubprocessAdapter(command=lambda role: harness).oneshot(RoleSpec(), "once")
    assert result["text"] == "done: once"
    with pytest.raises(AdapterError):
        SubprocessAdapter(command=[]).open_session(RoleSpec())
    with pytest.raises(AdapterError) as info:
        SubprocessAdapter(command=["/nonexistent/harness"]).open_session(RoleSpec())
    assert info.value.code == "spawn_failed"


class FakeProcess:
    """A text-mode fake child answering every turn from a script."""

    def __init__(self, replies: List[str]) -> None:
        self.stdin = io.StringIO()
        self.stdout = io.StringIO("".join(replies))
        self.terminated = False

    def terminate(self) -> None:
        self.terminated = True


def test_injected_spawn_with_a_fake_child() -> None:
    fake = FakeProcess(['{"type":"note"}\n',
                        '{"type":"result","text":"ok","usage":{"cache_read":1,"cache_write":0,'
                        '"fresh_input":2,"output":3,"thinking":4}}\n'])
    adapter = SubprocessAdapter(spawn=lambda role: fake)
    session = adapter.open_session(RoleSpec())
    assert isinstance(session, _Session)
    r = session.turn("go")
    assert (r.text, r.usage.thinking, r.usage.total_tokens) == ("ok", 4, 10)
    assert fake.stdin.getvalue() == '{"type":"turn","prompt":"go"}\n'
    with pytest.raises(AdapterError) as info:
        session.turn("again")  # the fake has nothing more to say
    assert info.value.code == "unexpected_eof"


def test_parent_credentials_never_reach_the_child(harness: List[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-parent-secret")
    monkeypatch.setenv("STAPEL_FAKE_SECRET", "s3cr3t")
    monkeypatch.setenv("HOME", "/root-of-the-parent")
    adapter = SubprocessAdapter(command=harness, env={"ALLOWED": "yes"})
    with adapter.open_session(RoleSpec.from_invocation({"llm_base_url": "http://gw"})) as s:
        names = set(s.turn("env").text.split(","))
    assert {"ALLOWED", "PATH", "ANTHROPIC_BASE_URL"} <= names
    assert not names & {"ANTHROPIC_API_KEY", "STAPEL_FAKE_SECRET", "HOME"}


def test_close_kills_a_child_that_ignores_sigterm(harness: List[str]) -> None:
    session = SubprocessAdapter(command=harness, grace_s=0.2).open_session(RoleSpec())
    assert session.turn("stubborn").text == "ignoring SIGTERM"
    proc = session.process
    started = time.monotonic()
    session.close()  # stdin closed -> grace -> SIGTERM (ignored) -> grace -> SIGKILL
    assert proc.poll() == -9
    assert time.monotonic() - started < 3
    session.close()  # idempotent
    assert proc.poll() == -9


def test_without_stapel_taskspecs_the_adapter_and_rein_fail_early(
        harness: List[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken install without stapel-taskspecs: a turn could never return its TurnResult,
    so building the adapter or the rein fails at once with a clear, typed error."""
    from stapel_runner_protocol.contract import SubprocessRein
    from stapel_runner_protocol.errors import AdapterUnavailableError

    monkeypatch.setitem(sys.modules, "stapel_taskspecs", None)
    for build in (lambda: SubprocessAdapter(command=harness), lambda: SubprocessRein(harness)):
        with pytest.raises(AdapterUnavailableError) as info:
            build()
        assert info.value.code == "taskspecs_unavailable"
        assert "Python >= 3.11" in str(info.value)
        assert isinstance(info.value.__cause__, ImportError)


def test_closed_sessions_are_dropped_when_a_new_one_opens() -> None:
    """An adapter that outlives many sessions (one per Gateway run) keeps only the open
    ones, so its memory stays bounded; close() still reaches every open session."""
    adapter = SubprocessAdapter(spawn=lambda role: FakeProcess([]))
    for _ in range(50):
        session = adapter.open_session(RoleSpec())
        session.close()
        assert session.closed
    assert len(adapter._sessions) == 1  # only the latest (closed) one, until the next open
    first, second = adapter.open_session(RoleSpec()), adapter.open_session(RoleSpec())
    assert adapter._sessions == [first, second]  # open sessions are kept
    adapter.close()
    assert first.closed and second.closed and adapter._sessions == []


def test_a_gateway_rein_does_not_accumulate_sessions(harness: List[str]) -> None:
    from stapel_runner_protocol.contract import Gateway, SubprocessRein

    adapter = SubprocessAdapter(command=harness)
    rein = SubprocessRein(adapter=adapter)
    catalog: Any = {
        "profiles": [{"contract_version": "1.0", "profile_id": "coder", "rein": "sub",
                      "model": "m", "sandbox_profile": "s",
                      "tool_policy": {"allowed_tools": []}}],
        "reins": [{"rein_id": "sub", "contract_version": "1.0"}],
    }

    class Boxes:
        def create(self, *args: str) -> Dict[str, str]:
            return {"sandbox_id": "sb"}

        def destroy(self, sandbox: Any) -> None:
            pass

    gateway = Gateway(catalog, reins={"sub": rein}, sandboxer=Boxes())  # type: ignore[arg-type]
    for _ in range(4):
        result = gateway.execute({"harness_profile_ref": "coder", "repository": "r",
                                  "title": "t", "description": "d"}, inputs={"prompt": "hi"})
        assert result.ok, result
    assert len(adapter._sessions) == 1 and adapter._sessions[0].closed
    rein.close()


class StubbornFake:
    """A fake child (no pid) that exits only on kill(): records what the host did."""

    def __init__(self) -> None:
        self.calls: List[str] = []
        self.stdin = self
        self.stdout = io.BytesIO(b"")
        self.alive = True

    # stdin
    def write(self, data: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.calls.append("close_stdin")

    # process
    def wait(self, timeout: float) -> int:
        self.calls.append("wait")
        if self.alive:
            import subprocess

            raise subprocess.TimeoutExpired("fake", timeout)
        return -9

    def terminate(self) -> None:
        self.calls.append("terminate")

    def kill(self) -> None:
        self.calls.append("kill")
        self.alive = False


def test_the_core_escalation_drives_an_injected_child() -> None:
    """The core's stop actions map onto the injected child's own methods: a child without
    a process group gets terminate(), then kill(), each after a wait() for the grace."""
    fake = StubbornFake()
    session = SubprocessAdapter(spawn=lambda role: fake, grace_s=0.0).open_session(RoleSpec())
    session.close()
    assert fake.calls == ["close_stdin", "wait", "terminate", "wait", "kill", "wait"]
    assert session.closed
    session.close()  # idempotent: nothing more happens
    assert fake.calls == ["close_stdin", "wait", "terminate", "wait", "kill", "wait"]


def test_a_failed_stdin_write_is_stdin_closed_and_closes() -> None:
    fake = StubbornFake()
    fake.alive = False  # exits as soon as stdin closes
    session = SubprocessAdapter(spawn=lambda role: fake).open_session(RoleSpec())
    with pytest.raises(AdapterError) as info:
        session.turn("go")
    assert info.value.code == "stdin_closed"
    assert isinstance(info.value.__cause__, BrokenPipeError)
    assert session.closed and fake.calls == ["close_stdin", "wait"]
    with pytest.raises(AdapterError) as info:
        session.turn("again")
    assert info.value.code == "session_closed"


def test_no_command_comes_from_the_core() -> None:
    commands: List[Any] = [None, [], lambda role: []]
    for command in commands:
        with pytest.raises(AdapterError) as info:
            SubprocessAdapter(command=command).open_session(RoleSpec())
        assert info.value.code == "no_command"
