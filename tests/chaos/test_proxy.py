"""The chaos link between an agent and the hub: it passes bytes both ways, cuts (resets every
connection and refuses new ones), black-holes (holds every byte, both ways, on old and new
connections alike) and heals, on one port throughout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from e2e.chaos.proxy import FaultyLink, Mode

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
