"""Throughput of the hub's stores: creates/s and CAS updates/s with 1 and 50 concurrent
writers, and watch delivery (live and replayed), for SqliteStore and EtcdStore; prints JSON.

    .venv/bin/python -m bench.store_throughput                    # both stores, data on disk
    .venv/bin/python -m bench.store_throughput --stores sqlite --writes 2000
    .venv/bin/python -m bench.store_throughput --tmpfs            # data on /dev/shm

Every write is durable when it returns (SQLite: WAL + synchronous=FULL, group committed;
etcd: its own fsync'd raft log), so with data on disk the figures include real fsyncs. The
etcd server is a local single member started here (Debian's etcd-server); it is stopped at
the end. Figures depend heavily on the disk: compare stores within one run.

Recorded 2026-12-02 (2 shared cores, virtio disk, 478-byte values, median of 3 runs, ops/s):

    store    creates 1w  creates 50w  CAS 1w  CAS 50w  watch live  watch replay
    sqlite        2,093       14,347   2,492   25,883      12,742       123,075
    etcd            875        2,567     811    3,317       3,021         9,495

SQLite p50/p99 per create: 0.42/1.45 ms alone, 3.2/8.0 ms among 50 writers (group commit:
~50 writes per fsync). etcd 3.4 single member: 1.0/4.0 ms and 17/45 ms; its client side
(grpc aio + protobuf in Python) shares the two cores with the server.

`cpu_us_per_paced_write`: this process's CPU per write when writes come one at a time with
a pause between them (`cpu_per_paced_write`), the hub's case under a steady trickle of work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.quantiles import nearest_rank
from hub.store.base import Revision, Store
from hub.store.etcd import EtcdStore
from hub.store.localetcd import LocalEtcd
from hub.store.sqlite import SqliteStore

VALUE = {"apiVersion": "multiq.dev/v1alpha1", "kind": "Workload", "spec": {"pad": "x" * 400}}


async def timed(
    writers: int, per_writer: int, op: Callable[[int, int], Awaitable[None]]
) -> dict[str, float]:
    """Run `op(writer, i)` for `per_writer` i in each of `writers` concurrent tasks."""
    latencies: list[float] = []

    async def writer(w: int) -> None:
        for i in range(per_writer):
            t = time.perf_counter()
            await op(w, i)
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    wall = time.perf_counter() - start
    latencies.sort()
    return {
        "ops": writers * per_writer,
        "seconds": round(wall, 3),
        "ops_per_s": round(writers * per_writer / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1e3, 2),
        "p99_ms": round(nearest_rank(latencies, 0.99) * 1e3, 2),
    }


async def bench_store(store: Store, *, writes: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for writers in (1, 50):
        per = max(1, (writes // 5 if writers == 1 else writes) // writers)
        tag = f"w{writers}"

        async def create(w: int, i: int, tag: str = tag) -> None:
            await store.create(f"/bench/create-{tag}/{w}-{i}", VALUE)

        results[f"creates_{writers}_writers"] = await timed(writers, per, create)

        revisions = {}
        for w in range(writers):
            obj = await store.create(f"/bench/cas-{tag}/{w}", {"n": 0, **VALUE})
            revisions[w] = obj.revision

        async def cas(
            w: int, i: int, tag: str = tag, revisions: dict[int, Revision] = revisions
        ) -> None:
            obj = await store.update(
                f"/bench/cas-{tag}/{w}", {"n": i + 1, **VALUE}, expected=revisions[w]
            )
            revisions[w] = obj.revision

        results[f"cas_updates_{writers}_writers"] = await timed(writers, per, cas)

    results["watch"] = await bench_watch(store, events=writes)
    results["cpu_us_per_paced_write"] = await cpu_per_paced_write(store, writes=writes // 5)
    return results


async def cpu_per_paced_write(store: Store, *, writes: int, pause: float = 0.002) -> float:
    """This process's CPU time per write when writes come one at a time (a create, then a
    CAS update of it, a pause after each), less that of the pauses alone: what the hub pays
    per write under a steady trickle of work, hand-overs to the store's threads included."""
    started = time.process_time()
    for i in range(writes // 2):
        created = await store.create(f"/bench/paced/{i}", VALUE)
        await asyncio.sleep(pause)
        await store.update(f"/bench/paced/{i}", VALUE, expected=created.revision)
        await asyncio.sleep(pause)
    busy = time.process_time() - started
    started = time.process_time()
    for _ in range(writes // 2 * 2):
        await asyncio.sleep(pause)
    idle = time.process_time() - started
    return round((busy - idle) * 1e6 / (writes // 2 * 2), 1)


async def bench_watch(store: Store, *, events: int) -> dict[str, Any]:
    """Live: a watcher follows 50 concurrent writers; replay: a new watcher reads it back."""
    start_revision = await store.current_revision()
    received = 0
    done = asyncio.Event()

    async def watcher() -> None:
        nonlocal received
        async with store.watch("/bench/watch/", since=start_revision) as stream:
            async for _ in stream:
                received += 1
                if received == events:
                    done.set()
                    return

    # A live watcher must keep up: its buffer is larger than the burst here.
    task = asyncio.create_task(watcher())
    await asyncio.sleep(0.1)
    t0 = time.perf_counter()
    per = events // 50

    async def write(w: int) -> None:
        for i in range(per):
            await store.create(f"/bench/watch/{w}-{i}", VALUE)

    await asyncio.gather(*(write(w) for w in range(50)))
    t_written = time.perf_counter()
    await asyncio.wait_for(done.wait(), 60)
    t_received = time.perf_counter()
    await task

    t1 = time.perf_counter()
    replayed = 0
    async with store.watch("/bench/watch/", since=start_revision) as stream:
        async for _ in stream:
            replayed += 1
            if replayed == per * 50:
                break
    t2 = time.perf_counter()
    return {
        "events": per * 50,
        "live_events_per_s": round(per * 50 / (t_received - t0), 1),
        "last_event_lag_ms": round((t_received - t_written) * 1e3, 2),
        "replay_events_per_s": round(per * 50 / (t2 - t1), 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    base = Path("/dev/shm") if args.tmpfs else None
    work = Path(tempfile.mkdtemp(prefix="multiq-bench-store-", dir=base))
    out: dict[str, Any] = {
        "benchmark": "store_throughput",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "data_on": "tmpfs" if args.tmpfs else "disk",
        "value_bytes": len(json.dumps(VALUE)),
    }
    try:
        if "sqlite" in args.stores:
            store = await SqliteStore.open(work / "store.db", watch_buffer=args.writes + 10)
            try:
                out["sqlite"] = await bench_store(store, writes=args.writes)
                out["sqlite"]["commits"] = store.commits
            finally:
                await store.close()
        if "etcd" in args.stores:
            server = await asyncio.to_thread(LocalEtcd.start, work / "etcd")
            try:
                etcd = await EtcdStore.connect(
                    server.host, server.port, watch_buffer=args.writes + 10
                )
                try:
                    out["etcd"] = await bench_store(etcd, writes=args.writes)
                finally:
                    await etcd.close()
            finally:
                await asyncio.to_thread(server.stop)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stores", default="sqlite,etcd", type=lambda s: s.split(","))
    parser.add_argument("--writes", type=int, default=5000, help="writes per 50-writer phase")
    parser.add_argument("--tmpfs", action="store_true", help="keep data on /dev/shm")
    args = parser.parse_args()
    json.dump(asyncio.run(run(args)), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
