"""The fast decode path of ``task.progress`` frames (the core's ``wire::peek_progress``,
payload kept as JSON text until read) and the vectorcall ``decode`` function.

A plain, valid progress frame takes the fast path; everything else the full decode. Each
test compares the two: the full path is reached by decoding the same frame with an
unknown top-level field added (the fast path refuses those) and removed again, so a
difference in any observable behaviour fails here.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any, Dict, List, Tuple

import pytest

import stapel_runner_protocol as srp
from stapel_runner_protocol import ConnectionState, Ping, TaskProgress, encode
from stapel_runner_protocol.errors import RunnerProtocolError, SchemaValidationError

USAGE = (
    '{"schema_version":1,"type":"task.progress","task_id":"brave-falcon-1042/T-1042",'
    '"seq":17,"kind":"usage","attempt":2,"payload":{"usage":{"cache_read":30433,'
    '"cache_write":287,"fresh_input":1,"output":67,"thinking":12},'
    '"model":"claude-sonnet-4-5-20250929","turn":3}}'
)

# Plain frames with payloads of every JSON shape: escapes and non-ASCII text in values,
# numbers the core carries as doubles, nesting, arrays of objects, empty containers.
PAYLOADS: List[str] = [
    '{}',
    '{"state":"running","detail":"iteration 2 of 5"}',
    '{"text":"line\\nbreak \\"quoted\\" \\u00e9\\ud83d\\ude00 tab\\t","x":"\\/"}',
    '{"n":[0,-1,1.5,-0,1e5,2.5E-3,18446744073709551615,18446744073709551616,-9223372036854775808]}',
    '{"deep":{"a":[{"b":{"c":[[],{},null,true,false]}}]},"empty":[]}',
    '{"unicode":"Grüße, 世界","emoji":"😀"}',
    '{"usage":{"thinking":0,"output":1,"fresh_input":2,"cache_write":3,"cache_read":9007199254740991}}',
]


def decode(frame: Any, *, validate: bool = False) -> Any:
    """``srp.decode``, typed ``Any`` for these tests (they compare whole messages)."""
    return srp.decode(frame, validate=validate)


def progress(payload: str, kind: str = "state", extra: str = "") -> str:
    return ('{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,'
            f'"kind":"{kind}","attempt":1{extra},"payload":{payload}}}')


def full(f: str) -> Any:
    """The same frame through the full decode: with an unknown top-level field, which the
    fast path refuses, removed again from ``extra``."""
    m = decode(f.replace('"schema_version":1,', '"schema_version":1,"zz_full_path":0,', 1),
               validate=True)
    extra = dict(m.extra)
    assert extra.pop("zz_full_path") == 0
    m.extra = extra
    return m


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("validate", [False, True])
def test_fast_and_full_decode_agree(payload: str, validate: bool) -> None:
    kind = "usage" if '"usage"' in payload else "state"
    f = progress(payload, kind)
    fast, slow = decode(f, validate=validate), full(f)
    assert type(fast) is TaskProgress
    assert (fast.task_id, fast.seq, fast.attempt, fast.kind, fast.schema_version) == \
        ("T-1", 3, 1, kind, 1)
    # Read order matters for the lazy payload: compare before and after reading it.
    assert fast == slow
    assert encode(fast) == encode(slow)
    assert repr(decode(f)) == repr(slow)
    assert fast.to_dict() == slow.to_dict()
    assert fast.payload == slow.payload == json.loads(payload)
    assert fast.extra == {}
    assert encode(fast) == encode(slow)
    # bytes frames take the same path
    assert decode(f.encode(), validate=validate) == slow


def test_lazy_payload_is_read_once_and_is_then_the_field() -> None:
    m = decode(USAGE, validate=True)
    p = m.payload
    assert m.payload is p  # built once, then the field itself
    p["usage"]["output"] = 99
    p["note"] = "edited"
    out = json.loads(encode(m))
    assert out["payload"]["usage"]["output"] == 99 and out["payload"]["note"] == "edited"
    with pytest.raises(SchemaValidationError):
        p["usage"]["output"] = -1
        m.validate()


def test_lazy_payload_used_by_the_core_before_any_read() -> None:
    # encode, validate, equality, to_dict and sequencing use the payload without Python
    # ever reading it; afterwards reading it still gives the frame's payload.
    m = decode(USAGE, validate=True)
    assert encode(m) == encode(full(USAGE))
    m.validate()
    assert m == full(USAGE)
    runner = ConnectionState("runner")
    m.seq = 0
    runner.emit(m)
    assert m.seq == 1
    replayed = runner.replay_for({})["brave-falcon-1042/T-1042"]
    assert [x.payload for x in replayed if isinstance(x, TaskProgress)] == \
        [json.loads(USAGE)["payload"]]
    assert m.payload == json.loads(USAGE)["payload"]


def test_setting_the_payload_before_reading_replaces_the_text() -> None:
    m = decode(USAGE)
    m.payload = {"state": "done"}
    m.kind = "state"
    assert json.loads(encode(m))["payload"] == {"state": "done"}
    assert m.payload == {"state": "done"}


def test_copy_pickle_and_repr_of_an_unread_message() -> None:
    m = decode(USAGE, validate=True)
    slow = full(USAGE)
    assert repr(m) == repr(slow)
    assert pickle.loads(pickle.dumps(m)) == slow
    assert copy.deepcopy(m) == slow
    assert copy.copy(decode(USAGE)) == slow


def test_hub_ingest_of_fast_decoded_frames() -> None:
    hub = ConnectionState("hub")
    frames = [USAGE.replace('"seq":17', f'"seq":{i}') for i in (1, 2, 2, 4, 3)]
    got = [hub.receive(decode(f, validate=True)) for f in frames]
    assert got == [True, True, False, True, True]
    assert hub.resume_map() == {"brave-falcon-1042/T-1042": 4}


@pytest.mark.parametrize("f", [
    progress('{}', extra=',"note":"x"'),              # unknown field: kept in extra
    progress('{"k":"\\u0041"}').replace('"T-1"', '"T\\u002d1"'),  # escaped task_id
    progress('{}').replace('"state"', '"st\\u0061te"'),           # escaped kind
    progress('{"usage":{"a":1}}'),                     # usage of another kind, open
    ' \n' + progress('{}') + '\r\n\t ',                # surrounding whitespace
])
def test_frames_the_fast_path_may_refuse_still_decode(f: str) -> None:
    m, slow = decode(f, validate=True), full(f)
    assert m == slow and encode(m) == encode(slow) and m.payload == slow.payload


@pytest.mark.parametrize("f", [
    progress('{"a":1,"a":2}'),
    progress('{"x":{"a":1,"a":2}}'),
    progress('{"x":[{"a":1,"a":2}]}'),
    progress('{}', extra=',"seq":4'),
])
def test_duplicate_keys_are_rejected_at_any_depth(f: str) -> None:
    with pytest.raises(RunnerProtocolError) as e:
        decode(f)
    assert e.value.code == "duplicate_key"


@pytest.mark.parametrize("f, code", [
    (progress('{"usage":{"cache_read":1}}', kind="usage"), "schema_violation"),
    (progress('{}').replace('"seq":3', '"seq":9007199254740992'), "schema_violation"),
    (progress('{}').replace('"seq":3', '"seq":3.0'), "schema_violation"),
    (progress('{}').replace('"attempt":1', '"attempt":-1'), "schema_violation"),
    (progress('{}').replace('"T-1"', '""'), "schema_violation"),
    (progress('{}').replace('"schema_version":1', '"schema_version":2'), "schema_violation"),
    (progress('[]'), "schema_violation"),
    (progress('{"s":"\\ud800"}'), "not_json"),
    (progress('{"s":"\\x"}'), "not_json"),
    (progress('{"n":1e400}'), "not_json"),
    (progress('{}') + "x", "not_json"),
    (progress('{"a":' * 130 + "1" + "}" * 130), "not_json"),
])
def test_invalid_progress_frames_get_the_full_decodes_error(f: str, code: str) -> None:
    with pytest.raises(RunnerProtocolError) as e:
        decode(f, validate=True)
    assert e.value.code == code


def test_decode_arguments() -> None:
    ping = '{"schema_version":1,"type":"ping","nonce":7}'
    assert decode(ping).nonce == 7
    assert decode(ping, validate=True).nonce == 7
    assert decode(frame=ping, validate=True).nonce == 7
    native: Any = srp.decode  # called with wrong arguments on purpose
    cases: List[Tuple[Tuple[Any, ...], Dict[str, Any]]] = [((), {}), ((ping, True), {}), ((ping,), {"strict": True}),
                         ((ping,), {"validate": 1}), ((42,), {}), ((ping,), {"frame": ping}),
                         ((), {"validate": True})]
    for args, kwargs in cases:
        with pytest.raises(TypeError):
            native(*args, **kwargs)
    assert isinstance(decode(ping), Ping)
    assert decode(bytearray(ping.encode())).nonce == 7
    assert decode({"type": "ping", "nonce": 7}).nonce == 7
    with pytest.raises(RunnerProtocolError) as e:
        decode('{"type":"ping","nonce":"\udc80"}')
    assert e.value.code == "not_json"
    with pytest.raises(RunnerProtocolError) as e:
        decode(b'{"type":"ping","nonce":"\xff"}')
    assert e.value.code == "not_json"
