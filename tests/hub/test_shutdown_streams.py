"""A stopping hub ends its open watches and log follows at once and cleanly, instead of
waiting for them: aiohttp waits up to a minute for running handlers, and a watch with nothing
to say never ends by itself (`qctl dev` killed such a hub after 10 s)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from bench.federation_dispatch import small_job
from hub.http.streams import OpenStreams
from qctl.commands.dev import DevFederation

API = "/apis/multiq.dev/v1alpha1"


class TestOpenStreams:
    async def test_ending_them_stops_each_where_it_waits_and_without_an_error(self) -> None:
        streams = OpenStreams()
        ended: list[int] = []

        async def stream(n: int) -> None:
            async with streams.until_shutdown():
                await asyncio.Event().wait()
            ended.append(n)

        tasks = [asyncio.create_task(stream(n)) for n in range(3)]
        await asyncio.sleep(0)
        assert len(streams) == 3
        streams.end_all()
        async with asyncio.timeout(1):
            await asyncio.gather(*tasks)
        assert sorted(ended) == [0, 1, 2]
        assert len(streams) == 0

    async def test_one_opened_after_the_end_ends_at_its_first_wait(self) -> None:
        streams = OpenStreams()
        streams.end_all()
        async with asyncio.timeout(1), streams.until_shutdown():
            await asyncio.Event().wait()

    async def test_a_streams_own_timeout_is_not_taken_for_the_shutdown(self) -> None:
        streams = OpenStreams()
        with pytest.raises(TimeoutError):
            async with streams.until_shutdown(), asyncio.timeout(0.01):
                await asyncio.Event().wait()

    async def test_one_that_ends_by_itself_is_forgotten(self) -> None:
        streams = OpenStreams()
        async with streams.until_shutdown():
            assert len(streams) == 1
        assert len(streams) == 0


async def _read_to_the_end(session: aiohttp.ClientSession, url: str, opened: asyncio.Event) -> int:
    """Reads a streamed response to its end; raises if it ends without its last chunk."""
    async with session.get(url) as response:
        assert response.status == 200, await response.text()
        opened.set()
        return len(await response.read())  # aiohttp.ClientPayloadError if cut off


@pytest.mark.e2e
@pytest.mark.slow
def test_a_hub_stopped_with_a_watch_and_a_log_follow_open_ends_both_cleanly_and_exits_at_once(
    tmp_path: Path,
) -> None:
    fed = DevFederation(tmp_path, clusters=1, port=0)
    fed.start_hub_only()  # no cluster: the workload waits, so its log follow waits too
    try:

        async def scenario() -> float:
            headers = {"Authorization": f"Bearer {fed.admin_token}"}
            async with aiohttp.ClientSession(fed.url, headers=headers) as session:
                async with session.post(
                    f"{API}/namespaces/default/submissions", json=small_job("waits")
                ) as created:
                    assert created.status == 201, await created.text()
                    name = (await created.json())["metadata"]["name"]
                opened = [asyncio.Event(), asyncio.Event()]
                readers = [
                    asyncio.create_task(
                        _read_to_the_end(
                            session, f"{API}/namespaces/default/workloads?watch=true", opened[0]
                        )
                    ),
                    asyncio.create_task(
                        _read_to_the_end(
                            session,
                            f"{API}/namespaces/default/workloads/{name}/log?follow=true",
                            opened[1],
                        )
                    ),
                ]
                async with asyncio.timeout(10):
                    await asyncio.gather(*(o.wait() for o in opened))
                await asyncio.sleep(0.5)  # both handlers are waiting now
                assert not any(r.done() for r in readers)
                started = time.monotonic()
                await asyncio.to_thread(fed.stop)  # SIGTERM; SIGKILL after 10 s
                stopped = time.monotonic() - started
                async with asyncio.timeout(5):
                    watched, followed = await asyncio.gather(*readers)
                assert watched > 0  # the workload's ADDED event came before the end
                assert followed == 0  # no lines: it never ran
                return stopped

        assert asyncio.run(scenario()) < 5
    finally:
        fed.stop()
