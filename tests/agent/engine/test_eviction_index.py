"""The carry's eviction index: an incremental cycle asks about the running workloads whose
eviction time has come, not about every running workload (`podsready.evict_at`,
`Carry.eviction_due`); the random streams of test_incremental_cycle check that it decides
as the full cycle does."""

from __future__ import annotations

import dataclasses
import math

from agent.engine.carry import Carry
from agent.engine.cycle import schedule, schedule_incremental
from agent.engine.podsready import evict_at
from agent.engine.snapshot import EngineConfig, Snapshot, WaitForPodsReady, WorkloadId
from tests.builders import cq, lq, snapshot, wl

READY = EngineConfig(wait_for_pods_ready=WaitForPodsReady(enabled=True, timeout_seconds=60.0))


def _running(n: int, config: EngineConfig = READY) -> Snapshot:
    """`n` admitted workloads, the i-th admitted at second i, none with its pods ready."""
    workloads = [
        wl(f"r{i}").queue("q0").request("cpu", "1").admitted("q0", at=float(i)) for i in range(n)
    ]
    return snapshot(
        cqs=[cq("q0").quota("cpu", nominal=str(n))],
        lqs=[lq("q0", "q0")],
        workloads=workloads,
        config=config,
    )


# when a workload falls due ------------------------------------------------------------------


def test_a_workload_falls_due_at_its_earliest_deadline() -> None:
    snap = _running(1)
    (one,) = snap.workloads.values()
    assert evict_at(snap, one) == 60.0  # pods not ready within the timeout
    capped = dataclasses.replace(one, max_execution_seconds=30)
    assert evict_at(snap, capped) == 30.0
    spent = dataclasses.replace(capped, accumulated_execution_seconds=20.0)
    assert evict_at(snap, spent) == 10.0


def test_a_workload_with_nothing_to_wait_for_never_falls_due() -> None:
    snap = _running(1, EngineConfig())
    (one,) = snap.workloads.values()
    assert evict_at(snap, one) is None
    assert evict_at(_running(1), dataclasses.replace(one, pods_ready=True)) is None
    assert evict_at(_running(1), dataclasses.replace(one, evicting=True)) is None


def test_an_inactive_workload_or_one_without_an_admission_time_is_looked_at_each_cycle() -> None:
    snap = _running(1)
    (one,) = snap.workloads.values()
    assert evict_at(snap, dataclasses.replace(one, active=False)) == -math.inf
    # Its deadlines count from each cycle's own time: never due, but a wake-up every cycle.
    assert evict_at(snap, dataclasses.replace(one, admitted_at=None)) == -math.inf


# the index ----------------------------------------------------------------------------------


def test_a_cycle_over_many_running_workloads_looks_at_none_before_a_deadline() -> None:
    snap = _running(2_000)
    result, carry = schedule_incremental(snap, 10.0)
    assert carry.eviction_due(10.0) == ([], 60.0)
    assert result.next_wakeup == schedule(snap, 10.0).next_wakeup == 60.0


def test_the_due_ones_are_those_past_their_deadline_and_they_stay_due_until_they_change() -> None:
    snap = _running(2_000)
    _, carry = schedule_incremental(snap, 10.0)
    due, after = carry.eviction_due(62.5)
    assert sorted(w.id for w in due) == ["default/r0", "default/r1", "default/r2"]
    assert after == 63.0
    result, carry = schedule_incremental(snap, 62.5, carry, set())
    assert sorted(e.workload for e in result.evicted) == sorted(
        e.workload for e in schedule(snap, 62.5).evicted
    )
    assert len(carry.eviction_due(62.5)[0]) == 3  # not applied yet: evicted again
    # Once evicting, they are out of the index.
    evicting = {
        wid: dataclasses.replace(w, evicting=True)
        for wid, w in snap.workloads.items()
        if wid in {"default/r0", "default/r1", "default/r2"}
    }
    moved = dataclasses.replace(snap, workloads={**snap.workloads, **evicting})
    _, carry = schedule_incremental(moved, 62.6, carry, set(evicting))
    assert carry.eviction_due(62.6) == ([], 63.0)


def test_stale_entries_do_not_pile_up_as_running_workloads_change() -> None:
    snap = _running(10)
    _, carry = schedule_incremental(snap, 1.0)
    target = WorkloadId("default/r0")
    for i in range(500):
        changed = dataclasses.replace(snap.workloads[target], admitted_at=float(i))
        snap = dataclasses.replace(snap, workloads={**snap.workloads, target: changed})
        _, carry = schedule_incremental(snap, 1.0, carry, {target})
    assert isinstance(carry, Carry)
    assert len(carry.evict_heap) <= 2 * len(carry.evict_when) + 64 + 1
    assert carry.evict_when[target] == 499.0 + 60.0
