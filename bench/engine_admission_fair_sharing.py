"""Admission fair sharing in simulated time: a heavy local queue yields to a light one, and the
order flips back as the heavy queue's usage decays; print JSON.

    .venv/bin/python -m bench.engine_admission_fair_sharing            # half-lives 5, 10, 20 min
    .venv/bin/python -m bench.engine_admission_fair_sharing 600        # one half-life, seconds

One cluster queue of 10 CPUs with `admissionMode: UsageBasedAdmissionFairSharing` and two
local queues, `heavy` and `light`. For the first hour `heavy` keeps it full (ten one-CPU jobs
of one minute each, every minute); `light` is idle. At t = 1 h both submit a backlog of the
same jobs. Every minute, on the simulated clock: the usage of both queues is sampled
(`agent.engine.fair_usage.sample`, sampling interval one minute), the running jobs finish,
one engine cycle runs (`agent.engine.cycle.schedule_incremental`, as the agent runs it, on
the snapshot stamped with the queues' scores) and every admission adds its entry penalty.

Reported per half-life H: whether the light queue's work went first (every admission of the
first cycle after both submitted), the crossover — the time after both submitted at which the
heavy queue's work is admitted again — measured and analytic, their ratio, and the score
timeline. Analytic: the heavy queue's usage after an hour at U is U·(1 − 2^(−1h/H)) and then
decays as 2^(−t/H) while the light queue's grows as U·(1 − 2^(−t/H)); they meet at
t* = H·log2(2 − 2^(−1h/H)). The measured crossover is on the one-minute grid of the samples,
so it may exceed t* by up to one sampling interval (ratio ≤ 1 + interval/t*).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time

from agent.engine.carry import Carry
from agent.engine.cycle import schedule_incremental
from agent.engine.fair_usage import (
    LocalQueueUsage,
    admitted_usage,
    penalize,
    requests,
    sample,
    usage_score,
    with_usage,
)
from agent.engine.snapshot import (
    Admission,
    AdmissionFairSharing,
    ClusterQueue,
    ClusterQueueName,
    EngineConfig,
    FlavorName,
    FlavorQuotas,
    LocalQueue,
    LocalQueueKey,
    Namespace,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Snapshot,
    Workload,
    WorkloadId,
)

__all__ = ["analytic_crossover", "main", "run"]

CPU = ResourceName("cpu")
FLAVOR = FlavorName("default")
CQ = ClusterQueueName("team")
HOUR = 3600.0
TICK = 60.0
"""Job length, cycle period and sampling interval."""


def analytic_crossover(half_life: float, heavy_for: float = HOUR) -> float:
    """Seconds after both submit until the heavy queue's usage falls to the light one's."""
    return half_life * math.log2(2.0 - 2.0 ** (-heavy_for / half_life))


def _snapshot(cpus: int, config: AdmissionFairSharing) -> Snapshot:
    cq = ClusterQueue(
        CQ,
        (
            ResourceGroup(
                (CPU,), (FlavorQuotas(FLAVOR, {CPU: ResourceQuota(nominal=cpus * 1000)}),)
            ),
        ),
        admission_fair_sharing=True,
    )
    lqs = [LocalQueue(Namespace("ml"), name, CQ) for name in ("heavy", "light")]
    return Snapshot(
        flavors={FLAVOR: ResourceFlavor(FLAVOR)},
        cluster_queues={CQ: cq},
        local_queues={q.key: q for q in lqs},
        workloads={},
        config=EngineConfig(admission_fair_sharing=config),
    )


def _job(queue: str, n: int, at: float) -> Workload:
    return Workload(
        WorkloadId(f"ml/{queue}-{n}"),
        Namespace("ml"),
        queue,
        (PodSet("main", 1, {CPU: 1000}),),
        created_at=at,
    )


def run(half_life: float, cpus: int = 10, heavy_for: float = HOUR) -> dict[str, object]:
    """One simulation; see the module docstring."""
    config = AdmissionFairSharing(
        usage_half_life_seconds=half_life, usage_sampling_interval_seconds=TICK
    )
    base = _snapshot(cpus, config)
    queues = {"heavy": LocalQueueKey("ml/heavy"), "light": LocalQueueKey("ml/light")}
    workloads: dict[WorkloadId, Workload] = {}
    usage: dict[LocalQueueKey, LocalQueueUsage] = {}
    carry: Carry | None = None
    last: dict[WorkloadId, Workload] = {}
    submitted = {"heavy": 0, "light": 0}
    backlog_at = heavy_for
    horizon = heavy_for + max(4 * half_life, 2 * analytic_crossover(half_life, heavy_for))
    backlog = int((horizon - heavy_for) / TICK + 2) * cpus
    first_cycle: dict[str, int] = {}
    crossover: float | None = None
    timeline: list[dict[str, float]] = []
    cycles, engine_seconds = 0, 0.0
    now = 0.0
    while now <= horizon:
        running = [w for w in workloads.values() if w.admission is not None]
        usage = sample(usage, base.local_queues, admitted_usage(running), now, config)
        for w in running:
            del workloads[w.id]  # one tick long: finished
        if now < heavy_for:
            for _ in range(cpus - sum(1 for w in workloads.values() if w.queue_name == "heavy")):
                job = _job("heavy", submitted["heavy"], now)
                submitted["heavy"] += 1
                workloads[job.id] = job
        elif now == backlog_at:
            for queue in ("heavy", "light"):
                for _ in range(backlog):
                    job = _job(queue, submitted[queue], now)
                    submitted[queue] += 1
                    workloads[job.id] = job
        snap = with_usage(dataclasses.replace(base, workloads=dict(workloads)), usage)
        scores = {name: usage_score(usage[key], config, 1.0) for name, key in queues.items()}
        changed = {k for k, w in snap.workloads.items() if last.get(k) is not w}
        changed.update(k for k in last if k not in snap.workloads)
        started = time.perf_counter()
        result, carry = schedule_incremental(snap, now, carry, changed if carry else None)
        engine_seconds += time.perf_counter() - started
        cycles += 1
        by_queue = {"heavy": 0, "light": 0}
        for admit in result.admitted:
            wl = snap.workloads[admit.workload]
            by_queue[wl.queue_name] += 1
            usage[wl.local_queue] = penalize(usage[wl.local_queue], requests(wl), config)
            workloads[wl.id] = dataclasses.replace(
                wl,
                admission=Admission(CQ, (PodSetAssignment("main", 1, {CPU: FLAVOR}, {CPU: 1000}),)),
                admitted_at=now,
            )
        last = dict(snap.workloads)
        if now >= backlog_at:
            if now == backlog_at:
                first_cycle = by_queue
            if crossover is None and by_queue["heavy"]:
                crossover = now - backlog_at
            timeline.append(
                {
                    "t_s": now - backlog_at,
                    "heavy_score": round(scores["heavy"], 3),
                    "light_score": round(scores["light"], 3),
                    "admitted_heavy": by_queue["heavy"],
                    "admitted_light": by_queue["light"],
                }
            )
        now += TICK
    analytic = analytic_crossover(half_life, heavy_for)
    return {
        "half_life_s": half_life,
        "sampling_interval_s": TICK,
        "cpus": cpus,
        "heavy_ran_for_s": heavy_for,
        "light_first": first_cycle.get("light", 0) == cpus and first_cycle.get("heavy", 0) == 0,
        "first_cycle_admitted": first_cycle,
        "crossover_measured_s": crossover,
        "crossover_analytic_s": round(analytic, 1),
        "crossover_ratio": None if crossover is None else round(crossover / analytic, 4),
        "within_one_sampling_interval": crossover is not None
        and analytic <= crossover <= analytic + TICK,
        "cycles": cycles,
        "engine_ms_per_cycle": round(engine_seconds / cycles * 1000, 3),
        "timeline": timeline[:: max(1, len(timeline) // 24)],
    }


def main(argv: list[str]) -> None:
    half_lives = [float(a) for a in argv] or [300.0, 600.0, 1200.0]
    print(json.dumps({"runs": [run(h) for h in half_lives]}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
