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
    # The hierarchy is the core's table (errors.py is generated from it; the errors
    # vectors and tests/test_errors.py check it); 0.1.1's classes stay
    # RunnerProtocolErrors.
    assert issubclass(errors.RunnerProtocolError, Exception)
    for cls in (errors.SchemaValidationError, errors.UnknownMessageError,
                errors.ProtocolStateError, errors.AdapterError):
        assert issubclass(cls, errors.RunnerProtocolError)
    assert errors.SchemaValidationError.__bases__ == (errors.DecodeError,)
    assert errors.ConfigError.__bases__ == (errors.ProtocolStateError, ValueError)
    assert errors.AdapterUnavailableError.__bases__ == (errors.AdapterError,)
    assert srp.SchemaValidationError is errors.SchemaValidationError
    e = errors.SchemaValidationError("m", ["line"])
    assert e.errors == ["line"] and e.code == "schema_violation" and str(e) == "m"
    assert errors.RunnerProtocolError("x").code is None
    assert errors.UnknownMessageError("x").code == "unknown_type"


def test_without_stapel_taskspecs() -> None:
    """A broken install without stapel-taskspecs (a dependency) still imports:
    messages, validation, sequencing and the session machines work; the views returning
    its models raise AdapterUnavailableError (taskspecs_unavailable) when used, and the
    harness adapters and the subprocess rein (whose turns carry a UsageSplit) refuse to
    be built with that error."""
    code = (
        "import sys\n"
        "sys.modules['stapel_taskspecs'] = None  # as if it were not installed\n"
        "import stapel_runner_protocol as s\n"
        "from stapel_runner_protocol.session import HubSession\n"
        "from stapel_runner_protocol.errors import AdapterUnavailableError\n"
        "from stapel_runner_protocol.contract import SubprocessRein\n"
        "from stapel_runner_protocol.subprocess_adapter import SubprocessAdapter\n"
        "from stapel_runner_protocol.agent_sdk_adapter import AgentSdkAdapter\n"
        "m = s.decode(s.encode(s.TaskProgress(task_id='T', kind='state', attempt=1,\n"
        "    payload={'state': 'running'})), validate=True)\n"
        "hub = s.ConnectionState('hub')\n"
        "assert hub.receive(s.ConnectionState('runner').emit(m)) is True\n"
        "HubSession().connected(0)\n"
        "for call in (lambda: s.usage_from_anthropic({'input_tokens': 1}),\n"
        "             lambda: s.TurnResult.from_dict({'text': 't', 'usage': {\n"
        "                 'cache_read': 0, 'cache_write': 0, 'fresh_input': 0,\n"
        "                 'output': 0, 'thinking': 0}}),\n"
        "             lambda: SubprocessAdapter(command=['true']),\n"
        "             lambda: SubprocessRein(['true']),\n"
        "             lambda: AgentSdkAdapter(client_factory=lambda role: None)):\n"
        "    try:\n"
        "        call()\n"
        "    except AdapterUnavailableError as e:\n"
        "        assert e.code == 'taskspecs_unavailable', e.code\n"
        "        assert isinstance(e.__cause__, ImportError)\n"
        "    else:\n"
        "        raise AssertionError('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
