"""Area ``lease``: the hub's lease timing machine (``store.Lease``) through the public
Python API (see conformance/README.md)."""

from __future__ import annotations

from typing import Any, Dict, List

from conformance_session import _eq, check_config
from stapel_runner_protocol import ConfigError
from stapel_runner_protocol.store import Lease


def run_lease(vector: Dict[str, Any]) -> None:
    try:
        lease = Lease(vector["config"])
    except ConfigError as e:
        if check_config(vector, e):
            return
        raise
    check_config(vector, None)
    now = 0
    for i, step in enumerate(vector["steps"]):
        inp, expect = step["input"], step["expect"]
        now = int(inp.get("now", now))
        if "renewed" in inp:
            lease.renewed(now, inp["renewed"])
        elif "renew_failed" in inp:
            lease.renew_failed(now)
        elif "tick" in inp:
            lease.tick(now)
        elif "start" not in inp:
            raise AssertionError(f"step {i}: unknown input {inp}")
        outputs: List[Any] = []
        while (o := lease.poll_output()) is not None:
            outputs.append(o)
        outputs.append({"timeout": lease.poll_timeout()})
        if "outputs" in expect:
            _eq(f"step {i} outputs", outputs, expect["outputs"])
        if "held" in expect:
            _eq(f"step {i} held", lease.is_held(now), expect["held"])
        if "config" in expect:
            _eq(f"step {i} config", lease.config, expect["config"])
