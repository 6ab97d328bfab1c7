#!/usr/bin/env python3
"""Writes the `wire` and `framing` conformance vectors.

Expected values are written out by hand from the rules in conformance/README.md; the
expected encodings are produced by Python's own `json.dumps` (compact separators,
ensure_ascii=False) over dicts whose key order is written here explicitly — an independent
reference, not the Rust encoder. Re-run after editing: python3 conformance/tools/gen_wire_framing.py
"""
import json
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors")


def enc(d):
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def write(area, name, description, steps, config=None):
    d = os.path.join(ROOT, area)
    os.makedirs(d, exist_ok=True)
    v = {"description": description, "area": area}
    if config is not None:
        v["config"] = config
    v["steps"] = steps
    with open(os.path.join(d, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(v, f, ensure_ascii=False, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------- wire

def ok_roundtrip(name, description, frame_obj, canonical_obj, validate=True, frame_text=None):
    text = frame_text if frame_text is not None else enc(frame_obj)
    write("wire", name, description, [{
        "input": {"decode": text, "validate": validate},
        "expect": {"type": canonical_obj["type"], "message": canonical_obj, "encoded": enc(canonical_obj)},
    }])


def err(name, description, text, code, violations=None, validate=True, hex_input=None):
    e = {"code": code}
    if violations is not None:
        e["violations"] = [{"location": l, "rule": r} for l, r in violations]
    inp = {"decode_hex": hex_input} if hex_input else {"decode": text}
    inp["validate"] = validate
    write("wire", name, description, [{"input": inp, "expect": {"error": e}}])


def encode_case(name, description, obj, expected_obj):
    write("wire", name, description, [{"input": {"encode": obj}, "expect": {"encoded": enc(expected_obj)}}])


USAGE = {"cache_read": 1200, "cache_write": 300, "fresh_input": 45, "output": 812, "thinking": 96}
TASK = {
    "schema_version": 1, "id": "T-001", "type": "feature", "goal": "Add a health endpoint",
    "status": "QUEUED", "risk": ["validation"], "spec_refs": ["spec/api.md#health"], "depends_on": [],
    "criteria": [{"id": "C1", "text": "Given a running app When GET /health Then 200"}],
    "budget": {"iterations": 3, "tokens_m": 2}, "body": "Prose.", "x_custom": {"b": 1, "a": 2},
}
INVOCATION = {"backend": "agent-sdk", "model": "claude-sonnet", "session": "per-task",
              "system_prompt_ref": "prompts/coder@3", "allowed_tools": ["Read", "Edit"],
              "llm_base_url": "http://127.0.0.1:4000", "budget": {"usd": 2}}
REPORT = {"schema_version": 1, "task_id": "T-001", "status": "done", "summary_business": "Health endpoint added.",
          "files_changed": ["app/health.py"], "controls": {"tests": {"status": "pass", "log": "3 passed"}},
          "commits": ["abc123"], "iterations": 2, "usage": USAGE, "x_report_extra": True}

HELLO_MIN = {"schema_version": 1, "type": "hello", "protocol_version": 1, "project_id": "brave-falcon-1042",
             "runner_version": "0.1.0"}
ok_roundtrip("hello_minimal", "A minimal hello round-trips byte for byte", HELLO_MIN, HELLO_MIN)
HELLO_FULL = dict(HELLO_MIN, capabilities=["agent-sdk", "subprocess"], resume={"T-2": 7, "T-1": 3})
ok_roundtrip("hello_full", "hello with capabilities and resume; resume keeps its key order", HELLO_FULL, HELLO_FULL)
ok_roundtrip(
    "hello_key_order_normalised",
    "Declared keys are re-emitted in the fixed order whatever order they arrived in",
    None, HELLO_FULL,
    frame_text=enc({"resume": {"T-2": 7, "T-1": 3}, "runner_version": "0.1.0", "type": "hello",
                    "capabilities": ["agent-sdk", "subprocess"], "project_id": "brave-falcon-1042",
                    "protocol_version": 1, "schema_version": 1}))

ASSIGN = {"schema_version": 1, "type": "task.assign", "task_id": "T-001", "task": TASK, "role": "coder",
          "invocation": INVOCATION, "seq": 1, "attempt": 2}
ok_roundtrip("task_assign_full", "A full task.assign (TaskSpec with unknown fields, invocation) round-trips", ASSIGN, ASSIGN)
assign_no_id = {k: v for k, v in ASSIGN.items() if k != "task_id"}
ok_roundtrip("task_assign_task_id_from_task", "task.assign without task_id takes it from task.id and emits it",
             assign_no_id, ASSIGN)
assign_legacy = {k: v for k, v in ASSIGN.items() if k != "attempt"}
ok_roundtrip("task_assign_attempt_unset", "attempt absent means 0 (unset/legacy) and is emitted as 0",
             assign_legacy, dict(ASSIGN, attempt=0))

PROGRESS_STATE = {"schema_version": 1, "type": "task.progress", "task_id": "T-001", "seq": 4, "kind": "state",
                  "attempt": 2, "payload": {"state": "CODING", "detail": {"z": 1, "a": [1, 2]}}}
ok_roundtrip("task_progress_state", "A state progress frame round-trips; payload keeps its own key order",
             PROGRESS_STATE, PROGRESS_STATE)
PROGRESS_USAGE = {"schema_version": 1, "type": "task.progress", "task_id": "T-001", "seq": 5, "kind": "usage",
                  "attempt": 2, "payload": {"usage": USAGE, "model": "claude-sonnet"}}
ok_roundtrip("task_progress_usage", "A usage progress frame with a valid five-component split", PROGRESS_USAGE,
             PROGRESS_USAGE)
ok_roundtrip("task_progress_open_kind", "Progress kinds are open strings; only kind=usage constrains the payload",
             dict(PROGRESS_STATE, kind="x-vendor-telemetry", payload={"usage": "not a split"}),
             dict(PROGRESS_STATE, kind="x-vendor-telemetry", payload={"usage": "not a split"}))

# Plain progress frames (only the seven declared keys, no escapes in keys): the shape a
# decoder may take through a one-pass fast path; these pin that path's edge cases.
PLAIN_PAYLOAD = {"text": "line\nbreak \"quoted\" é 😀 a/b\t", "nested": [{"a": [[], {}, None, True, False]}, {"b": {}}],
                 "n": [0, -1, 1.5, 0.0025, 100000.0, -9223372036854775808, 18446744073709551615], "empty": {}}
PLAIN = dict(PROGRESS_STATE, kind="x-log", payload=PLAIN_PAYLOAD)
ok_roundtrip("task_progress_plain_payload_shapes",
             "A plain progress frame whose payload has escapes, non-ASCII text, nested arrays and objects and numbers of every form; whitespace between tokens",
             PLAIN, PLAIN, frame_text=(
                 ' { "schema_version" : 1 , "type" : "task.progress" , "task_id" : "T-001" , "seq" : 4 , "kind" : "x-log" , "attempt" : 2 ,\n'
                 '"payload" : { "text" : "line\\nbreak \\"quoted\\" \\u00e9 \\ud83d\\ude00 a\\/b\\t" , "nested" : [ { "a" : [ [ ] , { } , null , true , false ] } , { "b" : { } } ] ,\r\n'
                 '"n" : [ 0 , -1 , 1.5 , 2.5E-3 , 1e5 , -9223372036854775808 , 18446744073709551615 ] , "empty" : { } } }\t'))
usage_reordered = dict(PROGRESS_USAGE, payload={"turn": 3, "usage": dict(reversed(list(USAGE.items())))})
ok_roundtrip("task_progress_usage_any_order",
             "A usage split's components and the payload's keys may come in any order; both keep it",
             {"payload": usage_reordered["payload"], **{k: v for k, v in usage_reordered.items() if k != "payload"}},
             usage_reordered)
err("duplicate_key_in_payload_array", "A key repeated in an object inside an array inside the payload is rejected",
    '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","payload":{"x":[1,{"a":1,"b":2,"a":1}]}}',
    "duplicate_key")
err("not_json_lone_surrogate", "A lone surrogate escape in a payload string is not JSON",
    '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","payload":{"s":"\\ud800"}}',
    "not_json")
err("usage_repeated_component", "A usage component given twice is rejected as a duplicate key",
    '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"usage","payload":{"usage":{"cache_read":1,"cache_write":0,"fresh_input":0,"output":0,"thinking":0,"cache_read":1}}}',
    "duplicate_key")

REPORT_MSG = {"schema_version": 1, "type": "task.report", "task_id": "T-001", "report": REPORT, "seq": 9, "attempt": 2}
ok_roundtrip("task_report_full", "A full task.report round-trips; the report keeps unknown fields", REPORT_MSG, REPORT_MSG)
ok_roundtrip("task_report_task_id_from_report", "task.report without task_id takes it from report.task_id",
             {k: v for k, v in REPORT_MSG.items() if k != "task_id"}, REPORT_MSG)
ok_roundtrip("task_report_open_status", "Report statuses are open strings",
             dict(REPORT_MSG, report=dict(REPORT, status="escalated")), dict(REPORT_MSG, report=dict(REPORT, status="escalated")))

CANCEL = {"schema_version": 1, "type": "task.cancel", "task_id": "T-001", "reason": "operator", "seq": 2}
ok_roundtrip("task_cancel", "task.cancel round-trips", CANCEL, CANCEL)
PING = {"schema_version": 1, "type": "ping", "nonce": "n-1", "sent_at": "2026-11-30T09:00:00Z"}
ok_roundtrip("ping_string_nonce", "ping with a string nonce and a textual sent_at", PING, PING)
PING_INT = {"schema_version": 1, "type": "ping", "nonce": 42, "sent_at": 1764493200.25}
ok_roundtrip("ping_integer_nonce", "ping with an integer nonce and a numeric sent_at", PING_INT, PING_INT)
PING_MIN = {"schema_version": 1, "type": "ping"}
ok_roundtrip("ping_minimal", "ping without nonce or sent_at", PING_MIN, PING_MIN)
PONG = {"schema_version": 1, "type": "pong", "nonce": 42}
ok_roundtrip("pong_nonce", "pong echoing an integer nonce", PONG, PONG)
ok_roundtrip("pong_minimal", "pong without nonce", {"type": "pong", "schema_version": 1}, {"schema_version": 1, "type": "pong"})

# Unknown fields
ok_roundtrip(
    "unknown_fields_hello", "Unknown top-level fields are kept in arrival order and emitted after the declared ones (null kept)",
    None, dict(HELLO_MIN, x_b=1, z={"k": [1, 2]}, a=None),
    frame_text='{"x_b":1,"schema_version":1,"type":"hello","z":{"k":[1,2]},"protocol_version":1,'
               '"project_id":"brave-falcon-1042","a":null,"runner_version":"0.1.0"}')
ok_roundtrip("unknown_fields_progress", "Unknown fields on task.progress survive a round trip",
             dict(PROGRESS_STATE, trace_id="tr-9", hop=3), dict(PROGRESS_STATE, trace_id="tr-9", hop=3))
ok_roundtrip("unknown_fields_ping", "An extra field on ping (e.g. an acknowledgement) is preserved by a seed-only peer",
             dict(PING_MIN, ack={"T-1": {"0": 5}}), dict(PING_MIN, ack={"T-1": {"0": 5}}))
ok_roundtrip("unknown_fields_cancel", "Unknown fields on task.cancel survive a round trip",
             dict(CANCEL, requested_by="ops"), dict(CANCEL, requested_by="ops"))

# Encoding rules
encode_case("encode_omits_empty_optionals", "Optional capabilities [] and resume {} are omitted",
            dict(HELLO_MIN, capabilities=[], resume={}), HELLO_MIN)
encode_case("encode_omits_null_nonce", "An optional nonce of null is omitted",
            {"type": "ping", "nonce": None, "sent_at": None}, PING_MIN)
encode_case("encode_required_empty_kept", "Required fields are emitted even when empty: invocation {}, role \"\"; attempt 0 kept",
            {"type": "task.assign", "task": {"id": "T-9"}, "invocation": {}, "role": ""},
            {"schema_version": 1, "type": "task.assign", "task_id": "T-9", "task": {"id": "T-9"}, "role": "",
             "invocation": {}, "seq": 0, "attempt": 0})
encode_case("encode_payload_always", "task.progress always emits payload, even {}",
            {"type": "task.progress", "task_id": "T-1", "kind": "state"},
            {"schema_version": 1, "type": "task.progress", "task_id": "T-1", "seq": 0, "kind": "state", "attempt": 0,
             "payload": {}})
encode_case("encode_falsy_kept", "0, \"\" and false are kept",
            {"type": "task.cancel", "task_id": "T-1", "reason": "", "seq": 0, "flag": False},
            {"schema_version": 1, "type": "task.cancel", "task_id": "T-1", "reason": "", "seq": 0, "flag": False})
encode_case("encode_utf8_not_escaped", "Non-ASCII is emitted as UTF-8; quote, backslash and control characters are escaped",
            {"type": "hello", "project_id": "Zürich-☃-😀", "runner_version": "a\"b\\c\nd\u0001"},
            {"schema_version": 1, "type": "hello", "protocol_version": 1, "project_id": "Zürich-☃-😀",
             "runner_version": "a\"b\\c\nd\u0001"})
encode_case("encode_defaults_minimal_hello", "A hello built from only its type gets schema_version 1 and protocol_version 1",
            {"type": "hello"},
            {"schema_version": 1, "type": "hello", "protocol_version": 1, "project_id": "", "runner_version": ""})

# Tolerant decoding
write("wire", "tolerant_defaults", "Without validation missing fields take their defaults", [{
    "input": {"decode": '{"type":"task.progress","task_id":"T-1"}', "validate": False},
    "expect": {"encoded": enc({"schema_version": 1, "type": "task.progress", "task_id": "T-1", "seq": 0, "kind": "",
                               "attempt": 0, "payload": {}})}}])
write("wire", "tolerant_schema_version_kept", "Without validation a foreign schema_version is kept and re-emitted; with validation it is a const violation", [
    {"input": {"decode": '{"schema_version":2,"type":"pong"}', "validate": False},
     "expect": {"encoded": '{"schema_version":2,"type":"pong"}'}},
    {"input": {"decode": '{"schema_version":2,"type":"pong"}', "validate": True},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "schema_version", "rule": "const"}]}}}])
