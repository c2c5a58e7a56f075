"""Workload: the unit MultiQ queues, admits and dispatches — pod sets (templates × counts) with
their queue, priority and topology request, and a status that records admission, conditions,
requeueing, the cluster binding and why the workload is still pending on each cluster.

Workloads are made by api.v1alpha1.conversions from user jobs (or written directly). The hub
stores and dispatches them, agents admit them, qctl shows them. Every rule Kueue enforces on a
Workload (kueue.md §1.5, §4.1) is here, addressed by field path.

Called by: api.codec (registry), api.v1alpha1.conversions, api.v1alpha1.messages, hub, agent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.pod import (
    CompactModel,
    PodTemplateSpec,
    ResourceList,
    effective_pod_requests,
    pod_template_errors,
    scale_resources,
)
from api.meta import (
    Condition,
    Int32,
    Object,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_duplicates,
    label_key_errors,
)
from api.quantity import Quantity

__all__ = [
    "MAX_POD_SETS",
    "Admission",
    "ClusterPendingReason",
    "DelayedTopologyRequestState",
    "EvictedReason",
    "FinishedReason",
    "PendingReason",
    "PodSet",
    "PodSetAssignment",
    "PodSetSliceTopologyConstraint",
    "PodSetTopologyRequest",
    "PreemptedReason",
    "PriorityClassSource",
    "ReclaimablePod",
    "RequeueState",
    "RequeuedReason",
    "TopologyAssignment",
    "TopologyAssignmentSlice",
    "TopologyAssignmentSliceLevelValues",
    "Workload",
    "WorkloadConditionType",
    "WorkloadPods",
    "WorkloadSpec",
    "WorkloadStatus",
    "workload_update_errors",
]

DEFAULT_POD_SET_NAME = "main"
MAX_POD_SETS = 18
MAX_CONDITIONS = 16
MAX_NOMINATED_CLUSTERS = 20
MAX_SLICE_CONSTRAINT_LAYERS = 3
# Kueue counts pods in quota under this resource name; users may not request it themselves.
RESERVED_POD_RESOURCE = "pods"
# metav1.Condition reason format.
_REASON_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,:")


class WorkloadConditionType(enum.StrEnum):
    """Condition types of a Workload (Kueue's, so dashboards and habits carry over)."""

    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    PODS_READY = "PodsReady"
    FINISHED = "Finished"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    DEACTIVATION_TARGET = "DeactivationTarget"


class FinishedReason(enum.StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUT_OF_SYNC = "OutOfSync"
    OWNER_NOT_FOUND = "OwnerNotFound"


class EvictedReason(enum.StrEnum):
    PREEMPTED = "Preempted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    ADMISSION_CHECK = "AdmissionCheck"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    DEACTIVATED = "Deactivated"
    NODE_FAILURES = "NodeFailures"
    EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
    FLAVOR_MIGRATION = "FlavorMigration"
    WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
    MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
    REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
    # MultiQ's own: the hub took the workload back from a cluster (lost, fenced, withdrawn).
    CLUSTER_LOST = "ClusterLost"
    WITHDRAWN = "Withdrawn"


class PreemptedReason(enum.StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


class RequeuedReason(enum.StrEnum):
    BACKOFF_FINISHED = "BackoffFinished"
    REACTIVATED = "Reactivated"
    CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
    LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"


class PendingReason(enum.StrEnum):
    """Why a workload has no quota yet (QuotaReserved=False), on the hub or on one cluster."""

    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    WAITING_FOR_QUOTA = "WaitingForQuota"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
    WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
    MISCONFIGURED = "Misconfigured"
    SUSPENDED = "Suspended"
    PENDING_EVALUATION = "PendingEvaluation"
    WAITING_FOR_PODS_READY = "WaitingForPodsReady"
    ADMISSION_GATED = "AdmissionGated"
    # MultiQ's own, per member cluster.
    CLUSTER_NOT_CONNECTED = "ClusterNotConnected"
    CLUSTER_NOT_ELIGIBLE = "ClusterNotEligible"
    OFFER_REJECTED = "OfferRejected"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"


PriorityClassSource = Literal["multiq.dev/workloadpriorityclass", "scheduling.k8s.io/priorityclass"]
DelayedTopologyRequestState = Literal["Pending", "Ready"]


# --- spec -----------------------------------------------------------------------------------


class PodSetSliceTopologyConstraint(CompactModel):
    """One layer of a multi-layer slice request: each `size` pods within one `topology` domain."""

    topology: str
    size: int


class PodSetTopologyRequest(CompactModel):
    """Topology-aware placement wanted by one pod set (filled from pod-template annotations)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None
    pod_set_slice_required_topology_constraints: list[PodSetSliceTopologyConstraint] | None = None

    def level_modes(self) -> list[str]:
        """Which of required/preferred/unconstrained are set (valid: at most one)."""
        return [
            name
            for name, value in (
                ("required", self.required),
                ("preferred", self.preferred),
                ("unconstrained", self.unconstrained),
            )
            if value is not None
        ]


class PodSet(CompactModel):
    """A set of identical pods: one template, `count` replicas, optionally `minCount`."""

    name: str = DEFAULT_POD_SET_NAME
    template: PodTemplateSpec
    count: Int32 = 1
    min_count: Int32 | None = None
    topology_request: PodSetTopologyRequest | None = None

    def pod_requests(self) -> ResourceList:
        """What one pod of this set requests (Kubernetes' effective pod requests)."""
        return effective_pod_requests(self.template.spec)

    def total_requests(self, count: int | None = None) -> ResourceList:
        """`count` (default: the pod set's count) × the effective requests of one pod."""
        return scale_resources(self.pod_requests(), self.count if count is None else count)


class WorkloadSpec(CompactModel):
    pod_sets: list[PodSet] = Field(default_factory=list)
    queue_name: str = ""
    priority_class_name: str | None = None
    priority_class_source: PriorityClassSource | None = None
    # The resolved value of the priority class, fixed when the workload is created.
    priority: Int32 | None = None
    active: bool = True
    maximum_execution_time_seconds: int | None = None


# --- status ---------------------------------------------------------------------------------


class TopologyAssignmentSliceLevelValues(CompactModel):
    """Values of one level for the domains of a slice: `roots` (with common affixes) or one
    `universalValue` for all of them — Kueue's compressed form."""

    prefix: str | None = None
    suffix: str | None = None
    roots: list[str] | None = None
    universal_value: str | None = None


class TopologyAssignmentSlice(CompactModel):
    domain_count: int
    values_per_level: list[TopologyAssignmentSliceLevelValues]
    pod_counts: list[int] | None = None
    universal_pod_count: int | None = None

    def domains(self) -> list[tuple[tuple[str, ...], int]]:
        """Expanded (values per level, pod count) for every domain of the slice."""
        columns: list[list[str]] = []
        for level in self.values_per_level:
            if level.universal_value is not None:
                columns.append([level.universal_value] * self.domain_count)
            else:
                columns.append(
                    [
                        f"{level.prefix or ''}{root}{level.suffix or ''}"
                        for root in level.roots or []
                    ]
                )
        counts = self.pod_counts or [self.universal_pod_count or 0] * self.domain_count
        return [
            (tuple(column[i] for column in columns), counts[i]) for i in range(self.domain_count)
        ]


class TopologyAssignment(CompactModel):
    """Pods per lowest-level topology domain, for the node selectors the agent injects."""

    levels: list[str]
    slices: list[TopologyAssignmentSlice] = Field(default_factory=list)

    def domains(self) -> list[tuple[dict[str, str], int]]:
        """Every assigned domain as (node selector, pod count)."""
        out = []
        for slice_ in self.slices:
            for values, count in slice_.domains():
                out.append((dict(zip(self.levels, values, strict=True)), count))
        return out


class PodSetAssignment(CompactModel):
    name: str = DEFAULT_POD_SET_NAME
    flavors: dict[str, str] = Field(default_factory=dict)
    resource_usage: ResourceList = Field(default_factory=dict)
    count: int | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: DelayedTopologyRequestState | None = None


class Admission(CompactModel):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


class RequeueState(CompactModel):
    count: int | None = None
    requeue_at: datetime | None = None


class ReclaimablePod(CompactModel):
    name: str
    count: int


class ClusterPendingReason(CompactModel):
    """Why the workload is not (yet) admitted on one member cluster, for `qctl describe`."""

    cluster: str
    reason: str
    message: str = ""
    last_transition_time: datetime | None = None


class WorkloadPods(CompactModel):
    """Pods of the workload on its cluster, as its agent last reported them."""

    pending: int = 0
    running: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    nodes: list[str] = Field(default_factory=list)
    """The nodes its pods were scheduled to (the last report that named any)."""


class WorkloadStatus(CompactModel):
    conditions: list[Condition] = Field(default_factory=list)
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: list[ReclaimablePod] = Field(default_factory=list)
    accumulated_past_execution_time_seconds: int | None = None
    # The member cluster the workload is bound to, and the offer generation that bound it.
    cluster_name: str | None = None
    dispatch_generation: int | None = None
    nominated_cluster_names: list[str] = Field(default_factory=list)
    cluster_pending_reasons: list[ClusterPendingReason] = Field(default_factory=list)
    pods: WorkloadPods | None = None


# --- the kind -------------------------------------------------------------------------------


class Workload(Object):
    """Pod sets with queue and priority: what the hub queues and agents admit."""

    KIND: ClassVar[str] = "Workload"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("wl", "kwl", "workloads")
    kind: Literal["Workload"] = "Workload"
    spec: WorkloadSpec
    status: WorkloadStatus | None = None

    # helpers ---------------------------------------------------------------------------------

    def pod_set(self, name: str) -> PodSet | None:
        return next((ps for ps in self.spec.pod_sets if ps.name == name), None)

    def pod_requests(self) -> dict[str, ResourceList]:
        """Effective requests of one pod, per pod set."""
        return {ps.name: ps.pod_requests() for ps in self.spec.pod_sets}

    def total_requests(self) -> dict[str, ResourceList]:
        """count × effective pod requests, per pod set."""
        return {ps.name: ps.total_requests() for ps in self.spec.pod_sets}

    def condition(self, type_: str) -> Condition | None:
        # A plain loop: asked dozens of times per workload (phase, finished, admitted), where
        # a generator costs more than the search.
        st = self.status
        if st is None:
            return None
        for cond in st.conditions:
            if cond.type == type_:
                return cond
        return None

    def is_condition_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    # validation ------------------------------------------------------------------------------

    def semantic_errors(self, *, templates_checked: bool = False) -> list[FieldError]:
        """`templates_checked`: the pod sets' templates were taken from an object already
        checked by its own rules, which include these templates' (`pod_template_errors`): they
        are not checked again (the Workload's own rules on them, and the rest, still are)."""
        errors = super().semantic_errors()
        errors += _spec_errors(Path("spec"), self.spec, templates_checked=templates_checked)
        if self.status is not None:
            errors += _status_errors(Path("status"), self.status, self.spec)
        return errors


def _spec_errors(
    path: Path, spec: WorkloadSpec, *, templates_checked: bool = False
) -> Iterator[FieldError]:
    sets_path = path.child("podSets")
    if not spec.pod_sets:
        yield FieldError.required(sets_path, "must have at least 1 item")
    if len(spec.pod_sets) > MAX_POD_SETS:
        yield FieldError.too_many(sets_path, len(spec.pod_sets), MAX_POD_SETS)
    names = [ps.name for ps in spec.pod_sets]
    for i in find_duplicates(names):
        yield FieldError.duplicate(sets_path.index(i).child("name"), names[i])
    with_min_count = sum(1 for ps in spec.pod_sets if ps.min_count is not None)
    if with_min_count > 1:
        yield FieldError.invalid(sets_path, with_min_count, "at most one podSet can use minCount")
    for i, pod_set in enumerate(spec.pod_sets):
        yield from _pod_set_errors(sets_path.index(i), pod_set, templates_checked)
    yield from _pod_set_group_errors(sets_path, spec.pod_sets)
    if not spec.queue_name:
        yield FieldError.required(path.child("queueName"))
    else:
        yield from dns1123_subdomain_errors(path.child("queueName"), spec.queue_name)
    if spec.priority_class_name is not None:
        yield from dns1123_subdomain_errors(
            path.child("priorityClassName"), spec.priority_class_name
        )
        if spec.priority is None:
            yield FieldError.required(
                path.child("priority"), "priority should not be nil when priorityClassName is set"
            )
    elif spec.priority_class_source is not None:
        yield FieldError.forbidden(
            path.child("priorityClassSource"), "may only be set with priorityClassName"
        )
    if spec.maximum_execution_time_seconds is not None and spec.maximum_execution_time_seconds < 1:
        yield FieldError.invalid(
            path.child("maximumExecutionTimeSeconds"),
            spec.maximum_execution_time_seconds,
            "must be greater than or equal to 1",
        )


def _pod_set_errors(
    path: Path, pod_set: PodSet, templates_checked: bool = False
) -> Iterator[FieldError]:
    yield from dns1123_label_errors(path.child("name"), pod_set.name)
    if pod_set.count < 0:
        yield FieldError.invalid(
            path.child("count"), pod_set.count, "must be greater than or equal to 0"
        )
    if pod_set.min_count is not None:
        if pod_set.min_count < 1:
            yield FieldError.invalid(
                path.child("minCount"), pod_set.min_count, "must be greater than or equal to 1"
            )
        elif pod_set.min_count > pod_set.count:
            yield FieldError.invalid(
                path.child("minCount"),
                pod_set.min_count,
                f"must be less than or equal to count ({pod_set.count})",
            )
    tpath = path.child("template")
    meta = pod_set.template.metadata
    for field_name, value in (
        ("name", meta.name),
        ("generateName", meta.generate_name),
        ("namespace", meta.namespace),
        ("uid", meta.uid),
        ("resourceVersion", meta.resource_version),
        ("finalizers", meta.finalizers),
        ("ownerReferences", meta.owner_references),
    ):
        if value:
            yield FieldError.forbidden(
                tpath.child("metadata", field_name),
                "only labels and annotations may be set in a pod set template's metadata",
            )
    if not templates_checked:
        yield from pod_template_errors(tpath, pod_set.template)
    spec = pod_set.template.spec
    for field, containers in (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ):
        for ci, container in enumerate(containers):
            if RESERVED_POD_RESOURCE in container.resources.requests:
                yield FieldError.invalid(
                    tpath.child("spec", field)
                    .index(ci)
                    .child("resources", "requests")
                    .key(RESERVED_POD_RESOURCE),
                    RESERVED_POD_RESOURCE,
                    "the key is reserved for internal use",
                )
    if pod_set.topology_request is not None:
        yield from _topology_request_errors(
            path.child("topologyRequest"), pod_set.topology_request, pod_set.count
        )


def _topology_request_errors(
    path: Path, request: PodSetTopologyRequest, count: int
) -> Iterator[FieldError]:
    modes = request.level_modes()
    if len(modes) > 1:
        yield FieldError.forbidden(
            path.child(modes[1]),
            f"may not be set together with {modes[0]}: set only one of required, preferred and "
            "unconstrained",
        )
    for field, level in (
        ("required", request.required),
        ("preferred", request.preferred),
        ("podIndexLabel", request.pod_index_label),
        ("subGroupIndexLabel", request.sub_group_index_label),
        ("podSetSliceRequiredTopology", request.pod_set_slice_required_topology),
    ):
        if level is not None:
            yield from label_key_errors(path.child(field), level)
    # Sub-groups (e.g. the Jobs of a JobSet replicated job) need both the label and the count.
    if (request.sub_group_index_label is None) != (request.sub_group_count is None):
        missing = "subGroupCount" if request.sub_group_count is None else "subGroupIndexLabel"
        other = "subGroupIndexLabel" if missing == "subGroupCount" else "subGroupCount"
        yield FieldError.required(path.child(missing), f"must be set when {other} is set")
    if request.sub_group_count is not None and request.sub_group_count < 1:
        yield FieldError.invalid(
            path.child("subGroupCount"),
            request.sub_group_count,
            "must be greater than or equal to 1",
        )
    slice_topology = request.pod_set_slice_required_topology
    slice_size = request.pod_set_slice_size
    if slice_topology is not None and slice_size is None:
        yield FieldError.required(
            path.child("podSetSliceSize"), "must be set when podSetSliceRequiredTopology is set"
        )
    if slice_topology is None and slice_size is not None:
        yield FieldError.forbidden(
            path.child("podSetSliceSize"),
            "may not be set when podSetSliceRequiredTopology is not set",
        )
    if slice_size is not None:
        yield from _slice_size_errors(path.child("podSetSliceSize"), slice_size, count)
    constraints = request.pod_set_slice_required_topology_constraints
    if constraints is not None:
        yield from _slice_constraint_errors(
            path.child("podSetSliceRequiredTopologyConstraints"), request, constraints, count
        )
    group = request.pod_set_group_name
    if group is not None:
        gpath = path.child("podSetGroupName")
        if group.isdigit():
            yield FieldError.invalid(gpath, group, "must not be a number")
        if slice_topology is not None or slice_size is not None:
            yield FieldError.forbidden(
                gpath, "may not be set together with podSetSliceRequiredTopology"
            )
        if request.required is None and request.preferred is None:
            yield FieldError.forbidden(
                gpath, "may not be set when neither required nor preferred is set"
            )


def _slice_size_errors(path: Path, size: int, count: int) -> Iterator[FieldError]:
    if size < 1:
        yield FieldError.invalid(path, size, "must be greater than or equal to 1")
    elif count % size != 0:
        yield FieldError.invalid(path, size, f"must evenly divide the pod set count {count}")


def _slice_constraint_errors(
    path: Path,
    request: PodSetTopologyRequest,
    constraints: Sequence[PodSetSliceTopologyConstraint],
    count: int,
) -> Iterator[FieldError]:
    if not constraints:
        yield FieldError.required(path, "must have at least 1 layer")
    if len(constraints) > MAX_SLICE_CONSTRAINT_LAYERS:
        yield FieldError.too_many(path, len(constraints), MAX_SLICE_CONSTRAINT_LAYERS)
    if (
        request.pod_set_slice_required_topology is not None
        or request.pod_set_slice_size is not None
    ):
        yield FieldError.forbidden(
            path, "may not be set together with podSetSliceRequiredTopology or podSetSliceSize"
        )
    if request.pod_set_group_name is not None:
        yield FieldError.forbidden(path, "may not be set together with podSetGroupName")
    seen: dict[str, int] = {}
    for i, layer in enumerate(constraints):
        lpath = path.index(i)
        yield from label_key_errors(lpath.child("topology"), layer.topology)
        if layer.topology in seen:
            yield FieldError.duplicate(lpath.child("topology"), layer.topology)
        seen.setdefault(layer.topology, i)
        if layer.size < 1:
            yield FieldError.invalid(
                lpath.child("size"), layer.size, "must be greater than or equal to 1"
            )
    if constraints and constraints[0].size >= 1 and count % constraints[0].size != 0:
        yield FieldError.invalid(
            path.index(0).child("size"),
            constraints[0].size,
            f"must evenly divide the pod set count {count}",
        )
    for i in range(len(constraints) - 1):
        outer, inner = constraints[i].size, constraints[i + 1].size
        if inner >= 1 and outer % inner != 0:
            yield FieldError.invalid(
                path.index(i + 1).child("size"),
                inner,
                f"must evenly divide the parent layer size {outer}",
            )


def _pod_set_group_errors(sets_path: Path, pod_sets: Sequence[PodSet]) -> Iterator[FieldError]:
    """Pod sets sharing a podSetGroupName (e.g. leader + workers) are placed as one unit."""
    groups: dict[str, list[int]] = {}
    for i, ps in enumerate(pod_sets):
        if ps.topology_request is not None and ps.topology_request.pod_set_group_name is not None:
            groups.setdefault(ps.topology_request.pod_set_group_name, []).append(i)
    for group, members in groups.items():
        paths = [sets_path.index(i).child("topologyRequest", "podSetGroupName") for i in members]
        if len(members) != 2:
            for p in paths:
                yield FieldError.invalid(
                    p,
                    group,
                    f"can only define groups of exactly 2 pod sets, got: {len(members)} pod set(s)",
                )
            continue
        first, second = (pod_sets[i] for i in members)
        if first.count != 1 and second.count != 1:
            for p in paths:
                yield FieldError.invalid(
                    p,
                    group,
                    "can only define groups where at least one pod set has only 1 replica, got: "
                    f"{first.count} replica(s) and {second.count} replica(s) in the group",
                )
        a, b = first.topology_request, second.topology_request
        assert a is not None and b is not None  # both are group members
        if (a.required, a.preferred) != (b.required, b.preferred):
            for p in paths:
                yield FieldError.invalid(
                    p, group, "pod sets of a group must request the same required/preferred level"
                )


def _status_errors(path: Path, status: WorkloadStatus, spec: WorkloadSpec) -> Iterator[FieldError]:
    cpath = path.child("conditions")
    if len(status.conditions) > MAX_CONDITIONS:
        yield FieldError.too_many(cpath, len(status.conditions), MAX_CONDITIONS)
    types = [c.type for c in status.conditions]
    for i in find_duplicates(types):
        yield FieldError.duplicate(cpath.index(i).child("type"), types[i])
    for i, cond in enumerate(status.conditions):
        yield from label_key_errors(cpath.index(i).child("type"), cond.type)
        if cond.reason and not _is_condition_reason(cond.reason):
            yield FieldError.invalid(
                cpath.index(i).child("reason"),
                cond.reason,
                "a condition reason must start with alphabetic character, optionally followed by "
                "a string of alphanumeric characters or '_,:', and must end with an alphanumeric "
                "character or '_'",
            )
    by_name = {ps.name: ps for ps in spec.pod_sets}
    if status.admission is not None:
        yield from _admission_errors(path.child("admission"), status.admission, spec, by_name)
    if status.requeue_state is not None and (status.requeue_state.count or 0) < 0:
        yield FieldError.invalid(
            path.child("requeueState", "count"),
            status.requeue_state.count,
            "must be greater than or equal to 0",
        )
    for i, rp in enumerate(status.reclaimable_pods):
        rpath = path.child("reclaimablePods").index(i)
        known = by_name.get(rp.name)
        if known is None:
            yield FieldError.unsupported(rpath.child("name"), rp.name, list(by_name))
        elif not 0 <= rp.count <= known.count:
            yield FieldError.invalid(
                rpath.child("count"), rp.count, f"should be less or equal to {known.count}"
            )
    if status.accumulated_past_execution_time_seconds is not None and (
        status.accumulated_past_execution_time_seconds < 0
    ):
        yield FieldError.invalid(
            path.child("accumulatedPastExecutionTimeSeconds"),
            status.accumulated_past_execution_time_seconds,
            "must be greater than or equal to 0",
        )
    if status.cluster_name is not None and status.nominated_cluster_names:
        yield FieldError.forbidden(
            path.child("nominatedClusterNames"),
            "clusterName and nominatedClusterNames are mutually exclusive",
        )
    if len(status.nominated_cluster_names) > MAX_NOMINATED_CLUSTERS:
        yield FieldError.too_many(
            path.child("nominatedClusterNames"),
            len(status.nominated_cluster_names),
            MAX_NOMINATED_CLUSTERS,
        )
    if status.dispatch_generation is not None and status.dispatch_generation < 0:
        yield FieldError.invalid(
            path.child("dispatchGeneration"),
            status.dispatch_generation,
            "must be greater than or equal to 0",
        )
    clusters = [r.cluster for r in status.cluster_pending_reasons]
    for i in find_duplicates(clusters):
        yield FieldError.duplicate(
            path.child("clusterPendingReasons").index(i).child("cluster"), clusters[i]
        )


def _admission_errors(
    path: Path, admission: Admission, spec: WorkloadSpec, by_name: dict[str, PodSet]
) -> Iterator[FieldError]:
    if not admission.cluster_queue:
        yield FieldError.required(path.child("clusterQueue"))
    apath = path.child("podSetAssignments")
    if len(admission.pod_set_assignments) != len(spec.pod_sets):
        yield FieldError.invalid(
            apath,
            len(admission.pod_set_assignments),
            "must have the same number of podSetAssignments as spec.podSets "
            f"({len(spec.pod_sets)})",
        )
    for i, psa in enumerate(admission.pod_set_assignments):
        ppath = apath.index(i)
        pod_set = by_name.get(psa.name)
        if pod_set is None:
            yield FieldError.not_found(ppath.child("name"), psa.name)
        count = psa.count if psa.count is not None else (pod_set.count if pod_set else 0)
        if psa.count is not None and psa.count < 0:
            yield FieldError.invalid(
                ppath.child("count"), psa.count, "must be greater than or equal to 0"
            )
        if count > 0:
            for resource, usage in psa.resource_usage.items():
                if _resource_value(resource, usage) % count != 0:
                    yield FieldError.invalid(
                        ppath.child("resourceUsage").key(resource),
                        usage.canonical(),
                        f"is not a multiple of {count}",
                    )
        if psa.topology_assignment is not None:
            yield from _topology_assignment_errors(
                ppath.child("topologyAssignment"), psa.topology_assignment
            )


def _resource_value(resource: str, usage: Quantity) -> int:
    """The integer Kueue accounts a resource in: milli-cores for CPU, whole units otherwise."""
    return usage.milli() if resource == "cpu" else usage.units()


def _topology_assignment_errors(path: Path, assignment: TopologyAssignment) -> Iterator[FieldError]:
    if not assignment.levels:
        yield FieldError.required(path.child("levels"), "must have at least 1 item")
    for i, slice_ in enumerate(assignment.slices):
        spath = path.child("slices").index(i)
        if slice_.domain_count < 1:
            yield FieldError.invalid(
                spath.child("domainCount"),
                slice_.domain_count,
                "must be greater than or equal to 1",
            )
        if len(slice_.values_per_level) != len(assignment.levels):
            yield FieldError.invalid(
                spath.child("valuesPerLevel"),
                len(slice_.values_per_level),
                "valuesPerLevel must have the same length as the number of levels in this "
                "TopologyAssignment",
            )
        if (slice_.pod_counts is None) == (slice_.universal_pod_count is None):
            yield FieldError.invalid(
                spath, "", "Exactly one of podCounts, universalPodCount must be set"
            )
        if slice_.pod_counts is not None and len(slice_.pod_counts) != slice_.domain_count:
            yield FieldError.invalid(
                spath.child("podCounts"),
                len(slice_.pod_counts),
                "podCounts must have length equal to domainCount",
            )
        for li, level in enumerate(slice_.values_per_level):
            lpath = spath.child("valuesPerLevel").index(li)
            if (level.roots is None) == (level.universal_value is None):
                yield FieldError.invalid(
                    lpath, "", "Exactly one of roots, universalValue must be set"
                )
            if level.universal_value is not None and (level.prefix or level.suffix):
                yield FieldError.invalid(
                    lpath, "", "universalValue cannot be set together with prefix or suffix"
                )
            if level.roots is not None and len(level.roots) != slice_.domain_count:
                yield FieldError.invalid(
                    lpath.child("roots"),
                    len(level.roots),
                    "roots, if set, must have length equal to domainCount of this "
                    "TopologyAssignmentSlice",
                )


def _is_condition_reason(reason: str) -> bool:
    return (
        reason[0].isascii()
        and reason[0].isalpha()
        and all(ch in _REASON_CHARS for ch in reason)
        and (reason[-1].isalnum() or reason[-1] == "_")
    )


# --- updates --------------------------------------------------------------------------------

_IMMUTABLE = "field is immutable"


def workload_update_errors(new: Workload, old: Workload) -> list[FieldError]:
    """Kueue's update rules: what may not change once quota is reserved or a cluster is bound.

    The hub calls this on every write of an existing Workload, after `new.semantic_errors()`.
    """
    errors: list[FieldError] = []
    reserved = old.is_condition_true(WorkloadConditionType.QUOTA_RESERVED)
    spec = Path("spec")
    if reserved:
        if new.spec.pod_sets != old.spec.pod_sets:
            errors.append(
                FieldError.invalid(
                    spec.child("podSets"), "", f"{_IMMUTABLE} while quota is reserved"
                )
            )
        for field_name, before, after in (
            ("queueName", old.spec.queue_name, new.spec.queue_name),
            ("priorityClassName", old.spec.priority_class_name, new.spec.priority_class_name),
            ("priorityClassSource", old.spec.priority_class_source, new.spec.priority_class_source),
        ):
            if before != after:
                errors.append(
                    FieldError.invalid(
                        spec.child(field_name), after or "", f"{_IMMUTABLE} while quota is reserved"
                    )
                )
    old_status = old.status or WorkloadStatus()
    new_status = new.status or WorkloadStatus()
    status = Path("status")
    if (
        old_status.cluster_name is not None
        and new_status.cluster_name is not None
        and old_status.cluster_name != new_status.cluster_name
    ):
        errors.append(
            FieldError.invalid(
                status.child("clusterName"),
                new_status.cluster_name,
                "clusterName is immutable once set",
            )
        )
    if (
        old_status.admission is not None
        and new_status.admission is not None
        and old_status.admission != new_status.admission
    ):
        # Admission may be set (quota reserved) or cleared (evicted), never edited in place.
        errors.append(FieldError.invalid(status.child("admission"), "", _IMMUTABLE))
    if reserved and new.is_condition_true(WorkloadConditionType.QUOTA_RESERVED):
        before_counts = {rp.name: rp.count for rp in old_status.reclaimable_pods}
        for i, rp in enumerate(new_status.reclaimable_pods):
            if rp.count < before_counts.get(rp.name, 0):
                errors.append(
                    FieldError.invalid(
                        status.child("reclaimablePods").index(i).child("count"),
                        rp.count,
                        f"cannot be less than {before_counts[rp.name]}",
                    )
                )
    return errors
