"""The status of the hub's queueing objects: each GlobalQueue's workloads pending at the hub,
offered to clusters and bound to one, and its fleet usage; each ClusterSet's member clusters
and how many of them are connected.

Every `interval_seconds`, works out what each object's status should say (from the
dispatcher's queue tallies and the fleet's connections) and writes only the objects whose
status says something else, so an idle fleet writes nothing. Status writes leave the
configuration generation where it is (hub.state), so they cost the dispatcher nothing.

Called by: hub.app (runs it); `qctl get queues` and `qctl get clustersets` read what it writes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.meta import Object
from api.quantity import resource_amount
from api.v1alpha1.federation import ClusterSet, GlobalQueue
from hub.dispatch import Dispatcher
from hub.errors import HubError
from hub.fleet import Fleet
from hub.objects import ObjectRepository
from hub.placement.tally import QueueTally
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
        return written

    async def _write_if_changed(self, obj: Object, want: dict[str, Any]) -> bool:
        stored = getattr(obj, "status", None)
        current = stored.to_wire() if stored is not None else {}
        # Zero counts and empty lists may be stored as absent: compare them as absent.
        if all((current.get(k) or None) == (v or None) for k, v in want.items()):
            return False

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            value["status"] = {**(value.get("status") or {}), **want}
            return value

        try:
            await self.repo.modify(type(obj), obj.metadata.name, None, mutate)
        except HubError as exc:  # deleted meanwhile, or the store is unavailable for now
            log.info("%s %s: status not written: %s", obj.KIND, obj.metadata.name, exc)
            return False
        return True


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
