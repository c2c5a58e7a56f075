"""Benchmark: pod lifecycles per second in kubesim's simulated runtime (target >= 500/s).

A lifecycle is create -> scheduled -> Running -> Succeeded, driven by the scheduler and the
simulated kubelet of one in-process cluster. Two workloads: bare pods created through the
object registry (what the controllers and the API handlers call), and pods of Jobs run by the
Job controller (which adds tracking-finalizer bookkeeping and Job status writes); and pods
created over HTTP with kubernetes_asyncio (client and server share this process and its CPU).
Prints one JSON object.

    .venv/bin/python -m bench.kubesim_lifecycle [--pods 5000] [--nodes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from kubesim.cluster import ClusterConfig
from kubesim.testing import running


async def _until(condition: Callable[[], bool], interval: float) -> None:
    """Poll `condition` (cheap, in-process state) until it holds."""
    while True:
        if condition():
            return
        await asyncio.sleep(interval)


def _pod(index: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{index}", "annotations": {"kubesim.dev/duration": "0"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }


async def _bare_pods(count: int, nodes: int, events: bool) -> dict[str, Any]:
    template = ClusterConfig(record_events=events, lease_interval=60.0, history_limit=2000)
    async with running(nodes=nodes, template=template) as sim:
        cluster = sim.clusters[0]
        pods = cluster.types.core("pods")
        succeeded = 0

        def count_success(event: Any) -> None:
            nonlocal succeeded
            if (
                event.obj.get("status", {}).get("phase") == "Succeeded"
                and (event.old or {}).get("status", {}).get("phase") != "Succeeded"
            ):
                succeeded += 1

        cluster.store.subscribe(pods, count_success)
        started = time.perf_counter()
        for index in range(count):
            cluster.registry.create(pods, _pod(index), namespace="default")
            if index % 200 == 199:
                await asyncio.sleep(0)
        await _until(lambda: succeeded >= count, 0.01)
        elapsed = time.perf_counter() - started
        return {
            "pods": count,
            "seconds": round(elapsed, 3),
            "lifecycles_per_second": round(count / elapsed, 1),
        }


async def _job_pods(count: int, nodes: int, events: bool) -> dict[str, Any]:
    template = ClusterConfig(record_events=events, lease_interval=60.0, history_limit=2000)
    async with running(nodes=nodes, template=template) as sim:
        cluster = sim.clusters[0]
        jobs = cluster.types.core("jobs")
        per_job = 50
        started = time.perf_counter()
        names = []
        for index in range(count // per_job):
            job = {
                "metadata": {"name": f"j-{index}"},
                "spec": {
                    "completions": per_job,
                    "parallelism": per_job,
                    "template": {
                        "metadata": {"annotations": {"kubesim.dev/duration": "0"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "m", "image": "x"}],
                        },
                    },
                },
            }
            cluster.registry.create(jobs, job, namespace="default")
            names.append(f"j-{index}")

        def done() -> bool:
            for name in names:
                job = cluster.store.get(jobs, "default", name) or {}
                if job.get("status", {}).get("succeeded", 0) < per_job:
                    return False
            return True

        await _until(done, 0.05)
        elapsed = time.perf_counter() - started
        total = per_job * len(names)
        return {
            "pods": total,
            "jobs": len(names),
            "seconds": round(elapsed, 3),
            "lifecycles_per_second": round(total / elapsed, 1),
        }


async def _http_pods(count: int, nodes: int) -> dict[str, Any]:
    """Pods created over HTTP by kubernetes_asyncio (as an agent would), 50 requests in flight."""
    from kubernetes_asyncio import client, config

    template = ClusterConfig(lease_interval=60.0, history_limit=2000)
    async with running(nodes=nodes, template=template) as sim:
        cluster = sim.clusters[0]
        pods = cluster.types.core("pods")
        succeeded = 0

        def count_success(event: Any) -> None:
            nonlocal succeeded
            old_phase = (event.old or {}).get("status", {}).get("phase")
            if event.obj.get("status", {}).get("phase") == "Succeeded" != old_phase:
                succeeded += 1

        cluster.store.subscribe(pods, count_success)
        api = await config.new_client_from_config(config_file=str(sim.kubeconfig))
        core = client.CoreV1Api(api)
        gate = asyncio.Semaphore(50)

        async def create(index: int) -> None:
            async with gate:
                body: Any = _pod(index)  # the client accepts plain dicts for its models
                await core.create_namespaced_pod("default", body)

        started = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        await _until(lambda: succeeded >= count, 0.01)
        elapsed = time.perf_counter() - started
        await api.close()
        return {
            "pods": count,
            "seconds": round(elapsed, 3),
            "lifecycles_per_second": round(count / elapsed, 1),
        }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    result = {
        "benchmark": "kubesim_pod_lifecycles",
        "target_lifecycles_per_second": 500,
        "bare_pods_with_events": await _bare_pods(args.pods, args.nodes, True),
        "bare_pods_without_events": await _bare_pods(args.pods, args.nodes, False),
        "job_pods_with_events": await _job_pods(args.pods, args.nodes, True),
        "http_created_pods": await _http_pods(min(args.pods, 2000), args.nodes),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
