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
from typing import Any, Dict, List

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
