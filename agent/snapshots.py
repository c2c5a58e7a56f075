"""Between the api models the agent holds and the engine's frozen types: the snapshot each
admission cycle reads, built incrementally, and the engine's admissions turned back into the
api form the agent reports and persists.

The cycle runs on every event, so `SnapshotCache.build` must not re-convert everything, nor
even look at everything: the configuration is converted once per ConfigSync (with
`agent.engine.from_api`; one that converts the same is not taken — the hub pushes one when a
queue's status changes), each workload once per change of its workload object (records are
immutable: a transition that changes the status makes a new workload) or of the priority
classes' values, finished workloads are left out (they hold no quota), and the shell names
the workloads it changed since the last build, so a build costs what changed: the held
engine workloads are kept in a persistent map (`immutables.Map`) that a snapshot takes as it
is, where a dict would be copied whole for every snapshot (a cycle may run in a worker thread
while the loop builds the next one, for a capacity report). A reservation holds its quota
like an admitted workload: its status carries the admission.

The cycle is incremental too (`agent.engine.cycle.schedule_incremental`): the cache keeps the
engine's `Carry` and the ids of the engine workloads it replaced since the last cycle, and
`cycle` hands both to the engine, so a cycle over a deep queue costs what changed.

Admission fair sharing orders a cluster queue's waiting workloads by their local queue's
decayed usage (`agent.fair_usage.UsageBook`, sampled here when a cycle's snapshot is built
at `now`): the score is part of each engine workload's queue order, so when a local queue's
score changes the cache re-stamps its waiting workloads and names them as replaced — the
engine's carry then re-sorts exactly those.

Topology-aware scheduling needs the nodes: `ClusterNodes` turns the mirrored node and pod
objects into the engine's `Node`s (allocatable, labels, taints, whether schedulable, and what
the bound pods request — except the pods of workloads the engine counts by their topology
assignment), parsing each node revision and each pod once; the cache asks for them only
when a flavor has a topology, so clusters without one pay nothing.

Called by: agent.admission (every cycle, and on admission); agent.capacity reads the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from immutables import Map

from agent.engine.carry import Carry
from agent.engine.cycle import schedule_incremental
from agent.engine.fair_usage import stamp
from agent.engine.from_api import build_snapshot, workload_from_api
from agent.engine.quota import Usage, count_usage
from agent.engine.result import CycleResult
from agent.engine.snapshot import Admission as EngineAdmission
from agent.engine.snapshot import AdmissionFairSharing as EngineAdmissionFairSharing
from agent.engine.snapshot import (
    EngineConfig,
    FairSharingStrategy,
    LocalQueueKey,
    Node,
    RequeueTimestamp,
    ResourceName,
    Snapshot,
    Taint,
    WorkloadId,
)
from agent.engine.snapshot import FairSharing as EngineFairSharing
from agent.engine.snapshot import TopologyAssignment as EngineTopologyAssignment
from agent.engine.snapshot import WaitForPodsReady as EngineWaitForPodsReady
from agent.engine.snapshot import Workload as EngineWorkload
from agent.fair_usage import UsageBook
from agent.labels import Labels
from agent.records import Record
from api.k8s.pod import room_requests
from api.quantity import Quantity
from api.v1alpha1.federation import AdmissionFairSharing, FairSharing, WaitForPodsReady
from api.v1alpha1.messages import ConfigSync
from api.v1alpha1.workload import (
    Admission,
    PodSetAssignment,
    TopologyAssignment,
    TopologyAssignmentSlice,
    TopologyAssignmentSliceLevelValues,
    Workload,
    WorkloadConditionType,
    WorkloadStatus,
)

__all__ = ["ClusterNodes", "SnapshotCache", "api_admission", "api_topology", "namespace_labels"]

JsonObject = Mapping[str, Any]

SMALL_CYCLE_CHANGES = 64
"""At most this many changed workloads on the last carry make a small cycle (the admission
shell runs one in its loop when the last one was quick too)."""


def api_topology(ta: EngineTopologyAssignment) -> TopologyAssignment:
    """The engine's assignment in Kueue's form: one slice, a level's values given once when
    every domain shares it."""
    columns = list(zip(*(values for values, _ in ta.domains), strict=True)) if ta.domains else []
    levels = []
    for column in columns:
        if len(set(column)) == 1:
            levels.append(TopologyAssignmentSliceLevelValues(universal_value=column[0]))
        else:
            levels.append(TopologyAssignmentSliceLevelValues(roots=list(column)))
    counts = [pods for _, pods in ta.domains]
    return TopologyAssignment(
        levels=list(ta.levels),
        slices=[
            TopologyAssignmentSlice(
                domain_count=len(ta.domains),
                values_per_level=levels,
                pod_counts=None if len(set(counts)) == 1 else counts,
                universal_pod_count=counts[0] if len(set(counts)) == 1 else None,
            )
        ]
        if ta.domains
        else [],
    )


def api_admission(adm: EngineAdmission) -> Admission:
    """The engine's admission in the api form (what reports and the state carry)."""
    return Admission(
        cluster_queue=adm.cluster_queue,
        pod_set_assignments=[
            PodSetAssignment(
                name=ps.name,
                flavors={str(r): str(f) for r, f in ps.flavors.items()},
                resource_usage={r: Quantity.from_milli(v) for r, v in ps.usage.items()},
                count=ps.count,
                topology_assignment=None if ps.topology is None else api_topology(ps.topology),
            )
            for ps in adm.pod_sets
        ],
    )


