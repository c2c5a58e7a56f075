"""Benchmark: watch events per second delivered to 10 watchers over HTTP (target >= 10,000/s).

Ten aiohttp clients watch ConfigMaps in one namespace of an in-process kubesim cluster (same
event loop, so client parsing is counted against the budget too) while the writer creates
and updates ConfigMaps through the object registry as fast as it can. The figure is total
events received by all watchers divided by the time from the first write to the last event
received. Prints one JSON object.

    .venv/bin/python -m bench.kubesim_watch [--watchers 10] [--writes 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from kubesim.cluster import ClusterConfig
from kubesim.testing import running


async def _watch(
    session: aiohttp.ClientSession,
    url: str,
    expected: int,
    ready: asyncio.Event,
    counts: list[int],
    slot: int,
) -> float:
    params = {"watch": "true", "resourceVersion": "1", "allowWatchBookmarks": "true"}
    async with session.get(
        url, params=params, timeout=aiohttp.ClientTimeout(total=None)
    ) as response:
        ready.set()
        received = 0
        async for line in response.content:
            if b'"type":"BOOKMARK"' in line[:20]:
                continue
            json.loads(line)
            received += 1
            counts[slot] = received
            if received >= expected:
                return time.perf_counter()
    return time.perf_counter()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--writes", type=int, default=5000)
    args = parser.parse_args()
    template = ClusterConfig(
        record_events=False, history_limit=args.writes * 2 + 100, lease_interval=60.0
    )
    async with running(nodes=1, template=template) as sim:
        cluster = sim.clusters[0]
        configmaps = cluster.types.core("configmaps")
        url = sim.urls["sim-0"] + "/api/v1/namespaces/bench/configmaps"
        cluster.registry.create(cluster.types.core("namespaces"), {"metadata": {"name": "bench"}})
        counts = [0] * args.watchers
        async with aiohttp.ClientSession() as session:
            readies = [asyncio.Event() for _ in range(args.watchers)]
            tasks = [
                asyncio.create_task(_watch(session, url, args.writes, readies[i], counts, i))
                for i in range(args.watchers)
            ]
            for ready in readies:
                await ready.wait()
            await asyncio.sleep(0.2)
            started = time.perf_counter()
            for index in range(args.writes):
                cluster.registry.create(
                    configmaps,
                    {"metadata": {"name": f"cm-{index}"}, "data": {"i": str(index)}},
                    namespace="bench",
                )
                if index % 100 == 99:
                    await asyncio.sleep(0)
            finished = await asyncio.gather(*tasks)
        elapsed = max(finished) - started
        total = sum(counts)
        print(
            json.dumps(
                {
                    "benchmark": "kubesim_watch_fanout",
                    "target_events_per_second": 10000,
                    "watchers": args.watchers,
                    "writes": args.writes,
                    "events_delivered": total,
                    "seconds": round(elapsed, 3),
                    "events_per_second": round(total / elapsed, 1),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
