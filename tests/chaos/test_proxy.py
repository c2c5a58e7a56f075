"""The chaos link between an agent and the hub: it passes bytes both ways, cuts (resets every
connection and refuses new ones), black-holes (holds every byte, both ways, on old and new
connections alike) and heals, on one port throughout. With several hubs an agent has a link
to each, switched together, and a follower's leader hint names the agent's link to the
leader, never the leader itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from e2e.chaos.proxy import AgentLinks, FaultyLink, LeaderHintRewriter, Mode

SILENCE = 0.3  # how long "nothing arrives" is watched for


class EchoServer:
    """The far end: echoes every byte and keeps what each connection received."""

    def __init__(self) -> None:
        self.received: list[bytearray] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received = bytearray()
        self.received.append(received)
        try:
            while data := await reader.read(1024):
                received += data
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def close(self) -> None:
        assert self._server is not None
        self._server.close()


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    server = EchoServer()
    await server.start()
    yield server
    server.close()


@pytest.fixture
async def link(echo: EchoServer) -> AsyncIterator[FaultyLink]:
    faulty = FaultyLink("agent-sim-0", "127.0.0.1", echo.port)
    await faulty.start()
    yield faulty
    await faulty.stop()


async def dial(link: FaultyLink) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", link.port)


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 5)


async def test_in_pass_bytes_flow_both_ways(link: FaultyLink, echo: EchoServer) -> None:
    reader, writer = await dial(link)
    assert await exchange(reader, writer, b"hello") == b"hello"
    assert echo.received == [b"hello"]
    assert link.forwarded_bytes == 10
    assert link.url == f"http://127.0.0.1:{link.port}"
    writer.close()


async def test_a_cut_resets_open_connections_and_refuses_new_ones_until_it_heals(
    link: FaultyLink,
) -> None:
    reader, writer = await dial(link)
    assert await exchange(reader, writer, b"a") == b"a"
    port = link.port
    await link.set_mode(Mode.CUT)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await exchange(reader, writer, b"b")
    assert link.open_connections == 0
    with pytest.raises(ConnectionRefusedError):
        await dial(link)
    await link.set_mode(Mode.PASS)
    assert link.port == port
    reader, writer = await dial(link)
    assert await exchange(reader, writer, b"c") == b"c"
    writer.close()


async def test_a_black_hole_forwards_nothing_either_way_then_heals_with_the_held_bytes(
    link: FaultyLink, echo: EchoServer
) -> None:
    old_reader, old_writer = await dial(link)
    assert await exchange(old_reader, old_writer, b"before") == b"before"
    await link.set_mode(Mode.BLACKHOLE)
    old_writer.write(b"held")
    await old_writer.drain()
    new_reader, new_writer = await dial(link)  # accepted, but goes nowhere
    new_writer.write(b"new")
    await new_writer.drain()
    for reader in (old_reader, new_reader):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), SILENCE)
    assert echo.received == [b"before"]  # the new connection did not even reach it
    assert link.open_connections == 2
    await link.set_mode(Mode.PASS)
    assert await asyncio.wait_for(old_reader.readexactly(4), 5) == b"held"
    assert await asyncio.wait_for(new_reader.readexactly(3), 5) == b"new"
    assert sorted(echo.received) == [b"beforeheld", b"new"]
    for writer in (old_writer, new_writer):
        writer.close()


async def test_a_black_hole_then_a_cut_resets_the_held_connections(link: FaultyLink) -> None:
    reader, writer = await dial(link)
    await link.set_mode(Mode.BLACKHOLE)
    await link.set_mode(Mode.CUT)
    assert link.open_connections == 0
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await exchange(reader, writer, b"x")


async def test_a_connection_whose_upstream_is_down_is_closed(
    link: FaultyLink, echo: EchoServer
) -> None:
    echo.close()
    await asyncio.sleep(0)
    reader, writer = await dial(link)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


# --- the leader hint ------------------------------------------------------------------------

HUB_B = "http://127.0.0.1:8002"
LINK_B = "http://127.0.0.1:9002"


def refusal(leader: str, body: bytes = b'{"kind":"Status","code":503}') -> bytes:
    """A follower's answer to an agent's dial (hub.http.leader), as aiohttp writes it."""
    return (
        b"HTTP/1.1 503 Service Unavailable\r\n"
        b"Content-Type: application/json; charset=utf-8\r\n"
        + f"X-MultiQ-Leader: {leader}\r\n".encode()
        + f"Content-Length: {len(body)}\r\n".encode()
        + b"\r\n"
        + body
    )


UPGRADE = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
    b"Sec-WebSocket-Accept: abc=\r\n\r\n"
)


def feed_in_pieces(rewriter: LeaderHintRewriter, stream: bytes, size: int) -> bytes:
    out = b"".join(rewriter.feed(stream[i : i + size]) for i in range(0, len(stream), size))
    return out + rewriter.flush()


def test_a_followers_leader_hint_is_rewritten_to_the_agents_link_to_the_leader() -> None:
    rewriter = LeaderHintRewriter({HUB_B: LINK_B})
    out = rewriter.feed(refusal(HUB_B))
    assert out == refusal(LINK_B)
    assert rewriter.rewritten == 1


def test_the_hint_is_rewritten_however_the_stream_is_cut_and_the_body_is_left_alone() -> None:
    # The body names the hub too, and keep-alive brings a second refusal on one connection.
    body = f'{{"message":"the leader is {HUB_B}"}}'.encode()
    stream = refusal(HUB_B, body) + refusal(HUB_B + "/")
    for size in (1, 7, 64, len(stream)):
        rewriter = LeaderHintRewriter({HUB_B + "/": LINK_B})
        assert feed_in_pieces(rewriter, stream, size) == refusal(LINK_B, body) + refusal(LINK_B)
        assert rewriter.rewritten == 2


def test_a_hub_the_link_does_not_know_is_named_as_it_is() -> None:
    rewriter = LeaderHintRewriter({HUB_B: LINK_B})
    assert rewriter.feed(refusal("http://elsewhere:1")) == refusal("http://elsewhere:1")
    assert rewriter.rewritten == 0


def test_after_the_websocket_upgrade_every_byte_passes_as_it_comes() -> None:
    # A frame that happens to look like a hint is the session's data, not a header.
    frames = b"\x81\x20" + f"X-MultiQ-Leader: {HUB_B}\r\n\r\n".encode()
    rewriter = LeaderHintRewriter({HUB_B: LINK_B})
    assert rewriter.feed(UPGRADE[:20]) == b""  # an incomplete head is held…
    assert rewriter.feed(UPGRADE[20:] + frames[:5]) == UPGRADE + frames[:5]  # …then let go
    assert rewriter.feed(frames[5:]) == frames[5:]
    assert rewriter.rewritten == 0


def test_a_response_without_a_length_ends_the_reading() -> None:
    head = f"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-MultiQ-Leader: {HUB_B}\r\n\r\n"
    later = refusal(HUB_B)
    rewriter = LeaderHintRewriter({HUB_B: LINK_B})
    out = rewriter.feed(head.encode() + b"5\r\nhello\r\n" + later)
    assert out == head.replace(HUB_B, LINK_B).encode() + b"5\r\nhello\r\n" + later


class FakeHub:
    """A hub's port that refuses agents as a follower does, naming `leader`, or accepts."""

    def __init__(self, leader: str | None = None) -> None:
        self.leader = leader
        self.port = 0
        self.dialled = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.dialled += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(refusal(self.leader) if self.leader else UPGRADE + b"session")
        await writer.drain()
        writer.close()

    def close(self) -> None:
        assert self._server is not None
        self._server.close()


async def dial_hub(url: str) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /agent/v1/session HTTP/1.1\r\nHost: hub\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


async def test_an_agent_told_of_the_leader_by_a_follower_dials_it_through_its_own_link() -> None:
    leader, follower = FakeHub(), FakeHub()
    await leader.start()
    await follower.start()
    follower.leader = leader.url
    links = AgentLinks("agent-sim-0", [("127.0.0.1", follower.port), ("127.0.0.1", leader.port)])
    await links.start()
    try:
        to_follower, to_leader = links.urls
        answer = await dial_hub(to_follower)
        assert f"X-MultiQ-Leader: {to_leader}\r\n".encode() in answer
        assert links.leader_hints_rewritten == 1
        assert await dial_hub(to_leader) == UPGRADE + b"session"
        await links.set_mode(Mode.CUT)  # every hub is cut off from the agent at once
        assert links.mode is Mode.CUT
        for url in links.urls:
            with pytest.raises(ConnectionRefusedError):
                await dial_hub(url)
        assert (follower.dialled, leader.dialled) == (1, 1)
    finally:
        await links.stop()
        leader.close()
        follower.close()
