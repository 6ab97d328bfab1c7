"""A TCP relay for the transport tests: cuts connections abruptly, half-opens them,
or blackholes them."""

from __future__ import annotations

import asyncio
from typing import List, Optional


class _Link:
    """One relayed TCP connection: the runner-facing and the hub-facing writer."""

    def __init__(self, runner_side: asyncio.StreamWriter, hub_side: asyncio.StreamWriter) -> None:
        self.runner_side, self.hub_side = runner_side, hub_side
        self.silent = False  # bytes are read and dropped: the peer looks alive but mute


class Proxy:
    """A TCP relay on 127.0.0.1 between the runner and the hub that can cut every
    connection abruptly (no close handshake; bytes in flight are lost), cut only the
    runner's side (the hub's TCP connection stays open, silent: a half-open peer), or
    blackhole the existing connections (both TCP connections stay open, nothing passes).
    New connections always work."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.links: List[_Link] = []
        self.tasks: List["asyncio.Task[None]"] = []
        self.server: Optional[asyncio.AbstractServer] = None
        self.cuts = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        link = _Link(writer, up_writer)
        self.links.append(link)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(4096):
                    if not link.silent:
                        dst.write(data)
                        await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not link.silent:
                    dst.transport.abort()

        self.tasks += [asyncio.ensure_future(pipe(reader, up_writer)),
                       asyncio.ensure_future(pipe(up_reader, writer))]

    def cut(self) -> None:
        self.cuts += 1
        for link in self.links:
            link.runner_side.transport.abort()
            link.hub_side.transport.abort()
        self.links = []

    def cut_runner_side(self) -> None:
        for link in self.links:
            link.silent = True
            link.runner_side.transport.abort()

    def blackhole(self) -> None:
        for link in self.links:
            link.silent = True

    async def close(self) -> None:
        for link in self.links:
            link.runner_side.transport.abort()
            link.hub_side.transport.abort()
        for t in self.tasks:
            t.cancel()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
