"""Area ``reducer``: SessionReducer through the public Python API (see
conformance/README.md)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from conftest import json_equal
from stapel_runner_protocol.errors import ConfigError, ReducerError
from conformance_session import check_config
from stapel_runner_protocol.reducer import SessionReducer


def _eq(what: str, got: Any, want: Any) -> None:
    assert json_equal(got, want), f"{what}: got {got!r}, want {want!r}"


def _pointer(doc: Any, ptr: str) -> Any:
    for part in ptr.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def run_reducer(vector: Dict[str, Any]) -> None:
    config = vector.get("config", {})
    try:
        reducer = SessionReducer(config)
    except ConfigError as e:  # a refused config (the core's code and key on it)
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    # Every event the live steps fed, in order (a ``line`` parsed from its text).
    recorded: List[Any] = []
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step.get("expect", {})
        assert expect, f"step {i}: expect checks nothing"
        outcome: Optional[str] = None
        error: Optional[str] = None
        detail: Optional[str] = None
        equals_live: Optional[bool] = None
        try:
            if "event" in inp:
                recorded.append(inp["event"])
                outcome = reducer.apply(inp["event"])
            elif "line" in inp:
                try:
                    recorded.append(json.loads(inp["line"]))
                except ValueError:
                    pass
                outcome = reducer.apply_line(inp["line"])
            elif "replay" in inp:
                events = recorded if inp["replay"] == "recorded" else inp["replay"]
                assert isinstance(events, list), f"step {i}: replay must be a list or 'recorded'"
                # A replay that rejects an event raises (the step's error); else the public
                # replay is compared with the live fold.
                strict = SessionReducer(config)
                for event in events:
                    strict.apply(event)
                replayed = SessionReducer.replay(events, config)
                assert json_equal(replayed, strict.snapshot()), f"step {i}: replay differs"
                equals_live = json_equal(replayed, reducer.snapshot())
            else:
                raise AssertionError(f"step {i}: unknown input {inp}")
        except ReducerError as e:
            error, detail = e.code, e.detail_code
        _eq(f"step {i} error", error, expect.get("error"))
        if "error_detail" in expect:
            _eq(f"step {i} error_detail", detail, expect["error_detail"])
        if "outcome" in expect:
            _eq(f"step {i} outcome", outcome, expect["outcome"])
        if "equals_live" in expect:
            _eq(f"step {i} equals_live", equals_live, expect["equals_live"])
        snapshot = reducer.snapshot()
        if "snapshot" in expect:
            _eq(f"step {i} snapshot", snapshot, expect["snapshot"])
        for ptr, want in expect.get("at", {}).items():
            _eq(f"step {i} snapshot {ptr}", _pointer(snapshot, ptr), want)
        if "delivery" in expect:
            _eq(f"step {i} delivery", reducer.delivery(), expect["delivery"])
