"""Fluent builders for engine snapshots, so scenario tables read like the Kueue docs; and
`api_workload`, the smallest api Workload the hub's tests change.

    snap = snapshot(
        cqs=[cq("a").cohort("c").quota("cpu", "default", nominal="20", borrowing="100")],
        workloads=[wl("w1").queue("a").request("cpu", "3")],
    )

Amounts are Kubernetes quantity strings (or ints) converted to engine milli-units. Every
cluster queue gets a local queue of its own name in namespace "default" unless local queues
are given; flavors referenced but not given are created empty (a "default flavor").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Self, TypeVar

from agent.engine.cycle import schedule
from agent.engine.result import CycleResult, PendingReason
from agent.engine.snapshot import (
    Admission,
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    EngineConfig,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    FungibilityPolicy,
    FungibilityPreference,
    LabelSelector,
    LocalQueue,
    LocalQueueKey,
    Namespace,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    PodSetAssignment,
    PreemptionConfig,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Snapshot,
    StopPolicy,
    Taint,
    Toleration,
    Workload,
    WorkloadId,
)
from api.quantity import Quantity
from api.v1alpha1.workload import Workload as ApiWorkload

__all__ = [
    "CQBuilder",
    "CohortBuilder",
    "FlavorBuilder",
    "WorkloadBuilder",
    "admitted_ids",
    "cohort",
    "cq",
    "flavor",
    "ids",
    "lq",
    "m",
    "preempted_ids",
    "reason_of",
    "run",
    "snapshot",
    "wl",
]

Amount = str | int
T = TypeVar("T")


def m(amount: Amount) -> int:
    """Milli-units of a quantity ("1.5" → 1500)."""
    return Quantity.parse(amount).milli()


class _Quotas:
    """Resource groups under construction: flavor order and per-flavor resource quotas."""

    def __init__(self) -> None:
        self.groups: list[dict[str, dict[str, ResourceQuota]]] = [{}]

    def add(
        self,
        resource: str,
        flavor: str,
        nominal: Amount,
        borrowing: Amount | None,
        lending: Amount | None,
    ) -> None:
        group = self.groups[-1]
        group.setdefault(flavor, {})[resource] = ResourceQuota(
            m(nominal),
            None if borrowing is None else m(borrowing),
            None if lending is None else m(lending),
        )

    def build(self) -> tuple[ResourceGroup, ...]:
        out = []
        for group in self.groups:
            if not group:
                continue
            resources: list[str] = []
            for res_map in group.values():
                for res in res_map:
                    if res not in resources:
                        resources.append(res)
            flavors = tuple(
                FlavorQuotas(
                    FlavorName(f),
                    {ResourceName(r): res_map.get(r, ResourceQuota(0)) for r in resources},
                )
                for f, res_map in group.items()
            )
            out.append(ResourceGroup(tuple(ResourceName(r) for r in resources), flavors))
        return tuple(out)


class CQBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._cohort: str | None = None
        self._quotas = _Quotas()
        self._strategy = QueueingStrategy.BEST_EFFORT_FIFO
        self._preemption = PreemptionConfig()
        self._fungibility = FlavorFungibility()
        self._selector: LabelSelector | None = LabelSelector()
        self._stop = StopPolicy.NONE
        self._usage_ordered = False
        self._weight = 1000

    def cohort(self, name: str) -> Self:
        self._cohort = name
        return self

    def quota(
        self,
        resource: str,
        flavor: str = "default",
        *,
        nominal: Amount,
        borrowing: Amount | None = None,
        lending: Amount | None = None,
    ) -> Self:
        self._quotas.add(resource, flavor, nominal, borrowing, lending)
        return self

    def group(self) -> Self:
        """Start a new resource group for the following quota() calls."""
        self._quotas.groups.append({})
        return self

    def strict_fifo(self) -> Self:
        self._strategy = QueueingStrategy.STRICT_FIFO
        return self

    def preemption(
        self,
        *,
        within: str = "Never",
        reclaim: str = "Never",
        borrow_within: str = "Never",
        threshold: int | None = None,
        min_admit: float = 0.0,
    ) -> Self:
        self._preemption = PreemptionConfig(
            PreemptionPolicy(within),
            PreemptionPolicy(reclaim),
            BorrowWithinCohort(PreemptionPolicy(borrow_within), threshold),
            min_admit,
        )
        return self

    def fungibility(
        self,
        *,
        when_can_borrow: str = "MayStopSearch",
        when_can_preempt: str = "TryNextFlavor",
        preference: str = "BorrowingOverPreemption",
    ) -> Self:
        self._fungibility = FlavorFungibility(
            FungibilityPolicy(when_can_borrow),
            FungibilityPolicy(when_can_preempt),
            FungibilityPreference(preference),
        )
        return self

    def namespace_selector(self, selector: Mapping[str, str] | None) -> Self:
        self._selector = None if selector is None else LabelSelector(dict(selector))
        return self

    def stop(self, policy: str = "Hold") -> Self:
        self._stop = StopPolicy(policy)
        return self

    def admission_fair_sharing(self) -> Self:
        """`admissionScope.admissionMode: UsageBasedAdmissionFairSharing`."""
        self._usage_ordered = True
        return self

    def weight(self, weight: float) -> Self:
        """`fairSharing.weight` (preemption-based fair sharing)."""
        self._weight = round(weight * 1000)
        return self

    def build(self) -> ClusterQueue:
        return ClusterQueue(
            ClusterQueueName(self.name),
            self._quotas.build(),
            None if self._cohort is None else CohortName(self._cohort),
            self._strategy,
            self._selector,
            self._preemption,
            self._fungibility,
            self._stop,
            admission_fair_sharing=self._usage_ordered,
            fair_sharing_weight=self._weight,
        )


class CohortBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._parent: str | None = None
        self._quotas = _Quotas()
        self._weight = 1000

    def parent(self, name: str) -> Self:
        self._parent = name
        return self

    def weight(self, weight: float) -> Self:
        """`fairSharing.weight` (preemption-based fair sharing)."""
        self._weight = round(weight * 1000)
        return self

    def quota(
        self,
        resource: str,
        flavor: str = "default",
        *,
        nominal: Amount,
        borrowing: Amount | None = None,
        lending: Amount | None = None,
    ) -> Self:
        self._quotas.add(resource, flavor, nominal, borrowing, lending)
        return self

    def build(self) -> Cohort:
        return Cohort(
            CohortName(self.name),
            None if self._parent is None else CohortName(self._parent),
            self._quotas.build(),
            self._weight,
        )


class FlavorBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._labels: dict[str, str] = {}
        self._taints: list[Taint] = []
        self._tolerations: list[Toleration] = []

    def labels(self, **labels: str) -> Self:
        self._labels.update(labels)
        return self

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._taints.append(Taint(key, value, effect))
        return self

    def toleration(self, key: str, value: str = "", effect: str = "") -> Self:
        self._tolerations.append(Toleration(key, "Equal", value, effect))
        return self

    def build(self) -> ResourceFlavor:
        return ResourceFlavor(
            FlavorName(self.name), dict(self._labels), tuple(self._taints), tuple(self._tolerations)
        )


@dataclasses.dataclass
class _PS:
    name: str
    count: int
    min_count: int | None = None
    requests: dict[str, int] = dataclasses.field(default_factory=dict)
    selector: dict[str, str] = dataclasses.field(default_factory=dict)
    affinity: list[NodeSelectorTerm] = dataclasses.field(default_factory=list)
    tolerations: list[Toleration] = dataclasses.field(default_factory=list)

    def build(self) -> PodSet:
        return PodSet(
            self.name,
            self.count,
            {ResourceName(k): v for k, v in self.requests.items()},
            self.min_count,
            dict(self.selector),
            tuple(self.affinity),
            tuple(self.tolerations),
        )


class WorkloadBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._ns = "default"
        self._queue: str | None = None
        self._priority = 0
        self._created = 0.0
        self._pod_sets: list[_PS] = []
        self._admission: tuple[str, dict[str, str], float] | None = None
        self._extra: dict[str, Any] = {}

    def _ps(self) -> _PS:
        if not self._pod_sets:
            self.pod_set("main", 1)
        return self._pod_sets[-1]

    def ns(self, namespace: str) -> Self:
        self._ns = namespace
        return self

    def queue(self, name: str) -> Self:
        self._queue = name
        return self

    def priority(self, value: int) -> Self:
        self._priority = value
        return self

    def created(self, at: float) -> Self:
        self._created = at
        return self

    def pod_set(self, name: str = "main", count: int = 1, min_count: int | None = None) -> Self:
        self._pod_sets.append(_PS(name, count, min_count))
        return self

    def request(self, resource: str, amount: Amount) -> Self:
        self._ps().requests[resource] = m(amount)
        return self

    def count(self, count: int, min_count: int | None = None) -> Self:
        ps = self._ps()
        ps.count = count
        ps.min_count = min_count
        return self

    def node_selector(self, **labels: str) -> Self:
        self._ps().selector.update(labels)
        return self

    def affinity(self, key: str, operator: str, *values: str) -> Self:
        """Add a required node-affinity term with one expression (terms are ORed)."""
        term = NodeSelectorTerm((NodeSelectorRequirement(key, operator, values),))
        self._ps().affinity.append(term)
        return self

    def toleration(self, key: str, value: str = "", effect: str = "") -> Self:
        self._ps().tolerations.append(Toleration(key, "Equal", value, effect))
        return self

    def admitted(
        self, cq: str, flavors: Mapping[str, str] | str = "default", *, at: float = 0.0
    ) -> Self:
        """Mark admitted in `cq`; `flavors` maps resource → flavor (or one flavor for all)."""
        if isinstance(flavors, str):
            self._admission = (cq, {"*": flavors}, at)
        else:
            self._admission = (cq, dict(flavors), at)
        return self

    def set(self, **fields: Any) -> Self:
        """Set any other Workload field (pods_ready, requeue_after, evicting, ...)."""
        self._extra.update(fields)
        return self

    def build(self) -> Workload:
        pod_sets = tuple(p.build() for p in (self._pod_sets or [self._ps()]))
        admission = None
        admitted_at = None
        if self._admission is not None:
            cq_name, flv, admitted_at = self._admission
            admission = Admission(
                ClusterQueueName(cq_name),
                tuple(
                    PodSetAssignment(
                        ps.name,
                        ps.count,
                        {r: FlavorName(flv.get(r, flv.get("*", "default"))) for r in ps.requests},
                        {r: v * ps.count for r, v in ps.requests.items()},
                    )
                    for ps in pod_sets
                ),
            )
        wl = Workload(
            id=WorkloadId(self.name if "/" in self.name else f"{self._ns}/{self.name}"),
            namespace=Namespace(self._ns),
            queue_name=self._queue or (self._admission[0] if self._admission else ""),
            pod_sets=pod_sets,
            created_at=self._created,
            priority=self._priority,
            admission=admission,
            admitted_at=admitted_at,
        )
        if self._extra:
            wl = dataclasses.replace(wl, **self._extra)
        return wl


def cq(name: str) -> CQBuilder:
    return CQBuilder(name)


def cohort(name: str) -> CohortBuilder:
    return CohortBuilder(name)


def flavor(name: str) -> FlavorBuilder:
    return FlavorBuilder(name)


def wl(name: str) -> WorkloadBuilder:
    return WorkloadBuilder(name)


def lq(
    name: str,
    cluster_queue: str,
    namespace: str = "default",
    stop: str = "None",
    weight: float = 1.0,
) -> LocalQueue:
    return LocalQueue(
        Namespace(namespace), name, ClusterQueueName(cluster_queue), StopPolicy(stop), weight
    )


def _built(items: Iterable[object], kind: type[T]) -> list[T]:
    out: list[T] = []
    for item in items:
        built = item.build() if hasattr(item, "build") else item
        assert isinstance(built, kind), built
        out.append(built)
    return out


def snapshot(
    *,
    cqs: Iterable[CQBuilder | ClusterQueue] = (),
    workloads: Iterable[WorkloadBuilder | Workload] = (),
    cohorts: Iterable[CohortBuilder | Cohort] = (),
    flavors: Iterable[FlavorBuilder | ResourceFlavor] = (),
    lqs: Iterable[LocalQueue] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    config: EngineConfig | None = None,
) -> Snapshot:
    cq_list = _built(cqs, ClusterQueue)
    flavor_map = {f.name: f for f in _built(flavors, ResourceFlavor)}
    for c in cq_list:
        for g in c.resource_groups:
            for fq in g.flavors:
                flavor_map.setdefault(fq.flavor, ResourceFlavor(fq.flavor))
    lq_map: dict[LocalQueueKey, LocalQueue] = {}
    for c in cq_list:
        auto = lq(c.name, c.name)
        lq_map[auto.key] = auto
    for q in lqs:
        lq_map[q.key] = q
    wls = _built(workloads, Workload)
    for w in wls:
        # Namespaced workloads default to a local queue of their cluster queue's name there.
        if w.local_queue not in lq_map and w.admission is None:
            target = w.queue_name
            if any(c.name == target for c in cq_list):
                auto = lq(target, target, w.namespace)
                lq_map[auto.key] = auto
    return Snapshot(
        flavors=flavor_map,
        cluster_queues={c.name: c for c in cq_list},
        local_queues=lq_map,
        workloads={w.id: w for w in wls},
        cohorts={c.name: c for c in _built(cohorts, Cohort)},
        namespaces={Namespace(k): dict(v) for k, v in (namespaces or {}).items()},
        config=config or EngineConfig(),
    )


def ids(*names: str) -> list[str]:
    """Workload ids as the builders make them (namespace "default")."""
    return sorted(n if "/" in n else f"default/{n}" for n in names)


def admitted_ids(result: CycleResult) -> list[str]:
    return sorted(a.workload for a in result.admitted)


def preempted_ids(result: CycleResult) -> list[str]:
    return sorted(p.victim for p in result.preempted)


def run(snap: Snapshot, now: float = 100.0) -> CycleResult:
    return schedule(snap, now)


def reason_of(result: CycleResult, name: str) -> PendingReason:
    """The pending reason of a workload named as in `wl(name)`."""
    return result.pending[WorkloadId(ids(name)[0])]


def api_workload(name: str, namespace: str = "team", **status: Any) -> ApiWorkload:
    """An api Workload of one pod of one container in local queue `q`, with `status` (wire
    field names) when given."""
    return ApiWorkload.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                    }
                ],
            },
            "status": status or None,
        }
    )
