"""The bearer token appears in no log record at any level and in no error text or
event, on either end, with a right and with a wrong token; the hub CLI takes it only
from a file or the environment (never argv)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from stapel_runner_protocol import Hello, TaskCancel, TaskProgress
from stapel_runner_protocol.transport_ws import (
    HubServer,
    RedactingLogger,
    RunnerClient,
    RunnerConnection,
)

websockets = pytest.importorskip("websockets") if not os.environ.get("CI") else \
    __import__("websockets")

TOKEN = "tok-5ecret-6f1d2a9c"
WRONG = "wr0ng-5ecret-77aa01"


class Capture(logging.Handler):
    """Every record, formatted as a handler would write it (message, arguments and
    traceback text)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def _everything(capture: Capture, events: List[Any], extra: List[str]) -> str:
    texts = list(capture.lines) + extra
    for kind, value in events:
        texts.append(f"{kind} {value!r} {value}")
        cause = getattr(value, "__cause__", None)
        if cause is not None:
            texts.append(repr(cause))
    return "\n".join(texts)


def test_no_token_in_any_log_record_or_event_on_either_end(capfd: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    capture = Capture()
    old_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    # the stream handler writes to stderr too (captured by capfd below)
    stream = logging.StreamHandler(sys.stderr)
    root.addHandler(stream)
    events: List[Any] = []
    extra: List[str] = []

    async def main() -> None:
        server = HubServer(tokens={TOKEN: "R"})
        async with server.serve("127.0.0.1", 0) as ws_server:
            url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"
            hub = server.runner("R")
            # right token, both client kinds; a frame each way
            conn = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                    auth_token=TOKEN)
            await conn.connect()
            await hub.send(TaskCancel(task_id="T", reason="x"))
            while (event := await asyncio.wait_for(conn.recv(), 5))[0] != "received":
                events.append(event)
            await conn.send(TaskProgress(task_id="T", attempt=1, kind="state"))
            while (event := await asyncio.wait_for(hub.recv(), 5))[0] != "received":
                events.append(event)
            await conn.close()
            client = RunnerClient(url, hello=Hello(project_id="p", runner_version="1"),
                                  auth_token=lambda: TOKEN, seed=3)
            await client.start()
            await client.wait_connected(5)
            await client.stop()
            events.extend(client._pump().events)
            # wrong token: RunnerConnection raises, RunnerClient reports error events
            wrong = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                     auth_token=WRONG)
            with pytest.raises(Exception) as refused:
                await wrong.connect()
            extra.extend([repr(refused.value), str(refused.value)])
            retrying = RunnerClient(url, hello=Hello(project_id="p", runner_version="1"),
                                    auth_token=WRONG, seed=4, backoff_initial_ms=10,
                                    backoff_max_ms=20)
            await retrying.start()
            errors = 0
            while errors < 2:
                event = await asyncio.wait_for(retrying.recv(), 5)
                events.append(event)
                errors += event[0] == "error"
            await retrying.stop()
            events.extend(hub._pump().events)

    try:
        asyncio.run(main())
    finally:
        root.removeHandler(capture)
        root.removeHandler(stream)
        root.setLevel(old_level)
    out, err = capfd.readouterr()
    text = _everything(capture, events, extra + [out, err])
    # The check can fail: websockets did log the handshake headers at DEBUG, on both
    # ends, and the refusals were reported.
    assert any("Authorization: [redacted]" in line and line.startswith("websockets.client")
               for line in capture.lines), "no client handshake header was logged"
    assert any("Authorization: [redacted]" in line and line.startswith("websockets.server")
               for line in capture.lines), "no server handshake header was logged"
    assert any(k == "error" and getattr(v, "code", None) == "upgrade_refused"
               and v.status == 401 for k, v in events)
    assert "401" in " ".join(extra)
    assert TOKEN not in text and WRONG not in text
    assert "5ecret" not in text


def test_the_redacting_logger_hides_credentials() -> None:
    capture = Capture()
    logger = logging.getLogger("test.redact")
    logger.addHandler(capture)
    logger.setLevel(logging.DEBUG)
    try:
        r = RedactingLogger(logger)
        r.debug("> %s: %s", "Authorization", "Bearer abc")
        r.debug("> %s: %s", "proxy-authorization", "Basic Zm9vOmJhcg==")
        r.debug("< %s: %s", "Host", "example")
        r.info("header was %s", "bearer xyz, then more")
        r.warning("Bearer inline-secret in a message")
    finally:
        logger.removeHandler(capture)
    joined = "\n".join(capture.lines)
    assert "abc" not in joined and "Zm9v" not in joined and "xyz" not in joined
    assert "inline-secret" not in joined and "Host: example" in joined
    assert joined.count("[redacted]") == 4


def _hub_cli(args: List[str], env: Dict[str, str]) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-m", "stapel_runner_protocol.hub", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def test_hub_cli_takes_the_token_from_a_file_or_the_environment(tmp_path: Path) -> None:
    # argv: refused (there is no --token)
    proc = _hub_cli(["--token", TOKEN, "--port", "0"], {})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "--token" in err and TOKEN not in err
    # an empty or missing token is refused, without echoing anything secret
    proc = _hub_cli(["--token-env", "STAPEL_TEST_HUB_TOKEN", "--port", "0"],
                    {"STAPEL_TEST_HUB_TOKEN": ""})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "empty" in err
    # from the environment and from a file: serves a runner to its report, and exits
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    for args, env in ((["--token-env", "STAPEL_TEST_HUB_TOKEN"], {"STAPEL_TEST_HUB_TOKEN": TOKEN}),
                      (["--token-file", str(token_file)], {})):
        proc = _hub_cli([*args, "--port", "0", "--assign", "T-1", "--exit-after-reports"], env)
        try:
            _serve_one_report(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _serve_one_report(proc: "subprocess.Popen[str]") -> None:
    """Run one task through the CLI hub ``proc``; it exits 0 without printing the token."""
    assert proc.stdout is not None
    url = json.loads(proc.stdout.readline())["listening"]
    with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
        assert TOKEN.encode() not in f.read()

    async def run(url: str = url) -> None:
        conn = RunnerConnection(url, hello=Hello(project_id="p", runner_version="1"),
                                auth_token=TOKEN)
        await conn.connect()
        while True:
            kind, assign = await asyncio.wait_for(conn.recv(), 10)
            if kind == "received":
                break
        report = {"schema_version": 1, "task_id": "T-1", "status": "done",
                  "usage": {"cache_read": 0, "cache_write": 0, "fresh_input": 0,
                            "output": 0, "thinking": 0}}
        from stapel_runner_protocol import TaskReportMessage
        await conn.send(TaskReportMessage(task_id="T-1", attempt=assign.attempt,
                                          report=report))
        await asyncio.sleep(0.2)
        await conn.close()

    asyncio.run(run())
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert '"report"' in out and TOKEN not in out + err
