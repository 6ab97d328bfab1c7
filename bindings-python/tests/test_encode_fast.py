"""`encode` of a `TaskProgress` built in Python writes the frame straight from its Python
objects (src/encode.rs), with the frame layout learned from the core's encoder. These
tests hold it to the core's own path byte for byte: the same message as a dict goes
through the core's conversion and `try_encode` (`encode(dict)`), and every frame decodes
back to the message. Payloads the fast path leaves to the core (subclasses, tuples, big
integers, NaN, non-str keys, deep nesting, `extra`) must give the core's result or error.
"""

import enum
import json
import math
import random
from typing import Any, Dict, List, Tuple

import pytest

import stapel_runner_protocol as srp
from stapel_runner_protocol import TaskProgress
from stapel_runner_protocol.errors import RunnerProtocolError


def both(payload: Dict[str, Any], **fields: Any) -> List[str]:
    m = TaskProgress(task_id=fields.pop("task_id", "T-1"), kind=fields.pop("kind", "usage"),
                     payload=payload, **fields)
    fast = srp.encode(m)
    core = srp.encode(m.to_dict())
    return [fast, core]


def random_value(rng: random.Random, depth: int) -> Any:
    pick = rng.randrange(9 if depth < 4 else 6)
    if pick == 0:
        return rng.randrange(-(2**63), 2**63)
    if pick == 1:
        return rng.choice([0.0, -0.0, 1.5, 1e16, 1e-7, 123456.789, -2.5e300, 3.0])
    if pick == 2:
        alphabet = 'ab"\\\n\t\x00\x1f\x7fé€😀 /'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if pick == 3:
        return rng.choice([True, False, None])
    if pick == 4:
        return rng.randrange(300)
    if pick == 5:
        return "plain text"
    if pick == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["usage", "a", "é", 'q"k', "", "x\ny", "model", "turn"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_fast_encode_is_the_cores_encoding_on_random_payloads() -> None:
    rng = random.Random(1309)
    for _ in range(400):
        payload = {"k": random_value(rng, 1), "usage": random_value(rng, 1)}
        seq, attempt = rng.randrange(2**53), rng.choice([0, 1, 7])
        task_id = rng.choice(["T-1", 'q"uote', "é/€", "x\x01"])
        fast, core = both(payload, task_id=task_id, seq=seq, attempt=attempt)
        assert fast == core
        back = srp.decode(fast)
        assert isinstance(back, TaskProgress)
        assert (back.task_id, back.seq, back.attempt) == (task_id, seq, attempt)
        assert back.payload == json.loads(core)["payload"]


def test_the_usage_frame_encodes_as_the_core_does() -> None:
    usage = {"cache_read": 30433, "cache_write": 287, "fresh_input": 1, "output": 67,
             "thinking": 12}
    fast, core = both({"usage": usage, "model": "claude", "turn": 3}, seq=17, attempt=2)
    assert fast == core
    back = srp.decode(fast, validate=True)
    assert isinstance(back, TaskProgress)
    assert back.payload["usage"] == usage


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


@pytest.mark.parametrize("value", [
    (1, 2),                 # tuple: an array
    2**64 + 5,              # beyond 64 bits: a double, as the core carries it
    2**63 + 1,              # u64
    Color.RED,              # int subclass
    Text("s"),              # str subclass
    {"n": {"m": (True,)}},
])
def test_values_the_fast_path_leaves_to_the_core_encode_the_same(value: Any) -> None:
    fast, core = both({"v": value})
    assert fast == core


@pytest.mark.parametrize("payload, error", [
    ({"v": math.nan}, ValueError),
    ({"v": math.inf}, ValueError),
    ({1: "non-str key"}, TypeError),
    ({"v": object()}, TypeError),
    ({"v": "\ud800"}, UnicodeEncodeError),
])
def test_values_json_cannot_hold_raise_as_before(payload: Dict[Any, Any],
                                                error: type) -> None:
    with pytest.raises(error):
        srp.encode(TaskProgress(task_id="T", kind="k", payload=payload))


def test_nesting_beyond_the_cores_limit_is_the_cores_error() -> None:
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    with pytest.raises((RunnerProtocolError, ValueError)):
        srp.encode(TaskProgress(task_id="T", kind="k", payload={"d": deep}))
    ok: Any = 1
    for _ in range(60):  # deeper than the fast path writes, within the core's limit
        ok = {"n": ok}
    fast, core = both({"d": ok})
    assert fast == core


def test_a_cycle_is_refused() -> None:
    loop: Dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError):
        srp.encode(TaskProgress(task_id="T", kind="k", payload=loop))