write("wire", "tolerant_null_is_absent", "Without validation null counts as absent; with validation it is a type violation", [
    {"input": {"decode": '{"schema_version":1,"type":"task.cancel","task_id":"T-1","reason":null,"seq":3}', "validate": False},
     "expect": {"encoded": enc(dict(CANCEL, task_id="T-1", reason="", seq=3))}},
    {"input": {"decode": '{"schema_version":1,"type":"task.cancel","task_id":"T-1","reason":null,"seq":3}', "validate": True},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "reason", "rule": "type"}]}}}])
err("tolerant_type_error", "A declared field of the wrong JSON type is an error even without validation",
    '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":"1","kind":"state","payload":{}}',
    "schema_violation", [("seq", "type")], validate=False)
err("tolerant_negative_attempt", "A negative attempt cannot be represented and is an error even without validation",
    '{"schema_version":1,"type":"task.report","task_id":"T-1","report":{},"seq":1,"attempt":-1}',
    "schema_violation", [("attempt", "minimum")], validate=False)
ok_roundtrip("whitespace_around_frame", "Whitespace around the JSON object is allowed", None, PING_MIN,
             frame_text=' \t{"schema_version":1,"type":"ping"}\r\n')

# Parse-level errors
err("not_json_truncated", "A truncated frame is not JSON", '{"schema_version":1,"type":"ping"', "not_json")
err("not_json_trailing", "Trailing data after the object is not JSON", '{"schema_version":1,"type":"ping"} x', "not_json")
err("not_json_invalid_utf8", "Bytes that are not UTF-8 are not JSON", None, "not_json",
    hex_input="7b2274797065223a2270" + "ff" + "6e67227d")
