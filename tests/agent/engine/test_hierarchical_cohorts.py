"""Hierarchical cohorts: cohort quota, subtree borrowing and lending, cycles (kueue.md §1.4)."""

from __future__ import annotations

import pytest

from agent.engine.quota import QuotaTree
from agent.engine.result import PendingCode
from agent.engine.snapshot import ClusterQueueName, CohortName, FlavorName, ResourceName
from tests.builders import (
    CohortBuilder,
    CQBuilder,
    WorkloadBuilder,
    admitted_ids,
    cohort,
    cq,
    ids,
    m,
    reason_of,
    run,
    snapshot,
    wl,
)

CPU = (FlavorName("default"), ResourceName("cpu"))


def tree() -> tuple[list[CohortBuilder], list[CQBuilder]]:
    """root → {org-a (10 CPU of its own) → cq-a1 (0), cq-a2 (2); org-b → cq-b (5)}."""
    cohorts = [
        cohort("root"),
        cohort("org-a").parent("root").quota("cpu", nominal="10"),
        cohort("org-b").parent("root"),
    ]
    cqs = [
        cq("cq-a1").cohort("org-a").quota("cpu", nominal="0"),
        cq("cq-a2").cohort("org-a").quota("cpu", nominal="2"),
        cq("cq-b").cohort("org-b").quota("cpu", nominal="5"),
    ]
    return cohorts, cqs


# Kueue docs "Configuring Quotas": a cohort's nominal quota is an extra shared pool that a
# cluster queue with nominal 0 may use.
def test_a_queue_with_zero_nominal_uses_its_cohorts_pool() -> None:
    snap = snapshot(
        cohorts=[cohort("hello-cohort").quota("cpu", nominal="12")],
        cqs=[cq("my-cluster-queue").cohort("hello-cohort").quota("cpu", nominal="0")],
        workloads=[
            wl("fits").queue("my-cluster-queue").request("cpu", "12"),
        ],
    )
    assert admitted_ids(run(snap)) == ids("fits")


# Kueue docs "Configuring Quotas": to borrow from its cohort a cluster queue must declare
# quota for the resource and flavor, even if it is 0.
def test_a_queue_uses_its_cohorts_pool_only_for_flavors_it_declares() -> None:
    snap = snapshot(
        cohorts=[cohort("hello-cohort").quota("cpu", "default-flavor", nominal="12")],
        cqs=[
            cq("declares").cohort("hello-cohort").quota("cpu", "default-flavor", nominal="0"),
            cq("other-flavor").cohort("hello-cohort").quota("cpu", "other", nominal="0"),
        ],
        workloads=[
            wl("in-declares").queue("declares").request("cpu", "2"),
            wl("in-other").queue("other-flavor").request("cpu", "2"),
        ],
    )
    result = run(snap)
    assert admitted_ids(result) == ids("in-declares")
    assert reason_of(result, "in-other").code is PendingCode.EXCEEDS_MAX_QUOTA


def test_subtree_quota_sums_children_and_own_quota() -> None:
    cohorts, cqs = tree()
    t = QuotaTree.from_snapshot(snapshot(cohorts=cohorts, cqs=cqs))
    assert t.cohorts[CohortName("org-a")].subtree[CPU] == m("12")
    assert t.cohorts[CohortName("root")].subtree[CPU] == m("17")
    assert t.available(t.cqs[ClusterQueueName("cq-b")], CPU) == m("17")


LIMIT_CASES = [
    pytest.param({}, "cq-b", "17", True, id="a queue can borrow across the whole tree"),
    pytest.param({}, "cq-b", "18", False, id="nothing beyond the tree's total quota"),
    pytest.param(
        {"org-b": {"borrowing": "2"}},
        "cq-b",
        "7",
        True,
        id="a cohort's borrowing limit caps its subtree: 5 own + 2",
    ),
    pytest.param(
        {"org-b": {"borrowing": "2"}},
        "cq-b",
        "8",
        False,
        id="a cohort's borrowing limit stops its subtree at 7",
    ),
    pytest.param(
        {"org-a": {"lending": "4"}},
        "cq-b",
        "9",
        True,
        id="a cohort's lending limit lends 4 of its 12 to the rest of the tree",
    ),
    pytest.param(
        {"org-a": {"lending": "4"}},
        "cq-b",
        "10",
        False,
        id="a cohort lends no more than its lending limit",
    ),
    pytest.param(
        {"org-a": {"lending": "4"}},
        "cq-a1",
        "17",
        True,
        id="a cohort's lending limit does not stop its own queues from borrowing",
    ),
]


