"""Quota and queueing kinds: ResourceFlavor, ClusterQueue, LocalQueue, Cohort,
WorkloadPriorityClass and Topology — Kueue's v1beta2 fields (minus admission checks), with
every rule Kueue enforces on them, expressed as field-addressed errors.

The hub stores these and pushes them to agents as config; the agent's admission engine reads
them through its snapshot builder. Called by: api.codec (registry), hub, agent, qctl.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from api.errors import ErrorType, FieldError, Path
from api.k8s.core import LabelSelector, Taint, Toleration
from api.meta import (
    Condition,
    Int32,
    Object,
    StrictModel,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
)
from api.quantity import Quantity

__all__ = [
    "AdmissionFairSharingStatus",
    "AdmissionScope",
    "BorrowWithinCohort",
    "ClusterQueue",
    "ClusterQueuePreemption",
    "ClusterQueueSpec",
    "ClusterQueueStatus",
    "Cohort",
    "CohortSpec",
    "FairSharing",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorUsage",
    "LocalQueue",
    "LocalQueueClusterUsage",
    "LocalQueueFairSharingStatus",
    "LocalQueueSpec",
    "LocalQueueStatus",
    "ResourceFlavor",
    "ResourceFlavorSpec",
    "ResourceGroup",
    "ResourceQuota",
    "ResourceUsage",
    "StopPolicy",
    "Topology",
    "TopologyLevel",
    "TopologySpec",
    "WorkloadPriorityClass",
]

HOSTNAME_LABEL = "kubernetes.io/hostname"

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]


def _max_items(path: Path, items: Sequence[object], limit: int) -> Iterator[FieldError]:
    if len(items) > limit:
        yield FieldError.too_many(path, len(items), limit)


def _non_negative(path: Path, q: Quantity | None) -> Iterator[FieldError]:
    if q is not None and q.is_negative():
        yield FieldError.invalid(path, q.canonical(), "must be greater than or equal to 0")


# --- ResourceFlavor -------------------------------------------------------------------------


class ResourceFlavorSpec(StrictModel):
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_name: str | None = None


class ResourceFlavor(Object):
    """A kind of hardware: which nodes (labels, taints) and what admitted pods get injected."""

    KIND: ClassVar[str] = "ResourceFlavor"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("rf", "flavor", "flavors")
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        s = self.spec
        errors += _max_items(spec.child("nodeLabels"), list(s.node_labels), 8)
        for key, value in s.node_labels.items():
            errors += label_key_errors(spec.child("nodeLabels"), key)
            errors += label_value_errors(spec.child("nodeLabels").key(key), value)
        errors += _max_items(spec.child("nodeTaints"), s.node_taints, 8)
        for i, taint in enumerate(s.node_taints):
            errors += taint.errors(spec.child("nodeTaints").index(i))
        errors += _max_items(spec.child("tolerations"), s.tolerations, 8)
        for i, tol in enumerate(s.tolerations):
            errors += tol.errors(spec.child("tolerations").index(i))
        if s.topology_name is not None:
            errors += dns1123_subdomain_errors(spec.child("topologyName"), s.topology_name)
            if not s.node_labels:
                errors.append(
                    FieldError.required(
                        spec.child("nodeLabels"),
                        "at least one nodeLabel is required when topologyName is set",
                    )
                )
        return errors


# --- quota shared by ClusterQueue and Cohort ------------------------------------------------


class ResourceQuota(StrictModel):
    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(StrictModel):
    name: str
    resources: list[ResourceQuota] = Field(default_factory=list)


class ResourceGroup(StrictModel):
    covered_resources: list[str]
    flavors: list[FlavorQuotas]


def resource_group_errors(
    path: Path, groups: Sequence[ResourceGroup], *, has_parent: bool, owner: str
) -> Iterator[FieldError]:
    """Kueue's resourceGroups rules, shared by ClusterQueue (parent = cohort) and Cohort."""
    yield from _max_items(path, groups, 16)
    total_flavors = sum(len(g.flavors) for g in groups)
    if total_flavors > 256:
        yield FieldError.too_many(path, total_flavors, 256)
    seen_resources: dict[str, int] = {}
    seen_flavors: dict[str, int] = {}
    for gi, group in enumerate(groups):
        gpath = path.index(gi)
        covered_path = gpath.child("coveredResources")
        yield from _max_items(covered_path, group.covered_resources, 64)
        if not group.covered_resources:
            yield FieldError.required(covered_path, "must list at least one resource")
        for ri, res in enumerate(group.covered_resources):
            yield from label_key_errors(covered_path.index(ri), res)
            if res in seen_resources:
                where = seen_resources[res]
                detail = "in this group" if where == gi else f"in resourceGroups[{where}]"
                yield FieldError(
                    ErrorType.DUPLICATE,
                    str(covered_path.index(ri)),
                    f"a resource belongs to one resource group; already covered {detail}",
                    res,
                    True,
                )
            else:
                seen_resources[res] = gi
        flavors_path = gpath.child("flavors")
        yield from _max_items(flavors_path, group.flavors, 64)
        if not group.flavors:
            yield FieldError.required(flavors_path, "must list at least one flavor")
        for fi, flavor in enumerate(group.flavors):
            fpath = flavors_path.index(fi)
            yield from dns1123_subdomain_errors(fpath.child("name"), flavor.name)
            if flavor.name in seen_flavors:
                yield FieldError(
                    ErrorType.DUPLICATE,
                    str(fpath.child("name")),
                    "a flavor belongs to one resource group",
                    flavor.name,
                    True,
                )
            else:
                seen_flavors[flavor.name] = gi
            yield from _flavor_quota_errors(fpath, flavor, group, has_parent, owner)