err("not_json_empty", "An empty frame is not JSON", "", "not_json")
err("not_json_deep_nesting", "Nesting deeper than the decoder reads (127 levels, json::MAX_DEPTH) is rejected, not a stack overflow",
    '{"schema_version":1,"type":"ping","x":' + "[" * 200 + "]" * 200 + "}", "not_json")
err("not_object_array", "A JSON array is not a frame", "[1,2]", "not_object")
err("not_object_string", "A JSON string is not a frame", '"hello"', "not_object")
err("unknown_type_name", "An unknown type is rejected with unknown_type", '{"schema_version":1,"type":"task.explode"}', "unknown_type")
err("unknown_type_missing", "A frame without type is rejected with unknown_type", '{"schema_version":1}', "unknown_type")
err("unknown_type_not_string", "A non-string type is rejected with unknown_type", '{"schema_version":1,"type":7}', "unknown_type")
err("unknown_type_tolerant", "unknown_type applies without validation too", '{"type":"Hello"}', "unknown_type", validate=False)
err("duplicate_key_top", "A repeated top-level key is rejected", '{"schema_version":1,"type":"ping","nonce":1,"nonce":2}',
    "duplicate_key", validate=False)
err("duplicate_key_nested", "A repeated key inside payload is rejected",
    '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","payload":{"a":1,"a":1}}',
    "duplicate_key", validate=False)
