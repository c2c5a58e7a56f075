"""PURE routing: which cluster queue, global queue, cluster set and dispatch policy a
workload goes by, from the hub's configuration objects; and what a workload requests.

A route depends on the workload's namespace, local queue and the cluster set it asks for
(annotation), and on the configuration — nothing else. So `Routing` answers once per
(namespace, queue, cluster set) and is rebuilt when the configuration moves (the shell keeps
one per configuration generation). No I/O, no clock.

Called by: hub.placement.cycle (every candidate), hub.dispatch (queue tallies),
hub.queue_status (cluster set members), tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from fractions import Fraction

from api.k8s.core import LabelSelectorRequirement
from api.v1alpha1.federation import ClusterSet, GlobalQueue, MemberCluster, Tenant
from api.v1alpha1.queues import ClusterQueue, LocalQueue
from api.v1alpha1.workload import Workload
from hub.placement.snapshot import ClusterName, DispatchMode, PreferredTerm

__all__ = ["CLUSTER_SET_ANNOTATION", "Route", "Routing", "workload_requests"]

CLUSTER_SET_ANNOTATION = "multiq.dev/cluster-set"
ROUTES_KEPT = 10_000
"""At most this many queues' routes are remembered; past it the memo starts over."""


def _requests_of(wl: Workload, minimum: bool) -> dict[str, int]:
    # The exact total of count × one pod's requests over the pod sets, rounded up to
    # milli-units once (Kubernetes' MilliValue of the total), summed as Fractions: a Quantity
    # per product and per sum cost placement's first look at a workload a fifth more.
    total: dict[str, Fraction] = {}
    for ps in wl.spec.pod_sets:
        count = ps.min_count if minimum and ps.min_count is not None else ps.count
        for name, quantity in ps.pod_requests().items():
            value = quantity.value * count
            total[name] = total[name] + value if name in total else value
    return {name: -((-v.numerator * 1000) // v.denominator) for name, v in total.items()}


_REQUESTS_MEMO: dict[tuple[str, bool], dict[str, int]] = {}


def workload_requests(wl: Workload, *, minimum: bool = False) -> dict[str, int]:
    """Total requests of all pod sets in milli-units (at minCount when `minimum`).

    Pod sets are immutable, so the answer is remembered per workload uid."""
    uid = wl.metadata.uid
    if uid is None:
        return _requests_of(wl, minimum)
    found = _REQUESTS_MEMO.get((uid, minimum))
    if found is None:
        if len(_REQUESTS_MEMO) > 100_000:
            _REQUESTS_MEMO.clear()
        found = _REQUESTS_MEMO[(uid, minimum)] = _requests_of(wl, minimum)
    return found


@dataclass(frozen=True, slots=True)
class Route:
    cluster_queue: str
    cluster_set: frozenset[ClusterName]
    global_queue: GlobalQueue | None
    mode: str = DispatchMode.BEST_FIT
    step_size: int = 1
    interval_seconds: int = 300
    required_terms: tuple[tuple[LabelSelectorRequirement, ...], ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()


@dataclass
class Routing:
    """Routes under one configuration. Build a new one when the configuration moves."""

    local_queues: Mapping[str, LocalQueue]
    """By `namespace/name`."""
    global_queues: tuple[GlobalQueue, ...]
    tenants: tuple[Tenant, ...]
    cluster_sets: Mapping[str, ClusterSet]
    members: Mapping[str, MemberCluster]
    preempting: frozenset[str] = frozenset()
    """Cluster queues that preempt their own lower priorities (`withinClusterQueue` other
    than Never): placement may offer them a cluster where such work holds the room."""
    reclaiming: frozenset[str] = frozenset()
    """Cluster queues in a cohort that take back lent quota from any borrower
    (`preemption.reclaimWithinCohort: Any`): placement may offer them a cluster where their
    unused nominal quota is borrowed (hub.placement.core `reclaim_score`)."""
    _memo: dict[tuple[str, str, str | None], Route | str] = field(default_factory=dict)
    _global_by_name: dict[str, GlobalQueue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Looked up for every over-quota candidate of every cycle: by name, not by a scan.
        self._global_by_name = {gq.name: gq for gq in self.global_queues}

    @classmethod
    def of(
        cls,
        *,
        local_queues: Iterable[LocalQueue],
        global_queues: Iterable[GlobalQueue],
        tenants: Iterable[Tenant],
        cluster_sets: Iterable[ClusterSet],
        members: Iterable[MemberCluster],
        cluster_queues: Iterable[ClusterQueue] = (),
    ) -> Routing:
        return cls(
            local_queues={f"{q.metadata.namespace}/{q.name}": q for q in local_queues},
            global_queues=tuple(sorted(global_queues, key=lambda g: g.name)),
            tenants=tuple(tenants),
            cluster_sets={s.name: s for s in cluster_sets},
            members={m.name: m for m in members},
            preempting=frozenset(
                q.metadata.name
                for q in cluster_queues
                if q.spec.preemption.within_cluster_queue != "Never"
            ),
            reclaiming=frozenset(
                q.metadata.name
                for q in cluster_queues
                if q.spec.cohort_name and q.spec.preemption.reclaim_within_cohort == "Any"
            ),
        )

    def global_queue(self, name: str) -> GlobalQueue | None:
        return self._global_by_name.get(name)

    def governing_queue(self, cluster_queue: str, tenants: Set[str]) -> GlobalQueue | None:
        """The GlobalQueue that governs a cluster queue's work for these tenants: of those
        open to both, the most specific — one that names the cluster queue before one open to
        every cluster queue, then one that names a tenant before one open to all — and the
        first by name among equals. So a catch-all queue (`qctl dev up`'s `default`) never
        takes the work of a queue another GlobalQueue was written for."""
        best: tuple[bool, bool] | None = None
        found: GlobalQueue | None = None
        for gq in self.global_queues:  # by name: the first of equals stays
            spec = gq.spec
            if spec.cluster_queues and cluster_queue not in spec.cluster_queues:
                continue
            if spec.tenants and not tenants & set(spec.tenants):
                continue
            rank = (bool(spec.cluster_queues), bool(spec.tenants))
            if best is None or rank > best:
                best, found = rank, gq
        return found

    def capped_queues(self) -> list[GlobalQueue]:
        """The global queues with a fleet quota."""
        return [gq for gq in self.global_queues if gq.spec.fleet_quota]

    def route_of(self, wl: Workload) -> Route | str:
        """Where a workload may go, or why it cannot go anywhere (remembered per queue)."""
        meta = wl.metadata
        inputs = (
            meta.namespace or "default",
            wl.spec.queue_name,
            meta.annotations.get(CLUSTER_SET_ANNOTATION),
        )
        route = self._memo.get(inputs)
        if route is None:
            if len(self._memo) > ROUTES_KEPT:
                self._memo.clear()
            route = self._memo[inputs] = self._route(*inputs)
        return route

    def _route(self, namespace: str, queue: str, asked_set: str | None) -> Route | str:
        lq = self.local_queues.get(f"{namespace}/{queue}")
        if lq is None:
            return f"LocalQueue {namespace}/{queue} does not exist at the hub"
        cq = lq.spec.cluster_queue
        tenants = {t.name for t in self.tenants if namespace in t.spec.namespaces}
        gq = self.governing_queue(cq, tenants)
        members = self.cluster_set_members(asked_set or (gq.spec.cluster_set if gq else None))
        if isinstance(members, str):
            return members
        if gq is None:
            return Route(cq, members, None)
        policy = gq.spec.dispatch_policy
        inc = policy.incremental
        affinity = gq.spec.cluster_affinity
        return Route(
            cq,
            members,
            gq,
            mode=policy.type,
            step_size=inc.step_size if inc else 1,
            interval_seconds=inc.interval_seconds if inc else 300,
            required_terms=tuple(tuple(t.match_expressions) for t in affinity.required)
            if affinity
            else (),
            preferred_terms=tuple(
                PreferredTerm(p.weight, tuple(p.preference.match_expressions))
                for p in affinity.preferred
            )
            if affinity
            else (),
        )

    def cluster_set_members(self, name: str | None) -> frozenset[ClusterName] | str:
        """The clusters of a cluster set (None: the set `default`, else every member)."""
        if name is None:
            if "default" not in self.cluster_sets:
                return frozenset(ClusterName(n) for n in self.members)
            name = "default"
        cs = self.cluster_sets.get(name)
        if cs is None:
            return f"ClusterSet {name!r} does not exist"
        if cs.spec.clusters is not None:
            return frozenset(ClusterName(n) for n in cs.spec.clusters)
        selector = cs.spec.cluster_selector
        return frozenset(
            ClusterName(n)
            for n, m in self.members.items()
            if selector is not None and selector.matches(dict(m.metadata.labels))
        )
