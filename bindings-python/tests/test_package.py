"""Package-level properties: lazy import, public names, error hierarchy."""

from __future__ import annotations

import subprocess
import sys

import stapel_runner_protocol as srp
from stapel_runner_protocol import errors


def test_import_is_light() -> None:
    code = (
        "import sys, stapel_runner_protocol as s\n"
        "heavy = [m for m in ('websockets', 'jsonschema', 'claude_agent_sdk',"
        " 'stapel_taskspecs', 'stapel_runner_protocol._native') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "s.encode(s.Hello(project_id='p', runner_version='1'))\n"
        "s.decode('{\"schema_version\":1,\"type\":\"ping\"}', validate=True)\n"
        "heavy = [m for m in ('websockets', 'jsonschema', 'claude_agent_sdk') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names_resolve() -> None:
    for name in srp.__all__:
        assert getattr(srp, name) is not None, name
    assert sorted(dir(srp)) == sorted(srp.__all__)


def test_error_hierarchy() -> None:
    assert issubclass(errors.RunnerProtocolError, Exception)
    for cls in (errors.SchemaValidationError, errors.UnknownMessageError,
                errors.ProtocolStateError, errors.AdapterError):
        assert cls.__bases__ == (errors.RunnerProtocolError,)
    assert errors.AdapterUnavailableError.__bases__ == (errors.AdapterError,)
    assert srp.SchemaValidationError is errors.SchemaValidationError
    e = errors.SchemaValidationError("m", ["line"])
    assert e.errors == ["line"] and e.code == "schema_violation" and str(e) == "m"
    assert errors.RunnerProtocolError("x").code is None
    assert errors.UnknownMessageError("x").code == "unknown_type"
