"""Shared pieces of the engine benchmarks: Kueue's scheduler-perf shapes and a simulator.

Owns the generator for Kueue's `test/performance/scheduler` configurations (kueue.md §8.1)
and `Simulation`, a discrete-event replay in simulated time: arrivals, completions and the
engine's own `next_wakeup` (a preemption protection ending) are events; every distinct event
time runs one admission cycle (`agent.engine.cycle.schedule`) on a read-only view of the live
state, like an agent reacting to watch events and timers. Preempted workloads release their
quota at once and are requeued; they run again from the start. Nothing here waits on the
wall clock.

Called by `bench/engine_replay.py` and `bench/engine_throughput.py`.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import MappingProxyType

from agent.engine.cycle import schedule
from agent.engine.snapshot import (
    Admission,
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FlavorName,
    FlavorQuotas,
    LocalQueue,
    LocalQueueKey,
    Namespace,
    PodSet,
    PodSetAssignment,
    PreemptionConfig,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Snapshot,
    Workload,
    WorkloadId,
)

CPU = ResourceName("cpu")
DEFAULT = FlavorName("default")


def cpu_workload(
    wid: str,
    queue: ClusterQueueName,
    milli_cpu: int,
    created_at: float,
    *,
    priority: int = 0,
    admitted_at: float | None = None,
) -> Workload:
    """A one-pod workload of `milli_cpu` in the default namespace's local queue `queue`;
    with `admitted_at`, admitted then to the cluster queue of the same name (default
    flavor)."""
    admission = None
    if admitted_at is not None:
        assignment = PodSetAssignment("main", 1, {CPU: DEFAULT}, {CPU: milli_cpu})
        admission = Admission(queue, (assignment,))
    return Workload(
        id=WorkloadId(wid),
        namespace=Namespace("default"),
        queue_name=queue,
        pod_sets=(PodSet("main", 1, {CPU: milli_cpu}),),
        created_at=created_at,
        priority=priority,
        admission=admission,
        admitted_at=admitted_at,
    )


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    count: int
    interval: float
    runtime: float
    priority: int
    cpu: int  # whole CPUs

    def created_at(self, i: int) -> float:
        """When the class's i-th workload (from 0) is created: Kueue's generator waits one
        interval before each creation."""
        return round((i + 1) * self.interval, 6)


BASELINE = (
    WorkloadClass("small", 350, 0.1, 0.2, 50, 1),
    WorkloadClass("medium", 100, 0.5, 0.5, 100, 5),
    WorkloadClass("large", 50, 1.2, 1.0, 200, 20),
)
LARGE_SCALE = (
    WorkloadClass("small", 35, 0.06, 0.15, 50, 1),
    WorkloadClass("medium", 11, 0.3, 0.35, 100, 5),
    WorkloadClass("large", 4, 0.7, 0.7, 200, 20),
)


@dataclass
class Shape:
    cohorts: int
    queues_per_cohort: int
    classes: tuple[WorkloadClass, ...]
    nominal_cpu: int = 20
    borrowing_cpu: int = 100
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.LOWER_PRIORITY
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.ANY
    min_admit_seconds: float = 0.0
    """Every cluster queue's preemption protection (0: Kueue's behaviour)."""


def build_config(
    shape: Shape,
) -> tuple[
    dict[FlavorName, ResourceFlavor],
    dict[ClusterQueueName, ClusterQueue],
    dict[LocalQueueKey, LocalQueue],
    dict[CohortName, Cohort],
]:
    flavors = {DEFAULT: ResourceFlavor(DEFAULT)}
    cqs: dict[ClusterQueueName, ClusterQueue] = {}
    lqs: dict[LocalQueueKey, LocalQueue] = {}
    cohorts: dict[CohortName, Cohort] = {}
    quota = ResourceQuota(shape.nominal_cpu * 1000, shape.borrowing_cpu * 1000)
    group = ResourceGroup((CPU,), (FlavorQuotas(DEFAULT, {CPU: quota}),))
    preemption = PreemptionConfig(
        within_cluster_queue=shape.within_cluster_queue,
        reclaim_within_cohort=shape.reclaim_within_cohort,
        min_admit_seconds=shape.min_admit_seconds,
    )
    for c in range(shape.cohorts):
        cohort = CohortName(f"cohort-{c}")
        cohorts[cohort] = Cohort(cohort)
        for q in range(shape.queues_per_cohort):
            name = ClusterQueueName(f"cq-{c}-{q}")
            cqs[name] = ClusterQueue(name, (group,), cohort, preemption=preemption)
            local = LocalQueue(Namespace("default"), name, name)
            lqs[local.key] = local
    return flavors, cqs, lqs, cohorts


def makespan_lower_bound(jobs: Iterable[tuple[float, float, int]], capacity: int) -> float:
    """The earliest any scheduler could finish `jobs` — (arrival, runtime, cpu) each — on
    `capacity` CPUs: for every instant τ, work done before τ is at most what had arrived and
    could have run by then (Σ cpu · clamp(τ − arrival, 0, runtime)) and at most capacity · τ,
    and the rest takes (work − that) / capacity after τ; no job ends before its arrival plus
    its runtime either. Total work ÷ capacity alone (τ = 0) assumes work can run before it
    arrives: when a shape's first workloads come late or small, no scheduler reaches it.

    The bound is piecewise linear in τ between arrivals and ends of runtime, so those
    instants (and 0) are the only ones looked at: one sweep in time order."""
    events: list[tuple[float, int]] = []
    work = 0.0
    span = 0.0
    for arrival, runtime, cpu in jobs:
        events.append((arrival, cpu))
        events.append((arrival + runtime, -cpu))
        work += runtime * cpu
        span = max(span, arrival + runtime)
    events.sort()
    bound = work / capacity
    runnable = 0  # CPUs of the jobs that could be running at τ if capacity were unbounded
    could_have_run = 0.0
    last = 0.0
    for at, delta in events:
        could_have_run += runnable * (at - last)
        last = at
        runnable += delta
        bound = max(bound, at + (work - min(could_have_run, capacity * at)) / capacity)
    return max(bound, span)


@dataclass
class Arrival:
    at: float
    workload: Workload
    klass: WorkloadClass


def arrivals(shape: Shape, cqs: dict[ClusterQueueName, ClusterQueue]) -> list[Arrival]:
    out = []
    for name in cqs:
        for k in shape.classes:
            for i in range(k.count):
                at = k.created_at(i)
                wl = Workload(
                    id=WorkloadId(f"{name}-{k.name}-{i}"),
                    namespace=Namespace("default"),
                    queue_name=name,
                    pod_sets=(PodSet("main", 1, {CPU: k.cpu * 1000}),),
                    created_at=at,
                    priority=k.priority,
                )
                out.append(Arrival(at, wl, k))
    out.sort(key=lambda a: (a.at, a.workload.id))
    return out


@dataclass
class Stats:
    cycles: int = 0
    wakeup_cycles: int = 0
    """Cycles run only because the engine asked for a wakeup (no arrival or completion)."""
    decisions: int = 0
    admissions: int = 0
    preemptions: int = 0
    preempted_by_class: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lost_cpu_seconds: float = 0.0
    engine_seconds: float = 0.0
    first_admit: dict[WorkloadId, float] = field(default_factory=dict)
    last_admit: dict[WorkloadId, float] = field(default_factory=dict)
    """Each workload's latest admission: Kueue's harness measures time to admission to it
    (its recorder overwrites the time on every transition to Admitted, so a preempted
    workload counts until it is admitted again)."""
    usage_integral: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    makespan: float = 0.0


class Simulation:
    """Event-driven replay: every distinct event time runs one cycle."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.flavors, self.cqs, self.lqs, self.cohorts = build_config(shape)
        self.arrivals = arrivals(shape, self.cqs)
        self.klass = {a.workload.id: a.klass for a in self.arrivals}
        self.created = {a.workload.id: a.at for a in self.arrivals}
        self.workloads: dict[WorkloadId, Workload] = {}
        self.snapshot = Snapshot(
            flavors=self.flavors,
            cluster_queues=self.cqs,
            local_queues=self.lqs,
            workloads=MappingProxyType(self.workloads),
            cohorts=self.cohorts,
        )
        self.stats = Stats()
        self.generation: dict[WorkloadId, int] = defaultdict(int)
        self.running_cpu: dict[str, int] = defaultdict(int)
        self.last_t = 0.0

    def _advance(self, t: float) -> None:
        dt = t - self.last_t
        if dt > 0:
            for cq, cpu in self.running_cpu.items():
                self.stats.usage_integral[cq] += cpu * dt
        self.last_t = t

    def run(self) -> Stats:
        events: list[tuple[float, int, str, WorkloadId, int]] = []
        seq = 0
        for a in self.arrivals:
            events.append((a.at, seq, "arrive", a.workload.id, 0))
            seq += 1
        heapq.heapify(events)
        pending_arrivals = {a.workload.id: a.workload for a in self.arrivals}
        stats = self.stats
        wakeups: set[float] = set()
        while events:
            t = events[0][0]
            self._advance(t)
            only_wakeup = True
            while events and events[0][0] == t:
                _, _, kind, wid, gen = heapq.heappop(events)
                if kind == "wakeup":
                    wakeups.discard(t)
                    continue
                only_wakeup = False
                if kind == "arrive":
                    self.workloads[wid] = pending_arrivals.pop(wid)
                elif kind == "finish" and self.generation[wid] == gen:
                    wl = self.workloads.pop(wid)
                    assert wl.admission is not None
                    self.running_cpu[wl.admission.cluster_queue] -= wl.pod_sets[0].requests[CPU]
                    stats.makespan = max(stats.makespan, t)
            start = time.perf_counter()
            result = schedule(self.snapshot, t)
            stats.engine_seconds += time.perf_counter() - start
            stats.cycles += 1
            stats.wakeup_cycles += only_wakeup
            stats.decisions += len(result.admitted) + len(result.pending)
            wake = result.next_wakeup
            if wake is not None and wake not in wakeups:
                # The engine's timer (always later than t): a cycle then, event or not.
                wakeups.add(wake)
                heapq.heappush(events, (wake, seq, "wakeup", WorkloadId(""), 0))
                seq += 1
            for p in result.preempted:
                victim = self.workloads[p.victim]
                assert victim.admission is not None
                self.running_cpu[victim.admission.cluster_queue] -= victim.pod_sets[0].requests[CPU]
                self.generation[p.victim] += 1  # its completion event is now stale
                self.workloads[p.victim] = dataclasses.replace(
                    victim, admission=None, admitted_at=None
                )
                stats.preemptions += 1
                stats.preempted_by_class[self.klass[p.victim].name] += 1
                assert victim.admitted_at is not None
                stats.lost_cpu_seconds += (t - victim.admitted_at) * (
                    victim.pod_sets[0].requests[CPU] / 1000
                )
            for adm in result.admitted:
                wl = self.workloads[adm.workload]
                self.workloads[adm.workload] = dataclasses.replace(
                    wl, admission=adm.admission, admitted_at=t, preempting=False
                )
                self.running_cpu[adm.admission.cluster_queue] += wl.pod_sets[0].requests[CPU]
                stats.admissions += 1
                stats.first_admit.setdefault(adm.workload, t)
                stats.last_admit[adm.workload] = t
                gen = self.generation[adm.workload]
                runtime = self.klass[adm.workload].runtime
                heapq.heappush(events, (round(t + runtime, 6), seq, "finish", adm.workload, gen))
                seq += 1
            for wid in result.new_preemptors:
                wl = self.workloads[wid]
                if wl.admission is None and not wl.preempting:
                    self.workloads[wid] = dataclasses.replace(wl, preempting=True)
            if result.preempted:
                # The victims' quota is free now: the eviction is an event of its own.
                heapq.heappush(events, (t, seq, "evicted", WorkloadId(""), 0))
                seq += 1
        return stats

    def report(self, wall: float) -> dict[str, object]:
        stats = self.stats

        def average_ms(admitted: dict[WorkloadId, float]) -> dict[str, float]:
            """Per class, the average time from creation to `admitted`, in milliseconds."""
            by_class: dict[str, list[float]] = defaultdict(list)
            for wid, at in admitted.items():
                by_class[self.klass[wid].name].append(at - self.created[wid])
            return {k: round(1000 * sum(v) / len(v), 1) for k, v in sorted(by_class.items())}

        makespan = stats.makespan
        usage = {
            cq: stats.usage_integral[cq] / (self.shape.nominal_cpu * 1000 * makespan)
            for cq in self.cqs
        }
        # Every cluster queue of every cohort gets the same stream and the same nominal
        # quota, so one queue's stream on its nominal bounds its cohort's makespan.
        stream = [
            (k.created_at(i), k.runtime, k.cpu) for k in self.shape.classes for i in range(k.count)
        ]
        ideal = makespan_lower_bound(stream, self.shape.nominal_cpu)
        work_over_capacity = sum(k.count * k.cpu * k.runtime for k in self.shape.classes) / (
            self.shape.nominal_cpu
        )
        values = sorted(usage.values())
        return {
            "workloads": len(self.arrivals),
            "cluster_queues": len(self.cqs),
            "wall_seconds": round(wall, 2),
            "engine_seconds": round(stats.engine_seconds, 2),
            "min_admit_seconds": self.shape.min_admit_seconds,
            "cycles": stats.cycles,
            "wakeup_cycles": stats.wakeup_cycles,
            "admissions": stats.admissions,
            "preemptions": stats.preemptions,
            "preempted_by_class": dict(sorted(stats.preempted_by_class.items())),
            "lost_cpu_seconds": round(stats.lost_cpu_seconds, 1),
            "decisions": stats.decisions,
            "decisions_per_second": round(stats.decisions / stats.engine_seconds)
            if stats.engine_seconds
            else None,
            # As Kueue's harness measures it: to the last admission.
            "avg_time_to_admission_ms": average_ms(stats.last_admit),
            "avg_time_to_first_admission_ms": average_ms(stats.first_admit),
            "never_admitted": len(self.arrivals) - len(stats.first_admit),
            "makespan_s": round(makespan, 3),
            "ideal_makespan_s": round(ideal, 3),
            "makespan_over_ideal": round(makespan / ideal, 4),
            # The yardstick before arrivals were counted (it ignores the idle start).
            "work_over_capacity_s": round(work_over_capacity, 3),
            "makespan_over_work_over_capacity": round(makespan / work_over_capacity, 4),
            "cq_usage_of_nominal": {
                "min": round(values[0], 4),
                "mean": round(sum(values) / len(values), 4),
                "max": round(values[-1], 4),
            },
        }
