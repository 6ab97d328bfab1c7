"""Reference harness adapter: a JSONL stream to a child process (seed 000)::

    parent -> child (stdin) : {"type": "turn", "prompt": "..."}
    child  -> parent(stdout): {"type": "progress", ...}                # zero or more
    child  -> parent(stdout): {"type": "result", "text": "...", "usage": {...}}
                          or: {"type": "error", "message": "..."}

Every decision — the spawn request and its cleared environment, line framing with a
bound, parsing, the turn state, usage mapping, which faults close the session, the stop
escalation and its grace periods, the error codes — is the Rust core's
:class:`~stapel_runner_protocol.adapters.SubprocessTurnMachine`; this module performs
its actions (spawn, write, read, close, signal, wait) and reports what happened.

The default spawn starts ``command`` in a new process group (session) with a cleared
environment: only ``PATH``, the variables given as ``env``, and ``ANTHROPIC_BASE_URL``
when the role names an ``llm_base_url``. :meth:`SubprocessSession.close` closes the
child's stdin, waits ``grace_s``, then sends SIGTERM and, after another grace, SIGKILL
(to the child's process group when it leads one, else to the child), and finally
SIGKILL to the whole group; it is idempotent. Inject ``spawn`` (``role_spec ->
process``) to test against a fake child: the process needs ``stdin`` (``write``/
``flush``/``close``, text or bytes) and ``stdout`` (``read1`` or ``readline``), and may
have ``pid``, ``poll``, ``wait``, ``terminate`` and ``kill``. ``close()`` drives it
through the same escalation: it closes ``stdin``, waits (``wait(timeout=grace)``), and
while ``poll()`` still returns ``None`` calls ``terminate()``, waits again, then
``kill()``. A child without ``poll`` counts as exited once its ``wait`` returns (or at
once, without ``wait``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._native import DEFAULT_GRACE_MS, DEFAULT_TURN_MAX_LINE_BYTES, SubprocessTurnMachine
from .adapters import HarnessAdapter, RoleSpec, Session, TurnResult, _require_taskspecs
from .errors import AdapterError
from ._native import usage_from_mapping

__all__ = ["SubprocessAdapter", "SubprocessSession", "SpawnFn", "DEFAULT_GRACE_S",
           "usage_from_mapping"]

#: A spawned child: see the module docs for the attributes used.
SpawnFn = Callable[[RoleSpec], Any]

#: Seconds ``close()`` waits after closing stdin, and again after SIGTERM (the core's
#: ``DEFAULT_GRACE_MS``).
DEFAULT_GRACE_S = DEFAULT_GRACE_MS / 1000

#: Bytes read from the child's stdout per read.
_READ_CHUNK = 64 * 1024

Command = Union[Sequence[str], Callable[[RoleSpec], Sequence[str]]]


def _host_usage_mapper(
    usage_mapper: Optional[Callable[[Any], Any]],
) -> Optional[Callable[[Any], Any]]:
    """``usage_mapper`` (stapel-runner-protocol 0.1.1's keyword): ``None`` or one of this
    package's mappings lets the core map each result line's usage itself
    (:func:`~stapel_runner_protocol.usage.usage_from_mapping` recognises the split,
    Anthropic- and OpenAI-shaped usage by their keys), so ``None`` is returned. Any other
    callable is the caller's own mapping: it is returned, the core is told to leave the
    usage alone (``map_usage=False``), and each result line's ``usage`` (``{}`` when
    absent, as in 0.1.1) is passed to it; it must return a
    ``stapel_taskspecs.UsageSplit`` (checked by :class:`TurnResult`), and what it raises
    comes out of ``turn()`` as it is."""
    from .usage import usage_from_anthropic, usage_from_mapping, usage_from_openai

    if usage_mapper is None or usage_mapper in (
        usage_from_mapping,
        usage_from_anthropic,
        usage_from_openai,
    ):
        return None
    if not callable(usage_mapper):
        raise TypeError("usage_mapper must be callable")
    return usage_mapper


def _now_ms() -> int:
    """The machine's clock: monotonic milliseconds."""
    return int(time.monotonic() * 1000)


