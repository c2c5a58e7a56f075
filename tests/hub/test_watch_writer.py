"""A watch's events reach its reader in order and whole, and the events that are ready
together go out in one write (hub.http.resources.WatchWriter): a burst of store commits
costs the hub a write per batch, not per event."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from aiohttp import web

from hub.http.resources import WatchWriter


class RecordingResponse:
    """Stands in for the watch's StreamResponse: keeps every write; `gate` holds writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: BaseException | None = None

    async def write(self, data: bytes) -> None:
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.writes.append(data)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in b"".join(self.writes).splitlines()]


def workload(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"queueName": "q"}}


def writer_for(response: RecordingResponse) -> WatchWriter:
    return WatchWriter(cast(web.StreamResponse, response))


async def test_events_ready_together_are_written_in_one_write_in_order() -> None:
    response = RecordingResponse()
    out = writer_for(response)
    for i in range(5):
        await out.send("MODIFIED", workload(f"w{i}"))
    await out.close()
    assert len(response.writes) == 1
    assert [e["object"]["metadata"]["name"] for e in response.events()] == [
        f"w{i}" for i in range(5)
    ]
    assert {e["type"] for e in response.events()} == {"MODIFIED"}


async def test_events_sent_apart_are_each_written_once_the_watch_waits() -> None:
    response = RecordingResponse()
    out = writer_for(response)
    await out.send("ADDED", workload("a"))
    await asyncio.sleep(0.01)
    assert len(response.writes) == 1  # written without waiting for close
    await out.send("DELETED", workload("a"))
    await out.close()
    assert [e["type"] for e in response.events()] == ["ADDED", "DELETED"]


async def test_a_sender_waits_for_the_writer_when_too_much_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    response = RecordingResponse()
    response.gate.clear()  # the reader does not read
    out = writer_for(response)
    monkeypatch.setattr(WatchWriter, "MAX_QUEUED_BYTES", 200)
    await out.send("ADDED", workload("a"))
    await asyncio.sleep(0.01)  # the writer takes it and blocks in the write
    await out.send("ADDED", workload("b"))
    held_back = asyncio.ensure_future(out.send("ADDED", workload("c" * 300)))
    await asyncio.sleep(0.01)
    assert not held_back.done()
    response.gate.set()
    await held_back
    await out.close()
    assert [e["object"]["metadata"]["name"] for e in response.events()] == ["a", "b", "c" * 300]


async def test_a_reader_that_hung_up_ends_the_watch_at_the_next_event() -> None:
    response = RecordingResponse()
    response.fail = ConnectionResetError("gone")
    out = writer_for(response)
    await out.send("ADDED", workload("a"))
    await asyncio.sleep(0.01)
    with pytest.raises(ConnectionResetError):
        await out.send("ADDED", workload("b"))
    await out.close()
