"""What placement decides for one workload: offer it to these clusters now, or keep it at the
hub, with a reason per cluster a user can read (`qctl describe` shows them).

Produced by `hub.placement.core.place`; applied by the hub's dispatch loop.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hub.placement.snapshot import ClusterName

__all__ = ["ClusterVerdict", "Placement", "Verdict"]


class Verdict(enum.StrEnum):
    """Why a cluster is or is not a candidate. Values are the reasons users see."""

    CANDIDATE = "Candidate"
    ONLY_CLUSTER = "OnlyCluster"  # full now, but no other cluster could ever take it: queue there
    RECLAIM = "ReclaimQuota"  # full now, but its queue may take back quota it lent there
    PREEMPT = "PreemptLowerPriority"  # full now, but lower priorities of its queue hold room
    NOT_IN_CLUSTER_SET = "NotInClusterSet"
    DISCONNECTED = "Disconnected"
    AWAITING_CAPACITY = "AwaitingCapacity"  # connected, its first capacity report not in yet
    CORDONED = "Cordoned"
    AFFINITY_MISMATCH = "ClusterAffinityMismatch"
    NO_SUCH_QUEUE = "ClusterQueueMissing"
    REJECTED = "Rejected"
    TIMED_OUT = "OfferTimedOut"
    OFFERED = "Offered"
    INSUFFICIENT_HEADROOM = "InsufficientHeadroom"
    NEVER_FITS = "ExceedsCapacity"
    NO_FREE_DOMAIN = "NoFreeDomain"  # no domain of the required level has the room now
    NO_DOMAIN = "NoDomainLargeEnough"  # none could ever hold it (or no flavor has the level)


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    cluster: ClusterName
    verdict: Verdict
    message: str
    score: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Placement:
    """`offer_to` are the clusters to offer the workload to now, best first (may be empty).

    `waiting_reason` says why nothing is offered; `verdicts` explain every cluster considered.
    `retry_at_seconds` asks the loop to place again after that many seconds (Incremental).
    """

    workload: str
    offer_to: tuple[ClusterName, ...]
    verdicts: tuple[ClusterVerdict, ...]
    waiting_reason: str = ""
    retry_after_seconds: int | None = None
