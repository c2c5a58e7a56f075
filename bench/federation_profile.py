"""Benchmark tool: a sampling profile of one federation process over one phase of
`bench.federation_dispatch`'s traffic, and nothing else.

Why (issue #15): a profile taken over a process's whole life, or over a fixed span of
seconds, mixes into the figures what the bench does not count. The bench reads each
process's CPU from /proc at the edges of its phases; a profiler attached at start or left
running to the end also sees the imports and schemas of start-up and, at exit, the
interpreter's last collections over the whole heap — in session 41 those were 14 % of
multiq-hub's `py-spy --gil` samples over a run, and 30 % of its `perf record` samples in a
window that ran past the bench's end. Like `bench.federation_meter`, this tool starts the
same federation and traffic in this process, so it knows each process and each phase's
edges: the profiler runs from the first submission of `--phase` to the last admission of it,
the span over which the bench reads its CPU figures, which it prints beside the profile.

    .venv/bin/python -m bench.federation_profile --role hub|agent [--phase paced|throughput]
        [--profiler perf|py-spy] [--native] [--out PREFIX]
        [--workloads 2000] [--paced 1000] [--rate 200] [--nodes 50]

`--role agent` profiles the first cluster's agent. A longer phase (`--paced 3000`) gives
more samples.
- `perf`: `perf record -e cpu-clock -g` (every native frame: the interpreter, pydantic-core,
  libc, the kernel) into PREFIX.data; read it with `perf report -i PREFIX.data`.
- `py-spy`: `py-spy record --gil -f raw` (the Python stacks of the thread holding the GIL;
  with `--native`, the C frames too) into PREFIX.raw, one collapsed stack a line. py-spy is
  not one of the project's dependencies: `.venv/bin/pip install py-spy`.

Prints one JSON object: the role and its pid, the phase (its figures as the bench gives
them, and the CPU milliseconds per workload of each role over it), the profiler's command
and its output file. tests/bench/test_federation_profile.py checks its parts and profiles a
small federation with perf.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.federation_dispatch import (
    CpuMeter,
    in_federation,
    latency,
    throughput,
    watched_hub,
)
from qctl.commands.dev import DevFederation

PROFILERS = ("perf", "py-spy")
PHASES = ("paced", "throughput")
ROLES = ("hub", "agent")


class ProfileError(RuntimeError):
    """The profiler did not do what the phase needs; the message says why."""


def role_process(
    processes: Sequence[tuple[str, subprocess.Popen[bytes]]], role: str
) -> subprocess.Popen[bytes]:
    """The federation's process playing `role`: the hub, or the first agent."""
    for name, proc in processes:
        if name == role or (role == "agent" and name.startswith("agent-")):
            return proc
    raise ProfileError(f"the federation runs no {role}")


def profiler_argv(profiler: str, pid: int, out: Path, *, native: bool) -> list[str]:
    """The profiler's command for `pid`, writing to `out`; it stops on SIGINT."""
    if profiler == "perf":
        perf = ["perf", "record", "-e", "cpu-clock", "-F", "999", "-g"]
        return [*perf, "-p", str(pid), "-o", str(out)]
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    argv = [spy, "record", "-p", str(pid), "-r", "250", "-f", "raw", "--gil", "-o", str(out)]
    return [*argv, "--native"] if native else argv


class Profiler:
    """One profiler process, from `start` until `stop` (SIGINT: it writes its output)."""

    def __init__(self, argv: list[str], out: Path) -> None:
        self.argv, self.out = argv, out
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
        except FileNotFoundError as exc:
            raise ProfileError(f"cannot run {self.argv[0]}: {exc}") from exc

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        proc.send_signal(signal.SIGINT)
        _, errors = proc.communicate(timeout=60)
        if proc.returncode not in (0, -signal.SIGINT) or not self.out.exists():
            raise ProfileError(f"{self.argv[0]} failed ({proc.returncode}): {errors[-800:]!r}")


async def measure(fed: DevFederation, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    target = role_process(fed.processes, args.role)
    profiler = Profiler(profiler_argv(args.profiler, target.pid, out, native=args.native), out)
    cpu = CpuMeter(fed)
    async with watched_hub(fed) as (client, watch):
        if args.phase == "paced" and args.workloads:
            await throughput(client, watch, args.workloads)  # the burst before, not profiled
        count = args.workloads if args.phase == "throughput" else args.paced
        profiler.start()
        started = time.monotonic()
        before = cpu.sample()
        try:
            if args.phase == "throughput":
                figures = await throughput(client, watch, count)
            else:
                figures = await latency(client, watch, count, args.rate)
        finally:
            cpu_ms = cpu.per_workload_ms(before, count)
            seconds = time.monotonic() - started
            profiler.stop()
    return {
        "benchmark": "federation_profile",
        "role": args.role,
        "pid": target.pid,
        "phase": {
            "name": args.phase,
            "seconds": round(seconds, 2),
            **figures,
            "cpu_ms_per_workload": cpu_ms,
        },
        "profiler": profiler.argv,
        "output": str(out),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=ROLES, required=True)
    parser.add_argument("--phase", choices=PHASES, default="paced")
    parser.add_argument("--profiler", choices=PROFILERS, default="perf")
    parser.add_argument("--native", action="store_true", help="py-spy: C frames too")
    parser.add_argument("--out", default="federation-profile", help="output path, no suffix")
    parser.add_argument("--workloads", type=int, default=2000, help="the burst")
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args(argv)
    if (args.workloads if args.phase == "throughput" else args.paced) <= 0:
        parser.error(f"the {args.phase} phase has no workloads to profile")
    out = Path(args.out).with_suffix(".data" if args.profiler == "perf" else ".raw").resolve()
    try:
        result, _ = in_federation(lambda fed: measure(fed, args, out), nodes=args.nodes)
    except ProfileError as exc:
        print(f"federation_profile: {exc}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
