"""Unit tests of the message classes and the wire functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

import stapel_runner_protocol as srp
from conftest import conformance_dir
from stapel_runner_protocol import (
    MESSAGES,
    PROTOCOL_VERSION,
    SCHEMA_FILES,
    SCHEMA_VERSION,
    Hello,
    Ping,
    Pong,
    RunnerProtocolError,
    SchemaValidationError,
    TaskAssign,
    TaskCancel,
    TaskProgress,
    TaskReportMessage,
    UnknownMessageError,
    decode,
    encode,
    is_valid,
    iter_errors,
    load_schema,
    message_types,
    to_frame,
    validate,
)
from stapel_runner_protocol.errors import Violation

USAGE = {"cache_read": 1, "cache_write": 2, "fresh_input": 3, "output": 4, "thinking": 5}
TASK: Dict[str, Any] = {
    "schema_version": 1,
    "id": "T-1",
    "type": "feature",
    "goal": "Do the thing",
    "criteria": [{"id": "c1", "text": "Given x when y then z"}],
    "budget": {"iterations": 3},
}
REPORT: Dict[str, Any] = {
    "schema_version": 1,
    "task_id": "T-1",
    "status": "done",
    "usage": USAGE,
}


def test_constants_and_registry() -> None:
    assert SCHEMA_VERSION == 1 and PROTOCOL_VERSION == 1
    assert message_types() == [
        "hello", "task.assign", "task.progress", "task.report", "task.cancel", "ping", "pong",
    ]
    assert list(MESSAGES) == message_types()
    assert all(cls.ARTIFACT == name for name, cls in MESSAGES.items())
    assert MESSAGES["task.report"] is TaskReportMessage
    assert set(SCHEMA_FILES) == set(message_types())


def test_hello_defaults_and_keywords() -> None:
    h = Hello()
    assert (h.project_id, h.runner_version, h.protocol_version) == ("", "", 1)
    assert (h.capabilities, h.resume, h.schema_version, h.extra) == ([], {}, 1, {})
    h = Hello("p", "v", 2, ["x"], {"T": 3}, 1, {"z": 1})
    assert (h.project_id, h.protocol_version, h.capabilities, h.resume, h.extra) == (
        "p", 2, ["x"], {"T": 3}, {"z": 1},
    )


def test_fields_are_mutable_and_containers_are_live() -> None:
    h = Hello(project_id="p", runner_version="1")
    h.capabilities.append("subprocess")
    h.resume["T-1"] = 4
    h.extra["zz"] = [1, None]
    h.project_id = "q"
    assert encode(h) == (
        '{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"q",'
        '"runner_version":"1","capabilities":["subprocess"],"resume":{"T-1":4},"zz":[1,null]}'
    )
    # the same holds for a decoded message (containers are built lazily, then kept)
    m = decode('{"type":"task.progress","task_id":"T","seq":1,"kind":"state","payload":{"a":1}}')
    assert isinstance(m, TaskProgress)
    m.payload["b"] = 2
    m.extra["later"] = True
    assert m.payload is m.payload
    assert encode(m).endswith('"payload":{"a":1,"b":2},"later":true}')


def test_constructor_keeps_the_given_dict() -> None:
    payload: Dict[str, Any] = {"state": "running"}
    p = TaskProgress(task_id="T", seq=1, kind="state", payload=payload)
    payload["more"] = 1
    assert p.payload is payload
    assert p.to_dict()["payload"] == {"state": "running", "more": 1}


def test_encode_order_and_extra_last() -> None:
    c = TaskCancel(task_id="T-1", reason="r", seq=3, extra={"a": 1, "reason": "ignored"})
    assert to_frame(c) == encode(c) == (
        '{"schema_version":1,"type":"task.cancel","task_id":"T-1","reason":"r","seq":3,"a":1}'
    )


def test_decode_inputs() -> None:
    text = '{"type":"ping","nonce":"n"}'
    for frame in (text, text.encode(), bytearray(text.encode()), json.loads(text)):
        m = decode(frame)
        assert isinstance(m, Ping) and m.nonce == "n"
    with pytest.raises(TypeError):
        decode(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "frame, cls, code",
    [
        ("{", RunnerProtocolError, "not_json"),
        (b"\xff", RunnerProtocolError, "not_json"),
        ('{"type":"ping","nonce":"\ud800"}', RunnerProtocolError, "not_json"),  # lone surrogate
        ('{"type":"ping","nonce":"\u00e9\u2603"}', None, ""),
        ('{"type":"ping","a":1,"a":2}', RunnerProtocolError, "duplicate_key"),
        ("[1]", RunnerProtocolError, "not_object"),
        ('{"type":"nope"}', UnknownMessageError, "unknown_type"),
        ("{}", UnknownMessageError, "unknown_type"),
        ('{"type":"task.cancel","seq":"1"}', SchemaValidationError, "schema_violation"),
    ],
)
def test_decode_errors(frame: Any, cls: Any, code: str) -> None:
    if cls is None:  # non-ASCII text in a str frame decodes
        m = decode(frame)
        assert isinstance(m, Ping) and m.nonce == "\u00e9\u2603"
        return
    with pytest.raises(cls) as info:
        decode(frame)
    assert isinstance(info.value, RunnerProtocolError)
    assert info.value.code == code
    if cls is RunnerProtocolError:
        assert not isinstance(info.value, (SchemaValidationError, UnknownMessageError))


def test_schema_violations_are_located() -> None:
    frame = '{"type":"task.progress","task_id":"T","seq":1,"kind":"usage","payload":{"usage":{"output":-1}}}'
    assert isinstance(decode(frame), TaskProgress)  # tolerant: payload is an open object
    with pytest.raises(SchemaValidationError) as info:
        decode(frame, validate=True)
    pairs = [(v.location, v.rule) for v in info.value.violations]
    assert ("payload/usage/output", "minimum") in pairs
    assert ("payload/usage/thinking", "required") in pairs
    assert pairs == sorted(pairs)
    assert all(isinstance(v, Violation) for v in info.value.violations)
    assert len(info.value.errors) == len(info.value.violations)
    assert info.value.errors[0].startswith("payload/usage/")


def test_from_dict_parse_validate() -> None:
    a = TaskAssign.from_dict({"task": TASK, "role": "coder", "invocation": {}, "seq": 1, "x": 1})
    assert a.task_id == "T-1" and a.extra == {"x": 1}
    assert a.validate() is a
    # the class decides the type; the dict's type is ignored
    h = Hello.from_dict({"type": "ping", "project_id": "p"})
    assert isinstance(h, Hello) and h.project_id == "p"
    with pytest.raises(SchemaValidationError) as info:
        Hello.parse({"project_id": ""})
    assert [(v.location, v.rule) for v in info.value.violations] == [
        ("project_id", "min_length"),
        ("protocol_version", "required"),
        ("runner_version", "required"),
        ("schema_version", "required"),
    ]
    assert Hello.parse({"project_id": ""}, validate=False).project_id == ""
    with pytest.raises(SchemaValidationError):
        TaskCancel(task_id="", reason="r", seq=1).validate()


def test_to_dict_matches_encode() -> None:
    r = TaskReportMessage(report=REPORT, seq=2, extra={"z": 0})
    r.task_id = "T-1"
    assert json.loads(encode(r)) == r.to_dict()
    assert list(r.to_dict()) == [
        "schema_version", "type", "task_id", "report", "seq", "attempt", "z",
    ]


def test_wrong_shapes_are_the_cores_violations() -> None:
    h = Hello(project_id="p", runner_version="1", capabilities=["ok", 1])  # type: ignore[list-item]
    with pytest.raises(SchemaValidationError) as info:
        encode(h)
    assert [(v.location, v.rule) for v in info.value.violations] == [("capabilities/1", "type")]
    p = TaskProgress(task_id="T", seq=1, kind="k", payload=[1])  # type: ignore[arg-type]
    with pytest.raises(SchemaValidationError) as info:
        p.to_dict()
    assert [(v.location, v.rule) for v in info.value.violations] == [("payload", "type")]
    with pytest.raises(TypeError):
        encode(TaskCancel(task_id="T", extra=[]))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode(TaskProgress(task_id="T", payload={"s": {1, 2}}))
    with pytest.raises(ValueError):
        encode(TaskProgress(task_id="T", payload={"f": float("nan")}))
    cyclic: Dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError):
        encode(TaskProgress(task_id="T", payload=cyclic))
    with pytest.raises(OverflowError):
        TaskCancel(task_id="T", seq=-1)
    with pytest.raises(TypeError):
        Hello(project_id=1)  # type: ignore[arg-type]


def test_ping_pong() -> None:
    p = Ping(nonce=7, sent_at=1.5)
    assert encode(p) == '{"schema_version":1,"type":"ping","nonce":7,"sent_at":1.5}'
    assert Pong.answer(p).nonce == 7
    assert encode(Pong.answer(Ping(nonce="x"))) == '{"schema_version":1,"type":"pong","nonce":"x"}'
    assert encode(Ping()) == '{"schema_version":1,"type":"ping"}'
    p.nonce = None
    assert p.nonce is None
    with pytest.raises(TypeError):
        Ping(nonce=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Ping(nonce=True)


def test_equality_and_repr() -> None:
    a = decode('{"type":"task.cancel","task_id":"T","reason":"r","seq":1,"x":{"b":1,"a":2}}')
    b = TaskCancel(task_id="T", reason="r", seq=1, extra={"x": {"a": 2, "b": 1}})
    assert a == b and not (a != b)
    b.seq = 2
    assert a != b
    assert a != Ping() and a != "x"
    assert repr(TaskCancel(task_id="T", reason="it's")) == (
        "TaskCancel(task_id='T', reason=\"it's\", seq=0, schema_version=1, extra={})"
    )
    assert repr(Ping(nonce="n")) == "Ping(nonce='n', sent_at=None, schema_version=1, extra={})"


def test_embedded_artifacts_as_taskspecs_models() -> None:
    import stapel_taskspecs

    a = TaskAssign(task_id="T-1", task=TASK, role="coder")
    spec = a.task_spec
    assert isinstance(spec, stapel_taskspecs.TaskSpec) and spec.goal == "Do the thing"
    r = TaskReportMessage(task_id="T-1", report=REPORT)
    model = r.report_model
    assert isinstance(model, stapel_taskspecs.TaskReport)
    assert isinstance(model.usage, stapel_taskspecs.UsageSplit) and model.usage.thinking == 5
    with pytest.raises(SchemaValidationError) as info:
        TaskAssign(task={"id": "T"}).task_spec
    assert {v.location for v in info.value.violations} >= {"task/goal", "task/type"}


def test_validate_by_name() -> None:
    ok = {"type": "task.cancel", "schema_version": 1, "task_id": "T", "reason": "r", "seq": 1}
    assert is_valid(ok, "task.cancel") and iter_errors(ok, "task.cancel") == []
    validate(ok, "task.cancel")
    bad = dict(ok, seq=-1)
    assert not is_valid(bad, "task.cancel")
    assert iter_errors(bad, "task.cancel") == ["seq: must be at least 0 (minimum)"] or iter_errors(
        bad, "task.cancel"
    )[0].startswith("seq: ")
    with pytest.raises(SchemaValidationError) as info:
        validate(bad, "task.cancel")
    assert [(v.location, v.rule) for v in info.value.violations] == [("seq", "minimum")]
    with pytest.raises(UnknownMessageError):
        validate(ok, "nope")
    with pytest.raises(SchemaValidationError) as info2:
        validate([1], "ping")
    assert info2.value.code == "not_object"
    assert is_valid(TaskCancel(task_id="T", reason="r", seq=1), "task.cancel")
    assert not is_valid(TaskCancel(task_id="T", reason="r", seq=1), "ping")


def test_load_schema_and_shipped_schemas_match_conformance() -> None:
    schema = load_schema("task.progress")
    assert schema["title"] == "task.progress"
    with pytest.raises(UnknownMessageError):
        load_schema("nope")
    shipped = Path(srp.__file__).parent / "schemas"
    source = conformance_dir() / "schema"
    if not source.is_dir():
        pytest.skip("repository conformance/schema not found")
    names = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.json"))
    assert names == sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*.json"))
    for name in names:
        assert (shipped / name).read_bytes() == (source / name).read_bytes(), name


def test_no_panics_on_hostile_input() -> None:
    for frame in ["", " ", "[" * 10000, '{"type":"ping","nonce":' + "9" * 400 + "}", "\x00"]:
        with pytest.raises(RunnerProtocolError):
            decode(frame, validate=True)


def test_encode_lends_native_fields_without_losing_them() -> None:
    frame = ('{"schema_version":1,"type":"task.assign","task_id":"T-1","task":{"id":"T-1"},'
             '"role":"coder","invocation":{"model":"m"},"seq":1,"attempt":0,"x":[1]}')
    m = decode(frame)
    assert isinstance(m, TaskAssign)
    assert encode(m) == frame and encode(m) == frame  # containers come back after encoding
    assert (m.task, m.invocation, m.extra) == ({"id": "T-1"}, {"model": "m"}, {"x": [1]})
    bad = TaskAssign(task_id="T", task={"id": "T"}, invocation=[1])  # type: ignore[arg-type]
    with pytest.raises(SchemaValidationError):
        encode(bad)
    assert bad.task == {"id": "T"}  # nothing was taken on the failed path


def test_object_keys_are_reused_and_collisions_stay_correct() -> None:
    # Short keys come from a bounded cache of str objects: the same key decoded twice is
    # the same object; thousands of distinct keys (colliding in the cache) stay correct.
    keys = [f"k{i}" for i in range(3000)] + ["x" * 40]
    frame = json.dumps({"type": "task.progress", "task_id": "T", "kind": "state",
                        "payload": {k: i for i, k in enumerate(keys)}})
    first, second = decode(frame), decode(frame)
    assert isinstance(first, TaskProgress) and isinstance(second, TaskProgress)
    assert list(first.payload) == keys and list(first.payload.values()) == list(range(len(keys)))
    assert second.payload == first.payload
    a = decode('{"type":"task.progress","payload":{"usage_key":1}}')
    b = decode('{"type":"task.progress","payload":{"usage_key":2}}')
    assert isinstance(a, TaskProgress) and isinstance(b, TaskProgress)
    assert next(iter(a.payload)) is next(iter(b.payload))


# --- rules the core decides (issue 12) --------------------------------------------------


def test_is_valid_refuses_an_instance_of_another_type() -> None:
    # Written as a user of the published 0.1.1 writes it: the instance names its own type.
    from stapel_runner_protocol import validation

    instance = {
        "schema_version": 1,
        "type": "task.assign",
        "task_id": "T-1",
        "seq": 1,
        "kind": "state",
        "attempt": 0,
        "payload": {},
    }
    assert validation.is_valid(instance, "task.assign") is False
    assert validation.is_valid(instance, "task.progress") is False
    assert validation.iter_errors(instance, "task.progress") == [
        'type: must be "task.progress" to be checked as that type (const)'
    ]
    with pytest.raises(SchemaValidationError) as e:
        validation.validate(instance, "task.progress")
    assert [(v.location, v.rule) for v in e.value.violations] == [("type", "const")]
    # Its own type is fine; none at all is a required violation (the schema's).
    assert validation.is_valid(dict(instance, type="task.progress"), "task.progress")
    del instance["type"]
    assert not validation.is_valid(instance, "task.progress")
    with pytest.raises(SchemaValidationError) as e:
        validation.validate(instance, "task.progress")
    assert [(v.location, v.rule) for v in e.value.violations] == [("type", "required")]
    # A message object of another type is refused the same way.
    cancel = TaskCancel(task_id="T-1", reason="r", seq=1)
    assert validation.is_valid(cancel, "task.cancel")
    assert not validation.is_valid(cancel, "task.progress")
    assert "type: must be \"task.progress\" to be checked as that type (const)" in (
        validation.iter_errors(cancel, "task.progress")
    )


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(1, depth):
        value = [value]
    return value


def test_encode_refuses_what_decode_refuses() -> None:
    # A frame nests at most 127 levels, its own object the first.
    ok = Ping(extra={"x": _nested(126)})
    assert decode(encode(ok)) == ok
    for message in (
        Ping(extra={"x": _nested(127)}),
        TaskProgress(task_id="T", kind="state", payload={"x": _nested(126)}),
    ):
        with pytest.raises(RunnerProtocolError) as e:
            encode(message)
        assert e.value.code == "not_json"
        with pytest.raises(RunnerProtocolError) as d:
            decode(json.dumps(message.to_dict(), separators=(",", ":")))
        assert d.value.code == "not_json"


def test_lone_surrogate_text_has_the_core_message() -> None:
    with pytest.raises(RunnerProtocolError) as e:
        decode('{"type":"ping","nonce":"\ud800"}')
    assert e.value.code == "not_json"
    assert str(e.value) == "frame is not JSON: the text is not valid Unicode (it has no UTF-8 form)"


def test_schema_files_come_from_the_core_and_ship() -> None:
    from stapel_runner_protocol import validation

    assert list(SCHEMA_FILES) == message_types()
    for name in message_types():
        assert validation.load_schema(name)["properties"]["type"]["const"] == name
