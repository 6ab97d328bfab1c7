"""Micro-benchmark (issues 7, 13): stapel_runner_protocol (Rust core via PyO3) against msgspec
(typed Structs with the protocol's rules) and the stdlib ``json`` module + dataclasses
(hand-written checks), in one run (~60 s):

    .venv/bin/python bench/bench_wire.py          # run from bindings-python/
    .venv/bin/python bench/bench_wire.py --quick  # fewer repetitions (smoke test)
    .venv/bin/python bench/bench_wire.py --check  # exit status 1 when a target is missed
    .venv/bin/python bench/bench_wire.py --only re-encode  # just the rows named so

msgspec is an optional, bench-only dependency (``pip install msgspec``); without it the
msgspec column is skipped and the rest still runs.

Cases (every competitor does the same work and its result is used):

* ``decode usage``    decode(validate=True) of a ~250-byte ``task.progress`` frame of
  kind ``usage``; ``+read`` also reads task_id, seq and the five usage components. The
  core checks every rule of the frame, payload included, in one pass, but the message
  builds its ``payload`` dict only on first access (until then it keeps the validated
  JSON text), so the plain row alone would flatter it: the ``+read`` rows show the whole
  cost. Targets (issues 7 and 13): every row at most msgspec's time, and at least 3x
  faster than json+dataclasses.
* ``decode state``    decode(validate=True) of a ``state`` progress frame (+read: payload).
* ``encode``          encode a usage progress message built in Python.
* ``re-encode <kind>`` (issue 29) decode(validate=True) of a ``state``, ``tool`` or
  ``usage`` frame and encode of the message (a relay passing a frame on); ``encode
  decoded <kind>``: encode alone of a message decoded once; ``re-encode <kind> +read``:
  the payload is read between decode and encode, so srp encodes the payload ``dict``
  (which the reader may have changed) instead of copying the validated text. msgspec
  decodes to its Struct and encodes that; json+dc decodes and encodes as above.
* ``hub ingest``      decode(validate=True) + ``ConnectionState("hub").receive`` of an
  in-order stream of usage frames (fresh state per repetition).
* ``emit/recv/replay`` per message: ``ConnectionState("runner").emit`` of a usage message,
  the hub receives 12 of every 16, then ``runner.replay_for(hub.resume_map())`` (trims
  what the hub holds, decodes and returns the other 4) and the hub receives those.

Validation applied by all three (the protocol's rules for these frames): the whole frame
is a JSON object; ``type`` is ``"task.progress"``; ``schema_version`` is the integer 1;
``task_id`` a non-empty string; ``seq`` and (optional) ``attempt`` integers in
[0, 2^53 - 1] (bool and float rejected); ``kind`` a string; ``payload`` an object; and,
for kind ``usage``, ``payload.usage`` required and exactly the five non-negative integer
components (closed: msgspec ``forbid_unknown_fields``). Known differences, all in the
competitors' favour: they do not reject duplicate keys (the core does), they do not keep
unknown top-level fields for re-emission (none occur in these frames), msgspec's usage
payload Struct declares this frame's other payload keys (``model``, ``turn``; others would
be dropped, the core keeps any), and msgspec is given one decoder per frame kind (the core
dispatches on ``type`` and ``kind`` itself).

The ``re-encode <kind> +read`` rows are reported against msgspec, not held to it. On the
abi3 build (``extension: abi3`` in the header) the ``<= msgspec`` target applies to the
``re-encode <kind>`` and ``encode decoded <kind>`` rows only; the others are reported.

Ratios: ``srp/msgspec`` = srp time / msgspec time (<= 1.00: srp at least as fast);
``json/srp`` = json+dataclass time / srp time (target >= 3.0).

Timing: each case's competitors take turns in short slices (~2 ms of CPU each) and each
keeps the median of its five fastest slices; the clock is the thread's CPU time (``time.thread_time_ns``), so
time preempted by other processes on a busy machine is not counted and the ratios
compare like with like.
"""


import json
import os
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import stapel_runner_protocol as srp
from stapel_runner_protocol import ConnectionState, TaskProgress

#: The stable-ABI build (one cp311-abi3 extension for every CPython >= 3.11, maturin's
#: ``--features abi3``) has none of the per-version build's full-C-API paths; of the
#: ``<= msgspec`` targets it is held to those of issue 29 (decoded, then encoded again)
#: only, and the other rows show by how much it is slower.
ABI3 = str(srp._native.__file__).endswith(".abi3.so")
ABI3_TARGETS = ("re-encode state", "re-encode tool", "re-encode usage", "encode decoded state",
                "encode decoded tool", "encode decoded usage")
