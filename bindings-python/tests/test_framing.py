"""Unit tests of LineFramer."""

from __future__ import annotations

import doctest

import pytest

import stapel_runner_protocol.framing
from stapel_runner_protocol import LineError, LineFramer, ProtocolStateError


def test_lines_crlf_and_final_line() -> None:
    f = LineFramer()
    f.push(b'{"a":1}\r\n\n{"b":')
    assert f.ready == 1 and f.buffered_bytes == 5
    assert f.poll() == '{"a":1}'
    assert f.poll() is None
    f.push("2}")
    f.finish()
    assert f.finished
    assert f.drain() == ['{"b":2}']
    f.finish()  # idempotent
    with pytest.raises(ProtocolStateError) as info:
        f.push(b"x")
    assert info.value.code == "push_after_finish"


def test_bounds_and_errors() -> None:
    f = LineFramer(4, skip_empty_lines=False)
    assert (f.max_line_bytes, f.skip_empty_lines) == (4, False)
    f.push(b"abcd\nabcde\n\n\xff\nok\n")
    assert list(f) == [
        "abcd",
        LineError("line_too_long", 2),
        "",
        LineError("invalid_utf8", 4),
        "ok",
    ]
    err = LineError("line_too_long", 2)
    assert (err.code, err.line_number) == ("line_too_long", 2)
    with pytest.raises(TypeError):
        LineError("nope", 1)
    with pytest.raises(TypeError):
        f.push(1)  # type: ignore[arg-type]


def test_module_doctest() -> None:
    result = doctest.testmod(stapel_runner_protocol.framing)
    assert result.attempted > 0 and result.failed == 0


def test_bounded_queue_and_push_all() -> None:
    f = LineFramer(max_ready_lines=2, max_ready_bytes=100)
    assert (f.max_ready_lines, f.max_ready_bytes) == (2, 100)
    data = b"a\nbb\nccc\n"
    taken = f.push(data)
    assert taken == 5 and f.full and f.ready == 2 and f.ready_bytes == 3
    assert f.push(data[taken:]) == 0  # a full queue takes nothing
    assert f.drain() == ["a", "bb"] and not f.full and f.ready_bytes == 0
    assert f.push(data[taken:]) == 4
    # push_all returns what was waiting, then everything the input holds.
    assert f.push_all("d\ne\nf\n") == ["ccc", "d", "e", "f"]
    assert f.ready == 0
    assert LineFramer().max_ready_lines == 1024 and LineFramer().max_ready_bytes == 1 << 20
    f.finish()
    with pytest.raises(ProtocolStateError) as info:
        f.push_all(b"x\n")
    assert info.value.code == "push_after_finish"
