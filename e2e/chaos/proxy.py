"""A TCP proxy between one agent and the hub that the chaos driver turns into a bad network.

Each agent dials its own `FaultyLink` (its `--hub` is the link's URL), which forwards to the
hub. The driver switches the link's `Mode`:

- `PASS`: bytes flow both ways; a connection whose upstream cannot be reached is closed.
- `CUT`: every open connection is reset and the port refuses new ones (the listener is
  closed), like a peer that went away.
- `BLACKHOLE`: connections stay open and new ones are accepted, but no byte is forwarded
  either way: reads stop, so what is sent waits in the kernel's buffers, as packets dropped by
  a broken route would (TCP retransmits them). Back to `PASS`, the held bytes flow again —
  unless one side gave up in between, as a heartbeat does.

Only the asyncio loop that started a link may drive it. Called by: e2e.chaos.federation
(one link per agent), e2e.chaos.driver (the faults), tests/chaos (the modes).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from dataclasses import dataclass

__all__ = ["FaultyLink", "Mode"]

_log = logging.getLogger(__name__)

CHUNK = 64 * 1024
HALF_CLOSED_SECONDS = 1.0
"""How long the other direction may go on after one ended, before both are closed."""


class Mode(enum.StrEnum):
    PASS = "pass"
    CUT = "cut"
    BLACKHOLE = "blackhole"


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    handler: asyncio.Task[object] | None
    """The task serving this connection: cancelled when the link is cut."""
    upstream: asyncio.StreamWriter | None = None

    def reset(self) -> None:
        """Drop both sides at once (RST), as a cut cable would be seen."""
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()
        if self.handler is not None:
            self.handler.cancel()


class FaultyLink:
    """One listening port on 127.0.0.1 that forwards to `target` in the current mode."""

    def __init__(self, name: str, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.name = name
        self.target = (target_host, target_port)
        self.port = port
        self.mode = Mode.PASS
        self.accepted = 0
        self.forwarded_bytes = 0
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        await self._listen()

    async def stop(self) -> None:
        await self._close_listener()
        for connection in list(self._connections):
            connection.reset()
        self._connections.clear()

    async def set_mode(self, mode: Mode) -> None:
        if mode == self.mode:
            return
        _log.info("link %s: %s -> %s", self.name, self.mode, mode)
        self.mode = mode
        if mode is Mode.CUT:
            await self._close_listener()
            for connection in list(self._connections):
                connection.reset()
            self._connections.clear()
            return
        if mode is Mode.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()
        if self._server is None:
            await self._listen()

    # --- the listener -----------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            # Not `wait_closed`: it waits for the connections it accepted, which we reset.

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        connection = _Connection(writer, asyncio.current_task())
        self._connections.add(connection)
        try:
            await self._flowing.wait()  # a black hole holds new connections too
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return  # the hub is down: the client sees its connection closed
            connection.upstream = up_writer
            pumps = {
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer)),
            }
            try:
                # One direction ending ends the connection soon: neither the agent's
                # WebSocket nor HTTP keep-alive half-closes and goes on.
                _, rest = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                if rest:
                    await asyncio.wait(rest, timeout=HALF_CLOSED_SECONDS)
            finally:
                for pump in pumps:
                    pump.cancel()
        except asyncio.CancelledError:
            pass  # cut, or the link stopped
        finally:
            self._connections.discard(connection)
            for side in (writer, connection.upstream):
                if side is not None and not side.transport.is_closing():
                    side.transport.abort()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Copy until end of stream, holding every byte while the link is a black hole."""
        try:
            while True:
                await self._flowing.wait()
                data = await source.read(CHUNK)
                if not data:
                    break
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
                self.forwarded_bytes += len(data)
        except (ConnectionError, OSError):
            return
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()