MAX_SAFE = 2**53 - 1
QUICK = "--quick" in sys.argv
#: Exit with status 1 when a target is missed (or msgspec, whose column the main target
#: needs, is not installed).
CHECK = "--check" in sys.argv
#: ``--only TEXT``: run just the rows whose name contains TEXT (a quick look at a few rows).
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None

USAGE_FRAME = (
    '{"schema_version":1,"type":"task.progress","task_id":"brave-falcon-1042/T-1042",'
    '"seq":17,"kind":"usage","attempt":2,"payload":{"usage":{"cache_read":30433,'
    '"cache_write":287,"fresh_input":1,"output":67,"thinking":12},'
    '"model":"claude-sonnet-4-5-20250929","turn":3}}'
)
STATE_FRAME = (
    '{"schema_version":1,"type":"task.progress","task_id":"brave-falcon-1042/T-1042",'
    '"seq":18,"kind":"state","attempt":2,"payload":{"state":"running",'
    '"detail":"iteration 2 of 5: running the test suite"}}'
)
TOOL_FRAME = (
    '{"schema_version":1,"type":"task.progress","task_id":"brave-falcon-1042/T-1042",'
    '"seq":19,"kind":"tool","attempt":2,"payload":{"event":"tool","name":"bash",'
    '"id":"toolu_01HX9a7Qz3mVbT5kLw2R8yNc","input":{"command":"cargo test --workspace",'
    '"timeout":600},"status":"started"}}'
)
TASK = "brave-falcon-1042/T-1042"
ATTEMPT = 2
USAGE = {"cache_read": 30433, "cache_write": 287, "fresh_input": 1, "output": 67, "thinking": 12}
PAYLOAD_REST = {"model": "claude-sonnet-4-5-20250929", "turn": 3}
USAGE_KEYS = ("cache_read", "cache_write", "fresh_input", "output", "thinking")
# Sequencing defaults of the core's ConnectionState, mirrored by the competitors.
WINDOW, MAX_FRAMES, MAX_BYTES = None, None, None


class ValidationError(ValueError):
    pass


# ---------------------------------------------------------------------------------------
# Sequencing shared by both competitors: the obvious dict-based equivalent of the core's
# ConnectionState for runner -> hub progress streams keyed by (task_id, attempt): emit
# stamps the next seq, encodes and keeps the frame (bounded); receive records the seq
# (watermark + bounded out-of-order window); resume_map gives the last contiguous seq per
# task; replay_for trims what the peer declared and decodes the rest.


