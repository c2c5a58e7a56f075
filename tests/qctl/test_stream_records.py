"""qctl's streams (logs, watch) read newline-delimited JSON a chunk at a time: every record
comes out once and in order however the hub's writes cut the lines — a line split across
writes, many lines in one write, blank lines, a last line without its newline."""

from __future__ import annotations

import asyncio
import itertools
import json

from aiohttp import web
from aiohttp.test_utils import TestServer

from qctl.client import HubClient
from qctl.config import ResolvedContext

RECORDS = [{"line": f"step {n} " + "x" * (n % 7), "seq": n} for n in range(1, 301)]


def pieces() -> list[bytes]:
    """The records' bytes cut at awkward places: mid-line, mid-escape, between lines."""
    data = b"".join(json.dumps(r).encode() + b"\n" for r in RECORDS[:-1])
    data += b"\n" + json.dumps(RECORDS[-1]).encode()  # a blank line; no final newline
    cuts = [0, 3, 4, 90, 91, 92, 500, 2048, 2049, 5000, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts)]


async def test_records_split_across_writes_come_out_whole_once_and_in_order() -> None:
    async def log(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for piece in pieces():
            await response.write(piece)
            await asyncio.sleep(0.01)  # a chunk of its own at the reader
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/log", log)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        context = ResolvedContext(str(server.make_url("")).rstrip("/"), "t0ken", "default", "t")
        async with HubClient(context, timeout=5) as client:
            got = [record async for record in client.stream("/log")]
    finally:
        await server.close()
    assert got == RECORDS
