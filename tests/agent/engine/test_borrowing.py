"""Borrowing within a cohort, including Kueue's documented examples (cluster_queue.md)."""

from __future__ import annotations

import pytest

from agent.engine.result import PendingCode
from tests.builders import (
    CQBuilder,
    WorkloadBuilder,
    admitted_ids,
    cq,
    ids,
    reason_of,
    run,
    snapshot,
    wl,
)


def team(name: str, cpu: str, borrowing: str | None = None) -> CQBuilder:
    return cq(name).cohort("team-ab").quota("cpu", nominal=cpu, borrowing=borrowing)


# Kueue docs "Borrowing example": team-a-cq 9 CPU, team-b-cq 12 CPU, same cohort.
# Kueue docs "BorrowingLimit": team-a-cq 9 CPU with borrowingLimit 1.
CASES = [
    pytest.param(
        [team("team-a-cq", "9"), team("team-b-cq", "12")],
        [wl("big").queue("team-a-cq").request("cpu", "21")],
        ["big"],
        id="an idle cohort lets team-a use its 9 plus team-b's 12 CPUs",
    ),
    pytest.param(
        [team("team-a-cq", "9"), team("team-b-cq", "12")],
        [wl("big").queue("team-a-cq").request("cpu", "22")],
        [],
        id="nobody can use more than the cohort's 21 CPUs",
    ),
    pytest.param(
        [team("team-a-cq", "9", borrowing="1"), team("team-b-cq", "12")],
        [wl("w").queue("team-a-cq").request("cpu", "10")],
        ["w"],
        id="a borrowing limit of 1 lets team-a use 9+1 CPUs",
    ),
    pytest.param(
        [team("team-a-cq", "9", borrowing="1"), team("team-b-cq", "12")],
        [wl("w").queue("team-a-cq").request("cpu", "11")],
        [],
        id="a borrowing limit of 1 stops team-a at 10 CPUs",
    ),
    pytest.param(
        [team("team-a-cq", "9", borrowing="1"), team("team-b-cq", "12")],
        [wl("w").queue("team-b-cq").request("cpu", "21")],
        ["w"],
        id="without a borrowing limit team-b can borrow all 9 of team-a's CPUs",
    ),
    pytest.param(
        [team("team-a-cq", "9"), team("team-b-cq", "12")],
        [
            wl("b-running").request("cpu", "10").admitted("team-b-cq"),
            wl("a1").queue("team-a-cq").request("cpu", "11").created(1),
        ],
        ["a1"],
        id="team-a borrows only what team-b leaves unused",
    ),
    pytest.param(
        [team("team-a-cq", "9"), team("team-b-cq", "12")],
        [
            wl("b-running").request("cpu", "10").admitted("team-b-cq"),
            wl("a1").queue("team-a-cq").request("cpu", "12").created(1),
        ],
        [],
        id="team-a cannot borrow quota team-b is using",
    ),
    pytest.param(
        [cq("alone").quota("cpu", nominal="4"), cq("other").quota("cpu", nominal="4")],
        [wl("w").queue("alone").request("cpu", "5")],
        [],
        id="a cluster queue without a cohort cannot borrow",
    ),
    pytest.param(
        [team("team-a-cq", "9"), team("team-b-cq", "12")],
        [wl(f"w{i}").queue("team-a-cq").request("cpu", "3").created(i) for i in range(8)],
        [f"w{i}" for i in range(7)],
        id="one cycle admits as many workloads of one queue as fit, borrowing included",
    ),
]


@pytest.mark.parametrize(("cqs", "workloads", "expected"), CASES)
def test_borrowing_scenarios(
    cqs: list[CQBuilder], workloads: list[WorkloadBuilder], expected: list[str]
) -> None:
    result = run(snapshot(cqs=cqs, workloads=workloads))
    assert admitted_ids(result) == ids(*expected)


def test_admissions_beyond_nominal_are_marked_borrowing() -> None:
    snap = snapshot(
        cqs=[team("team-a-cq", "9"), team("team-b-cq", "12")],
        workloads=[
            wl("inside").queue("team-a-cq").request("cpu", "9").created(1),
            wl("beyond").queue("team-a-cq").request("cpu", "2").created(2),
        ],
    )
    borrowing = {a.workload: a.borrowing for a in run(snap).admitted}
    assert borrowing == {"default/inside": False, "default/beyond": True}


def test_non_borrowing_heads_go_before_borrowing_ones_across_queues() -> None:
    # team-a is already at nominal; both heads want the last 3 free CPUs of team-b's quota.
    snap = snapshot(
        cqs=[team("team-a-cq", "9"), team("team-b-cq", "12")],
        workloads=[
            wl("a-run").request("cpu", "9").admitted("team-a-cq"),
            wl("b-run").request("cpu", "9").admitted("team-b-cq"),
            wl("a-wants").queue("team-a-cq").request("cpu", "3").created(1).priority(10),
            wl("b-wants").queue("team-b-cq").request("cpu", "3").created(2),
        ],
    )
    result = run(snap)
    assert admitted_ids(result) == ids("b-wants")
    assert reason_of(result, "a-wants").code is PendingCode.WAITING_FOR_QUOTA


def lender_and_borrower(a_waiting: int) -> list[WorkloadBuilder]:
    """team-b at its nominal with three 3-CPU workloads waiting; team-a (9 CPUs, all free)
    with `a_waiting` 3-CPU workloads, queued after team-b's."""
    return [
        wl("b-run").request("cpu", "12").admitted("team-b-cq"),
        *[
            wl(f"a{i}").queue("team-a-cq").request("cpu", "3").created(10 + i)
            for i in range(a_waiting)
        ],
        *[wl(f"b{i}").queue("team-b-cq").request("cpu", "3").created(i) for i in range(3)],
    ]


def test_a_queue_fills_its_own_nominal_before_any_queue_borrows_in_the_same_cycle() -> None:
    # Heads alternate between the queues round by round, but team-a's own work (which fits
    # its nominal) must all go first: were team-b to borrow in between, team-a would later
    # have to reclaim it by preemption.
    cqs = [team("team-a-cq", "9"), team("team-b-cq", "12")]
    result = run(snapshot(cqs=cqs, workloads=lender_and_borrower(a_waiting=4)))
    assert admitted_ids(result) == ids("a0", "a1", "a2")
    assert reason_of(result, "b0").code is PendingCode.WAITING_FOR_QUOTA
    assert reason_of(result, "a3").code is PendingCode.WAITING_FOR_QUOTA


def test_borrowing_heads_still_fill_what_the_lenders_leave_in_the_same_cycle() -> None:
    cqs = [team("team-a-cq", "9"), team("team-b-cq", "12")]
    result = run(snapshot(cqs=cqs, workloads=lender_and_borrower(a_waiting=1)))
    assert admitted_ids(result) == ids("a0", "b0", "b1")
