"""``_types.py`` is generated from the API JSON Schemas (conformance/schema/api/), and the
values the Python API returns match those schemas.

1. Drift of the generated file: the generator (conformance/tools/gen_python_types.py)
   is run in memory and its output must equal ``_types.py`` byte for byte.
2. Drift of the binding: values the package returns (and the inputs it takes) are
   validated against their schema ``$defs`` entry with a small JSON Schema validator
   (the subset the API schemas use). The core's own JSON forms are checked by
   ``core/tests/api_schema_drift.rs``; this covers what the binding assembles itself
   (replay reports, spawn/signal actions, peer errors, role specs, …).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import pytest

from stapel_runner_protocol import ConnectionState, TaskCancel, _native
from stapel_runner_protocol.contract import (
    Catalog,
    GatewayInput,
    GatewayMachine,
    GatewayResult,
    parse_catalog,
    resolve,
)
from stapel_runner_protocol.local import LocalConfig, LocalRun
from stapel_runner_protocol.reducer import SessionReducer
from stapel_runner_protocol.session import HubSession

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "conformance" / "schema" / "api"
GENERATOR = REPO / "conformance" / "tools" / "gen_python_types.py"
TYPES_PY = REPO / "bindings-python" / "python" / "stapel_runner_protocol" / "_types.py"

pytestmark = pytest.mark.skipif(
    not GENERATOR.exists(), reason="needs the repository checkout (conformance/)"
)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_python_types", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_types_py_is_generated_from_the_schemas() -> None:
    gen = _generator()
    wanted: str = gen.generate(str(SCHEMAS))
    assert gen.generate(str(SCHEMAS)) == wanted, "the generator is not deterministic"
    current = TYPES_PY.read_text(encoding="utf-8")
    if current != wanted:
        changed = ", ".join(gen.changed_shapes(current, wanted))
        pytest.fail(
            f"_types.py differs from the schemas in conformance/schema/api/ (shapes: "
            f"{changed}); regenerate with: python3 conformance/tools/gen_python_types.py"
        )
    shipped = TYPES_PY.parent / "schemas" / "api"
    stale = gen.stale_copies(str(SCHEMAS), str(shipped))
    assert not stale, f"the package's copies of {stale} are stale; regenerate"


def test_drift_reports_name_the_shape(tmp_path: Path) -> None:
    gen = _generator()
    for name in gen.AREAS:
        (tmp_path / name).write_text((SCHEMAS / name).read_text(encoding="utf-8"))
    contract = json.loads((tmp_path / "contract.json").read_text(encoding="utf-8"))
    evidence = contract["$defs"]["ExecutionEvidence"]
    del evidence["properties"]["redacted_fields"]
    evidence["required"].remove("redacted_fields")
    (tmp_path / "contract.json").write_text(json.dumps(contract))
    before, after = gen.generate(str(SCHEMAS)), gen.generate(str(tmp_path))
    assert gen.changed_shapes(before, after) == ["ExecutionEvidence"]


def test_the_generator_rejects_what_it_cannot_map(tmp_path: Path) -> None:
    gen = _generator()
    for name in gen.AREAS:
        (tmp_path / name).write_text((SCHEMAS / name).read_text(encoding="utf-8"))
    contract = json.loads((tmp_path / "contract.json").read_text(encoding="utf-8"))
    contract["$defs"]["ToolPolicy"]["properties"]["allowed_tools"] = {"$ref": "#/$defs/Nope"}
    (tmp_path / "contract.json").write_text(json.dumps(contract))
    with pytest.raises(gen.SchemaError, match="unresolved"):
        gen.generate(str(tmp_path))


# ------------------------------------------------------------------------ the validator

_DOCS: Dict[str, Dict[str, Any]] = {
    p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(SCHEMAS.glob("*.json"))
} if SCHEMAS.exists() else {}
_FILE_OF = {name: f for f, doc in _DOCS.items() for name in doc.get("$defs", {})}
_TYPES: Dict[str, Tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list, tuple), "object": (dict,),
}


def _is(value: Any, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[t])


def _errors(schema: Any, value: Any, file: str, path: str) -> List[str]:
    """The violations of ``value`` against ``schema`` (JSON Schema 2020-12 subset)."""
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{path}: no value allowed"]
    out: List[str] = []
    if "$ref" in schema:
        target_file, _, pointer = schema["$ref"].partition("#/$defs/")
        target_file = target_file or file
        out += _errors(_DOCS[target_file]["$defs"][pointer], value, target_file, path)
    if "anyOf" in schema and not any(
            not _errors(s, value, file, path) for s in schema["anyOf"]):
        out.append(f"{path}: matches none of anyOf")
    if "oneOf" in schema:
        n = sum(not _errors(s, value, file, path) for s in schema["oneOf"])
        if n != 1:
            out.append(f"{path}: matches {n} of oneOf (want 1)")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in {schema['enum']!r}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, t) for t in types):
            return out + [f"{path}: {value!r} is not of type {types}"]
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        out.append(f"{path}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{path}: missing required key {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            sub = props.get(key, extra)
            if sub is False:
                out.append(f"{path}: unexpected key {key!r}")
            else:
                out += _errors(sub, v, file, f"{path}/{key}")
    if isinstance(value, (list, tuple)):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: fewer than {schema['minItems']} items")
        prefix = schema.get("prefixItems", [])
        for i, v in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items", True)
            out += _errors(sub, v, file, f"{path}/{i}")
    return out


def check(name: str, value: Any) -> None:
    """``value`` matches ``conformance/schema/api/<file>#/$defs/<name>``."""
    file = _FILE_OF[name]
    errors = _errors(_DOCS[file]["$defs"][name], value, file, "")
    assert not errors, f"{file}#/$defs/{name}: " + "; ".join(errors[:5]) + f"\nvalue: {value!r}"


