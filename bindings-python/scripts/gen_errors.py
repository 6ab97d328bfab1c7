#!/usr/bin/env python3
"""Generate ``stapel_runner_protocol/errors.py`` from the core's error table.

The core names every exception class once (``core/src/errors.rs``: ``ERROR_CLASSES`` —
name, parent, doc —, and ``error_class(kind, code)``, the class of each core error). The
Python classes are generated from that table, so their names, hierarchy and docs cannot
drift from Node's and Kotlin's; ``errors.py`` stays pure Python (catching an error needs
no native code). The table is read through the installed native module
(``_native.error_table()``, the core's ``errors::table_value()``)::

    python bindings-python/scripts/gen_errors.py           # rewrite errors.py
    python bindings-python/scripts/gen_errors.py --check   # exit 1 (with a diff) if stale
    python bindings-python/scripts/gen_errors.py --stdout  # print instead of writing

(with the package installed: ``bindings-python/.venv/bin/python``; ``tests/test_errors.py``
runs the check). What the table does not say lives here, per class: the extra attributes
a class carries (``SchemaValidationError.violations``, ``AdapterError.line_number``, …)
and the extra bases 0.1.1 compatibility forces (:data:`COMPAT_BASES`).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Tuple

TARGET = Path(__file__).resolve().parent.parent / "python" / "stapel_runner_protocol" / "errors.py"

#: Extra Python bases of a class, after its table parent: the exceptions to the one
#: table that 0.1.1 compatibility forces (each with its reason, also in the README).
COMPAT_BASES: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "ConfigError": (("ValueError", "a session's refused configuration raised ValueError "
                                   "before the core had one config reader; code catching "
                                   "ValueError keeps working"),),
}

#: Class bodies beyond the docstring (attributes and ``__init__``), by class name.
BODIES: Dict[str, str] = {
    "RunnerProtocolError": '''
code: Optional[str]

def __init__(self, message: str = "", *, code: Optional[str] = None) -> None:
    super().__init__(message)
    self.code = code
''',
    "SchemaValidationError": '''
violations: List[Violation]
errors: List[str]

def __init__(
    self,
    message: str = "",
    errors: Optional[List[str]] = None,
    *,
    violations: Optional[Sequence[Violation]] = None,
    code: Optional[str] = "schema_violation",
) -> None:
    super().__init__(message, code=code)
    self.violations = list(violations or [])
    if errors is None:
        errors = [
            f"{v.location or '<root>'}: {v.message} ({v.rule})" for v in self.violations
        ]
    self.errors = errors
''',
    "UnknownMessageError": '''
def __init__(self, message: str = "", *, code: Optional[str] = "unknown_type") -> None:
    super().__init__(message, code=code)
''',
    "ConfigError": '''
key: Optional[str]

def __init__(self, message: str = "", *, code: Optional[str] = None,
             key: Optional[str] = None) -> None:
    super().__init__(message, code=code)
    self.key = key
''',
    "AdapterError": '''
line_number: Optional[int]
details: Dict[str, Any]

def __init__(
    self,
    message: str = "",
    *,
    code: Optional[str] = None,
    line_number: Optional[int] = None,
    details: Optional[Dict[str, Any]] = None,
) -> None:
    super().__init__(message, code=code)
    self.line_number = line_number
    self.details = dict(details) if details is not None else {
        "code": code,
        "line_number": line_number,
    }
''',
    "ReducerError": '''
detail_code: Optional[str]

def __init__(
    self, message: str = "", *, code: Optional[str] = None, detail_code: Optional[str] = None
) -> None:
    super().__init__(message, code=code)
    self.detail_code = detail_code
''',
    "ContractError": '''
model: Optional[str]
field: Optional[str]

def __init__(
    self,
    message: str = "",
    *,
    code: Optional[str] = None,
    model: Optional[str] = None,
    field: Optional[str] = None,
) -> None:
    super().__init__(message, code=code)
    self.model = model
    self.field = field
''',
    "ResolutionRefused": '''
reasons: List[str]

def __init__(
    self, message: str = "", *, code: Optional[str] = None, reasons: Optional[List[str]] = None
) -> None:
    super().__init__(message, code=code)
    self.reasons = list(reasons or [])
''',
    "TransportError": '''
status: Optional[int]
detail: str

def __init__(self, message: str = "", *, code: Optional[str] = None,
             status: Optional[int] = None) -> None:
    super().__init__(message, code=code)
    self.detail = message
    self.status = status
''',
}

#: What a class's attributes mean (appended to the table's doc).
NOTES: Dict[str, str] = {
    "RunnerProtocolError": "``code`` is the core's stable snake_case code (``None`` when "
                           "raised without one).",
    "SchemaValidationError": "``violations`` lists every broken rule (sorted by location); "
                             "``errors`` holds one human-readable line per violation "
                             "(``\"location: message (rule)\"``).",
    "ConfigError": "``key`` names the offending key, dotted when nested "
                   "(``session.max_held_frames``).",
    "AdapterError": "``line_number`` is the harness stdout line the error is about (or "
                    "``None``), ``details`` the core's JSON form (``code``, "
                    "``line_number``, and ``message`` for ``harness_error``).",
    "ReducerError": "``detail_code`` names the inner cause, when there is one; the "
                    "snapshot is unchanged.",
    "ContractError": "``model`` and ``field`` locate an invalid model (``None`` for gateway "
                     "misuse).",
    "ResolutionRefused": "``reasons``: every reason code of the refusal kind, sorted.",
    "TransportError": "``status`` is the HTTP status of a refused upgrade; ``detail`` the "
                      "link's human-readable detail (never a secret).",
    "PanicError": "PyO3's own ``PanicException`` (a ``BaseException``) is what a panic "
                  "outside a guarded call raises; the links raise this class.",
}

HEADER = '''\
# GENERATED FILE - DO NOT EDIT. Generated by bindings-python/scripts/gen_errors.py from
# the core's error table (core/src/errors.rs, `errors::table_value()`). Regenerate after
# changing the table: bindings-python/.venv/bin/python bindings-python/scripts/gen_errors.py
'''

PREAMBLE = '''
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

'''

VIOLATION = '''

class Violation(NamedTuple):
    """One broken schema rule.

    ``location`` is a slash-separated path from the frame's root without a leading slash
    (``payload/usage/thinking``, ``task/criteria/0/id``; ``""`` is the frame itself);
    ``rule`` a stable code (``required``, ``type``, ``const``, ``min_length``,
    ``minimum``, ``range``, ``additional_property``, ``mismatch``); ``message`` a
    human-readable explanation (not stable).
    """

    location: str
    rule: str
    message: str = ""
'''

LOOKUP = '''

def error_class(kind: str, code: str) -> str:
    """The class name the core's table gives an error of ``kind`` (``decode``,
    ``session``, ``link``, …) with ``code`` (the core's ``errors::error_class``; loads the
    native extension)."""
    from ._native import error_class as native

    name: str = native(kind, code)
    return name


def class_for(kind: str, code: str) -> "type[RunnerProtocolError]":
    """The class :func:`error_class` names."""
    cls: "type[RunnerProtocolError]" = globals()[error_class(kind, code)]
    return cls
'''


def _wrap(text: str, indent: str) -> List[str]:
    return textwrap.wrap(text, width=88 - len(indent), break_on_hyphens=False,
                         break_long_words=False) or [""]


def _tree(classes: List[Dict[str, Any]]) -> List[str]:
    """The hierarchy as an indented tree (for the module docstring)."""
    children: Dict[Any, List[str]] = {}
    for c in classes:
        children.setdefault(c["parent"], []).append(c["name"])
    lines: List[str] = []

    def walk(name: str, prefix: str, last: bool, top: bool) -> None:
        extra = "".join(f", {b}" for b, _ in COMPAT_BASES.get(name, ()))
        label = name + (f"  (also {extra[2:]})" if extra else "")
        lines.append(label if top else prefix + ("└── " if last else "├── ") + label)
        kids = children.get(name, [])
        for i, kid in enumerate(kids):
            walk(kid, "" if top else prefix + ("    " if last else "│   "),
                 i == len(kids) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return lines


def render(table: Dict[str, Any]) -> str:
    classes: List[Dict[str, Any]] = table["classes"]
    names = [c["name"] for c in classes]
    unknown = (set(BODIES) | set(NOTES) | set(COMPAT_BASES)) - set(names)
    if unknown:
        raise SystemExit(f"gen_errors: classes not in the core's table: {sorted(unknown)}")
    out: List[str] = [HEADER]
    doc = [
        '"""Exception classes of stapel-runner-protocol, built from the core\'s one error',
        "table (every binding has the same classes, and the same core error is the same",
        "class with the same ``code`` in every language).",
        "",
        "Pure Python and dependency-free, so callers can catch the package's errors without",
        "loading the native extension. :func:`error_class` gives the class name of a core",
        "error of a *kind* and *code* (the core's ``errors::error_class``).",
        "",
        "Hierarchy::",
        "",
    ]
    doc += ["    " + line for line in _tree(classes)]
    doc += [
        "",
        "Exceptions 0.1.1 compatibility forces (extra bases):",
        "",
    ]
    for name, bases in COMPAT_BASES.items():
        for base, why in bases:
            doc += textwrap.wrap(f"* ``{name}`` is also a ``{base}``: {why}.", width=88,
                                 subsequent_indent="  ", break_on_hyphens=False)
    doc.append('"""')
    out.append("\n".join(doc) + "\n")
    out.append(PREAMBLE)
    exported = ["Violation"] + names + ["ERROR_CLASSES", "error_class", "class_for"]
    out.append("__all__ = [\n" + "".join(f'    "{n}",\n' for n in exported) + "]\n")
    out.append(VIOLATION)
    for c in classes:
        name, parent = c["name"], c["parent"]
        bases = [parent or "Exception"] + [b for b, _ in COMPAT_BASES.get(name, ())]
        lines = ["", "", f"class {name}({', '.join(bases)}):"]
        text = c["doc"] + (" " + NOTES[name] if name in NOTES else "")
        wrapped = _wrap(text, "    ")
        if len(wrapped) == 1 and len(wrapped[0]) <= 78:
            lines.append(f'    """{wrapped[0]}"""')
        else:
            lines.append('    """' + wrapped[0])
            lines += ["    " + w for w in wrapped[1:]]
            lines.append('    """')
        body = BODIES.get(name)
        if body:
            lines.append("")
            lines += [("    " + line) if line else "" for line in body.strip("\n").split("\n")]
        out.append("\n".join(lines) + "\n")
    pairs = "".join(f'    ("{c["name"]}", {repr(c["parent"]) if c["parent"] else "None"}),\n'
                    .replace("'", '"') for c in classes)
    out.append("\n\n#: Every class of the core's table as ``(name, parent)``, parents first.\n"
               "ERROR_CLASSES: Tuple[Tuple[str, Optional[str]], ...] = (\n" + pairs + ")\n")
    out.append(LOOKUP)
    return "".join(out)


def table() -> Dict[str, Any]:
    from stapel_runner_protocol._native import error_table

    t: Dict[str, Any] = error_table()
    return t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if errors.py is stale")
    p.add_argument("--stdout", action="store_true", help="print instead of writing")
    a = p.parse_args()
    text = render(table())
    if a.stdout:
        sys.stdout.write(text)
        return 0
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if a.check:
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), str(TARGET), "generated"))
            return 1
        return 0
    if current != text:
        TARGET.write_text(text, encoding="utf-8")
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
