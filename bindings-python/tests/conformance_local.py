"""Area ``local``: LocalRun through the public Python API (see conformance/README.md).

Every step compares the full output list and the timer; ``_Oracle`` checks seed 002's
envelope and lifecycle facts over the whole vector independently of the recording."""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, List, Optional, Tuple

from conftest import json_equal
from stapel_runner_protocol import ConfigError, ProtocolStateError
from conformance_session import check_config
from stapel_runner_protocol.local import LocalRun


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _bytes(inp: Dict[str, Any], key: str) -> Optional[bytes]:
    if key in inp:
        return (json.dumps(inp[key], separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    if f"{key}_text" in inp:
        return str(inp[f"{key}_text"]).encode("utf-8")
    if f"{key}_hex" in inp:
        return bytes.fromhex(inp[f"{key}_hex"])
    return None


def _output_json(kind: str, value: Any) -> Dict[str, Any]:
    if kind in ("to_controller", "to_harness"):
        return {kind: json.loads(value)}
    if kind == "spawn":
        return {"spawn": {**value, "env": [list(p) for p in value["env"]]}}
    if kind == "close_harness_stdin":
        return {"close_harness_stdin": True}
    if kind in ("signal", "exit"):
        return {kind: value}
    raise AssertionError(f"unknown output {kind}")


_PRIORITY_0 = {"run.result.proposed", "run.terminal", "turn.completed", "turn.failed",
               "turn.interrupted", "harness.exited"}
_PRIORITY_2 = {"item.delta", "harness.diagnostic", "runner.diagnostic"}
_REASON_STATES = {
    "turn_interrupted": ("interrupted", "cancelled"),
    "run_cancelled": ("cancelled", "cancelled"),
    "controller_closed": ("cancelled", "cancelled"),
    "successful_process_and_result": ("completed", "succeeded"),
    "harness_protocol_violation": ("failed", "failed"),
    "harness_process_failed": ("failed", "failed"),
    "semantic_result_missing": ("failed", "failed"),
    "request_expired": ("failed", "failed"),
}


class _Oracle:
    """Seed 002's facts: the event envelope (contiguous ``sourceSeq`` from 1, derived id,
    configured ids, priority table, injected clock), at most one ``run.terminal`` with
    nothing after it, the finalization facts (``_lifecycle``), the spawn request
    (``_spawn``), signals only to the spawned group (KILL once), and one receipt per fed
    command line."""

    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.run_id = config.get("run_id", "run_local")
        self.session_id = config.get("normalized_session_id", "session_local")
        self.instance_id = config.get("source_instance_id", "runner_local")
        self.start = config.get("clock_start_ms", 1_767_225_600_000)
        self.step = config.get("clock_step_ms", 1)
        self.seq = 1
        self.terminal = False
        self.pid: Optional[int] = None
        self.kills = 0
        self.exited = False
        self.partial = b""
        self.unanswered: Dict[Tuple[str, int], int] = {}
        self.exit: Optional[Dict[str, Any]] = None
        self.result_seen = False
        self.violation_seen = False
        self.last_event = ""

    def accepted(self, inp: Dict[str, Any]) -> None:
        """Note the facts of an input the machine accepted."""
        if "harness_spawned" in inp:
            self.pid = inp["harness_spawned"]["pid"]
        if "harness_exited" in inp:
            code, signal = inp["harness_exited"].get("code"), inp["harness_exited"].get("signal")
            self.exit = {"exitCode": code, "success": code == 0 and signal is None,
                         "signal": signal}

    def feed(self, data: Optional[bytes]) -> None:
        if data is None:
            return
        self.partial += data
        while b"\n" in self.partial:
            line, self.partial = self.partial.split(b"\n", 1)
            try:
                cmd = json.loads(line)
            except ValueError:
                continue
            if not isinstance(cmd, dict):
                continue
            cid, seq = cmd.get("commandId"), cmd.get("controllerSeq")
            if isinstance(cid, str) and isinstance(seq, int) and not isinstance(seq, bool) \
                    and seq >= 0:
                self.unanswered[(cid, seq)] = self.unanswered.get((cid, seq), 0) + 1

    def _event(self, e: Dict[str, Any]) -> None:
        assert not self.terminal, f"event after run.terminal: {e}"
        seq, et = self.seq, e["eventType"]
        at = datetime.datetime.fromtimestamp(
            (self.start + (seq - 1) * self.step) / 1000, tz=datetime.timezone.utc)
        want = {
            "schema": "paperclip.prp.event.v1",
            "sourceEventId": f"event_{self.run_id}_{seq:03}",
            "sourceSeq": seq, "sourceInstanceId": self.instance_id, "sourceKind": "runner",
            "runId": self.run_id, "normalizedSessionId": self.session_id, "schemaVersion": 1,
            "priority": 0 if et in _PRIORITY_0 else 2 if et in _PRIORITY_2 else 1,
            "emittedAt": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03}Z",
        }
        for k, v in want.items():
            assert e.get(k) == v, f"event {seq}: {k} is {e.get(k)!r}, want {v!r}"
        assert isinstance(e.get("payload"), dict), f"event {seq}: payload is not an object"
        self._lifecycle(et, e["payload"])
        self.seq += 1
        self.terminal = et == "run.terminal"
        self.last_event = et

    def _lifecycle(self, et: str, p: Dict[str, Any]) -> None:
        """``harness.exited`` reports the fed exit; ``run.terminal`` follows it directly,
        repeats it, and derives its states from its reason (FACTS.md)."""
        if et == "run.result.proposed":
            self.result_seen = True
        elif et == "runner.diagnostic":
            self.violation_seen = True
        elif et == "harness.exited":
            assert self.exit is not None, "harness.exited without a fed harness_exited"
            _eq("harness.exited processExit", p["processExit"], self.exit)
            _eq("harness.exited semanticResultObserved", p["semanticResultObserved"],
                self.result_seen)
        elif et == "run.terminal":
            r = p["reconciliation"]
            if self.exit is not None:
                assert self.last_event == "harness.exited", "run.terminal must follow harness.exited"
            _eq("reconciliation processExit", r["processExit"], self.exit)
            _eq("reconciliation authority", r["authority"], "runner")
            _eq("reconciliation semanticResultObserved", r["semanticResultObserved"],
                self.result_seen)
            reason = r["reason"]
            states = _REASON_STATES.get(reason)
            assert states is not None, f"unknown reason {reason!r}"
            _eq(f"states of {reason}", (p["turnTerminalState"], p["runTerminalState"]), states)
            assert (reason == "harness_protocol_violation") == self.violation_seen, \
                "a violation must decide the terminal, and only a violation"
            if reason == "successful_process_and_result":
                assert self.exit is not None and self.exit["success"] and self.result_seen
            if r["proposalContradicted"]:
                assert r["proposalValid"] is True
            if p["harnessTerminalProposal"] is None:
                assert r["proposalValid"] is False

    def output(self, o: Dict[str, Any]) -> None:
        if "to_controller" in o:
            m = o["to_controller"]
            assert m["schema"] == "paperclip.runner.stream.v1"
            msg = m["message"]
            if msg["kind"] == "event":
                self._event(msg["event"])
            elif msg["kind"] == "command_receipt":
                key = (msg["commandId"], msg["controllerSeq"])
                self.unanswered[key] = self.unanswered.get(key, 0) - 1
                assert self.unanswered[key] >= 0, f"receipt {key} answers no fed command"
            else:
                assert msg["kind"] == "diagnostic", msg
        if "spawn" in o:
            self._spawn(o["spawn"])
        if "signal" in o:
            s = o["signal"]
            assert self.pid is not None and s["group"] == self.pid, \
                f"signal {s} does not target the spawned group {self.pid}"
            if s["signal"] == "KILL":
                self.kills += 1
                assert self.kills == 1, "a second KILL"
        if "exit" in o:
            self.exited = True
            before_prepare = o["exit"] == 1 and self.seq == 1
            assert self.terminal or before_prepare, f"exit {o['exit']} without run.terminal"

    def _spawn(self, sp: Dict[str, Any]) -> None:
        """The configured program and args in a new process group, with exactly the
        allowed names of the offered environment, sorted by name."""
        c = self.config
        allow = c.get("env_allow", ["PATH"])
        env = sorted([k, v] for k, v in c.get("harness_env", {}).items() if k in allow)
        want = {"program": c.get("harness_program", "fake-harness"),
                "args": c.get("harness_args", []), "env": env, "new_process_group": True}
        _eq("spawn", sp, want)

    def finish(self) -> None:
        if self.exited:
            left = {k: n for k, n in self.unanswered.items() if n != 0}
            assert not left, f"unanswered commands at the end: {left}"


def _feed(machine: LocalRun, now: int, inp: Dict[str, Any]) -> None:
    for key, method in (("controller", machine.controller_bytes),
                        ("harness", machine.harness_stdout), ("stderr", machine.harness_stderr)):
        data = _bytes(inp, key)
        if data is not None:
            method(now, data)
            return
    if "controller_eof" in inp:
        machine.controller_eof(now)
    elif "harness_spawned" in inp:
        machine.harness_spawned(now, inp["harness_spawned"]["pid"])
    elif "harness_spawn_failed" in inp:
        machine.harness_spawn_failed(now, inp["harness_spawn_failed"]["message"])
    elif "harness_exited" in inp:
        e = inp["harness_exited"]
        machine.harness_exited(now, e.get("code"), e.get("signal"))
    elif "timeout" in inp:
        machine.timeout(now)
    else:
        raise AssertionError(f"unknown input {inp}")


def run_local(vector: Dict[str, Any]) -> None:
    config = vector.get("config", {})
    try:
        machine = LocalRun(config)
    except ConfigError as e:  # a refused config (the core's code and key on it)
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    oracle = _Oracle(config)
    now = 0
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        assert "outputs" in expect and "timeout" in expect, f"step {i}: expect is incomplete"
        now = int(inp.get("now_ms", now))
        oracle.feed(_bytes(inp, "controller"))
        error: Optional[str] = None
        try:
            _feed(machine, now, inp)
        except ProtocolStateError as e:
            error = e.code
        if error is None:
            oracle.accepted(inp)
        drained = machine.drain_outputs()
        kind, timeout = drained[-1]
        assert kind == "timeout", f"step {i}: drain did not end with the timer"
        outputs: List[Dict[str, Any]] = [_output_json(k, v) for k, v in drained[:-1]]
        for o in outputs:
            oracle.output(o)
        _eq(f"step {i} error", error, expect.get("error"))
        _eq(f"step {i} outputs", outputs, expect["outputs"])
        _eq(f"step {i} timeout", timeout, expect["timeout"])
    oracle.finish()
