"""The agent's dispatch path in real time: offers in over the WebSocket, admitted by the
engine, materialised as Jobs on kubesim (simulated runtime), reported back.

    .venv/bin/python -m bench.agent_dispatch [--offers 500] [--nodes 20]

An in-process hub peer (the component tests' `FakeHub`) sends `--offers` small Job offers —
as a burst, or at `--rate` offers/s — into one cluster queue with room for all of them; the
figures are the offer
rate, offer→admitted latency (p50/p99, from the hub's send to the arrival of the workload's
first report as Admitted or later: Jobs that run at once are reported Running first), the
admission throughput, the time until every workload is reported Succeeded, and the CPU this
process spent per workload meanwhile (the agent and the hub peer; kubesim too unless
`--separate` runs it in its own process — use `--separate` to compare the agent's cost), and
how much of it went to the garbage collector, which runs with `multiq-agent`'s settings.
Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agent.app import Agent
from agent.k8s.client import open_client
from api.v1alpha1.messages import ConfigSync, WorkloadPhase, WorkloadStatusReport
from bench.agent_common import collector, kubesim_process, run_like_the_agent, wait_until
from bench.quantiles import nearest_rank
from kubesim.cluster import ClusterConfig
from kubesim.testing import running
from tests.agent.conftest import (
    CLUSTER,
    AgentRunner,
    FakeHub,
    cluster_queue,
    flavor,
    job_source,
    local_queue,
    offer_for,
)

_ADMITTED_OR_LATER = frozenset(
    {WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING, WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED}
)


@asynccontextmanager
async def _kubesim_in_process(nodes: int) -> AsyncIterator[Path]:
    template = ClusterConfig(job_pod_duration=0.5)
    async with running(clusters=1, nodes=nodes, runtime="simulated", template=template) as sim:
        yield sim.kubeconfigs[CLUSTER]


async def bench(
    offers: int, nodes: int, rate: float | None = None, *, separate: bool = False
) -> dict[str, object]:
    config = ConfigSync(
        revision=1,
        resource_flavors=[flavor()],
        cluster_queues=[cluster_queue(cpu=str(offers))],
        local_queues=[local_queue()],
    )
    hub = FakeHub(config)
    await hub.start()
    cluster = (
        kubesim_process(["--nodes", str(nodes), "--job-pod-duration", "0.5"])
        if separate
        else _kubesim_in_process(nodes)
    )
    try:
        async with cluster as kubeconfig, open_client(kubeconfig) as kube:
            with tempfile.TemporaryDirectory() as state:
                runner = AgentRunner(kube, hub, Path(state))
                agent: Agent = await runner.start()
                await wait_until(
                    lambda: hub.control is not None and agent.admission.config is not None
                )
                sent: dict[str, float] = {}
                admitted: dict[str, float] = {}
                done: dict[str, float] = {}
                seen = 0

                def collect() -> None:
                    nonlocal seen
                    for env, now in zip(hub.envelopes[seen:], hub.arrivals[seen:], strict=True):
                        p = env.payload
                        if isinstance(p, WorkloadStatusReport):
                            # An agent whose Jobs run at once reports them Running, or
                            # even Succeeded, without an Admitted report first.
                            if p.phase in _ADMITTED_OR_LATER:
                                admitted.setdefault(p.workload, now)
                            if p.phase is WorkloadPhase.SUCCEEDED:
                                done.setdefault(p.workload, now)
                    seen = len(hub.envelopes)

                collector.clear()
                start = time.perf_counter()
                cpu_start = time.process_time()
                for i in range(offers):
                    if rate is not None:
                        delay = start + i / rate - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    offer = offer_for(job_source(f"b{i}", cpu="1", script="true"))
                    sent[f"team-a/{offer.workload.metadata.name}"] = time.perf_counter()
                    await hub.offer(offer)
                offered = time.perf_counter() - start
                while len(done) < offers and time.perf_counter() - start < 600:
                    collect()
                    await asyncio.sleep(0.02)
                collect()
                total = time.perf_counter() - start
                cpu = time.process_time() - cpu_start
                latencies = [admitted[k] - sent[k] for k in admitted if k in sent]
                cycles = agent.admission.cycles
                await runner.stop()
    finally:
        await hub.stop()
    last_admit = max(admitted.values()) - start if admitted else float("nan")
    return {
        "benchmark": "agent_dispatch",
        "offers": offers,
        "nodes": nodes,
        "target_rate_per_s": rate,
        "kubesim": "separate process" if separate else "in process",
        "offer_rate_per_s": round(offers / offered, 1),
        "admitted": len(admitted),
        "succeeded": len(done),
        "admit_latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "admit_latency_p99_ms": round(nearest_rank(latencies, 0.99) * 1000, 1),
        "admitted_per_s": round(len(admitted) / last_admit, 1),
        "all_succeeded_s": round(total, 2),
        "process_cpu_ms_per_workload": round(cpu * 1000 / offers, 2),
        "gc_ms_per_workload": round(sum(collector) * 1000 / offers, 2),
        "admission_cycles": cycles,
    }


def main() -> None:
    run_like_the_agent()
    parser = argparse.ArgumentParser()
    parser.add_argument("--offers", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rate", type=float, default=None, help="offers/s (default: a burst)")
    parser.add_argument(
        "--separate", action="store_true", help="run kubesim in its own process (2+ cores)"
    )
    args = parser.parse_args()
    result = bench(args.offers, args.nodes, args.rate, separate=args.separate)
    print(json.dumps(asyncio.run(result), indent=2))


if __name__ == "__main__":
    main()
