"""Benchmark tool: the CPU that named functions of the hub, the agents or kubesim spend per
workload, metered live in `bench.federation_dispatch`'s federation and traffic.

Why (issue #15): what a function costs in a loop says little about what it costs live —
between two workloads each process runs everything else it does, beside four other processes
on two cores, and the same code costs it several times its loop cost — and a sampling
profiler's shares compare badly across processes (py-spy `--gil` counted MultiQ's hub 2.2
times the floor hub's samples per workload where /proc said 1.45). This tool wraps the named
functions in the federation's own processes (bench/meter_site/sitecustomize.py) and adds up
the CPU their calls take, so a change to one part of the pipeline can be sized before it is
made, and in the process that pays for it.

It starts the same federation as `bench.federation_dispatch` (3 kubesim clusters of 50 nodes,
simulated runtime), submits a warm-up burst of `--workloads` Jobs, resets the meters, then
submits `--paced` Jobs at `--rate` a second (its `latency` phase) and reads the meters once
every one is admitted.

    .venv/bin/python -m bench.federation_meter --meter hub.state:HubState._apply \\
        --meter agent.records:next_report [--workloads 500] [--paced 1000] [--rate 200]

`--meter module:Qualified.name` (repeatable): a plain function or method; a coroutine
function is refused (its CPU is spent between awaits, where a wrapper does not see it). A
function metered inside another metered one counts in both. `--meter gc` meters the cyclic
garbage collector: per generation (`gc:generation0` …), its collections per workload and the
CPU they take. The collector runs inside whichever allocation sets it off, so a function
metered around one counts it too. Session 43, paced phase of 4,000 after a burst of 2,000:
the hub's collections took 74 µs per workload (one of generation 1, 187 ms), the agents' 33.

Prints one JSON object: the paced phase's rate and latency; each role's CPU ms per workload
(hub, agent — the agents together —, kubesim, bench: this client); and per role and function,
calls per workload, CPU µs per workload and per call.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.federation_dispatch import CpuMeter, latency, role_of, throughput, watched_hub
from qctl.commands.dev import DevFederation

SITE = Path(__file__).with_name("meter_site")
GC_TARGET = "gc"
"""The `--meter` that stands for the garbage collector (as in meter_site/sitecustomize.py)."""


def checked_target(spec: str) -> str:
    """`spec` if it names a plain function or method that can be imported here, or is `gc`
    (the garbage collector); else ValueError saying why."""
    if spec == GC_TARGET:
        return spec
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected module:Qualified.name")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{spec!r}: cannot import {module_name}: {exc}") from exc
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ValueError(f"{spec!r}: {module_name} has no {attr}") from None
    if inspect.isclass(found) or not callable(found):
        raise ValueError(f"{spec!r}: not a function or method")
    if inspect.iscoroutinefunction(found) or inspect.isasyncgenfunction(found):
        raise ValueError(f"{spec!r}: a coroutine function cannot be metered by its calls")
    return spec


def per_workload(
    dumps: dict[str, dict[str, list[float]]], count: int
) -> dict[str, dict[str, dict[str, float]]]:
    """Per role and function: calls and CPU µs per workload, and µs per call, from each
    role's totals ([calls, CPU seconds])."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for role, totals in sorted(dumps.items()):
        for name, (calls, seconds) in sorted(totals.items()):
            if not calls:
                continue
            out.setdefault(role, {})[name] = {
                # Four places: a collection comes once in hundreds of workloads.
                "calls_per_workload": round(calls / count, 4),
                "cpu_us_per_workload": round(1e6 * seconds / count, 1),
                "cpu_us_per_call": round(1e6 * seconds / calls, 1),
            }
    return out


def _answered(folder: Path) -> list[Path]:
    return list(folder.glob("*.json"))


def _summed(pids: dict[int, str], folder: Path) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for pid, role in pids.items():
        totals = json.loads((folder / f"{pid}.json").read_text())["totals"]
        into = out.setdefault(role, {})
        for name, (calls, seconds) in totals.items():
            summed = into.setdefault(name, [0, 0.0])
            summed[0] += calls
            summed[1] += seconds
    return out


async def _read_meters(
    fed: DevFederation, folder: Path, within: float = 10.0
) -> dict[str, dict[str, list[float]]]:
    """Every process's totals, summed per role (the agents together)."""
    pids = {proc.pid: role_of(name) for name, proc in fed.processes}
    for path in _answered(folder):
        path.unlink()
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + within
    while len(_answered(folder)) < len(pids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the meters of {len(pids)} processes did not all answer")
        await asyncio.sleep(0.05)
    return _summed(pids, folder)


async def measure(fed: DevFederation, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    cpu = CpuMeter(fed)
    async with watched_hub(fed) as (client, watch):
        if args.workloads:
            await throughput(client, watch, args.workloads)
        for _, proc in fed.processes:
            os.kill(proc.pid, signal.SIGUSR2)
        before = cpu.sample()
        paced = await latency(client, watch, args.paced, args.rate)
        cpu_ms = cpu.per_workload_ms(before, args.paced)
        metered = await _read_meters(fed, folder)
    return {
        "paced": paced,
        "cpu_ms_per_workload": cpu_ms,
        "metered": per_workload(metered, args.paced),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meter", action="append", required=True, metavar="MODULE:NAME")
    parser.add_argument("--workloads", type=int, default=500, help="the warm-up burst")
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args(argv)
    try:
        targets = [checked_target(spec) for spec in args.meter]
    except ValueError as exc:
        parser.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="bench-meter-") as scratch:
        folder = Path(scratch) / "meters"
        folder.mkdir()
        saved = {k: os.environ.get(k) for k in ("MULTIQ_METER", "MULTIQ_METER_DIR", "PYTHONPATH")}
        # The federation's processes inherit this environment (DevFederation passes it on).
        os.environ["MULTIQ_METER"] = ",".join(targets)
        os.environ["MULTIQ_METER_DIR"] = str(folder)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(SITE), *filter(None, [saved["PYTHONPATH"]])]
        )
        fed = DevFederation(
            Path(scratch) / "fed", clusters=3, nodes=args.nodes, runtime="simulated", port=0
        )
        try:
            fed.start(detach=False)
            result = asyncio.run(measure(fed, args, folder))
        finally:
            fed.stop()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    json.dump({"benchmark": "federation_meter", **result}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
