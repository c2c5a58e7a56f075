"""Benchmark: the federation's dispatch path end to end, with real processes.

Starts `qctl dev`'s federation (the hub with SQLite, 3 kubesim clusters in the simulated
runtime, 3 agents), then
1. throughput: submits N small workloads (1 pod, 100m CPU) with 32 concurrent clients and
   measures the submit rate (201s per second) and the dispatch rate (workloads admitted on a
   cluster per second, from the first submit to the last admission seen on the hub's watch);
2. latency: submits M more at a steady 200/s and measures submit→admitted (201 received →
   Admitted=True observed on the hub's watch), p50/p99.

    .venv/bin/python -m bench.federation_dispatch [--workloads 2000] [--paced 1000] [--rate 200]

Prints one JSON object. Targets (issue 5): ≥ 500/s submitted and dispatched; p99 < 1 s at
200/s. Each phase also reports the CPU milliseconds every process of the federation spent
per workload (from /proc), and this client's ("bench"); `ratio_hub_plus_agent_to_kubesim`,
the figure issue 15 bounds, as a margin over a floor (`bench.control_plane_floor` prints
the floor, with `--required` of what MultiQ's protocol and engine cost by themselves, and
`bench.control_plane_margin` this ratio over that one, the two run in turn); and the hub's
steps per workload
(`hub_steps_per_workload`, from its /metrics: store creates and updates — each also one event
of the hub's store watch and of every workload watch — and the agents' status reports it
applied, by phase). Other processes do not count in the CPU figures,
but the machine's speed does: on a shared VM all of them move together by up to a quarter
from run to run, so compare runs interleaved, and components within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.quantiles import nearest_rank
from qctl.client import HubClient
from qctl.commands.dev import DevFederation

API = "/apis/multiq.dev/v1alpha1"


def small_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {
            "template": {
                "metadata": {"annotations": {"kubesim.dev/duration": "30"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            }
        },
    }


class AdmissionWatch:
    """Follows the hub's workload watch and records when each workload got Admitted."""

    def __init__(self, client: HubClient) -> None:
        self.client = client
        self.admitted: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def run(self) -> None:
        async for event in self.client.stream(
            f"{API}/namespaces/default/workloads", params={"watch": "true"}
        ):
            obj = event.get("object", {})
            name = obj.get("metadata", {}).get("name")
            for cond in (obj.get("status") or {}).get("conditions", []):
                admitted = cond["type"] == "Admitted" and cond["status"] == "True"
                if admitted and name not in self.admitted:
                    self.admitted[name] = time.monotonic()
                    self.changed.set()

    async def wait_for(self, names: set[str], within: float) -> None:
        deadline = time.monotonic() + within
        while not names <= set(self.admitted):
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = len(names - set(self.admitted))
                raise TimeoutError(f"{missing} workload(s) not admitted in {within}s")
            try:
                async with asyncio.timeout(min(remaining, 1.0)):
                    await self.changed.wait()
            except TimeoutError:
                continue


class StepMeter:
    """The hub's steps per workload, from its Prometheus counters: store writes by operation
    (each is also one event of the hub's store watch, and one of every workload watch) and the
    agents' status reports it applied, by phase."""

    def __init__(self, fed: DevFederation) -> None:
        self.url = f"{fed.url}/metrics"

    async def sample(self) -> dict[str, float]:
        async with aiohttp.ClientSession() as session, session.get(self.url) as response:
            text = await response.text()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "multiq_store_write_duration_seconds_count":
                    out[f"store_{sample.labels['op']}s"] = sample.value
                elif sample.name == "multiq_agent_reports_total":
                    name = f"reports_{sample.labels['phase'].lower()}"
                    out[name] = out.get(name, 0.0) + sample.value
        return out

    async def per_workload(self, before: dict[str, float], count: int) -> dict[str, float]:
        after = await self.sample()
        steps = {k: round((v - before.get(k, 0.0)) / count, 2) for k, v in sorted(after.items())}
        return {k: v for k, v in steps.items() if v}


class Processes(Protocol):
    """Named processes whose CPU a `CpuMeter` reads (a `DevFederation` is one)."""

    processes: list[tuple[str, subprocess.Popen[bytes]]]


def role_of(process: str) -> str:
    """The part a federation process plays: "agent" for every agent-<cluster>, else its name
    (hub, kubesim)."""
    return "agent" if process.startswith("agent") else process


class CpuMeter:
    """CPU seconds (user + system) of the federation's processes, read from /proc, and of
    this client."""

    def __init__(self, fed: Processes) -> None:
        self.fed = fed
        self.ticks = os.sysconf("SC_CLK_TCK")

    def sample(self) -> dict[str, float]:
        # "bench" is this client (it submits, and parses every event of the hub's watch):
        # it shares the machine's cores with the federation.
        out: dict[str, float] = {"bench": time.process_time()}
        for name, proc in self.fed.processes:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            role = role_of(name)
            out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / self.ticks
        return out

    def per_workload_ms(self, before: dict[str, float], count: int) -> dict[str, float]:
        after = self.sample()
        return {
            role: round(1000 * (after[role] - before.get(role, 0.0)) / count, 2)
            for role in sorted(after)
        }


