"""The caches behind the fast paths (src/pyobj.rs, src/encode.rs) never change a result:
many distinct keys and values (evicting, colliding, past the interning bound), frames
that go away while their message lives on, and key objects that die between encodes."""

import gc
import json
from typing import Any, Dict

import stapel_runner_protocol as srp
from stapel_runner_protocol import TaskProgress


def frame(payload: Dict[str, Any], seq: int = 1) -> str:
    return json.dumps({"schema_version": 1, "type": "task.progress", "task_id": "T-1",
                       "seq": seq, "kind": "state", "payload": payload},
                      separators=(",", ":"))


def test_many_distinct_keys_and_values_decode_exactly() -> None:
    for i in range(6000):  # more keys than the caches have slots or the interning bound
        payload = {f"k{i}": f"v{i}", f"key-{i % 97}": i, "state": f"s{i % 5}"}
        m = srp.decode(frame(payload, i + 1), validate=True)
        assert isinstance(m, TaskProgress)
        assert m.payload == payload
        assert list(m.payload) == list(payload)


def test_a_message_outlives_its_frame_object() -> None:
    messages = []
    for i in range(50):
        text = frame({"state": "running", "detail": "x" * i}, i + 1)
        messages.append(srp.decode(text.encode() if i % 2 else text, validate=True))
        del text
    gc.collect()
    for i, m in enumerate(messages):
        assert isinstance(m, TaskProgress)
        assert (m.task_id, m.kind, m.seq) == ("T-1", "state", i + 1)
        assert m.payload == {"state": "running", "detail": "x" * i}


def test_encoding_with_fresh_key_objects_each_time_matches_the_core() -> None:
    for i in range(3000):
        key = "".join(["key", str(i % 300)])  # a new str object every time
        payload = {key: i, "nested": {key + "x": [key, i]}}
        m = TaskProgress(task_id="T", kind="k", payload=payload)
        fast = srp.encode(m)
        assert fast == srp.encode(m.to_dict())
        assert json.loads(fast)["payload"] == payload
        del key, payload, m
        if i % 500 == 0:
            gc.collect()