def _flavor_quota_errors(
    fpath: Path, flavor: FlavorQuotas, group: ResourceGroup, has_parent: bool, owner: str
) -> Iterator[FieldError]:
    rpath = fpath.child("resources")
    names = [r.name for r in flavor.resources]
    if names != group.covered_resources:
        if sorted(set(names)) != sorted(set(group.covered_resources)) or len(names) != len(
            group.covered_resources
        ):
            missing = [r for r in group.covered_resources if r not in names]
            extra = [r for r in names if r not in group.covered_resources]
            detail = "must list exactly the group's coveredResources"
            if missing:
                detail += f"; missing {', '.join(missing)}"
            if extra:
                detail += f"; not covered: {', '.join(extra)}"
            yield FieldError.invalid(rpath, ",".join(names), detail)
        else:
            yield FieldError.invalid(
                rpath, ",".join(names), "must list the resources in the order of coveredResources"
            )
    for ri, quota in enumerate(flavor.resources):
        qpath = rpath.index(ri)
        yield from _non_negative(qpath.child("nominalQuota"), quota.nominal_quota)
        yield from _non_negative(qpath.child("borrowingLimit"), quota.borrowing_limit)
        yield from _non_negative(qpath.child("lendingLimit"), quota.lending_limit)
        parent = "cohort" if owner == "ClusterQueue" else "parent"
        if quota.borrowing_limit is not None and not has_parent:
            yield FieldError.forbidden(
                qpath.child("borrowingLimit"), f"must be nil when {parent} is empty"
            )
        if quota.lending_limit is not None:
            if not has_parent:
                yield FieldError.forbidden(
                    qpath.child("lendingLimit"), f"must be nil when {parent} is empty"
                )
            elif owner == "ClusterQueue" and quota.lending_limit > quota.nominal_quota:
                yield FieldError.invalid(
                    qpath.child("lendingLimit"),
                    quota.lending_limit.canonical(),
                    "must be less than or equal to the nominalQuota",
                )


class FairSharing(StrictModel):
    """Share weight of a queue or cohort among its siblings (0 = only what is left over)."""

    weight: Quantity = Field(default_factory=lambda: Quantity(1))


def _fair_sharing_errors(path: Path, fs: FairSharing | None) -> Iterator[FieldError]:
    if fs is not None:
        yield from _non_negative(path.child("weight"), fs.weight)


# --- ClusterQueue ---------------------------------------------------------------------------