class PyConnectionState:
    def __init__(self, role: str, encode: Callable[[Any], Any], decode: Callable[[Any], Any],
                 window: int, max_frames: int, max_bytes: int) -> None:
        if role not in ("hub", "runner"):
            raise ValueError(role)
        self.role = role
        self._encode, self._decode = encode, decode
        self.window, self.max_frames, self.max_bytes = window, max_frames, max_bytes
        # (task_id, attempt) -> [next_seq, deque[(seq, frame)]]
        self.out: Dict[Tuple[str, int], List[Any]] = {}
        # (task_id, attempt) -> [watermark, set of seqs received ahead]
        self.inb: Dict[Tuple[str, int], List[Any]] = {}
        self.kept_frames = 0
        self.kept_bytes = 0

    def emit(self, m: Any) -> Any:
        key = (m.task_id, m.attempt)
        log = self.out.get(key)
        if log is None:
            log = self.out[key] = [1, deque()]
        seq = log[0]
        if seq > MAX_SAFE:
            raise ValidationError("seq exhausted")
        m.seq = seq
        frame = self._encode(m)
        n = len(frame)
        if n > self.max_bytes or self.kept_frames + 1 > self.max_frames \
                or self.kept_bytes + n > self.max_bytes:
            raise ValidationError("backpressure")
        log[1].append((seq, frame))
        log[0] = seq + 1
        self.kept_frames += 1
        self.kept_bytes += n
        return m

    def receive(self, m: Any) -> bool:
        seq = m.seq
        if seq == 0 or seq > MAX_SAFE:
            raise ValidationError("seq 0")
        key = (m.task_id, m.attempt)
        t = self.inb.get(key)
        if t is None:
            t = self.inb[key] = [0, set()]
        wm, ahead = t
        if seq <= wm:
            return False
        if seq - wm > self.window:
            raise ValidationError("beyond_window")
        if seq == wm + 1:
            wm = seq
            while ahead and wm + 1 in ahead:
                wm += 1
                ahead.discard(wm)
            t[0] = wm
            return True
        if seq in ahead:
            return False
        ahead.add(seq)
        return True

    def resume_map(self) -> Dict[str, int]:
        out: Dict[str, Tuple[int, int]] = {}
        for (task, attempt), (wm, _) in self.inb.items():
            if task not in out or attempt > out[task][0]:
                out[task] = (attempt, wm)
        return {task: wm for task, (_, wm) in out.items()}

    def replay_for(self, resume: Dict[str, int]) -> Dict[str, List[Any]]:
        latest: Dict[str, int] = {}
        for task, attempt in self.out:
            if task in resume and (task not in latest or attempt > latest[task]):
                latest[task] = attempt
        result: Dict[str, List[Any]] = {}
        for (task, attempt), log in self.out.items():
            kept: Deque[Tuple[int, Any]] = log[1]
            if latest.get(task) == attempt:
                declared = resume[task]
                if not 0 <= declared <= MAX_SAFE:
                    declared = 0
                while kept and kept[0][0] <= declared:
                    _, frame = kept.popleft()
                    self.kept_frames -= 1
                    self.kept_bytes -= len(frame)
            if kept:
                result.setdefault(task, []).extend(self._decode(f) for _, f in kept)
        return result


# ---------------------------------------------------------------------------------------
# json + dataclasses


@dataclass
class DUsageSplit:
    cache_read: int
    cache_write: int
    fresh_input: int
    output: int
    thinking: int


@dataclass
class DTaskProgress:
    schema_version: int
    type: str
    task_id: str
    seq: int
    kind: str
    payload: Dict[str, Any]  # for kind "usage", payload["usage"] is a DUsageSplit
    attempt: int = 0


def _uint(d: Dict[str, Any], key: str, required: bool = True) -> int:
    v = d.get(key)
    if v is None:
        if required or key in d:
            raise ValidationError(f"{key}: required / not null")
        return 0
    if type(v) is not int or not 0 <= v <= MAX_SAFE:
        raise ValidationError(f"{key}: expected integer in [0, 2^53-1]")
    return v


def json_decode(frame: str) -> DTaskProgress:
    d = json.loads(frame)
    if type(d) is not dict:
        raise ValidationError("not an object")
    if d.get("type") != "task.progress":
        raise ValidationError("type")
    if d.get("schema_version", 0) != 1 or type(d["schema_version"]) is not int:
        raise ValidationError("schema_version: const 1")
    task_id = d.get("task_id")
    if type(task_id) is not str or not task_id:
        raise ValidationError("task_id: non-empty string")
    seq = _uint(d, "seq")
    attempt = _uint(d, "attempt", required=False)
    kind = d.get("kind")
    if type(kind) is not str:
        raise ValidationError("kind: string")
    payload = d.get("payload")
    if type(payload) is not dict:
        raise ValidationError("payload: object")
    if kind == "usage":
        u = payload.get("usage")
        if type(u) is not dict or len(u) != 5:
            raise ValidationError("payload/usage: object with exactly five components")
        for k in USAGE_KEYS:
            _uint(u, k)  # also rejects a missing or unknown component (len == 5)
        payload["usage"] = DUsageSplit(**u)  # the parsed dict is ours: replace in place
    return DTaskProgress(1, "task.progress", task_id, seq, kind, payload, attempt)


def json_encode(m: DTaskProgress) -> str:
    d = asdict(m)
    if not d["attempt"]:
        del d["attempt"]
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def json_message(seq: int = 0) -> DTaskProgress:
    return DTaskProgress(1, "task.progress", TASK, seq, "usage",
                         {"usage": DUsageSplit(**USAGE), **PAYLOAD_REST}, ATTEMPT)


# ---------------------------------------------------------------------------------------
# msgspec (optional)


