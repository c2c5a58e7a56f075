"""What fencing deadlines cost: Kubernetes API writes per running workload per minute, from a
real agent on kubesim, for given lease terms.

    .venv/bin/python -m bench.fencing_cost [--workloads 40] [--terms 60/30 6/4] [--window S]

For each `lease/grace` pair: an in-process hub peer (the component tests' `FakeHub`) grants
every renewal with those terms; a real `Agent` runs `--workloads` long Jobs on kubesim
(simulated runtime, pods that outlive the run); once all are running, every write the agent
sends to the API server is counted for `--window` seconds (default: four leases, at least a
minute) through a counting wrapper around its Kubernetes client. A running workload costs
nothing else in steady state, so the writes are the deadline PATCHes; the figure to read is
`writes_per_running_workload_per_minute`. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent.app import Agent
from agent.k8s.client import JsonObject, KubeClient, ObjectList, Resource, WatchEvent, open_client
from agent.lease import LeaseTerms
from agent.settings import AgentSettings
from api.v1alpha1.messages import ConfigSync, WorkloadPhase, WorkloadStatusReport
from kubesim.cluster import ClusterConfig
from kubesim.testing import running
from tests.agent.conftest import (
    CLUSTER,
    TOKEN,
    FakeHub,
    cluster_queue,
    fast_timings,
    flavor,
    job_source,
    local_queue,
    offer_for,
)


class CountingKube:
    """The agent's Kubernetes client, counting the writes that go through it."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.writes: collections.Counter[str] = collections.Counter()

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        return await self.kube.list(resource, namespace=namespace, label_selector=label_selector)

    def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        return self.kube.watch(
            resource,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        )

    async def get(self, resource: Resource, namespace: str | None, name: str) -> JsonObject:
        return await self.kube.get(resource, namespace, name)

    async def create(
        self, resource: Resource, namespace: str | None, body: JsonObject
    ) -> JsonObject:
        self.writes[f"create {resource}"] += 1
        return await self.kube.create(resource, namespace, body)

    async def patch(
        self, resource: Resource, namespace: str, name: str, body: JsonObject
    ) -> JsonObject:
        self.writes[f"patch {resource}"] += 1
        return await self.kube.patch(resource, namespace, name, body)

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        self.writes[f"delete {resource}"] += 1
        await self.kube.delete(resource, namespace, name, uid=uid)

    def pod_log(self, namespace: str, name: str, **kwargs: Any) -> AsyncIterator[str]:
        return self.kube.pod_log(namespace, name, **kwargs)

    async def server_version(self) -> str:
        return await self.kube.server_version()


async def measure(terms: LeaseTerms, workloads: int, window: float) -> dict[str, Any]:
    config = ConfigSync(
        revision=1,
        resource_flavors=[flavor()],
        cluster_queues=[cluster_queue(cpu=str(workloads))],
        local_queues=[local_queue()],
    )
    hub = FakeHub(config)
    hub.lease = terms
    await hub.start()
    template = ClusterConfig(job_pod_duration=10 * window + 600)
    try:
        async with (
            running(clusters=1, nodes=4, runtime="simulated", template=template) as sim,
            open_client(sim.kubeconfigs[CLUSTER]) as kube,
        ):
            counting = CountingKube(kube)
            with tempfile.TemporaryDirectory() as state:
                settings = AgentSettings(
                    cluster=CLUSTER,
                    hub=hub.url,
                    token=TOKEN,
                    state_dir=Path(state),
                    timings=fast_timings().model_copy(update={"capacity_heartbeat": 10.0}),
                )
                agent = Agent(settings, counting)
                task = asyncio.create_task(agent.run())
                try:
                    await _until(lambda: hub.control is not None, 30)
                    for i in range(workloads):
                        await hub.offer(offer_for(job_source(f"w{i}", cpu="100m")))
                    await _until(lambda: _running(hub) == workloads, 120)
                    await asyncio.sleep(1.0)  # (the last creates are counted out)
                    before = collections.Counter(counting.writes)
                    started = time.monotonic()
                    await asyncio.sleep(window)
                    elapsed = time.monotonic() - started
                    writes = counting.writes - before
                    still = sum(
                        1 for r in agent.admission.held.values() if r.phase is WorkloadPhase.RUNNING
                    )
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
    finally:
        await hub.stop()
    total = sum(writes.values())
    minutes = elapsed / 60
    return {
        "lease_seconds": terms.lease_seconds,
        "grace_seconds": terms.grace_seconds,
        "running_workloads": workloads,
        "still_running_at_the_end": still,
        "window_s": round(elapsed, 1),
        "writes": dict(writes),
        "writes_per_running_workload_per_minute": round(total / workloads / minutes, 2),
        "deadline_patches_per_running_workload_per_minute": round(
            writes["patch jobs"] / workloads / minutes, 2
        ),
    }


def _running(hub: FakeHub) -> int:
    latest: dict[str, WorkloadPhase] = {}
    for report in hub.of_type(WorkloadStatusReport):
        latest[report.workload] = report.phase
    return sum(1 for phase in latest.values() if phase is WorkloadPhase.RUNNING)


async def _until(check: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the setup did not complete in time")
        await asyncio.sleep(0.1)


async def bench(terms: list[LeaseTerms], workloads: int, window: float | None) -> dict[str, Any]:
    results = []
    for one in terms:
        span = window if window is not None else max(60.0, 4 * one.lease_seconds)
        results.append(await measure(one, workloads, span))
    return {"benchmark": "fencing_cost", "results": results}


def _terms(text: str) -> LeaseTerms:
    lease, _, grace = text.partition("/")
    return LeaseTerms(lease_seconds=float(lease), grace_seconds=float(grace))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument(
        "--terms", nargs="+", type=_terms, default=[_terms("60/30"), _terms("6/4")],
        help="lease/grace pairs in seconds (default: 60/30 6/4)",
    )  # fmt: skip
    parser.add_argument("--window", type=float, default=None, help="seconds measured per pair")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(bench(args.terms, args.workloads, args.window)), indent=2))


if __name__ == "__main__":
    main()
