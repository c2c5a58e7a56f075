"""Replay Kueue's scheduler-perf shapes through the engine in simulated time; print JSON.

    .venv/bin/python -m bench.engine_replay baseline      # 5 cohorts × 6 CQs, 15,000 workloads
    .venv/bin/python -m bench.engine_replay large-scale   # 10 cohorts × 100 CQs, 50,000
    .venv/bin/python -m bench.engine_replay baseline-no-preemption   # analysis only

Targets (issue 4): baseline < 30 s wall, large-scale < 120 s wall, baseline makespan within
10% of ideal (total CPU·s ÷ cohort capacity, or the arrival span if longer).
"""

from __future__ import annotations

import json
import sys
import time

from agent.engine.snapshot import PreemptionPolicy
from bench.engine_common import BASELINE, LARGE_SCALE, Shape, Simulation

SHAPES = {
    "baseline": Shape(cohorts=5, queues_per_cohort=6, classes=BASELINE),
    "large-scale": Shape(cohorts=10, queues_per_cohort=100, classes=LARGE_SCALE),
    # For analysis: the baseline without preemption shows what preemption costs in makespan.
    "baseline-no-preemption": Shape(
        cohorts=5,
        queues_per_cohort=6,
        classes=BASELINE,
        within_cluster_queue=PreemptionPolicy.NEVER,
        reclaim_within_cohort=PreemptionPolicy.NEVER,
    ),
}


def main(argv: list[str]) -> None:
    names = argv or ["baseline"]
    out = {}
    for name in names:
        sim = Simulation(SHAPES[name])
        start = time.perf_counter()
        sim.run()
        out[name] = sim.report(time.perf_counter() - start)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