def test_extra_fields_and_mutation_after_encode_are_seen() -> None:
    m = TaskProgress(task_id="T", kind="state", payload={"state": "running"},
                     extra={"trace": "abc", "kind": "ignored"})
    assert srp.encode(m) == srp.encode(m.to_dict())
    assert json.loads(srp.encode(m))["trace"] == "abc"
    m.extra = {}
    m.payload["state"] = "done"
    m.seq = 9
    frame = json.loads(srp.encode(m))
    assert (frame["payload"], frame["seq"], "trace" in frame) == ({"state": "done"}, 9, False)


# ---------------------------------------------------------------------------------------
# Encoding a decoded message (issue 29): while its payload was never read, the payload's
# validated text is copied as it is when the core's encoder would write the same bytes
# (compact, no escapes, integers only); anything else — a payload read (then it is a dict
# the reader may have changed), set, or in another form — is encoded from its value. The
# reference is the core's own path: the message as a dict through `encode(dict)`.

from stapel_runner_protocol import _native  # noqa: E402


def _ws(rng: random.Random) -> str:
    return rng.choice(["", "", "", " ", "\n", "\t ", "\r\n"])


def _json_text(rng: random.Random, depth: int, canonical: bool) -> str:
    """Random JSON text: in the encoder's form when ``canonical``, else with a random
    chance of whitespace, escapes and number forms the encoder writes differently."""
    def ws() -> str:
        return "" if canonical else _ws(rng)

    pick = rng.randrange(9 if depth < 4 else 6)
    if pick == 0:
        digits = rng.randrange(1, 18 if canonical else 22)
        n = rng.randrange(10 ** (digits - 1), 10**digits) if digits > 1 else rng.randrange(10)
        return str(n) if canonical or rng.random() < 0.5 else str(-n)
    if pick == 1:
        if canonical:
            return str(-rng.randrange(1, 10**17))
        return rng.choice(["1.5", "-0", "0.0", "1e3", "2E-7", "-0.25", "12345678901234567890",
                           "-9223372036854775809", "1.0", "100000000000000000000"])
    if pick == 2:
        plain = ["", "running", "é ☃ 😀", "a b", "tab\u007fdel", "/path/x", "'single'"]
        if canonical:
            return '"' + rng.choice(plain) + '"'
        return '"' + rng.choice(plain + ['q\\"uote', "\\u00e9", "\\/", "\\n", "\\\\",
                                         "\\ud83d\\ude00", "x\\ty"]) + '"'
    if pick == 3:
        return rng.choice(["true", "false", "null"])
    if pick == 4:
        return str(rng.randrange(300))
    if pick == 5:
        return '"plain text"'
    if pick == 6:
        items = [_json_text(rng, depth + 1, canonical) for _ in range(rng.randrange(4))]
        return "[" + ws() + ("," + ws()).join(items) + ws() + "]"
    return _object_text(rng, depth + 1, canonical)


def _object_text(rng: random.Random, depth: int, canonical: bool) -> str:
    def ws() -> str:
        return "" if canonical else _ws(rng)

    keys = rng.sample(["state", "detail", "usage", "model", "turn", "é", "a b", "event",
                       "name", "input", "id", "n"], rng.randrange(5))
    members = [ws() + json.dumps(k, ensure_ascii=False) + ws() + ":" + ws()
               + _json_text(rng, depth, canonical) + ws() for k in keys]
    return "{" + ",".join(members) + "}" if members else "{" + ws() + "}"


def _frame(rng: random.Random, payload: str) -> Tuple[str, bool]:
    """A task.progress frame around ``payload``, and whether its members are laid out as
    the encoder writes them (mostly; sometimes in another order, with whitespace, or
    without ``attempt``)."""
    task_id = rng.choice(["T-1", "brave-falcon-1042/T-1042", "é/€"])
    kind = rng.choice(["state", "tool", "log", "état"])
    seq, attempt = rng.randrange(1, 2**53), rng.choice([0, 1, 7])
    members = [("schema_version", "1"), ("type", '"task.progress"'),
               ("task_id", json.dumps(task_id, ensure_ascii=False)), ("seq", str(seq)),
               ("kind", json.dumps(kind, ensure_ascii=False))]
    with_attempt = bool(attempt) or rng.random() < 0.5
    if with_attempt:
        members.append(("attempt", str(attempt)))
    members.append(("payload", payload))
    shuffled = rng.random() < 0.2
    if shuffled:
        rng.shuffle(members)
    sep = rng.choice([",", ",", ", "])
    frame = "{" + sep.join(f'"{k}":{v}' for k, v in members) + "}"
    return frame, with_attempt and not shuffled and sep == ","


def _core(frame: str) -> str:
    """The core's encoding of the frame's message: decoded again, as a dict, through the
    core's conversion and `try_encode`."""
    return srp.encode(srp.decode(frame).to_dict())


