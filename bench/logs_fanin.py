"""Benchmark: logs fanned in from two clusters and out to several followers, end to end with
real processes — `qctl dev`'s federation (the hub on SQLite, 2 kubesim clusters in the
process runtime, 2 agents), one Job per cluster whose pod prints numbered, timestamped lines
of 100 bytes, and followers reading `GET …/log?follow=true` through the hub.

Phases:
1. `max`: each pod prints `--lines` lines as fast as it can; `--followers` followers per
   workload. MB/s delivered to each follower (its first line to its last), and in total;
   lines lost (not delivered and not announced: must be 0) and lines announced dropped.
   CPU seconds per MB delivered per part, over the whole phase (steadier than MB/s on a
   shared machine; the phase's fixed costs — submitting, starting the pods — are in it, so
   only a run of several MB per follower, as the default, reads as the cost of the MBs), and
   from them `idle_cores`: the MB/s the machine's cores would deliver were they this run's
   alone, with MultiQ's parts as measured and at no cost (the floor the producers, kubesim
   and the followers' own reading leave), and the share of that floor reached.
2. `paced`: each pod prints at `--rate` bytes/s (1 MB/s); p50/p99 latency from the line's
   write (the time in it) to its arrival at a follower (one machine, one clock).
3. `stored`: after the Jobs finished, one plain `GET …/log` of each workload: lines served
   from the hub's store (all of them: what the followers got, and what the agent shipped
   after the Jobs finished).
4. `kubectl`: the ceiling below the hub — one pod printing as fast as it can, followed with
   `kubectl logs -f` straight from its kubesim: MB/s.

    .venv/bin/python -m bench.logs_fanin [--lines 100000] [--followers 3] [--rate 1000000]

Prints one JSON object. Targets (issue 19): ≥ 20 MB/s aggregate, p99 < 200 ms at 1 MB/s per
pod, nothing lost silently. Everything shares the machine's cores (2 on the reference VM):
kubesim runs the producers and serves their logs, the agents read and forward them, the hub
stores and fans them out, and the followers parse JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.federation_dispatch import CpuMeter
from bench.quantiles import nearest_rank
from qctl.client import HubClient
from qctl.commands.dev import DevFederation

API = "/apis/multiq.dev/v1alpha1"
LINE_BYTES = 100

PRODUCER = """
import os, sys, time
n, rate, size = int(os.environ["LINES"]), float(os.environ["RATE"]), int(os.environ["SIZE"])
out = sys.stdout
pad = "x" * size
start = time.time()
for i in range(1, n + 1):
    head = f"{i} {time.time_ns()} "
    out.write(head + pad[: size - 1 - len(head)] + "\\n")
    if rate and i % 50 == 0:
        out.flush()
        ahead = start + i * size / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)
out.flush()
"""


def producer_job(name: str, lines: int, rate: float) -> dict[str, Any]:
    env = {"LINES": str(lines), "RATE": str(rate), "SIZE": str(LINE_BYTES)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "python",
                            "command": [sys.executable, "-c", PRODUCER],
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                            "resources": {"requests": {"cpu": "5", "memory": "64Mi"}},
                        }
                    ],
                }
            },
        },
    }


@dataclass
class Follower:
    workload: str
    lines: int = 0
    bytes: int = 0
    announced: int = 0
    out_of_order: int = 0
    first: float = 0.0
    last: float = 0.0
    latencies: list[float] = field(default_factory=list)
    last_seq: dict[str, int] = field(default_factory=dict)
    clusters: set[str] = field(default_factory=set)

    def take(self, record: dict[str, Any]) -> None:
        now = time.time_ns()
        if "line" not in record:
            if record.get("event") == "dropped":
                self.announced += int(record["count"])
            return
        text = str(record["line"])
        seq_text, stamp, _ = text.split(" ", 2)
        seq = int(seq_text)
        pod = str(record["pod"])
        if seq != self.last_seq.get(pod, 0) + 1 and seq <= self.last_seq.get(pod, 0):
            self.out_of_order += 1
        self.last_seq[pod] = max(seq, self.last_seq.get(pod, 0))
        self.clusters.add(str(record["cluster"]))
        self.lines += 1
        self.bytes += len(text) + 1
        self.latencies.append((now - int(stamp)) / 1e6)
        self.last = now / 1e9
        if not self.first:
            self.first = self.last


async def follow(client: HubClient, follower: Follower, *, live: bool) -> None:
    """Read as `qctl logs [-f]` does: its client's stream of records."""
    namespace, name = follower.workload.split("/")
    params = {"follow": "true"} if live else {}
    async for record in client.logs(namespace, name, params):
        follower.take(record)