def _grace_ms(grace_s: float) -> int:
    return max(0, round(grace_s * 1000))


def _pid(process: Any) -> Optional[int]:
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) and 0 < pid < 2**32 else None


def _leads_group(process: Any) -> bool:
    """Whether the child leads its own process group (an OS query)."""
    pid = _pid(process)
    if pid is None or not hasattr(os, "getpgid"):
        return False
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


class SubprocessSession(Session):
    """One JSONL session over a child process, turn by turn."""

    def __init__(
        self,
        process: Any,
        *,
        usage_mapper: Optional[Callable[[Any], Any]] = None,
        on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        max_line_bytes: int = DEFAULT_TURN_MAX_LINE_BYTES,
        grace_s: float = DEFAULT_GRACE_S,
        _machine: Optional[SubprocessTurnMachine] = None,
    ) -> None:
        self._usage_mapper = _host_usage_mapper(usage_mapper)
        self._proc = process
        self._on_progress = on_progress
        self._write_failure: Optional[BaseException] = None
        if _machine is None:
            # A child the caller started: attach it to a new machine.
            _machine = SubprocessTurnMachine(
                max_line_bytes,
                grace_ms=_grace_ms(grace_s),
                attached=False,
                map_usage=self._usage_mapper is None,
            )
            _machine.spawned(
                _pid(process), process_group=_leads_group(process), now_ms=_now_ms()
            )
        self._machine = _machine

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` ran (or a fault closed the session)."""
        return self._machine.closed

    @property
    def process(self) -> Any:
        """The child process object."""
        return self._proc

    def turn(self, prompt: str) -> TurnResult:
        """Send ``prompt``; return the result. A harness ``error`` line raises
        :class:`~stapel_runner_protocol.errors.AdapterError` (``harness_error``; the
        session stays usable); any other fault (``unexpected_eof``, ``line_too_long``,
        ``not_json``, ``stdin_closed``, …) also closes the session; a closed session
        raises ``session_closed``."""
        self._machine.start_turn(prompt, _now_ms())
        result = self._run()
        assert result is not None  # the machine ends every turn with a result or an error
        return result

    def close(self) -> None:
        """Close stdin, then end the child (and its whole process group) after a grace.
        Idempotent."""
        self._machine.close(_now_ms())
        self._run()

    def _run(self) -> Optional[TurnResult]:
        """Perform the machine's actions until it waits for nothing this host does on its
        own: the turn's outcome is known and no stop escalation is pending. Returns the
        turn's result; raises its error (after the escalation it started has run)."""
        result: Optional[TurnResult] = None
        error: Optional[AdapterError] = None
        while True:
            outputs = self._machine.drain()
            for kind, value in outputs:
                if kind == "write_stdin" and isinstance(value, str):
                    self._write(value)
                elif kind == "close_stdin":
                    self._close_pipe("stdin")
                elif kind == "signal" and isinstance(value, tuple):
                    self._signal(value[0], value[1])
                elif kind == "close_stdout":
                    self._close_pipe("stdout")
                elif kind == "progress" and isinstance(value, dict):
                    if self._on_progress is not None:
                        self._on_progress(value)
                elif isinstance(value, TurnResult):
                    # The raw answer, as 0.1.1 gave it: the result line's JSON object.
                    value.raw = self._machine.result_line
                    result = value
                elif isinstance(value, AdapterError) and error is None:
                    error = value
            if outputs:
                continue  # performing them may have queued more (a failed write)
            deadline = self._machine.poll_timeout()
            if deadline is not None:
                self._await_exit(deadline)
            elif self._machine.in_turn:
                data = self._read()
                if data:
                    self._machine.feed_stdout(data, _now_ms())
                else:
                    self._machine.feed_eof(_now_ms())
            else:
                break
        if error is not None:
            cause, self._write_failure = self._write_failure, None
            if error.code == "stdin_closed" and cause is not None:
                raise error from cause
            raise error
        if result is not None and self._usage_mapper is not None:
            # The caller's own mapping (the machine left the usage alone), once every
            # output of the machine has been performed: what it raises leaves nothing
            # of the machine's undone.
            raw = result.raw
            usage = raw.get("usage", {}) if isinstance(raw, dict) else {}
            result = TurnResult(text=result.text, usage=self._usage_mapper(usage), raw=raw)
        return result

    def _write(self, line: str) -> None:
        stdin = self._proc.stdin
        try:
            try:
                stdin.write(line)  # a text-mode pipe (or a fake child's)
            except TypeError:
                stdin.write(line.encode("utf-8"))  # a binary pipe
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            self._write_failure = exc
            self._machine.stdin_write_failed(str(exc), _now_ms())

    def _read(self) -> bytes:
        stdout = self._proc.stdout
        read1 = getattr(stdout, "read1", None)
        data = read1(_READ_CHUNK) if read1 is not None else stdout.readline()
        if isinstance(data, str):
            return data.encode("utf-8")
        return bytes(data or b"")

    def _close_pipe(self, name: str) -> None:
        try:
            pipe = getattr(self._proc, name, None)
            if pipe is not None:
                pipe.close()
        except Exception:
            pass

    def _await_exit(self, deadline: int) -> None:
        """Wait for the child's exit until ``deadline``; report which came first.

        ``wait(timeout=…)`` raising ``TimeoutExpired`` means the grace ran out. A child
        whose ``wait`` returns (or that has none) while its ``poll()`` still returns
        ``None`` — an injected fake child, whose ``wait`` does not block — has not exited
        within the grace either, so the machine's escalation goes on (``terminate()``,
        then ``kill()``). A child without ``poll`` counts as exited once ``wait``
        returns. A ``wait`` that takes no ``timeout`` or raises is ignored (as 0.1.1 did).
        """
        wait = getattr(self._proc, "wait", None)
        if wait is not None:
            try:
                wait(timeout=max(0, deadline - _now_ms()) / 1000)
            except subprocess.TimeoutExpired:
                # wait() measured the grace itself: the deadline has passed.
                self._machine.timeout(max(_now_ms(), deadline))
                return
            except Exception:
                # A child whose wait() takes no timeout, or fails (a stapel-runner-
                # protocol 0.1.1-style fake; 0.1.1 ignored it): its poll() decides.
                pass
        if self._still_running():
            self._machine.timeout(max(_now_ms(), deadline))
        else:
            self._machine.exited(_now_ms())

    def _still_running(self) -> bool:
        """``True`` while the child's ``poll()`` reports no exit status."""
        poll = getattr(self._proc, "poll", None)
        if poll is None:
            return False
        try:
            return poll() is None
        except Exception:
            return False

    def _signal(self, target: str, name: str) -> None:
        sig = signal.SIGKILL if name == "KILL" else signal.SIGTERM
        if target == "group" and self._signal_group(sig):
            return
        # The process itself, or a group this host cannot signal (Popen's own
        # terminate()/kill() do nothing once the child is reaped).
        method = getattr(self._proc, "kill" if name == "KILL" else "terminate", None)
        if method is not None:
            try:
                method()
            except Exception:
                pass

    def _signal_group(self, sig: signal.Signals) -> bool:
        pid = _pid(self._proc)
        if pid is None or not hasattr(os, "killpg"):
            return False
        try:
            # Only a group we started (pgid == leader pid) and only while it exists: a
            # process group id is not reused while the group has members.
            if os.getpgid(pid) != pid:
                return False
        except (ProcessLookupError, PermissionError):
            pass  # the leader is reaped; its group may still have members
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
    default spawn (e.g. with a fake child in tests: the session then drives that object —
    its ``stdin``, ``stdout``, ``poll``, ``wait``, ``terminate`` and ``kill`` — through
    the same stop escalation). ``usage_mapper`` maps each result line's usage: by default
    (or naming one of this package's mappings) the core does it; another callable is
    used as 0.1.1 used it (see :func:`_host_usage_mapper`).

    Its turns return :class:`~stapel_runner_protocol.adapters.TurnResult` (usage: a
    ``stapel_taskspecs.UsageSplit``), so without ``stapel-taskspecs`` (a broken install)
    the constructor raises :class:`~stapel_runner_protocol.errors.AdapterUnavailableError`
    with code ``taskspecs_unavailable`` rather than every turn failing later.
    """

    def __init__(
        self,
        command: Optional[Command] = None,
        *,
        spawn: Optional[SpawnFn] = None,
        usage_mapper: Optional[Callable[[Any], Any]] = None,
        on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        env: Optional[Mapping[str, str]] = None,
        max_line_bytes: int = DEFAULT_TURN_MAX_LINE_BYTES,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        _require_taskspecs("SubprocessAdapter")
        self._usage_mapper = usage_mapper
        self._host_mapper = _host_usage_mapper(usage_mapper)
        self._command = command
        self._env = dict(env or {})
        self._spawn = spawn
        self._on_progress = on_progress
        self._max_line_bytes = max_line_bytes
        self._grace_s = grace_s
        self._sessions: List[SubprocessSession] = []

    def open_session(self, role_spec: RoleSpec) -> SubprocessSession:
        """Spawn the child and open a session over it."""
        if self._spawn is not None:
            session = SubprocessSession(
                self._spawn(role_spec),
                usage_mapper=self._usage_mapper,
                on_progress=self._on_progress,
                max_line_bytes=self._max_line_bytes,
                grace_s=self._grace_s,
            )
        else:
            session = self._spawn_session(role_spec)
        # Keep only the sessions still open: an adapter that outlives many sessions
        # (one per Gateway run) does not hold on to every closed one.
        self._sessions = [s for s in self._sessions if not s.closed]
        self._sessions.append(session)
        return session

    def _spawn_session(self, role_spec: RoleSpec) -> SubprocessSession:
        """Ask the machine for the spawn request and perform it."""
        machine = SubprocessTurnMachine(
            self._max_line_bytes,
            grace_ms=_grace_ms(self._grace_s),
            attached=False,
            map_usage=self._host_mapper is None,
        )
        command = self._command(role_spec) if callable(self._command) else self._command
        machine.open(
            list(command or []),
            env=list(self._env.items()),
            path=os.environ.get("PATH", os.defpath),
            llm_base_url=role_spec.llm_base_url,
            now_ms=_now_ms(),
        )
        process: Any = None
        while True:
            outputs = machine.drain()
            if not outputs:
                break
            for kind, value in outputs:
                if isinstance(value, AdapterError):
                    raise value
                if kind == "spawn" and isinstance(value, dict):
                    try:
                        process = subprocess.Popen(
                            [value["program"], *value["args"]],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            env=value["env"],
                            cwd=value["cwd"],
                            start_new_session=value["new_process_group"],
                        )
                    except OSError as exc:
                        machine.spawn_failed(str(exc), _now_ms())
                        for _, err in machine.drain():
                            if isinstance(err, AdapterError):
                                raise err from exc
                        raise
                    machine.spawned(
                        process.pid,
                        process_group=bool(value["new_process_group"]),
                        now_ms=_now_ms(),
                    )
        return SubprocessSession(
            process,
            usage_mapper=self._usage_mapper,
            on_progress=self._on_progress,
            _machine=machine,
        )

    def close(self) -> None:
        """Close every session this adapter opened. Idempotent."""
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