@dataclasses.dataclass(slots=True)
class _Converted:
    workload: Workload
    status: WorkloadStatus | None
    sticky: bool
    engine: EngineWorkload


def _ready_matters(base: Snapshot) -> bool:
    """Whether the engine reads the workloads' PodsReady (`pods_ready`, `pods_ready_lost_at`):
    only with waitForPodsReady on (agent.engine.podsready, the cycle's blockAdmission)."""
    return base.config.wait_for_pods_ready.enabled


def _engine_sees_same(old: WorkloadStatus | None, new: WorkloadStatus | None) -> bool:
    """Whether `new` differs from `old` in its PodsReady condition alone (as a status pass
    changes it: the other conditions and fields the very same objects), so that what
    `workload_from_api` makes of either is the same but for `pods_ready` and
    `pods_ready_lost_at`."""
    if old is None or new is None or old is new:
        return False
    if (
        new.admission is not old.admission
        or new.requeue_state is not old.requeue_state
        or new.accumulated_past_execution_time_seconds
        != old.accumulated_past_execution_time_seconds
    ):
        return False
    ready = WorkloadConditionType.PODS_READY
    before = [c for c in old.conditions if c.type != ready]
    after = [c for c in new.conditions if c.type != ready]
    return len(before) == len(after) and all(a is b for a, b in zip(before, after, strict=True))


def namespace_labels(
    cluster: Mapping[str, Mapping[str, str]], config: ConfigSync
) -> dict[str, dict[str, str]]:
    """The labels namespaceSelectors are matched against: each namespace's labels in the
    cluster, with the ones the hub asserts (its tenant) over them — for a namespace not
    created here yet too, since the agent creates it with them when its first Job comes."""
    out = {name: dict(labels) for name, labels in cluster.items()}
    for pushed in config.namespaces:
        out.setdefault(pushed.name, {}).update(pushed.labels)
    return out


def _milli(amounts: Mapping[str, Any]) -> dict[ResourceName, int]:
    out: dict[ResourceName, int] = {}
    for name, raw in amounts.items():
        try:
            out[ResourceName(name)] = Quantity.parse(str(raw)).milli()
        except ValueError:
            continue
    return out


def _schedulable(node: JsonObject) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


