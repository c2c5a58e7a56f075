"""Replay the hub's dispatch cycle in simulated time — member clusters, 100,000 workloads,
cluster loss, fleet quotas — with the shells and the agents played in memory; print JSON.

    .venv/bin/python -m bench.hub_replay [--workloads 100000] [--clusters 10] [--seed 1]
        [--scale 1.0] [--profile 30]

Real: the pure cycle (`hub.placement.cycle.dispatch`, `record_plan`), the offer book, routing,
the fleet-quota tallies, every status change (`hub.transitions`: offers, reports, timeouts,
requeues), the Hello reconciliation (`hub.placement.reconcile`), the fencing rule
(`let_go_time`) and the fleet's views and lease bookkeeping (`hub.fleet`). Played here, in
memory and simulated time (no store, no asyncio, no sockets): the shells — the mirror's indexes
and its compare-and-swap writes (hub.state, hub.writes; alone here, a write never loses a
race), the dispatch loop (hub.dispatch: a cycle 10 ms after anything changes, and at least
every second), the agents' answers (hub.answers) — and the agents, each one record per
workload it holds (docs/exactly-once.md): a bound offer is admitted when its cluster queue
has room, or answered Pending and admitted when room frees; a reservation request is answered
Reserved, materialised on Bind, released on Withdraw or when unbound for the reservation
timeout; a Job runs for its duration, then Succeeded; capacity reports follow changes
(debounced, with a heartbeat); leases are renewed over the session, and an agent whose lease
runs out stops everything it holds. A cycle takes no simulated time; its wall time is measured.

The world (`--scale 1`; `--scale` multiplies the arrival rate, every cluster's room and the
fleet quota, so a smaller run keeps the same shape in time): 10 clusters of five sizes, each
with the cluster queues `batch` (flavors on-demand and spot), `burst`, `capped` and, on every
other cluster, `ml` (GPUs); the GlobalQueues `default` (BestFit over batch), `all-at-once`
(AllAtOnce over ml), `incremental` (Incremental over burst, two clusters per 30 s) and
`capped` (BestFit, with a fleet quota below its demand, so the quota holds work back).
Workloads arrive at 40/s with six bursts of 2% of them each within a second: small, medium,
GPU, burst and capped ones, and a few huge ones that fit no cluster until one cluster grows
part-way through (parked until then). One cluster's agent is slow for 20 s (its offers time
out). Another's agent is slow for the 20 s before its cluster is cut off, in the middle of a
burst, for 300 s: the offers it had not answered are open, its reservation requests end at
once, its bound work goes elsewhere once `let_go_time` allows. Later a third cluster is cut
off for 60 s: its agent fences itself, and the hub, which kept the binding, offers the work
again when it is back. Durations and capacity make the fleet fill in the bursts and drain
after.

The replay checks the promise as it goes (docs/exactly-once.md), from what the clusters really
run, which the hub cannot see: no workload runs in two clusters at once, nor is held bound by
two agents at once; none runs where the hub has not bound it, and the hub never unbinds one
still running; a lost cluster's bound work is let go only once the fencing rule allows; every
workload finishes (Succeeded) — none lost, none stuck. (A workload that finished on a cluster
cut off before its report went out runs again elsewhere once let go: one running copy at a
time is the promise, so `ran_to_completion_twice` counts it without calling it a breach.)
Prints one JSON object (figures below in `Replay.report`); `invariant_violations` must be 0.
`--profile N` prints the N costliest functions of `dispatch` (cProfile on thread time) to
stderr. `--agents-never-fence` plays agents that keep running when their lease runs out, as
before fencing: the checks then find work running in two clusters at once.

Called by: people measuring the hub (README, "Tests and benchmarks"), tests/bench.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import json
import math
import pstats
import random
import resource as rusage
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, cast

from api.meta import ObjectMeta
from api.quantity import Quantity
from api.v1alpha1.federation import ClusterSet, GlobalQueue, MemberCluster
from api.v1alpha1.messages import HeldWorkload, PodCounts, WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.queues import LocalQueue
from api.v1alpha1.workload import Admission, PodSetAssignment, Workload
from bench.quantiles import nearest_rank
from hub import transitions
from hub.auth import TokenAuthority
from hub.dispatch import COALESCE_SECONDS, WAITING_REFRESH_SECONDS
from hub.fleet import ClusterState, Fleet
from hub.lanes import Lane
from hub.objects import ObjectRepository
from hub.placement.book import DispatchBook
from hub.placement.cycle import (
    CycleSettings,
    DispatchPlan,
    HubSnapshot,
    dispatch,
    let_go_time,
    record_plan,
    status_change,
)
from hub.placement.reconcile import reconcile
from hub.placement.routing import Routing
from hub.placement.tally import Tallies
from hub.state import WorkloadEntry, clusters_of, is_pending
from hub.store.base import Revision

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# --- timings (simulated seconds) -------------------------------------------------------------

NETWORK_SECONDS = 0.002
"""One way between the hub and an agent."""
AGENT_PASS_SECONDS = (0.05, 0.25)
"""An agent acts on a hub message in its next admission pass: this long after it arrives."""
PODS_READY_SECONDS = 1.0
CAPACITY_DEBOUNCE_SECONDS = 1.0
CAPACITY_HEARTBEAT_SECONDS = 10.0
"""agent.settings' defaults: a capacity report a second after a change, and every 10 s."""
CYCLE_INTERVAL_SECONDS = 1.0
"""hub.dispatch.Dispatcher's default: a cycle at least this often."""
OFFER_TIMEOUT_SECONDS = 30.0
RESERVATION_TIMEOUT_SECONDS = 30.0
LOSS_TIMEOUT_SECONDS = 120.0
LEASE_SECONDS = 30.0
GRACE_SECONDS = 15.0
"""Shorter than the defaults (900, 60, 30) so that a loss plays out within the run; they keep
the rule a MemberCluster is checked for: lossTimeout ≥ lease + grace."""
SLOW_AGENT_SECONDS = (20.0, 40.0)
"""A slow agent is slow for 20 s: it acts on what it receives 40 s late, after the offer
timeout."""
LOSSES = ((1, 300.0, True), (3, 60.0, False))
"""(in which burst, for how long, slow before): cluster losses, each LOSS_INTO_BURST_SECONDS
into a burst. The first outlasts the loss timeout (its bound work is let go), and its agent is
slow before it, so offers are open when it goes; the second outlasts only the lease (its
agent fences itself, and the hub, which kept the binding, offers the work again when it is
back)."""
LOSS_INTO_BURST_SECONDS = 0.15
GROWTH_AT = 0.6
"""When (share of the arrival span) one cluster's batch queue grows enough for huge work."""
STEADY_RATE = 40.0
"""Workloads per second between bursts, at scale 1."""
BURSTS = (0.15, 0.30, 0.45, 0.60, 0.75, 0.90)
"""Where in the arrival order a burst starts; each brings BURST_SHARE of all workloads."""
BURST_SHARE = 0.02
BURST_SECONDS = 1.0
TAIL_SECONDS = 7200.0
"""After the last arrival, how long the replay goes on before unfinished work counts as
stuck."""

# --- the world ---------------------------------------------------------------------------------

CORE = 1000
GI = 2**30 * 1000
GPU = "nvidia.com/gpu"
NAMESPACES = ("team-a", "team-b")


