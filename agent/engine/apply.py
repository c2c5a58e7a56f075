"""Applying a cycle's decisions to a snapshot, as an obedient shell would.

Owns `apply_result`, used by tests, property checks and simulations (and usable by the
agent shell as the reference of what each decision means): admissions set the workload's
admission and admission time; preemptions and evictions remove the admission at once (as
if the pods stopped instantly), record the requeue state and deactivate where asked;
new preemptors become sticky. Pure: returns a new `Snapshot`.
"""

from __future__ import annotations

import dataclasses

from agent.engine.result import CycleResult
from agent.engine.snapshot import Snapshot, Workload, WorkloadId

__all__ = ["apply_result", "finish"]


def _release(wl: Workload, now: float) -> Workload:
    ran = 0.0 if wl.admitted_at is None else max(0.0, now - wl.admitted_at)
    return dataclasses.replace(
        wl,
        admission=None,
        admitted_at=None,
        evicting=False,
        pods_ready=False,
        pods_ready_lost_at=None,
        accumulated_execution_seconds=wl.accumulated_execution_seconds + ran,
    )


def apply_result(snapshot: Snapshot, result: CycleResult) -> Snapshot:
    now = result.now
    wls: dict[WorkloadId, Workload] = dict(snapshot.workloads)
    for victim in result.preempted:
        wls[victim.victim] = _release(wls[victim.victim], now)
    for ev in result.evicted:
        wl = _release(wls[ev.workload], now)
        wls[ev.workload] = dataclasses.replace(
            wl,
            active=wl.active and not ev.deactivate,
            requeue_after=ev.requeue_after,
            requeue_count=wl.requeue_count if ev.requeue_count is None else ev.requeue_count,
            requeued_at=wl.requeued_at if ev.requeued_at is None else ev.requeued_at,
        )
    for adm in result.admitted:
        wls[adm.workload] = dataclasses.replace(
            wls[adm.workload], admission=adm.admission, admitted_at=now, preempting=False
        )
    for wid in result.new_preemptors:
        if wls[wid].admission is None:
            wls[wid] = dataclasses.replace(wls[wid], preempting=True)
    return dataclasses.replace(snapshot, workloads=wls)


def finish(snapshot: Snapshot, *ids: str) -> Snapshot:
    """Remove finished workloads (their quota is released)."""
    wls = {k: v for k, v in snapshot.workloads.items() if k not in ids}
    return dataclasses.replace(snapshot, workloads=wls)