class ClusterNodes:
    """The engine's nodes from the cluster's node and pod objects (the inventory's mirrors),
    kept between cycles: a node is converted once per revision, a pod's requests once per
    pod (they never change)."""

    def __init__(self) -> None:
        self._nodes: dict[tuple[str, str], Node] = {}
        self._requests: dict[str, dict[ResourceName, int]] = {}
        self._last: dict[str, Node] = {}
        """The last build: returned again when nothing changed, and its nodes reused when
        theirs did not, so the engine tells unchanged nodes by identity."""
        self._bases: dict[str, Node] = {}
        """The converted node revision each node of the last build was made from."""

    def build(
        self,
        nodes: Mapping[str, JsonObject],
        pods: Mapping[str, JsonObject],
        placed: Callable[[str, str], bool],
    ) -> dict[str, Node]:
        """Every node, with what its bound unfinished pods request; the pods of a workload
        for which `placed(namespace, name label)` holds are left out (the engine counts
        them by their topology assignment)."""
        usage: dict[str, dict[ResourceName, int]] = {}
        requests: dict[str, dict[ResourceName, int]] = {}
        for key, pod in pods.items():
            spec = pod.get("spec") or {}
            node_name = spec.get("nodeName")
            if not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            owner = (labels.get(Labels.NAMESPACE), labels.get(Labels.NAME))
            if owner[0] is not None and owner[1] is not None and placed(owner[0], owner[1]):
                continue
            uid = str(meta.get("uid") or key)
            amounts = self._requests.get(uid)
            if amounts is None:
                amounts = {ResourceName(k): v for k, v in room_requests(spec).items()}
            requests[uid] = amounts
            total = usage.setdefault(str(node_name), {})
            for res, amount in amounts.items():
                total[res] = total.get(res, 0) + amount
        self._requests = requests
        converted: dict[tuple[str, str], Node] = {}
        bases: dict[str, Node] = {}
        out: dict[str, Node] = {}
        for node in nodes.values():
            meta = node.get("metadata") or {}
            name = str(meta.get("name"))
            revision = (name, str(meta.get("resourceVersion")))
            engine = self._nodes.get(revision)
            if engine is None:
                engine = Node(
                    name,
                    dict(meta.get("labels") or {}),
                    _milli((node.get("status") or {}).get("allocatable") or {}),
                    taints=tuple(
                        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect")))
                        for t in (node.get("spec") or {}).get("taints") or []
                    ),
                    schedulable=_schedulable(node),
                )
            converted[revision] = engine
            used = usage.get(name, {})
            before = self._last.get(name)
            if before is not None and self._bases.get(name) is engine and before.usage == used:
                out[name] = before
            else:
                out[name] = dataclasses.replace(engine, usage=used)
            bases[name] = engine
        self._nodes = converted
        self._bases = bases
        last = self._last
        if out.keys() == last.keys() and all(out[n] is last[n] for n in out):
            return last
        self._last = out
        return out


def engine_admission_fair_sharing(
    cfg: AdmissionFairSharing | None,
) -> EngineAdmissionFairSharing | None:
    if cfg is None:
        return None
    return EngineAdmissionFairSharing(
        usage_half_life_seconds=float(cfg.usage_half_life_seconds),
        usage_sampling_interval_seconds=float(cfg.usage_sampling_interval_seconds),
        resource_weights={ResourceName(r): w for r, w in cfg.resource_weights.items()},
    )


def engine_fair_sharing(cfg: FairSharing | None) -> EngineFairSharing | None:
    if cfg is None:
        return None
    return EngineFairSharing(tuple(FairSharingStrategy(s) for s in cfg.preemption_strategies))


