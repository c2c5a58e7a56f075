"""Raw decision throughput: one admission cycle over 50,000 pending workloads, 1,000 queues.

    .venv/bin/python -m bench.engine_throughput

Every pending workload gets a decision per cycle (admitted, or pending with a reason and a
queue position), so decisions/s = (admitted + pending) / cycle wall time. Two mixes:
`repeated_shapes` (every queue holds three workload shapes, as the Kueue perf classes) and
`distinct_shapes` (every workload asks for a different amount, so no two evaluations can
share a result). Target (issue 4): ≥ 20,000 decisions/s.
"""

from __future__ import annotations

import json
import time

from agent.engine.cycle import schedule
from agent.engine.snapshot import (
    Admission,
    Namespace,
    PodSet,
    PodSetAssignment,
    Snapshot,
    Workload,
    WorkloadId,
)
from bench.engine_common import CPU, DEFAULT, LARGE_SCALE, Shape, build_config


def build(distinct: bool, pending_per_cq: int = 50, running_per_cq: int = 15) -> Snapshot:
    shape = Shape(cohorts=10, queues_per_cohort=100, classes=LARGE_SCALE)
    flavors, cqs, lqs, cohorts = build_config(shape)
    workloads: dict[WorkloadId, Workload] = {}
    n = 0
    for name in cqs:
        for i in range(running_per_cq):
            wid = WorkloadId(f"{name}-run-{i}")
            workloads[wid] = Workload(
                id=wid,
                namespace=Namespace("default"),
                queue_name=name,
                pod_sets=(PodSet("main", 1, {CPU: 1000}),),
                created_at=0.0,
                priority=50,
                admission=Admission(
                    name, (PodSetAssignment("main", 1, {CPU: DEFAULT}, {CPU: 1000}),)
                ),
                admitted_at=0.0,
            )
        for i in range(pending_per_cq):
            n += 1
            cpu = 1000 + n if distinct else (1000, 5000, 20000)[i % 3]
            wid = WorkloadId(f"{name}-pend-{i}")
            workloads[wid] = Workload(
                id=wid,
                namespace=Namespace("default"),
                queue_name=name,
                pod_sets=(PodSet("main", 1, {CPU: cpu}),),
                created_at=1.0 + i,
                priority=(50, 100, 200)[i % 3] if not distinct else 50,
            )
    return Snapshot(
        flavors=flavors, cluster_queues=cqs, local_queues=lqs, workloads=workloads, cohorts=cohorts
    )


def measure(snap: Snapshot, repeats: int = 3) -> dict[str, object]:
    best = None
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = schedule(snap, 10.0)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    assert result is not None and best is not None
    decisions = len(result.admitted) + len(result.pending)
    return {
        "pending": sum(1 for w in snap.workloads.values() if w.admission is None),
        "cluster_queues": len(snap.cluster_queues),
        "cycle_seconds": round(best, 3),
        "decisions": decisions,
        "admitted": len(result.admitted),
        "preemptions": len(result.preempted),
        "decisions_per_second": round(decisions / best),
    }


def main() -> None:
    out = {
        "repeated_shapes": measure(build(distinct=False)),
        "distinct_shapes": measure(build(distinct=True)),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