err("duplicate_key_type", "A repeated type key is rejected before dispatch", '{"type":"ping","type":"pong"}', "duplicate_key")

# Validation rules
err("hello_required", "hello requires protocol_version, project_id and runner_version; all are reported",
    '{"schema_version":1,"type":"hello"}', "schema_violation",
    [("project_id", "required"), ("protocol_version", "required"), ("runner_version", "required")])
err("hello_constraints", "project_id must be non-empty and protocol_version at least 1",
    '{"schema_version":1,"type":"hello","protocol_version":0,"project_id":"","runner_version":""}', "schema_violation",
    [("project_id", "min_length"), ("protocol_version", "minimum")])
err("hello_list_and_resume_types", "capabilities items must be strings; resume values non-negative integers; keys are escaped as in JSON Pointer",
    '{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"v",'
    '"capabilities":["a",1],"resume":{"T-1":-1,"a/b":"x"}}', "schema_violation",
    [("capabilities/1", "type"), ("resume/T-1", "minimum"), ("resume/a~1b", "type")])
err("schema_version_required", "With validation schema_version is required", '{"type":"ping"}', "schema_violation",
    [("schema_version", "required")])
err("schema_version_string", "schema_version must be an integer", '{"schema_version":"1","type":"ping"}', "schema_violation",
    [("schema_version", "type")], validate=False)
err("task_assign_required", "task.assign requires task, role, invocation, seq (task_id is derived from task.id when absent)",
    '{"schema_version":1,"type":"task.assign"}', "schema_violation",
    [("invocation", "required"), ("role", "required"), ("seq", "required"), ("task", "required"), ("task_id", "required")])
err("task_spec_required", "The embedded TaskSpec's required fields are checked under task/",
    enc({"schema_version": 1, "type": "task.assign", "task_id": "T-1", "task": {"id": "T-1"}, "role": "coder",
         "invocation": {}, "seq": 1}), "schema_violation",
    [("task/budget", "required"), ("task/criteria", "required"), ("task/goal", "required"),
     ("task/schema_version", "required"), ("task/type", "required")])
err("task_spec_constraints", "TaskSpec minLength and minimum rules: criterion ids, risk items, budget.iterations",
    enc({"schema_version": 1, "type": "task.assign", "task_id": "T-001",
         "task": dict(TASK, risk=["ok", ""], criteria=[{"id": "", "text": "t"}, {"id": "C2"}],
                      budget={"iterations": -1}, schema_version=2),
         "role": "coder", "invocation": {}, "seq": 1}), "schema_violation",
    [("task/budget/iterations", "minimum"), ("task/criteria/0/id", "min_length"), ("task/criteria/1/text", "required"),
     ("task/risk/1", "min_length"), ("task/schema_version", "const")])
err("task_assign_task_id_mismatch", "task_id must mirror task.id",
    enc(dict(ASSIGN, task_id="T-999")), "schema_violation", [("task_id", "mismatch")])
err("task_assign_invocation_types", "Declared invocation fields are type-checked; unknown ones are open",
    enc(dict(ASSIGN, invocation={"backend": 1, "allowed_tools": "Read", "budget": [], "x_route": {"a": 1}})),
    "schema_violation", [("invocation/allowed_tools", "type"), ("invocation/backend", "type"), ("invocation/budget", "type")])
err("usage_missing_component", "A usage split missing thinking is rejected (closed five-component split)",
    enc(dict(PROGRESS_USAGE, payload={"usage": {k: v for k, v in USAGE.items() if k != "thinking"}})),
    "schema_violation", [("payload/usage/thinking", "required")])
err("usage_additional_component", "A usage split with a sixth key is rejected",
    enc(dict(PROGRESS_USAGE, payload={"usage": dict(USAGE, total=2453)})),
    "schema_violation", [("payload/usage/total", "additional_property")])
err("usage_bad_values", "Usage components must be non-negative integers",
    enc(dict(PROGRESS_USAGE, payload={"usage": dict(USAGE, cache_read=-1, output="812", thinking=1.5)})),
    "schema_violation", [("payload/usage/cache_read", "minimum"), ("payload/usage/output", "type"),
                         ("payload/usage/thinking", "type")])
err("usage_absent", "kind=usage requires payload.usage", enc(dict(PROGRESS_USAGE, payload={})), "schema_violation",
    [("payload/usage", "required")])
