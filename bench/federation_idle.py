"""Benchmark: what a federation spends while idle, per process and per second — with nothing
submitted yet, and after a burst left its Jobs running.

Why (issue #15): the paced phase of `bench.federation_dispatch` reads each process's CPU over
about 5 s, so whatever the processes do by the clock — the dispatcher's timed cycle, queue
statuses, heartbeats and lease renewals, capacity reports, the fencing deadlines' walk over
the running Jobs, the log shipper's poll — is in its figure beside the work per workload.
This bench measures that part alone, in the same federation as the federation bench (3
kubesim clusters of `--nodes` nodes, simulated runtime): each process's CPU and voluntary
context switches from /proc over `--seconds` with nothing submitted, then again once a burst
of `--workloads` Jobs is admitted. The burst's Jobs run 30 s (`small_job`), so the second
window must end before the first of them does: `--seconds` is at most 20.

    .venv/bin/python -m bench.federation_idle [--workloads 2000] [--seconds 10] [--nodes 50]

Prints one JSON object: per window (`empty`, `after_burst`) and per role (hub, agent — the
agents summed —, kubesim), CPU milliseconds and voluntary context switches a second, and the
CPU milliseconds a second of each role's busiest threads; with the burst's own figures.
tests/bench/test_federation_idle.py checks the /proc reading and runs it small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.federation_dispatch import (
    Processes,
    in_federation,
    role_of,
    throughput,
    watched_hub,
)
from qctl.commands.dev import DevFederation

MAX_SECONDS = 20.0
"""The burst's Jobs run 30 s: a longer window after it would see them end."""
SETTLE_SECONDS = 2.0
"""After the burst's last admission, before the second window: its reports and writes land."""
BUSIEST_THREADS = 3


@dataclass
class Usage:
    """CPU seconds and voluntary context switches of some processes, each thread's CPU too."""

    cpu: dict[str, float] = field(default_factory=dict)
    switches: dict[str, int] = field(default_factory=dict)
    threads: dict[tuple[str, int], float] = field(default_factory=dict)
    """(process name, thread id) → CPU seconds."""


def _cpu_seconds(stat_path: Path, ticks: int) -> float:
    # The fields after the command name, which may hold spaces and parentheses.
    fields = stat_path.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks


def _voluntary_switches(status_path: Path) -> int:
    for line in status_path.read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def read_usage(processes: Sequence[tuple[str, int]]) -> Usage:
    """The usage so far of each (name, pid); a process gone is left out."""
    ticks = os.sysconf("SC_CLK_TCK")
    usage = Usage()
    for name, pid in processes:
        base = Path(f"/proc/{pid}")
        try:
            usage.cpu[name] = _cpu_seconds(base / "stat", ticks)
            switches = 0
            for task in (base / "task").iterdir():
                try:
                    usage.threads[(name, int(task.name))] = _cpu_seconds(task / "stat", ticks)
                    switches += _voluntary_switches(task / "status")
                except FileNotFoundError:
                    continue  # (a thread that ended meanwhile)
            usage.switches[name] = switches
        except FileNotFoundError:
            continue
    return usage


def per_second(before: Usage, after: Usage, seconds: float) -> dict[str, dict[str, Any]]:
    """Per role: CPU ms and voluntary context switches a second between two readings, and
    the CPU ms a second of its busiest threads (a thread that ended in between is left out,
    as are switches of threads that ended)."""
    out: dict[str, dict[str, Any]] = {}
    for name, cpu in after.cpu.items():
        if name not in before.cpu:
            continue
        summed = out.setdefault(role_of(name), {"cpu_ms_per_s": 0.0, "switches_per_s": 0.0})
        summed["cpu_ms_per_s"] += 1000 * (cpu - before.cpu[name]) / seconds
        summed["switches_per_s"] += (after.switches[name] - before.switches[name]) / seconds
    threads: dict[str, list[float]] = {}
    for (name, tid), cpu in after.threads.items():
        if (name, tid) in before.threads:
            spent = 1000 * (cpu - before.threads[(name, tid)]) / seconds
            threads.setdefault(role_of(name), []).append(spent)
    for role, figures in out.items():
        figures["cpu_ms_per_s"] = round(figures["cpu_ms_per_s"], 1)
        figures["switches_per_s"] = round(figures["switches_per_s"], 1)
        busiest = sorted(threads.get(role, []), reverse=True)[:BUSIEST_THREADS]
        figures["busiest_threads_ms_per_s"] = [round(t, 1) for t in busiest]
    return out


def _pids(fed: Processes) -> list[tuple[str, int]]:
    return [(name, proc.pid) for name, proc in fed.processes]


async def _window(fed: Processes, seconds: float) -> dict[str, dict[str, Any]]:
    before = read_usage(_pids(fed))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.sleep(seconds)
    after = read_usage(_pids(fed))
    return per_second(before, after, loop.time() - started)


async def measure(fed: DevFederation, args: argparse.Namespace) -> dict[str, Any]:
    async with watched_hub(fed) as (client, watch):
        empty = await _window(fed, args.seconds)
        burst = await throughput(client, watch, args.workloads) if args.workloads else {}
        await asyncio.sleep(SETTLE_SECONDS)
        after_burst = await _window(fed, args.seconds)
    return {
        "benchmark": "federation_idle",
        "seconds": args.seconds,
        "empty": empty,
        "burst": burst,
        "after_burst": after_burst,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000, help="the burst")
    parser.add_argument("--seconds", type=float, default=10.0, help="each idle window")
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(
            f"--seconds must be above 0 and at most {MAX_SECONDS:g} (the burst's Jobs run "
            "30 s: a longer window would see them end)"
        )
    if args.workloads < 0:
        parser.error("--workloads cannot be negative")
    result, _ = in_federation(lambda fed: measure(fed, args), nodes=args.nodes)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