def _quantile(values: list[float], q: float) -> float:
    return nearest_rank(values, q) if values else 0.0


def report(followers: list[Follower], expected_per_workload: int) -> dict[str, Any]:
    per = []
    for f in followers:
        span = max(f.last - f.first, 1e-9)
        per.append(
            {
                "workload": f.workload,
                "clusters": sorted(f.clusters),
                "lines": f.lines,
                "mb_per_s": round(f.bytes / span / 1e6, 2),
                "announced_dropped": f.announced,
                "lost_silently": expected_per_workload - f.lines - f.announced,
                "out_of_order": f.out_of_order,
                "latency_p50_ms": round(_quantile(f.latencies, 0.5), 1),
                "latency_p99_ms": round(_quantile(f.latencies, 0.99), 1),
            }
        )
    start = min((f.first for f in followers if f.first), default=0.0)
    end = max((f.last for f in followers), default=0.0)
    total_bytes = sum(f.bytes for f in followers)
    latencies = [x for f in followers for x in f.latencies]
    return {
        "followers": per,
        "aggregate_mb_per_s": round(total_bytes / max(end - start, 1e-9) / 1e6, 2),
        "lines_lost_silently": sum(p["lost_silently"] for p in per),
        "lines_announced_dropped": sum(p["announced_dropped"] for p in per),
        "latency_p50_ms": round(_quantile(latencies, 0.5), 1),
        "latency_p99_ms": round(_quantile(latencies, 0.99), 1),
        "seconds": round(end - start, 2),
        "bytes": total_bytes,
    }


async def run_phase(
    fed: DevFederation, prefix: str, *, lines: int, rate: float, followers: int
) -> tuple[dict[str, Any], list[str]]:
    """Two producer Jobs (one lands on each cluster: the second finds the first's cluster
    full), `followers` followers each, until the Jobs end."""
    async with HubClient(fed.context, timeout=60) as client:
        keys = []
        for n in range(2):
            wl = await client.submit(
                producer_job(f"{prefix}-{n}", lines, rate), namespace="default"
            )
            keys.append(f"default/{wl['metadata']['name']}")
        readers = [Follower(key) for key in keys for _ in range(followers)]
        await asyncio.gather(*(follow(client, r, live=True) for r in readers))
        return report(readers, lines), keys


async def stored(fed: DevFederation, keys: list[str], lines: int) -> dict[str, Any]:
    async with HubClient(fed.context, timeout=60) as client:
        readers = [Follower(key) for key in keys]
        started = time.perf_counter()
        await asyncio.gather(*(follow(client, r, live=False) for r in readers))
        took = time.perf_counter() - started
    return {
        "lines_per_workload": [r.lines for r in readers],
        "expected_per_workload": lines,
        "notes": [r.announced for r in readers],
        "seconds": round(took, 2),
    }