err("usage_not_object", "payload.usage must be an object", enc(dict(PROGRESS_USAGE, payload={"usage": [1, 2]})),
    "schema_violation", [("payload/usage", "type")])
err("task_progress_required", "task.progress requires task_id, seq, kind and payload",
    '{"schema_version":1,"type":"task.progress"}', "schema_violation",
    [("kind", "required"), ("payload", "required"), ("seq", "required"), ("task_id", "required")])
err("task_report_artifact", "The embedded TaskReport is checked: schema_version const, status and usage required",
    enc({"schema_version": 1, "type": "task.report", "task_id": "T-1",
         "report": {"schema_version": 2, "task_id": "T-1"}, "seq": 1}), "schema_violation",
    [("report/schema_version", "const"), ("report/status", "required"), ("report/usage", "required")])
err("task_report_controls", "Each control outcome needs a string status; log must be a string",
    enc(dict(REPORT_MSG, report=dict(REPORT, controls={"lint": {"log": 5}, "tests": {"status": "pass"}}))),
    "schema_violation", [("report/controls/lint/log", "type"), ("report/controls/lint/status", "required")])
err("task_report_usage_closed", "The report's usage split is closed too",
    enc(dict(REPORT_MSG, report=dict(REPORT, usage=dict(USAGE, reasoning=1)))), "schema_violation",
    [("report/usage/reasoning", "additional_property")])
err("task_report_task_id_mismatch", "task_id must agree with report.task_id",
    enc(dict(REPORT_MSG, task_id="T-2")), "schema_violation", [("task_id", "mismatch")])
err("task_cancel_required", "task.cancel requires task_id, reason and seq",
    '{"schema_version":1,"type":"task.cancel"}', "schema_violation",
    [("reason", "required"), ("seq", "required"), ("task_id", "required")])
err("ping_types", "ping nonce must be string or integer, sent_at string or number",
    '{"schema_version":1,"type":"ping","nonce":true,"sent_at":{}}', "schema_violation",
    [("nonce", "type"), ("sent_at", "type")])
err("pong_float_nonce", "An integer nonce must be an integer literal", '{"schema_version":1,"type":"pong","nonce":1.5}',
    "schema_violation", [("nonce", "type")])
err("integer_above_safe_range", "seq above 2^53-1 is a range violation (every binding must represent it exactly)",
    enc(dict(CANCEL, seq=9007199254740992)), "schema_violation", [("seq", "range")], validate=False)
ok_roundtrip("integer_at_safe_limit", "seq of exactly 2^53-1 is accepted", dict(CANCEL, seq=9007199254740991),
             dict(CANCEL, seq=9007199254740991))
err("integer_beyond_u64", "An integer literal beyond 64 bits parses as a double and is not an integer",
    '{"schema_version":1,"type":"task.cancel","task_id":"T-1","reason":"r","seq":18446744073709551616}',
    "schema_violation", [("seq", "type")], validate=False)
err("integer_float_literal", "1.0 is not an integer literal", enc(CANCEL).replace('"seq":2', '"seq":2.0'),
    "schema_violation", [("seq", "type")], validate=False)
write("wire", "open_object_big_number", "A number beyond 64 bits inside an open object is carried as a double (shortest round-trip form, as Python's json writes it)", [{
    "input": {"decode": '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","attempt":0,"payload":{"n":18446744073709551616}}',
              "validate": True},
    "expect": {"encoded": '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","attempt":0,"payload":{"n":1.8446744073709552e+19}}'}}])
err("all_violations_collected", "Every violation of a frame is reported, sorted by location",
    '{"schema_version":3,"type":"task.progress","task_id":"","seq":-4,"kind":"usage","payload":{"usage":{"cache_read":1}}}',
    "schema_violation",
    [("payload/usage/cache_write", "required"), ("payload/usage/fresh_input", "required"), ("payload/usage/output", "required"),
     ("payload/usage/thinking", "required"), ("schema_version", "const"), ("seq", "minimum"), ("task_id", "min_length")])

# A message built from declared fields plus `extra`: extra keys never override declared
# ones (they are skipped, on encode and in the JSON object); the other extra keys follow
# the declared ones in their order.
cancel = {"schema_version": 1, "type": "task.cancel", "task_id": "T-1", "reason": "stop", "seq": 3}
write("wire", "extra_never_overrides_declared", "Unknown fields set through extra never override declared fields: colliding keys are skipped, the others follow in order", [{
    "input": {"build": {"fields": cancel, "extra": {"seq": 99, "note": "kept", "task_id": "X", "type": "ping", "z": [1]}}, "validate": True},
    "expect": {"type": "task.cancel", "message": {**cancel, "note": "kept", "z": [1]},
               "encoded": enc({**cancel, "note": "kept", "z": [1]})},
}])

