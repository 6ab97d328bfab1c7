#!/usr/bin/env python3
"""Writes conformance/vectors/runner_task/*.json: the connected runner's task policy
(core/src/runner_task.rs), one call per step. Expectations are written out by hand here
from the rules in the module docs (not computed by the core)."""
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "vectors" / "runner_task"

def ev(t, payload=None, **extra):
    e = {"eventType": t, "payload": payload if payload is not None else {}}
    e.update(extra)
    return {"kind": "event", "event": e}

ZERO = {"cache_read": 0, "cache_write": 0, "fresh_input": 0, "output": 0, "thinking": 0}

def evidence(outcome, stage, code, reasons, pref, rein, sandbox, session_end, teardown, counts, tools):
    return {"contract_version": "1.0", "outcome": outcome, "failure_stage": stage, "failure_code": code,
            "failure_reasons": reasons, "harness_profile_ref": pref, "rein_id": rein,
            "model": "local" if rein else None, "repository": "local", "assignment_ref": None,
            "role_ref": None, "duty_ref": None, "goal_refs": [], "resource_envelope_refs": [],
            "sandbox_id": sandbox, "session_end": session_end, "teardown": teardown,
            "tool_calls": dict(zip(["requested", "dispatched", "succeeded", "unsuccessful",
                                    "dispatch_failed", "denied", "skipped", "abandoned"], counts)),
            "tools_used": tools, "duration_ms": 6, "rein_duration_ms": None, "tokens": None,
            "resolved_model": None, "commit": None, "artifacts": None,
            "tool_event_visibility": "unavailable", "tool_event_count": None, "redacted_fields": []}

