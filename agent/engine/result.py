"""The engine's output: decisions as data, each with a reason a user can read.

Owns `CycleResult` and everything in it: admissions (flavor and count per pod set),
preemptions (victim, preemptor, reason), evictions (pods-ready timeouts, draining stop
policies, maximum execution time), and a structured `PendingReason` for every workload left
waiting, with its position in its cluster queue and local queue. `cycle.schedule` builds it;
the agent shell applies it (and `apply.apply_result` applies it to a snapshot for tests and
simulations).

Pending reasons are shared objects: every workload that waits for the same thing in the same
cluster queue points at one reason, so a cycle over 50,000 pending workloads costs a dict
insert per workload, not an object. Where a reason is a workload's own (its request is in
it), it is built with its shortfalls and flavor attempts for every such workload a cycle
looks at, and its message is written only when read (`PendingReason.about_shortfalls`).
Shortfalls and flavor attempts are named tuples, immutable as the frozen dataclasses beside
them and built in a fifth of the time (a frozen dataclass sets each field through
`object.__setattr__`); a reason is a slotted class, never changed once built.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from agent.engine.snapshot import (
    Admission,
    ClusterQueueName,
    FlavorName,
    LocalQueueKey,
    ResourceName,
    Workload,
    WorkloadId,
)

__all__ = [
    "Admit",
    "CycleResult",
    "Eviction",
    "EvictionReason",
    "FlavorAttempt",
    "PendingCode",
    "PendingReason",
    "Preemption",
    "PreemptionReason",
    "ProtectedVictim",
    "Shortfall",
    "Unblock",
    "describe_shortfalls",
    "fmt",
    "template",
]


class PendingCode(enum.StrEnum):
    """Why a workload is not admitted (Kueue's QuotaReserved=False reasons, and ours)."""

    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    WAITING_FOR_QUOTA = "WaitingForQuota"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
    """Quota fits, but the pods do not fit the flavor's topology as asked."""
    NO_PREEMPTION_CANDIDATES = "NoPreemptionCandidates"
    PREEMPTION_PROTECTED = "PreemptionProtected"
    """Preempting would make room, but victims it needs are within their minAdmitSeconds."""
    WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
    BLOCKED_BY_HEAD = "BlockedByStrictFIFOHead"
    WAITING_FOR_PODS_READY = "WaitingForPodsReady"
    BACKOFF = "Backoff"
    INACTIVE = "Inactive"
    MISCONFIGURED = "Misconfigured"
    LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    QUEUE_ADMISSION_LIMIT = "QueueAdmissionLimit"


class Unblock(enum.StrEnum):
    """What kind of event would let the workload be admitted."""

    QUOTA_RELEASED = "QuotaReleased"
    """Running workloads in the cluster queue or cohort finishing."""
    QUOTA_CHANGED = "QuotaChanged"
    """Only a configuration change (more quota, a matching flavor) can help."""
    PREEMPTIONS_COMPLETE = "PreemptionsComplete"
    HEAD_ADMITTED = "HeadAdmitted"
    PODS_READY = "PodsReady"
    TIME = "Time"
    """Passing of time (a backoff); see `PendingReason.retry_at`."""
    USER_ACTION = "UserAction"
    """Reactivation, a fixed queue name, a resumed queue."""
    NEXT_CYCLE = "NextCycle"


class Shortfall(NamedTuple):
    """One quota cell that stops the workload: how much is missing and against which limit."""

    flavor: FlavorName
    resource: ResourceName
    requested: int
    available: int
    """What the cluster queue could use now (nominal, borrowing and cohort limits applied)."""
    maximum: int
    """What it could use if nothing else ran (potential availability)."""

    @property
    def missing(self) -> int:
        return max(0, self.requested - self.available)


def fmt(milli: int) -> str:
    """Milli-units as an exact Kubernetes quantity (1500 → "1500m", 3000 → "3")."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def describe_shortfalls(shortfalls: tuple[Shortfall, ...] | list[Shortfall]) -> str:
    parts = []
    for s in shortfalls:
        if s.requested > s.maximum:
            parts.append(
                f"{s.resource} in flavor {s.flavor}: request {fmt(s.requested)} exceeds the "
                f"maximum {fmt(s.maximum)}"
            )
        else:
            parts.append(
                f"insufficient unused quota for {s.resource} in flavor {s.flavor}, "
                f"{fmt(s.missing)} more needed"
            )
    return "; ".join(parts)


class FlavorAttempt(NamedTuple):
    """Why a flavor was not chosen for a pod set: a fixed text, or its quota shortfalls."""

    pod_set: str
    flavor: FlavorName
    detail: str = ""
    shortfalls: tuple[Shortfall, ...] = ()

    @property
    def reason(self) -> str:
        # Built on demand: most attempts are never read, and a cycle makes many.
        text = describe_shortfalls(self.shortfalls) if self.shortfalls else ""
        if self.detail and text:
            return self.detail.format(text)
        return text or self.detail or "no quota"


@dataclass(frozen=True, slots=True)
class ProtectedVictim:
    """A workload a preemptor would preempt, were it not protected by minAdmitSeconds."""

    workload: WorkloadId
    cluster_queue: ClusterQueueName
    until: float
    """When its protection ends (its admission time plus its queue's minAdmitSeconds)."""


class PendingReason:
    """Why a workload waits: a code, a message a user can read, what would unblock it, and
    the details behind it. Shared by every workload that waits for the same thing, so never
    changed once built (a value: equal when every field is).

    A reason built by `about_shortfalls` writes its message only when it is first read: a
    cycle gives most of its pending workloads such a reason of their own (their amounts are
    in it), and a reason's message is read only when the agent reports it."""

    __slots__ = (
        "_describe",
        "_message",
        "_template",
        "blocking_workload",
        "code",
        "flavors_tried",
        "protected",
        "retry_at",
        "shortfalls",
        "unblock",
    )

    def __init__(
        self,
        code: PendingCode,
        message: str,
        unblock: Unblock,
        shortfalls: tuple[Shortfall, ...] = (),
        flavors_tried: tuple[FlavorAttempt, ...] = (),
        retry_at: float | None = None,
        blocking_workload: WorkloadId | None = None,
        protected: tuple[ProtectedVictim, ...] = (),
    ) -> None:
        self.code = code
        self._message: str | None = message
        self.unblock = unblock
        self.shortfalls = shortfalls
        self.flavors_tried = flavors_tried
        self.retry_at = retry_at
        self.blocking_workload = blocking_workload
        self.protected = protected
        """PreemptionProtected: the protected victims of the plan that would make room."""
        self._template = ""
        self._describe: Callable[[PendingReason], str] | None = None

    @classmethod
    def about_shortfalls(
        cls,
        code: PendingCode,
        template: str,
        unblock: Unblock,
        shortfalls: tuple[Shortfall, ...],
        flavors_tried: tuple[FlavorAttempt, ...],
        describe: Callable[[PendingReason], str] | None = None,
    ) -> PendingReason:
        """A reason whose message is `template` (a `str.format` template with one field)
        filled with `describe(reason)` — by default its shortfalls described — when first
        read. The template is the same for every workload that waits for the same kind of
        thing in one queue, so building the reason writes no text."""
        # (Every field set once, without `__init__`: a cycle builds one per pending workload.)
        reason = object.__new__(cls)
        reason.code = code
        reason._message = None
        reason.unblock = unblock
        reason.shortfalls = shortfalls
        reason.flavors_tried = flavors_tried
        reason.retry_at = None
        reason.blocking_workload = None
        reason.protected = ()
        reason._template = template
        reason._describe = describe
        return reason

    @property
    def message(self) -> str:
        text = self._message
        if text is None:
            describe = self._describe
            if describe is None:
                filler = describe_shortfalls(self.shortfalls)
            else:
                filler = describe(self)
            text = self._message = self._template.format(filler)
        return text

    def _key(self) -> tuple[object, ...]:
        return (
            self.code,
            self.message,
            self.unblock,
            self.shortfalls,
            self.flavors_tried,
            self.retry_at,
            self.blocking_workload,
            self.protected,
        )

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, PendingReason):
            return NotImplemented
        if self.code != other.code or self.shortfalls != other.shortfalls:
            return False
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={value!r}"
            for name, value in zip(
                (
                    "code",
                    "message",
                    "unblock",
                    "shortfalls",
                    "flavors_tried",
                    "retry_at",
                    "blocking_workload",
                    "protected",
                ),
                self._key(),
                strict=True,
            )
        )
        return f"PendingReason({fields})"