def engine_config(
    ready: WaitForPodsReady | None,
    fair: AdmissionFairSharing | None = None,
    preemption_fair: FairSharing | None = None,
) -> EngineConfig:
    """The engine's settings: waitForPodsReady, admission fair sharing and (preemption-based)
    fair sharing as the hub sent them for this cluster, or as the agent was started with
    (None: off)."""
    fair_sharing = engine_admission_fair_sharing(fair)
    preempting = engine_fair_sharing(preemption_fair)
    if ready is None:
        return EngineConfig(admission_fair_sharing=fair_sharing, fair_sharing=preempting)
    strategy = ready.requeuing_strategy
    return EngineConfig(
        admission_fair_sharing=fair_sharing,
        fair_sharing=preempting,
        wait_for_pods_ready=EngineWaitForPodsReady(
            enabled=True,
            timeout_seconds=float(ready.timeout_seconds),
            recovery_timeout_seconds=None
            if ready.recovery_timeout_seconds is None
            else float(ready.recovery_timeout_seconds),
            block_admission=ready.block_admission,
            requeue_timestamp=RequeueTimestamp(strategy.timestamp),
            backoff_base_seconds=float(strategy.backoff_base_seconds),
            backoff_max_seconds=float(strategy.backoff_max_seconds),
            backoff_limit_count=strategy.backoff_limit_count,
        ),
    )


