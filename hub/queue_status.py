"""The status of the hub's queueing objects: each GlobalQueue's workloads pending at the hub,
offered to clusters and bound to one, and its fleet usage; each ClusterSet's member clusters
and how many of them are connected; each ClusterQueue's and Cohort's fair-sharing weighted
share (`status.fairSharing.weightedShare`, the largest its clusters report) and, with each
LocalQueue, Kueue's counts of its workloads waiting for admission and admitted across the
fleet (`pendingWorkloads`, `reservingWorkloads`, `admittedWorkloads`); each
LocalQueue's admission fair sharing usage, as the agents' capacity reports last gave it per
cluster (`status.fairSharing`), summed.

Every `interval_seconds`, works out what each object's status should say (from the
dispatcher's queue tallies and the fleet's connections) and writes only the objects whose
status says something else, so an idle fleet writes nothing. Status writes leave the
configuration generation where it is (hub.state), so they cost the dispatcher nothing.

Called by: hub.app (runs it); `qctl get queues`, `qctl get clustersets` and `qctl get|describe
localqueue` read what it writes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.meta import Object
from api.quantity import resource_amount
from api.v1alpha1.federation import ClusterSet, GlobalQueue
from api.v1alpha1.messages import LocalQueueUsage
from api.v1alpha1.queues import (
    AdmissionFairSharingStatus,
    ClusterQueue,
    Cohort,
    LocalQueue,
    LocalQueueClusterUsage,
    LocalQueueFairSharingStatus,
)
from hub.dispatch import Dispatcher
from hub.errors import HubError
from hub.fleet import Fleet
from hub.objects import ObjectRepository
from hub.placement.tally import QueueCounts, QueueTally
from hub.state import HubState

__all__ = ["QueueStatusWriter"]

log = logging.getLogger(__name__)


class QueueStatusWriter:
    def __init__(
        self,
        state: HubState,
        fleet: Fleet,
        dispatcher: Dispatcher,
        repo: ObjectRepository,
        *,
        interval_seconds: float,
    ) -> None:
        self.state = state
        self.fleet = fleet
        self.dispatcher = dispatcher
        self.repo = repo
        self.interval_seconds = interval_seconds

    async def run(self) -> None:
        await self.state.synced.wait()
        while True:
            await self.write_changed()
            await asyncio.sleep(self.interval_seconds)

    async def write_changed(self) -> int:
        """Write every status that differs from the stored one; how many were written."""
        written = 0
        tallies = self.dispatcher.queue_tallies()
        for gq in self.state.objects(GlobalQueue):
            assert isinstance(gq, GlobalQueue)
            written += await self._write_if_changed(gq, _queue_status(tallies.get(gq.name)))
        for cs in self.state.objects(ClusterSet):
            assert isinstance(cs, ClusterSet)
            members = self.dispatcher.cluster_set_members(cs.name)
            clusters = sorted(members) if not isinstance(members, str) else []
            connected = 0
            for name in clusters:
                cluster = self.fleet.get(name)
                connected += cluster is not None and cluster.connected
            status = {"clusters": clusters, "connectedClusters": connected}
            written += await self._write_if_changed(cs, status)
        shares = self._weighted_shares()
        local_counts, cluster_counts = self.dispatcher.queue_counts()
        for kind in (ClusterQueue, Cohort):
            for obj in self.state.objects(kind):
                assert isinstance(obj, ClusterQueue | Cohort)
                share = shares.get((obj.KIND, obj.metadata.name))
                stored = obj.status.fair_sharing if obj.status is not None else None
                want: dict[str, Any] = {}
                if share is not None or stored is not None:
                    want["fairSharing"] = None if share is None else {"weightedShare": share}
                if isinstance(obj, ClusterQueue):
                    want |= _counts(cluster_counts.get(obj.metadata.name))
                if want:
                    written += await self._write_if_changed(obj, want)
        reported = self._local_queue_usage()
        for lq in self.state.objects(LocalQueue):
            assert isinstance(lq, LocalQueue)
            parts = reported.get(lq.key(), [])
            fair = lq.status.fair_sharing if lq.status is not None else None
            want = _counts(local_counts.get(lq.key()))
            if parts or fair is not None:
                want["fairSharing"] = _fair_sharing(parts)
            written += await self._write_if_changed(lq, want)
        return written

    def _weighted_shares(self) -> dict[tuple[str, str], int]:
        """Fair sharing: each cluster queue's and cohort's weighted share, the largest any
        cluster reports (the cluster where it borrows the most, relative to its weight)."""
        out: dict[tuple[str, str], int] = {}
        for cluster in self.fleet.clusters.values():
            report = cluster.capacity
            for share in report.weighted_shares if report is not None else ():
                key = (share.kind, share.name)
                out[key] = max(out.get(key, 0), share.weighted_share)
        return out

    def _local_queue_usage(self) -> dict[str, list[tuple[str, LocalQueueUsage]]]:
        """Each local queue's usage (by `namespace/name`) in every cluster that reports it."""
        out: dict[str, list[tuple[str, LocalQueueUsage]]] = {}
        for name in sorted(self.fleet.clusters):
            report = self.fleet.clusters[name].capacity
            for usage in report.local_queues if report is not None else ():
                out.setdefault(f"{usage.namespace}/{usage.name}", []).append((name, usage))
        return out

    async def _write_if_changed(self, obj: Object, want: dict[str, Any]) -> bool:
        stored = getattr(obj, "status", None)
        current = stored.to_wire() if stored is not None else {}
        # Zero counts and empty lists may be stored as absent: compare them as absent.
        if all((current.get(k) or None) == (v or None) for k, v in want.items()):
            return False

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            value["status"] = {**(value.get("status") or {}), **want}
            return value

        namespace = obj.metadata.namespace if obj.NAMESPACED else None
        try:
            await self.repo.modify(type(obj), obj.metadata.name, namespace, mutate)
        except HubError as exc:  # deleted meanwhile, or the store is unavailable for now
            log.info("%s %s: status not written: %s", obj.KIND, obj.metadata.name, exc)
            return False
        return True


