"""The cyclic garbage collector as the hub's and the agent's processes run it.

Python collects young objects after 700 net allocations by default; a busy process then
collects hundreds of times a minute and promotes objects into costly older collections.
Timed with gc.callbacks during bench.federation_dispatch: a third of the agent's and kubesim's
CPU went to the collector, with pauses up to 0.44 s and a p99 submit->admitted near 1 s. Young
objects are collected every 50,000 instead (cyclic garbage still dies young; the older
generations keep their defaults), and what start-up built (modules, pydantic schemas) is left
out of every collection.

Called by: hub.main and agent.main once start-up is done; benchmarks that run code as those
processes do (bench.agent_common, bench.control_plane_floor) call it too.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_collector"]

GC_THRESHOLDS = (50_000, 10, 10)


def tune_collector() -> None:
    """Freeze what start-up built out of the collector's way and set `GC_THRESHOLDS`."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