class SnapshotCache:
    """The engine's view of the held workloads, kept between cycles: only the workloads the
    shell names as changed are looked at again (a full walk when it cannot name them).
    `wait_for_pods_ready`, `admission_fair_sharing`, `fair_sharing`: the agent's own settings,
    used when the hub sends none; `usage`: the book of local queues' usage (a new, unsaved one
    if None)."""

    def __init__(
        self,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        admission_fair_sharing: AdmissionFairSharing | None = None,
        usage: UsageBook | None = None,
        fair_sharing: FairSharing | None = None,
    ) -> None:
        self._ready_default = wait_for_pods_ready
        self._fair_default = admission_fair_sharing
        self._preemption_fair_default = fair_sharing
        self.usage = usage if usage is not None else UsageBook()
        self._scores: dict[LocalQueueKey, float] = {}
        """The local queues' scores the converted workloads are stamped with."""
        self._base: Snapshot | None = None
        self._config: ConfigSync | None = None
        self._namespaces: Mapping[str, Mapping[str, str]] | None = None
        self._priorities: dict[str, int] = {}
        self._workloads: dict[str, _Converted] = {}
        self._engine: Map[WorkloadId, EngineWorkload] = Map()
        """What the last snapshot held: the converted unfinished workloads, by engine id.
        Persistent (a hash array mapped trie): a snapshot takes it as it is, and a change
        makes a new one sharing all but a few nodes, so a build costs what changed, not a
        copy of every held workload, and a cycle running in a worker thread keeps reading
        the one it was given while the loop builds the next."""
        self._admitted: Map[WorkloadId, EngineWorkload] = Map()
        """The admitted ones among them (a capacity report reads only these)."""
        self._usage: Usage = {}
        """What the admitted ones hold, per cluster queue, kept as they change: a capacity
        report, a few a second, would otherwise sum every admitted workload each time."""
        self._carry: Carry | None = None
        self._replaced: set[WorkloadId] | None = None
        """Engine ids added, replaced or dropped since the last `cycle` (None: unknown)."""
        self._nodes = ClusterNodes()
        self._by_label: dict[tuple[str, str], _Converted] = {}
        """The converted workloads by the labels their pods carry (namespace, name label)."""

    def build(
        self,
        config: ConfigSync | None,
        held: Mapping[str, Record],
        changed: Iterable[str] | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        cluster: tuple[Mapping[str, JsonObject], Mapping[str, JsonObject]] | None = None,
        now: float | None = None,
        *,
        admitted_only: bool = False,
    ) -> Snapshot:
        """The snapshot of `config`, the cluster's namespaces' labels (by name; a new object
        when they change) and the unfinished workloads of `held`. `changed`: the keys whose
        record may differ since the last build — forgotten ones included — (None: any of
        them). `cluster`: the node and pod objects, read when a flavor has a topology.
        `now`: the time of the cycle it is for, at which local queues' usage is sampled
        (None: the usage is left as it is). `admitted_only`: the snapshot holds only the
        admitted workloads — all that quota usage and topology rooms are made of, so a
        capacity report costs what runs, not what waits."""
        cfg = config or ConfigSync(revision=0)
        new_config = self._config is not cfg
        if self._base is None or new_config or self._namespaces is not namespaces:
            base = build_snapshot(
                flavors=cfg.resource_flavors,
                cluster_queues=cfg.cluster_queues,
                local_queues=cfg.local_queues,
                cohorts=cfg.cohorts,
                workloads=(),
                namespaces=namespace_labels(namespaces or {}, cfg),
                topologies=cfg.topologies,
                config=engine_config(
                    cfg.wait_for_pods_ready or self._ready_default,
                    cfg.admission_fair_sharing or self._fair_default,
                    cfg.fair_sharing or self._preemption_fair_default,
                ),
            )
            self._namespaces = namespaces
            # The hub pushes a ConfigSync whenever a queue's status changes too: a push that
            # converts to the same snapshot keeps the old one, so the engine's carry (which
            # rebuilds itself when the config is another object) stays incremental.
            if base != self._base:
                if self._base is not None and _ready_matters(self._base) != _ready_matters(base):
                    # The views kept while waitForPodsReady was off may hold a stale PodsReady
                    # (`_engine_sees_same`): every workload is converted anew.
                    self._workloads.clear()
                    self._by_label.clear()
                    changed = None
                self._base = base
        if new_config:
            self._config = cfg
            priorities = {p.metadata.name: p.value for p in cfg.workload_priority_classes}
            if priorities != self._priorities:
                # A workload's conversion reads the config's priorities alone: the converted
                # workloads stay while they are the same.
                self._priorities = priorities
                self._workloads.clear()
                self._by_label.clear()
                changed = None
        if changed is None:
            self._engine = Map()
            self._admitted = Map()
            self._usage = {}
            self._replaced = None
            keys: Iterable[str] = held
        else:
            keys = changed
        for key in keys:
            self._refresh(key, held.get(key))
        nodes: dict[str, Node] = {}
        if cluster is not None and any(
            f.spec.topology_name is not None for f in cfg.resource_flavors
        ):
            nodes = self._nodes.build(*cluster, self._placed)
        if now is not None or self._scores:
            if now is not None:
                self.usage.advance(dataclasses.replace(self._base, workloads=self._engine), now)
            self._restamp(self.usage.scores(self._base))
        workloads = self._admitted if admitted_only else self._engine
        return dataclasses.replace(
            self._base, workloads=workloads, nodes=nodes, queue_usage=self._scores
        )

    def _restamp(self, scores: dict[LocalQueueKey, float]) -> None:
        """Stamp the waiting workloads of every local queue whose score changed."""
        before = self._scores
        moved = {k for k in before.keys() | scores.keys() if before.get(k) != scores.get(k)}
        self._scores = scores
        if not moved:
            return
        replaced = self._replaced
        for converted in self._workloads.values():
            old = converted.engine
            if old.admission is not None or old.local_queue not in moved:
                continue
            new = stamp(old, scores)
            if new is old:
                continue
            converted.engine = new
            if old.id in self._engine:
                self._engine = self._engine.set(old.id, new)
            if replaced is not None:
                replaced.add(new.id)

    def admitted_usage(self) -> Usage:
        """What the admitted workloads of the last `build` hold, per cluster queue (a copy)."""
        return {cq: dict(total) for cq, total in self._usage.items()}

    def admitted(self, snapshot: Snapshot, result: CycleResult) -> None:
        """The cycle over `snapshot` decided `result`: its admissions' entry penalties."""
        self.usage.admitted(snapshot, result)

    def _placed(self, namespace: str, name_label: str) -> bool:
        """Whether the workload whose pods carry these labels is counted by its topology
        assignment (its admission in the snapshot has one)."""
        found = self._by_label.get((namespace, name_label))
        return (
            found is not None
            and found.engine.admission is not None
            and any(ps.topology is not None for ps in found.engine.admission.pod_sets)
        )

    def cycle(self, snapshot: Snapshot) -> Callable[[float], CycleResult]:
        """The admission cycle over `snapshot` (the last `build`), to call with `now` — in a
        worker thread if need be: what changed is taken here, and the carry is only read and
        replaced by the cycles, which run one at a time."""
        replaced, self._replaced = self._replaced, set()
        carry, self._carry = self._carry, None  # (a cycle that raises leaves none behind)

        def run(now: float) -> CycleResult:
            result, self._carry = schedule_incremental(snapshot, now, carry, replaced)
            return result

        return run

    def next_cycle_is_small(self) -> bool:
        """Whether the next `cycle` goes on from the last one's carry over at most
        `SMALL_CYCLE_CHANGES` changed workloads (not a rebuild, not a burst)."""
        return (
            self._carry is not None
            and self._replaced is not None
            and len(self._replaced) <= SMALL_CYCLE_CHANGES
        )

    @staticmethod
    def _label_key(wl: Workload) -> tuple[str, str]:
        return (wl.metadata.namespace or "default", Labels.value(wl.metadata.name))

    def _refresh(self, key: str, item: Record | None) -> None:
        """Bring one held workload's engine view up to date. Its id is named as replaced
        only when the engine workload the snapshot holds for it changes — added, dropped,
        or converted into one that differs: a record that changed elsewhere (a report sent,
        a timer moved, a condition the engine does not read) leaves the engine's carry and
        its pending reasons alone, so a cycle looks only at what it can decide anew."""
        cached = self._workloads.get(key)
        # What the last build held for it, if anything.
        held = self._engine.get(cached.engine.id) if cached is not None else None
        if item is None or item.settled:
            if cached is not None:
                self._by_label.pop(self._label_key(cached.workload), None)
                if item is None:
                    del self._workloads[key]
            self._hold(held, None)
            return
        wl = item.workload
        sticky = item.preempting
        if (
            cached is not None
            and cached.workload is not wl
            and cached.workload.spec is wl.spec
            and cached.workload.metadata is wl.metadata
            and cached.sticky == sticky
            and cached.engine.arrived_at == (item.offered_at or None)
            and self._base is not None
            and not _ready_matters(self._base)
            and _engine_sees_same(cached.status, wl.status)
        ):
            # Only its PodsReady condition moved (its pods started): nothing the engine reads
            # without waitForPodsReady. Its view stays, and so does the cycle's carry of it.
            cached.workload, cached.status = wl, wl.status
        if (
            cached is None
            or cached.workload is not wl
            or cached.status is not wl.status
            or cached.sticky != sticky
        ):
            # An earlier conversion of this very spec: what it made of the spec and of the
            # same admission object is the same now.
            same = cached if cached is not None and cached.workload.spec is wl.spec else None
            engine = stamp(
                workload_from_api(
                    wl,
                    priorities=self._priorities,
                    preempting=sticky,
                    arrived_at=item.offered_at or None,
                    pod_sets=same.engine.pod_sets if same is not None else None,
                    admission=same.engine.admission
                    if same is not None
                    and same.status is not None
                    and wl.status is not None
                    and same.status.admission is wl.status.admission
                    else None,
                ),
                self._scores,
            )
            if cached is not None and engine == cached.engine:
                engine = cached.engine  # (the same to the engine: kept, so seen unchanged)
            cached = _Converted(wl, wl.status, sticky, engine)
            self._workloads[key] = cached
            self._by_label[self._label_key(wl)] = cached
        self._hold(held, cached.engine)

    def _hold(self, before: EngineWorkload | None, after: EngineWorkload | None) -> None:
        """The snapshot holds `after` instead of `before` (None: nothing) for one workload;
        the ids of a change are named as replaced for the next cycle."""
        if before is after:
            return
        if before is not None:
            self._engine = self._engine.delete(before.id)
            if before.id in self._admitted:
                self._admitted = self._admitted.delete(before.id)
                count_usage(self._usage, before, -1)
        if after is not None:
            self._engine = self._engine.set(after.id, after)
            if after.admission is not None:
                self._admitted = self._admitted.set(after.id, after)
                count_usage(self._usage, after, 1)
        if self._replaced is not None:
            self._replaced.update(w.id for w in (before, after) if w is not None)
