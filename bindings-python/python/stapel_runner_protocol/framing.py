"""The bounded JSONL line framer (the Rust core's ``LineFramer``).

>>> framer = LineFramer(max_line_bytes=8)
>>> framer.push(b'{"a":1}\\r\\nxxxxxxxxxxxx\\n{"b"')
26
>>> list(framer)
['{"a":1}', LineError(code='line_too_long', line_number=2)]
>>> framer.push(b':2}')
3
>>> framer.finish()
>>> framer.drain()
['{"b":2}']

Lines wait in a bounded queue (``max_ready_lines``, default 1024; no new line starts
once the waiting lines hold ``max_ready_bytes``, default 1 MiB). ``push`` returns how many
bytes it took: all of them unless the queue filled up; then pull and push the rest.
``push_all`` does that loop and returns every item:

>>> small = LineFramer(max_ready_lines=1)
>>> small.push(b"a\\nb\\n")
2
>>> small.push_all(b"b\\nc\\n")
['a', 'b', 'c']

A line is the bytes before ``\\n`` (one ``\\r`` right before it is removed); a line longer
than ``max_line_bytes`` yields one ``LineError("line_too_long")`` and framing resumes
after its ``\\n``; a line that is not UTF-8 yields ``LineError("invalid_utf8")``. Line
numbers are 1-based and count skipped empty lines.
"""

from __future__ import annotations

from ._native import DEFAULT_MAX_LINE_BYTES, LineError, LineFramer

__all__ = ["LineFramer", "LineError", "DEFAULT_MAX_LINE_BYTES"]