@dataclass(frozen=True)
class QueueShape:
    """A cluster queue of the member clusters (and the local queue of the same name in each
    namespace), the GlobalQueue that governs it, and its flavors' room (milli-units) on a
    cluster of size 1 at scale 1."""

    name: str
    global_queue: str
    policy: Mapping[str, Any]
    flavors: tuple[tuple[str, Mapping[str, int]], ...]
    fleet_quota_cores: int = 0
    gpu_clusters_only: bool = False


QUEUES = (
    QueueShape(
        "batch",
        "default",
        {"type": "BestFit"},
        (
            ("on-demand", {"cpu": 512 * CORE, "memory": 2048 * GI}),
            ("spot", {"cpu": 256 * CORE, "memory": 1024 * GI}),
        ),
    ),
    QueueShape(
        "ml",
        "all-at-once",
        {"type": "AllAtOnce"},
        (("gpu", {"cpu": 640 * CORE, "memory": 4096 * GI, GPU: 80 * 1000}),),
        gpu_clusters_only=True,
    ),
    QueueShape(
        "burst",
        "incremental",
        {"type": "Incremental", "incremental": {"stepSize": 2, "intervalSeconds": 30}},
        (("default", {"cpu": 128 * CORE, "memory": 512 * GI}),),
    ),
    QueueShape(
        "capped",
        "capped",
        {"type": "BestFit"},
        (("default", {"cpu": 128 * CORE, "memory": 512 * GI}),),
        fleet_quota_cores=600,
    ),
)
GROWS = ("batch", "on-demand", 3)
"""The cluster queue and flavor that grows part-way through, and by how much."""


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    share: float
    queue: str
    pods: int
    per_pod: Mapping[str, str]
    seconds: tuple[float, float]
    priority: int = 0


CLASSES = (
    WorkloadClass("small", 0.61, "batch", 1, {"cpu": "1", "memory": "2Gi"}, (20, 120)),
    WorkloadClass("medium", 0.15, "batch", 2, {"cpu": "2", "memory": "8Gi"}, (60, 300), 10),
    WorkloadClass("gpu", 0.04, "ml", 1, {"cpu": "8", "memory": "64Gi", GPU: "1"}, (60, 300), 100),
    WorkloadClass("burst", 0.10, "burst", 1, {"cpu": "2", "memory": "8Gi"}, (30, 180)),
    WorkloadClass("capped", 0.10, "capped", 1, {"cpu": "2", "memory": "4Gi"}, (30, 120)),
)
HUGE_PODS = 12
HUGE_SHARE = 0.0004
"""Huge workloads: 12 pods that together need more of batch's on-demand flavor than any
cluster has, until one grows (their size follows the world's, see `World.huge_class`)."""


def cluster_size(index: int) -> float:
    return 0.6 + 0.2 * (index % 5)


@dataclass(frozen=True)
class Job:
    """What the user submitted, as the agents need it: requests, queue and how long it runs."""

    key: str
    klass: str
    cluster_queue: str
    requests: Mapping[str, int]
    pods: int
    seconds: float
    created: float


class World:
    """The configuration (as the hub's objects, and as each cluster's room), the workloads'
    arrivals, and when what happens to whom."""

    def __init__(self, *, workloads: int, clusters: int, scale: float, seed: int) -> None:
        self.scale = scale
        self.names = [f"c{i}" for i in range(clusters)]
        self.rng = random.Random(seed)
        self.room = {name: self._room(i) for i, name in enumerate(self.names)}
        self.routing = self._routing()
        self.huge = self.huge_class()
        self.templates = {c.name: _template(c) for c in (*CLASSES, self.huge)}
        self.burst_starts: list[float] = []
        self.arrivals = self._arrivals(workloads)
        self.span = self.arrivals[-1].created if self.arrivals else 0.0

        def pick(index: int) -> str:
            return self.names[index % clusters]

        def burst(index: int) -> float:
            starts = self.burst_starts or [0.0]  # (a handful of workloads has fewer bursts)
            return starts[min(index, len(starts) - 1)] + LOSS_INTO_BURST_SECONDS

        lost = list(dict.fromkeys((pick(2), pick(7))))
        # (Fewer than two clusters: one loss.)
        self.lost = [
            (cluster, burst(index), seconds)
            for cluster, (index, seconds, _) in zip(lost, LOSSES, strict=False)
        ]
        self.slow = {pick(4): (0.2 * self.span, 0.2 * self.span + SLOW_AGENT_SECONDS[0])}
        for (cluster, at, _), (_, _, slow_before) in zip(self.lost, LOSSES, strict=False):
            if slow_before:
                self.slow[cluster] = (at - SLOW_AGENT_SECONDS[0], at)
        self.grows = (pick(1), GROWTH_AT * self.span)

    def _room(self, index: int) -> dict[tuple[str, str], dict[str, int]]:
        size = cluster_size(index) * self.scale
        room: dict[tuple[str, str], dict[str, int]] = {}
        for queue in QUEUES:
            if queue.gpu_clusters_only and index % 2:
                continue
            for flavor, amounts in queue.flavors:
                cell = {}
                for resource, amount in amounts.items():
                    scaled = amount * size
                    # Whole GPUs only: a GPU is not shared.
                    cell[resource] = int(scaled // 1000) * 1000 if resource == GPU else int(scaled)
                room[(queue.name, flavor)] = cell
        return room

    def _routing(self) -> Routing:
        return Routing.of(
            local_queues=[
                LocalQueue.model_validate(
                    {
                        "metadata": {"name": q.name, "namespace": ns},
                        "spec": {"clusterQueue": q.name},
                    }
                )
                for q in QUEUES
                for ns in NAMESPACES
            ],
            global_queues=[self._global_queue(q) for q in QUEUES],
            tenants=[],
            cluster_sets=[
                ClusterSet.model_validate(
                    {"metadata": {"name": "all"}, "spec": {"clusters": self.names}}
                )
            ],
            members=[
                MemberCluster.model_validate(
                    {"metadata": {"name": name}, "spec": {"tokenRef": {"secretName": "t"}}}
                )
                for name in self.names
            ],
        )

    def _global_queue(self, queue: QueueShape) -> GlobalQueue:
        spec: dict[str, Any] = {
            "clusterSet": "all",
            "clusterQueues": [queue.name],
            "dispatchPolicy": dict(queue.policy),
        }
        if queue.fleet_quota_cores:
            cores = max(1, round(queue.fleet_quota_cores * self.scale))
            spec["fleetQuota"] = {"cpu": str(cores)}
        return GlobalQueue.model_validate({"metadata": {"name": queue.global_queue}, "spec": spec})

    def huge_class(self) -> WorkloadClass:
        """More CPU than any batch on-demand flavor has (by a tenth), less than the grown one."""
        largest = max(room[("batch", "on-demand")]["cpu"] for room in self.room.values())
        per_pod = math.ceil(largest * 1.1 / HUGE_PODS / CORE)
        return WorkloadClass(
            "huge",
            HUGE_SHARE,
            "batch",
            HUGE_PODS,
            {"cpu": str(per_pod), "memory": "2Gi"},
            (20, 40),
            50,
        )

    def _arrivals(self, total: int) -> list[Job]:
        rng = self.rng
        rate = STEADY_RATE * self.scale
        burst_size = max(1, int(total * BURST_SHARE))
        bursts = {int(total * share) for share in BURSTS}
        huge_count = max(2, round(total * HUGE_SHARE)) if total >= 20 else 0
        huge_at = {int(total * (k + 0.5) / huge_count) for k in range(huge_count)}
        weights = [c.share for c in CLASSES]
        jobs: list[Job] = []
        steady = 0
        burst_left = 0
        burst_start = 0.0
        for i in range(total):
            if i in bursts:
                burst_left, burst_start = burst_size, steady / rate
                self.burst_starts.append(burst_start)
            if burst_left:
                created = burst_start + BURST_SECONDS * (burst_size - burst_left) / burst_size
                burst_left -= 1
            else:
                steady += 1
                created = steady / rate
            klass = self.huge if i in huge_at else rng.choices(CLASSES, weights)[0]
            seconds = round(rng.uniform(*klass.seconds), 3)
            namespace = NAMESPACES[i % len(NAMESPACES)]
            key = f"{namespace}/{klass.name}-{i}"
            requests = {r: Quantity.parse(v).milli() * klass.pods for r, v in klass.per_pod.items()}
            jobs.append(Job(key, klass.name, klass.queue, requests, klass.pods, seconds, created))
        jobs.sort(key=lambda job: job.created)
        return jobs

    def workload(self, job: Job) -> Workload:
        namespace, name = job.key.split("/")
        meta = ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{name}",
            creation_timestamp=EPOCH + timedelta(seconds=job.created),
        )
        # The spec is shared: specs are never changed in place (hub.state).
        return self.templates[job.klass].model_copy(update={"metadata": meta})


