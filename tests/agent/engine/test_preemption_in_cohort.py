"""Preemption across a cohort: reclaimWithinCohort and borrowWithinCohort (kueue.md §2.5)."""

from __future__ import annotations

import dataclasses

import pytest

from agent.engine.apply import apply_result
from agent.engine.result import PendingCode, PreemptionReason
from tests.builders import (
    CQBuilder,
    WorkloadBuilder,
    admitted_ids,
    cq,
    ids,
    preempted_ids,
    reason_of,
    run,
    snapshot,
    wl,
)


def pair(
    reclaim: str = "Never",
    within: str = "Never",
    borrow_within: str = "Never",
    threshold: int | None = None,
) -> list[CQBuilder]:
    return [
        cq("a")
        .cohort("c")
        .quota("cpu", nominal="6")
        .preemption(
            within=within, reclaim=reclaim, borrow_within=borrow_within, threshold=threshold
        ),
        cq("b").cohort("c").quota("cpu", nominal="6"),
    ]


def in_b(name: str, cpu: str, prio: int, at: float = 0.0) -> WorkloadBuilder:
    return wl(name).request("cpu", cpu).priority(prio).admitted("b", at=at)


def in_a(name: str, cpu: str, prio: int) -> WorkloadBuilder:
    return wl(name).request("cpu", cpu).priority(prio).admitted("a")


RECLAIM = [
    pytest.param(
        pair(reclaim="Any"),
        [in_b("b-low", "4", 0, at=1), in_b("b-high", "6", 100, at=2)],
        wl("new").queue("a").request("cpu", "4").priority(10),
        ["b-low"],
        PreemptionReason.IN_COHORT_RECLAMATION,
        id="reclaim Any takes back nominal quota from a borrowing queue",
    ),
    pytest.param(
        pair(reclaim="Any"),
        [in_b("b-high", "4", 100, at=1), in_b("b-higher", "6", 200, at=2)],
        wl("new").queue("a").request("cpu", "4").priority(10),
        ["b-high"],
        PreemptionReason.IN_COHORT_RECLAMATION,
        id="reclaim Any ignores priority",
    ),
    pytest.param(
        pair(reclaim="LowerPriority"),
        [in_b("b-high", "4", 100, at=1), in_b("b-higher", "6", 200, at=2)],
        wl("new").queue("a").request("cpu", "4").priority(10),
        [],
        None,
        id="reclaim LowerPriority spares higher priorities in the cohort",
    ),
    pytest.param(
        pair(reclaim="Any"),
        [in_b("b-full", "6", 0), in_a("a-run", "6", 0)],
        wl("new").queue("a").request("cpu", "2").priority(10),
        [],
        None,
        id="a queue that is not borrowing is never reclaimed from",
    ),
    pytest.param(
        pair(reclaim="Any", within="LowerPriority"),
        [in_b("b-big", "8", 0), in_a("a-low", "2", 0)],
        wl("new").queue("a").request("cpu", "4").priority(10),
        ["b-big"],
        PreemptionReason.IN_COHORT_RECLAMATION,
        id="borrowing queues' workloads go before the own queue's",
    ),
]


@pytest.mark.parametrize(("cqs", "admitted", "incoming", "victims", "why"), RECLAIM)
def test_reclaim_within_cohort(
    cqs: list[CQBuilder],
    admitted: list[WorkloadBuilder],
    incoming: WorkloadBuilder,
    victims: list[str],
    why: PreemptionReason | None,
) -> None:
    result = run(snapshot(cqs=cqs, workloads=[*admitted, incoming]))
    assert preempted_ids(result) == ids(*victims)
    if why is not None:
        assert {p.reason for p in result.preempted} == {why}
    else:
        assert admitted_ids(result) == []


# Kueue's borrowWithinCohort: a preemptor that must borrow may preempt borrowing workloads of
# other queues, only below maxPriorityThreshold (here a: 4 of 6 used, b: 8 of 6 used).
BORROW = [
    pytest.param(
        pair(reclaim="Any"),
        [],
        id="without borrowWithinCohort a borrowing preemptor cannot reclaim",
    ),
    pytest.param(
        pair(reclaim="Any", borrow_within="LowerPriority"),
        ["b-low"],
        id="borrowWithinCohort LowerPriority preempts a lower borrowing workload",
    ),
    pytest.param(
        pair(reclaim="Any", borrow_within="LowerPriority", threshold=100),
        ["b-low"],
        id="a victim at or below maxPriorityThreshold may be preempted while borrowing",
    ),
    pytest.param(
        pair(reclaim="Any", borrow_within="LowerPriority", threshold=30),
        [],
        id="a victim above maxPriorityThreshold may not be preempted while borrowing",
    ),
]


