"""Shared test helpers: where the repository's conformance folder is, and strict JSON
comparison (a JSON boolean never equals a number)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

HERE = Path(__file__).resolve().parent


def conformance_dir() -> Path:
    """``$STAPEL_CONFORMANCE_DIR`` or the repository's ``conformance/`` folder."""
    env = os.environ.get("STAPEL_CONFORMANCE_DIR")
    return Path(env) if env else HERE.parent.parent / "conformance"


def json_equal(a: Any, b: Any) -> bool:
    """Compare two JSON values: object key order does not matter, numbers compare by
    value, booleans are not numbers, arrays compare in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and bool(a == b)


#: Results of the conformance run, filled by test_conformance.py and printed at the end.
CONFORMANCE: Dict[str, List[str]] = {"passed": [], "failed": [], "unsupported": []}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    passed, failed, unsupported = (
        CONFORMANCE["passed"],
        CONFORMANCE["failed"],
        CONFORMANCE["unsupported"],
    )
    if not (passed or failed or unsupported):
        return

    def areas(paths: List[str]) -> str:
        return ", ".join(sorted({p.split("/")[0] for p in paths})) or "none"

    write = terminalreporter.write_line
    write(f"conformance[python]: {len(passed)} vectors passed (areas: {areas(passed)})")
    if failed:
        write(f"conformance[python]: {len(failed)} vectors FAILED (areas: {areas(failed)})")
    if unsupported:
        write(
            f"conformance[python]: {len(unsupported)} vectors not yet supported "
            f"(areas: {areas(unsupported)})"
        )


@pytest.fixture(autouse=True)
def _doctest_fixtures(doctest_namespace: Dict[str, Any]) -> None:
    """``fixtures_dir`` for the doctest files (the seed README's adapter example)."""
    doctest_namespace["fixtures_dir"] = str(HERE / "fixtures")


@pytest.fixture
def vectors_root() -> Path:
    return conformance_dir() / "vectors"