def msgspec_competitor() -> Optional[Dict[str, Any]]:
    try:
        import msgspec
    except ImportError:
        return None
    from typing import Annotated, Literal

    UInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE)]
    NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]

    class UsageSplit(msgspec.Struct, forbid_unknown_fields=True):
        cache_read: UInt
        cache_write: UInt
        fresh_input: UInt
        output: UInt
        thinking: UInt

    class UsagePayload(msgspec.Struct):  # payload is open; usage is required and closed
        usage: UsageSplit
        model: Optional[str] = None
        turn: Optional[int] = None

    class UsageProgress(msgspec.Struct, omit_defaults=True):
        schema_version: Literal[1]
        type: Literal["task.progress"]
        task_id: NonEmpty
        seq: UInt
        kind: str
        payload: UsagePayload
        attempt: UInt = 0

    class Progress(msgspec.Struct, omit_defaults=True):
        schema_version: Literal[1]
        type: Literal["task.progress"]
        task_id: NonEmpty
        seq: UInt
        kind: str
        payload: Dict[str, Any]
        attempt: UInt = 0

    usage_dec = msgspec.json.Decoder(UsageProgress)
    state_dec = msgspec.json.Decoder(Progress)
    enc = msgspec.json.Encoder()

    def decode_usage(frame: Any) -> Any:
        m = usage_dec.decode(frame)
        if m.kind != "usage":  # this decoder is only for usage frames
            raise ValidationError("kind")
        return m

    def message(seq: int = 0) -> Any:
        return UsageProgress(1, "task.progress", TASK, seq, "usage",
                             UsagePayload(UsageSplit(**USAGE), **PAYLOAD_REST), ATTEMPT)

    return {"version": msgspec.__version__, "decode_usage": decode_usage,
            "decode_state": state_dec.decode, "encode": enc.encode, "message": message,
            "decoders": {"usage": decode_usage, "state": state_dec.decode,
                         "tool": state_dec.decode}}


# ---------------------------------------------------------------------------------------
# Timing


def slice_ns(fn: Callable[[], Any], number: int) -> float:
    """CPU time of this thread for ``number`` calls, in ns per call."""
    start = time.thread_time_ns()
    for _ in range(number):
        fn()
    return (time.thread_time_ns() - start) / number


def interleaved_ns(comp: Dict[str, Tuple[Callable[[], Any], int]],
                   target_s: float) -> Dict[str, float]:
    """ns per operation of each competitor: the median of the five fastest of many short
    slices (~2 ms of CPU each), the competitors taking turns slice by slice so that all of
    them see the same machine load. Time is the thread's CPU time, so time spent
    preempted by other processes on a shared machine is not counted."""
    numbers = {}
    for name, (fn, _) in comp.items():
        number = 1
        while slice_ns(fn, number) * number < 2e6:
            number *= 2
        numbers[name] = number
    rounds = max(9, int(target_s / 0.002 / len(comp)))
    slices: Dict[str, List[float]] = {name: [] for name in comp}
    for _ in range(rounds):
        for name, (fn, _) in comp.items():
            slices[name].append(slice_ns(fn, numbers[name]))
    # The median of the five fastest slices: as robust as the best slice against load, and
    # not fooled by one slice whose CPU time was under-counted.
    return {name: sorted(t)[2] / comp[name][1] for name, t in slices.items()}