@pytest.mark.parametrize(("cqs", "victims"), BORROW)
def test_borrow_within_cohort(cqs: list[CQBuilder], victims: list[str]) -> None:
    workloads = [
        in_a("a-run", "4", 150),
        in_b("b-low", "4", 50, at=1),
        in_b("b-high", "4", 200, at=2),
        wl("new").queue("a").request("cpu", "4").priority(150),
    ]
    result = run(snapshot(cqs=cqs, workloads=workloads))
    assert preempted_ids(result) == ids(*victims)
    if victims:
        assert {p.reason for p in result.preempted} == {
            PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        }
    else:
        assert reason_of(result, "new").code is PendingCode.NO_PREEMPTION_CANDIDATES


def test_a_preemptor_waits_for_its_victims_without_preempting_again() -> None:
    cqs = [cq("q").quota("cpu", nominal="4").preemption(within="LowerPriority")]
    victim = wl("victim").request("cpu", "4").priority(0).admitted("q").set(evicting=True)
    preemptor = wl("p").queue("q").request("cpu", "4").priority(5).set(preempting=True)
    small = wl("small").queue("q").request("cpu", "1").priority(0).created(1)
    result = run(snapshot(cqs=cqs, workloads=[victim, preemptor, small]))
    assert preempted_ids(result) == []
    assert reason_of(result, "p").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
    # The quota the victim releases is reserved for the sticky preemptor.
    assert admitted_ids(result) == []
    assert reason_of(result, "small").code is PendingCode.NO_PREEMPTION_CANDIDATES


def test_the_sticky_preemptor_is_first_in_its_queue() -> None:
    cqs = [cq("q").quota("cpu", nominal="4")]
    sticky = wl("sticky").queue("q").request("cpu", "4").priority(0).created(9)
    sticky = sticky.set(preempting=True)
    other = wl("other").queue("q").request("cpu", "4").priority(100).created(0)
    result = run(snapshot(cqs=cqs, workloads=[sticky, other]))
    assert admitted_ids(result) == ids("sticky")


def test_two_preemptors_in_one_cycle_never_share_a_victim() -> None:
    cqs = [cq("q").quota("cpu", nominal="4").preemption(within="LowerPriority")]
    workloads = [
        wl("v").request("cpu", "4").priority(0).admitted("q"),
        wl("p1").queue("q").request("cpu", "4").priority(5).created(1),
        wl("p2").queue("q").request("cpu", "4").priority(5).created(2),
    ]
    result = run(snapshot(cqs=cqs, workloads=workloads))
    assert [(p.victim, p.preemptor) for p in result.preempted] == [("default/v", "default/p1")]
    assert reason_of(result, "p2").code is PendingCode.NO_PREEMPTION_CANDIDATES


def test_over_cycles_a_preemptor_gets_the_quota_its_victims_release() -> None:
    cqs = [cq("q").quota("cpu", nominal="4").preemption(within="LowerPriority")]
    snap = snapshot(
        cqs=cqs,
        workloads=[
            wl("victim").request("cpu", "4").priority(0).admitted("q"),
            wl("p").queue("q").request("cpu", "4").priority(5).created(1),
        ],
    )
    first = run(snap, now=1)
    assert preempted_ids(first) == ids("victim")
    snap = apply_result(snap, first)
    # The victim is requeued; a younger low-priority workload arrives meanwhile.
    wls = dict(snap.workloads)
    late = wl("late").queue("q").request("cpu", "1").priority(9).created(2).build()
    wls[late.id] = late
    snap = dataclasses.replace(snap, workloads=wls)
    second = run(snap, now=2)
    assert admitted_ids(second) == ids("p")
    assert reason_of(second, "late").code is PendingCode.NO_PREEMPTION_CANDIDATES


def test_workloads_already_being_evicted_are_counted_on_first() -> None:
    cqs = [cq("q").quota("cpu", nominal="4").preemption(within="LowerPriority")]
    workloads = [
        wl("leaving").request("cpu", "2").priority(50).admitted("q").set(evicting=True),
        wl("low").request("cpu", "2").priority(0).admitted("q"),
        wl("p").queue("q").request("cpu", "2").priority(10),
    ]
    result = run(snapshot(cqs=cqs, workloads=workloads))
    # The evicting workload frees enough: no new victim, the preemptor just waits.
    assert preempted_ids(result) == []
    assert reason_of(result, "p").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS


