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