def main() -> None:
    t0 = time.perf_counter()
    target_s = 0.3 if QUICK else 1.5
    ms = msgspec_competitor()
    print(f"stapel_runner_protocol {getattr(srp, '__version__', '?')} from "
          f"{srp.__file__}")
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())
    print(f"extension: {'abi3 (stable ABI)' if ABI3 else 'per-version'} "
          f"({os.path.basename(str(srp._native.__file__))})")
    print(f"python {sys.version.split()[0]}; msgspec "
          f"{ms['version'] if ms else 'NOT INSTALLED'}; "
          f"usage frame {len(USAGE_FRAME)} B, state frame {len(STATE_FRAME)} B")
    if ms is None:
        print("  msgspec is not installed, its column is skipped: "
              ".venv/bin/pip install msgspec  (bench-only, not a package dependency)")

    cfg = ConnectionState("hub").config
    window, max_frames, max_bytes = (cfg["inbound_window"], cfg["max_outbox_frames"],
                                     cfg["max_outbox_bytes"])

    # --- sanity: every competitor accepts the frames, yields the same values, rejects the
    # same invalid ones, and encodes to the same JSON value.
    sink: List[Any] = []
    s = srp.decode(USAGE_FRAME, validate=True)
    j = json_decode(USAGE_FRAME)
    assert [s.payload["usage"][k] for k in USAGE_KEYS] == [getattr(j.payload["usage"], k)
                                                            for k in USAGE_KEYS]
    bad_frames = [
        USAGE_FRAME.replace('"thinking":12', '"thinking":-1'),
        USAGE_FRAME.replace('"thinking":12', '"thinking":12,"extra":1'),
        USAGE_FRAME.replace(',"thinking":12', ''),
        USAGE_FRAME.replace('"seq":17', '"seq":true'),
        USAGE_FRAME.replace('"seq":17', '"seq":17.0'),
        USAGE_FRAME.replace('"task_id":"brave-falcon-1042/T-1042"', '"task_id":""'),
        USAGE_FRAME.replace('"schema_version":1', '"schema_version":2'),
        USAGE_FRAME.replace('"attempt":2', '"attempt":9007199254740992'),
        USAGE_FRAME.replace('"usage":{', '"usag":{'),
        STATE_FRAME.replace('"payload":{', '"payload":[{').replace('}}', '}]}'),
    ]
    decoders: List[Tuple[str, Callable[[str], Any]]] = [
        ("srp", lambda f: srp.decode(f, validate=True)), ("json", json_decode)]
    if ms:
        decoders.append(("msgspec", lambda f: (ms["decode_usage"] if '"usage"' in f
                                               else ms["decode_state"])(f)))
    for name, dec in decoders:
        dec(USAGE_FRAME), dec(STATE_FRAME)
        for b in bad_frames:
            try:
                dec(b)
            except Exception:
                continue
            raise AssertionError(f"{name} accepted an invalid frame: {b}")
    want = json.loads(srp.encode(srp.decode(USAGE_FRAME)))
    assert json.loads(json_encode(json_message(17))) == want
    if ms:
        m = ms["decode_usage"](USAGE_FRAME)
        assert m.payload.usage.thinking == 12
        assert json.loads(ms["encode"](ms["message"](17))) == want

    # --- the cases: name -> {competitor: (callable, ops per call)}
    def read_srp(m: Any) -> int:
        u = m.payload["usage"]
        return len(m.task_id) + m.seq + u["cache_read"] + u["cache_write"] + \
            u["fresh_input"] + u["output"] + u["thinking"]

    def read_dc(m: Any) -> int:
        u = m.payload.usage if hasattr(m.payload, "usage") else m.payload["usage"]
        return len(m.task_id) + m.seq + u.cache_read + u.cache_write + u.fresh_input + \
            u.output + u.thinking

    decode = srp.decode
    cases: List[Tuple[str, bool, Dict[str, Tuple[Callable[[], Any], int]]]] = []
    cases.append(("decode usage", True, {
        "srp": (lambda: decode(USAGE_FRAME, validate=True), 1),
        "msgspec": (lambda: ms["decode_usage"](USAGE_FRAME), 1) if ms else None,
        "json": (lambda: json_decode(USAGE_FRAME), 1),
    }))
    cases.append(("decode usage +read", False, {
        "srp": (lambda: read_srp(decode(USAGE_FRAME, validate=True)), 1),
        "msgspec": (lambda: read_dc(ms["decode_usage"](USAGE_FRAME)), 1) if ms else None,
        "json": (lambda: read_dc(json_decode(USAGE_FRAME)), 1),
    }))
    cases.append(("decode state", True, {
        "srp": (lambda: decode(STATE_FRAME, validate=True), 1),
        "msgspec": (lambda: ms["decode_state"](STATE_FRAME), 1) if ms else None,
        "json": (lambda: json_decode(STATE_FRAME), 1),
    }))
    cases.append(("decode state +read", False, {
        "srp": (lambda: len(decode(STATE_FRAME, validate=True).payload["detail"]), 1),
        "msgspec": (lambda: len(ms["decode_state"](STATE_FRAME).payload["detail"]), 1)
        if ms else None,
        "json": (lambda: len(json_decode(STATE_FRAME).payload["detail"]), 1),
    }))
    srp_msg = TaskProgress(task_id=TASK, seq=17, kind="usage", attempt=ATTEMPT,
                           payload={"usage": dict(USAGE), **PAYLOAD_REST})
    dc_msg = json_message(17)
    ms_msg = ms["message"](17) if ms else None
    assert json.loads(srp.encode(srp_msg)) == want
    cases.append(("encode usage", False, {
        "srp": (lambda: srp.encode(srp_msg), 1),
        "msgspec": (lambda: ms["encode"](ms_msg), 1) if ms else None,
        "json": (lambda: json_encode(dc_msg), 1),
    }))

    # Decoded, then encoded again (issue 29): a relay or store passes a received frame on.
    # "re-encode": decode(validate=True) + encode of the fresh message, whose payload was
    # never read (srp may reuse its validated text); "encode decoded": encode alone of a
    # message decoded once (each competitor encodes the same decoded object over and
    # over); "+read": the payload is read between decode and encode (srp then encodes the
    # payload dict, which the reader could have changed). msgspec decodes to its Struct
    # (usage: the closed UsageProgress; state and tool: payload Dict[str, Any]) and
    # encodes it with msgspec.json.Encoder.
    enc_ms = ms["encode"] if ms else None
    relay_frames = [("state", STATE_FRAME), ("tool", TOOL_FRAME), ("usage", USAGE_FRAME)]
    for kind, frame in relay_frames:
        assert srp.encode(decode(frame, validate=True)) == frame
        m_read = decode(frame, validate=True)
        m_read.payload
        assert srp.encode(m_read) == frame
        assert json.loads(json_encode(json_decode(frame))) == json.loads(frame)
        if ms:
            assert json.loads(enc_ms(ms["decoders"][kind](frame))) == json.loads(frame)

    def relay_rows(kind: str, frame: str) -> None:
        dec_ms = ms["decoders"][kind] if ms else None
        srp_once = decode(frame, validate=True)
        ms_once = dec_ms(frame) if ms else None
        dc_once = json_decode(frame)

        def srp_read(f: str) -> Any:
            m = decode(f, validate=True)
            m.payload
            return srp.encode(m)

        def ms_read(f: str) -> Any:
            m = dec_ms(f)
            m.payload
            return enc_ms(m)

        def dc_read(f: str) -> Any:
            m = json_decode(f)
            m.payload
            return json_encode(m)

        cases.append((f"re-encode {kind}", False, {
            "srp": (lambda: srp.encode(decode(frame, validate=True)), 1),
            "msgspec": (lambda: enc_ms(dec_ms(frame)), 1) if ms else None,
            "json": (lambda: json_encode(json_decode(frame)), 1),
        }))
        cases.append((f"encode decoded {kind}", False, {
            "srp": (lambda: srp.encode(srp_once), 1),
            "msgspec": (lambda: enc_ms(ms_once), 1) if ms else None,
            "json": (lambda: json_encode(dc_once), 1),
        }))
        cases.append((f"re-encode {kind} +read", False, {
            "srp": (lambda: srp_read(frame), 1),
            "msgspec": (lambda: ms_read(frame), 1) if ms else None,
            "json": (lambda: dc_read(frame), 1),
        }))

    for kind, frame in relay_frames:
        relay_rows(kind, frame)

    # hub ingest: an in-order stream of N usage frames into a fresh hub state.
    n_ingest = 2000
    frames = [USAGE_FRAME.replace('"seq":17', f'"seq":{i}') for i in range(1, n_ingest + 1)]

    def ingest(dec: Callable[[str], Any], new_state: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            hub = new_state()
            receive = hub.receive
            for f in frames:
                if not receive(dec(f)):
                    raise AssertionError("duplicate")
            return hub
        return run

    def py_state(role: str, enc: Callable[[Any], Any], dec: Callable[[Any], Any]) -> Any:
        return PyConnectionState(role, enc, dec, window, max_frames, max_bytes)

    cases.append(("hub ingest", False, {
        "srp": (ingest(lambda f: decode(f, validate=True), lambda: ConnectionState("hub")),
                n_ingest),
        "msgspec": (ingest(ms["decode_usage"],
                           lambda: py_state("hub", ms["encode"], ms["decode_usage"])),
                    n_ingest) if ms else None,
        "json": (ingest(json_decode, lambda: py_state("hub", json_encode, json_decode)),
                 n_ingest),
    }))

    # emit/receive/replay: cycles of 16 messages, the hub loses the last 4 of each cycle
    # and gets them from runner.replay_for(hub.resume_map()).
    cycles, batch, lost = 125, 16, 4

    def sequencing(make_msg: Callable[[], Any],
                   new_pair: Callable[[], Tuple[Any, Any]]) -> Callable[[], Any]:
        def run() -> Any:
            runner, hub = new_pair()
            emit, receive = runner.emit, hub.receive
            msg = make_msg()
            replayed = 0
            for _ in range(cycles):
                for i in range(batch):
                    m = emit(msg)
                    if i < batch - lost:
                        receive(m)
                for ms_ in runner.replay_for(hub.resume_map()).get(TASK, ()):
                    if not receive(ms_):
                        raise AssertionError("replayed a duplicate")
                    replayed += 1
            if replayed != cycles * lost or hub.resume_map()[TASK] != cycles * batch:
                raise AssertionError((replayed, hub.resume_map()))
            return runner
        return run

    def srp_pair() -> Tuple[Any, Any]:
        return ConnectionState("runner"), ConnectionState("hub")

    def srp_make() -> Any:
        return TaskProgress(task_id=TASK, kind="usage", attempt=ATTEMPT,
                            payload={"usage": dict(USAGE), **PAYLOAD_REST})

    n_seq = cycles * batch
    cases.append(("emit/recv/replay", False, {
        "srp": (sequencing(srp_make, srp_pair), n_seq),
        "msgspec": (sequencing(lambda: ms["message"](0), lambda: (
            py_state("runner", ms["encode"], ms["decode_usage"]),
            py_state("hub", ms["encode"], ms["decode_usage"]))), n_seq) if ms else None,
        "json": (sequencing(lambda: json_message(0), lambda: (
            py_state("runner", json_encode, json_decode),
            py_state("hub", json_encode, json_decode))), n_seq),
    }))

    # Sanity for the sequencing runs: each completes and agrees.
    for _, _, comp in cases[-2:]:
        for c in comp.values():
            if c:
                sink.append(c[0]())

    # --- run and report
    print()
    hdr = (f"{'case':<24}{'srp ns':>9}{'msgspec ns':>12}{'json+dc ns':>12}"
           f"{'srp/msgspec':>13}{'json/srp':>10}  targets")
    print(hdr)
    print("-" * len(hdr))
    all_ok = True
    for name, _, comp in cases:
        if ONLY is not None and ONLY not in name:
            continue
        present = {k: c for k, c in comp.items() if c}
        measured = interleaved_ns(present, target_s)
        t = {k: measured.get(k) for k in comp}
        r_ms = t["srp"] / t["msgspec"] if t["msgspec"] else None
        r_js = t["json"] / t["srp"]
        flags = []
        if r_ms is None:
            flags.append("<=msgspec: n/a")
        elif name.endswith("+read") and name.startswith("re-encode"):
            # Issue 29 asks for this row to be measured and reported, not met.
            flags.append(f"<=msgspec: {'met' if r_ms <= 1.0 else 'missed'} (report only)")
        elif ABI3 and name not in ABI3_TARGETS:
            flags.append(f"<=msgspec: {'met' if r_ms <= 1.0 else 'missed'} (abi3: report only)")
        else:
            ok = r_ms <= 1.0
            all_ok &= ok
            flags.append(f"<=msgspec: {'MET' if ok else 'MISSED'}")
        ok = r_js >= 3.0
        all_ok &= ok
        flags.append(f">=3x json: {'MET' if ok else 'MISSED'}")
        ms_col = f"{t['msgspec']:12.0f}" if t["msgspec"] else f"{'-':>12}"
        r_ms_col = f"{r_ms:13.2f}" if r_ms else f"{'-':>13}"
        print(f"{name:<24}{t['srp']:9.0f}{ms_col}{t['json']:12.0f}{r_ms_col}{r_js:10.2f}  "
              + ", ".join(flags))
    print()
    print("srp/msgspec: srp time / msgspec time (<= 1.00 meets 'at least as fast as "
          "msgspec'); json/srp: json+dataclass time / srp time (>= 3.00 meets '3x json').")
    print("hub ingest and emit/recv/replay are per message (2000 messages per state; "
          "sequencing: 16 emits, 12 receives, 1 resume_map+replay_for of 4 per cycle).")
    print(f"all targets {'MET' if all_ok and ms else 'NOT all met' if ms else 'n/a (no msgspec)'}"
          f"; total {time.perf_counter() - t0:.1f} s")
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())
    if CHECK and not (all_ok and ms):
        sys.exit(1)


if __name__ == "__main__":
    main()
