"""Benchmark: what one Deployment pod costs in memory, in kubesim and on the host.

Three figures, printed as one JSON object:
* `process_pod`: RSS of a process-runtime Deployment pod's process tree (its container runs
  `sleep`, behind the private mount namespace and volumes kubesim sets up), against a bare
  `sleep` started directly with only a PATH (a container's environment has no locale
  either) — what the runtime adds per pod;
* `kubesim_per_pod`: how much kubesim's own RSS grows per Deployment pod (simulated runtime:
  the Deployment, ReplicaSet, pod objects, their history, events and watch history);
* the pod count each was measured over.

    .venv/bin/python -m bench.kubesim_pod_memory [--process-pods 5] [--simulated-pods 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
from pathlib import Path
from typing import Any

from kubesim.cluster import Cluster
from kubesim.kubelet.process import ProcessRuntime
from kubesim.testing import running


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        queue.extend(children.get(current, []))
    return found


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": "x", "command": ["sleep", "300"]}]
                },
            },
        },
    }


async def _rolled_out(cluster: Cluster, name: str, replicas: int) -> None:
    deployments = cluster.types.core("deployments")
    while True:
        found = cluster.store.get(deployments, "default", name) or {}
        if found.get("status", {}).get("availableReplicas", 0) == replicas:
            return
        await asyncio.sleep(0.05)


async def _process_pods(count: int) -> dict[str, Any]:
    # With a container's kind of environment, not this process's: a LANG in it makes `sleep`
    # load its locale, ~300 KiB more than the pod's `sleep`, which gets none.
    bare = await asyncio.create_subprocess_exec(
        "sleep", "300", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    )
    try:
        await asyncio.sleep(0.3)
        bare_kib = _rss_kib(bare.pid)
    finally:
        bare.kill()
        await bare.wait()
    async with running(nodes=2, runtime="process") as sim:
        cluster = sim.clusters[0]
        cluster.registry.create(cluster.types.core("deployments"), _deployment("mem", count))
        await asyncio.wait_for(_rolled_out(cluster, "mem", count), 60)
        await asyncio.sleep(0.5)
        runtime = cluster.kubelet.runtimes["process"]
        assert isinstance(runtime, ProcessRuntime)
        trees = []
        for run in runtime._pods.values():
            for process in run.processes.values():
                trees.append(sum(_rss_kib(pid) for pid in _tree(process.pid)))
    per_pod = sum(trees) / len(trees)
    return {
        "pods": len(trees),
        "pod_tree_rss_kib": round(per_pod),
        "bare_sleep_rss_kib": bare_kib,
        "ratio": round(per_pod / bare_kib, 2) if bare_kib else None,
    }


async def _kubesim_per_pod(count: int) -> dict[str, Any]:
    async with running(nodes=50) as sim:
        cluster = sim.clusters[0]
        await asyncio.sleep(0.5)
        gc.collect()
        before = _rss_kib(os.getpid())
        cluster.registry.create(cluster.types.core("deployments"), _deployment("many", count))
        await asyncio.wait_for(_rolled_out(cluster, "many", count), 300)
        await asyncio.sleep(0.5)
        gc.collect()
        after = _rss_kib(os.getpid())
    return {"pods": count, "kib_per_pod": round((after - before) / count, 1)}


async def main(process_pods: int, simulated_pods: int) -> None:
    result = {
        "benchmark": "kubesim_pod_memory",
        "process_pod": await _process_pods(process_pods),
        "kubesim_per_pod": await _kubesim_per_pod(simulated_pods),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-pods", type=int, default=5)
    parser.add_argument("--simulated-pods", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(main(args.process_pods, args.simulated_pods))
