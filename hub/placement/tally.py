"""Per global queue: its workloads pending at the hub, dispatched (offered or bound, not yet
admitted) and running (admitted on a cluster), and the fleet usage of the dispatched and
running — what fleet quotas are checked against and what GlobalQueue status shows. Per local
queue and per cluster queue (the hub's, as a LocalQueue names it): how many of their
workloads wait for admission and how many are admitted — what their status shows, as
Kueue's `pendingWorkloads` and `admittedWorkloads`.

Kept as workloads change rather than summed over every workload each cycle: the shell marks
a workload stale when the mirror's entry changes, and `count` takes its old share out and
puts its new one in. A new configuration counts everything afresh (routes may have moved).
No I/O, no clock.

Called by: hub.dispatch (fleet usage for the cycle, tallies for hub.queue_status).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Protocol

from api.v1alpha1.workload import Workload
from hub.placement.routing import Route, Routing, workload_requests

__all__ = ["QueueCounts", "QueueTally", "Tallies", "tally_state"]


class _Entry(Protocol):
    @property
    def workload(self) -> Workload: ...


@dataclass(frozen=True, slots=True)
class _Share:
    """What one workload adds to its queues' tallies."""

    global_queue: str | None
    state: str  # "pending", "dispatched" or "running"
    requests: Mapping[str, int]
    local_queue: str | None = None
    """`namespace/name`, when the hub has that LocalQueue."""
    cluster_queue: str | None = None


@dataclass
class QueueCounts:
    """A local or cluster queue's workloads: waiting for admission (at the hub or offered to
    a cluster) and admitted (running on one)."""

    pending: int = 0
    admitted: int = 0

    def add(self, state: str, sign: int) -> None:
        if state == "running":
            self.admitted += sign
        else:
            self.pending += sign


@dataclass
class QueueTally:
    pending: int = 0
    dispatched: int = 0
    running: int = 0
    usage: dict[str, int] = field(default_factory=dict)

    def add(self, share: _Share, sign: int = 1) -> None:
        setattr(self, share.state, getattr(self, share.state) + sign)
        for resource, amount in share.requests.items():
            self.usage[resource] = self.usage.get(resource, 0) + sign * amount


def tally_state(wl: Workload, pending: bool) -> str | None:
    """Which count a workload is in, or None (finished, inactive)."""
    if wl.is_condition_true("Finished"):
        return None
    st = wl.status
    if st is not None and st.cluster_name:
        return "running" if wl.is_condition_true("Admitted") else "dispatched"
    if st is not None and st.nominated_cluster_names:
        return "dispatched"
    return "pending" if pending else None


@dataclass
class Tallies:
    _tallies: dict[str, QueueTally] = field(default_factory=dict)
    _local: dict[str, QueueCounts] = field(default_factory=dict)
    _cluster: dict[str, QueueCounts] = field(default_factory=dict)
    _share_of: dict[str, _Share] = field(default_factory=dict)
    _stale: set[str] = field(default_factory=set)
    _generation: int | None = None

    def stale(self, key: str) -> None:
        self._stale.add(key)

    def count(
        self,
        workloads: Mapping[str, _Entry],
        pending: Set[str],
        routing: Routing,
        generation: int,
    ) -> Mapping[str, QueueTally]:
        """Bring the tallies up to date (read-only result)."""
        if self._generation != generation:
            self._generation = generation
            self._tallies, self._share_of = {}, {}
            self._local, self._cluster = {}, {}
            self._stale = set(workloads)
        stale, self._stale = self._stale, set()
        for key in stale:
            self._count(key, workloads, pending, routing)
        return self._tallies

    def _count(
        self, key: str, workloads: Mapping[str, _Entry], pending: Set[str], routing: Routing
    ) -> None:
        old = self._share_of.pop(key, None)
        if old is not None:
            self._add(old, -1)
        entry = workloads.get(key)
        if entry is None:
            return
        wl = entry.workload
        state = tally_state(wl, key in pending)
        if state is None:
            return
        local_key = f"{wl.metadata.namespace or 'default'}/{wl.spec.queue_name}"
        local = routing.local_queues.get(local_key)
        route = routing.route_of(wl)
        global_queue = route.global_queue if isinstance(route, Route) else None
        share = _Share(
            global_queue.name if global_queue is not None else None,
            state,
            workload_requests(wl) if state != "pending" and global_queue is not None else {},
            local_key if local is not None else None,
            local.spec.cluster_queue if local is not None else None,
        )
        self._share_of[key] = share
        self._add(share, 1)

    def _add(self, share: _Share, sign: int) -> None:
        if share.global_queue is not None:
            self._tallies.setdefault(share.global_queue, QueueTally()).add(share, sign)
        if share.local_queue is not None:
            self._local.setdefault(share.local_queue, QueueCounts()).add(share.state, sign)
        if share.cluster_queue is not None:
            self._cluster.setdefault(share.cluster_queue, QueueCounts()).add(share.state, sign)

    def local_queues(self) -> Mapping[str, QueueCounts]:
        """Per local queue (`namespace/name`), as of the last `count` (read-only)."""
        return self._local

    def cluster_queues(self) -> Mapping[str, QueueCounts]:
        """Per cluster queue, as of the last `count` (read-only)."""
        return self._cluster