async def submit_concurrently(client: HubClient, jobs: list[dict[str, Any]]) -> None:
    """Submit every job, 32 at a time (32 clients, each sending its next when answered)."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def worker() -> None:
        while not queue.empty():
            await client.submit(queue.get_nowait(), namespace="default")

    await asyncio.gather(*(worker() for _ in range(32)))


async def throughput(client: HubClient, watch: AdmissionWatch, count: int) -> dict[str, float]:
    names = [f"t-{i}" for i in range(count)]
    jobs = [small_job(name) for name in names]
    start = time.monotonic()
    await submit_concurrently(client, jobs)
    submitted = time.monotonic()
    await watch.wait_for({f"job-{n}" for n in names}, within=600)
    last = max(watch.admitted[f"job-{n}"] for n in names)
    return {
        "workloads": count,
        "submit_seconds": round(submitted - start, 3),
        "submit_rate_per_s": round(count / (submitted - start), 1),
        "dispatch_seconds": round(last - start, 3),
        "dispatch_rate_per_s": round(count / (last - start), 1),
    }


async def latency(
    client: HubClient, watch: AdmissionWatch, count: int, rate: float
) -> dict[str, float]:
    sent: dict[str, float] = {}
    interval = 1.0 / rate
    start = time.monotonic()
    tasks = []

    async def one(name: str) -> None:
        await client.submit(small_job(name), namespace="default")
        sent[f"job-{name}"] = time.monotonic()

    for i in range(count):
        target = start + i * interval
        delay = target - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(f"l-{i}")))
    await asyncio.gather(*tasks)
    achieved = count / (time.monotonic() - start)
    await watch.wait_for(set(sent), within=600)
    lat = sorted(max(0.0, watch.admitted[n] - t) for n, t in sent.items())
    return {
        "workloads": count,
        "target_rate_per_s": rate,
        "achieved_rate_per_s": round(achieved, 1),
        "p50_ms": round(statistics.median(lat) * 1000, 1),
        "p99_ms": round(nearest_rank(lat, 0.99) * 1000, 1),
        "max_ms": round(lat[-1] * 1000, 1),
    }


def control_plane_ratio(cpu_ms: dict[str, float]) -> float:
    """(hub + agent) CPU per workload over kubesim's, from one phase's figures."""
    return round((cpu_ms["hub"] + cpu_ms["agent"]) / cpu_ms["kubesim"], 2)


@contextlib.asynccontextmanager
async def watched_hub(fed: DevFederation) -> AsyncIterator[tuple[HubClient, AdmissionWatch]]:
    """A client of the federation's hub, with the hub's workload watch followed (when each
    workload got Admitted) until the block ends."""
    async with HubClient(fed.context, timeout=60) as client:
        watch = AdmissionWatch(client)
        watcher = asyncio.create_task(watch.run())
        await asyncio.sleep(0.5)  # the watch is open
        try:
            yield client, watch
        finally:
            watcher.cancel()


async def measure(fed: DevFederation, args: argparse.Namespace) -> dict[str, Any]:
    meter = CpuMeter(fed)
    steps = StepMeter(fed)
    async with watched_hub(fed) as (client, watch):
        counted = await steps.sample()
        before = meter.sample()
        burst: dict[str, Any] = await throughput(client, watch, args.workloads)
        burst["cpu_ms_per_workload"] = meter.per_workload_ms(before, args.workloads)
        burst["ratio_hub_plus_agent_to_kubesim"] = control_plane_ratio(burst["cpu_ms_per_workload"])
        burst["hub_steps_per_workload"] = await steps.per_workload(counted, args.workloads)
        counted = await steps.sample()
        before = meter.sample()
        paced: dict[str, Any] = await latency(client, watch, args.paced, args.rate)
        paced["cpu_ms_per_workload"] = meter.per_workload_ms(before, args.paced)
        paced["ratio_hub_plus_agent_to_kubesim"] = control_plane_ratio(paced["cpu_ms_per_workload"])
        paced["hub_steps_per_workload"] = await steps.per_workload(counted, args.paced)
        return {"throughput": burst, "latency": paced}


T = TypeVar("T")


def in_federation(
    measure: Callable[[DevFederation], Coroutine[Any, Any, T]], *, nodes: int
) -> tuple[T, float]:
    """`measure(fed)` run in a fresh federation as this bench starts it (3 kubesim clusters
    of `nodes` nodes, simulated runtime; the tools beside it start the same), stopped
    whatever happens; with the seconds the federation took to start."""
    with tempfile.TemporaryDirectory(prefix="bench-federation-") as scratch:
        fed = DevFederation(Path(scratch), clusters=3, nodes=nodes, runtime="simulated", port=0)
        started = time.monotonic()
        try:
            fed.start(detach=False)
            startup = time.monotonic() - started
            return asyncio.run(measure(fed)), startup
        finally:
            fed.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args(argv)
    result, startup = in_federation(lambda fed: measure(fed, args), nodes=args.nodes)
    result = {
        "benchmark": "federation_dispatch",
        "clusters": 3,
        "nodes_per_cluster": args.nodes,
        "startup_seconds": round(startup, 1),
        **result,
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
