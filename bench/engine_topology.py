"""Topology-aware placement at scale, in simulated time; print JSON.

    .venv/bin/python -m bench.engine_topology          # 2,000 gangs on 1,024 nodes
    .venv/bin/python -m bench.engine_topology quick    # 300 gangs (the smoke test's size)

The cluster is `examples/kubesim/topology-1024.profile` (16 blocks × 8 racks × 8 hosts, 8 GPUs
a host), turned into the engine's nodes by the agent's own converter
(`agent.snapshots.ClusterNodes`). A seeded stream of gangs (pods of one GPU) arrives about a
third faster than the fabric can run them: 8–64 pods requiring one rack, 64–256 requiring one
block, 8–64 preferring a rack, 64–256 preferring a block, and small unconstrained work. One
cluster queue whose quota is the whole fabric (so topology, not quota, decides),
BestEffortFIFO, no preemption. Every arrival and completion time runs one engine cycle
(`agent.engine.cycle.schedule_incremental`, as the agent runs it); admitted gangs run for
their duration and leave.

The same stream runs through a first-fit baseline written here: the same queue order, but
each gang takes the first domain (in name order) that holds it — for a preferred level the
first rack, else the first block, else nodes in order — and its nodes in order.

Reported for both: decisions/s (the engine: every workload a cycle decides on, admitted or
pending, per second of engine time — as bench.engine_replay counts; and placements tried/s),
required gangs admitted in one domain (must be 100%), preferred gangs admitted in one domain
of their level, GPU utilisation while a gang waits, average time to admission per kind, and
makespan ÷ ideal (ideal: total GPU·s ÷ GPUs, or the last arrival plus its run if later).
Targets (issue 17): ≥ 2,000 pod-set decisions/s, utilisation ≥ 90% while gangs wait,
preferred-in-one-domain at least first-fit's.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from agent.engine.carry import Carry
from agent.engine.cycle import schedule_incremental
from agent.engine.result import CycleResult
from agent.engine.snapshot import (
    ClusterQueue,
    ClusterQueueName,
    FlavorName,
    FlavorQuotas,
    LocalQueue,
    Namespace,
    Node,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Snapshot,
    Toleration,
    Topology,
    TopologyMode,
    TopologyRequest,
    Workload,
    WorkloadId,
)
from agent.snapshots import ClusterNodes
from kubesim.profile import build_nodes, load_profile

PROFILE = Path(__file__).resolve().parent.parent / "examples/kubesim/topology-1024.profile"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = ResourceName("nvidia.com/gpu")
CPU = ResourceName("cpu")
FLAVOR = FlavorName("gpu-h100")
QUEUE = ClusterQueueName("gpu")
SEED = 17
LOAD = 1.35
"""Offered load ÷ capacity while gangs arrive: queues build up, so gangs wait."""


@dataclass(frozen=True)
class Kind:
    name: str
    mode: TopologyMode
    level: str | None
    sizes: tuple[int, ...]
    weight: float


KINDS = (
    Kind("required-rack", TopologyMode.REQUIRED, RACK, (8, 16, 24, 32, 48, 64), 0.25),
    Kind("required-block", TopologyMode.REQUIRED, BLOCK, (64, 96, 128, 192, 256), 0.15),
    Kind("preferred-rack", TopologyMode.PREFERRED, RACK, (8, 16, 24, 32, 48, 64), 0.25),
    Kind("preferred-block", TopologyMode.PREFERRED, BLOCK, (64, 96, 128, 192, 256), 0.1),
    Kind("unconstrained", TopologyMode.UNCONSTRAINED, None, (1, 2, 4, 8), 0.25),
)


@dataclass(frozen=True)
class Gang:
    id: WorkloadId
    kind: Kind
    pods: int
    arrives: float
    runs: float


def stream(count: int, gpus: int) -> list[Gang]:
    rng = random.Random(SEED)
    weights = [k.weight for k in KINDS]
    mean_size = sum(k.weight * sum(k.sizes) / len(k.sizes) for k in KINDS)
    mean_run = 150.0
    interval = mean_size * mean_run / (gpus * LOAD)
    out = []
    t = 0.0
    for i in range(count):
        t += rng.expovariate(1 / interval)
        kind = rng.choices(KINDS, weights)[0]
        out.append(
            Gang(
                WorkloadId(f"default/g{i:05d}"),
                kind,
                rng.choice(kind.sizes),
                round(t, 3),
                round(rng.uniform(60.0, 240.0), 3),
            )
        )
    return out


def fabric() -> dict[str, Node]:
    objects = {str(n["metadata"]["name"]): n for n in build_nodes(load_profile(PROFILE))}
    return ClusterNodes().build(objects, {}, lambda namespace, name: False)


def pod_set(gang: Gang) -> PodSet:
    kind = gang.kind
    return PodSet(
        "workers",
        gang.pods,
        {GPU: 1000, CPU: 4000},
        tolerations=(Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"),),
        topology=TopologyRequest(kind.mode, kind.level),
    )


@dataclass
class Record:
    """What a run measures, for the engine and the baseline alike."""

    admitted_at: dict[WorkloadId, float] = field(default_factory=dict)
    in_one_domain: dict[WorkloadId, bool] = field(default_factory=dict)
    busy_while_waiting: float = 0.0
    time_waiting: float = 0.0
    makespan: float = 0.0
    engine_seconds: float = 0.0
    cycles: int = 0
    decisions: int = 0


class Run:
    """The event loop both schedulers share: arrivals and completions in time order; after
    every event time the scheduler admits what it can (`admit(t)` returns (gang, hosts))."""

    def __init__(self, gangs: list[Gang], gpus: int) -> None:
        self.gangs = {g.id: g for g in gangs}
        self.gpus = gpus
        self.record = Record()
        self.waiting: dict[WorkloadId, Gang] = {}
        self.used = 0

    def go(self, admit: Callable[[float], list[tuple[Gang, Mapping[str, int]]]]) -> Record:
        events: list[tuple[float, int, str, WorkloadId]] = [
            (g.arrives, i, "arrive", g.id) for i, g in enumerate(self.gangs.values())
        ]
        heapq.heapify(events)
        seq = len(events)
        rec = self.record
        last = 0.0
        while events:
            t = events[0][0]
            if any(g.kind.mode is not TopologyMode.UNCONSTRAINED for g in self.waiting.values()):
                rec.time_waiting += t - last
                rec.busy_while_waiting += (t - last) * self.used / self.gpus
            last = t
            while events and events[0][0] == t:
                _, _, what, wid = heapq.heappop(events)
                gang = self.gangs[wid]
                if what == "arrive":
                    self.waiting[wid] = gang
                else:
                    self.used -= gang.pods
                    self.finished(gang)
                    rec.makespan = max(rec.makespan, t)
            for gang, hosts in admit(t):
                del self.waiting[gang.id]
                self.used += gang.pods
                rec.admitted_at[gang.id] = t
                if gang.kind.level is not None:
                    rec.in_one_domain[gang.id] = len(self.domains(hosts, gang.kind.level)) == 1
                heapq.heappush(events, (round(t + gang.runs, 6), seq, "finish", gang.id))
                seq += 1
        return rec

    def finished(self, gang: Gang) -> None:
        """The scheduler's hook: a gang left its nodes."""

    def domains(self, hosts: Mapping[str, int], level: str) -> set[str]:
        raise NotImplementedError