@pytest.mark.parametrize(("limits", "queue", "cpu", "admits"), LIMIT_CASES)
def test_cohort_limits(
    limits: dict[str, dict[str, str]], queue: str, cpu: str, admits: bool
) -> None:
    cohorts = [cohort("root")]
    for name, own in (("org-a", "10"), ("org-b", "0")):
        c = cohort(name).parent("root")
        extra = limits.get(name, {})
        c.quota("cpu", nominal=own, borrowing=extra.get("borrowing"), lending=extra.get("lending"))
        cohorts.append(c)
    _, cqs = tree()
    snap = snapshot(cohorts=cohorts, cqs=cqs, workloads=[wl("w").queue(queue).request("cpu", cpu)])
    assert admitted_ids(run(snap)) == (ids("w") if admits else [])


def test_usage_in_one_org_reduces_what_the_other_can_borrow() -> None:
    cohorts, cqs = tree()
    running: list[WorkloadBuilder] = [wl("a-run").request("cpu", "8").admitted("cq-a1")]
    snap = snapshot(
        cohorts=cohorts,
        cqs=cqs,
        workloads=[*running, wl("b").queue("cq-b").request("cpu", "10")],
    )
    assert admitted_ids(run(snap)) == []
    snap = snapshot(
        cohorts=cohorts,
        cqs=cqs,
        workloads=[*running, wl("b").queue("cq-b").request("cpu", "9")],
    )
    assert admitted_ids(run(snap)) == ids("b")


def test_a_cohort_cycle_disables_every_member_with_a_reason() -> None:
    snap = snapshot(
        cohorts=[cohort("x").parent("y"), cohort("y").parent("x"), cohort("z").parent("x")],
        cqs=[
            cq("in-loop").cohort("x").quota("cpu", nominal="5"),
            cq("below-loop").cohort("z").quota("cpu", nominal="5"),
            cq("outside").quota("cpu", nominal="5"),
        ],
        workloads=[
            wl("w1").queue("in-loop").request("cpu", "1"),
            wl("w2").queue("below-loop").request("cpu", "1"),
            wl("w3").queue("outside").request("cpu", "1"),
        ],
    )
    result = run(snap)
    assert admitted_ids(result) == ids("w3")
    for name in ("w1", "w2"):
        reason = reason_of(result, name)
        assert reason.code is PendingCode.CLUSTER_QUEUE_INACTIVE
        assert "cohort cycle" in reason.message


def test_a_parent_that_is_not_an_object_is_an_implicit_empty_cohort() -> None:
    snap = snapshot(
        cohorts=[cohort("child").parent("ghost").quota("cpu", nominal="3")],
        cqs=[
            cq("a").cohort("child").quota("cpu", nominal="1"),
            cq("b").cohort("ghost").quota("cpu", nominal="2"),
        ],
        workloads=[wl("w").queue("b").request("cpu", "6")],
    )
    assert admitted_ids(run(snap)) == ids("w")


def test_reclaim_reaches_only_subtrees_that_borrow_from_the_preemptors_side() -> None:
    # org-a (cq-a1 0 + cq-a2 4 CPU) lends within itself: cq-a1 borrows 4 from cq-a2, but
    # org-a as a whole stays within its 4 CPU. cq-b (4 CPU, full with its own work) may
    # preempt while borrowing, yet nothing in org-a is borrowed from cq-b's side.
    cohorts = [cohort("root"), cohort("org-a").parent("root"), cohort("org-b").parent("root")]
    cqs = [
        cq("cq-a1").cohort("org-a").quota("cpu", nominal="0"),
        cq("cq-a2").cohort("org-a").quota("cpu", nominal="4"),
        cq("cq-b")
        .cohort("org-b")
        .quota("cpu", nominal="4")
        .preemption(reclaim="Any", borrow_within="LowerPriority"),
    ]
    workloads = [
        wl("a1-run").request("cpu", "4").priority(0).admitted("cq-a1"),
        wl("b-run").request("cpu", "4").priority(10).admitted("cq-b"),
        wl("b-new").queue("cq-b").request("cpu", "1").priority(10),
    ]
    result = run(snapshot(cohorts=cohorts, cqs=cqs, workloads=workloads))
    assert result.preempted == ()
    assert reason_of(result, "b-new").code is PendingCode.NO_PREEMPTION_CANDIDATES


def test_reclaim_reaches_a_queue_whose_subtree_borrows_from_the_preemptors_side() -> None:
    cohorts = [cohort("root"), cohort("org-a").parent("root"), cohort("org-b").parent("root")]
    cqs = [
        cq("cq-a1").cohort("org-a").quota("cpu", nominal="0"),
        cq("cq-a2").cohort("org-a").quota("cpu", nominal="4"),
        cq("cq-b").cohort("org-b").quota("cpu", nominal="4").preemption(reclaim="Any"),
    ]
    workloads = [
        wl("a1-run").request("cpu", "6").admitted("cq-a1"),
        wl("b-new").queue("cq-b").request("cpu", "4").priority(10),
    ]
    result = run(snapshot(cohorts=cohorts, cqs=cqs, workloads=workloads))
    assert [p.victim for p in result.preempted] == ["default/a1-run"]