def test_the_validator_rejects_drifted_values() -> None:
    good = {"task_id": "T", "attempt": 1, "seq": 2}
    check("Position", good)
    for bad in ({"task_id": "T"}, {**good, "extra": 1}, {**good, "seq": "2"},
                {**good, "seq": True}, {**good, "seq": -1}):
        with pytest.raises(AssertionError):
            check("Position", bad)
    with pytest.raises(AssertionError):
        check("SpawnAction", {"program": "p", "args": [], "env": {"PATH": "/bin"},
                              "new_process_group": True})


# -------------------------------------------------------------- what the package returns

CATALOG: Catalog = {
    "profiles": [{"contract_version": "1.0", "profile_id": "coder", "rein": "r", "model": "m",
                  "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["t"]}}],
    "reins": [{"rein_id": "r", "contract_version": "1.0", "tool_event_visibility": "complete"}],
}


def test_sequencing_and_session_values() -> None:
    hub = ConnectionState("hub")
    check("SequencingConfig", hub.config)
    for r in "ab":
        hub.emit(TaskCancel(task_id="T-1", reason=r))
    hub.emit(TaskCancel(task_id="T-2", reason="c"))
    report = hub.replay_report({"T-1": 1, "T-2": 5, "T-9": 0})
    assert report["streams"] and report["peer_ahead"] and report["unknown"]
    check("ReplayReport", report)
    for p in hub.replay_from():
        check("Position", p)
    full = ConnectionState("hub", max_outbox_frames=1)
    full.emit(TaskCancel(task_id="T-1", reason="a"))
    full.ack("T-1", None, 1)
    full.emit(TaskCancel(task_id="T-1", reason="b"))
    report = full.replay_report({"T-1": 0})
    assert report["resync"]
    check("ReplayReport", report)

    session = HubSession(ping_interval_ms=0, peer_timeout_ms=0)
    session.connected(0)
    session.frame(0, '{"schema_version":1,"type":"hello","protocol_version":1,'
                     '"project_id":"p","runner_version":"1"}')
    session.frame(0, '{"schema_version":1,"type":"bogus"}')
    errors = [v for k, v in session.drain_outputs() if k == "peer_error"]
    assert errors
    for e in errors:
        check("PeerError", e)

    check("RoleSpecDict", _native.role_spec_from_invocation({"backend": "b", "x": 1}, "coder"))
    check("RoleSpecDict", _native.role_spec_from_invocation(None))


def test_contract_values() -> None:
    check("Catalog", CATALOG)
    check("CatalogCounts", parse_catalog(CATALOG))
    check("Resolution", resolve("coder", CATALOG))
    machine = GatewayMachine(CATALOG)
    inputs: List[GatewayInput] = [
        {"type": "execute", "request": {"harness_profile_ref": "coder", "repository": "r",
                                        "title": "t", "description": "d"},
         "tool_calls": [{"name": "t", "arguments": {"a": 1}}, {"name": "denied"}]},
        {"type": "sandbox_created", "sandbox": {"sandbox_id": "sb"}},
        {"type": "session_started", "session": {"id": "s"}},
        {"type": "tool_dispatched", "result": {"ok": True, "output": {"x": 1}}},
        {"type": "session_ended", "summary": {"tool_event_visibility": "complete",
                                              "tool_event_count": 1, "duration_ms": 5}},
        {"type": "sandbox_destroyed"},
    ]
    outputs = []
    for i, step in enumerate(inputs):
        check("GatewayInput", step)
        machine.handle_input(i, step)
        outputs += machine.drain()
    assert [o["type"] for o in outputs] == [
        "create_sandbox", "start_session", "dispatch_tool", "end_session", "destroy_sandbox",
        "result"]
    for o in outputs:
        check("GatewayOutput", o)
    last = outputs[-1]
    assert last["type"] == "result"
    check("GatewayResultDict", GatewayResult.from_dict(last["result"]).to_dict())


def test_local_and_reducer_values() -> None:
    config: LocalConfig = {"harness_program": "h", "harness_env": {"PATH": "/bin", "X": "1"}}
    check("LocalConfig", config)
    run = LocalRun(config)
    run.controller_bytes(0, b'{"schema":"paperclip.prp.command.v1","commandId":"c1",'
                            b'"controllerSeq":1,"type":"run.prepare",'
                            b'"issuedAt":"2026-01-01T00:00:00.000Z","payload":{}}\n')
    run.harness_spawned(1, 42)
    run.timeout(5000)  # the harness never became ready: TERM its group
    outputs = run.drain_outputs()
    kinds = {k for k, _ in outputs}
    assert {"spawn", "signal", "to_controller"} <= kinds, kinds
    reducer = SessionReducer({"run_id": "run_local"})
    check("ReducerConfig", {"run_id": "run_local"})
    for kind, value in outputs:
        if kind == "spawn":
            check("SpawnAction", value)
        elif kind == "signal":
            check("SignalAction", value)
        elif kind == "to_controller":
            assert isinstance(value, str)
            message = json.loads(value)["message"]
            if message["kind"] == "event":
                check("CanonicalEvent", message["event"])
                check("ReduceOutcome", reducer.apply(message["event"]))
    check("ReducerSnapshot", reducer.snapshot())
    check("DeliveryReport", reducer.delivery())


def test_typeddicts_declare_the_schema_keys() -> None:
    """Each generated ``TypedDict`` has exactly its schema's keys, required as the schema
    says (independent of the generator's text)."""
    import typing

    from stapel_runner_protocol import _types

    seen = 0
    for name, file in _FILE_OF.items():
        definition = _DOCS[file]["$defs"][name]
        shape = getattr(_types, name)
        if "properties" not in definition:
            assert not typing.is_typeddict(shape), name
            continue
        assert typing.is_typeddict(shape), name
        required = set(definition.get("required", []))
        assert set(shape.__required_keys__) == required, name
        assert set(shape.__optional_keys__) == set(definition["properties"]) - required, name
        seen += 1
    assert seen > 40
