"""Followers of a workload's whole log share one agent stream: the hub opens it once, and
every follower gets every line in order; one arriving later reads what the stream brought
so far from the hub's store and then the live lines, with no gap and no line twice; when the
store does not hold exactly what the stream brought, the late follower gets a stream of its
own; the agent stream closes when its last follower leaves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from api.v1alpha1.messages import DispatchOffer, LogClose, LogData, LogOpen, WorkloadPhase
from hub.loghub import LogHub, LogRequest
from tests.hub.service.conftest import HubUnderTest, ScriptedAgent, connect_agent
from tests.hub.service.test_dispatch_flow import _bound_to, eventually, report, submit, two_clusters
from tests.hub.service.test_logs import numbered, until


async def running_on_west(hub: HubUnderTest) -> tuple[list[ScriptedAgent], ScriptedAgent, str]:
    """A workload running on west (bound there, so its lines are stored), and west's log
    lane."""
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    await eventually(lambda: _bound_to(hub, key, "west"))
    logs = await connect_agent(hub, "west", lane="logs")
    return [east, west, logs], logs, key


async def send_lines(logs: ScriptedAgent, stream_id: str, key: str, first: int, count: int) -> None:
    await logs.send(
        LogData(
            stream_id=stream_id,
            workload=key,
            cluster="west",
            pod="train-0",
            container="main",
            lines=numbered(first, count),
            seq=first,
            from_start=True,
        )
    )


async def send_end(logs: ScriptedAgent, stream_id: str, key: str) -> None:
    await logs.send(
        LogData(stream_id=stream_id, workload=key, cluster="west", pod="", container="", eof=True)
    )


async def read_all(first: bytes, rest: AsyncIterator[bytes]) -> list[dict[str, Any]]:
    chunks = [first]
    async for chunk in rest:
        chunks.append(chunk)
    return [json.loads(line) for line in b"".join(chunks).decode().splitlines()]


async def no_more(logs: ScriptedAgent, kind: type) -> None:
    with pytest.raises(TimeoutError):
        await logs.expect(kind, within=0.3)


def lines_of(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    assert all("event" not in r for r in records), records
    return [(r["seq"], r["line"]) for r in records]


WHOLE = [(n, f"train-0 line {n}") for n in range(1, 1001)]


async def test_two_followers_share_one_agent_stream_and_both_get_every_line(
    hub: HubUnderTest,
) -> None:
    lanes, logs, key = await running_on_west(hub)
    loghub: LogHub = hub.hub.logs
    one = loghub.stream("west", LogRequest(key, follow=True))
    two = loghub.stream("west", LogRequest(key, follow=True))
    first_one = asyncio.ensure_future(anext(one))
    opened = await logs.expect(LogOpen)
    first_two = asyncio.ensure_future(anext(two))
    await no_more(logs, LogOpen)
    for first in (1, 501):
        await send_lines(logs, opened.stream_id, key, first, 500)
    await send_end(logs, opened.stream_id, key)
    assert lines_of(await read_all(await first_one, one)) == WHOLE
    assert lines_of(await read_all(await first_two, two)) == WHOLE
    for lane in lanes:
        await lane.close()


async def test_a_late_follower_reads_the_store_then_the_live_lines_without_gap_or_repeat(
    hub: HubUnderTest,
) -> None:
    lanes, logs, key = await running_on_west(hub)
    loghub: LogHub = hub.hub.logs
    early = loghub.stream("west", LogRequest(key, follow=True))
    first_early = asyncio.ensure_future(anext(early))
    opened = await logs.expect(LogOpen)
    await send_lines(logs, opened.stream_id, key, 1, 300)
    await send_lines(logs, opened.stream_id, key, 301, 200)
    await until(lambda: loghub.stored_lines >= 500)
    late = loghub.stream("west", LogRequest(key, follow=True))
    caught_up = await anext(late)  # from the store: it has joined the stream
    await no_more(logs, LogOpen)
    await send_lines(logs, opened.stream_id, key, 501, 500)
    await send_end(logs, opened.stream_id, key)
    assert lines_of(await read_all(caught_up, late)) == WHOLE
    assert lines_of(await read_all(await first_early, early)) == WHOLE
    for lane in lanes:
        await lane.close()


async def test_a_late_follower_gets_its_own_stream_when_the_store_lacks_what_was_brought(
    hub: HubUnderTest,
) -> None:
    lanes, logs, key = await running_on_west(hub)
    loghub: LogHub = hub.hub.logs
    bound = loghub.binding
    loghub.binding = lambda _workload: (None, None)  # the first lines are not kept
    early = loghub.stream("west", LogRequest(key, follow=True))
    first_early = asyncio.ensure_future(anext(early))
    opened = await logs.expect(LogOpen)
    await send_lines(logs, opened.stream_id, key, 1, 500)
    got_early = await first_early  # (the hub took the frame)
    loghub.binding = bound
    await send_lines(logs, opened.stream_id, key, 501, 10)
    await until(lambda: loghub.stored_lines >= 10)
    late = loghub.stream("west", LogRequest(key, follow=True))
    first_late = asyncio.ensure_future(anext(late))
    own = await logs.expect(LogOpen)
    assert own.stream_id != opened.stream_id and own.tail_lines is None
    await send_end(logs, opened.stream_id, key)
    await send_lines(logs, own.stream_id, key, 1, 1000)
    await send_end(logs, own.stream_id, key)
    assert lines_of(await read_all(await first_late, late)) == WHOLE
    assert lines_of(await read_all(got_early, early)) == WHOLE[:510]
    for lane in lanes:
        await lane.close()


async def test_the_agent_stream_closes_when_its_last_follower_leaves(hub: HubUnderTest) -> None:
    lanes, logs, key = await running_on_west(hub)
    loghub: LogHub = hub.hub.logs
    one = loghub.stream("west", LogRequest(key, follow=True))
    two = loghub.stream("west", LogRequest(key, follow=True))
    first_one = asyncio.ensure_future(anext(one))
    opened = await logs.expect(LogOpen)
    first_two = asyncio.ensure_future(anext(two))
    await send_lines(logs, opened.stream_id, key, 1, 10)
    await first_one
    await first_two
    await one.aclose()
    await no_more(logs, LogClose)
    await two.aclose()
    closed = await logs.expect(LogClose)
    assert closed.stream_id == opened.stream_id
    for lane in lanes:
        await lane.close()