def test_a_request_above_nominal_preempts_only_with_borrow_within_cohort() -> None:
    # Kueue: a workload is eligible to preempt when its request fits the nominal quota or
    # borrowWithinCohort is enabled.
    def cqs(borrow_within: str) -> list[CQBuilder]:
        return [
            cq("q")
            .cohort("c")
            .quota("cpu", nominal="4")
            .preemption(within="LowerPriority", reclaim="Any", borrow_within=borrow_within),
            cq("idle").cohort("c").quota("cpu", nominal="4"),
        ]

    workloads = [
        wl("low").request("cpu", "4").priority(0).admitted("q"),
        wl("big").queue("q").request("cpu", "6").priority(10),
    ]
    never = run(snapshot(cqs=cqs("Never"), workloads=workloads))
    assert never.preempted == ()
    assert reason_of(never, "big").code is PendingCode.WAITING_FOR_QUOTA
    allowed = run(snapshot(cqs=cqs("LowerPriority"), workloads=workloads))
    assert preempted_ids(allowed) == ids("low")


# Kueue's classic target selection (concepts/preemption, "Targets"), one case per step that
# decides the outcome. "a" preempts (reclaim Any, within LowerPriority); "new" needs 3 or 4.
def step_queues(*, b_nominal: str = "6", with_c: bool = False) -> list[CQBuilder]:
    cqs = [
        cq("a")
        .cohort("c")
        .quota("cpu", nominal="6")
        .preemption(within="LowerPriority", reclaim="Any"),
        cq("b").cohort("c").quota("cpu", nominal=b_nominal),
    ]
    if with_c:
        cqs.append(cq("c-q").cohort("c").quota("cpu", nominal="6"))
    return cqs


def in_queue(name: str, queue: str, cpu: str, prio: int, at: float = 0.0) -> WorkloadBuilder:
    return wl(name).request("cpu", cpu).priority(prio).admitted(queue, at=at)


def test_step_one_when_every_candidate_is_in_the_own_queue_the_result_may_borrow() -> None:
    # a uses its 6 (a-keep 3 + a-low 3) and b leaves 1 idle: once a-low is preempted, new
    # (4) runs beside a-keep at 7 of a's 6, borrowing b's idle CPU.
    workloads = [
        in_queue("a-keep", "a", "3", 20),
        in_queue("a-low", "a", "3", 0),
        wl("new").queue("a").request("cpu", "4").priority(10),
        in_queue("b-run", "b", "5", 0),
    ]
    result = run(snapshot(cqs=step_queues(), workloads=workloads))
    assert preempted_ids(result) == ids("a-low")
    assert {p.reason for p in result.preempted} == {PreemptionReason.IN_CLUSTER_QUEUE}


def test_step_three_under_nominal_the_result_may_not_borrow() -> None:
    # a uses 4 of 6, b borrows 2 (8 of 6): the cohort's 12 are full. Taking b's newest
    # workload alone would let new in only by borrowing (4+4 > 6), so a's own lower
    # workload goes instead, and minimisation puts b's back.
    workloads = [
        in_queue("a-low", "a", "4", 0),
        in_queue("b-1", "b", "4", 0, at=1),
        in_queue("b-2", "b", "4", 0, at=2),
        wl("new").queue("a").request("cpu", "4").priority(10),
    ]
    result = run(snapshot(cqs=step_queues(), workloads=workloads))
    assert preempted_ids(result) == ids("a-low")
    assert admitted_ids(result) == []


def test_step_four_when_nominal_cannot_suffice_only_own_workloads_go_and_it_borrows() -> None:
    # a holds 4 it may not preempt (a-high) + 1 (a-low) of its 6; new needs 3, so a ends above
    # nominal whatever is preempted: step 3 fails, step 4 takes a-low and borrows 1 of the
    # cohort's 2 idle CPUs (c-q uses 4 of 6) — b's borrowed workload is left alone.
    workloads = [
        in_queue("a-high", "a", "4", 20),
        in_queue("a-low", "a", "1", 0),
        in_queue("b-run", "b", "7", 0),
        in_queue("c-run", "c-q", "4", 0),
        wl("new").queue("a").request("cpu", "3").priority(10),
    ]
    result = run(snapshot(cqs=step_queues(with_c=True), workloads=workloads))
    assert preempted_ids(result) == ids("a-low")
    assert {p.reason for p in result.preempted} == {PreemptionReason.IN_CLUSTER_QUEUE}
