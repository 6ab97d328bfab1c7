"""The direct builder of a fast-decoded payload (JSON text the core validated, built into
Python objects in one pass on first read) against the full decode, which builds the
payload from the core's own JSON values: same objects, same types (``int`` vs ``float``,
``-0``), same key order, for every JSON shape — including whitespace between tokens,
escaped keys and the deepest nesting the core accepts.
"""

from __future__ import annotations

from typing import Any, List

import pytest

import stapel_runner_protocol as srp


def progress(payload: str) -> str:
    return ('{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,'
            f'"kind":"state","attempt":1,"payload":{payload}}}')


def decode(frame: str) -> Any:
    """``srp.decode(validate=True)``, typed ``Any`` for these tests."""
    return srp.decode(frame, validate=True)


def full(frame: str) -> Any:
    """The same frame through the full decode (an unknown top-level field makes the fast
    path refuse it)."""
    return decode(frame.replace('"seq":3,', '"seq":3,"zz_full_path":0,', 1))


def typed(v: Any) -> Any:
    """`v` with every value tagged by its exact type, and dict key order kept."""
    if isinstance(v, dict):
        return ("dict", [(k, typed(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [typed(x) for x in v])
    return (type(v).__name__, repr(v))


PAYLOADS: List[str] = [
    ' { "a" : 1 ,\n\t"b" :\r [ 1 , 2 ] , "c" : { } , "d" : [ ] } ',
    '{"k\\"ey":1,"\\u00e9t\\u00e9":2,"tab\\tkey":{"\\ud83d\\ude00":"\\\\"}}',
    '{"n":[0,-0,-0.0,0.0,1.0,1e0,-1e-7,123456789012345678901234567890,'
    '-9223372036854775809,9223372036854775807,18446744073709551615]}',
    '{"s":["","a","\\"","x\\u0000y","' + "long " * 40 + '"]}',
    '{"mixed":[null,true,false,{"x":[{"y":null}]}],"last":"z"}',
    '{"d":' + '[' * 120 + ']' * 120 + '}',
    '{"d":' + '{"a":' * 120 + '1' + '}' * 120 + '}',
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_direct_builder_matches_the_full_decode(payload: str) -> None:
    f = progress(payload)
    fast, slow = decode(f), full(f)
    assert typed(fast.payload) == typed(slow.payload)


def test_many_distinct_keys_and_values_pass_through_the_caches() -> None:
    items = ",".join(f'"key{i}":"value{i % 7}"' for i in range(2000))
    f = progress("{" + items + "}")
    fast, slow = decode(f), full(f)
    assert typed(fast.payload) == typed(slow.payload)
    assert list(fast.payload)[1999] == "key1999"


# --- the shaped path (src/shape.rs): learned layouts, dicts copied from a template ------

import gc
import random
import sys

from stapel_runner_protocol import _native


def is_abi3_build() -> bool:
    """The extension is the stable-ABI build (one ``cp311-abi3`` file for every CPython
    >= 3.11, maturin's ``--features abi3``): its file name says so."""
    return str(_native.__file__).endswith(".abi3.so")


def test_the_copy_path_is_on_for_the_supported_interpreters() -> None:
    # The per-version build writes CPython's private dict layout only on the versions it
    # was written and tested for; the abi3 build never does.
    decode(progress('{"a":1}'))
    tested = (3, 11) <= sys.version_info[:2] < (3, 14)
    assert _native._payload_copy_enabled() == (tested and not is_abi3_build())


def _shaped_payloads(rng: random.Random) -> List[str]:
    """Payloads sharing a few layouts, with varied values (escapes, floats, big and
    negative integers, nested containers, whitespace), and near-misses of each layout
    (a member more, one less, another order, another nested layout)."""
    def val() -> str:
        return rng.choice([
            str(rng.randrange(0, 10**rng.randrange(1, 22))), "-7", "1.5", "1e3", "0",
            '"running"', '"a\\"b"', '"\\u00e9t\\u00e9"', "null", "true", "false",
            "[1,2]", '{"x":1}', "[]", "{}", '"' + "long " * 12 + '"',
        ])
    out = []
    for _ in range(400):
        layout = rng.randrange(6)
        if layout == 0:
            u = ",".join(f'"{k}":{rng.randrange(0, 2**53)}' for k in
                         ("cache_read", "cache_write", "fresh_input", "output", "thinking"))
            out.append('{"usage":{' + u + '},"model":' + val() + ',"turn":' + val() + '}')
        elif layout == 1:
            out.append('{"state":' + val() + ',"detail":' + val() + '}')
        elif layout == 2:
            out.append('{"state":' + val() + '}')
        elif layout == 3:
            out.append('{"usage":{"output":' + val() + '},"model":' + val() + '}')
        elif layout == 4:
            out.append('{ "state" : ' + val() + ' , "detail" :' + val() + ' }')
        else:
            out.append('{"detail":' + val() + ',"state":' + val() + ',"extra":' + val() + '}')
    return out


def test_shaped_payloads_match_the_full_decode() -> None:
    _native._payload_shapes_reset()
    rng = random.Random(1313)
    for payload in _shaped_payloads(rng):
        f = progress(payload)
        fast, slow = decode(f), full(f)
        assert typed(fast.payload) == typed(slow.payload), payload


def test_shaped_dicts_are_ordinary_dicts() -> None:
    _native._payload_shapes_reset()
    f = progress('{"usage":{"cache_read":1,"cache_write":2,"fresh_input":3,"output":4,'
                 '"thinking":5},"model":"m","turn":3}')
    payloads = [decode(f).payload for _ in range(5)]  # learned on the second, copied after
    p = payloads[-1]
    assert p == payloads[0] and type(p) is dict and type(p["usage"]) is dict
    assert p is not payloads[-2] and p["usage"] is not payloads[-2]["usage"]
    # Tracked by the cycle collector as CPython tracks a dict holding a dict; the inner
    # one, holding only atoms, is not.
    assert gc.is_tracked(p) and not gc.is_tracked(p["usage"])
    p["usage"]["new"] = 6
    p["model"] = "other"
    del p["turn"]
    assert list(p) == ["usage", "model"] and list(p["usage"])[-1] == "new"
    again = decode(f).payload
    assert again == payloads[0]  # the template was not touched
    # A cycle through a copied dict is collected.
    cyc = decode(f).payload
    cyc["self"] = cyc
    del cyc
    gc.collect()
    assert decode(f).payload == payloads[0]