# The human-readable text of schema violations, one line per violation in location
# order: "location: message (rule)", "<root>" for the frame itself. Pinned so that every
# binding shows the core's text.
write("wire", "error_lines_text", "The text of schema violations is the core's: one line 'location: message (rule)' per violation, in location order", [
    {"input": {"decode": '{"schema_version":2,"type":"task.cancel","task_id":"","seq":-1}', "validate": True},
     "expect": {"error": {"code": "schema_violation",
                          "violations": [{"location": "reason", "rule": "required"}, {"location": "schema_version", "rule": "const"}, {"location": "seq", "rule": "minimum"}, {"location": "task_id", "rule": "min_length"}],
                          "lines": ["reason: required field is missing (required)", "schema_version: must be 1, found 2 (const)", "seq: -1 is below the minimum 0 (minimum)", "task_id: must have at least 1 character(s) (min_length)"]}}},
    {"input": {"decode": '{"schema_version":1,"type":"task.progress","task_id":"T","seq":1,"kind":"usage","payload":{"usage":{"output":1.5}}}', "validate": True},
     "expect": {"error": {"code": "schema_violation",
                          "lines": ["payload/usage/cache_read: required field is missing (required)",
                                    "payload/usage/cache_write: required field is missing (required)",
                                    "payload/usage/fresh_input: required field is missing (required)",
                                    "payload/usage/output: expected integer, found 1.5 (type)",
                                    "payload/usage/thinking: required field is missing (required)"]}}},
])

# ------------------------------------------------------------------------------- framing

def frame_case(name, description, steps, config=None):
    write("framing", name, description, steps, config)


def lines(*ls):
    return [{"line": l} for l in ls]


frame_case("crlf_and_eof", "CRLF line endings are accepted and an unterminated final line is returned at EOF", [
    {"input": {"push": '{"a":1}\r\n{"b":2}'}, "expect": {"output": lines('{"a":1}'), "buffered_bytes": 7}},
    {"input": {"finish": True}, "expect": {"output": lines('{"b":2}')}}], {"max_line_bytes": 64})
text = '{"type":"ping"}\n{"type":"pong","nonce":"ü"}\n{"x":1}\n'
for size in (1, 2, 3, 5, 64):
    frame_case(f"chunking_{size}", f"The same lines come out when the input is pushed in {size}-byte chunks (multi-byte UTF-8 split across chunks)", [
        {"input": {"push": text, "chunk_size": size}, "expect": {"output": lines('{"type":"ping"}', '{"type":"pong","nonce":"ü"}', '{"x":1}')}},
        {"input": {"finish": True}, "expect": {"output": []}}])
frame_case("oversize_recovers", "An oversized line yields exactly one error and the framer resynchronises at the next newline", [
    {"input": {"push": "x" * 100 + "\nnext\n"}, "expect": {"output": [{"error": "line_too_long", "line_number": 1}] + lines("next")}}],
    {"max_line_bytes": 16})
frame_case("oversize_byte_at_a_time", "Pushed a byte at a time, an oversized line still yields one error and nothing is buffered while discarding", [
    {"input": {"push": "ok\n" + "y" * 40, "chunk_size": 1},
     "expect": {"output": lines("ok") + [{"error": "line_too_long", "line_number": 2}], "buffered_bytes": 0}},
    {"input": {"push": "y" * 40 + "\nafter\n", "chunk_size": 1}, "expect": {"output": lines("after")}}],
    {"max_line_bytes": 16})
frame_case("bound_is_inclusive", "A line of exactly max_line_bytes is accepted; one byte more is not", [
    {"input": {"push": "abcd\nabcde\nz\n"}, "expect": {"output": lines("abcd") + [{"error": "line_too_long", "line_number": 2}] + lines("z")}}],
    {"max_line_bytes": 4})
frame_case("cr_counts_toward_bound", "The \\r of a CRLF counts toward the bound", [
    {"input": {"push": "abcd\r\nabc\r\n"}, "expect": {"output": [{"error": "line_too_long", "line_number": 1}] + lines("abc")}}],
    {"max_line_bytes": 4})
frame_case("invalid_utf8_line", "A line that is not UTF-8 yields invalid_utf8 and the next line is read normally", [
    {"input": {"push_hex": "6f6b0a" + "61ff62" + "0a" + "6e6578740a"},
     "expect": {"output": lines("ok") + [{"error": "invalid_utf8", "line_number": 2}] + lines("next")}}])
frame_case("empty_lines_skipped", "Empty lines (also \\r\\n alone) are skipped by default but still counted in line numbers", [
    {"input": {"push": "\n\r\n" + "z" * 10 + "\nA\n"}, "expect": {"output": [{"error": "line_too_long", "line_number": 3}] + lines("A")}}],
    {"max_line_bytes": 4})
frame_case("empty_lines_kept", "With skip_empty_lines false, empty lines are returned", [
    {"input": {"push": "a\n\nb\r\n\r\n"}, "expect": {"output": lines("a", "", "b", "")}}], {"skip_empty_lines": False})
frame_case("eof_while_discarding", "At EOF an unterminated oversized line produces nothing beyond its one error", [
    {"input": {"push": "w" * 30}, "expect": {"output": [{"error": "line_too_long", "line_number": 1}], "buffered_bytes": 0}},
    {"input": {"finish": True}, "expect": {"output": []}}], {"max_line_bytes": 8})
frame_case("push_after_finish", "Pushing after finish is a local error and nothing is framed", [
    {"input": {"push": "a"}, "expect": {"output": [], "buffered_bytes": 1}},
    {"input": {"finish": True}, "expect": {"output": lines("a")}},
    {"input": {"push": "b\n"}, "expect": {"output": [], "error": "push_after_finish"}}])
frame_case("lone_cr_kept", "A \\r not followed by \\n is part of the line", [
    {"input": {"push": "a\rb\n"}, "expect": {"output": lines("a\rb")}}])
frame_case("finish_empty", "finish on empty input produces nothing; finish twice is harmless", [
    {"input": {"finish": True}, "expect": {"output": []}},
    {"input": {"finish": True}, "expect": {"output": []}}])
