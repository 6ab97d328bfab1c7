"""Area ``errors``: the core's one error table through the public Python API
(``stapel_runner_protocol.errors``: ``error_class`` and the classes themselves, see
conformance/README.md, "Area ``errors``")."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from conftest import json_equal
from stapel_runner_protocol import errors


def _parent(name: str) -> Optional[str]:
    """The table parent of the Python class ``name``: its first base (later bases are
    the documented 0.1.1 compatibility bases)."""
    cls = getattr(errors, name)
    base = cls.__bases__[0]
    return None if base is Exception else base.__name__


def run_errors(vector: Dict[str, Any]) -> None:
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step["expect"]
        if "class_of" in inp:
            q = inp["class_of"]
            got = errors.error_class(q["kind"], q["code"])
            assert got == expect["class"], f"step {i}: {q} -> {got}, want {expect['class']}"
            # The class exists, and class_for finds it.
            assert errors.class_for(q["kind"], q["code"]).__name__ == got
        elif "classes" in inp:
            # The package's classes, as Python sees them (not only the table the native
            # module reports): names in order, and each one's parent.
            built: List[Dict[str, Any]] = [{"name": name, "parent": _parent(name)}
                                           for name, _ in errors.ERROR_CLASSES]
            assert json_equal(built, expect["classes"]), f"step {i}: classes {built}"
            assert json_equal([{"name": n, "parent": p} for n, p in errors.ERROR_CLASSES],
                              expect["classes"])
        else:
            raise AssertionError(f"step {i}: unknown input {inp}")
