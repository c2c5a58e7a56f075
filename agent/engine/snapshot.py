"""The engine's input: a frozen picture of one member cluster's queues and workloads.

Owns every type the admission cycle reads: resource flavors, cluster queues with their
resource groups and policies, the cohort tree, local queues, workloads (pending and admitted,
with their timestamps), namespaces' labels, the engine configuration, and for topology-aware
scheduling the Topology objects, the nodes (labels, allocatable, what their pods use) and
what each pod set asks of them. Nothing here knows about pydantic, Kubernetes objects or the
clock: the agent's inventory cache (or `from_api.py`, or the tests' builders) builds a
`Snapshot`, and `cycle.schedule` reads it.

Amounts are exact integers in milli-units keyed by resource name (`cpu: 1500` is 1.5 CPU,
`pods: 3000` is three pods); times are seconds on the caller's clock (floats), passed in
as `now`, never read here.

Mappings are typed `Mapping` so callers may pass a read-only view of a structure they keep
up to date between cycles (the benchmark does, to avoid copying 50,000 workloads per cycle);
the engine never mutates them.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NewType, TypeVar, cast

__all__ = [
    "Admission",
    "AdmissionFairSharing",
    "BorrowWithinCohort",
    "ClusterQueue",
    "ClusterQueueName",
    "Cohort",
    "CohortName",
    "EngineConfig",
    "FairSharing",
    "FairSharingStrategy",
    "FlavorFungibility",
    "FlavorName",
    "FlavorQuotas",
    "FlavorResource",
    "FungibilityPolicy",
    "FungibilityPreference",
    "LabelSelector",
    "LocalQueue",
    "LocalQueueKey",
    "Namespace",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OrderKey",
    "PodSet",
    "PodSetAssignment",
    "PreemptionConfig",
    "PreemptionPolicy",
    "QueueingStrategy",
    "RequeueTimestamp",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceName",
    "ResourceQuota",
    "Snapshot",
    "StopPolicy",
    "Taint",
    "Toleration",
    "Topology",
    "TopologyAssignment",
    "TopologyMode",
    "TopologyRequest",
    "UndeclaredResources",
    "WaitForPodsReady",
    "Workload",
    "WorkloadId",
]

FlavorName = NewType("FlavorName", str)
ResourceName = NewType("ResourceName", str)
ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
Namespace = NewType("Namespace", str)
LocalQueueKey = NewType("LocalQueueKey", str)
"""`namespace/name` of a local queue."""
WorkloadId = NewType("WorkloadId", str)
"""Unique workload key (the shell uses `namespace/name` or the UID)."""

OrderKey = tuple[bool, float, int, float, str]
"""`Workload.order_key`: the order of waiting workloads within one cluster queue."""

FlavorResource = tuple[FlavorName, ResourceName]
"""One quota cell: a resource in a flavor."""

PODS = ResourceName("pods")
"""The special resource counting pods (1000 milli per pod), usable as quota."""


@functools.lru_cache(maxsize=1 << 16)
def lq_key(namespace: str, name: str) -> LocalQueueKey:
    # One key object per local queue (a cache, not sys.intern: the core imports no sys): the
    # workloads of one local queue share it, so the cycle's per-workload gate lookup matches
    # it by identity instead of comparing a string of each (50,000 of them in
    # bench.engine_throughput, read cold).
    return LocalQueueKey(f"{namespace}/{name}")


# --------------------------------------------------------------------------------------------
# policies


class QueueingStrategy(enum.StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class PreemptionPolicy(enum.StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


class FungibilityPolicy(enum.StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(enum.StrEnum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(enum.StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class UndeclaredResources(enum.StrEnum):
    """What a request for a resource the cluster queue does not cover means."""

    BLOCK = "BlockUndeclared"
    IGNORE = "IgnoreUndeclared"


class RequeueTimestamp(enum.StrEnum):
    """Which time orders a workload requeued after a pods-ready eviction."""

    EVICTION = "Eviction"
    CREATION = "Creation"


# --------------------------------------------------------------------------------------------
# flavors and scheduling constraints


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist (Gt/Lt treated as unmatched)
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case "In":
                return present and labels[self.key] in self.values
            case "NotIn":
                return not present or labels[self.key] not in self.values
            case "Exists":
                return present
            case "DoesNotExist":
                return not present
            case _:
                return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold (a term of required node affinity)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: FlavorName
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    """The `Topology` its nodes are placed by (topology-aware scheduling), or None."""


# --------------------------------------------------------------------------------------------
# topology: the nodes, their levels, and what a pod set asks of them


@dataclass(frozen=True, slots=True)
class Topology:
    """Levels of a topology, widest first (block → rack → host), each a node label."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Node:
    """A node as topology-aware scheduling sees it.

    `usage` is what the pods bound to it request (unfinished pods, milli-units), except the
    pods of workloads whose admission in the snapshot carries a topology assignment: the
    engine counts those by their assignment, whether their pods run yet or not (assumed),
    so the shell leaves them out here and nothing is counted twice."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[ResourceName, int]
    usage: Mapping[ResourceName, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True
    """Ready and not cordoned; other nodes hold no topology placement."""


class TopologyMode(enum.StrEnum):
    REQUIRED = "Required"
    """All pods in one domain of the level, or wait."""
    PREFERRED = "Preferred"
    """One domain of the level if one fits; else the fewest domains one level up, and so on."""
    UNCONSTRAINED = "Unconstrained"
    """Any nodes of the flavor's topology, filled fullest first (least fragmentation)."""


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """What one pod set asks of the topology (Kueue's pod-template annotations)."""

    mode: TopologyMode
    level: str | None = None
    """The node label of the level (None for unconstrained: the lowest level)."""
    slice_level: str | None = None
    slice_size: int | None = None
    """With `slice_level`: every `slice_size` pods (in index order) in one domain of it."""
    group: str | None = None
    """Pod sets of one workload with the same group share one domain (leader + workers)."""


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go: pod counts per domain of the topology's lowest level."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]
    """(values per level, pod count) for every domain used, in the order they were chosen."""


