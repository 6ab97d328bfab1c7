"""Reference harness adapter: a JSONL stream to a child process (seed 000)::

    parent -> child (stdin) : {"type": "turn", "prompt": "..."}
    child  -> parent(stdout): {"type": "progress", ...}                # zero or more
    child  -> parent(stdout): {"type": "result", "text": "...", "usage": {...}}
                          or: {"type": "error", "message": "..."}

The protocol — line framing with a bound, parsing, the turn state, usage mapping — is the
Rust core's :class:`~stapel_runner_protocol.adapters.SubprocessTurnMachine`; this module
only moves bytes between it and the child.

The default spawn starts ``command`` in a new process group (session) with a cleared
environment: only ``PATH``, the variables given as ``env``, and ``ANTHROPIC_BASE_URL``
when the role names an ``llm_base_url``. :meth:`SubprocessSession.close` closes the
child's stdin, waits ``grace_s``, then sends SIGTERM and, after another grace, SIGKILL
to the whole process group; it is idempotent. Inject ``spawn`` (``role_spec ->
process``) to test against a fake child: the process needs ``stdin`` (``write``/
``flush``/``close``, bytes or text) and ``stdout`` (``read1`` or ``readline``), and may
have ``pid``, ``poll``, ``wait``, ``terminate`` and ``kill``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._native import SubprocessTurnMachine
from .adapters import HarnessAdapter, RoleSpec, Session, TurnResult, _require_taskspecs
from .errors import AdapterError

__all__ = ["SubprocessAdapter", "SubprocessSession", "SpawnFn", "DEFAULT_GRACE_S"]

#: A spawned child: see the module docs for the attributes used.
SpawnFn = Callable[[RoleSpec], Any]

#: Seconds ``close()`` waits after closing stdin, and again after SIGTERM.
DEFAULT_GRACE_S = 2.0

#: Bytes read from the child's stdout per read.
_READ_CHUNK = 64 * 1024

Command = Union[Sequence[str], Callable[[RoleSpec], Sequence[str]]]


def _cleared_env(extra: Optional[Mapping[str, str]], role_spec: RoleSpec) -> Dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    env.update(extra or {})
    if role_spec.llm_base_url:
        env["ANTHROPIC_BASE_URL"] = role_spec.llm_base_url
    return env


def _default_spawn(command: Optional[Command], env: Optional[Mapping[str, str]]) -> SpawnFn:
    def spawn(role_spec: RoleSpec) -> Any:
        cmd = command(role_spec) if callable(command) else command
        if not cmd:
            raise AdapterError("SubprocessAdapter needs a non-empty command", code="no_command")
        try:
            return subprocess.Popen(
                list(cmd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=_cleared_env(env, role_spec),
                start_new_session=True,
            )
        except OSError as exc:
            raise AdapterError(f"cannot start {cmd[0]!r}: {exc}", code="spawn_failed") from exc

    return spawn


class SubprocessSession(Session):
    """One JSONL session over a child process, turn by turn."""

    def __init__(
        self,
        process: Any,
        *,
        on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        max_line_bytes: int = 1024 * 1024,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        self._proc = process
        self._machine = SubprocessTurnMachine(max_line_bytes)
        self._on_progress = on_progress
        self._grace_s = grace_s
        self._closed = False

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` ran (or a fault closed the session)."""
        return self._closed

    @property
    def process(self) -> Any:
        """The child process object."""
        return self._proc

    def turn(self, prompt: str) -> TurnResult:
        """Send ``prompt``; return the result. A harness ``error`` line raises
        :class:`~stapel_runner_protocol.errors.AdapterError` (``harness_error``; the
        session stays usable); any other fault (``unexpected_eof``, ``line_too_long``,
        ``not_json``, …) also closes the session."""
        if self._closed:
            raise AdapterError("turn() on a closed subprocess session", code="session_closed")
        self._machine.start_turn(prompt)
        while True:
            for kind, value in self._machine.drain():
                if kind == "write_stdin" and isinstance(value, str):
                    self._write(value)
                elif kind == "progress" and isinstance(value, dict):
                    if self._on_progress is not None:
                        self._on_progress(value)
                elif isinstance(value, TurnResult):
                    return value
                elif isinstance(value, AdapterError):
                    if value.code != "harness_error":
                        self.close()
                    raise value
            data = self._read()
            if data:
                self._machine.feed_stdout(data)
            else:
                self._machine.feed_eof()

    def _write(self, line: str) -> None:
        stdin = self._proc.stdin
        try:
            try:
                stdin.write(line.encode("utf-8"))
            except TypeError:
                stdin.write(line)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            self.close()
            raise AdapterError(f"cannot write to the harness: {exc}", code="stdin_closed") from exc

    def _read(self) -> bytes:
        stdout = self._proc.stdout
        read1 = getattr(stdout, "read1", None)
        data = read1(_READ_CHUNK) if read1 is not None else stdout.readline()
        if isinstance(data, str):
            return data.encode("utf-8")
        return bytes(data or b"")

    def close(self) -> None:
        """Close stdin, then end the child's whole process group after a grace.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        try:
            if getattr(proc, "stdin", None) is not None:
                proc.stdin.close()
        except Exception:
            pass
        if not self._wait(self._grace_s):
            self._signal(signal.SIGTERM)
            if not self._wait(self._grace_s):
                self._signal(signal.SIGKILL)
                self._wait(self._grace_s)
        # The leader is gone; anything left in its group goes too.
        self._signal_group(signal.SIGKILL)
        try:
            if getattr(proc, "stdout", None) is not None:
                proc.stdout.close()
        except Exception:
            pass

    def _wait(self, timeout: float) -> bool:
        wait = getattr(self._proc, "wait", None)
        if wait is None:
            return True
        try:
            wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _signal(self, sig: signal.Signals) -> None:
        if not self._signal_group(sig):
            fallback = getattr(self._proc, "kill" if sig == signal.SIGKILL else "terminate", None)
            if fallback is not None:
                try:
                    fallback()
                except Exception:
                    pass

    def _signal_group(self, sig: signal.Signals) -> bool:
        pid = getattr(self._proc, "pid", None)
        if not isinstance(pid, int) or pid <= 0 or not hasattr(os, "killpg"):
            return False
        try:
            # Only a group we started (pgid == leader pid) and only while it exists: a
            # process group id is not reused while the group has members.
            if os.getpgid(pid) != pid:
                return False
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.killpg(pid, 0)
            os.killpg(pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


class SubprocessAdapter(HarnessAdapter):
    """Spawns a JSONL child per session.

    ``command`` is a list (``["my-harness", "--json"]``) or a callable ``role_spec ->
    list``; ``env`` adds variables to the cleared environment; ``spawn`` replaces the
    default spawn (e.g. with a fake child in tests).

    Its turns return :class:`~stapel_runner_protocol.adapters.TurnResult` (usage: a
    ``stapel_taskspecs.UsageSplit``), so without ``stapel-taskspecs`` (Python 3.9/3.10)
    the constructor raises :class:`~stapel_runner_protocol.errors.AdapterUnavailableError`
    with code ``taskspecs_unavailable`` rather than every turn failing later.
    """

    def __init__(
        self,
        command: Optional[Command] = None,
        *,
        spawn: Optional[SpawnFn] = None,
        on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        env: Optional[Mapping[str, str]] = None,
        max_line_bytes: int = 1024 * 1024,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        _require_taskspecs("SubprocessAdapter")
        self._spawn = spawn or _default_spawn(command, env)
        self._on_progress = on_progress
        self._max_line_bytes = max_line_bytes
        self._grace_s = grace_s
        self._sessions: List[SubprocessSession] = []

    def open_session(self, role_spec: RoleSpec) -> SubprocessSession:
        """Spawn the child and open a session over it."""
        session = SubprocessSession(
            self._spawn(role_spec),
            on_progress=self._on_progress,
            max_line_bytes=self._max_line_bytes,
            grace_s=self._grace_s,
        )
        # Keep only the sessions still open: an adapter that outlives many sessions
        # (one per Gateway run) does not hold on to every closed one.
        self._sessions = [s for s in self._sessions if not s.closed]
        self._sessions.append(session)
        return session

    def close(self) -> None:
        """Close every session this adapter opened. Idempotent."""
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
