"""The core's store decisions through the Python API: rows, takeover, writes, lease,
errors (the PostgreSQL store itself is tested in test_pg_*.py)."""

from __future__ import annotations

import doctest

import pytest

import stapel_runner_protocol.store
from stapel_runner_protocol import (ConfigError, FencedError, RunnerProtocolError, StoreError,
                                    TaskCancel)
from stapel_runner_protocol.link import HubLink
from stapel_runner_protocol.session import HubSession
from stapel_runner_protocol.store import Lease, RowTracker, close_for

HELLO = ('{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p",'
         '"runner_version":"1"}')


def test_store_module_doctest() -> None:
    result = doctest.testmod(stapel_runner_protocol.store)
    assert result.attempted > 0 and result.failed == 0


def test_invalid_rows_raise_store_error_with_its_code() -> None:
    with pytest.raises(StoreError) as e:
        HubSession.from_rows({"tasks": [], "commands": [
            {"task_id": "T-1", "seq": 1, "frame": "{}"}]})
    assert e.value.code == "invalid_rows"
    assert isinstance(e.value, RunnerProtocolError) and not isinstance(e.value, FencedError)
    with pytest.raises(StoreError):
        HubLink(rows={"tasks": "nope"})
    with pytest.raises(TypeError):
        HubLink(rows={}, state=HubSession().state)


def test_rows_survive_a_reconnect_and_a_takeover() -> None:
    hub = HubSession(durable_acks=True)
    hub.connected(0)
    hub.frame(1, HELLO)
    hub.send(2, TaskCancel(task_id="T-1", reason="stop"))
    hub.frame(3, '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,'
                 '"kind":"state","attempt":1,"payload":{"s":1}}')
    hub.drain_outputs()
    hub.confirm(4, "T-1", 1, 1)
    hub.disconnected(5)
    hub.connected(6)
    hub.frame(7, HELLO)
    hub.drain_outputs()
    rows = hub.rows()
    assert rows["inbound"] == [{"task_id": "T-1", "attempt": 1, "through": 1}]
    assert [c["seq"] for c in rows["commands"]] == [1]
    link = HubLink({"session": {"durable_acks": True}}, rows=rows)
    assert link.rows() == rows
    tracker = RowTracker(rows)
    assert tracker.writes(link) == []


def test_lease_and_close_policy() -> None:
    lease = Lease({"lease_ms": 1000, "renew_every_ms": 300, "margin_ms": 200})
    assert lease.poll_output() == "renew" and lease.poll_output() is None
    lease.renewed(10, 0)
    assert lease.is_held(10) and lease.poll_timeout() == 300
    lease.tick(800)
    # The renewal due at 300 was never started: it is asked for too.
    assert [lease.poll_output(), lease.poll_output()] == ["expiring", "renew"]
    with pytest.raises(ConfigError) as e:
        Lease({"renew_every_ms": 9000})
    assert (e.value.code, e.value.key) == ("out_of_range", "renew_every_ms")
    assert close_for("fenced") == (1012, "fenced")
    assert close_for("anything else") == (1012, "store_unavailable")