# --------------------------------------------------------------------------------------------
# quota


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota for one resource in one flavor. None limits mean "unlimited" / "lend all"."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: FlavorName
    resources: Mapping[ResourceName, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[ResourceName, ...]
    flavors: tuple[FlavorQuotas, ...]  # in preference order


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    policy: PreemptionPolicy = PreemptionPolicy.NEVER  # Never | LowerPriority
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort = field(default_factory=BorrowWithinCohort)
    min_admit_seconds: float = 0.0
    """Preemption protection: a workload of this queue admitted less than this long before
    `now` is no victim for reclaim by the cohort, nor for preemptors of this queue queued
    after its admission (one queued earlier, which it passed in the queue's order, may take
    the room back). A workload being evicted is never protected. 0 is Kueue's behaviour."""


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FungibilityPreference = FungibilityPreference.BORROWING_OVER_PREEMPTION


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: ClusterQueueName
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: CohortName | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = field(default_factory=LabelSelector)
    """None selects no namespace; the empty selector selects all."""
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: int = 1000
    """milli; divides its dominant resource share under fair sharing (`fair_sharing`)."""
    admission_fair_sharing: bool = False
    """`admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: its waiting workloads
    are ordered by their local queue's decayed usage first (`Workload.queue_usage`)."""


@dataclass(frozen=True, slots=True)
class Cohort:
    name: CohortName
    parent: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: int = 1000


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: Namespace
    name: str
    cluster_queue: ClusterQueueName
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: float = 1.0
    """Divides its usage score under admission fair sharing (≤ 0: always last)."""

    @property
    def key(self) -> LocalQueueKey:
        return lq_key(self.namespace, self.name)


# --------------------------------------------------------------------------------------------
# workloads


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[ResourceName, int]
    """Per-pod requests in milli-units."""
    min_count: int | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[NodeSelectorTerm, ...] = ()
    """Terms ORed together; empty means no required affinity."""
    tolerations: tuple[Toleration, ...] = ()
    topology: TopologyRequest | None = None
    """Topology-aware placement asked for, or None (implicit for TAS-only cluster queues)."""
    asked: tuple[ResourceName, ...] = field(init=False, repr=False, compare=False)
    """The resources it asks a positive amount of, in request order: flavor assignment
    groups them by resource group once per queue and cycle (`flavors.QueueFlavors.grouped`)."""
    shape: tuple[object, ...] = field(init=False, repr=False, compare=False)
    """Its part of `Workload.shape`: made once per pod set, which the conversions of one
    workload share while its spec stays (a status change converts the workload again)."""

    def __post_init__(self) -> None:
        asked = tuple(res for res, amount in self.requests.items() if amount > 0)
        object.__setattr__(self, "asked", _one_of_each(asked))
        object.__setattr__(
            self,
            "shape",
            (
                self.count,
                self.min_count,
                tuple(sorted(self.requests.items())),
                tuple(sorted(self.node_selector.items())),
                self.required_affinity,
                self.tolerations,
                self.topology,
            ),
        )


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: Mapping[ResourceName, FlavorName]
    usage: Mapping[ResourceName, int]
    """Total (count × per-pod) milli-units per resource, including `pods` when quota'd."""
    topology: TopologyAssignment | None = None
    """Where the pods go, when the flavor has a topology."""


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: ClusterQueueName
    pod_sets: tuple[PodSetAssignment, ...]
    total: Mapping[FlavorResource, int] = field(init=False, repr=False, compare=False)
    """Usage per flavor-resource, summed once (every cycle reads it for every admission)."""

    def __post_init__(self) -> None:
        total: dict[FlavorResource, int] = {}
        for ps in self.pod_sets:
            for res, amount in ps.usage.items():
                fr = (ps.flavors[res], res)
                total[fr] = total.get(fr, 0) + amount
        object.__setattr__(self, "total", total)

    def usage(self) -> dict[FlavorResource, int]:
        return dict(self.total)


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload as the engine sees it, pending (admission None) or admitted."""

    id: WorkloadId
    namespace: Namespace
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    created_at: float
    priority: int = 0
    active: bool = True
    admission: Admission | None = None
    admitted_at: float | None = None
    """When quota was (last) reserved; orders preemption candidates (newest first)."""
    requeued_at: float | None = None
    """Queue-order timestamp override after an eviction (RequeueTimestamp.EVICTION)."""
    evicting: bool = False
    """Admitted, but an eviction was issued and the pods are still stopping."""
    preempting: bool = False
    """Issued preemptions in an earlier cycle: sticky at the head of its queue."""
    pods_ready: bool = False
    pods_ready_lost_at: float | None = None
    """When PodsReady flipped back to false for a running workload (recovery timeout)."""
    requeue_count: int = 0
    requeue_after: float | None = None
    """Backoff: not admissible before this time."""
    max_execution_seconds: int | None = None
    accumulated_execution_seconds: float = 0.0
    """Admitted time from earlier admissions (maximumExecutionTimeSeconds accumulates)."""
    arrived_at: float | None = None
    """When this cluster got the workload (the agent's offer time), if later than it was
    queued at the hub: see `queued_here_at`."""
    queue_usage: float = 0.0
    """Its local queue's usage score when its cluster queue orders by admission fair sharing
    (`fair_usage.usage_score`, stamped by the caller; lower goes first), else 0."""

    local_queue: LocalQueueKey = field(init=False, repr=False, compare=False)
    """`namespace/queue_name`."""
    order_key: OrderKey = field(init=False, repr=False, compare=False)
    """Queue order: sticky preemptor first, then the local queue's usage score (admission
    fair sharing; 0 otherwise), then priority (high first), FIFO time, id."""
    shape: tuple[object, ...] = field(init=False, repr=False, compare=False)
    """Everything flavor assignment and preemption read: equal shapes fare equally."""
    shape_hash: int = field(init=False, repr=False, compare=False)
    queued_here_at: float = field(init=False, repr=False, compare=False)
    """Since when it waits in this cluster's queue (preemption protection compares
    admissions against it): a workload may wait at the hub before it is offered here."""
    total_requests: Mapping[ResourceName, int] = field(init=False, repr=False, compare=False)
    """Per resource, what all its pods ask for together (milli-units): the cycle orders a
    queue's head by whether it would borrow, which reads this for every pending workload."""
    queue_timestamp: float = field(init=False, repr=False, compare=False)
    """Its place in time in the queue order: the creation time, or `requeued_at` when set."""

    def __post_init__(self) -> None:
        # Precomputed once per workload object, so a cycle over 50,000 pending workloads
        # sorts and deduplicates them without rebuilding keys every cycle.
        queued = self.created_at if self.requeued_at is None else self.requeued_at
        object.__setattr__(self, "queue_timestamp", queued)
        object.__setattr__(
            self,
            "order_key",
            (not self.preempting, self.queue_usage, -self.priority, queued, self.id),
        )
        object.__setattr__(self, "local_queue", lq_key(self.namespace, self.queue_name))
        shape = _one_of_each((self.priority, tuple(ps.shape for ps in self.pod_sets)))
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "shape_hash", hash(shape))
        totals: Mapping[ResourceName, int]
        if len(self.pod_sets) == 1 and self.pod_sets[0].count == 1:
            # One pod: its requests are the totals (the same mapping, so the cycle's borrow
            # estimate and flavor assignment read one object of the workload, not two).
            totals = self.pod_sets[0].requests
        else:
            summed: dict[ResourceName, int] = {}
            for ps in self.pod_sets:
                for res, amount in ps.requests.items():
                    summed[res] = summed.get(res, 0) + amount * ps.count
            totals = summed
        object.__setattr__(self, "total_requests", totals)
        arrived = self.arrived_at
        object.__setattr__(
            self, "queued_here_at", queued if arrived is None or arrived < queued else arrived
        )


