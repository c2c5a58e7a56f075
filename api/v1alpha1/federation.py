"""Federation kinds, held only by the hub: MemberCluster, ClusterSet, GlobalQueue and Tenant.

A MemberCluster is one Kubernetes cluster whose agent dials the hub; a ClusterSet names a
group of them (explicitly or by label selector); a GlobalQueue is the hub-level queue that
dispatches work of some tenants to a cluster set under a fleet-wide quota; a Tenant binds
namespaces and users' groups to the queues they may use.

Called by: api.kinds (registry), hub (registry, placement, dispatch), qctl (get/describe).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.core import LabelSelector, LabelSelectorRequirement
from api.meta import (
    Condition,
    Object,
    StrictModel,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_duplicates,
    label_key_errors,
)
from api.quantity import Quantity
from api.tokens import TokenHashError, parse_token_hash

__all__ = [
    "SUBMITTER_ANNOTATION",
    "TENANT_LABEL",
    "AdmissionFairSharing",
    "ClusterAffinity",
    "ClusterCapacity",
    "ClusterSelectorTerm",
    "ClusterSet",
    "ClusterSetSpec",
    "DispatchPolicy",
    "FairSharing",
    "GlobalQueue",
    "GlobalQueueSpec",
    "IncrementalDispatch",
    "MemberCluster",
    "MemberClusterSpec",
    "MemberClusterStatus",
    "PreferredClusterTerm",
    "QueueFairShare",
    "RequeuingStrategy",
    "ResourceCapacity",
    "Tenant",
    "TenantFairShare",
    "TenantSpec",
    "TenantStatus",
    "TokenReference",
    "UserFairShare",
    "WaitForPodsReady",
    "admission_fair_sharing_errors",
    "fair_sharing_errors",
]


# --- MemberCluster --------------------------------------------------------------------------


class TokenReference(StrictModel):
    """Where the hub finds the bearer token this cluster's agent must present.

    Exactly one is set: `secretName` (a Kubernetes secret mounted in the hub's secrets
    directory, `<dir>/<secretName>/<key>`) or `file` (a path relative to that directory, for
    development). Nothing outside the secrets directory is ever read: an absolute `file`, or
    one with a `..` part, is invalid, and the hub also refuses one that a symbolic link leads
    out of.
    """

    secret_name: str | None = None
    key: str = "token"
    file: str | None = None


class Fencing(StrictModel):
    """How the hub keeps a workload from running in two clusters after losing one (the rules
    and their reasons: docs/exactly-once.md).

    With fencing on, the agent holds a lease of `leaseSeconds`, renewed over its session; an
    agent that cannot renew stops its workloads, and its Jobs carry deadlines that stop them
    even if the agent is frozen. The hub re-dispatches a lost cluster's work only after
    `lossTimeoutSeconds` and once the lease has been expired for `graceSeconds`; so
    `lossTimeoutSeconds` must be at least `leaseSeconds + graceSeconds`. With fencing off
    the hub never re-dispatches a lost cluster's bound work by itself.
    """

    enabled: bool = True
    loss_timeout_seconds: int = 900
    lease_seconds: int = 60
    grace_seconds: int = 30


class RequeuingStrategy(StrictModel):
    """How a workload evicted for pods not ready is queued again: after
    backoffBaseSeconds·2^(n−1) (at most backoffMaxSeconds) at the n-th time, and no more
    after backoffLimitCount requeues (None: no limit): it is then deactivated."""

    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None


class WaitForPodsReady(StrictModel):
    """Kueue's waitForPodsReady for this cluster: an admitted workload whose pods are not all
    ready within `timeoutSeconds` of admission (or again within `recoveryTimeoutSeconds`
    once they were) is evicted with PodsReadyTimeout and queued again at the hub by the
    requeuing strategy. `blockAdmission`: admit nothing else on the cluster meanwhile."""

    timeout_seconds: int = 300
    recovery_timeout_seconds: int | None = None
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = Field(default_factory=RequeuingStrategy)


def wait_for_pods_ready_errors(path: Path, cfg: WaitForPodsReady) -> list[FieldError]:
    errors = []
    rs = cfg.requeuing_strategy
    for name, value, least in (
        ("timeoutSeconds", cfg.timeout_seconds, 1),
        ("recoveryTimeoutSeconds", cfg.recovery_timeout_seconds, 1),
        ("requeuingStrategy.backoffBaseSeconds", rs.backoff_base_seconds, 0),
        ("requeuingStrategy.backoffMaxSeconds", rs.backoff_max_seconds, 0),
        ("requeuingStrategy.backoffLimitCount", rs.backoff_limit_count, 0),
    ):
        if value is not None and value < least:
            errors.append(
                FieldError.invalid(
                    path.child(*name.split(".")), value, f"must be greater than or equal to {least}"
                )
            )
    return errors


class AdmissionFairSharing(StrictModel):
    """Kueue's `admissionFairSharing` configuration for this cluster: how each local queue's
    consumed resources are sampled (every `usageSamplingIntervalSeconds`) and decayed (halved
    every `usageHalfLifeSeconds`; 0 keeps no history), and what each resource weighs in the
    score (`resourceWeights`, 1 for a resource not named). Only cluster queues with
    `admissionScope.admissionMode: UsageBasedAdmissionFairSharing` order by it."""

    usage_half_life_seconds: int = 7 * 24 * 3600
    usage_sampling_interval_seconds: int = 300
    resource_weights: dict[str, float] = Field(default_factory=dict)


def admission_fair_sharing_errors(path: Path, cfg: AdmissionFairSharing) -> list[FieldError]:
    errors = []
    for name, value, least in (
        ("usageHalfLifeSeconds", cfg.usage_half_life_seconds, 0),
        ("usageSamplingIntervalSeconds", cfg.usage_sampling_interval_seconds, 1),
    ):
        if value < least:
            errors.append(
                FieldError.invalid(
                    path.child(name), value, f"must be greater than or equal to {least}"
                )
            )
    for resource, weight in sorted(cfg.resource_weights.items()):
        if weight < 0:
            errors.append(
                FieldError.invalid(
                    path.child("resourceWeights", resource),
                    weight,
                    "must be greater than or equal to 0",
                )
            )
    return errors


FairSharingStrategy = Literal[
    "LessThanOrEqualToFinalShare", "LessThanInitialShare", "MultiQTowardFairShare"
]
"""Kueue's two strategies, and MultiQ's own (docs/fair-sharing.md)."""
TOWARD_FAIR_SHARE: FairSharingStrategy = "MultiQTowardFairShare"
_DEFAULT_STRATEGIES: tuple[FairSharingStrategy, ...] = (
    "LessThanOrEqualToFinalShare",
    "LessThanInitialShare",
)


class FairSharing(StrictModel):
    """Kueue's `fairSharing` configuration for this cluster (preemption-based fair sharing):
    cluster queues in a cohort admit in the order of their weighted dominant resource share
    (lowest first) and preempt across queues by `preemptionStrategies`, tried in order,
    instead of by borrowWithinCohort. `MultiQTowardFairShare` is MultiQ's strategy and
    stands alone: after a pairwise strategy of Kueue's it would add nothing, as that one
    would already allow what it refuses."""

    preemption_strategies: list[FairSharingStrategy] = Field(
        default_factory=lambda: list(_DEFAULT_STRATEGIES)
    )


def fair_sharing_errors(path: Path, fs: FairSharing) -> list[FieldError]:
    """What a `fairSharing` the schema accepts may still not say."""
    strategies = fs.preemption_strategies
    if TOWARD_FAIR_SHARE in strategies and len(strategies) > 1:
        return [
            FieldError.invalid(
                path.child("preemptionStrategies"),
                ", ".join(strategies),
                f"{TOWARD_FAIR_SHARE} must be the only strategy: Kueue's strategies beside it "
                "would allow the preemptions it refuses",
            )
        ]
    return []


class MemberClusterSpec(StrictModel):
    """How the hub knows this cluster's agent, and what it may send there.

    The agent's token is known by exactly one of `tokenHash` (its salted scrypt hash, as the
    users file holds users' tokens: `qctl cluster join` mints a token, installs it in the
    cluster and writes only its hash here) or `tokenRef` (a secret the hub reads the token
    itself from)."""

    token_ref: TokenReference | None = None
    token_hash: str | None = None
    # A cordoned cluster keeps what it runs but gets no new dispatches.
    cordoned: bool = False
    fencing: Fencing = Field(default_factory=Fencing)
    # None: off, unless the cluster's agent turns it on itself (its --wait-for-pods-ready).
    wait_for_pods_ready: WaitForPodsReady | None = None
    # None: off, unless the cluster's agent turns it on itself (its
    # --admission-fair-sharing-half-life).
    admission_fair_sharing: AdmissionFairSharing | None = None
    # None: off, unless the cluster's agent turns it on itself (its --fair-sharing).
    fair_sharing: FairSharing | None = None
    description: str = ""


class ResourceCapacity(StrictModel):
    """One resource of a cluster (or of one flavor in it): what exists, is used, is free."""

    name: str
    allocatable: Quantity
    used: Quantity = Field(default_factory=lambda: Quantity(0))
    headroom: Quantity = Field(default_factory=lambda: Quantity(0))


class FlavorCapacity(StrictModel):
    cluster_queue: str
    flavor: str
    resources: list[ResourceCapacity] = Field(default_factory=list)


class ClusterCapacity(StrictModel):
    nodes: int = 0
    ready_nodes: int = 0
    # Ready and not cordoned: the nodes new pods can land on.
    schedulable_nodes: int = 0
    resources: list[ResourceCapacity] = Field(default_factory=list)
    flavors: list[FlavorCapacity] = Field(default_factory=list)


class MemberClusterStatus(StrictModel):
    connected: bool = False
    last_heartbeat_time: datetime | None = None
    # Set when the session was lost and not yet re-established.
    lost_since: datetime | None = None
    agent_version: str = ""
    kubernetes_version: str = ""
    capacity: ClusterCapacity | None = None
    conditions: list[Condition] = Field(default_factory=list)


class MemberCluster(Object):
    """A Kubernetes cluster that runs work for the fleet; its agent dials the hub."""

    KIND: ClassVar[str] = "MemberCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mc", "cluster", "clusters", "memberclusters")
    kind: Literal["MemberCluster"] = "MemberCluster"
    spec: MemberClusterSpec
    status: MemberClusterStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        # Cluster names appear in DNS-ish places (log prefixes, labels): keep them labels.
        if self.metadata.name:
            errors += dns1123_label_errors(Path("metadata", "name"), self.metadata.name)
        errors += _agent_token_errors(self.spec)
        errors += _fencing_errors(self.spec.fencing, Path("spec", "fencing"))
        if self.spec.wait_for_pods_ready is not None:
            errors += wait_for_pods_ready_errors(
                Path("spec", "waitForPodsReady"), self.spec.wait_for_pods_ready
            )
        if self.spec.admission_fair_sharing is not None:
            errors += admission_fair_sharing_errors(
                Path("spec", "admissionFairSharing"), self.spec.admission_fair_sharing
            )
        if self.spec.fair_sharing is not None:
            errors += fair_sharing_errors(Path("spec", "fairSharing"), self.spec.fair_sharing)
        return errors


def _agent_token_errors(spec: MemberClusterSpec) -> list[FieldError]:
    errors: list[FieldError] = []
    ref = spec.token_ref
    if (ref is None) == (spec.token_hash is None):
        detail = "exactly one of tokenHash or tokenRef must be set (the agent's token)"
        return [FieldError.required(Path("spec", "tokenHash"), detail)]
    if spec.token_hash is not None:
        try:
            parse_token_hash(spec.token_hash)
        except TokenHashError as exc:
            errors.append(FieldError.invalid(Path("spec", "tokenHash"), "…", str(exc)))
    if ref is not None:
        rpath = Path("spec", "tokenRef")
        if (ref.secret_name is None) == (ref.file is None):
            errors.append(
                FieldError.invalid(rpath, "", "exactly one of secretName or file must be set")
            )
        if ref.secret_name is not None:
            errors += dns1123_subdomain_errors(rpath.child("secretName"), ref.secret_name)
        if ref.file is not None:
            errors += _token_file_errors(rpath.child("file"), ref.file)
    return errors


def _token_file_errors(path: Path, file: str) -> list[FieldError]:
    if file.startswith("/"):
        return [
            FieldError.invalid(
                path, file, "must be relative to the hub's secrets directory, not absolute"
            )
        ]
    parts = file.split("/")
    if ".." in parts:
        return [FieldError.invalid(path, file, "must not leave the hub's secrets directory (..)")]
    if not file.strip() or "" in parts or "\x00" in file:
        return [FieldError.invalid(path, file, "must be a file name in the secrets directory")]
    return []


def _fencing_errors(fencing: Fencing, path: Path) -> list[FieldError]:
    errors = []
    for name, value, least in (
        ("lossTimeoutSeconds", fencing.loss_timeout_seconds, 1),
        ("leaseSeconds", fencing.lease_seconds, 3),
        ("graceSeconds", fencing.grace_seconds, 1),
    ):
        if value < least:
            errors.append(
                FieldError.invalid(
                    path.child(name), value, f"must be greater than or equal to {least}"
                )
            )
    if not errors and fencing.loss_timeout_seconds < fencing.lease_seconds + fencing.grace_seconds:
        errors.append(
            FieldError.invalid(
                path.child("lossTimeoutSeconds"),
                fencing.loss_timeout_seconds,
                f"must be at least leaseSeconds + graceSeconds "
                f"({fencing.lease_seconds} + {fencing.grace_seconds}): the hub may re-dispatch "
                "a lost cluster's work only once its agent's lease has run out and it has had "
                "the grace to stop it",
            )
        )
    return errors


# --- ClusterSet -----------------------------------------------------------------------------


class ClusterSetSpec(StrictModel):
    clusters: list[str] | None = None
    cluster_selector: LabelSelector | None = None


class ClusterSetStatus(StrictModel):
    clusters: list[str] = Field(default_factory=list)
    connected_clusters: int = 0


class ClusterSet(Object):
    """A named group of member clusters: an explicit list or a label selector, not both."""

    KIND: ClassVar[str] = "ClusterSet"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cs", "clustersets")
    kind: Literal["ClusterSet"] = "ClusterSet"
    spec: ClusterSetSpec
    status: ClusterSetStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        s = self.spec
        if (s.clusters is None) == (s.cluster_selector is None):
            errors.append(
                FieldError.invalid(
                    spec, "", "exactly one of clusters or clusterSelector must be set"
                )
            )
        if s.clusters is not None:
            for i, name in enumerate(s.clusters):
                errors += dns1123_label_errors(spec.child("clusters").index(i), name)
            for i in find_duplicates(s.clusters):
                errors.append(FieldError.duplicate(spec.child("clusters").index(i), s.clusters[i]))
        if s.cluster_selector is not None:
            errors += s.cluster_selector.errors(spec.child("clusterSelector"))
        return errors


# --- GlobalQueue ----------------------------------------------------------------------------


class IncrementalDispatch(StrictModel):
    step_size: int = 1
    interval_seconds: int = 300


class DispatchPolicy(StrictModel):
    """How the hub offers a workload to clusters.

    BestFit: one cluster at a time, the one with the most headroom, the next on rejection.
    AllAtOnce: offer to every eligible cluster, keep the first that admits (Kueue's default).
    Incremental: offer to `stepSize` more clusters every `intervalSeconds` until one admits.
    """

    type: Literal["BestFit", "AllAtOnce", "Incremental"] = "BestFit"
    incremental: IncrementalDispatch | None = None


class ClusterSelectorTerm(StrictModel):
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PreferredClusterTerm(StrictModel):
    weight: int
    preference: ClusterSelectorTerm


class ClusterAffinity(StrictModel):
    """Like node affinity, over member-cluster labels: required terms are ORed."""

    required: list[ClusterSelectorTerm] = Field(default_factory=list)
    preferred: list[PreferredClusterTerm] = Field(default_factory=list)


class GlobalQueueSpec(StrictModel):
    cluster_set: str
    tenants: list[str] = Field(default_factory=list)
    # Cluster queues (defined at the hub, pushed to agents) whose work this queue governs;
    # empty means every cluster queue. A queue that names a cluster queue governs its work
    # before one open to all (hub.placement.routing.Routing.governing_queue).
    cluster_queues: list[str] = Field(default_factory=list)
    fleet_quota: dict[str, Quantity] = Field(default_factory=dict)
    fair_sharing_weight: Quantity = Field(default_factory=lambda: Quantity(1))
    dispatch_policy: DispatchPolicy = Field(default_factory=DispatchPolicy)
    cluster_affinity: ClusterAffinity | None = None
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"


class GlobalQueueStatus(StrictModel):
    pending_workloads: int = 0
    dispatched_workloads: int = 0
    running_workloads: int = 0
    fleet_usage: dict[str, Quantity] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)


class GlobalQueue(Object):
    """The hub-level queue: tenants, fleet quota, fair-share weight, dispatch policy."""

    KIND: ClassVar[str] = "GlobalQueue"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("gq", "globalqueues")
    kind: Literal["GlobalQueue"] = "GlobalQueue"
    spec: GlobalQueueSpec
    status: GlobalQueueStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        s = self.spec
        errors += dns1123_subdomain_errors(spec.child("clusterSet"), s.cluster_set)
        for field, names in (("tenants", s.tenants), ("clusterQueues", s.cluster_queues)):
            for i, name in enumerate(names):
                errors += dns1123_subdomain_errors(spec.child(field).index(i), name)
            for i in find_duplicates(names):
                errors.append(FieldError.duplicate(spec.child(field).index(i), names[i]))
        for resource, quota in s.fleet_quota.items():
            errors += label_key_errors(spec.child("fleetQuota"), resource)
            if quota.is_negative():
                errors.append(
                    FieldError.invalid(
                        spec.child("fleetQuota").key(resource),
                        quota.canonical(),
                        "must be greater than or equal to 0",
                    )
                )
        if s.fair_sharing_weight.is_negative():
            errors.append(
                FieldError.invalid(
                    spec.child("fairSharingWeight"),
                    s.fair_sharing_weight.canonical(),
                    "must be greater than or equal to 0",
                )
            )
        errors += _dispatch_errors(spec.child("dispatchPolicy"), s.dispatch_policy)
        if s.cluster_affinity is not None:
            errors += _affinity_errors(spec.child("clusterAffinity"), s.cluster_affinity)
        return errors


def _dispatch_errors(path: Path, policy: DispatchPolicy) -> Iterator[FieldError]:
    if policy.type != "Incremental":
        if policy.incremental is not None:
            yield FieldError.forbidden(
                path.child("incremental"), "may only be set when type is Incremental"
            )
        return
    inc = policy.incremental or IncrementalDispatch()
    if inc.step_size < 1:
        yield FieldError.invalid(
            path.child("incremental", "stepSize"),
            inc.step_size,
            "must be greater than or equal to 1",
        )
    if inc.interval_seconds < 1:
        yield FieldError.invalid(
            path.child("incremental", "intervalSeconds"),
            inc.interval_seconds,
            "must be greater than or equal to 1",
        )


def _affinity_errors(path: Path, affinity: ClusterAffinity) -> Iterator[FieldError]:
    for i, term in enumerate(affinity.required):
        tpath = path.child("required").index(i)
        if not term.match_expressions:
            yield FieldError.required(tpath.child("matchExpressions"))
        for j, req in enumerate(term.match_expressions):
            yield from req.errors(tpath.child("matchExpressions").index(j))
    for i, pref in enumerate(affinity.preferred):
        ppath = path.child("preferred").index(i)
        if not 1 <= pref.weight <= 100:
            yield FieldError.invalid(
                ppath.child("weight"), pref.weight, "must be in the range 1-100"
            )
        for j, req in enumerate(pref.preference.match_expressions):
            yield from req.errors(ppath.child("preference", "matchExpressions").index(j))


# --- Tenant ---------------------------------------------------------------------------------


class TenantSpec(StrictModel):
    """Who belongs to a tenant: its namespaces and the users' groups (and users) that act in it,
    and which WorkloadPriorityClasses its users may name (empty: every class)."""

    namespaces: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)
    fair_sharing_weight: Quantity = Field(default_factory=lambda: Quantity(1))
    priority_classes: list[str] = Field(default_factory=list)


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class UserFairShare(StrictModel):
    """One user of a tenant in the fleet's Fair Tree, as `sshare -l` shows it: under the
    GlobalQueue its work went through ("" for none)."""

    name: str
    queue: str = ""
    raw_usage: FiniteFloat = 0.0
    effective_usage: FiniteFloat = 0.0
    # None: infinite (no usage yet).
    level_fs: FiniteFloat | None = None
    factor: FiniteFloat = 0.0


class QueueFairShare(StrictModel):
    """One GlobalQueue a tenant's work goes through, a sub-account in the fleet's Fair Tree
    ("" for work no GlobalQueue governs): its shares (the queue's fairSharingWeight) against
    the tenant's other queues', its decayed usage against theirs."""

    name: str
    raw_shares: FiniteFloat = 0.0
    norm_shares: FiniteFloat = 0.0
    raw_usage: FiniteFloat = 0.0
    effective_usage: FiniteFloat = 0.0
    # None: infinite (no usage yet).
    level_fs: FiniteFloat | None = None


class TenantFairShare(StrictModel):
    """The tenant's place in the fleet's fair share (hub.placement.fairshare): its shares
    against its siblings', its decayed usage (billing-seconds) against theirs, and its users'
    fair-share factors, which order waiting work of equal priority."""

    raw_shares: FiniteFloat = 0.0
    norm_shares: FiniteFloat = 0.0
    raw_usage: FiniteFloat = 0.0
    effective_usage: FiniteFloat = 0.0
    # None: infinite (no usage yet).
    level_fs: FiniteFloat | None = None
    queues: list[QueueFairShare] = Field(default_factory=list)
    """The tenant's queues in the order the tree visits them."""
    users: list[UserFairShare] = Field(default_factory=list)
    """Every user under every queue, in the order visited (the factor's order)."""
    last_update: datetime | None = None


class TenantStatus(StrictModel):
    fair_share: TenantFairShare | None = None


SUBMITTER_ANNOTATION = "multiq.dev/submitted-by"
"""The user who submitted a workload, as the hub authenticated them (set by the hub on every
submission, whatever the client wrote): the user of its fair-share association."""

TENANT_LABEL = "multiq.dev/tenant"
"""The label every namespace of a tenant carries in every member cluster, as far as queues are
concerned: the hub pushes it with the configuration (`ConfigSync.namespaces`), the agent
matches ClusterQueue namespaceSelectors against it, and gives it to a namespace it creates."""


class Tenant(Object):
    """Binds namespaces and users' groups to a tenant, the unit of fair sharing and access."""

    KIND: ClassVar[str] = "Tenant"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("tenants",)
    kind: Literal["Tenant"] = "Tenant"
    spec: TenantSpec
    status: TenantStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        s = self.spec
        if not s.namespaces:
            errors.append(FieldError.required(spec.child("namespaces"), "a tenant owns namespaces"))
        for i, ns in enumerate(s.namespaces):
            errors += dns1123_label_errors(spec.child("namespaces").index(i), ns)
        for i, name in enumerate(s.priority_classes):
            errors += dns1123_subdomain_errors(spec.child("priorityClasses").index(i), name)
        for field, names in (
            ("namespaces", s.namespaces),
            ("groups", s.groups),
            ("users", s.users),
            ("priorityClasses", s.priority_classes),
        ):
            for i in find_duplicates(names):
                errors.append(FieldError.duplicate(spec.child(field).index(i), names[i]))
        for i, group in enumerate(s.groups):
            if not group.strip():
                errors.append(
                    FieldError.invalid(spec.child("groups").index(i), group, "must not be empty")
                )
        if s.fair_sharing_weight.is_negative():
            errors.append(
                FieldError.invalid(
                    spec.child("fairSharingWeight"),
                    s.fair_sharing_weight.canonical(),
                    "must be greater than or equal to 0",
                )
            )
        return errors
