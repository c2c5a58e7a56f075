"""What the admission cycle keeps between cycles: each cluster queue's waiting workloads in
queue order, indexed by shape and gate, so a cycle looks again only at what changed.

Owns `Carry`, the explicit state `cycle.schedule_incremental` takes and returns (never a
hidden global). It holds, as of the last cycle's snapshot:

- the admitted workloads, also by cluster queue with their admissions' summed usage and how
  many are being evicted, so a cycle puts the usage on its quota tree once per queue and
  builds preemption candidates only for a queue it searches, without walking them all;
- every waiting workload routed to its cluster queue (`QueueIndex`: sorted by
  `Workload.order_key`, with the distinct shapes and the largest order key of each, the local
  queues and namespaces present, and the workloads with a backoff), or the reason it could
  not be routed (inactive, missing local or cluster queue);
- the previous cycle's pending reasons, so a result can say which of them changed;
- when each admitted workload may next fall due for eviction (`podsready.evict_at`), in a
  heap, so a cycle asks `podsready.evictions` about the due ones only.

`refresh` brings it up to date from the ids the caller says changed since the last cycle
(added, removed or replaced workload objects); without them, or when the configuration
objects are not the same ones (flavors, queues, cohorts, namespaces, engine config), it is
rebuilt from the whole snapshot. Called by `cycle` only; callers hold it and pass it back.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING

from agent.engine.podsready import evict_at
from agent.engine.result import PendingCode, PendingReason, Unblock
from agent.engine.snapshot import (
    ClusterQueueName,
    FlavorResource,
    LocalQueueKey,
    OrderKey,
    Snapshot,
    Workload,
    WorkloadId,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agent.engine.topology import Placer

__all__ = ["INACTIVE", "Carry", "QueueIndex", "ShapeRun", "no_cluster_queue"]

_ORDER = attrgetter("order_key")


def no_cluster_queue(
    local_queue: LocalQueueKey, cluster_queue: ClusterQueueName | None
) -> PendingReason:
    """Why a workload of `local_queue` is routed nowhere: the local queue does not exist
    (`cluster_queue` None), or the cluster queue it names does not."""
    if cluster_queue is None:
        return PendingReason(
            PendingCode.LOCAL_QUEUE_NOT_FOUND,
            f"local queue {local_queue} does not exist",
            Unblock.USER_ACTION,
        )
    return PendingReason(
        PendingCode.CLUSTER_QUEUE_NOT_FOUND,
        f"cluster queue {cluster_queue} of local queue {local_queue} does not exist",
        Unblock.USER_ACTION,
    )


INACTIVE = PendingReason(
    PendingCode.INACTIVE, "workload is inactive (spec.active=false)", Unblock.USER_ACTION
)


class ShapeRun:
    """The waiting workloads of one shape in one cluster queue: their order keys, sorted."""

    __slots__ = ("keys", "shape")

    def __init__(self, shape: tuple[object, ...]) -> None:
        self.shape = shape
        self.keys: list[OrderKey] = []


class QueueIndex:
    """One cluster queue's waiting workloads in queue order, and what a cycle asks of its
    tail without walking it: which shapes are in it, under which local queues and
    namespaces, and who waits out a backoff."""

    __slots__ = ("backoff", "collided", "items", "local_queues", "namespaces", "shapes")

    def __init__(self) -> None:
        self.items: list[Workload] = []
        self.shapes: dict[int, ShapeRun] = {}
        """By `Workload.shape_hash`."""
        self.collided = False
        """Two different shapes with one hash were seen: the index cannot tell them apart, so
        cycles walk this queue workload by workload (as the look-at-everything cycle does)."""
        self.local_queues: dict[str, int] = {}
        self.namespaces: dict[str, int] = {}
        self.backoff: dict[WorkloadId, Workload] = {}
        """Workloads with a `requeue_after` (gated while it is in the future)."""

    def insert(self, wl: Workload) -> None:
        key = wl.order_key
        items = self.items
        items.insert(bisect_left(items, key, key=_ORDER), wl)
        run = self.shapes.get(wl.shape_hash)
        if run is None:
            run = self.shapes[wl.shape_hash] = ShapeRun(wl.shape)
        elif run.shape is not wl.shape and run.shape != wl.shape:
            self.collided = True
        run.keys.insert(bisect_left(run.keys, key), key)
        _count(self.local_queues, wl.local_queue, 1)
        _count(self.namespaces, wl.namespace, 1)
        if wl.requeue_after is not None:
            self.backoff[wl.id] = wl

    def remove(self, wl: Workload) -> None:
        key = wl.order_key
        items = self.items
        at = bisect_left(items, key, key=_ORDER)
        assert items[at].id == wl.id, "removing a workload the index does not hold"
        del items[at]
        run = self.shapes[wl.shape_hash]
        del run.keys[bisect_left(run.keys, key)]
        if not run.keys:
            del self.shapes[wl.shape_hash]
        _count(self.local_queues, wl.local_queue, -1)
        _count(self.namespaces, wl.namespace, -1)
        self.backoff.pop(wl.id, None)


def _count(counts: dict[str, int], key: str, step: int) -> None:
    left = counts.get(key, 0) + step
    if left:
        counts[key] = left
    else:
        del counts[key]


class Carry:
    """The state one admission cycle leaves for the next; see the module docstring."""

    __slots__ = (
        "admitted",
        "config",
        "evict_heap",
        "evict_when",
        "evicting",
        "missing",
        "placer",
        "previous",
        "queues",
        "running",
        "unrouted",
        "usage",
        "waiting",
    )

    def __init__(self) -> None:
        self.config: tuple[object, ...] = ()
        """The configuration objects of the snapshot the index was built for."""
        self.running: dict[WorkloadId, Workload] = {}
        self.admitted: dict[ClusterQueueName, dict[WorkloadId, Workload]] = {}
        """The running ones by the cluster queue of their admission."""
        self.usage: dict[ClusterQueueName, dict[FlavorResource, int]] = {}
        """The sum of their admissions' usage, by cluster queue (with `admitted`)."""
        self.evicting: dict[ClusterQueueName, int] = {}
        """How many of them are being evicted, by cluster queue (none: absent)."""
        self.evict_when: dict[WorkloadId, float] = {}
        """The running ones that may fall due for eviction, and from when (`evict_at`)."""
        self.evict_heap: list[tuple[float, WorkloadId]] = []
        """`evict_when` as a heap; an entry that no longer matches it is stale and skipped."""
        self.waiting: dict[WorkloadId, Workload] = {}
        """Every waiting workload, routed or not (what `remove` must find again)."""
        self.queues: dict[ClusterQueueName, QueueIndex] = {}
        self.unrouted: dict[WorkloadId, PendingReason] = {}
        self.missing: dict[LocalQueueKey, PendingReason] = {}
        """One reason per missing local queue (or its missing cluster queue), shared."""
        self.previous: Mapping[WorkloadId, PendingReason] | None = None
        """The last cycle's pending reasons (None: no cycle yet, or the index was rebuilt)."""
        self.placer: Placer | None = None
        """Node capacity for flavors with a topology, kept in step with each snapshot."""

    def refresh(self, snapshot: Snapshot, changed: Iterable[WorkloadId] | None) -> bool:
        """Bring the index to `snapshot`; `changed`: the ids whose workload object may differ
        since the last cycle (None: unknown). True when it was updated from `changed` alone,
        False when it was rebuilt."""
        config = (
            snapshot.flavors,
            snapshot.cluster_queues,
            snapshot.local_queues,
            snapshot.cohorts,
            snapshot.namespaces,
            snapshot.config,
        )
        same = len(config) == len(self.config) and all(
            a is b for a, b in zip(config, self.config, strict=True)
        )
        if changed is None or not same:
            self.config = config
            self.running.clear()
            self.admitted.clear()
            self.usage.clear()
            self.evicting.clear()
            self.evict_when.clear()
            self.evict_heap.clear()
            self.waiting.clear()
            self.queues.clear()
            self.unrouted.clear()
            self.missing.clear()
            self.previous = None
            for wl in snapshot.workloads.values():
                self._place(snapshot, wl)
            return False
        workloads = snapshot.workloads
        for wid in changed:
            old = self.running.pop(wid, None)
            if old is not None:
                self._release(old)
            else:
                old = self.waiting.pop(wid, None)
                if old is not None:
                    self._unplace(snapshot, old)
            new = workloads.get(wid)
            if new is not None:
                self._place(snapshot, new)
        return True

    def eviction_due(self, now: float) -> tuple[list[Workload], float | None]:
        """The running workloads whose `evict_at` has come by `now` (what `evictions` must
        look at this cycle; they stay due until they change), and the earliest `evict_at`
        after `now` (None: none)."""
        heap, when = self.evict_heap, self.evict_when
        if len(heap) > 2 * len(when) + 64:
            # Stale entries pile up as running workloads change: start the heap afresh.
            heap[:] = [(t, wid) for wid, t in when.items()]
            heapq.heapify(heap)
        due: dict[WorkloadId, Workload] = {}
        kept: list[tuple[float, WorkloadId]] = []
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            t, wid = entry
            if when.get(wid) == t and wid not in due:
                due[wid] = self.running[wid]
                kept.append(entry)
        while heap and when.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        after = heap[0][0] if heap else None
        for entry in kept:
            heapq.heappush(heap, entry)
        return list(due.values()), after

    def _route(self, snapshot: Snapshot, wl: Workload) -> ClusterQueueName | PendingReason:
        if not wl.active:
            return INACTIVE
        key = wl.local_queue
        lq = snapshot.local_queues.get(key)
        if lq is not None and lq.cluster_queue in snapshot.cluster_queues:
            return lq.cluster_queue
        reason = self.missing.get(key)
        if reason is None:
            cq = lq.cluster_queue if lq is not None else None
            reason = self.missing[key] = no_cluster_queue(key, cq)
        return reason

    def _place(self, snapshot: Snapshot, wl: Workload) -> None:
        adm = wl.admission
        if adm is not None:
            self.running[wl.id] = wl
            name = adm.cluster_queue
            members = self.admitted.get(name)
            if members is None:
                members = self.admitted[name] = {}
                self.usage[name] = {}
            members[wl.id] = wl
            usage = self.usage[name]
            for fr, amount in adm.total.items():
                usage[fr] = usage.get(fr, 0) + amount
            if wl.evicting:
                self.evicting[name] = self.evicting.get(name, 0) + 1
            when = evict_at(snapshot, wl)
            if when is not None:
                self.evict_when[wl.id] = when
                heapq.heappush(self.evict_heap, (when, wl.id))
            return
        self.waiting[wl.id] = wl
        where = self._route(snapshot, wl)
        if isinstance(where, PendingReason):
            self.unrouted[wl.id] = where
            return
        queue = self.queues.get(where)
        if queue is None:
            queue = self.queues[where] = QueueIndex()
        queue.insert(wl)

    def _release(self, wl: Workload) -> None:
        """Take a running workload (just taken out of `running`) out of its queue's sums."""
        adm = wl.admission
        assert adm is not None
        name = adm.cluster_queue
        members = self.admitted[name]
        del members[wl.id]
        self.evict_when.pop(wl.id, None)
        if wl.evicting:
            left = self.evicting[name] - 1
            if left:
                self.evicting[name] = left
            else:
                del self.evicting[name]
        if not members:
            del self.admitted[name]
            del self.usage[name]  # (no sum of differences left behind)
            return
        usage = self.usage[name]
        for fr, amount in adm.total.items():
            usage[fr] -= amount

    def _unplace(self, snapshot: Snapshot, wl: Workload) -> None:
        where = self._route(snapshot, wl)
        if isinstance(where, PendingReason):
            del self.unrouted[wl.id]
            return
        queue = self.queues[where]
        queue.remove(wl)
        if not queue.items:
            del self.queues[where]