@pytest.mark.parametrize("as_type", [str, bytes, bytearray])
def test_a_decoded_message_encodes_as_the_core_does_on_random_frames(as_type: type) -> None:
    rng = random.Random(2909)
    reused = 0
    for i in range(600):
        canonical = rng.random() < 0.6
        frame, laid_out = _frame(rng, _object_text(rng, 1, canonical))
        raw: Any = frame if as_type is str else as_type(frame.encode())
        m = srp.decode(raw, validate=True)
        assert isinstance(m, TaskProgress), frame
        reuses = _native._encode_reuses_payload_text(m)
        if canonical:
            assert reuses, frame
        reused += reuses
        want = _core(frame)
        assert srp.encode(m) == want, frame
        # And again (the first encode leaves the message as it was, or the core's path
        # kept the built payload), and after the payload was read: the dict's encoding.
        assert srp.encode(m) == want, frame
        m.payload
        assert not _native._encode_reuses_payload_text(m)
        assert srp.encode(m) == want, frame
        if canonical and laid_out:
            # A frame as the encoder writes it comes back byte for byte.
            assert want == frame
    assert reused >= 600 * 0.5


def test_the_bench_frames_come_back_byte_for_byte() -> None:
    frames = [
        '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":18,"kind":"state",'
        '"attempt":2,"payload":{"state":"running","detail":"iteration 2 of 5"}}',
        '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":19,"kind":"tool",'
        '"attempt":0,"payload":{"event":"tool","name":"bash","input":{"command":"ls -la",'
        '"timeout":600},"status":"started"}}',
        '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":17,"kind":"usage",'
        '"attempt":2,"payload":{"usage":{"cache_read":30433,"cache_write":287,'
        '"fresh_input":1,"output":67,"thinking":12},"model":"claude-é","turn":3}}',
    ]
    for frame in frames:
        m = srp.decode(frame, validate=True)
        assert _native._encode_reuses_payload_text(m)
        assert srp.encode(m) == frame == _core(frame)


def _decoded(payload: str = '{"state":"running","n":1}') -> TaskProgress:
    frame = ('{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":4,'
             '"kind":"state","attempt":1,"payload":' + payload + "}")
    m = srp.decode(frame, validate=True)
    assert isinstance(m, TaskProgress)
    assert _native._encode_reuses_payload_text(m)
    return m


def test_fields_set_after_decoding_are_encoded() -> None:
    m = _decoded()
    m.seq, m.attempt, m.task_id, m.kind = 99, 3, 'T-"2"', "tool"
    m.schema_version = 1
    # The payload text is still reused; the other fields are the new ones.
    assert _native._encode_reuses_payload_text(m)
    frame = srp.encode(m)
    assert frame == srp.encode(m.to_dict())
    assert json.loads(frame) == {"schema_version": 1, "type": "task.progress",
                                 "task_id": 'T-"2"', "seq": 99, "kind": "tool",
                                 "attempt": 3, "payload": {"state": "running", "n": 1}}


def test_a_payload_read_and_changed_after_decoding_is_encoded() -> None:
    m = _decoded()
    m.payload["state"] = "done"
    del m.payload["n"]
    assert not _native._encode_reuses_payload_text(m)
    assert json.loads(srp.encode(m))["payload"] == {"state": "done"}

    m = _decoded()
    m.payload = {"replaced": True}
    assert not _native._encode_reuses_payload_text(m)
    assert json.loads(srp.encode(m))["payload"] == {"replaced": True}

    m = _decoded('{"usage":{"a":1}}')
    m.payload["usage"]["a"] = 2  # a nested change
    assert json.loads(srp.encode(m))["payload"] == {"usage": {"a": 2}}


def test_extra_set_after_decoding_is_encoded() -> None:
    m = _decoded()
    m.extra = {"trace": "abc"}
    assert not _native._encode_reuses_payload_text(m)
    frame = json.loads(srp.encode(m))
    assert (frame["trace"], frame["payload"]) == ("abc", {"state": "running", "n": 1})
    m.extra = {}
    # (The core's path, which encoded the message with `extra`, kept the payload it
    # built: from now on that is encoded.)
    assert srp.encode(m) == srp.encode(m.to_dict())
    assert "trace" not in json.loads(srp.encode(m))


@pytest.mark.parametrize("payload", [
    '{ "state":"running"}', '{"state":"r\\u00e9"}', '{"x":1.5}', '{"x":-0}', '{"x":1e2}',
    '{"x":1234567890123456789}', '{"x":"a\\/b"}', '{"x":[1, 2]}',
])
def test_payload_text_in_another_form_is_not_copied(payload: str) -> None:
    frame = ('{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":4,'
             '"kind":"state","attempt":1,"payload":' + payload + "}")
    m = srp.decode(frame, validate=True)
    assert not _native._encode_reuses_payload_text(m)
    assert srp.encode(m) == _core(frame)
    assert srp.encode(m) == _core(frame)
