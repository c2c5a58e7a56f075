"""Capacity reports: per (cluster queue, flavor, resource) nominal quota, usage and headroom
— what a new workload could still get there, borrowing included — computed from the engine's
quota tree over the current snapshot, plus the node summary from the inventory and, per
flavor with a topology, the room of its domains (agent.topology_summary), and under admission
fair sharing each tracked local queue's usage (the hub shows it in LocalQueue status), and
under fair sharing every cluster queue's and cohort's weighted share (ClusterQueue and Cohort
status).

`capacity_report` is pure. `CapacityPacer` decides when to send: after Hello, then a change
at once, at most once per `debounce` while changes keep coming, and at least once per
`heartbeat`.

Called by: agent.app (the capacity loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime

from agent.engine.fair_sharing import weighted_share_milli
from agent.engine.quota import QuotaTree
from agent.engine.snapshot import (
    ClusterQueueName,
    FlavorName,
    FlavorResource,
    ResourceName,
    Snapshot,
)
from agent.topology_summary import topology_rooms
from api.quantity import Quantity
from api.v1alpha1.messages import (
    CapacityReport,
    HeldWorkload,
    LocalQueueUsage,
    NodeSummary,
    QueueCapacity,
    WeightedShare,
)

__all__ = ["CapacityPacer", "capacity_report"]


def capacity_report(
    *,
    cluster: str,
    snapshot: Snapshot,
    nodes: NodeSummary,
    observed_at: datetime,
    config_revision: int | None,
    local_queues: list[LocalQueueUsage] | None = None,
    admitted: list[HeldWorkload] | None = None,
    usage: Mapping[ClusterQueueName, Mapping[FlavorResource, int]] | None = None,
) -> CapacityReport:
    """`usage`: what `snapshot`'s admitted workloads hold per cluster queue, when the caller
    keeps it (agent.snapshots); None: summed here from the snapshot."""
    if usage is None:
        tree = QuotaTree.from_snapshot(snapshot)
    else:
        tree = QuotaTree.from_usage(snapshot, usage)
    cells: list[QueueCapacity] = []
    for name in sorted(snapshot.cluster_queues):
        cq = snapshot.cluster_queues[name]
        node = tree.cqs[name]
        for group in cq.resource_groups:
            for fq in group.flavors:
                for res in sorted(fq.resources):
                    fr = (FlavorName(fq.flavor), ResourceName(res))
                    headroom = 0 if name in tree.disabled else QuotaTree.available(node, fr)
                    cells.append(
                        QueueCapacity(
                            cluster_queue=name,
                            flavor=fq.flavor,
                            resource=res,
                            nominal=Quantity.from_milli(node.nominal.get(fr, 0)),
                            usage=Quantity.from_milli(node.usage.get(fr, 0)),
                            headroom=Quantity.from_milli(max(0, headroom)),
                        )
                    )
    shares: list[WeightedShare] = []
    if snapshot.config.fair_sharing is not None:
        shares += [
            WeightedShare(kind="ClusterQueue", name=n, weighted_share=weighted_share_milli(node))
            for n, node in sorted(tree.cqs.items())
        ]
        shares += [
            WeightedShare(kind="Cohort", name=n, weighted_share=weighted_share_milli(node))
            for n, node in sorted(tree.cohorts.items())
        ]
    return CapacityReport(
        cluster=cluster,
        weighted_shares=shares,
        observed_at=observed_at,
        config_revision=config_revision,
        queues=cells,
        nodes=nodes,
        topologies=topology_rooms(snapshot),
        local_queues=local_queues or [],
        admitted=admitted or [],
    )


class CapacityPacer:
    """Wake-ups for the capacity loop: `changed()` on any change; `wait()` returns when a
    report is due: at once for a change after a quiet spell, at most once per `debounce`
    while changes keep coming (the changes in between make one report), and at least once
    per `heartbeat`.

    Reporting the first change at once matters for throughput: the hub offers a cluster only
    the room its reports show, so every report held back holds back the work that would
    fill the room a finished workload freed (a trailing debounce of 1 s kept 16 one-CPU
    slots at about 17 short jobs a second)."""

    def __init__(self, *, debounce: float, heartbeat: float) -> None:
        self.debounce = debounce
        self.heartbeat = heartbeat
        self._changed = asyncio.Event()
        self._last = -debounce
        """Loop time of the last report due (the first change is never held)."""

    def changed(self) -> None:
        self._changed.set()

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
            async with asyncio.timeout(self.heartbeat):
                await self._changed.wait()
        except TimeoutError:
            self._last = loop.time()
            return
        hold = self._last + self.debounce - loop.time()
        if hold > 0:
            await asyncio.sleep(hold)
        self._changed.clear()
        self._last = loop.time()