REFUSED = {"ok": False, "evidence": evidence("refused", "resolution", "unknown", ["profile_not_found"], "nope", None, None, "not_attempted", "not_needed", [1, 0, 0, 0, 0, 0, 0, 0], []), "tool_output": None, "tool_error": None}
SUCCEEDED = {"ok": True, "evidence": evidence("succeeded", None, None, [], "fake", "local-run", "pg-1", "ended", "destroyed", [1, 1, 1, 0, 0, 0, 0, 0], ["run_task"]), "tool_output": {"status": "done"}, "tool_error": None}
FAILED = {"ok": False, "evidence": evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", "pg-1", "ended", "destroyed", [1, 1, 0, 1, 0, 0, 0, 0], ["run_task"]), "tool_output": None, "tool_error": "cancelled"}

def step(call, result=None, error=None):
    return {"input": call, "expect": {"error": error} if error else {"result": result}}

def report(task, status, summary, failure=None, usage=ZERO):
    r = {"schema_version": 1, "task_id": task, "status": status, "summary_business": summary}
    if failure:
        r["failure_type"] = failure
    r["usage"] = usage
    return r

V = {
 "backoff_doubles_and_caps": ("The capped delay doubles from initial_ms up to max_ms; with random 0 the wait is half of it", [
    step({"backoff": {"initial_ms": 100, "max_ms": 1000, "failures": n, "random": 0}}, {"capped_ms": c, "delay_ms": c // 2})
    for n, c in [(0, 100), (1, 200), (2, 400), (3, 800), (4, 1000), (40, 1000)]]),
 "backoff_jitter_upper_half": ("The jitter adds random mod (capped - capped/2 + 1): the wait stays within [capped/2, capped]", [
    step({"backoff": {"initial_ms": 100, "max_ms": 1000, "failures": 0, "random": 50}}, {"capped_ms": 100, "delay_ms": 100}),
    step({"backoff": {"initial_ms": 100, "max_ms": 1000, "failures": 0, "random": 51}}, {"capped_ms": 100, "delay_ms": 50}),
    step({"backoff": {"initial_ms": 100, "max_ms": 1000, "failures": 2, "random": 7}}, {"capped_ms": 400, "delay_ms": 207}),
    step({"backoff": {"initial_ms": 100, "max_ms": 1000, "failures": 63, "random": 9007199254740991}}, {"capped_ms": 1000, "delay_ms": 500 + 9007199254740991 % 501}),
 ]),
 "backoff_defaults": ("Without bounds the defaults apply: 250 ms first, 30 s at most", [
    step({"backoff": {"failures": 0, "random": 0}}, {"capped_ms": 250, "delay_ms": 125}),
    step({"backoff": {"failures": 20, "random": 15000}}, {"capped_ms": 30000, "delay_ms": 30000}),
    step({"backoff": {"initial_ms": 0, "max_ms": 0, "failures": 3, "random": 1}}, {"capped_ms": 1, "delay_ms": 1}),
 ]),
 "admit_bound_and_duplicates": ("An assignment starts below max_tasks (0 acts as 1); at the bound it is busy; a running task id is a duplicate first", [
    step({"admit": {"running": 0, "max_tasks": 2, "already_running": False}}, "start"),
    step({"admit": {"running": 1, "max_tasks": 2, "already_running": False}}, "start"),
    step({"admit": {"running": 2, "max_tasks": 2, "already_running": False}}, "busy"),
    step({"admit": {"running": 2, "max_tasks": 2, "already_running": True}}, "duplicate"),
    step({"admit": {"running": 0, "max_tasks": 0, "already_running": False}}, "start"),
    step({"admit": {"running": 1, "max_tasks": 0, "already_running": False}}, "busy"),
 ]),
 "local_event_items_are_tool_progress": ("item.* events become tool progress with the item id and kind, never the text", [
    step({"local_event": ev("item.started", {"kind": "command", "text": "rm -rf secret"}, itemId="item_1")},
         {"kind": "tool", "payload": {"event": "item.started", "item_id": "item_1", "item_kind": "command"}}),
    step({"local_event": ev("item.completed", {"kind": 3})}, {"kind": "tool", "payload": {"event": "item.completed"}}),
 ]),
 "local_event_not_forwarded": ("Receipts, diagnostics, item.delta (content) and run.terminal (the report says it) are not progress", [
    step({"local_event": {"kind": "command_receipt", "commandId": "c1"}}, None),
    step({"local_event": ev("item.delta", {"text": "x"})}, None),
    step({"local_event": ev("run.terminal", {"runTerminalState": "succeeded"})}, None),
    step({"local_event": {"kind": "event", "event": {"payload": {}}}}, None),
 ]),
 "local_event_state_controls_usage": ("Runtime requests are controls progress, a mappable usage object is usage progress, anything else is state (with its phase)", [
    step({"local_event": ev("runtime_request.created", {"request": {"type": "permission", "prompt": "may I?"}})},
         {"kind": "controls", "payload": {"event": "runtime_request.created", "request_type": "permission"}}),
    step({"local_event": ev("turn.usage", {"usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 4}})},
         {"kind": "usage", "payload": {"event": "turn.usage", "usage": {"cache_read": 4, "cache_write": 0, "fresh_input": 10, "output": 2, "thinking": 0}}}),
    step({"local_event": ev("runtime.phase.changed", {"phase": "running"})}, {"kind": "state", "payload": {"event": "runtime.phase.changed", "phase": "running"}}),
    step({"local_event": ev("session.started", {"usage": "n/a"})}, {"kind": "state", "payload": {"event": "session.started"}}),
 ]),
 "harness_event_kinds": ("Subprocess harness events: tool keeps its name, usage maps onto the split (else state), controls, anything else is state", [
    step({"harness_event": {"type": "tool", "name": "bash", "input": "ls"}}, {"kind": "tool", "payload": {"event": "tool", "name": "bash"}}),
    step({"harness_event": {"type": "usage", "usage": {"input_tokens": 5, "output_tokens": 1}}},
         {"kind": "usage", "payload": {"event": "usage", "usage": {"cache_read": 0, "cache_write": 0, "fresh_input": 5, "output": 1, "thinking": 0}}}),
    step({"harness_event": {"type": "usage", "usage": {"output": -1}}}, {"kind": "state", "payload": {"event": "usage"}}),
    step({"harness_event": {"type": "controls", "lint": "pass"}}, {"kind": "controls", "payload": {"event": "controls"}}),
    step({"harness_event": {"type": "thinking", "state": "planning", "text": "secret"}}, {"kind": "state", "payload": {"event": "thinking", "state": "planning"}}),
    step({"harness_event": {"state": 3}}, {"kind": "state", "payload": {"event": "event"}}),
 ]),
 "report_statuses": ("Each outcome becomes one TaskReport: done, blocked, or failed with a failure_type saying why, and the usage", [
    step({"report": {"task_id": "T-1", "outcome": {"type": "done"}, "usage": {"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4, "thinking": 5}}},
         report("T-1", "done", "the harness finished the task", usage={"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4, "thinking": 5})),
    step({"report": {"task_id": "T-1", "outcome": {"type": "blocked"}}}, report("T-1", "blocked", "the harness stopped and needs an answer")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "failed", "failure_type": "unexpected_eof"}}}, report("T-1", "failed", "the harness run failed (unexpected_eof)", "unexpected_eof")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "cancelled", "reason": "operator"}}}, report("T-1", "failed", "cancelled by the hub: operator", "cancelled")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "refused", "code": "unknown", "reasons": ["profile_not_found"]}}}, report("T-1", "failed", "harness profile refused (unknown): profile_not_found", "profile_refused")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "invalid_assignment", "code": "invalid_invocation"}}}, report("T-1", "failed", "the assignment could not be read (invalid_invocation)", "invalid_assignment")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "busy", "max_tasks": 4}}}, report("T-1", "failed", "the runner already runs its maximum of 4 tasks", "runner_busy")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "duplicate"}}}, report("T-1", "failed", "an attempt of this task is still running", "attempt_in_progress")),
    step({"report": {"task_id": "T-1", "outcome": {"type": "runner_restarted"}}}, report("T-1", "failed", "the runner restarted while the task ran; its harness did not survive", "runner_restarted")),
 ]),
 "local_terminal_outcomes": ("A local run's run.terminal decides the outcome: succeeded+done/needs_review is done, succeeded+blocked/yielded is blocked, cancelled and failed fail", [
    step({"local_terminal": {"runTerminalState": "succeeded", "reportedWorkDisposition": "done"}}, {"type": "done"}),
    step({"local_terminal": {"runTerminalState": "succeeded", "reportedWorkDisposition": "needs_review"}}, {"type": "done"}),
    step({"local_terminal": {"runTerminalState": "succeeded", "reportedWorkDisposition": "blocked"}}, {"type": "blocked"}),
    step({"local_terminal": {"runTerminalState": "succeeded", "reportedWorkDisposition": "yielded"}}, {"type": "blocked"}),
    step({"local_terminal": {"runTerminalState": "cancelled", "reportedWorkDisposition": "done"}}, {"type": "failed", "failure_type": "run_cancelled"}),
    step({"local_terminal": {"runTerminalState": "failed"}}, {"type": "failed", "failure_type": "harness_failed"}),
    step({"local_terminal": {}}, {"type": "failed", "failure_type": "harness_failed"}),
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_process_failed"}}}, {"type": "failed", "failure_type": "harness_process_failed"}),
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": "semantic_result_missing"}}}, {"type": "failed", "failure_type": "semantic_result_missing"}),
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}}, {"type": "failed", "failure_type": "harness_protocol_violation"}),
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": "request_expired"}}}, {"type": "failed", "failure_type": "request_expired"}),
    # A reason that is not a failed run's reason is not copied into the report.
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": "made_up_reason"}}}, {"type": "failed", "failure_type": "harness_failed"}),
    step({"local_terminal": {"runTerminalState": "failed", "reconciliation": {"reason": 7}}}, {"type": "failed", "failure_type": "harness_failed"}),
 ]),
 "local_end_names_the_violation": ("A failed local run that ended as a protocol violation (or without a known reason) names the violation; another reason, a success, a cancel or an unknown code does not change the outcome", [
    step({"local_end": {"payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}, "violation": "harness_ready_timeout"}}, {"type": "failed", "failure_type": "harness_ready_timeout"}),
    step({"local_end": {"payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}, "violation": "harness_exited_before_ready"}}, {"type": "failed", "failure_type": "harness_exited_before_ready"}),
    step({"local_end": {"payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}, "violation": "no_such_violation"}}, {"type": "failed", "failure_type": "harness_protocol_violation"}),
    step({"local_end": {"payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}, "violation": None}}, {"type": "failed", "failure_type": "harness_protocol_violation"}),
    step({"local_end": {"payload": {"runTerminalState": "cancelled"}, "violation": "stdout_frame_too_long"}}, {"type": "failed", "failure_type": "run_cancelled"}),
    # Another failure reason wins over a violation (the run did not end as one).
    step({"local_end": {"payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_process_failed"}}, "violation": "harness_ready_timeout"}}, {"type": "failed", "failure_type": "harness_process_failed"}),
    step({"local_end": {"payload": {"runTerminalState": "failed"}, "violation": "harness_ready_timeout"}}, {"type": "failed", "failure_type": "harness_ready_timeout"}),
    step({"local_end": {"payload": {"runTerminalState": "succeeded", "reportedWorkDisposition": "done"}, "violation": "stdout_frame_too_long"}}, {"type": "done"}),
    step({"local_end": {"payload": {"runTerminalState": "failed"}, "violation": 3}}, None, "invalid_call"),
    step({"local_end": {"violation": "harness_ready_timeout"}}, None, "invalid_call"),
 ]),
 "local_violation_codes": ("A local run's violation is a runner.diagnostic event at level error with a known violation code; anything else is not one", [
    *[step({"local_violation": ev("runner.diagnostic", {"level": "error", "code": c, "message": "m"})}, c) for c in [
        "stdout_frame_too_long", "stdout_invalid_utf8", "invalid_harness_message", "message_before_ready",
        "reserved_event_type", "invalid_runtime_request", "invalid_run_result", "too_many_pending_requests",
        "harness_ready_timeout", "harness_exited_before_ready"]],
    step({"local_violation": ev("runner.diagnostic", {"level": "warning", "code": "harness_ready_timeout"})}, None),
    step({"local_violation": ev("runner.diagnostic", {"level": "error", "code": "something_else"})}, None),
    step({"local_violation": ev("harness.diagnostic", {"level": "error", "code": "harness_ready_timeout"})}, None),
    step({"local_violation": {"kind": "receipt", "event": {"eventType": "runner.diagnostic", "payload": {"level": "error", "code": "harness_ready_timeout"}}}}, None),
    step({"local_violation": ev("runner.diagnostic", {"level": "error"})}, None),
 ]),
 "capabilities_from_catalog": ("hello.capabilities: the reins of the catalog's profiles the host can drive, each once, in catalog order", [
    step({"capabilities": {"drivable": ["local-run", "subprocess"]}}, ["local-run", "subprocess"]),
    step({"capabilities": {"drivable": ["local-run"]}}, ["local-run"]),
    step({"capabilities": {"drivable": []}}, []),
    step({"capabilities": {"drivable": ["subprocess", "local-run"], "catalog": {"profiles": [
        {"contract_version": "1.0", "profile_id": "a", "rein": "subprocess", "model": "m", "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["run_task"]}},
        {"contract_version": "1.0", "profile_id": "b", "rein": "agent-sdk", "model": "m", "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["run_task"]}},
        {"contract_version": "1.0", "profile_id": "c", "rein": "subprocess", "model": "m", "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["run_task"]}},
        {"contract_version": "1.0", "profile_id": "d", "rein": "local-run", "model": "m", "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["run_task"]}}]}}},
        ["subprocess", "local-run"]),
    step({"capabilities": {"drivable": ["agent-sdk"]}}, None, "invalid_call"),
    step({"capabilities": {}}, None, "invalid_call"),
    step({"capabilities": {"drivable": ["local-run"], "catalog": {"profiles": "x"}}}, None, "invalid_call"),
 ]),
 "profile_ref_choice": ("The harness profile is the invocation's harness_profile_ref, else its backend, else empty (refused as unknown)", [
    step({"profile_ref": {"invocation": {"backend": "fake", "harness_profile_ref": "coder-default"}}}, "coder-default"),
    step({"profile_ref": {"invocation": {"backend": "fake"}}}, "fake"),
    step({"profile_ref": {"invocation": {"harness_profile_ref": 3, "backend": "fake"}}}, "fake"),
    step({"profile_ref": {"invocation": {}}}, ""),
    step({"profile_ref": {"invocation": {"backend": 1}}}, None, "invalid_call"),
 ]),
 "gateway_outcome_choice": ("A refused resolution reports the refusal; a harness outcome other than done says why; otherwise the gateway's outcome", [
    step({"gateway_outcome": {"result": REFUSED, "harness": None}}, {"type": "refused", "code": "unknown", "reasons": ["profile_not_found"]}),
    step({"gateway_outcome": {"result": SUCCEEDED, "harness": {"type": "done"}}}, {"type": "done"}),
    step({"gateway_outcome": {"result": SUCCEEDED, "harness": {"type": "blocked"}}}, {"type": "blocked"}),
    step({"gateway_outcome": {"result": FAILED, "harness": {"type": "cancelled", "reason": "operator"}}}, {"type": "cancelled", "reason": "operator"}),
    step({"gateway_outcome": {"result": FAILED, "harness": {"type": "done"}}}, {"type": "failed", "failure_type": "rein_reported_failure"}),
    step({"gateway_outcome": {"result": FAILED}}, {"type": "failed", "failure_type": "rein_reported_failure"}),
 ]),
 "invalid_calls": ("Malformed calls are invalid_call", [
    step({"admit": {"running": 1, "max_tasks": 1}}, None, "invalid_call"),
    step({"backoff": {"failures": -1, "random": 0}}, None, "invalid_call"),
    step({"report": {"task_id": "T-1", "outcome": {"type": "maybe"}}}, None, "invalid_call"),
    step({"report": {"task_id": "T-1", "outcome": {"type": "done"}, "usage": {"output": 1}}}, None, "invalid_call"),
    step({"nothing": {}}, None, "invalid_call"),
 ]),
}

# ---- the task-run machine, the catalog, the connection policy ------------------------

def fnv(s):
    h = 0x811c9dc5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return h

def sandbox(task, attempt):
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in task[:48])
    return f"{safe}-{attempt}-{fnv(task):08x}"

USAGE = {"cache_read": 4, "cache_write": 0, "fresh_input": 3, "output": 1, "thinking": 0}

def run_evidence(outcome, stage, code, reasons, pref, rein, name, session_end, teardown, counts, tools, duration, tokens=None, model="local"):
    e = evidence(outcome, stage, code, reasons, pref, rein, name, session_end, teardown, counts, tools)
    e.update({"duration_ms": duration, "tokens": tokens, "role_ref": "coder", "model": model if rein else None})
    return e

def assign(task="T-1", goal="fix the bug", **inv):
    return {"task_id": task, "attempt": 1, "role": "coder", "task": {"schema_version": 1, "id": task, "goal": goal}, "invocation": inv}

def at(t, inp):
    return {"at": t, "input": inp}

def o(outputs, timeout=None):
    return {"outputs": outputs, "timeout": timeout}

def create(task="T-1", profile="process-group"):
    return {"type": "create_sandbox", "name": sandbox(task, 1), "sandbox_profile": profile}

def harness(rein="local-run", profile="fake", wd="/w/s", prompt="fix the bug", url=None, model="local"):
    return {"type": "run_harness", "rein": rein, "profile_id": profile, "model": model, "prompt": prompt, "llm_base_url": url, "working_directory": wd}

def destroy(task="T-1", path="/w/s"):
    return {"type": "destroy_sandbox", "name": sandbox(task, 1), "path": path}

def rep_out(report_obj, outcome, ev):
    return {"type": "report", "report": report_obj, "outcome": outcome, "evidence": ev}

def with_stage(r, stage):
    r = dict(r)
    r["failure_stage"] = stage
    return r

CREATED = at(1, {"type": "sandbox_created", "path": "/w/s"})
DESTROYED = lambda t: at(t, {"type": "sandbox_destroyed"})
DONE_TERMINAL = {"type": "local_terminal", "payload": {"runTerminalState": "succeeded", "reportedWorkDisposition": "done"}}
OK_COUNTS = [1, 1, 1, 0, 0, 0, 0, 0]
BAD_COUNTS = [1, 1, 0, 1, 0, 0, 0, 0]
N = sandbox("T-1", 1)

def tr(assign_obj, inputs, catalog=None, config=None):
    c = {"assign": assign_obj, "inputs": inputs}
    if catalog is not None:
        c["catalog"] = catalog
    if config is not None:
        c["config"] = config
    return {"task_run": c}

def catalog_with(profile_extra, rein="local-run"):
    p = {"contract_version": "1.0", "profile_id": "custom", "rein": rein, "model": "m1",
         "sandbox_profile": "dir", "tool_policy": {"allowed_tools": ["run_task"]}}
    p.update(profile_extra)
    return {"profiles": [p], "reins": [{"rein_id": rein, "contract_version": "1.0"}]}

DEFAULT_CATALOG = {
    "profiles": [
        {"contract_version": "1.0", "profile_id": "fake", "rein": "local-run", "model": "local", "sandbox_profile": "process-group", "tool_policy": {"allowed_tools": ["run_task"]}},
        {"contract_version": "1.0", "profile_id": "subprocess", "rein": "subprocess", "model": "local", "sandbox_profile": "process-group", "tool_policy": {"allowed_tools": ["run_task"]}},
    ],
    "reins": [{"rein_id": "local-run", "contract_version": "1.0"}, {"rein_id": "subprocess", "contract_version": "1.0"}],
}

CANCEL_SUMMARY = "cancelled by the hub: operator"

V.update({
 "task_run_done_through_the_lifecycle": ("A task runs resolve -> sandbox -> harness -> teardown and reports done; local-run usage is unknown, so evidence tokens stay null and the report's usage is zeros", [
    step(tr(assign(backend="fake"), [CREATED, at(5, {"type": "harness_ended", "end": DONE_TERMINAL}), DESTROYED(6)]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(report("T-1", "done", "the harness finished the task"), {"type": "done"},
                   run_evidence("succeeded", None, None, [], "fake", "local-run", N, "ended", "destroyed", OK_COUNTS, ["run_task"], 6))]),
    ]),
    step(tr(assign(backend="subprocess", goal="write tests", llm_base_url="http://llm.local"), [CREATED, at(7, {"type": "harness_ended", "end": {"type": "turn_result", "usage": USAGE}}), DESTROYED(9)]), [
        o([create()]), o([harness("subprocess", "subprocess", prompt="write tests", url="http://llm.local")]), o([destroy()]),
        o([rep_out(report("T-1", "done", "the harness finished the task", usage=USAGE), {"type": "done"},
                   run_evidence("succeeded", None, None, [], "subprocess", "subprocess", N, "ended", "destroyed", OK_COUNTS, ["run_task"], 9, tokens=USAGE))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(5, {"type": "harness_ended", "end": {"type": "local_terminal", "payload": {"runTerminalState": "succeeded", "reportedWorkDisposition": "blocked"}}}), DESTROYED(6)]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(report("T-1", "blocked", "the harness stopped and needs an answer"), {"type": "blocked"},
                   run_evidence("succeeded", None, None, [], "fake", "local-run", N, "ended", "destroyed", OK_COUNTS, ["run_task"], 6))]),
    ]),
 ]),
 "task_run_cancel_before_the_end_wins": ("A cancel that reaches the task before the harness's end wins, whatever the harness then says (its usage is kept); it asks for an interruption at the next boundary and arms the boundary deadline", [
    step(tr(assign(backend="subprocess"), [CREATED, at(100, {"type": "cancel", "reason": "operator"}), at(200, {"type": "cancel", "reason": "again"}),
             at(300, {"type": "harness_ended", "end": {"type": "turn_result", "usage": USAGE}}), DESTROYED(301)]), [
        o([create()]), o([harness("subprocess", "subprocess")]), o([{"type": "interrupt", "reason": "operator"}], 5100), o([], 5100), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", CANCEL_SUMMARY, "cancelled", usage=USAGE), "execution"), {"type": "cancelled", "reason": "operator"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "subprocess", "subprocess", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 301, tokens=USAGE))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(10, {"type": "cancel", "reason": "operator"}), at(20, {"type": "harness_ended", "end": DONE_TERMINAL}), DESTROYED(21)]), [
        o([create()]), o([harness()]), o([{"type": "interrupt", "reason": "operator"}], 5010), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", CANCEL_SUMMARY, "cancelled"), "execution"), {"type": "cancelled", "reason": "operator"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 21))]),
    ]),
 ]),
 "task_run_cancel_after_the_end_is_ignored": ("A cancel that arrives after the harness's end is too late: the harness's outcome stands", [
    step(tr(assign(backend="subprocess"), [CREATED, at(5, {"type": "harness_ended", "end": {"type": "turn_result", "usage": USAGE}}), at(6, {"type": "cancel", "reason": "operator"}), DESTROYED(7)]), [
        o([create()]), o([harness("subprocess", "subprocess")]), o([destroy()]), o([]),
        o([rep_out(report("T-1", "done", "the harness finished the task", usage=USAGE), {"type": "done"},
                   run_evidence("succeeded", None, None, [], "subprocess", "subprocess", N, "ended", "destroyed", OK_COUNTS, ["run_task"], 7, tokens=USAGE))]),
    ]),
 ]),
 "task_run_hard_stop_after_the_boundary_wait": ("A harness that does not reach its boundary within cancel_boundary_ms is stopped hard, once; an early timeout does nothing", [
    step(tr(assign(backend="fake"), [CREATED, at(10, {"type": "cancel", "reason": "operator"}), at(500, {"type": "timeout"}), at(1010, {"type": "timeout"}), at(1500, {"type": "timeout"}),
             at(1600, {"type": "harness_ended", "end": {"type": "lost"}}), DESTROYED(1601)], config={"cancel_boundary_ms": 1000}), [
        o([create()]), o([harness()]), o([{"type": "interrupt", "reason": "operator"}], 1010), o([], 1010), o([{"type": "hard_stop"}]), o([]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", CANCEL_SUMMARY, "cancelled"), "execution"), {"type": "cancelled", "reason": "operator"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 1601))]),
    ]),
 ]),
 "task_run_cancel_before_the_harness_starts": ("A cancel while the sandbox is being made aborts the session before any harness starts; the sandbox is still removed", [
    step(tr(assign(backend="fake"), [at(0, {"type": "cancel", "reason": "operator"}), CREATED, DESTROYED(2)]), [
        o([create()]), o([]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", CANCEL_SUMMARY, "cancelled"), "session_start"), {"type": "cancelled", "reason": "operator"},
                   dict(run_evidence("failed", "session_start", "aborted", ["cancelled"], "fake", "local-run", N, "not_attempted", "destroyed", [1, 0, 0, 0, 0, 0, 0, 0], [], 2)))]),
    ]),
 ]),
 "task_run_shutdown": ("The runner's shutdown interrupts like a cancel and reports runner_shutdown", [
    step(tr(assign(backend="fake"), [CREATED, at(3, {"type": "shutdown"}), at(4, {"type": "harness_ended", "end": {"type": "local_terminal", "payload": {"runTerminalState": "cancelled"}}}), DESTROYED(5)]), [
        o([create()]), o([harness()]), o([{"type": "interrupt", "reason": "runner_shutdown"}], 5003), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the runner shut down while the task ran", "runner_shutdown"), "execution"), {"type": "shutdown"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 5))]),
    ]),
 ]),
 "task_run_harness_failures": ("Harness ends that are failures: a turn error keeps its code, a lost stream is harness_lost, a local run's violation names itself, a host error is host_error_<kind> (a failed dispatch)", [
    step(tr(assign(backend="subprocess"), [CREATED, at(2, {"type": "harness_ended", "end": {"type": "turn_error", "code": "unexpected_eof"}}), DESTROYED(3)]), [
        o([create()]), o([harness("subprocess", "subprocess")]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (unexpected_eof)", "unexpected_eof"), "execution"), {"type": "failed", "failure_type": "unexpected_eof"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "subprocess", "subprocess", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 3))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(2, {"type": "harness_ended", "end": {"type": "lost"}}), DESTROYED(3)]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (harness_lost)", "harness_lost"), "execution"), {"type": "failed", "failure_type": "harness_lost"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 3))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(2, {"type": "harness_ended", "end": {"type": "local_terminal", "violation": "harness_ready_timeout", "payload": {"runTerminalState": "failed", "reconciliation": {"reason": "harness_protocol_violation"}}}}), DESTROYED(3)]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (harness_ready_timeout)", "harness_ready_timeout"), "execution"), {"type": "failed", "failure_type": "harness_ready_timeout"},
                   run_evidence("failed", "execution", "rein_reported_failure", [], "fake", "local-run", N, "ended", "destroyed", BAD_COUNTS, ["run_task"], 3))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(2, {"type": "harness_ended", "end": {"type": "host_error", "kind": "broken_pipe"}}), DESTROYED(3)]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (host_error_broken_pipe)", "host_error_broken_pipe"), "execution"), {"type": "failed", "failure_type": "host_error_broken_pipe"},
                   run_evidence("failed", "execution", "tool_dispatch_failed", [], "fake", "local-run", N, "ended", "destroyed", [1, 1, 0, 0, 1, 0, 0, 0], ["run_task"], 3))]),
    ]),
 ]),
 "task_run_refusals_and_bad_assignments": ("A refused profile reports why (stage resolution, nothing created); an unreadable invocation reports invalid_assignment without a lifecycle", [
    step(tr(assign(backend="nope"), []), [
        o([rep_out(with_stage(report("T-1", "failed", "harness profile refused (unknown): profile_not_found", "profile_refused"), "resolution"),
                   {"type": "refused", "code": "unknown", "reasons": ["profile_not_found"]},
                   run_evidence("refused", "resolution", "unknown", ["profile_not_found"], "nope", None, None, "not_attempted", "not_needed", [1, 0, 0, 0, 0, 0, 0, 0], [], 0))]),
    ]),
    step(tr(assign(backend=1), []), [
        o([rep_out(report("T-1", "failed", "the assignment could not be read (invalid_invocation)", "invalid_assignment"), {"type": "invalid_assignment", "code": "invalid_invocation"}, None)]),
    ]),
 ]),
 "task_run_sandbox_and_teardown_failures": ("A sandbox that cannot be made fails at sandbox_create; a teardown failure after a finished harness fails at teardown", [
    step(tr(assign(backend="fake"), [at(1, {"type": "sandbox_create_failed", "message": "disk full"})]), [
        o([create()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (sandbox_create_failed)", "sandbox_create_failed"), "sandbox_create"), {"type": "failed", "failure_type": "sandbox_create_failed"},
                   run_evidence("failed", "sandbox_create", "sandbox_create_failed", [], "fake", "local-run", None, "not_attempted", "not_needed", [1, 0, 0, 0, 0, 0, 0, 0], [], 1))]),
    ]),
    step(tr(assign(backend="fake"), [CREATED, at(2, {"type": "harness_ended", "end": DONE_TERMINAL}), at(3, {"type": "sandbox_destroy_failed"})]), [
        o([create()]), o([harness()]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (teardown_failed)", "teardown_failed"), "teardown"), {"type": "failed", "failure_type": "teardown_failed"},
                   run_evidence("failed", "teardown", "teardown_failed", [], "fake", "local-run", N, "ended", "failed", OK_COUNTS, ["run_task"], 3))]),
    ]),
 ]),
 "task_run_profile_choices": ("A profile's rein must be one this runner drives (else unsupported_rein at session_start); its metadata.working_directory replaces the sandbox path as the harness's directory", [
    step(tr(assign(backend="custom"), [CREATED, DESTROYED(2)], catalog=catalog_with({}, rein="docker")), [
        o([create(profile="dir")]), o([destroy()]),
        o([rep_out(with_stage(report("T-1", "failed", "the harness run failed (unsupported_rein)", "unsupported_rein"), "session_start"), {"type": "failed", "failure_type": "unsupported_rein"},
                   run_evidence("failed", "session_start", "session_start_failed", [], "custom", "docker", N, "not_attempted", "destroyed", [1, 0, 0, 0, 0, 0, 0, 0], [], 2, model="m1"))]),
    ]),
    step(tr(assign(backend="custom"), [CREATED], catalog=catalog_with({"metadata": {"working_directory": "/srv/repo"}})), [
        o([create(profile="dir")]), o([harness(profile="custom", wd="/srv/repo", model="m1")]),
    ]),
 ]),
 "default_catalog_table": ("Without --profiles a runner offers profile fake (local-run) and profile subprocess (subprocess), each allowed only run_task", [
    step({"default_catalog": {}}, DEFAULT_CATALOG),
 ]),
 "sandbox_names": ("A sandbox name keeps [A-Za-z0-9_-] of the id (others become _), adds the attempt and the id's FNV-1a hash: distinct ids never share a name, none climbs out", [
    step({"sandbox_name": {"task_id": "T-1", "attempt": 2}}, sandbox("T-1", 2)),
    step({"sandbox_name": {"task_id": "../../etc", "attempt": 1}}, sandbox("../../etc", 1)),
    step({"sandbox_name": {"task_id": "a/b", "attempt": 1}}, sandbox("a/b", 1)),
    step({"sandbox_name": {"task_id": "a_b", "attempt": 1}}, sandbox("a_b", 1)),
    step({"sandbox_name": {"task_id": "x" * 60, "attempt": 1}}, sandbox("x" * 60, 1)),
 ]),
 "tool_results": ("The run_task tool result: done and blocked succeed with their status, anything else fails with its failure_type", [
    step({"tool_result": {"type": "done"}}, {"ok": True, "output": {"status": "done"}, "error": None, "metadata": {}}),
    step({"tool_result": {"type": "blocked"}}, {"ok": True, "output": {"status": "blocked"}, "error": None, "metadata": {}}),
    step({"tool_result": {"type": "failed", "failure_type": "unexpected_eof"}}, {"ok": False, "output": None, "error": "unexpected_eof", "metadata": {}}),
    step({"tool_result": {"type": "cancelled", "reason": "x"}}, {"ok": False, "output": None, "error": "cancelled", "metadata": {}}),
 ]),
 "connect_config_defaults": ("The connection's bounds and timings: documented defaults; the write timeout follows the dead-peer timeout clamped to 1-30 s (30 s when it is off) unless set", [
    step({"connect_config": {"config": {}, "peer_timeout_ms": 45000}}, {"max_tasks": 4, "connect_timeout_ms": 10000, "write_timeout_ms": 30000, "shutdown_grace_ms": 5000, "close_timeout_ms": 200, "max_queued_messages": 64, "max_event_batch": 256, "backoff_initial_ms": 250, "backoff_max_ms": 30000, "cancel_boundary_ms": 5000}),
    step({"connect_config": {"config": {}, "peer_timeout_ms": 400}}, {"max_tasks": 4, "connect_timeout_ms": 10000, "write_timeout_ms": 1000, "shutdown_grace_ms": 5000, "close_timeout_ms": 200, "max_queued_messages": 64, "max_event_batch": 256, "backoff_initial_ms": 250, "backoff_max_ms": 30000, "cancel_boundary_ms": 5000}),
    step({"connect_config": {"config": {}, "peer_timeout_ms": 0}}, {"max_tasks": 4, "connect_timeout_ms": 10000, "write_timeout_ms": 30000, "shutdown_grace_ms": 5000, "close_timeout_ms": 200, "max_queued_messages": 64, "max_event_batch": 256, "backoff_initial_ms": 250, "backoff_max_ms": 30000, "cancel_boundary_ms": 5000}),
    step({"connect_config": {"config": {"max_tasks": 0, "write_timeout_ms": 77, "max_event_batch": 0, "backoff_initial_ms": 10, "cancel_boundary_ms": 1}, "peer_timeout_ms": 5000}}, {"max_tasks": 1, "connect_timeout_ms": 10000, "write_timeout_ms": 77, "shutdown_grace_ms": 5000, "close_timeout_ms": 200, "max_queued_messages": 64, "max_event_batch": 1, "backoff_initial_ms": 10, "backoff_max_ms": 30000, "cancel_boundary_ms": 1}),
    step({"connect_config": {"config": {"max_task": 1}, "peer_timeout_ms": 0}}, None, "invalid_call"),
    step({"connect_config": {"config": {"max_tasks": "2"}, "peer_timeout_ms": 0}}, None, "invalid_call"),
 ]),
 "reconnect_counter": ("Every failed connect and every lost connection backs off one step further; a connection that delivered a frame starts the count again", [
    step({"reconnect": {"backoff": {"initial_ms": 100, "max_ms": 1000}, "events": [
        {"connect_failed": {"random": 0}}, {"connect_failed": {"random": 0}}, {"connect_failed": {"random": 0}},
        {"lost": {"received_frame": False, "random": 0}}, {"lost": {"received_frame": True, "random": 0}},
        {"connect_failed": {"random": 1000}}, {"lost": {"received_frame": False, "random": 0}}]}},
        [{"delay_ms": 50, "failures": 1}, {"delay_ms": 100, "failures": 2}, {"delay_ms": 200, "failures": 3},
         {"delay_ms": 400, "failures": 4}, {"delay_ms": 50, "failures": 1}, {"delay_ms": 100 + 1000 % 101, "failures": 2}, {"delay_ms": 200, "failures": 3}]),
    step({"reconnect": {"events": [{"lost": {"received_frame": True}}]}}, None, "invalid_call"),
 ]),
 "restart_plans": ("A restarted runner reports every started, unreported task as runner_restarted; an absent or unreadable snapshot means a fresh state", [
    step({"restart": {"snapshot": "readable", "tasks": {"T-1": 2, "T-2": 1}}}, {"fresh_state": False, "reports": [
        {"task_id": "T-1", "attempt": 2, "report": report("T-1", "failed", "the runner restarted while the task ran; its harness did not survive", "runner_restarted")},
        {"task_id": "T-2", "attempt": 1, "report": report("T-2", "failed", "the runner restarted while the task ran; its harness did not survive", "runner_restarted")}]}),
    step({"restart": {"snapshot": "unreadable", "tasks": {}}}, {"fresh_state": True, "reports": []}),
    step({"restart": {"snapshot": "absent", "tasks": {}}}, {"fresh_state": True, "reports": []}),
    step({"restart": {"snapshot": "lost", "tasks": {}}}, None, "invalid_call"),
 ]),
})

# The same attempt of a running task is ignored (a second report on its stream would make two).
V["admit_bound_and_duplicates"][1].append(step({"admit": {"running": 1, "max_tasks": 2, "already_running": True, "same_attempt": True}}, "ignore"))
V["admit_bound_and_duplicates"][1].append(step({"admit": {"running": 1, "max_tasks": 2, "already_running": True, "same_attempt": False}}, "duplicate"))
V["admit_bound_and_duplicates"][1].append(step({"admit": {"running": 0, "max_tasks": 2, "already_running": False, "same_attempt": True}}, "start"))
V["report_statuses"][1].append(step({"report": {"task_id": "T-1", "outcome": {"type": "shutdown"}}}, report("T-1", "failed", "the runner shut down while the task ran", "runner_shutdown")))

def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (desc, steps) in V.items():
        body = {"description": desc, "area": "runner_task", "steps": steps}
        (OUT / f"{name}.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
