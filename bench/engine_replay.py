"""Replay Kueue's scheduler-perf shapes through the engine in simulated time; print JSON.

    .venv/bin/python -m bench.engine_replay baseline      # 5 cohorts × 6 CQs, 15,000 workloads
    .venv/bin/python -m bench.engine_replay large-scale   # 10 cohorts × 100 CQs, 50,000
    .venv/bin/python -m bench.engine_replay baseline-no-preemption   # analysis only
    .venv/bin/python -m bench.engine_replay baseline-min-admit   # protection sweep, below

Targets (issue 4): baseline < 30 s wall, large-scale < 120 s wall; issue 17: large-scale ≤
1.05× ideal, baseline-min-admit-1s ≤ 1.01×. (Issue 4 also asked baseline within 10% of ideal,
which its own policies rule out: "baseline" preempts as Kueue does, below, and any scheduler
that preempts on arrival without knowing runtimes measures ~1.15× there, as this one does;
the protected variant is the restated target.) The ideal
is the earliest any scheduler could finish the stream as it arrives
(`engine_common.makespan_lower_bound`); `work_over_capacity_s` beside it is total CPU·s ÷
cohort capacity, the ideal before arrivals were counted. Kueue's generator waits one interval
before each creation, so no queue has its first large before 0.7 s (large-scale) or 1.2 s
(baseline) and the capacity idle until then cannot be made up: work ÷ capacity is out of
reach by 12.7% and 1.4%.

"baseline" is Kueue's shape exactly, so it preempts as Kueue does: a large arriving 0.2 s
after its queue refilled with mediums preempts them, and they start over. The
"baseline-min-admit-*" variants give every cluster queue `minAdmitSeconds` of 0.25, 0.5 and
1 s (a workload admitted less than that long before its preemptor was queued is not
preempted); "baseline-min-admit" runs all three, to compare the makespan and what it costs
the large class in time to admission.

Time to admission is measured as Kueue's harness measures it: from creation to the
workload's last admission, so a preempted workload counts until it is admitted again
(`avg_time_to_first_admission_ms` gives the first admission beside it).
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
    **{
        f"baseline-min-admit-{seconds:g}s": Shape(
            cohorts=5, queues_per_cohort=6, classes=BASELINE, min_admit_seconds=seconds
        )
        for seconds in (0.25, 0.5, 1.0)
    },
}
GROUPS = {"baseline-min-admit": [name for name in SHAPES if name.startswith("baseline-min-admit-")]}


def main(argv: list[str]) -> None:
    names = [name for arg in argv or ["baseline"] for name in GROUPS.get(arg, [arg])]
    out = {}
    for name in names:
        sim = Simulation(SHAPES[name])
        start = time.perf_counter()
        sim.run()
        out[name] = sim.report(time.perf_counter() - start)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
