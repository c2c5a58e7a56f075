"""Gang and partial admission: all pod sets together, or the largest count that works.

Owns the partial-admission search `cycle` runs when a workload does not fit (or cannot
preempt) at full size. A workload is a gang: flavor assignment covers every pod set, and
the admission is all of them or nothing. If one pod set declares `min_count`, the engine
looks for the largest count in [min_count, count) that fits or can preempt, by binary search
(smaller counts never need more quota, so admissibility is monotone in the count), as
Kueue's podset reducer does. Kueue allows `minCount` on one pod set only; with several, the
first is reduced and the others stay whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agent.engine.snapshot import Workload

__all__ = ["largest_admissible", "reducible_pod_set"]

T = TypeVar("T")


def reducible_pod_set(wl: Workload) -> int | None:
    """Index of the pod set partial admission may shrink, or None."""
    for i, ps in enumerate(wl.pod_sets):
        if ps.min_count is not None and ps.min_count < ps.count:
            return i
    return None


def largest_admissible(
    wl: Workload,
    index: int,
    evaluate: Callable[[tuple[int, ...]], T],
    admissible: Callable[[T], bool],
) -> T | None:
    """The outcome for the largest reduced count that is admissible, or None."""
    ps = wl.pod_sets[index]
    base = [p.count for p in wl.pod_sets]
    lo = max(ps.min_count or 1, 1)
    hi = ps.count - 1
    best: T | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        base[index] = mid
        out = evaluate(tuple(base))
        if admissible(out):
            best = out
            lo = mid + 1
        else:
            hi = mid - 1
    return best