def _template(klass: WorkloadClass) -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": klass.name},
            "spec": {
                "queueName": klass.queue,
                "priority": klass.priority,
                "podSets": [
                    {
                        "name": "main",
                        "count": klass.pods,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "busybox",
                                        "resources": {"requests": dict(klass.per_pod)},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
    )


# --- simulated time ----------------------------------------------------------------------------


class Clock:
    """Simulated time: a heap of actions, run in time order (then in the order scheduled)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, when: float, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._events, (when, self._seq, action))

    def after(self, delay: float, action: Callable[[], None]) -> None:
        self.at(self.now + delay, action)

    def moment(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now)

    def step(self, until: float) -> bool:
        """Run the next action, unless there is none before `until`."""
        if not self._events or self._events[0][0] > until:
            return False
        self.now, _, action = heapq.heappop(self._events)
        action()
        return True


@dataclass
class Link:
    """One session between the hub and an agent (hub.lanes.Lane's stand-in): what is sent on it
    arrives in order, and only while it is open."""

    closed: bool = False
    to_hub_at: float = 0.0
    to_agent_at: float = 0.0


@dataclass(frozen=True, slots=True)
class ToAgent:
    """What the hub tells an agent: DispatchOffer ("offer"), Bind, Withdraw, Cancel."""

    kind: str
    key: str
    generation: int
    bound: bool = False
    reason: str = ""


# --- the score ---------------------------------------------------------------------------------


@dataclass
class LossRecord:
    """What became of the work a lost cluster held when it was lost."""

    cluster: str
    lost_at: float
    back_at: float
    reservations: set[str] = field(default_factory=set)
    """Reservation requests it held (nominated, not bound) and that have not ended yet."""
    reservations_at_loss: int = 0
    reservations_ended_within: float = 0.0
    reservations_let_go: int = 0
    """Ended by the cycle's let-go (the others by a binding elsewhere, or a timeout)."""
    bound_at_loss: int = 0
    let_go_allowed_after: float | None = None
    bound_let_go: int = 0
    bound_let_go_after: float | None = None
    let_go_ran_elsewhere: int = 0
    runs_fenced: int = 0
    offers_resent_on_return: int = 0
    let_go_keys: set[str] = field(default_factory=set)


class Referee:
    """Keeps the score: when each workload arrived, was first offered, admitted and finished;
    which clusters really run it and which agents hold it bound (what the hub cannot see); and
    every breach of the promise, counted by kind with the first few described."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.created: dict[str, float] = {}
        self.offered: dict[str, float] = {}
        self.admitted: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.running: dict[str, dict[str, int]] = {}
        """key → cluster → generation of the copy running there."""
        self.bound_by: dict[str, set[str]] = {}
        """key → agents that hold it bound (they may create its Job)."""
        self.completed_runs: Counter[str] = Counter()
        self.violations: Counter[str] = Counter()
        self.examples: list[str] = []
        self.losses: dict[str, LossRecord] = {}

    def breach(self, kind: str, detail: str) -> None:
        self.violations[kind] += 1
        if len(self.examples) < 10:
            self.examples.append(f"t={self.clock.now:.3f}s {kind}: {detail}")

    def cluster_lost(self, cluster: str, held: Mapping[str, Workload], back_at: float) -> None:
        """`held`: the unfinished workloads the hub has bound or offered to the cluster."""
        loss = self.losses[cluster] = LossRecord(cluster, self.clock.now, back_at)
        for key, wl in held.items():
            st = wl.status
            if st is not None and st.cluster_name == cluster:
                loss.bound_at_loss += 1
            elif st is not None and cluster in st.nominated_cluster_names:
                loss.reservations.add(key)
        loss.reservations_at_loss = len(loss.reservations)

    # --- the hub's writes -------------------------------------------------------------------

    def on_write(self, key: str, old: Workload | None, new: Workload) -> None:
        for loss in self.losses.values():
            if key in loss.reservations and (
                new.status is None
                or loss.cluster not in new.status.nominated_cluster_names
                or transitions.is_finished(new)
            ):
                loss.reservations.discard(key)
                ended = self.clock.now - loss.lost_at
                loss.reservations_ended_within = max(loss.reservations_ended_within, ended)
        st = new.status
        bound = st.cluster_name if st is not None else None
        was = old.status.cluster_name if old is not None and old.status is not None else None
        if bound != was:
            for cluster in self.running.get(key, {}):
                if cluster != bound:
                    self.breach(
                        "unbound_while_running", f"{key} bound to {bound}, runs on {cluster}"
                    )
        if key not in self.admitted and transitions.is_admitted(new):
            self.admitted[key] = self.clock.now
        if transitions.is_finished(new) and (old is None or not transitions.is_finished(old)):
            self.finished[key] = self.clock.now
            cond = new.condition(transitions.FINISHED)
            if cond is None or cond.reason != "Succeeded":
                self.breach("finished_otherwise", f"{key}: {cond.reason if cond else None}")

    # --- the clusters' truth ----------------------------------------------------------------

    def run_started(self, cluster: str, key: str, generation: int, hub_view: Workload) -> None:
        copies = self.running.setdefault(key, {})
        for other in copies:
            self.breach("two_running_copies", f"{key} starts on {cluster}, runs on {other}")
        st = hub_view.status
        if st is None or st.cluster_name != cluster or st.dispatch_generation != generation:
            at = (st.cluster_name, st.dispatch_generation) if st is not None else None
            self.breach("run_where_not_bound", f"{key} gen {generation} on {cluster}; hub: {at}")
        copies[cluster] = generation
        for loss in self.losses.values():
            if key in loss.let_go_keys and cluster != loss.cluster:
                loss.let_go_ran_elsewhere += 1
                loss.let_go_keys.discard(key)

    def run_ended(self, cluster: str, key: str, *, completed: bool) -> None:
        copies = self.running.get(key, {})
        copies.pop(cluster, None)
        if not copies:
            self.running.pop(key, None)
        if completed:
            self.completed_runs[key] += 1

    def holds_bound(self, cluster: str, key: str) -> None:
        holders = self.bound_by.setdefault(key, set())
        for other in holders - {cluster}:
            self.breach("bound_in_two_clusters", f"{key} bound on {cluster} and {other}")
        holders.add(cluster)

    def lets_go(self, cluster: str, key: str) -> None:
        holders = self.bound_by.get(key)
        if holders is not None:
            holders.discard(cluster)
            if not holders:
                del self.bound_by[key]


# --- the hub's shells --------------------------------------------------------------------------

Change = Callable[[Workload], Workload]
Cell = tuple[str, str]
"""(cluster queue, flavor)."""


class Mirror:
    """The workload half of the hub's mirror (hub.state.HubState: the entries, `pending` and
    `by_cluster`, kept by the mirror's own rules) and its compare-and-swap writer
    (hub.writes.WorkloadWriter.update_cached): no store, so no write loses a race."""

    def __init__(self, listeners: list[Callable[[str, Workload | None, Workload], None]]) -> None:
        self.workloads: dict[str, WorkloadEntry] = {}
        self.pending: set[str] = set()
        self.by_cluster: dict[str, set[str]] = {}
        self._clusters_of: dict[str, tuple[str, ...]] = {}
        self.listeners = listeners
        self.revision = 0
        self.writes = 0

    def submit(self, key: str, wl: Workload) -> None:
        self._put(key, None, wl)

    def write(self, key: str, change: Change) -> Workload | None:
        entry = self.workloads.get(key)
        if entry is None:
            return None
        current = entry.workload
        new = change(transitions.for_change(current))
        if new.status == current.status:
            return current  # nothing to write
        self.writes += 1
        self._put(key, current, new)
        return new

    def _put(self, key: str, old: Workload | None, wl: Workload) -> None:
        self.revision += 1
        self.workloads[key] = WorkloadEntry(wl, Revision(self.revision), {})
        if is_pending(wl):
            self.pending.add(key)
        else:
            self.pending.discard(key)
        clusters = clusters_of(wl)
        before = self._clusters_of.get(key, ())
        if clusters != before:
            for cluster in before:
                keys = self.by_cluster[cluster]
                keys.discard(key)
                if not keys:
                    del self.by_cluster[cluster]
            for cluster in clusters:
                self.by_cluster.setdefault(cluster, set()).add(key)
            if clusters:
                self._clusters_of[key] = clusters
            else:
                del self._clusters_of[key]
        for listener in self.listeners:
            listener(key, old, wl)


class GcWatch:
    """Wall time the garbage collector takes (`gc.callbacks`): with 100,000 workloads held, a
    full collection is a pause any cycle it falls into pays for."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.longest = 0.0
        self.full = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.seconds += took
        self.longest = max(self.longest, took)
        self.full += info.get("generation") == 2


@dataclass
class CycleStats:
    wall: list[float] = field(default_factory=list)
    """Wall seconds of each `dispatch` call."""
    gc_in_dispatch: list[float] = field(default_factory=list)
    """Of which collecting garbage."""
    shell_seconds: float = 0.0
    placed: int = 0
    placed_max: int = 0
    visited: int = 0
    visited_max: int = 0
    offers: Counter[str] = field(default_factory=Counter)
    offers_max: int = 0
    expired: Counter[str] = field(default_factory=Counter)
    let_go: Counter[str] = field(default_factory=Counter)
    parked_peak: int = 0
    over_quota_peak: int = 0
    pending_peak: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    dropped_messages: int = 0


class HubPlay:
    """The hub's shells played in memory: the dispatch loop applying each plan
    (hub.dispatch.Dispatcher) and the agents' answers (hub.answers.AgentAnswers), over the
    mirror, the offer book, the fleet and the fleet-quota tallies they keep."""

    def __init__(
        self,
        clock: Clock,
        world: World,
        referee: Referee,
        profiler: cProfile.Profile | None,
        gc_watch: GcWatch,
    ) -> None:
        self.clock = clock
        self.referee = referee
        self.profiler = profiler
        self.gc_watch = gc_watch
        self.mirror = Mirror([referee.on_write, self._workload_changed])
        self.book = DispatchBook()
        self.tallies = Tallies()
        self.routing = world.routing
        self.settings = CycleSettings(
            offer_timeout_seconds=OFFER_TIMEOUT_SECONDS,
            waiting_refresh_seconds=WAITING_REFRESH_SECONDS,
        )
        # Only the fleet's views and lease bookkeeping are used: no repository, no tokens.
        self.fleet = Fleet(
            cast(ObjectRepository, None), TokenAuthority(), secrets_dir=None, clock=clock.moment
        )
        for name in world.names:
            state = ClusterState(
                name,
                loss_timeout_seconds=LOSS_TIMEOUT_SECONDS,
                lease_seconds=LEASE_SECONDS,
                grace_seconds=GRACE_SECONDS,
            )
            state.assume_granted(clock.moment())
            self.fleet.clusters[name] = state
        self.agents: dict[str, AgentPlay] = {}
        self.expiry_checked_at: datetime | None = None
        self.cycle_at: float | None = None
        self.cycles = 0
        self.stats = CycleStats()

    # --- the loop ---------------------------------------------------------------------------

    def wake(self) -> None:
        """Something changed: a cycle once the burst has landed (hub.dispatch's coalescing)."""
        if self.cycle_at is None:
            self.cycle_at = self.clock.now + COALESCE_SECONDS
            self.clock.at(self.cycle_at, self.cycle)

    def _timer(self, cycles: int) -> None:
        if self.cycles == cycles and self.cycle_at is None:
            self.cycle()

    def cycle(self) -> None:
        clock, stats = self.clock, self.stats
        self.cycle_at = None  # changes made from now on call for another cycle
        self.cycles += 1
        clock.after(CYCLE_INTERVAL_SECONDS + COALESCE_SECONDS, partial(self._timer, self.cycles))
        now = clock.moment()
        started = time.perf_counter()
        snapshot = self.snapshot()
        collecting = self.gc_watch.seconds
        before = time.perf_counter()
        if self.profiler is not None:
            self.profiler.enable()
        plan = dispatch(snapshot, now)
        if self.profiler is not None:
            self.profiler.disable()
        after = time.perf_counter()
        stats.wall.append(after - before)
        stats.gc_in_dispatch.append(self.gc_watch.seconds - collecting)
        self._score(snapshot, plan, now)
        applying = time.perf_counter()
        self.expiry_checked_at = plan.expiry_checked_at
        record_plan(self.book, plan, now)
        self._apply(plan, now)
        stats.shell_seconds += (before - started) + (time.perf_counter() - applying)
        stats.parked_peak = max(stats.parked_peak, len(self.book.parked))
        stats.pending_peak = max(stats.pending_peak, len(self.mirror.pending))
        over_quota = sum(
            len(self.book.members.get(shape, ()))
            for shape, group in self.book.groups.items()
            if group.over_quota is not None
        )
        stats.over_quota_peak = max(stats.over_quota_peak, over_quota)

    def snapshot(self) -> HubSnapshot:
        return HubSnapshot(
            workloads=self.mirror.workloads,
            pending=self.mirror.pending,
            by_cluster=self.mirror.by_cluster,
            book=self.book,
            routing=self.routing,
            clusters=self.fleet.facts(),
            views=self.fleet.views(self.book.room),
            usage=self.fleet_usage(),
            config_generation=1,
            settings=self.settings,
            expiry_checked_at=self.expiry_checked_at,
        )

    def fleet_usage(self) -> dict[str, dict[str, int]]:
        capped = [gq.name for gq in self.routing.capped_queues()]
        if not capped:
            return {}
        tallies = self.tallies.count(self.mirror.workloads, self.mirror.pending, self.routing, 1)
        return {name: dict(tallies[name].usage) if name in tallies else {} for name in capped}

    def _score(self, snapshot: HubSnapshot, plan: DispatchPlan, now: datetime) -> None:
        stats, referee = self.stats, self.referee
        stats.placed += len(plan.placed)
        stats.placed_max = max(stats.placed_max, len(plan.placed))
        stats.visited += len(plan.visited)
        stats.visited_max = max(stats.visited_max, len(plan.visited))
        stats.offers_max = max(stats.offers_max, len(plan.offers))
        for offer in plan.offers:
            stats.offers["bound" if offer.bound else "reservation"] += 1
            referee.offered.setdefault(offer.key, self.clock.now)
        for expiry in plan.expired:
            stats.expired["bound" if expiry.bound else "reservation"] += 1
        for gone in plan.let_go:
            stats.let_go["bound" if gone.bound else "reservations"] += 1
            facts = snapshot.clusters[gone.cluster]
            loss = referee.losses.get(gone.cluster)
            if facts.lost_since is None or loss is None:
                continue
            after = (now - facts.lost_since).total_seconds()
            if not gone.bound:
                loss.reservations_let_go += 1
                continue
            allowed = let_go_time(facts)
            if allowed is None or now < allowed:
                referee.breach("let_go_too_early", f"{gone.key} from {gone.cluster}")
            if allowed is not None:
                loss.let_go_allowed_after = (allowed - facts.lost_since).total_seconds()
            loss.bound_let_go += 1
            loss.let_go_keys.add(gone.key)
            if loss.bound_let_go_after is None or after < loss.bound_let_go_after:
                loss.bound_let_go_after = after

    # --- applying a plan (hub.dispatch.Dispatcher._apply) -------------------------------------

    def _apply(self, plan: DispatchPlan, now: datetime) -> None:
        write = self.mirror.write
        for expiry in plan.expired:
            written = write(expiry.key, status_change(expiry, now))
            if expiry.bound and written is not None and written.status is not None:
                generation = written.status.dispatch_generation or 1
                message = ToAgent("withdraw", expiry.key, generation, reason="OfferTimedOut")
                self.send(expiry.cluster, message)
        for gone in plan.let_go:
            write(gone.key, status_change(gone, now))
        for wait in plan.waits:
            write(wait.key, status_change(wait, now))
        for offer in plan.offers:
            if write(offer.key, status_change(offer, now)) is None:
                for cluster in offer.clusters:
                    self.book.close_offer(offer.key, cluster)
                    self.book.give_back_room(offer.key, cluster)
                continue
            for cluster in offer.clusters:
                self.send(cluster, ToAgent("offer", offer.key, offer.generation, bound=offer.bound))

    def _workload_changed(self, key: str, old: Workload | None, new: Workload) -> None:
        """hub.dispatch.Dispatcher._workload_changed, and the wake every change brings."""
        self.tallies.stale(key)
        if key in self.book.records:
            entry = self.mirror.workloads.get(key)
            self.book.workload_changed(key, entry.workload if entry is not None else None)
        self.wake()

    def send(self, cluster: str, message: ToAgent) -> None:
        state = self.fleet.clusters.get(cluster)
        link = cast(Link | None, state.control if state is not None else None)
        if link is None or link.closed:
            self.stats.dropped_messages += 1
            return
        self.agents[cluster].deliver(link, message)

    # --- the agents' answers (hub.answers.AgentAnswers, hub.sessions) -------------------------

    def on_status(self, cluster: str, report: WorkloadStatusReport) -> None:
        key = report.workload
        now = self.clock.moment()
        outcome = transitions.ReportOutcome(False)

        def change(wl: Workload) -> Workload:
            nonlocal outcome
            wl, outcome = transitions.apply_report(wl, cluster, report, now)
            return wl

        if report.phase is WorkloadPhase.PENDING and cluster in self.book.get(key).offers:
            self.book.mark_queued(key, cluster)
        else:
            self.book.mark_answered(key, cluster)
        self.mirror.write(key, change)
        if report.phase is not WorkloadPhase.PENDING:
            self.book.close_offer(key, cluster)
        if not outcome.accepted:
            self.stats.refused[_refusal_kind(outcome.refusal)] += 1
        if outcome.bind is not None:
            self.send(outcome.bind, ToAgent("bind", key, report.generation))
        for other, reason, _ in outcome.withdraw:
            self.book.close_offer(key, other)
            self.book.give_back_room(key, other)
            self.send(other, ToAgent("withdraw", key, report.generation, reason=reason))
        self.wake()

    def on_capacity(
        self, cluster: str, cells: dict[Cell, tuple[dict[str, int], dict[str, int]]]
    ) -> None:
        self.fleet.clusters[cluster].cells = cells
        self.book.room_grew()
        for key in self.book.keys_booking(cluster, answered_only=True):
            self.book.give_back_room(key, cluster)
        self.wake()

    def on_renewal(self, cluster: str, link: Link) -> None:
        state = self.fleet.clusters[cluster]
        if cast(Link | None, state.control) is link:
            state.renew_lease(self.clock.moment())

    def on_disconnect(self, cluster: str) -> None:
        state = self.fleet.clusters[cluster]
        state.control = None
        state.lost_since = self.clock.moment()
        self.book.room_grew()
        for key in self.book.keys_booking(cluster):
            self.book.give_back_room(key, cluster)
        self.wake()

    def on_hello(self, cluster: str, link: Link, held: list[HeldWorkload]) -> int:
        """A session opens: reconcile what the agent holds with what the hub wants there.
        Returns how many offers were sent again."""
        state = self.fleet.clusters[cluster]
        now = self.clock.moment()
        state.control = cast(Lane, link)
        state.connected_at = now
        state.last_seen = now
        state.lost_since = None
        self.book.room_grew()
        ours = sorted(self.mirror.by_cluster.get(cluster, ()))
        keys = {h.workload for h in held} | set(ours)
        workloads = {k: e.workload for k in keys if (e := self.mirror.workloads.get(k))}
        plan = reconcile(cluster, held, workloads, ours)
        for item in plan.cancel:
            self.send(cluster, ToAgent("cancel", item.workload, item.generation))
        for item in plan.withdraw:
            self.send(
                cluster,
                ToAgent("withdraw", item.workload, item.generation, reason="NotDispatchedHere"),
            )
        for item in plan.bind:
            self.send(cluster, ToAgent("bind", item.workload, item.generation))
        for item in plan.catch_up:
            self.on_status(
                cluster,
                WorkloadStatusReport(
                    workload=item.workload, generation=item.generation, phase=item.phase
                ),
            )
        for key, bound in plan.resend:
            wl = workloads[key]
            generation = (wl.status.dispatch_generation if wl.status else None) or 1
            record = self.book.get(key)
            self.book.update(key, offers={**record.offers, cluster: now}, bound=bound)
            self.send(cluster, ToAgent("offer", key, generation, bound=bound))
        self.wake()
        return len(plan.resend)


def _refusal_kind(refusal: str) -> str:
    for kind in ("finished", "not offered", "not bound", "bound to", "generation"):
        if kind in refusal:
            return kind.replace(" ", "_")
    return "other"


# --- the agents --------------------------------------------------------------------------------


@dataclass(slots=True)
class Held:
    """One workload an agent holds: one record, so forgetting it is one deletion."""

    job: Job
    generation: int
    bound: bool
    phase: WorkloadPhase = WorkloadPhase.PENDING
    flavor: str | None = None
    run: int = 0
    """The token of its running Job (0: none)."""
    since: float = 0.0


class AgentPlay:
    """One member cluster's agent and its cluster queues, by the protocol's rules
    (docs/exactly-once.md); admission is Kueue's BestEffortFIFO over each cluster queue's
    flavors in order, without cohorts or preemption."""

    def __init__(
        self,
        name: str,
        clock: Clock,
        hub: HubPlay,
        referee: Referee,
        room: dict[Cell, dict[str, int]],
        jobs: Mapping[str, Job],
        rng: random.Random,
        slow: tuple[float, float] | None,
        *,
        fences: bool = True,
    ) -> None:
        self.name = name
        self.fences = fences
        self.clock = clock
        self.hub = hub
        self.referee = referee
        self.room = room
        self.used: dict[Cell, dict[str, int]] = {cell: {} for cell in room}
        self.flavors: dict[str, list[str]] = {}
        for cq, flavor in room:
            self.flavors.setdefault(cq, []).append(flavor)
        self.jobs = jobs
        self.rng = rng
        self.slow = slow
        self.held: dict[str, Held] = {}
        self.waiting: dict[str, list[str]] = {cq: [] for cq in self.flavors}
        self.link: Link | None = None
        self.pass_at = 0.0
        self.lease_deadline = 0.0
        self.fenced = True
        self.capacity_due: float | None = None
        self.capacity_sent_at = 0.0
        self.runs = 0
        self.runs_fenced = 0

    # --- the session --------------------------------------------------------------------------

    def connect(self) -> None:
        """A session opens: Hello with what it holds, a lease renewal, a capacity report."""
        link = self.link = Link()
        held = [
            HeldWorkload(workload=h.job.key, generation=h.generation, phase=h.phase)
            for h in self.held.values()
        ]
        self._to_hub(link, partial(self._hello_arrives, link, held))
        self._renew(link)
        self._report_capacity()

    def _hello_arrives(self, link: Link, held: list[HeldWorkload]) -> None:
        resent = self.hub.on_hello(self.name, link, held)
        loss = self.referee.losses.get(self.name)
        if loss is not None:
            loss.offers_resent_on_return += resent
        # The hub has heard of every finished one now.
        for item in held:
            h = self.held.get(item.workload)
            if h is not None and h.phase is WorkloadPhase.SUCCEEDED:
                del self.held[item.workload]

    def disconnect(self) -> None:
        """The connection is cut (the agent lives on): the hub notices at once."""
        if self.link is not None:
            self.link.closed = True
            self.link = None
        self.hub.on_disconnect(self.name)

    def _renew(self, link: Link) -> None:
        if link.closed:
            return
        sent_at = self.clock.now

        def granted() -> None:
            self.lease_deadline = max(self.lease_deadline, sent_at + LEASE_SECONDS)
            self.clock.at(self.lease_deadline, self._lease_check)
            if self.fenced:
                self.fenced = False
                self._admit_waiting()

        def arrives() -> None:
            self.hub.on_renewal(self.name, link)
            self._to_agent(link, granted, NETWORK_SECONDS)

        self._to_hub(link, arrives)
        self.clock.after(LEASE_SECONDS / 3, partial(self._renew, link))

    def _lease_check(self) -> None:
        if self.fences and not self.fenced and self.clock.now >= self.lease_deadline:
            self._fence()

    def _fence(self) -> None:
        """The lease ran out unrenewed: stop every Job, drop every reservation and offer
        (the Evicted reports go nowhere: the session is down)."""
        self.fenced = True
        for held in list(self.held.values()):
            if held.phase is not WorkloadPhase.SUCCEEDED:
                self.runs_fenced += held.run != 0
                self._stop(held)
        loss = self.referee.losses.get(self.name)
        if loss is not None:
            loss.runs_fenced = self.runs_fenced

    def _to_hub(self, link: Link, action: Callable[[], None]) -> None:
        at = link.to_hub_at = max(self.clock.now + NETWORK_SECONDS, link.to_hub_at)
        self.clock.at(at, lambda: None if link.closed else action())

    def _to_agent(self, link: Link, action: Callable[[], None], delay: float) -> None:
        at = link.to_agent_at = max(self.clock.now + delay, link.to_agent_at)
        self.clock.at(at, lambda: None if link.closed else action())

    def report(self, held: Held, phase: WorkloadPhase, **fields: Any) -> None:
        link = self.link
        if link is None:
            return  # the session is down: Hello tells the hub what it holds
        report = WorkloadStatusReport(
            workload=held.job.key, generation=held.generation, phase=phase, **fields
        )
        self._to_hub(link, partial(self.hub.on_status, self.name, report))

    def _report_withdrawn(self, key: str, generation: int, reason: str) -> None:
        link = self.link
        if link is None:
            return
        report = WorkloadStatusReport(
            workload=key,
            generation=generation,
            phase=WorkloadPhase.WITHDRAWN,
            pending_reason=reason,
            pending_message=f"withdrawn: {reason}",
        )
        self._to_hub(link, partial(self.hub.on_status, self.name, report))

    # --- what the hub says ------------------------------------------------------------------

    def deliver(self, link: Link, message: ToAgent) -> None:
        self._to_agent(link, partial(self._enqueue, link, message), NETWORK_SECONDS)

    def _enqueue(self, link: Link, message: ToAgent) -> None:
        """It arrived: the agent acts on it in a later admission pass, in the order received
        (the session itself, e.g. a lease grant, is not held up by a slow pass)."""
        delay = self.rng.uniform(*AGENT_PASS_SECONDS)
        if self.slow is not None and self.slow[0] <= self.clock.now < self.slow[1]:
            delay += SLOW_AGENT_SECONDS[1]
        at = self.pass_at = max(self.clock.now + delay, self.pass_at)
        self.clock.at(at, lambda: None if link.closed else self.receive(message))

    def receive(self, message: ToAgent) -> None:
        if message.kind == "offer":
            self._offer(message)
        elif message.kind == "bind":
            self._bind(message)
        else:
            self._withdraw(message)

    def _offer(self, offer: ToAgent) -> None:
        current = self.held.get(offer.key)
        if current is not None:
            if current.generation > offer.generation:
                return
            if current.generation == offer.generation:
                self.report(current, current.phase)  # the hub missed it: say it again
                return
            self._stop(current)
        held = Held(self.jobs[offer.key], offer.generation, offer.bound, since=self.clock.now)
        self.held[offer.key] = held
        if held.bound:
            self.referee.holds_bound(self.name, offer.key)
        self.waiting[held.job.cluster_queue].append(offer.key)
        self._admit_waiting()
        if held.phase is WorkloadPhase.PENDING:
            self.report(
                held,
                WorkloadPhase.PENDING,
                pending_reason="Pending",
                pending_message="waiting for quota",
            )

    def _bind(self, bind: ToAgent) -> None:
        held = self.held.get(bind.key)
        if held is None or held.generation < bind.generation:
            # Not held (released, or fenced): the hub must unbind it.
            self._report_withdrawn(bind.key, bind.generation, "NotHeld")
            return
        if held.generation > bind.generation or held.bound:
            return
        held.bound = True
        self.referee.holds_bound(self.name, bind.key)
        if held.phase is WorkloadPhase.RESERVED:
            self._materialize(held)

    def _withdraw(self, message: ToAgent) -> None:
        held = self.held.get(message.key)
        if held is not None and held.generation > message.generation:
            return
        if held is not None and held.phase is not WorkloadPhase.SUCCEEDED:
            self._stop(held)
        self._report_withdrawn(message.key, message.generation, message.reason or message.kind)

    # --- admission and Jobs -----------------------------------------------------------------

    def _fit(self, cq: str, requests: Mapping[str, int]) -> str | None:
        for flavor in self.flavors.get(cq, ()):
            room, used = self.room[(cq, flavor)], self.used[(cq, flavor)]
            if all(used.get(r, 0) + v <= room.get(r, -1) for r, v in requests.items() if v):
                return flavor
        return None

    def _take(self, held: Held, flavor: str, sign: int) -> None:
        used = self.used[(held.job.cluster_queue, flavor)]
        for resource, amount in held.job.requests.items():
            used[resource] = used.get(resource, 0) + sign * amount
        self._capacity_changed()

    def _admit_waiting(self) -> None:
        if self.fenced:
            return
        for cq, keys in self.waiting.items():
            if not keys:
                continue
            still = []
            for key in keys:
                held = self.held[key]
                flavor = self._fit(cq, held.job.requests)
                if flavor is None:
                    still.append(key)
                    continue
                held.flavor = flavor
                held.since = self.clock.now
                self._take(held, flavor, 1)
                if held.bound:
                    self._materialize(held)
                else:
                    held.phase = WorkloadPhase.RESERVED
                    self.report(held, WorkloadPhase.RESERVED, admission=_admission(held))
                    self.clock.after(
                        RESERVATION_TIMEOUT_SECONDS,
                        partial(self._reservation_check, key, held.generation, held.since),
                    )
            self.waiting[cq] = still

    def _reservation_check(self, key: str, generation: int, since: float) -> None:
        held = self.held.get(key)
        if (
            held is not None
            and held.generation == generation
            and held.since == since
            and held.phase is WorkloadPhase.RESERVED
            and not held.bound
        ):
            self._stop(held)
            self._report_withdrawn(key, generation, "ReservationExpired")

    def _materialize(self, held: Held) -> None:
        key = held.job.key
        self.runs += 1
        held.run = self.runs
        held.phase = WorkloadPhase.ADMITTED
        entry = self.hub.mirror.workloads[key]
        self.referee.run_started(self.name, key, held.generation, entry.workload)
        pods = held.job.pods
        self.report(
            held, WorkloadPhase.ADMITTED, admission=_admission(held), pods=PodCounts(pending=pods)
        )
        self.clock.after(PODS_READY_SECONDS, partial(self._running, key, held.run))
        self.clock.after(held.job.seconds, partial(self._finished, key, held.run))

    def _running(self, key: str, run: int) -> None:
        held = self.held.get(key)
        if held is not None and held.run == run:
            pods = held.job.pods
            held.phase = WorkloadPhase.RUNNING
            self.report(held, WorkloadPhase.RUNNING, pods=PodCounts(running=pods, ready=pods))

    def _finished(self, key: str, run: int) -> None:
        held = self.held.get(key)
        if held is None or held.run != run:
            return
        assert held.flavor is not None
        self.referee.run_ended(self.name, key, completed=True)
        self.referee.lets_go(self.name, key)
        self._take(held, held.flavor, -1)
        held.run = 0
        held.phase = WorkloadPhase.SUCCEEDED
        link = self.link
        if link is not None:
            report = WorkloadStatusReport(
                workload=key,
                generation=held.generation,
                phase=WorkloadPhase.SUCCEEDED,
                pods=PodCounts(succeeded=held.job.pods),
            )

            def arrives() -> None:
                self.hub.on_status(self.name, report)
                if self.held.get(key) is held:
                    del self.held[key]  # the hub has it: nothing more to hold

            self._to_hub(link, arrives)
        self._admit_waiting()

    def _stop(self, held: Held) -> None:
        """Delete its Job, release its quota, forget it."""
        key = held.job.key
        if held.run:
            self.referee.run_ended(self.name, key, completed=False)
            held.run = 0
        if held.bound:
            self.referee.lets_go(self.name, key)
        if held.phase is WorkloadPhase.PENDING:
            self.waiting[held.job.cluster_queue].remove(key)
        elif held.flavor is not None and held.phase is not WorkloadPhase.SUCCEEDED:
            self._take(held, held.flavor, -1)
        del self.held[key]
        self._admit_waiting()

    # --- capacity ---------------------------------------------------------------------------

    def _capacity_changed(self) -> None:
        if self.capacity_due is None:
            self.capacity_due = self.clock.now + CAPACITY_DEBOUNCE_SECONDS
            self.clock.at(self.capacity_due, self._report_capacity)

    def _heartbeat(self, sent_at: float) -> None:
        if self.capacity_sent_at == sent_at:
            self._report_capacity()

    def _report_capacity(self) -> None:
        self.capacity_due = None
        self.capacity_sent_at = now = self.clock.now
        self.clock.after(CAPACITY_HEARTBEAT_SECONDS, partial(self._heartbeat, now))
        link = self.link
        if link is None:
            return
        cells = {
            cell: ({r: max(0, v - self.used[cell].get(r, 0)) for r, v in room.items()}, dict(room))
            for cell, room in self.room.items()
        }
        self._to_hub(link, partial(self.hub.on_capacity, self.name, cells))

    def grow(self, cell: Cell, factor: int) -> None:
        self.room[cell] = {r: v * factor for r, v in self.room[cell].items()}
        self._capacity_changed()
        self._admit_waiting()


_ADMISSIONS: dict[tuple[str, str, int], Admission] = {}


def _admission(held: Held) -> Admission:
    job = held.job
    assert held.flavor is not None
    found = _ADMISSIONS.get((job.cluster_queue, held.flavor, job.pods))
    if found is None:
        found = _ADMISSIONS[(job.cluster_queue, held.flavor, job.pods)] = Admission(
            cluster_queue=job.cluster_queue,
            pod_set_assignments=[
                PodSetAssignment(
                    name="main", flavors=dict.fromkeys(job.requests, held.flavor), count=job.pods
                )
            ],
        )
    return found


# --- the replay --------------------------------------------------------------------------------


class Replay:
    def __init__(
        self,
        *,
        workloads: int = 100_000,
        clusters: int = 10,
        seed: int = 1,
        scale: float = 1.0,
        profile: bool = False,
        agents_fence: bool = True,
    ) -> None:
        self.clock = Clock()
        self.world = World(workloads=workloads, clusters=clusters, scale=scale, seed=seed)
        self.seed = seed
        self.referee = Referee(self.clock)
        self.profiler = cProfile.Profile(time.thread_time) if profile else None
        self.gc_watch = GcWatch()
        self.hub = HubPlay(self.clock, self.world, self.referee, self.profiler, self.gc_watch)
        rng = random.Random(seed + 1)
        jobs = {job.key: job for job in self.world.arrivals}
        for name in self.world.names:
            slow = self.world.slow.get(name)
            agent = AgentPlay(
                name,
                self.clock,
                self.hub,
                self.referee,
                self.world.room[name],
                jobs,
                rng,
                slow,
                fences=agents_fence,
            )
            self.hub.agents[name] = agent
        self.wall = 0.0

    def run(self) -> Replay:
        clock, world, hub = self.clock, self.world, self.hub
        for agent in hub.agents.values():
            clock.at(0.0, agent.connect)
        for job in world.arrivals:
            clock.at(job.created, partial(self._submit, job))
        for cluster, at, seconds in world.lost:
            clock.at(at, partial(self._lose, cluster, at + seconds))
            clock.at(at + seconds, hub.agents[cluster].connect)
        grows, at = world.grows
        cq, flavor, factor = GROWS
        clock.at(at, partial(hub.agents[grows].grow, (cq, flavor), factor))
        until = world.span + TAIL_SECONDS
        total = len(world.arrivals)
        started = time.perf_counter()
        gc.callbacks.append(self.gc_watch)
        try:
            while len(self.referee.finished) < total and clock.step(until):
                pass
        finally:
            gc.callbacks.remove(self.gc_watch)
        self.wall = time.perf_counter() - started
        return self

    def _lose(self, cluster: str, back_at: float) -> None:
        mirror = self.hub.mirror
        keys = mirror.by_cluster.get(cluster, ())
        self.referee.cluster_lost(
            cluster, {key: mirror.workloads[key].workload for key in keys}, back_at
        )
        self.hub.agents[cluster].disconnect()

    def _submit(self, job: Job) -> None:
        self.referee.created[job.key] = self.clock.now
        self.hub.mirror.submit(job.key, self.world.workload(job))

    def report(self) -> dict[str, Any]:
        """The figures: what a cycle costs (wall), what it decides, how long work waits
        (simulated), the cluster losses, and every invariant violation."""
        hub, referee, stats = self.hub, self.referee, self.hub.stats
        total = len(self.world.arrivals)
        cycles = max(1, hub.cycles)
        wall = sorted(stats.wall)
        in_dispatch = sum(wall)
        without_gc = sorted(w - g for w, g in zip(stats.wall, stats.gc_in_dispatch, strict=True))
        violations = Counter(referee.violations)
        unfinished = [k for k in referee.created if k not in referee.finished]
        for key in unfinished:
            known = key in hub.mirror.pending or any(
                key in keys for keys in hub.mirror.by_cluster.values()
            )
            violations["stuck" if known else "lost"] += 1
        never_arrived = total - len(referee.created)
        if never_arrived:
            violations["never_submitted"] += never_arrived
        outliving = sum(len(loss.reservations) for loss in referee.losses.values())
        if outliving:
            violations["reservation_outlived_the_loss"] += outliving
        return {
            "benchmark": "hub_replay",
            "workloads": total,
            "clusters": len(self.world.names),
            "seed": self.seed,
            "scale": self.world.scale,
            "simulated_seconds": round(self.clock.now, 1),
            "arrival_span_seconds": round(self.world.span, 1),
            "wall_seconds": round(self.wall, 1),
            "max_rss_mb": rusage.getrusage(rusage.RUSAGE_SELF).ru_maxrss // 1024,
            "cycles": hub.cycles,
            "dispatch_wall_seconds": round(in_dispatch, 2),
            "cycle_wall_ms": {
                "p50": _ms(_percentile(wall, 0.50)),
                "p99": _ms(_percentile(wall, 0.99)),
                "max": _ms(wall[-1] if wall else 0.0),
            },
            "cycle_wall_ms_without_gc": {
                "p99": _ms(_percentile(without_gc, 0.99)),
                "max": _ms(without_gc[-1] if without_gc else 0.0),
            },
            "gc": {
                "full_collections": self.gc_watch.full,
                "seconds": round(self.gc_watch.seconds, 2),
                "seconds_in_dispatch": round(sum(stats.gc_in_dispatch), 2),
                "longest_ms": _ms(self.gc_watch.longest),
            },
            "dispatch_ms_per_workload": round(1000 * in_dispatch / max(1, total), 3),
            "shell_wall_seconds": round(stats.shell_seconds, 2),
            "placements_per_cycle": {
                "mean": round(stats.placed / cycles, 2),
                "max": stats.placed_max,
            },
            "candidates_per_cycle": {
                "mean": round(stats.visited / cycles, 2),
                "max": stats.visited_max,
            },
            "offers": dict(sorted(stats.offers.items())),
            "offers_per_cycle_max": stats.offers_max,
            "time_to_dispatch_s": _spread(referee.offered, referee.created),
            "time_to_admission_s": _spread(referee.admitted, referee.created),
            "pending_peak": stats.pending_peak,
            "parked_peak": stats.parked_peak,
            "parked_over_fleet_quota_peak": stats.over_quota_peak,
            "offer_timeouts": dict(sorted(stats.expired.items())),
            "let_go": stats.let_go.get("bound", 0),
            "cluster_losses": [_loss(loss) for loss in referee.losses.values()],
            "refused_reports": dict(sorted(stats.refused.items())),
            "messages_to_lost_clusters": stats.dropped_messages,
            "status_writes": hub.mirror.writes,
            "finished": len(referee.finished),
            "ran_to_completion_twice": sum(1 for n in referee.completed_runs.values() if n > 1),
            "invariant_violations": sum(violations.values()),
            "violations": dict(sorted(violations.items())),
            "violation_examples": referee.examples,
        }

    def profile_text(self, top: int) -> str:
        if self.profiler is None:
            return ""
        out = io.StringIO()
        stats = pstats.Stats(self.profiler, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
        return out.getvalue()


def _percentile(values: list[float], q: float) -> float:
    return nearest_rank(values, q) if values else 0.0


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 3)


def _spread(at: Mapping[str, float], created: Mapping[str, float]) -> dict[str, float]:
    waits = sorted(at[k] - created[k] for k in at)
    return {
        "p50": round(_percentile(waits, 0.50), 3),
        "p99": round(_percentile(waits, 0.99), 3),
        "max": round(waits[-1], 3) if waits else 0.0,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _loss(loss: LossRecord) -> dict[str, Any]:
    return {
        "cluster": loss.cluster,
        "lost_at_s": round(loss.lost_at, 1),
        "back_after_s": round(loss.back_at - loss.lost_at, 1),
        "reservations_at_loss": loss.reservations_at_loss,
        "reservations_ended_within_s": round(loss.reservations_ended_within, 3),
        "reservations_let_go": loss.reservations_let_go,
        "reservations_outliving_the_loss": len(loss.reservations),
        "bound_at_loss": loss.bound_at_loss,
        "let_go_allowed_after_s": _round(loss.let_go_allowed_after),
        "bound_let_go": loss.bound_let_go,
        "bound_let_go_after_s": _round(loss.bound_let_go_after),
        "let_go_ran_elsewhere": loss.let_go_ran_elsewhere,
        "runs_fenced_by_agent": loss.runs_fenced,
        "offers_resent_on_return": loss.offers_resent_on_return,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="arrival rate, clusters' room and fleet quota, relative to the default world",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print the N costliest functions of dispatch (cProfile, thread time) to stderr",
    )
    parser.add_argument(
        "--agents-never-fence",
        action="store_true",
        help="agents keep running work when their lease runs out: the checks must catch it",
    )
    args = parser.parse_args(argv)
    replay = Replay(
        workloads=args.workloads,
        clusters=args.clusters,
        seed=args.seed,
        scale=args.scale,
        profile=args.profile > 0,
        agents_fence=not args.agents_never_fence,
    ).run()
    json.dump(replay.report(), sys.stdout, indent=2)
    print()
    if args.profile:
        print(replay.profile_text(args.profile), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
