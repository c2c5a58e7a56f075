"""The frozen input of placement: what the hub knows about its member clusters and about one
workload waiting to be placed.

Built by the hub's dispatch loop from agents' capacity reports and the stored workload; read
only by `hub.placement.core`. Resources are exact integers in milli-units, keyed by resource
name, as agents report them (api.quantity.Quantity.milli).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NewType

from api.k8s.core import LabelSelectorRequirement
from hub.placement.topology import TopologyNeed, TopologyView

__all__ = [
    "ClusterName",
    "ClusterView",
    "DispatchMode",
    "FlavorHeadroom",
    "Offer",
    "PlacementRequest",
    "PreferredTerm",
    "QueueView",
]

ClusterName = NewType("ClusterName", str)


@dataclass(frozen=True, slots=True)
class FlavorHeadroom:
    """One flavor of one cluster queue: what it could still admit now, and its size.

    `headroom` counts what the queue may use right away including what it may borrow from its
    cohort; `capacity` is its nominal quota plus borrowing limit (what it could ever hold),
    which tells a workload that is merely waiting from one that can never fit.
    """

    flavor: str
    headroom: Mapping[str, int]
    capacity: Mapping[str, int]
    reclaimable: Mapping[str, int] = field(default_factory=dict)
    """Its nominal quota not in use (nominal − usage, never below 0): what it may take back
    from the borrowers of its cohort by preemption, when its policy lets it."""

    def minus(self, used: Mapping[str, int]) -> FlavorHeadroom:
        """This cell with `used` taken (by offers booked on it): from its headroom, and from
        the quota it could take back."""
        return FlavorHeadroom(
            self.flavor,
            {r: v - used.get(r, 0) for r, v in self.headroom.items()},
            self.capacity,
            {r: v - used.get(r, 0) for r, v in self.reclaimable.items()},
        )


@dataclass(frozen=True, slots=True)
class QueueView:
    """A cluster queue as one cluster reports it. Flavors in the queue's preference order."""

    name: str
    flavors: tuple[FlavorHeadroom, ...]
    pending_workloads: int = 0
    reclaims: bool = False
    """It is in a cohort and takes back its lent quota from any borrower
    (`preemption.reclaimWithinCohort: Any`): its `reclaimable` room is room by preemption."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    name: ClusterName
    labels: Mapping[str, str]
    connected: bool
    cordoned: bool = False
    queues: Mapping[str, QueueView] = field(default_factory=dict)
    reported: bool = True
    """Its agent has reported its capacity since connecting (until then its queues are not
    known, which must not read as "it has none")."""
    topologies: Mapping[str, TopologyView] | None = None
    """Per flavor with a topology, its domains' room as reported (None: its agent reports
    none, being older; hub.placement.topology)."""


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    match_expressions: tuple[LabelSelectorRequirement, ...]


class DispatchMode:
    """The dispatch policies of a GlobalQueue (api.v1alpha1.federation.DispatchPolicy)."""

    BEST_FIT = "BestFit"
    ALL_AT_ONCE = "AllAtOnce"
    INCREMENTAL = "Incremental"


@dataclass(frozen=True, slots=True)
class Offer:
    """A past offer of this workload to a cluster, and how it ended (None = still open)."""

    cluster: ClusterName
    offered_at: datetime
    outcome: str | None = None  # "rejected" | "timeout" | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """One workload waiting at the hub.

    `requests` is the workload's total per resource (all pod sets at their full counts) and
    `min_requests` the total at the pod sets' minimum counts (partial admission); both in
    milli-units. `cluster_set` lists the clusters the workload's global queue targets.
    """

    workload: str
    cluster_queue: str
    requests: Mapping[str, int]
    cluster_set: frozenset[ClusterName]
    min_requests: Mapping[str, int] | None = None
    required_terms: tuple[tuple[LabelSelectorRequirement, ...], ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()
    mode: str = DispatchMode.BEST_FIT
    step_size: int = 1
    interval_seconds: int = 300
    offers: tuple[Offer, ...] = ()
    topology: tuple[TopologyNeed, ...] = ()
    """Its pod sets that require one domain of a topology level."""
    preemptible: Mapping[ClusterName, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    """Per cluster and flavor of its cluster queue, what the queue's admitted workloads of a
    lower priority hold there (per resource, milli-units), when the queue preempts lower
    priorities (`withinClusterQueue`): room its agent can free for it. Filled by the
    dispatch cycle only once nothing fits now."""
