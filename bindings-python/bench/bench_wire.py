"""Micro-benchmark of the wire codec: stapel_runner_protocol (Rust core via PyO3) against
msgspec (if installed) and json + dataclasses.

    python bench/bench_wire.py            # prints one line per case, ns per operation

Frames: a typical task.progress (usage), a hello, and a task.assign with a TaskSpec.
Each library decodes the frame into a typed object and encodes it back.
"""

from __future__ import annotations

import json
import timeit
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List

import stapel_runner_protocol as srp

FRAMES = {
    "task.progress": (
        '{"schema_version":1,"type":"task.progress","task_id":"T-1042","seq":17,"kind":"usage",'
        '"attempt":2,"payload":{"usage":{"cache_read":30433,"cache_write":287,"fresh_input":1,'
        '"output":67,"thinking":12}}}'
    ),
    "hello": (
        '{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"brave-falcon-1042",'
        '"runner_version":"0.1.0","capabilities":["agent-sdk","subprocess"],"resume":{"T-1":3}}'
    ),
    "task.assign": (
        '{"schema_version":1,"type":"task.assign","task_id":"T-1","task":{"schema_version":1,'
        '"id":"T-1","type":"feature","goal":"Add the thing","criteria":[{"id":"c1","text":'
        '"Given a when b then c"},{"id":"c2","text":"Given d when e then f"}],"budget":'
        '{"iterations":5}},"role":"coder","invocation":{"backend":"agent-sdk","model":"m",'
        '"session":"per-task","allowed_tools":["Read","Edit"],"budget":{"tokens":100000}},'
        '"seq":1,"attempt":1}'
    ),
}


@dataclass
class Progress:
    task_id: str = ""
    seq: int = 0
    kind: str = ""
    payload: Dict[str, Any] = field(default_factory=dict)
    attempt: int = 0
    schema_version: int = 1
    extra: Dict[str, Any] = field(default_factory=dict)


def json_dataclass_decode(frame: str) -> Progress:
    d = json.loads(frame)
    known = {"task_id", "seq", "kind", "payload", "attempt", "schema_version"}
    return Progress(**{k: v for k, v in d.items() if k in known},
                    extra={k: v for k, v in d.items() if k not in known and k != "type"})


def json_dataclass_encode(p: Progress) -> str:
    d = asdict(p)
    extra = d.pop("extra")
    return json.dumps({"type": "task.progress", **d, **extra}, separators=(",", ":"),
                      ensure_ascii=False)


def bench(name: str, fn: Callable[[], Any], number: int = 20000) -> None:
    best = min(timeit.repeat(fn, number=number, repeat=5)) / number
    print(f"{name:<55} {best * 1e9:9.0f} ns")


def main() -> None:
    for mtype, frame in FRAMES.items():
        msg = srp.decode(frame)
        bench(f"srp.decode            {mtype}", lambda: srp.decode(frame))
        bench(f"srp.decode(validate)  {mtype}", lambda: srp.decode(frame, validate=True))
        bench(f"srp.encode            {mtype}", lambda: srp.encode(msg))
        bench(f"json.loads            {mtype}", lambda: json.loads(frame))
        obj = json.loads(frame)
        bench(f"json.dumps            {mtype}",
              lambda: json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
    frame = FRAMES["task.progress"]
    p = json_dataclass_decode(frame)
    bench("json+dataclass decode task.progress", lambda: json_dataclass_decode(frame))
    bench("json+dataclass encode task.progress", lambda: json_dataclass_encode(p))
    try:
        import msgspec
    except ImportError:
        print("msgspec not installed: pip install msgspec to compare")
        return

    class MProgress(msgspec.Struct, tag_field="type", tag="task.progress"):
        task_id: str = ""
        seq: int = 0
        kind: str = ""
        payload: Dict[str, Any] = {}
        attempt: int = 0
        schema_version: int = 1

    dec = msgspec.json.Decoder(MProgress)
    enc = msgspec.json.Encoder()
    m = dec.decode(frame)
    bench("msgspec decode        task.progress", lambda: dec.decode(frame))
    bench("msgspec encode        task.progress", lambda: enc.encode(m))
    _ = List


if __name__ == "__main__":
    main()
