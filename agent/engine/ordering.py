"""Queue order and queue membership: who is in which cluster queue, and in what order.

Owns the ordering rules `cycle` applies (kueue.md §2.2–2.3):

- inside a cluster queue: the sticky preemptor first (a workload that issued preemptions
  keeps its place until admitted, so lower workloads cannot take the quota it freed), then
  under admission fair sharing its local queue's usage score (lower first, `fair_usage`), then
  priority (higher first), then the queue-order timestamp (creation, or eviction time after
  a pods-ready requeue), then id — precomputed as `Workload.order_key`;
- across cluster queues within one round of a cycle: entries that would not borrow before
  entries that would, then priority, then timestamp (Kueue's classical iterator); under
  fair sharing the cluster queues' fair-sharing order (`fair_sharing.tournament_key`, lower
  weighted share first) comes before all of that;
- namespace selectors: None selects no namespace, the empty selector every namespace.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.engine.snapshot import ClusterQueue, Workload

__all__ = ["EntryKey", "FairKey", "entry_key", "namespace_selected"]


def namespace_selected(cq: ClusterQueue, labels: Mapping[str, str] | None) -> bool:
    selector = cq.namespace_selector
    if selector is None:
        return False
    return selector.matches(labels or {})


FairKey = tuple[tuple[float, str], ...]
EntryKey = tuple[bool, FairKey, bool, int, float, str]


def entry_key(wl: Workload, borrowing: bool, fair: FairKey = ()) -> EntryKey:
    """Order of heads from different cluster queues within one round of a cycle; `fair` is
    the queue's tournament key under fair sharing (empty otherwise)."""
    return (not wl.preempting, fair, borrowing, -wl.priority, wl.queue_timestamp, wl.id)