class EngineRun(Run):
    """The engine: one cycle per event time over a live view of the workloads."""

    def __init__(self, gangs: list[Gang], nodes: dict[str, Node]) -> None:
        super().__init__(gangs, sum(n.allocatable[GPU] for n in nodes.values()) // 1000)
        self.labels = {name: n.labels for name, n in nodes.items()}
        self.workloads: dict[WorkloadId, Workload] = {}
        flavor = ResourceFlavor(
            FLAVOR,
            {"multiq.dev/pool": "gpu"},
            tolerations=(Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"),),
            topology_name="gpu-fabric",
        )
        quota = {GPU: ResourceQuota(self.gpus * 1000), CPU: ResourceQuota(10**9)}
        group = ResourceGroup((GPU, CPU), (FlavorQuotas(FLAVOR, quota),))
        local = LocalQueue(Namespace("default"), "gpu", QUEUE)
        self.snapshot = Snapshot(
            flavors={FLAVOR: flavor},
            cluster_queues={QUEUE: ClusterQueue(QUEUE, (group,))},
            local_queues={local.key: local},
            workloads=MappingProxyType(self.workloads),
            topologies={"gpu-fabric": Topology("gpu-fabric", (BLOCK, RACK, HOST))},
            nodes=nodes,
        )
        self.arrived: set[WorkloadId] = set()
        self.carry: Carry | None = None
        self.changed: set[WorkloadId] = set()
        """Workloads added, changed or gone since the last cycle (as the agent's shell
        tells the incremental cycle)."""

    def admit(self, t: float) -> list[tuple[Gang, Mapping[str, int]]]:
        for wid in self.waiting.keys() - self.arrived:
            gang = self.gangs[wid]
            self.arrived.add(wid)
            self.workloads[wid] = Workload(
                wid, Namespace("default"), "gpu", (pod_set(gang),), created_at=gang.arrives
            )
            self.changed.add(wid)
        start = time.perf_counter()
        result: CycleResult
        result, self.carry = schedule_incremental(self.snapshot, t, self.carry, self.changed)
        self.changed = set()
        rec = self.record
        rec.engine_seconds += time.perf_counter() - start
        rec.cycles += 1
        rec.decisions += len(result.admitted) + len(result.pending)
        out: list[tuple[Gang, Mapping[str, int]]] = []
        for adm in result.admitted:
            wl = self.workloads[adm.workload]
            self.workloads[adm.workload] = dataclasses.replace(wl, admission=adm.admission)
            self.changed.add(adm.workload)
            ta = adm.admission.pod_sets[0].topology
            assert ta is not None
            out.append((self.gangs[adm.workload], {v[-1]: n for v, n in ta.domains}))
        return out

    def finished(self, gang: Gang) -> None:
        del self.workloads[gang.id]
        self.changed.add(gang.id)

    def domains(self, hosts: Mapping[str, int], level: str) -> set[str]:
        return {self.labels[h][level] for h in hosts}


class FirstFitRun(Run):
    """The baseline: the same queue order, the first domain that holds the gang."""

    def __init__(self, gangs: list[Gang], nodes: dict[str, Node]) -> None:
        super().__init__(gangs, sum(n.allocatable[GPU] for n in nodes.values()) // 1000)
        order = sorted(nodes, key=lambda n: int(n.rsplit("-", 1)[1]))
        self.labels = {name: nodes[name].labels for name in order}
        self.free = {name: nodes[name].allocatable[GPU] // 1000 for name in order}
        self.members: dict[str, dict[str, list[str]]] = {BLOCK: {}, RACK: {}}
        for name in order:
            for level in (BLOCK, RACK):
                self.members[level].setdefault(self.labels[name][level], []).append(name)
        self.placed: dict[WorkloadId, dict[str, int]] = {}

    def _fill(self, names: list[str], pods: int) -> dict[str, int] | None:
        if sum(self.free[n] for n in names) < pods:
            return None
        out: dict[str, int] = {}
        for n in names:
            take = min(pods, self.free[n])
            if take:
                out[n] = take
                pods -= take
            if not pods:
                break
        return out

    def _first(self, level: str, pods: int) -> dict[str, int] | None:
        for names in self.members[level].values():
            found = self._fill(names, pods)
            if found is not None:
                return found
        return None

    def place(self, gang: Gang) -> dict[str, int] | None:
        kind = gang.kind
        if kind.mode is TopologyMode.REQUIRED:
            assert kind.level is not None
            return self._first(kind.level, gang.pods)
        if kind.mode is TopologyMode.PREFERRED:
            levels = (RACK, BLOCK) if kind.level == RACK else (BLOCK,)
            for level in levels:
                found = self._first(level, gang.pods)
                if found is not None:
                    return found
        return self._fill(list(self.free), gang.pods)

    def admit(self, t: float) -> list[tuple[Gang, Mapping[str, int]]]:
        out: list[tuple[Gang, Mapping[str, int]]] = []
        start = time.perf_counter()
        for gang in sorted(self.waiting.values(), key=lambda g: (g.arrives, g.id)):
            hosts = self.place(gang)
            if hosts is None:
                continue
            for n, pods in hosts.items():
                self.free[n] -= pods
            self.placed[gang.id] = hosts
            out.append((gang, hosts))
        self.record.engine_seconds += time.perf_counter() - start
        return out

    def finished(self, gang: Gang) -> None:
        for n, pods in self.placed.pop(gang.id).items():
            self.free[n] += pods

    def domains(self, hosts: Mapping[str, int], level: str) -> set[str]:
        return {self.labels[h][level] for h in hosts}


def summary(run: Run, gangs: list[Gang]) -> dict[str, object]:
    rec = run.record
    by_kind: dict[str, list[float]] = defaultdict(list)
    for g in gangs:
        if g.id in rec.admitted_at:
            by_kind[g.kind.name].append(rec.admitted_at[g.id] - g.arrives)

    def share(mode: TopologyMode) -> float | None:
        got = [ok for wid, ok in rec.in_one_domain.items() if run.gangs[wid].kind.mode is mode]
        return round(sum(got) / len(got), 4) if got else None

    demand = sum(g.pods * g.runs for g in gangs) / run.gpus
    ideal = max(demand, *(g.arrives + g.runs for g in gangs))
    return {
        "admitted": len(rec.admitted_at),
        "never_admitted": len(gangs) - len(rec.admitted_at),
        "required_in_one_domain": share(TopologyMode.REQUIRED),
        "preferred_in_one_domain": share(TopologyMode.PREFERRED),
        "utilisation_while_gangs_wait": round(rec.busy_while_waiting / rec.time_waiting, 4)
        if rec.time_waiting
        else None,
        "seconds_with_gangs_waiting": round(rec.time_waiting, 1),
        "avg_time_to_admission_s": {
            k: round(sum(v) / len(v), 1) for k, v in sorted(by_kind.items())
        },
        "makespan_s": round(rec.makespan, 1),
        "ideal_makespan_s": round(ideal, 1),
        "makespan_over_ideal": round(rec.makespan / ideal, 4),
        "scheduler_seconds": round(rec.engine_seconds, 2),
    }


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else "full"
    count = {"full": 2000, "quick": 300}[mode]
    nodes = fabric()
    gpus = sum(n.allocatable[GPU] for n in nodes.values()) // 1000
    gangs = stream(count, gpus)
    start = time.perf_counter()
    engine = EngineRun(gangs, nodes)
    engine.go(engine.admit)
    wall = time.perf_counter() - start
    baseline = FirstFitRun(gangs, nodes)
    baseline.go(baseline.admit)
    rec = engine.record
    out = {
        "mode": mode,
        "nodes": len(nodes),
        "gpus": gpus,
        "gangs": len(gangs),
        "wall_seconds": round(wall, 2),
        "engine": {
            "cycles": rec.cycles,
            "decisions": rec.decisions,
            "decisions_per_second": round(rec.decisions / rec.engine_seconds),
            "admissions_per_second": round(len(rec.admitted_at) / rec.engine_seconds),
            "ms_per_cycle": round(1000 * rec.engine_seconds / rec.cycles, 2),
            **summary(engine, gangs),
        },
        "first_fit": summary(baseline, gangs),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv)
