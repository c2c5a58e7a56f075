"""Building an engine `Snapshot` from the api/ objects the agent holds.

Owns the one-way mapping from the contract's pydantic models (ResourceFlavor, ClusterQueue,
Cohort, LocalQueue, WorkloadPriorityClass, Workload) to the engine's frozen input types:
quantities become exact milli-units (`Quantity.milli`), pod-set requests are Kubernetes'
effective pod requests, required node affinity keeps its label expressions (matchFields
cannot match flavor labels and are dropped), and the workload's status supplies admission,
admission time, eviction, pods-ready and requeue state. Topology objects become level
lists, a pod set's `topologyRequest` (Kueue's annotations) its engine request, and an
admission's `topologyAssignment` the engine's (expanded from Kueue's compressed form).
Called by the agent's inventory cache when it builds a cycle's snapshot, and by tests.

What the api does not record, the caller passes in: namespace labels (for namespace
selectors), the engine configuration, which workloads are sticky preemptors (the agent
remembers `CycleResult.new_preemptors` until they are admitted), and when the agent got
each workload's offer (preemption protection compares admissions with it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

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
    Topology,
    TopologyAssignment,
    TopologyMode,
    TopologyRequest,
    Workload,
    WorkloadId,
)
from api.k8s import core as api_core
from api.meta import Condition
from api.v1alpha1 import queues as api_queues
from api.v1alpha1 import workload as api_workload

__all__ = [
    "build_snapshot",
    "cluster_queue_from_api",
    "cohort_from_api",
    "flavor_from_api",
    "local_queue_from_api",
    "topology_assignment_from_api",
    "topology_from_api",
    "topology_request_from_api",
    "workload_from_api",
]


def _ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def _groups(groups: Iterable[api_queues.ResourceGroup]) -> tuple[ResourceGroup, ...]:
    return tuple(
        ResourceGroup(
            tuple(ResourceName(r) for r in g.covered_resources),
            tuple(
                FlavorQuotas(
                    FlavorName(f.name),
                    {
                        ResourceName(r.name): ResourceQuota(
                            r.nominal_quota.milli(),
                            None if r.borrowing_limit is None else r.borrowing_limit.milli(),
                            None if r.lending_limit is None else r.lending_limit.milli(),
                        )
                        for r in f.resources
                    },
                )
                for f in g.flavors
            ),
        )
        for g in groups
    )


def _tolerations(items: Iterable[api_core.Toleration]) -> tuple[Toleration, ...]:
    return tuple(Toleration(t.key, t.operator, t.value, t.effect) for t in items)


def _selector(sel: api_core.LabelSelector | None) -> LabelSelector | None:
    if sel is None:
        return None
    return LabelSelector(
        dict(sel.match_labels),
        tuple(
            NodeSelectorRequirement(r.key, r.operator, tuple(r.values))
            for r in sel.match_expressions
        ),
    )


def flavor_from_api(obj: api_queues.ResourceFlavor) -> ResourceFlavor:
    spec = obj.spec
    return ResourceFlavor(
        FlavorName(obj.metadata.name),
        dict(spec.node_labels),
        tuple(Taint(t.key, t.value, t.effect) for t in spec.node_taints),
        _tolerations(spec.tolerations),
        spec.topology_name,
    )


def topology_from_api(obj: api_queues.Topology) -> Topology:
    return Topology(obj.metadata.name, tuple(level.node_label for level in obj.spec.levels))


def topology_request_from_api(
    req: api_workload.PodSetTopologyRequest | None,
) -> TopologyRequest | None:
    """The engine's request from the pod set's (Kueue's annotations, already parsed); None
    when it asks for no placement (only index labels, say)."""
    if req is None:
        return None
    slice_level = req.pod_set_slice_required_topology
    slice_size = req.pod_set_slice_size
    if req.pod_set_slice_required_topology_constraints:
        # Several layers: the outermost is honoured (the inner ones are not yet).
        outer = req.pod_set_slice_required_topology_constraints[0]
        slice_level, slice_size = outer.topology, outer.size
    if req.required is not None:
        mode, level = TopologyMode.REQUIRED, req.required
    elif req.preferred is not None:
        mode, level = TopologyMode.PREFERRED, req.preferred
    elif req.unconstrained or slice_level is not None or req.pod_set_group_name is not None:
        mode, level = TopologyMode.UNCONSTRAINED, None
    else:
        return None
    return TopologyRequest(mode, level, slice_level, slice_size, req.pod_set_group_name)


def topology_assignment_from_api(ta: api_workload.TopologyAssignment) -> TopologyAssignment:
    return TopologyAssignment(
        tuple(ta.levels),
        tuple((values, count) for s in ta.slices for values, count in s.domains() if count > 0),
    )


def cluster_queue_from_api(obj: api_queues.ClusterQueue) -> ClusterQueue:
    spec = obj.spec
    p = spec.preemption
    bwc = p.borrow_within_cohort
    fung = spec.flavor_fungibility
    weight = spec.fair_sharing.weight.milli() if spec.fair_sharing else 1000
    return ClusterQueue(
        name=ClusterQueueName(obj.metadata.name),
        resource_groups=_groups(spec.resource_groups),
        cohort=None if spec.cohort_name is None else CohortName(spec.cohort_name),
        queueing_strategy=QueueingStrategy(spec.queueing_strategy),
        namespace_selector=_selector(spec.namespace_selector),
        preemption=PreemptionConfig(
            within_cluster_queue=PreemptionPolicy(p.within_cluster_queue),
            reclaim_within_cohort=PreemptionPolicy(p.reclaim_within_cohort),
            borrow_within_cohort=BorrowWithinCohort()
            if bwc is None
            else BorrowWithinCohort(PreemptionPolicy(bwc.policy), bwc.max_priority_threshold),
            min_admit_seconds=float(p.min_admit_seconds),
        ),
        flavor_fungibility=FlavorFungibility(
            FungibilityPolicy(fung.when_can_borrow),
            FungibilityPolicy(fung.when_can_preempt),
            FungibilityPreference(fung.preference or "BorrowingOverPreemption"),
        ),
        stop_policy=StopPolicy(spec.stop_policy),
        fair_sharing_weight=weight,
        admission_fair_sharing=spec.admission_scope is not None
        and spec.admission_scope.admission_mode == "UsageBasedAdmissionFairSharing",
    )


def cohort_from_api(obj: api_queues.Cohort) -> Cohort:
    spec = obj.spec
    return Cohort(
        CohortName(obj.metadata.name),
        None if spec.parent_name is None else CohortName(spec.parent_name),
        _groups(spec.resource_groups),
        spec.fair_sharing.weight.milli() if spec.fair_sharing else 1000,
    )


def local_queue_from_api(obj: api_queues.LocalQueue) -> LocalQueue:
    return LocalQueue(
        Namespace(obj.metadata.namespace or "default"),
        obj.metadata.name,
        ClusterQueueName(obj.spec.cluster_queue),
        StopPolicy(obj.spec.stop_policy),
        obj.spec.fair_sharing.weight.milli() / 1000 if obj.spec.fair_sharing else 1.0,
    )


def _condition(conditions: Iterable[Condition], kind: str) -> Condition | None:
    for c in conditions:
        if c.type == kind:
            return c
    return None


def _pod_set(ps: api_workload.PodSet) -> PodSet:
    pod = ps.template.spec
    terms: tuple[NodeSelectorTerm, ...] = ()
    node_affinity = pod.affinity.node_affinity if pod.affinity else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )
    if required is not None:
        terms = tuple(
            NodeSelectorTerm(
                tuple(
                    NodeSelectorRequirement(r.key, r.operator, tuple(r.values))
                    for r in term.match_expressions
                )
            )
            for term in required.node_selector_terms
        )
    return PodSet(
        name=ps.name,
        count=ps.count,
        requests={ResourceName(k): q.milli() for k, q in ps.pod_requests().items()},
        min_count=ps.min_count,
        node_selector=dict(pod.node_selector),
        required_affinity=terms,
        tolerations=_tolerations(pod.tolerations),
        topology=topology_request_from_api(ps.topology_request),
    )


def _admission(admission: api_workload.Admission, spec: api_workload.WorkloadSpec) -> Admission:
    counts = {ps.name: ps.count for ps in spec.pod_sets}
    return Admission(
        ClusterQueueName(admission.cluster_queue),
        tuple(
            PodSetAssignment(
                a.name,
                a.count if a.count is not None else counts.get(a.name, 1),
                {ResourceName(r): FlavorName(f) for r, f in a.flavors.items()},
                {ResourceName(r): q.milli() for r, q in a.resource_usage.items()},
                None
                if a.topology_assignment is None
                else topology_assignment_from_api(a.topology_assignment),
            )
            for a in admission.pod_set_assignments
        ),
    )


def workload_from_api(
    obj: api_workload.Workload,
    *,
    priorities: Mapping[str, int] | None = None,
    preempting: bool = False,
    arrived_at: float | None = None,
    pod_sets: tuple[PodSet, ...] | None = None,
    admission: Admission | None = None,
) -> Workload:
    """The engine's view of a Workload; `priorities` maps priority class names to values;
    `arrived_at` is when this cluster got it (the api does not record it). `pod_sets`: the
    ones an earlier conversion made of this very `spec` object (the pod sets are the spec's
    alone, and a workload whose status changes keeps its spec), so they are not made again.
    `admission`: the one an earlier conversion made of this very `status.admission` object,
    with this very spec (an admission is its own and its pod sets' counts alone, and a
    status whose conditions change keeps its admission), so it is not made again either."""
    meta = obj.metadata
    spec = obj.spec
    status = obj.status
    namespace = meta.namespace or "default"
    priority = spec.priority
    if priority is None and spec.priority_class_name and priorities:
        priority = priorities.get(spec.priority_class_name)
    if pod_sets is None:
        pod_sets = tuple(_pod_set(ps) for ps in spec.pod_sets)
    conditions = status.conditions if status else []
    admitted: Admission | None = None
    admitted_at = None
    evicting = False
    pods_ready = False
    lost_at = None
    requeue_count = 0
    requeue_after = None
    requeued_at = None
    accumulated = 0.0
    if status is not None:
        if status.admission is not None:
            admitted = admission or _admission(status.admission, spec)
            reserved = _condition(conditions, api_workload.WorkloadConditionType.QUOTA_RESERVED)
            if reserved is not None and reserved.status == "True":
                admitted_at = _ts(reserved.last_transition_time)
            evicted = _condition(conditions, api_workload.WorkloadConditionType.EVICTED)
            evicting = evicted is not None and evicted.status == "True"
            ready = _condition(conditions, api_workload.WorkloadConditionType.PODS_READY)
            pods_ready = ready is not None and ready.status == "True"
            if ready is not None and ready.status == "False":
                # PodsReady turning false after admission is a loss (recovery timeout);
                # the condition set false at admission itself is not.
                changed = _ts(ready.last_transition_time)
                if changed is not None and admitted_at is not None and changed > admitted_at:
                    lost_at = changed
        else:
            evicted = _condition(conditions, api_workload.WorkloadConditionType.EVICTED)
            if (
                evicted is not None
                and evicted.reason == api_workload.EvictedReason.PODS_READY_TIMEOUT
            ):
                requeued_at = _ts(evicted.last_transition_time)
        if status.requeue_state is not None:
            requeue_count = status.requeue_state.count or 0
            requeue_after = _ts(status.requeue_state.requeue_at)
        accumulated = float(status.accumulated_past_execution_time_seconds or 0)
    return Workload(
        id=WorkloadId(f"{namespace}/{meta.name}"),
        namespace=Namespace(namespace),
        queue_name=spec.queue_name,
        pod_sets=pod_sets,
        created_at=_ts(meta.creation_timestamp) or 0.0,
        priority=priority or 0,
        active=spec.active,
        admission=admitted,
        admitted_at=admitted_at,
        requeued_at=requeued_at,
        evicting=evicting,
        preempting=preempting,
        pods_ready=pods_ready,
        pods_ready_lost_at=lost_at,
        requeue_count=requeue_count,
        requeue_after=requeue_after,
        max_execution_seconds=spec.maximum_execution_time_seconds,
        accumulated_execution_seconds=accumulated,
        arrived_at=arrived_at,
    )


def build_snapshot(
    *,
    flavors: Iterable[api_queues.ResourceFlavor],
    cluster_queues: Iterable[api_queues.ClusterQueue],
    local_queues: Iterable[api_queues.LocalQueue],
    workloads: Iterable[api_workload.Workload],
    cohorts: Iterable[api_queues.Cohort] = (),
    priority_classes: Iterable[api_queues.WorkloadPriorityClass] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    preempting: Iterable[str] = (),
    config: EngineConfig | None = None,
    topologies: Iterable[api_queues.Topology] = (),
) -> Snapshot:
    """A snapshot of the given objects; finished workloads are left out (they hold no quota)."""
    priorities = {p.metadata.name: p.value for p in priority_classes}
    sticky = set(preempting)
    wls: dict[WorkloadId, Workload] = {}
    for obj in workloads:
        finished = _condition(
            obj.status.conditions if obj.status else [],
            api_workload.WorkloadConditionType.FINISHED,
        )
        if finished is not None and finished.status == "True":
            continue
        key = f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}"
        wl = workload_from_api(obj, priorities=priorities, preempting=key in sticky)
        wls[wl.id] = wl
    lqs = [local_queue_from_api(q) for q in local_queues]
    return Snapshot(
        flavors={f.name: f for f in map(flavor_from_api, flavors)},
        cluster_queues={c.name: c for c in map(cluster_queue_from_api, cluster_queues)},
        local_queues={q.key: q for q in lqs},
        workloads=wls,
        cohorts={c.name: c for c in map(cohort_from_api, cohorts)},
        namespaces={Namespace(k): dict(v) for k, v in (namespaces or {}).items()},
        config=config or EngineConfig(),
        topologies={t.name: t for t in map(topology_from_api, topologies)},
    )
