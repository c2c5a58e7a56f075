"""Benchmark: how far MultiQ's control plane is above the floor its own design sets, measured
in one run sequence so that the machine's state cancels out.

Issue #15 bounds `(hub + agent) CPU / kubesim CPU` per workload in `bench.federation_dispatch`.
That ratio is not a property of the code alone: the same code reads differently as the
machine's state changes, and kubesim moves more than the control plane. Session 40, on one
machine within one session (`bench.control_plane_floor --required --agent-batch 0.05`): the
required floor's paced ratio was 2.07 in the first two runs after the machine booted and once
more later, and 2.50–2.72 in 17 other runs over the next hour, the floor's hub and agents
costing about what they did while kubesim's CPU per workload moved by about a sixth
(1.05–1.07 → 0.84–0.93 ms). A bound on the absolute ratio is met or
missed by the machine, then; one on how far MultiQ is above the floor, both measured in turn,
says something about the code.

So this bench runs, `--rounds` times, the required floor (`bench.control_plane_floor --required
--agent-batch 0.05 --commit-interval 0.01`: the protocol's messages each checked as a peer's,
admission by the agent's engine, Jobs created in rounds as multiq-agent does, commits gathered
as multiq-hub's store gathers them, and nothing else) and
`bench.federation_dispatch`, in alternating order, with the same workloads, and prints for each
phase (throughput, paced) and round both ratios and their quotient, the *margin*, with each
role's CPU per workload over the floor's (`hub_over_floor`, `agent_over_floor`,
`kubesim_over_floor`: where the margin comes from); then the medians and whether the median
margin is within `--bound` (1.2: the 2.5 that #15 set in
session 36 over the required floor of 2.03–2.12 measured then).

    .venv/bin/python -m bench.control_plane_margin [--rounds 3] [--workloads 2000]
        [--paced 1000] [--rate 200] [--nodes 50] [--bound 1.2]

Prints one JSON object. Each round runs two fresh federations, each bench as its own process
(`bench.interleaved.run_once`, in this checkout; 15–20 s each at the default sizes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.federation_dispatch import control_plane_ratio
from bench.interleaved import run_once
from hub.store.sqlite import COMMIT_INTERVAL_SECONDS

PHASES = {"throughput": "throughput", "paced": "latency"}
"""Each phase's name in the floor's figures, and in `bench.federation_dispatch`'s."""


ROLES = ("hub", "agent", "kubesim")
"""The roles whose CPU per workload is set beside the floor's, one by one."""

FIGURES = ("floor_ratio", "multiq_ratio", "margin", *(f"{role}_over_floor" for role in ROLES))


def margins(floor: Mapping[str, Any], multiq: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per phase, from one round's figures of the two benches: the floor's ratio, MultiQ's,
    and MultiQ's over the floor's (the margin); and each role's CPU per workload over its
    floor counterpart's (`hub_over_floor`, …), which says where a margin comes from."""
    out: dict[str, dict[str, float]] = {}
    for phase, multiq_phase in PHASES.items():
        floor_cpu = floor[phase]["cpu_ms_per_workload"]
        multiq_cpu = multiq[multiq_phase]["cpu_ms_per_workload"]
        floor_ratio = control_plane_ratio(floor_cpu)
        multiq_ratio = control_plane_ratio(multiq_cpu)
        out[phase] = {
            "floor_ratio": floor_ratio,
            "multiq_ratio": multiq_ratio,
            "margin": round(multiq_ratio / floor_ratio, 3),
            **{
                f"{role}_over_floor": round(multiq_cpu[role] / floor_cpu[role], 3) for role in ROLES
            },
        }
    return out


def summary(rounds: list[dict[str, dict[str, float]]], bound: float) -> dict[str, Any]:
    """Per phase, the medians over the rounds, and whether the median margin is within
    `bound`."""
    out: dict[str, Any] = {}
    for phase in PHASES:
        medians = {
            figure: round(statistics.median(r[phase][figure] for r in rounds), 3)
            for figure in FIGURES
        }
        out[phase] = {**medians, "within_bound": medians["margin"] <= bound}
    return out


CHECKOUT = Path(__file__).resolve().parents[1]


def _run(module: str, arguments: list[str]) -> dict[str, Any]:
    return run_once(CHECKOUT, [module, *arguments])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--bound", type=float, default=1.2)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    sizes = [
        "--workloads", str(args.workloads), "--paced", str(args.paced),
        "--rate", str(args.rate), "--nodes", str(args.nodes),
    ]  # fmt: skip
    floor_args = [
        *sizes, "--required", "--agent-batch", "0.05",
        "--commit-interval", str(COMMIT_INTERVAL_SECONDS),
    ]  # fmt: skip
    rounds = []
    for i in range(args.rounds):
        # Alternating which goes first, so a machine that drifts one way during the run
        # favours neither.
        if i % 2 == 0:
            floor = _run("bench.control_plane_floor", floor_args)
            multiq = _run("bench.federation_dispatch", sizes)
        else:
            multiq = _run("bench.federation_dispatch", sizes)
            floor = _run("bench.control_plane_floor", floor_args)
        rounds.append(margins(floor, multiq))
    result = {
        "benchmark": "control_plane_margin",
        "bound": args.bound,
        "workloads": args.workloads,
        "paced": args.paced,
        "rounds": rounds,
        "median": summary(rounds, args.bound),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
