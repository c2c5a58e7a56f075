"""What an agent's admission cycle costs as the running workloads grow: the incremental cycle
(`schedule_incremental`, what the agent runs) against the full one (`schedule`), on the same
snapshots, in one run.

    .venv/bin/python -m bench.engine_running [--running 1000 10000] [--cycles 200]

One cluster queue whose quota the running workloads fill (one CPU each), and as many waiting
behind them. Each cycle one running workload has finished, so one waiting is admitted — the
steady state of a busy cluster, where a cycle follows every finished Job. Measured with
waitForPodsReady off and on (on: every running workload has a deadline, none due). The
incremental cycle should cost what changed, not what runs: from 1,000 to 10,000 running its
CPU per cycle should grow far less than tenfold, while the full cycle's grows with them. Prints
JSON: CPU microseconds per cycle (process time, the best of three passes over the cycles),
and full / incremental as a ratio taken in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import time
from collections.abc import Callable

from agent.engine.apply import apply_result
from agent.engine.carry import Carry
from agent.engine.cycle import schedule, schedule_incremental
from agent.engine.snapshot import (
    ClusterQueue,
    ClusterQueueName,
    EngineConfig,
    FlavorQuotas,
    LocalQueue,
    Namespace,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    WaitForPodsReady,
    Workload,
    WorkloadId,
)
from bench.engine_common import CPU, DEFAULT, cpu_workload
from runtime.collector import GC_THRESHOLDS

QUEUE = ClusterQueueName("cq")


def build(running: int, pods_ready: bool) -> Snapshot:
    """`running` admitted one-CPU workloads filling the queue's quota, as many waiting."""
    group = ResourceGroup((CPU,), (FlavorQuotas(DEFAULT, {CPU: ResourceQuota(running * 1000)}),))
    local = LocalQueue(Namespace("default"), QUEUE, QUEUE)
    workloads: dict[WorkloadId, Workload] = {}
    for i in range(running):
        run = cpu_workload(f"run-{i}", QUEUE, 1000, 0.0, admitted_at=1.0)
        workloads[run.id] = run
    for i in range(running):
        waiting = cpu_workload(f"wait-{i}", QUEUE, 1000, 2.0 + i)
        workloads[waiting.id] = waiting
    ready = WaitForPodsReady(enabled=pods_ready, timeout_seconds=3600.0)
    return Snapshot(
        flavors={DEFAULT: ResourceFlavor(DEFAULT)},
        cluster_queues={QUEUE: ClusterQueue(QUEUE, (group,))},
        local_queues={local.key: local},
        workloads=workloads,
        config=EngineConfig(wait_for_pods_ready=ready),
    )


def steps(start: Snapshot, cycles: int) -> list[tuple[Snapshot, set[WorkloadId], float]]:
    """The snapshots of `cycles` cycles — before each, the oldest running workload finished —
    with the ids changed since the cycle before, and each cycle's time."""
    out: list[tuple[Snapshot, set[WorkloadId], float]] = []
    snap, admitted = start, set[WorkloadId]()
    running = [w.id for w in start.workloads.values() if w.admission is not None]
    for i in range(cycles):
        finished = running.pop(0)
        workloads = dict(snap.workloads)
        del workloads[finished]
        snap = dataclasses.replace(snap, workloads=workloads)
        now = 10.0 + i
        out.append((snap, {finished, *admitted}, now))
        result = schedule(snap, now)
        assert len(result.admitted) == 1, "one finished, one admitted"
        admitted = {a.workload for a in result.admitted}
        running.extend(admitted)
        snap = apply_result(snap, result)
    return out


def best_per_cycle(run: Callable[[], float], cycles: int) -> float:
    """The best of three `run`s (each returns the CPU seconds of its cycles), per cycle, in
    microseconds."""
    return min(run() for _ in range(3)) / cycles * 1e6


def measure(running: int, pods_ready: bool, cycles: int) -> dict[str, object]:
    start = build(running, pods_ready)
    plan = steps(start, cycles)

    def incremental() -> float:
        _, carry = schedule_incremental(start, 9.0)  # (the carry's first build: not timed)
        started = time.process_time()
        for snap, changed, now in plan:
            _, carry = schedule_incremental(snap, now, carry, changed)
        assert isinstance(carry, Carry)
        return time.process_time() - started

    def full() -> float:
        started = time.process_time()
        for snap, _, now in plan:
            schedule(snap, now)
        return time.process_time() - started

    inc = best_per_cycle(incremental, cycles)
    whole = best_per_cycle(full, cycles)
    return {
        "running": running,
        "waiting": running,
        "wait_for_pods_ready": pods_ready,
        "incremental_us_per_cycle": round(inc),
        "full_us_per_cycle": round(whole),
        "full_over_incremental": round(whole / inc, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--running", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--cycles", type=int, default=200)
    args = parser.parse_args()
    gc.set_threshold(*GC_THRESHOLDS)
    out = {
        "benchmark": "engine_running",
        "cycles": args.cycles,
        "results": [
            measure(n, ready, args.cycles) for n in args.running for ready in (False, True)
        ],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