frame_case("crlf_split_across_chunks", "A CRLF split across two pushes is still one terminator", [
    {"input": {"push": "abc\r"}, "expect": {"output": [], "buffered_bytes": 4}},
    {"input": {"push": "\ndef\n"}, "expect": {"output": lines("abc", "def")}}])
frame_case("partial_then_oversize", "A partial line that grows past the bound over several pushes yields one error", [
    {"input": {"push": "12345"}, "expect": {"output": [], "buffered_bytes": 5}},
    {"input": {"push": "6789"}, "expect": {"output": [{"error": "line_too_long", "line_number": 1}], "buffered_bytes": 0}},
    {"input": {"push": "0000\nok\n"}, "expect": {"output": lines("ok")}}], {"max_line_bytes": 8})
frame_case("default_bound_64k", "The default bound is 65536 bytes", [
    {"input": {"push": "a" * 65536 + "\n" + "b" * 65537 + "\n"},
     "expect": {"output": lines("a" * 65536) + [{"error": "line_too_long", "line_number": 2}]}}])

# Backpressure: the queue of lines waiting to be pulled is bounded (max_ready_lines,
# max_ready_bytes); push takes whole steps (everything up to and including a "\n", or the
# rest of the input) while the queue is not full and reports how many bytes it took.
frame_case("ready_lines_bound", "With max_ready_lines 2, a push stops before the third line and reports the bytes it took; the rest goes in after a pull", [
    {"input": {"push": "a\nb\nc\nd\ne", "drain": False}, "expect": {"output": [], "accepted": 4, "ready": 2}},
    {"input": {"push": "c\nd\ne", "drain": False}, "expect": {"output": [], "accepted": 0, "ready": 2}},
    {"input": {"pull": True}, "expect": {"output": lines("a", "b"), "ready": 0}},
    {"input": {"push": "c\nd\ne", "drain": False}, "expect": {"output": [], "accepted": 4, "ready": 2, "buffered_bytes": 0}},
    {"input": {"pull": True}, "expect": {"output": lines("c", "d")}},
    {"input": {"push": "e", "drain": False}, "expect": {"output": [], "accepted": 1, "ready": 0, "buffered_bytes": 1}},
    {"input": {"finish": True}, "expect": {"output": lines("e")}}],
    {"max_ready_lines": 2})
frame_case("ready_bytes_bound", "With max_ready_bytes 5, no new line starts once the waiting lines hold 5 bytes or more (the line that crosses the bound is still taken)", [
    {"input": {"push": "abc\ndef\ngh\n", "drain": False}, "expect": {"output": [], "accepted": 8, "ready": 2}},
    {"input": {"pull": True}, "expect": {"output": lines("abc", "def")}},
    {"input": {"push": "gh\n", "drain": False}, "expect": {"output": [], "accepted": 3, "ready": 1}},
    {"input": {"pull": True}, "expect": {"output": lines("gh")}}],
    {"max_ready_bytes": 5})
frame_case("empty_queue_takes_a_line", "An empty queue always takes one line, however small max_ready_bytes is, so a push after a pull always makes progress", [
    {"input": {"push": "0123456789\nx\n", "drain": False}, "expect": {"output": [], "accepted": 11, "ready": 1}},
    {"input": {"pull": True}, "expect": {"output": lines("0123456789")}},
    {"input": {"push": "x\n", "drain": False}, "expect": {"output": [], "accepted": 2, "ready": 1}},
    {"input": {"pull": True}, "expect": {"output": lines("x")}}],
    {"max_ready_bytes": 0})
frame_case("line_errors_count_as_ready", "Line errors take a place in the queue like lines; skipped empty lines take none", [
    {"input": {"push": "\n\n" + "y" * 10 + "\nok\n", "drain": False}, "expect": {"output": [], "accepted": 13, "ready": 1}},
    {"input": {"pull": True}, "expect": {"output": [{"error": "line_too_long", "line_number": 3}]}},
    {"input": {"push": "ok\n", "drain": False}, "expect": {"output": [], "accepted": 3, "ready": 1}},
    {"input": {"pull": True}, "expect": {"output": lines("ok")}}],
    {"max_line_bytes": 4, "max_ready_lines": 1})
frame_case("full_queue_blocks_partial_line", "A full queue takes no bytes at all, not even the start of the next line", [
    {"input": {"push": "a\n", "drain": False}, "expect": {"output": [], "accepted": 2, "ready": 1}},
    {"input": {"push": "bc", "drain": False}, "expect": {"output": [], "accepted": 0, "ready": 1, "buffered_bytes": 0}},
    {"input": {"pull": True}, "expect": {"output": lines("a")}},
    {"input": {"push": "bc", "drain": False}, "expect": {"output": [], "accepted": 2, "ready": 0, "buffered_bytes": 2}}],
    {"max_ready_lines": 1})
frame_case("push_all_drains_through_the_bound", "push_all hands over every line of an input larger than the queue, in order", [
    {"input": {"push_all": "a\nb\nc\n" + "z" * 9 + "\nd"}, "expect": {"output": lines("a", "b", "c") + [{"error": "line_too_long", "line_number": 4}], "ready": 0, "buffered_bytes": 1}},
    {"input": {"finish": True}, "expect": {"output": lines("d")}},
    {"input": {"push_all": "e\n"}, "expect": {"output": [], "error": "push_after_finish"}}],
    {"max_line_bytes": 8, "max_ready_lines": 1})
