"""The one quantile the benchmarks report (p50, p90, p99 of latencies and CPU holds): the
nearest-rank method, right for a few samples as for many.

Called by the benchmarks that print percentiles (bench.agent_dispatch, agent_state_writes,
federation_dispatch, hub_replay, logs_fanin, qctl_startup, store_throughput).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["nearest_rank"]


def nearest_rank(values: Iterable[float], q: float) -> float:
    """The `q` quantile of `values` by the nearest-rank method: the smallest value with at
    least a `q` share of the values at or below it (so p90 of 3 samples is the largest, not
    the median). ValueError when there are none."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no quantile of no values")
    rank = math.ceil(round(q * len(ordered), 9))  # (0.9 * 70 is 63.00000000000001)
    return ordered[max(0, rank - 1)]
