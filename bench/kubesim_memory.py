"""Benchmark: resident memory of a 5,000-node kubesim cluster (target < 1 GiB).

Starts one in-process cluster with `--nodes` nodes (from examples/kubesim/scale.profile), waits
until every node has its Lease, optionally runs `--pods` simulated pods to completion, lets
node leases renew for a few seconds, then reports VmRSS and VmHWM from /proc/self/status.
Prints one JSON object.

    .venv/bin/python -m bench.kubesim_memory [--nodes 5000] [--pods 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubesim.cluster import ClusterConfig
from kubesim.profile import load_profile
from kubesim.testing import running


async def _until(condition: Callable[[], bool], interval: float) -> None:
    """Poll `condition` (cheap, in-process state) until it holds."""
    while True:
        if condition():
            return
        await asyncio.sleep(interval)


PROFILE = Path(__file__).resolve().parents[1] / "examples" / "kubesim" / "scale.profile"


def _memory() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of lease renewals")
    args = parser.parse_args()
    baseline = _memory()["VmRSS"]
    started = time.perf_counter()
    template = ClusterConfig(lease_interval=10.0, record_events=True)
    async with running(profile=load_profile(PROFILE), nodes=args.nodes, template=template) as sim:
        cluster = sim.clusters[0]
        leases = cluster.types.core("leases")
        await _until(lambda: cluster.store.bucket(leases).count >= args.nodes, 0.05)
        boot_seconds = time.perf_counter() - started
        pods = cluster.types.core("pods")
        for index in range(args.pods):
            pod: dict[str, Any] = {
                "metadata": {"name": f"p-{index}", "annotations": {"kubesim.dev/duration": "0"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]},
            }
            cluster.registry.create(pods, pod, namespace="default")
            if index % 500 == 499:
                await asyncio.sleep(0)

        def all_succeeded() -> bool:
            phases = (p.get("status", {}).get("phase") for p in cluster.store.list(pods, "default"))
            done: int = sum(1 for phase in phases if phase == "Succeeded")
            return done >= int(args.pods)

        await _until(all_succeeded, 0.2)
        await asyncio.sleep(args.settle)
        gc.collect()
        memory = _memory()
        print(
            json.dumps(
                {
                    "benchmark": "kubesim_memory",
                    "target_rss_bytes": 1 << 30,
                    "nodes": args.nodes,
                    "pods_completed": args.pods,
                    "boot_seconds": round(boot_seconds, 2),
                    "rss_bytes": memory["VmRSS"],
                    "rss_mib": round(memory["VmRSS"] / 2**20, 1),
                    "peak_rss_mib": round(memory["VmHWM"] / 2**20, 1),
                    "interpreter_baseline_mib": round(baseline / 2**20, 1),
                    "objects": {b.resource.plural: b.count for b in cluster.store.buckets()},
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