frame_case("bounded_queue_chunking_independent", "With a one-line queue and 20-byte chunks (the rest of each chunk pushed again after a pull until taken) the lines are those of an unbounded framer", [
    {"input": {"push": text, "chunk_size": 20}, "expect": {"output": lines('{"type":"ping"}', '{"type":"pong","nonce":"ü"}', '{"x":1}')}}],
    {"max_ready_lines": 1, "max_ready_bytes": 1})
frame_case("default_ready_lines_1024", "The default queue bound is 1024 lines", [
    {"input": {"push": "x\n" * 1030, "drain": False}, "expect": {"output": [], "accepted": 2048, "ready": 1024}},
    {"input": {"pull": True}, "expect": {"output": lines(*["x"] * 1024), "ready": 0}}])


# ------------------------------------------------------- wire: rules the core owns (issue 12)

PROGRESS = {"schema_version": 1, "type": "task.progress", "task_id": "T-1", "seq": 1, "kind": "state",
            "attempt": 0, "payload": {"state": "running"}}
TYPE_CONST = 'type: must be "task.progress" to be checked as that type (const)'
write("wire", "check_as_other_type", "Checking an object whose own type is another message's as task.progress is a const violation at type, even when every other field fits task.progress; the rest of the object is still checked as task.progress", [
    {"input": {"check": dict(PROGRESS, type="task.assign"), "as": "task.progress"},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "type", "rule": "const"}], "lines": [TYPE_CONST]}}},
    {"input": {"check": dict(PROGRESS, type=7, seq=-1), "as": "task.progress"},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "seq", "rule": "minimum"}, {"location": "type", "rule": "const"}]}}},
    {"input": {"check": {"schema_version": 1, "type": "task.cancel", "task_id": "T-1", "reason": "r", "seq": 1}, "as": "task.progress"},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "kind", "rule": "required"}, {"location": "payload", "rule": "required"}, {"location": "type", "rule": "const"}]}}}])
write("wire", "check_as_non_object", "Checking a value that is not a JSON object as a message type is not_object", [
    {"input": {"check": [PROGRESS], "as": "task.progress"}, "expect": {"error": {"code": "not_object"}}},
    {"input": {"check": "task.progress", "as": "task.progress"}, "expect": {"error": {"code": "not_object"}}},
    {"input": {"check": None, "as": "ping"}, "expect": {"error": {"code": "not_object"}}}])
write("wire", "check_as_valid", "A valid object checked as its own type passes; an absent type is taken to be the type checked; schema_version must still be present and 1", [
    {"input": {"check": PROGRESS, "as": "task.progress"}, "expect": {"type": "task.progress"}},
    {"input": {"check": {k: v for k, v in PROGRESS.items() if k != "type"}, "as": "task.progress"}, "expect": {"type": "task.progress"}},
    {"input": {"check": {"schema_version": 1}, "as": "ping"}, "expect": {"type": "ping"}},
    {"input": {"check": {"type": "ping"}, "as": "ping"},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "schema_version", "rule": "required"}]}}},
    {"input": {"check": {"schema_version": 2, "type": "ping"}, "as": "ping"},
     "expect": {"error": {"code": "schema_violation", "violations": [{"location": "schema_version", "rule": "const"}]}}}])

DEEPEST = '{"schema_version":1,"type":"ping","x":' + "[" * 126 + "]" * 126 + "}"
TOO_DEEP = "frame is not JSON: nested deeper than 127 levels"
write("wire", "encode_depth_limit", "A frame nests at most 127 levels of arrays and objects, its own object the first (json::MAX_DEPTH, the decoder's limit). The deepest encodable message round-trips; one level deeper is refused when built from an object and when encoded, with the decoder's error, so no binding sends a frame the decoder refuses. `nest` generates the deep value (a vector file cannot nest that deep itself)", [
    {"input": {"build": {"fields": {"type": "ping"}, "extra": {}}, "nest": {"key": "x", "depth": 126}}, "expect": {"type": "ping", "encoded": DEEPEST}},
    {"input": {"decode": DEEPEST, "validate": True}, "expect": {"type": "ping", "encoded": DEEPEST}},
    {"input": {"build": {"fields": {"type": "ping"}, "extra": {}}, "nest": {"key": "x", "depth": 127}}, "expect": {"error": {"code": "not_json", "text": TOO_DEEP}}},
    {"input": {"encode": {"schema_version": 1, "type": "ping"}, "nest": {"key": "x", "depth": 127}}, "expect": {"error": {"code": "not_json", "text": TOO_DEEP}}},
    {"input": {"decode": '{"schema_version":1,"type":"ping","x":' + "[" * 127 + "]" * 127 + "}"}, "expect": {"error": {"code": "not_json"}}}])


def utf16_hex(text, lone=None):
    units = [ord(c) for c in text]
    if lone is not None:
        units.insert(len(text) - 2, lone)
    return "".join("%04x" % u for u in units)


PING_NONCE = '{"schema_version":1,"type":"ping","nonce":"é"}'
write("wire", "not_json_lone_surrogate_text", "A text frame holding a lone surrogate (a code unit no UTF-8 text can hold; possible in UTF-16 and Python strings) is not_json, with the core's message", [
    {"input": {"decode_utf16_hex": utf16_hex('{"schema_version":1,"type":"ping","nonce":""}', 0xD800)},
     "expect": {"error": {"code": "not_json", "text": "frame is not JSON: the text is not valid Unicode (it has no UTF-8 form)"}}},
    {"input": {"decode_utf16_hex": utf16_hex(PING_NONCE)}, "expect": {"type": "ping", "encoded": PING_NONCE}}])
