"""The TypedDict shapes: user code written against them type-checks (mypy --strict runs
on this file) and they name exactly the keys the core returns. (``_types.py`` is generated
from conformance/schema/api/; test_api_schemas.py checks it is up to date.)"""

from __future__ import annotations

from typing import Any, List, Mapping, Set, Tuple

from stapel_runner_protocol import _types, contract
from stapel_runner_protocol.contract import (
    CreateSandboxAction,
    ExecutionEvidence,
    GatewayMachine,
    GatewayOutput,
    HarnessProfile,
    Resolution,
    parse_catalog,
    parse_model,
    resolve,
)
from stapel_runner_protocol.local import LocalConfig, LocalRun, SpawnAction
from stapel_runner_protocol.reducer import (
    CanonicalEvent,
    DeliveryReport,
    ReducerSnapshot,
    SessionReducer,
)
from stapel_runner_protocol.state import ConnectionState, SequencingConfig

CATALOG: contract.Catalog = {
    "profiles": [{"contract_version": "1.0", "profile_id": "coder", "rein": "r", "model": "m",
                  "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["t"]}}],
    "reins": [{"rein_id": "r", "contract_version": "1.0"}],
}


def keys(shape: Any) -> Set[str]:
    """Every key a TypedDict declares (required and optional)."""
    return set(shape.__required_keys__) | set(shape.__optional_keys__)


def test_contract_shapes() -> None:
    assert parse_catalog(CATALOG) == {"profiles": 1, "reins": 1}
    resolution: Resolution = resolve("coder", CATALOG)
    profile: HarnessProfile = resolution["profile"]
    assert set(profile) == keys(HarnessProfile) and profile["enabled"] is True
    assert set(resolution["rein"]) == keys(contract.ReinDescriptor)
    assert parse_model("ToolCall", {"name": "t"})["name"] == "t"

    machine = GatewayMachine(CATALOG)
    machine.handle_input(0, {"type": "execute", "request": {
        "harness_profile_ref": "coder", "repository": "r", "title": "t", "description": "d"}})
    outputs: List[GatewayOutput] = machine.drain()
    first = outputs[0]
    assert first["type"] == "create_sandbox"
    action: CreateSandboxAction = first
    assert set(action) == keys(CreateSandboxAction)
    machine.handle_input(1, {"type": "sandbox_create_failed", "message": None})
    last = machine.drain()[-1]
    assert last["type"] == "result"
    evidence: ExecutionEvidence = last["result"]["evidence"]
    assert set(evidence) == keys(ExecutionEvidence)
    assert set(evidence["tool_calls"]) == keys(contract.ToolCallCounts)
    assert evidence["failure_stage"] == "sandbox_create" and machine.finished


def test_local_and_reducer_shapes() -> None:
    config: LocalConfig = {"harness_program": "fake-harness", "harness_args": ["--x"],
                           "harness_env": {"PATH": "/bin", "SECRET": "s"},
                           "env_allow": ["PATH"]}
    run = LocalRun(config)
    run.controller_bytes(0, b'{"schema":"paperclip.prp.command.v1","commandId":"c1",'
                            b'"controllerSeq":1,"type":"run.prepare",'
                            b'"issuedAt":"2026-01-01T00:00:00.000Z","payload":{}}\n')
    spawns: List[SpawnAction] = []
    for output in run.drain_outputs():
        if output[0] == "spawn":
            spawns.append(output[1])
    assert [set(s) for s in spawns] == [keys(SpawnAction)]
    assert (spawns[0]["program"], spawns[0]["args"]) == ("fake-harness", ["--x"])
    env: List[Tuple[str, str]] = spawns[0]["env"]  # (name, value) pairs, not a dict
    assert env == [("PATH", "/bin")]

    event: CanonicalEvent = {
        "schema": "paperclip.prp.event.v1", "schemaVersion": 1, "sourceEventId": "e_1",
        "sourceSeq": 1, "sourceInstanceId": "runner_local", "sourceKind": "runner",
        "runId": "run_local", "eventType": "workspace.ready", "priority": 1,
        "emittedAt": "2026-01-01T00:00:00.000Z", "payload": {},
    }
    reducer = SessionReducer({"run_id": "run_local"})
    assert reducer.apply(event) == "applied" and reducer.apply(event) == "duplicate"
    snapshot: ReducerSnapshot = reducer.snapshot()
    assert set(snapshot) == keys(ReducerSnapshot)
    assert set(snapshot["run"]) == keys(_types.RunView) and snapshot["run"]["workspaceReady"]
    assert set(snapshot["limits"]) == keys(_types.ReducerLimits)
    assert snapshot["cursors"] == [{"sourceKind": "runner", "sourceInstanceId": "runner_local",
                                    "lastSourceSeq": 1}]
    delivery: DeliveryReport = reducer.delivery()
    assert set(delivery) == keys(DeliveryReport) and delivery["duplicates"] == 1
    assert SessionReducer.replay([event], {"run_id": "run_local"}) == snapshot


def test_sequencing_config_shape() -> None:
    config: SequencingConfig = ConnectionState("hub", max_streams=3).config
    assert set(config) == keys(SequencingConfig) and config["max_streams"] == 3


def test_every_shape_is_exported() -> None:
    """Every public TypedDict in ``_types`` is listed in its ``__all__``, and every listed
    shape is re-exported (the same object) by a public module — except ``RoleSpecDict``,
    which only the native stub uses (``RoleSpec`` is the public form)."""
    import typing

    from stapel_runner_protocol import local, reducer, session, state

    defined = {name for name, value in vars(_types).items()
               if typing.is_typeddict(value) and not name.startswith("_")}
    assert defined <= set(_types.__all__), defined - set(_types.__all__)
    public = (contract, local, reducer, session, state)
    for name in _types.__all__:
        if name == "RoleSpecDict":
            continue
        homes = [m.__name__ for m in public
                 if name in getattr(m, "__all__", ()) and getattr(m, name) is getattr(_types, name)]
        assert homes, name