async def kubectl_ceiling(fed: DevFederation, lines: int) -> dict[str, Any]:
    """One producer pod followed by `kubectl logs -f` straight from its cluster."""
    async with HubClient(fed.context, timeout=60) as client:
        wl = await client.submit(producer_job("kubectl-ceiling", lines, 0), namespace="default")
        key = wl["metadata"]["name"]
        cluster = None
        while cluster is None:
            got = await client.request("GET", f"{API}/namespaces/default/workloads/{key}")
            cluster = (got.get("status") or {}).get("clusterName")
            await asyncio.sleep(0.05)
    kubeconfig = fed.state_dir / "kubeconfigs" / f"{cluster}.kubeconfig"
    base = ["kubectl", "--kubeconfig", str(kubeconfig), "-n", "default"]
    pod = ""
    while not pod:
        listing = await asyncio.create_subprocess_exec(
            *base, "get", "pods", "-o", "name", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await listing.communicate()
        pod = next((p for p in out.decode().split() if "kubectl-ceiling" in p), "")
        await asyncio.sleep(0.05)
    process = await asyncio.create_subprocess_exec(
        *base, "logs", "-f", pod, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    count = size = 0
    first = last = 0.0
    while line := await process.stdout.readline():
        last = time.perf_counter()
        first = first or last
        count += 1
        size += len(line)
    await process.wait()
    return {
        "lines": count,
        "expected": lines,
        "mb_per_s": round(size / max(last - first, 1e-9) / 1e6, 2),
    }


def sample(meter: CpuMeter) -> dict[str, float]:
    """CPU seconds so far per part: kubesim (the API servers and kubelets of both clusters),
    the producers (kubesim's children, counted once they ended), the agents, the hub, and
    this process (the followers, reading as `qctl logs -f` does)."""
    out = meter.sample()
    ticks = os.sysconf("SC_CLK_TCK")
    for name, proc in meter.fed.processes:
        if name == "kubesim":
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                out["producers"] = (int(fields[13]) + int(fields[14])) / ticks
    return out


def cpu_seconds(meter: CpuMeter, before: dict[str, float]) -> dict[str, float]:
    """CPU seconds each part spent since `before`."""
    after = sample(meter)
    return {role: round(after[role] - before.get(role, 0.0), 2) for role in sorted(after)}


def cpu_seconds_per_mb(spent: dict[str, float], delivered_bytes: int) -> dict[str, float]:
    """CPU seconds per MB delivered, per part (nothing when nothing was delivered)."""
    if delivered_bytes <= 0:
        return {}
    mb = delivered_bytes / 1e6
    return {role: round(seconds / mb, 4) for role, seconds in spent.items()}


def floor(per_mb: dict[str, float]) -> dict[str, Any]:
    """What the machine's cores would deliver were they this run's alone (from CPU seconds
    per MB, which other work on a shared machine changes little): with every part as
    measured, and with MultiQ's parts (agent, hub) at no cost — the floor the producers,
    kubesim and the followers leave; and the first as a share of the second."""
    cores = os.cpu_count() or 1
    everything = sum(per_mb.values())
    below = sum(v for role, v in per_mb.items() if role not in ("agent", "hub"))
    with_multiq = cores / max(everything, 1e-9)
    without = cores / max(below, 1e-9)
    return {
        "cores": cores,
        "mb_per_s": round(with_multiq, 1),
        "mb_per_s_without_multiq": round(without, 1),
        "share_of_floor": round(with_multiq / without, 2),
    }


async def measure(fed: DevFederation, args: argparse.Namespace) -> dict[str, Any]:
    meter = CpuMeter(fed)
    load_before = os.getloadavg()[0]
    before = sample(meter)
    fast, keys = await run_phase(fed, "max", lines=args.lines, rate=0, followers=args.followers)
    # The whole phase's CPU, submitting and starting the pods included: the producers are done
    # before the first line reaches a follower, so a window from there would miss them.
    fast["cpu_seconds"] = cpu_seconds(meter, before)
    # CPU per MB delivered: steadier than MB/s on a machine shared with other work.
    fast["cpu_seconds_per_mb"] = cpu_seconds_per_mb(fast["cpu_seconds"], fast["bytes"])
    if fast["cpu_seconds_per_mb"]:
        fast["idle_cores"] = floor(fast["cpu_seconds_per_mb"])
    # The machine is shared: the 1-minute load average around the phase says how much.
    fast["load_average"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    paced_lines = int(args.rate * args.paced_seconds / LINE_BYTES)
    paced, _ = await run_phase(
        fed, "paced", lines=paced_lines, rate=args.rate, followers=args.followers
    )
    await asyncio.sleep(2)  # the agents ship what the followers did not bring
    kept = await stored(fed, keys, args.lines)
    ceiling = await kubectl_ceiling(fed, args.lines)
    return {"max": fast, "paced": paced, "stored": kept, "kubectl": ceiling}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="per pod, in phase max")
    parser.add_argument("--followers", type=int, default=3, help="per workload")
    parser.add_argument("--rate", type=float, default=1_000_000.0, help="bytes/s per pod (paced)")
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as scratch:
        fed = DevFederation(Path(scratch), clusters=2, nodes=1, runtime="process", port=0)
        try:
            fed.start(detach=False)
            result = asyncio.run(measure(fed, args))
        finally:
            fed.stop()
    result = {
        "benchmark": "logs_fanin",
        "clusters": 2,
        "line_bytes": LINE_BYTES,
        "lines_per_pod": args.lines,
        "followers_per_workload": args.followers,
        "rate_bytes_per_s_per_pod": args.rate,
        **result,
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
