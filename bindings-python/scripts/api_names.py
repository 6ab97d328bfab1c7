"""Print, as JSON, every public name of the stapel_runner_protocol package importable by
this interpreter and of its public submodules: for each name its kind, and for
callables and classes their parameters (name, kind, whether it has a default) and, for
classes, their public members. Used by scripts/diff-011-api to compare this package with
the published stapel-runner-protocol 0.1.1 (each is dumped by its own interpreter run,
since both import as ``stapel_runner_protocol``)."""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from typing import Any, Dict, List, Optional

MODULES = ["", "errors", "messages", "state", "validation", "usage", "adapters",
           "subprocess_adapter", "agent_sdk_adapter", "transport", "transport_ws"]


def params(obj: Any) -> Optional[List[List[Any]]]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, p.default is not inspect.Parameter.empty]
            for p in sig.parameters.values()]


def describe(obj: Any) -> Dict[str, Any]:
    if inspect.isclass(obj):
        members: Dict[str, Any] = {}
        for name in dir(obj):
            if name.startswith("_") or (issubclass(obj, BaseException)
                                        and hasattr(BaseException, name)):
                continue
            try:
                attr = getattr(obj, name)
            except Exception:
                continue
            members[name] = {"kind": "method", "params": params(attr)} if callable(attr) \
                else {"kind": "attribute"}
        return {"kind": "class", "params": params(obj), "members": members,
                "bases": [b.__name__ for b in obj.__mro__[1:]]}
    if callable(obj):
        return {"kind": "function", "params": params(obj)}
    if inspect.ismodule(obj):
        return {"kind": "module"}
    return {"kind": "value", "type": type(obj).__name__}


def main() -> None:
    probes: Dict[str, Any] = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else {}
    out: Dict[str, Dict[str, Any]] = {}
    for m in MODULES:
        name = "stapel_runner_protocol" + ("." + m if m else "")
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            out[m or "<package>"] = {"<import error>": {"kind": str(e)}}
            continue
        explicit = list(getattr(mod, "__all__", None) or [])
        # Names another dump lists for this module are looked up too (a lazy module
        # `__getattr__` does not show them in `dir()`).
        probe = [n for n in probes.get(m or "<package>", {}) if hasattr(mod, n)]
        entries: Dict[str, Any] = {}
        for n in sorted(set(explicit) | set(probe) | {n for n in dir(mod)
                                                       if not n.startswith("_")}):
            try:
                v = getattr(mod, n)
            except Exception as e:  # a lazy name that cannot load
                entries[n] = {"kind": f"error: {e}"}
                continue
            origin = getattr(v, "__module__", "") or ""
            # Names a module merely imports from the standard library or typing are not
            # its API (0.1.1's `Any`, `Path`, `lru_cache`, `annotations`, ...).
            if inspect.ismodule(v) and not v.__name__.startswith("stapel"):
                continue
            if not inspect.ismodule(v) and not origin.startswith("stapel") \
                    and n not in explicit:
                continue
            if n == "annotations":
                continue
            entries[n] = describe(v)
        out[m or "<package>"] = entries
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