class BorrowWithinCohort(StrictModel):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(StrictModel):
    """Which admitted workloads a pending one may preempt (Kueue's policies), and for how long
    a newly admitted workload of this queue is protected from preemption.

    `minAdmitSeconds` (beyond Kueue, in the spirit of its KEP-8522 and KEP-9876 and of Slurm's
    PreemptExemptTime): a workload admitted in this queue less than this many seconds ago is
    no victim — not for reclaim by the cohort, nor for preemptors of this queue queued after
    its admission (one queued earlier, which it passed in the queue's order, may take the
    room back). A workload already being evicted is never protected. 0 (the default)
    protects nothing.
    """

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"
    min_admit_seconds: int = 0


class FlavorFungibility(StrictModel):
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = "MayStopSearch"
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = "TryNextFlavor"
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


class AdmissionScope(StrictModel):
    admission_mode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


class ClusterQueueSpec(StrictModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    cohort_name: str | None = None
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    # None selects no namespace; {} selects all (Kueue's convention).
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption = Field(default_factory=ClusterQueuePreemption)
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    fair_sharing: FairSharing | None = None
    stop_policy: StopPolicy = "None"
    admission_scope: AdmissionScope | None = None


class ResourceUsage(StrictModel):
    name: str
    total: Quantity = Field(default_factory=lambda: Quantity(0))
    borrowed: Quantity = Field(default_factory=lambda: Quantity(0))


class FlavorUsage(StrictModel):
    name: str
    resources: list[ResourceUsage] = Field(default_factory=list)


class FairSharingStatus(StrictModel):
    weighted_share: int = 0


class ClusterQueueStatus(StrictModel):
    conditions: list[Condition] = Field(default_factory=list)
    flavors_reservation: list[FlavorUsage] = Field(default_factory=list)
    flavors_usage: list[FlavorUsage] = Field(default_factory=list)
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(Object):
    """Quota per (flavor, resource), queueing and preemption policy, cohort membership."""

    KIND: ClassVar[str] = "ClusterQueue"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cq", "clusterqueues")
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        s = self.spec
        if s.cohort_name is not None:
            errors += dns1123_subdomain_errors(spec.child("cohortName"), s.cohort_name)
        errors += resource_group_errors(
            spec.child("resourceGroups"),
            s.resource_groups,
            has_parent=bool(s.cohort_name),
            owner="ClusterQueue",
        )
        if s.namespace_selector is not None:
            errors += s.namespace_selector.errors(spec.child("namespaceSelector"))
        p = s.preemption
        ppath = spec.child("preemption")
        bwc = p.borrow_within_cohort
        if bwc is not None and bwc.policy != "Never" and p.reclaim_within_cohort == "Never":
            errors.append(
                FieldError.invalid(
                    ppath.child("borrowWithinCohort", "policy"),
                    bwc.policy,
                    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                )
            )
        if bwc is not None and bwc.max_priority_threshold is not None and bwc.policy == "Never":
            errors.append(
                FieldError.forbidden(
                    ppath.child("borrowWithinCohort", "maxPriorityThreshold"),
                    "may only be set when borrowWithinCohort.policy is LowerPriority",
                )
            )
        if p.min_admit_seconds < 0:
            errors.append(
                FieldError.invalid(
                    ppath.child("minAdmitSeconds"),
                    p.min_admit_seconds,
                    "must be greater than or equal to 0",
                )
            )
        ff = s.flavor_fungibility
        if ff.preference is not None and not (
            ff.when_can_borrow == "TryNextFlavor" and ff.when_can_preempt == "TryNextFlavor"
        ):
            errors.append(
                FieldError.forbidden(
                    spec.child("flavorFungibility", "preference"),
                    "only takes effect when whenCanBorrow and whenCanPreempt are both "
                    "TryNextFlavor",
                )
            )
        errors += _fair_sharing_errors(spec.child("fairSharing"), s.fair_sharing)
        return errors


# --- LocalQueue -----------------------------------------------------------------------------


class LocalQueueSpec(StrictModel):
    cluster_queue: str
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None


class LocalQueueClusterUsage(StrictModel):
    """One member cluster's decayed usage of the local queue (its agent samples it)."""

    cluster: str
    consumed_resources: dict[str, Quantity] = Field(default_factory=dict)
    last_update: datetime | None = None


class AdmissionFairSharingStatus(StrictModel):
    """Kueue's admission fair sharing status: the local queue's decayed consumed resources,
    summed over the member clusters (each cluster orders its own cluster queues by its own
    part, in `clusters`), as of the latest `lastUpdate` among them."""

    consumed_resources: dict[str, Quantity] = Field(default_factory=dict)
    last_update: datetime | None = None
    clusters: list[LocalQueueClusterUsage] = Field(default_factory=list)


class LocalQueueFairSharingStatus(StrictModel):
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None


class LocalQueueStatus(StrictModel):
    conditions: list[Condition] = Field(default_factory=list)
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    flavors_reservation: list[FlavorUsage] = Field(default_factory=list)
    flavors_usage: list[FlavorUsage] = Field(default_factory=list)
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(Object):
    """A namespace's entrance to one ClusterQueue (the name users put on their jobs)."""

    KIND: ClassVar[str] = "LocalQueue"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("lq", "queue", "localqueues")
    kind: Literal["LocalQueue"] = "LocalQueue"
    spec: LocalQueueSpec
    status: LocalQueueStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        if not self.spec.cluster_queue:
            errors.append(FieldError.required(spec.child("clusterQueue")))
        else:
            errors += dns1123_subdomain_errors(spec.child("clusterQueue"), self.spec.cluster_queue)
        errors += _fair_sharing_errors(spec.child("fairSharing"), self.spec.fair_sharing)
        return errors


# --- Cohort ---------------------------------------------------------------------------------


class CohortSpec(StrictModel):
    parent_name: str | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing | None = None


class CohortStatus(StrictModel):
    conditions: list[Condition] = Field(default_factory=list)
    fair_sharing: FairSharingStatus | None = None


class Cohort(Object):
    """A node of the cohort tree: quota of its own, shared with its subtree; weight vs siblings."""

    KIND: ClassVar[str] = "Cohort"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("co", "cohorts")
    kind: Literal["Cohort"] = "Cohort"
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        parent = self.spec.parent_name
        if parent is not None:
            errors += dns1123_subdomain_errors(spec.child("parentName"), parent)
            if parent == self.metadata.name:
                errors.append(
                    FieldError.invalid(
                        spec.child("parentName"), parent, "a cohort cannot be its own parent"
                    )
                )
        errors += resource_group_errors(
            spec.child("resourceGroups"),
            self.spec.resource_groups,
            has_parent=bool(parent),
            owner="Cohort",
        )
        errors += _fair_sharing_errors(spec.child("fairSharing"), self.spec.fair_sharing)
        return errors


# --- WorkloadPriorityClass ------------------------------------------------------------------


class WorkloadPriorityClass(Object):
    """A named queueing priority, decoupled from pod priority. Label: multiq.dev/priority-class."""

    KIND: ClassVar[str] = "WorkloadPriorityClass"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("wpc", "priorityclass")
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    value: Int32
    description: str = ""

    def semantic_errors(self) -> list[FieldError]:
        return super().semantic_errors()  # (`value` is an Int32: its schema bounds it)


# --- Topology -------------------------------------------------------------------------------


class TopologyLevel(StrictModel):
    node_label: str


class TopologySpec(StrictModel):
    levels: list[TopologyLevel]


class Topology(Object):
    """Topology levels from widest to narrowest, e.g. block → rack → hostname."""

    KIND: ClassVar[str] = "Topology"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("topo", "topologies")
    kind: Literal["Topology"] = "Topology"
    spec: TopologySpec

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        lpath = Path("spec", "levels")
        levels = self.spec.levels
        if not levels:
            errors.append(FieldError.required(lpath, "must have at least 1 item"))
        errors += _max_items(lpath, levels, 16)
        seen: set[str] = set()
        for i, level in enumerate(levels):
            path = lpath.index(i).child("nodeLabel")
            errors += label_key_errors(path, level.node_label)
            if level.node_label in seen:
                errors.append(FieldError.duplicate(path, level.node_label))
            seen.add(level.node_label)
            if level.node_label == HOSTNAME_LABEL and i != len(levels) - 1:
                errors.append(
                    FieldError.invalid(
                        path,
                        level.node_label,
                        "kubernetes.io/hostname can only be used as the lowest topology level",
                    )
                )
        return errors