def template(text: str) -> str:
    """`text` as a literal part of a `PendingReason.about_shortfalls` template (its braces
    doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True, slots=True)
class Admit:
    workload: WorkloadId
    admission: Admission
    borrowing: bool
    """Whether the admission uses quota beyond the cluster queue's nominal."""
    partial: bool = False


class PreemptionReason(enum.StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


@dataclass(frozen=True, slots=True)
class Preemption:
    victim: WorkloadId
    victim_cluster_queue: ClusterQueueName
    preemptor: WorkloadId
    reason: PreemptionReason
    message: str


class EvictionReason(enum.StrEnum):
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
    DEACTIVATED = "Deactivated"


@dataclass(frozen=True, slots=True)
class Eviction:
    workload: WorkloadId
    reason: EvictionReason
    message: str
    requeue_after: float | None = None
    """Backoff: do not admit again before this time (None: no delay)."""
    requeue_count: int | None = None
    """New requeue count to record (pods-ready timeouts count towards the limit)."""
    requeued_at: float | None = None
    """New queue-order timestamp (None keeps the current one)."""
    deactivate: bool = False
    """Set the workload inactive: it is never requeued until a user reactivates it."""


@dataclass(frozen=True, slots=True)
class CycleResult:
    now: float
    admitted: tuple[Admit, ...] = ()
    preempted: tuple[Preemption, ...] = ()
    evicted: tuple[Eviction, ...] = ()
    pending: Mapping[WorkloadId, PendingReason] = field(default_factory=dict)
    routed: Mapping[ClusterQueueName, Sequence[Workload]] = field(default_factory=dict)
    """The workloads routed to each cluster queue, in queue order; the positions below are
    computed from it only when asked (the agent's loop never needs them, and over a deep
    queue they cost a pass per cycle)."""
    new_preemptors: frozenset[WorkloadId] = frozenset()
    """Workloads that issued preemptions this cycle (sticky until admitted)."""
    nominated: Mapping[WorkloadId, Admission] = field(default_factory=dict)
    """Flavor assignment each waiting preemptor reserved, admitted once its victims leave."""
    next_wakeup: float | None = None
    """Earliest future time at which a cycle could decide differently without any event."""
    pending_changed: Mapping[WorkloadId, PendingReason] | None = None
    """Of `pending`, the workloads whose reason may differ from the previous cycle's (or
    that changed since), with their reasons; None: any of them (`schedule`, or the first
    incremental cycle)."""

    @property
    def queue_order(self) -> dict[ClusterQueueName, tuple[WorkloadId, ...]]:
        """Pending workloads of each cluster queue in queue order (position = index)."""
        pending = self.pending
        return {
            name: tuple(wl.id for wl in bucket if wl.id in pending)
            for name, bucket in self.routed.items()
        }

    @property
    def lq_order(self) -> dict[LocalQueueKey, tuple[WorkloadId, ...]]:
        """Pending workloads of each local queue in queue order."""
        lists: dict[LocalQueueKey, list[WorkloadId]] = {}
        for bucket in self.routed.values():
            for wl in bucket:
                if wl.id in self.pending:
                    lists.setdefault(wl.local_queue, []).append(wl.id)
        return {key: tuple(ids) for key, ids in lists.items()}

    def position(self, workload: WorkloadId) -> tuple[int | None, int | None]:
        """(position in its cluster queue, position in its local queue), 0-based."""
        cq_pos = lq_pos = None
        for order in self.queue_order.values():
            if workload in order:
                cq_pos = order.index(workload)
                break
        for order in self.lq_order.values():
            if workload in order:
                lq_pos = order.index(workload)
                break
        return cq_pos, lq_pos
