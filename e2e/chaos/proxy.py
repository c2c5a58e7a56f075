"""A TCP proxy between one agent and a hub that the chaos driver turns into a bad network.

Each agent dials its own `FaultyLink` to each hub (its `--hub` is the links' URLs, one per
hub: `AgentLinks`), which forwards to that hub. The driver switches all of an agent's links'
`Mode` at once:

- `PASS`: bytes flow both ways; a connection whose upstream cannot be reached is closed.
- `CUT`: every open connection is reset and the port refuses new ones (the listener is
  closed), like a peer that went away.
- `BLACKHOLE`: connections stay open and new ones are accepted, but no byte is forwarded
  either way: reads stop, so what is sent waits in the kernel's buffers, as packets dropped by
  a broken route would (TCP retransmits them). Back to `PASS`, the held bytes flow again —
  unless one side gave up in between, as a heartbeat does.

With several hubs, one leads and the others refuse agent sessions with a 503 that names the
leader's own URL (`X-MultiQ-Leader`); an agent goes straight there — past its link, which
then could neither cut nor black-hole it. So a link reads the HTTP responses coming back from
its hub (`LeaderHintRewriter`) and names, instead, the agent's link to the leader: the agent
follows the leader as it would in production, and always through its links. It stops reading
at the first 101 (the WebSocket's bytes pass as they come).

Only the asyncio loop that started a link may drive it. Called by: e2e.chaos.federation
(an `AgentLinks` per agent), e2e.chaos.driver (the faults), tests/chaos (the modes).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["AgentLinks", "FaultyLink", "LeaderHintRewriter", "Mode"]

_log = logging.getLogger(__name__)

CHUNK = 64 * 1024
HALF_CLOSED_SECONDS = 1.0
"""How long the other direction may go on after one ended, before both are closed."""
LEADER_HEADER = b"x-multiq-leader"
"""The header in which a hub that does not lead names the leader (hub.http.leader)."""
MAX_HEAD_BYTES = 64 * 1024
"""A response head longer than this is not HTTP from a hub: the rest passes unread."""


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


class LeaderHintRewriter:
    """Reads a hub's HTTP/1.1 responses as they stream back to the agent, and rewrites the
    URL in each `X-MultiQ-Leader` header through `urls` (a hub's own URL -> the agent's link
    to it); a URL not in `urls` is left as it is.

    Bytes are held only while a response head is incomplete. From a `101 Switching
    Protocols` on (the WebSocket), or a response whose body it cannot delimit (no
    Content-Length), or a head too long to be a hub's, everything passes as it comes. Pure:
    bytes in, bytes out; one per connection."""

    def __init__(self, urls: Mapping[str, str]) -> None:
        self.urls = {hub.rstrip("/"): link.rstrip("/") for hub, link in urls.items()}
        self.rewritten = 0
        self._held = bytearray()
        self._body_left = 0
        self._reading = True

    def feed(self, data: bytes) -> bytes:
        """The bytes that may go on to the agent now."""
        if not self._reading:
            return data
        self._held += data
        out = bytearray()
        while self._held and self._reading:
            if self._body_left:
                taken = self._held[: self._body_left]
                del self._held[: self._body_left]
                self._body_left -= len(taken)
                out += taken
                continue
            end = self._held.find(b"\r\n\r\n")
            if end < 0:
                if len(self._held) > MAX_HEAD_BYTES:
                    self._reading = False
                break
            head = bytes(self._held[: end + 4])
            del self._held[: end + 4]
            status, length, head = self._rewrite(head)
            out += head
            if status == 101 or length is None:
                self._reading = False
            else:
                self._body_left = length
        if not self._reading:
            out += self._held
            self._held.clear()
        return bytes(out)

    def flush(self) -> bytes:
        """What is still held when the stream ends (an incomplete head)."""
        held = bytes(self._held)
        self._held.clear()
        return held

    def _rewrite(self, head: bytes) -> tuple[int | None, int | None, bytes]:
        """The head's status, its body's length (None: unknown) and the head rewritten."""
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        length: int | None = None
        chunked = False
        for i, line in enumerate(lines[1:], start=1):
            name, colon, value = line.partition(b":")
            key = name.strip().lower()
            if not colon:
                continue
            if key == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
            elif key == b"transfer-encoding":
                chunked = True
            elif key == LEADER_HEADER:
                url = value.strip().decode("latin-1").rstrip("/")
                if url in self.urls:
                    lines[i] = name + b": " + self.urls[url].encode("latin-1")
                    self.rewritten += 1
        if status is not None and (100 <= status < 200 or status in (204, 304)):
            length = 0
        elif chunked:
            # No hub answers an agent's dial so: stop reading rather than parse chunks.
            length = None
        return status, length, b"\r\n".join(lines) + b"\r\n\r\n"


class FaultyLink:
    """One listening port on 127.0.0.1 that forwards to `target` in the current mode.

    `leader_urls` (a hub's URL -> the link that reaches it for the same agent), once set,
    makes the link rewrite the leader named in the hub's answers (`LeaderHintRewriter`)."""

    def __init__(self, name: str, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.name = name
        self.target = (target_host, target_port)
        self.port = port
        self.leader_urls: dict[str, str] = {}
        self.leader_hints_rewritten = 0
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
            rewriter = LeaderHintRewriter(self.leader_urls) if self.leader_urls else None
            pumps = {
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer, rewriter)),
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

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        rewriter: LeaderHintRewriter | None = None,
    ) -> None:
        """Copy until end of stream, holding every byte while the link is a black hole."""
        try:
            while True:
                await self._flowing.wait()
                data = await source.read(CHUNK)
                if not data:
                    break
                received = len(data)
                if rewriter is not None:
                    before = rewriter.rewritten
                    data = rewriter.feed(data)
                    self.leader_hints_rewritten += rewriter.rewritten - before
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
                self.forwarded_bytes += received
            if rewriter is not None:
                sink.write(rewriter.flush())
        except (ConnectionError, OSError):
            return
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()


class AgentLinks:
    """One agent's links, one per hub (in the hubs' order), switched together: the whole of
    that agent's way to the hubs. Each rewrites a follower's leader hint to its sibling link
    to the leader."""

    def __init__(self, agent: str, hubs: Sequence[tuple[str, int]]) -> None:
        """`hubs`: each hub's (host, port), the URL it advertises being http://host:port."""
        self.agent = agent
        self.hubs = list(hubs)
        self.links = [FaultyLink(f"{agent}->{host}:{port}", host, port) for host, port in self.hubs]

    @property
    def urls(self) -> list[str]:
        return [link.url for link in self.links]

    @property
    def mode(self) -> Mode:
        return self.links[0].mode

    @property
    def open_connections(self) -> int:
        return sum(link.open_connections for link in self.links)

    @property
    def leader_hints_rewritten(self) -> int:
        return sum(link.leader_hints_rewritten for link in self.links)

    async def start(self) -> None:
        for link in self.links:
            await link.start()
        hub_to_link = {
            f"http://{host}:{port}": link.url
            for (host, port), link in zip(self.hubs, self.links, strict=True)
        }
        for link in self.links:
            link.leader_urls = hub_to_link

    async def stop(self) -> None:
        for link in self.links:
            await link.stop()

    async def set_mode(self, mode: Mode) -> None:
        for link in self.links:
            await link.set_mode(mode)
