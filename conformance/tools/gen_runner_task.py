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

def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (desc, steps) in V.items():
        body = {"description": desc, "area": "runner_task", "steps": steps}
        (OUT / f"{name}.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