_Tuple = TypeVar("_Tuple", bound=tuple[object, ...])


def _one_of_each(value: _Tuple) -> _Tuple:
    """The first of the equal tuples seen (recently): workloads that ask alike share one
    shape object, and pod sets that ask for the same resources one `PodSet.asked`, so a cycle
    tells them alike by identity instead of comparing tuples (and reads one object, not one
    per workload) for every pending workload. A memo only: a miss gives an equal tuple, so
    results do not depend on it."""
    return cast(_Tuple, _first_seen(value))


@functools.lru_cache(maxsize=8192)
def _first_seen(value: tuple[object, ...]) -> tuple[object, ...]:
    return value


# --------------------------------------------------------------------------------------------
# configuration and the snapshot


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    enabled: bool = False
    timeout_seconds: float = 1800.0
    recovery_timeout_seconds: float | None = None
    """None means the same as timeout_seconds."""
    block_admission: bool = False
    requeue_timestamp: RequeueTimestamp = RequeueTimestamp.EVICTION
    backoff_base_seconds: float = 60.0
    backoff_max_seconds: float = 3600.0
    backoff_limit_count: int | None = None


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Kueue's `admissionFairSharing` configuration: how local queues' usage is sampled and
    decayed (`fair_usage`). Without it no cluster queue orders by usage."""

    usage_half_life_seconds: float = 7 * 24 * 3600.0
    usage_sampling_interval_seconds: float = 300.0
    resource_weights: Mapping[ResourceName, float] = field(default_factory=dict)
    """Weight of each resource in the usage score; a resource not named weighs 1."""


class FairSharingStrategy(enum.StrEnum):
    """`fairSharing.preemptionStrategies`: when a preemptor may take a workload of another
    cluster queue (shares compared with the preemptor's workload admitted). Kueue's two,
    as Kueue defines them, and MultiQ's own."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    """The preemptor's share after admission ≤ the target queue's share without the victim."""
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
    """The preemptor's share after admission < the target queue's share before preemption."""
    TOWARD_FAIR_SHARE = "MultiQTowardFairShare"
    """MultiQ's, not Kueue's: the preemptor's share after admission ≤ its cohort's fair level
    (`fair_sharing.fair_level`, over every queue of the cohort and what each waits for) ≤
    the target queue's share without the victim (weight 0: no lower bound). Kueue's two
    compare only the two queues, so a queue may overshoot its weighted share while a third
    still waits below it, and give the overshoot back a round later."""


@dataclass(frozen=True, slots=True)
class FairSharing:
    """Kueue's `fairSharing` configuration (preemption-based fair sharing, kueue.md §3.1):
    when set, heads across cluster queues go in the fair-sharing order and preemption across
    cluster queues follows `strategies`, tried in order, instead of borrowWithinCohort."""

    strategies: tuple[FairSharingStrategy, ...] = (
        FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
    )


@dataclass(frozen=True, slots=True)
class EngineConfig:
    undeclared_resources: UndeclaredResources = UndeclaredResources.BLOCK
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    admission_fair_sharing: AdmissionFairSharing | None = None
    fair_sharing: FairSharing | None = None
    """Preemption-based fair sharing; None is Kueue's classic (disabled) behaviour."""
    max_admissions_per_queue: int | None = None
    """None admits as many as fit per cluster queue per cycle; 1 reproduces Kueue."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    flavors: Mapping[FlavorName, ResourceFlavor]
    cluster_queues: Mapping[ClusterQueueName, ClusterQueue]
    local_queues: Mapping[LocalQueueKey, LocalQueue]
    workloads: Mapping[WorkloadId, Workload]
    cohorts: Mapping[CohortName, Cohort] = field(default_factory=dict)
    namespaces: Mapping[Namespace, Mapping[str, str]] = field(default_factory=dict)
    """Namespace labels, for cluster queues' namespace selectors."""
    config: EngineConfig = field(default_factory=EngineConfig)
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    """The cluster's nodes, read only for flavors with a topology."""
    queue_usage: Mapping[LocalQueueKey, float] = field(default_factory=dict)
    """Under admission fair sharing, the usage score of every local queue whose cluster queue
    orders by it (`fair_usage.scores`): waiting work carries its own (`Workload.queue_usage`);
    preemption reads this for the admitted (victims from the heaviest local queue first)."""
