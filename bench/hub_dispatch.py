"""Benchmark: the hub alone — its submit and dispatch capacity, with agents played by peers.

Starts the real hub (`multiq-hub`, SQLite store) as its own process and, in this process,
N peers that speak the agent protocol over real WebSockets the way an agent does: Hello,
capacity reports every second, and for every DispatchOffer an Admitted report at once and a
Running report (pods ready) shortly after. No kubesim and no agents run, so on a small machine
the hub gets a core of its own; what is measured is the hub's work per workload and the rate
it sustains, the figure that bounds a federation whose agents run in their own clusters.
`bench.federation_dispatch` measures the whole path with real agents and clusters.

    .venv/bin/python -m bench.hub_dispatch [--workloads 2000] [--paced 1000] [--rate 200]
        [--clusters 3] [--absent 0] [--fleet-quota CPU] [--backlog 0]

Phases as in `bench.federation_dispatch`: a burst of submissions from 32 concurrent clients
(submit rate, dispatch rate = admitted on a cluster per second until the last one), then a
paced run (submit→admitted p50/p99 as seen on the hub's watch). Each phase reports the hub's
CPU milliseconds per workload. `--absent N` registers N more member clusters whose agents
never connect, as when a cluster is down; `--fleet-quota CPU` puts a fleet quota on the
default GlobalQueue; `--backlog N` first submits N workloads that fit on no cluster (200,000
CPUs each, so with a `--fleet-quota` below that the quota holds them back instead), so every
dispatch cycle has a deep queue to consider. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from api.quantity import Quantity
from api.v1alpha1.federation import GlobalQueue
from api.v1alpha1.messages import (
    CapacityReport,
    DispatchOffer,
    Envelope,
    Hello,
    LeaseRenew,
    Payload,
    PodCounts,
    QueueCapacity,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission, PodSetAssignment
from bench.federation_dispatch import (
    AdmissionWatch,
    CpuMeter,
    latency,
    small_job,
    submit_concurrently,
    throughput,
)
from qctl.client import HubClient
from qctl.commands.dev import DevFederation

RUNNING_AFTER_SECONDS = 0.2


class PeerAgent:
    """Plays one agent: admits every offer at once, reports it running a moment later."""

    def __init__(self, name: str, url: str, token: str) -> None:
        self.name, self.url, self.token = name, url, token
        self.seq = 0
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.offers = 0

    async def send(self, payload: Payload) -> None:
        assert self.ws is not None
        self.seq += 1
        await self.ws.send_str(Envelope.wrap(payload, seq=self.seq).to_json())

    def capacity(self) -> CapacityReport:
        cells = (("cpu", "100000"), ("memory", "1000000Gi"))
        return CapacityReport(
            cluster=self.name,
            observed_at=datetime.now(UTC),
            queues=[
                QueueCapacity(
                    cluster_queue="default",
                    flavor="default",
                    resource=resource,
                    nominal=Quantity.parse(amount),
                    usage=Quantity(0),
                    headroom=Quantity.parse(amount),
                )
                for resource, amount in cells
            ],
        )

    async def run(self, session: aiohttp.ClientSession) -> None:
        self.ws = await session.ws_connect(
            f"{self.url}/agent/v1/session?cluster={self.name}",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        await self.send(Hello(cluster=self.name, agent_version="bench-peer"))
        await self.send(self.capacity())
        reporter = asyncio.create_task(self._report_capacity())
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                payload = Envelope.from_json(msg.data).payload
                if isinstance(payload, DispatchOffer):
                    self.offers += 1
                    await self._admit(payload)
        finally:
            reporter.cancel()

    async def _report_capacity(self) -> None:
        """Capacity every second, and a lease renewal with it (the hub cuts off an agent
        that stops renewing; the dev federation's lease is 30 s)."""
        renewal = 0
        while True:
            renewal += 1
            await self.send(LeaseRenew(id=renewal))
            await asyncio.sleep(1.0)
            await self.send(self.capacity())

    async def _admit(self, offer: DispatchOffer) -> None:
        wl = offer.workload
        key = f"{wl.metadata.namespace}/{wl.metadata.name}"
        admission = Admission(
            cluster_queue="default",
            pod_set_assignments=[
                PodSetAssignment(name=ps.name, flavors={"cpu": "default"}, count=ps.count)
                for ps in wl.spec.pod_sets
            ],
        )
        await self.send(
            WorkloadStatusReport(
                workload=key,
                generation=offer.generation,
                phase=WorkloadPhase.ADMITTED,
                admission=admission,
                pods=PodCounts(pending=1),
            )
        )
        asyncio.get_running_loop().call_later(
            RUNNING_AFTER_SECONDS,
            lambda: asyncio.ensure_future(
                self.send(
                    WorkloadStatusReport(
                        workload=key,
                        generation=offer.generation,
                        phase=WorkloadPhase.RUNNING,
                        pods=PodCounts(running=1, ready=1),
                    )
                )
            ),
        )


async def submit_backlog(client: HubClient, count: int) -> None:
    """Workloads that fit on no cluster (more CPU than a peer reports): they wait at the hub
    for the whole run, a deep queue every dispatch cycle has to consider."""
    jobs = [small_job(f"backlog-{i}") for i in range(count)]
    for job in jobs:
        job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200000"
    await submit_concurrently(client, jobs)


async def measure(fed: DevFederation, args: argparse.Namespace) -> dict[str, Any]:
    meter = CpuMeter(fed)
    async with aiohttp.ClientSession() as session, HubClient(fed.context, timeout=60) as client:
        # Absent members are registered but their agents never connect (a cluster down).
        present = fed.names[: len(fed.names) - args.absent]
        peers = [PeerAgent(n, fed.url, fed.agent_token(n)) for n in present]
        tasks = [asyncio.create_task(p.run(session)) for p in peers]
        if args.fleet_quota:
            gq = await client.get(GlobalQueue, "default", None)
            gq["spec"]["fleetQuota"] = {"cpu": args.fleet_quota}
            await client.replace(GlobalQueue, gq)
        if args.backlog:
            await submit_backlog(client, args.backlog)
        watch = AdmissionWatch(client)
        watcher = asyncio.create_task(watch.run())
        await asyncio.sleep(1.5)  # sessions up and capacity known
        try:
            before = meter.sample()
            burst: dict[str, Any] = await throughput(client, watch, args.workloads)
            burst["cpu_ms_per_workload"] = meter.per_workload_ms(before, args.workloads)
            await asyncio.sleep(RUNNING_AFTER_SECONDS * 2)
            before = meter.sample()
            paced: dict[str, Any] = await latency(client, watch, args.paced, args.rate)
            paced["cpu_ms_per_workload"] = meter.per_workload_ms(before, args.paced)
        finally:
            watcher.cancel()
            for task in tasks:
                task.cancel()
            for task in (watcher, *tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return {"throughput": burst, "latency": paced, "offers": sum(p.offers for p in peers)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument(
        "--absent",
        type=int,
        default=0,
        help="how many more member clusters are registered whose agents never connect",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="workloads that fit nowhere, submitted first and waiting at the hub all along",
    )
    parser.add_argument(
        "--fleet-quota",
        default="",
        help="a CPU fleet quota on the default GlobalQueue (e.g. 100000): the hub then counts "
        "every global queue's usage before it places",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hub-") as scratch:
        fed = DevFederation(Path(scratch), clusters=args.clusters + args.absent, nodes=50, port=0)
        try:
            fed.start_hub_only()
            result = asyncio.run(measure(fed, args))
        finally:
            fed.stop()
    out = {
        "benchmark": "hub_dispatch",
        "clusters": args.clusters,
        "absent_clusters": args.absent,
        "fleet_quota_cpu": args.fleet_quota or None,
        "backlog": args.backlog,
        **result,
    }
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
