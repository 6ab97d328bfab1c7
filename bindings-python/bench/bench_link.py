"""Hub ingest through the new link (issue 26) against today's path, in one run:

    .venv/bin/python bench/bench_link.py            # run from bindings-python/
    .venv/bin/python bench/bench_link.py --quick    # fewer frames and rounds (smoke test)
    .venv/bin/python bench/bench_link.py --check    # exit 1 when new/old exceeds 1.05

"Today" is the transport of commit a127780 (before the links): per frame its ``_Driver``
fed the ``SocketHost`` machine, performed its ``deliver`` by feeding the ``HubSession``,
relayed the session's outputs and queued the events. "New" is this package's pump over
``HubLink``: per frame the events the application took since the last input are
reported (``events_taken``), the frame is fed to the link, its outputs performed, the
timer re-armed. The old module is loaded from git (``git show a127780:...``) into this
process, so both run against the same native extension; without git the "old" column
is skipped.

Cases (each: one runner stream of ``task.progress`` frames of kind ``usage``, validated,
applied in order, every event taken by the application):

* ``machine``   the per-frame work of the transport without sockets: frames fed in a
  loop, events taken as they come (thread CPU time per frame);
* ``websocket`` the whole hub over a real WebSocket on 127.0.0.1: a client process
  sends a hello and N frames as fast as it can; the hub application counts
  ``received`` events until the N-th (the hub process's CPU time per frame, and wall
  time: frames/s).

Timing: old and new take turns, round after round; each keeps the median of its rounds.
CPU time (``time.thread_time_ns`` / ``time.process_time_ns`` of the hub process)
excludes time preempted by other processes, so the ratio holds on a busy machine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import stapel_runner_protocol as srp
from stapel_runner_protocol import Hello, TaskProgress, encode
from stapel_runner_protocol.link import HubLink

HERE = Path(__file__).resolve().parent
OLD_COMMIT = "a127780"
OLD_PATH = "bindings-python/python/stapel_runner_protocol/transport_ws.py"
TOKEN = "bench-token"


def load_old() -> Optional[types.ModuleType]:
    """Today's transport module (commit a127780), or None without git."""
    try:
        source = subprocess.run(["git", "show", f"{OLD_COMMIT}:{OLD_PATH}"], cwd=HERE,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = "stapel_runner_protocol._transport_ws_" + OLD_COMMIT
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "stapel_runner_protocol"
    sys.modules[name] = module
    exec(compile(source, f"{OLD_COMMIT}:{OLD_PATH}", "exec"), module.__dict__)
    return module


def frames(n: int) -> List[str]:
    out = []
    for i in range(1, n + 1):
        p = TaskProgress(task_id="T-1", attempt=1, kind="usage", seq=i, payload={
            "model": "claude", "turn": i, "usage": {
                "cache_read": 10, "cache_write": 20, "fresh_input": 300, "output": 40,
                "thinking": 5}})
        out.append(encode(p))
    return out


HELLO = encode(Hello(project_id="bench", runner_version="1"))


class NullSocket:
    """A socket for the machine case: writes are dropped, reads never come."""

    def __aiter__(self) -> "NullSocket":
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()

    async def send(self, frame: str) -> None:
        pass

    async def close(self, code: int = 1000, reason: str = "") -> None:
        pass


# --- machine case ----------------------------------------------------------------------


async def machine_old(old: types.ModuleType, data: List[str]) -> int:
    """Today's per-frame path: the _Driver of a127780 over a HubSession."""
    session = srp.session.HubSession()
    queue = old._EventQueue(old.EVENT_QUEUE_SIZE)
    driver = old._Driver(session, NullSocket(), time.monotonic, queue)
    driver.host.opened(driver.now())
    driver.step()
    driver.host.frame(driver.now(), HELLO)
    driver.step()
    while queue.qsize():
        await queue.get()
    got = 0
    start = time.thread_time_ns()
    for frame in data:
        driver.host.frame(driver.now(), frame)
        driver.step()
        while queue._items:  # the application takes its events (get() without awaiting)
            queue._items.popleft()
            got += 1
        driver.io.clear()  # writes (acks) are not performed in this case
    elapsed = time.thread_time_ns() - start
    assert got == len(data), got
    return elapsed


async def machine_new(data: List[str]) -> int:
    """The new per-frame path: the pump over a HubLink."""
    from stapel_runner_protocol.transport_ws import _Pump

    link = HubLink()
    pump = _Pump(link, time.monotonic)
    s = pump.add(1, NullSocket())
    pump.call(link.attach, 1)
    pump.feed(link.frame, 1, HELLO)
    while pump.events:
        pump.events.popleft()
        pump.taken += 1
    got = 0
    start = time.thread_time_ns()
    for frame in data:
        pump.feed(link.frame, 1, frame)
        events = pump.events
        while events:  # the application takes its events (get() without awaiting)
            events.popleft()
            pump.taken += 1
            got += 1
    elapsed = time.thread_time_ns() - start
    s.out.clear()
    assert got == len(data), got
    if pump.timer is not None:
        pump.timer.cancel()
    if s.writer is not None:
        s.writer.cancel()
    return elapsed


# --- websocket case --------------------------------------------------------------------

CLIENT = r"""
import asyncio, sys
from websockets.asyncio.client import connect
async def main(url, n):
    frames = [line.rstrip("\n") for line in sys.stdin]
    async with connect(url, additional_headers={"Authorization": "Bearer " + sys.argv[3]},
                       ping_interval=None, max_queue=None) as ws:
        for f in frames:
            await ws.send(f)
        await ws.wait_closed()
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def websocket_round(module: types.ModuleType, data: List[str]) -> Tuple[int, float]:
    """One hub (``module.HubServer``) ingesting ``data`` from a client process; returns
    the hub process's CPU ns and the wall seconds from the first event to the last."""
    server = module.HubServer(tokens={TOKEN: "R"})
    async with server.serve("127.0.0.1", 0) as ws_server:
        url = f"ws://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}/"
        runner = server.runner("R")
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, url, str(len(data)), TOKEN,
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert client.stdin is not None
        client.stdin.write(("\n".join([HELLO] + data) + "\n").encode())
        client.stdin.close()
        got = 0
        cpu0 = wall0 = None
        async for kind, value in runner.events():
            if kind == "hello":
                cpu0, wall0 = time.process_time_ns(), time.perf_counter()
            elif kind == "received":
                got += 1
                if got == len(data):
                    break
        assert cpu0 is not None and wall0 is not None
        cpu, wall = time.process_time_ns() - cpu0, time.perf_counter() - wall0
        client.kill()
        await client.wait()
    return cpu, wall


# --- driver ----------------------------------------------------------------------------


def median(xs: List[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    quick = "--quick" in sys.argv
    check = "--check" in sys.argv
    n_machine = 5_000 if quick else 50_000
    n_socket = 5_000 if quick else 40_000
    rounds = 3 if quick else 7
    old = load_old()
    load = os.getloadavg()
    print(f"bench_link: Python {sys.version.split()[0]}, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, old = {OLD_COMMIT}"
          f"{'' if old is not None else ' (not available: no git)'}")
    from stapel_runner_protocol import transport_ws as new

    results: Dict[str, Dict[str, List[float]]] = {"machine": {"old": [], "new": []},
                                                 "websocket": {"old": [], "new": [],
                                                               "old_wall": [], "new_wall": []}}
    mdata, sdata = frames(n_machine), frames(n_socket)

    async def run() -> None:
        for _ in range(rounds):
            if old is not None:
                results["machine"]["old"].append(await machine_old(old, mdata) / n_machine)
            results["machine"]["new"].append(await machine_new(mdata) / n_machine)
        for _ in range(rounds):
            for name, module in (("old", old), ("new", new)):
                if module is None:
                    continue
                cpu, wall = await websocket_round(module, sdata)
                results["websocket"][name].append(cpu / n_socket)
                results["websocket"][name + "_wall"].append(n_socket / wall)

    asyncio.run(run())
    ok = True
    print(f"{'case':<10} {'old ns/frame':>13} {'new ns/frame':>13} {'new/old':>8} "
          f"{'old frames/s':>13} {'new frames/s':>13}")
    for case in ("machine", "websocket"):
        r = results[case]
        o = median(r["old"]) if r["old"] else float("nan")
        n = median(r["new"])
        ratio = n / o if r["old"] else float("nan")
        if case == "websocket":
            of = median(r["old_wall"]) if r["old_wall"] else float("nan")
            nf = median(r["new_wall"])
        else:
            of, nf = 1e9 / o, 1e9 / n
        print(f"{case:<10} {o:>13.0f} {n:>13.0f} {ratio:>8.3f} {of:>13.0f} {nf:>13.0f}")
        if r["old"] and ratio > 1.05:
            ok = False
    print("target (new/old <= 1.05 CPU per frame):", "met" if ok else "MISSED")
    return 0 if ok or not check else 1


if __name__ == "__main__":
    sys.exit(main())