def _counts(counts: QueueCounts | None) -> dict[str, Any]:
    """Kueue's counts of a ClusterQueue or LocalQueue, across the fleet: waiting for admission
    (at the hub, or offered to a cluster and waiting there) and admitted; every admitted
    workload holds its quota reservation, so reserving counts them too."""
    counts = counts or QueueCounts()
    return {
        "pendingWorkloads": counts.pending,
        "reservingWorkloads": counts.admitted,
        "admittedWorkloads": counts.admitted,
    }


def _queue_status(tally: QueueTally | None) -> dict[str, Any]:
    tally = tally or QueueTally()
    return {
        "pendingWorkloads": tally.pending,
        "dispatchedWorkloads": tally.dispatched,
        "runningWorkloads": tally.running,
        "fleetUsage": {
            resource: resource_amount(resource, amount).canonical()
            for resource, amount in sorted(tally.usage.items())
            if amount
        },
    }


def _fair_sharing(parts: list[tuple[str, LocalQueueUsage]]) -> dict[str, Any] | None:
    """`status.fairSharing` of a local queue from its clusters' usage (None: none reported)."""
    if not parts:
        return None
    totals: dict[str, int] = {}
    for _, usage in parts:
        for resource, amount in usage.consumed_resources.items():
            totals[resource] = totals.get(resource, 0) + amount.milli()
    status = AdmissionFairSharingStatus(
        consumed_resources={r: resource_amount(r, m) for r, m in sorted(totals.items())},
        last_update=max(usage.last_update for _, usage in parts),
        clusters=[
            LocalQueueClusterUsage(
                cluster=cluster,
                consumed_resources=usage.consumed_resources,
                last_update=usage.last_update,
            )
            for cluster, usage in parts
        ],
    )
    return LocalQueueFairSharingStatus(admission_fair_sharing_status=status).to_wire()
