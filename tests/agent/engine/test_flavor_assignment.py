"""Flavor assignment: order, node labels, affinity, taints, fungibility, pods, undeclared."""

from __future__ import annotations

import pytest

from agent.engine.result import PendingCode
from agent.engine.snapshot import EngineConfig, UndeclaredResources, WorkloadId
from tests.builders import (
    CQBuilder,
    FlavorBuilder,
    WorkloadBuilder,
    admitted_ids,
    cq,
    flavor,
    ids,
    reason_of,
    run,
    snapshot,
    wl,
)


def two_flavors(**fungibility: str) -> CQBuilder:
    q = cq("q").cohort("c").quota("cpu", "spot", nominal="4").quota("cpu", "on-demand", nominal="4")
    return q.fungibility(**fungibility) if fungibility else q


def flavors_of(result: object, name: str) -> dict[str, str]:
    from agent.engine.result import CycleResult

    assert isinstance(result, CycleResult)
    for a in result.admitted:
        if a.workload == ids(name)[0]:
            return {str(r): str(f) for ps in a.admission.pod_sets for r, f in ps.flavors.items()}
    raise AssertionError(f"{name} not admitted")


FLAVOR_CASES = [
    pytest.param(
        [],
        wl("w").queue("q").request("cpu", "3"),
        "spot",
        id="the first flavor in the queue's order wins when it fits",
    ),
    pytest.param(
        [wl("r").request("cpu", "3").admitted("q", "spot")],
        wl("w").queue("q").request("cpu", "3"),
        "on-demand",
        id="a flavor without room is skipped for the next one",
    ),
    pytest.param(
        [],
        wl("w").queue("q").request("cpu", "3").node_selector(tier="on-demand"),
        "on-demand",
        id="a node selector on a flavor's label key skips flavors with another value",
    ),
    pytest.param(
        [],
        wl("w").queue("q").request("cpu", "3").node_selector(zone="eu-1"),
        "spot",
        id="a node selector on a key no flavor declares is ignored",
    ),
    pytest.param(
        [],
        wl("w").queue("q").request("cpu", "3").affinity("tier", "In", "on-demand"),
        "on-demand",
        id="required node affinity is matched against the flavors' labels",
    ),
    pytest.param(
        [],
        wl("w").queue("q").request("cpu", "3").affinity("tier", "NotIn", "spot"),
        "on-demand",
        id="NotIn affinity excludes a flavor",
    ),
]


def labelled() -> list[FlavorBuilder]:
    return [flavor("spot").label("tier", "spot"), flavor("on-demand").label("tier", "on-demand")]


@pytest.mark.parametrize(("running", "incoming", "chosen"), FLAVOR_CASES)
def test_flavor_choice(
    running: list[WorkloadBuilder], incoming: WorkloadBuilder, chosen: str
) -> None:
    snap = snapshot(cqs=[two_flavors()], flavors=labelled(), workloads=[*running, incoming])
    assert flavors_of(run(snap), "w") == {"cpu": chosen}


def test_an_untolerated_taint_skips_the_flavor() -> None:
    flavors = [flavor("spot").taint("spot", "true", "NoSchedule"), flavor("on-demand")]
    snap = snapshot(
        cqs=[two_flavors()], flavors=flavors, workloads=[wl("w").queue("q").request("cpu", "1")]
    )
    assert flavors_of(run(snap), "w") == {"cpu": "on-demand"}


def test_a_tolerated_taint_keeps_the_flavor() -> None:
    flavors = [flavor("spot").taint("spot", "true", "NoSchedule"), flavor("on-demand")]
    w = wl("w").queue("q").request("cpu", "1").toleration("spot", "true", "NoSchedule")
    snap = snapshot(cqs=[two_flavors()], flavors=flavors, workloads=[w])
    assert flavors_of(run(snap), "w") == {"cpu": "spot"}


def test_a_prefer_no_schedule_taint_is_ignored() -> None:
    flavors = [flavor("spot").taint("spot", "true", "PreferNoSchedule"), flavor("on-demand")]
    snap = snapshot(
        cqs=[two_flavors()], flavors=flavors, workloads=[wl("w").queue("q").request("cpu", "1")]
    )
    assert flavors_of(run(snap), "w") == {"cpu": "spot"}


def test_a_flavors_own_toleration_covers_its_taint() -> None:
    flavors = [
        flavor("spot").taint("spot", "true", "NoSchedule").toleration("spot", "true"),
        flavor("on-demand"),
    ]
    snap = snapshot(
        cqs=[two_flavors()], flavors=flavors, workloads=[wl("w").queue("q").request("cpu", "1")]
    )
    assert flavors_of(run(snap), "w") == {"cpu": "spot"}


def test_no_matching_flavor_is_reported_per_flavor() -> None:
    w = wl("w").queue("q").request("cpu", "1").node_selector(tier="gpu")
    result = run(snapshot(cqs=[two_flavors()], flavors=labelled(), workloads=[w]))
    reason = reason_of(result, "w")
    assert reason.code is PendingCode.NO_MATCHING_FLAVOR
    assert {a.flavor for a in reason.flavors_tried} == {"spot", "on-demand"}


# flavorFungibility: the cohort has a lender "other" with 4 spare CPUs of spot.
def fungible(**policy: str) -> list[CQBuilder]:
    return [
        two_flavors(**policy),
        cq("other")
        .cohort("c")
        .quota("cpu", "spot", nominal="4")
        .quota("cpu", "on-demand", nominal="0"),
    ]


FUNGIBILITY = [
    pytest.param(
        {},
        "spot",
        id="whenCanBorrow MayStopSearch borrows in the first flavor",
    ),
    pytest.param(
        {"when_can_borrow": "TryNextFlavor"},
        "on-demand",
        id="whenCanBorrow TryNextFlavor prefers a later flavor that fits without borrowing",
    ),
]


@pytest.mark.parametrize(("policy", "chosen"), FUNGIBILITY)
def test_flavor_fungibility_when_borrowing(policy: dict[str, str], chosen: str) -> None:
    running = wl("r").request("cpu", "2").admitted("q", "spot")
    incoming = wl("w").queue("q").request("cpu", "3")
    result = run(snapshot(cqs=fungible(**policy), workloads=[running, incoming]))
    assert flavors_of(result, "w") == {"cpu": chosen}


def test_fungibility_prefers_fitting_in_a_later_flavor_over_preempting() -> None:
    q = (
        cq("q")
        .quota("cpu", "spot", nominal="4")
        .quota("cpu", "on-demand", nominal="4")
        .preemption(within="LowerPriority")
    )
    running = wl("r").request("cpu", "4").priority(0).admitted("q", "spot")
    incoming = wl("w").queue("q").request("cpu", "3").priority(10)
    result = run(snapshot(cqs=[q], workloads=[running, incoming]))
    assert flavors_of(result, "w") == {"cpu": "on-demand"}
    assert result.preempted == ()


def test_when_can_preempt_may_stop_search_preempts_in_the_first_flavor() -> None:
    q = (
        cq("q")
        .quota("cpu", "spot", nominal="4")
        .quota("cpu", "on-demand", nominal="4")
        .preemption(within="LowerPriority")
        .fungibility(when_can_preempt="MayStopSearch")
    )
    running = wl("r").request("cpu", "4").priority(0).admitted("q", "spot")
    incoming = wl("w").queue("q").request("cpu", "3").priority(10)
    result = run(snapshot(cqs=[q], workloads=[running, incoming]))
    assert [p.victim for p in result.preempted] == ["default/r"]


def test_pods_is_a_quota_resource_counting_pods() -> None:
    q = cq("q").quota("cpu", nominal="100").quota("pods", nominal="3")
    snap = snapshot(
        cqs=[q],
        workloads=[
            wl("two").queue("q").request("cpu", "1").count(2).created(1),
            wl("two-more").queue("q").request("cpu", "1").count(2).created(2),
            wl("one").queue("q").request("cpu", "1").count(1).created(3),
        ],
    )
    result = run(snap)
    assert admitted_ids(result) == ids("two", "one")
    assert "pods" in reason_of(result, "two-more").message


def test_a_pod_sets_own_pods_request_counts_one_pod_per_pod() -> None:
    q = cq("q").quota("cpu", nominal="100").quota("pods", nominal="3")
    snap = snapshot(
        cqs=[q],
        workloads=[
            wl("two").queue("q").request("cpu", "1").request("pods", "5").count(2).created(1),
            wl("one").queue("q").request("cpu", "1").count(1).created(2),
        ],
    )
    result = run(snap)
    assert admitted_ids(result) == ids("two", "one")
    assert dict(result.admitted[0].admission.pod_sets[0].usage) == {"cpu": 2000, "pods": 2000}


UNDECLARED = [
    pytest.param(
        UndeclaredResources.BLOCK,
        [],
        id="BlockUndeclared keeps a request for an uncovered resource pending",
    ),
    pytest.param(
        UndeclaredResources.IGNORE,
        ["w"],
        id="IgnoreUndeclared admits ignoring the uncovered resource",
    ),
]


@pytest.mark.parametrize(("strategy", "expected"), UNDECLARED)
def test_undeclared_resources(strategy: UndeclaredResources, expected: list[str]) -> None:
    w = wl("w").queue("q").request("cpu", "1").request("example.com/gpu", "1")
    snap = snapshot(
        cqs=[cq("q").quota("cpu", nominal="4")],
        workloads=[w],
        config=EngineConfig(undeclared_resources=strategy),
    )
    result = run(snap)
    assert admitted_ids(result) == ids(*expected)
    if not expected:
        assert reason_of(result, "w").code is PendingCode.NO_MATCHING_FLAVOR


def test_pod_sets_of_one_workload_are_checked_together_in_a_flavor() -> None:
    q = cq("q").quota("cpu", "small", nominal="4").quota("cpu", "large", nominal="8")
    w = (
        wl("w")
        .queue("q")
        .pod_set("driver", 1)
        .request("cpu", "3")
        .pod_set("workers", 2)
        .request("cpu", "2")
    )
    result = run(snapshot(cqs=[q], workloads=[w]))
    admission = result.admitted[0].admission
    assert {ps.name: dict(ps.flavors) for ps in admission.pod_sets} == {
        "driver": {"cpu": "small"},
        "workers": {"cpu": "large"},
    }


def test_resource_groups_assign_flavors_independently() -> None:
    q = (
        cq("q")
        .quota("cpu", "cpu-a", nominal="4")
        .quota("memory", "cpu-a", nominal="8Gi")
        .group()
        .quota("nvidia.com/gpu", "a100", nominal="0")
        .quota("nvidia.com/gpu", "h100", nominal="2")
    )
    w = (
        wl("w")
        .queue("q")
        .request("cpu", "1")
        .request("memory", "1Gi")
        .request("nvidia.com/gpu", "1")
    )
    admission = run(snapshot(cqs=[q], workloads=[w])).admitted[0].admission
    assert dict(admission.pod_sets[0].flavors) == {
        "cpu": "cpu-a",
        "memory": "cpu-a",
        "nvidia.com/gpu": "h100",
    }


def test_a_flavor_without_preemption_candidates_yields_to_one_with_them() -> None:
    q = (
        cq("q")
        .quota("cpu", "f1", nominal="4")
        .quota("cpu", "f2", nominal="4")
        .preemption(within="LowerPriority")
    )
    workloads = [
        wl("high-in-f1").request("cpu", "4").priority(100).admitted("q", "f1"),
        wl("low-in-f2").request("cpu", "4").priority(0).admitted("q", "f2"),
        wl("w").queue("q").request("cpu", "4").priority(10),
    ]
    result = run(snapshot(cqs=[q], workloads=workloads))
    assert [p.victim for p in result.preempted] == ["default/low-in-f2"]
    nominated = result.nominated[WorkloadId("default/w")]
    assert dict(nominated.pod_sets[0].flavors) == {"cpu": "f2"}


@pytest.mark.parametrize(
    ("preference", "flavor_chosen", "preempts"),
    [
        pytest.param(
            "BorrowingOverPreemption", "f1", False, id="by default borrowing beats preempting"
        ),
        pytest.param(
            "PreemptionOverBorrowing",
            "f2",
            True,
            id="PreemptionOverBorrowing preempts in its nominal quota rather than borrow",
        ),
    ],
)
def test_fungibility_preference(preference: str, flavor_chosen: str, preempts: bool) -> None:
    q = (
        cq("q")
        .cohort("c")
        .quota("cpu", "f1", nominal="2")
        .quota("cpu", "f2", nominal="4")
        .preemption(within="LowerPriority")
        .fungibility(
            when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor", preference=preference
        )
    )
    lender = (
        cq("lender").cohort("c").quota("cpu", "f1", nominal="4").quota("cpu", "f2", nominal="0")
    )
    workloads = [
        wl("low").request("cpu", "4").priority(0).admitted("q", "f2"),
        wl("w").queue("q").request("cpu", "3").priority(10),
    ]
    result = run(snapshot(cqs=[q, lender], workloads=workloads))
    if preempts:
        assert [p.victim for p in result.preempted] == ["default/low"]
        nominated = result.nominated[WorkloadId("default/w")]
        assert dict(nominated.pod_sets[0].flavors) == {"cpu": flavor_chosen}
    else:
        assert result.preempted == ()
        assert flavors_of(result, "w") == {"cpu": flavor_chosen}


def test_a_pod_sets_request_is_never_split_across_flavors() -> None:
    # 3 free CPUs in each flavor, 6 in all: a 4-CPU pod set fits neither flavor alone.
    q = cq("q").quota("cpu", "spot", nominal="3").quota("cpu", "on-demand", nominal="3")
    result = run(snapshot(cqs=[q], workloads=[wl("w").queue("q").request("cpu", "4")]))
    assert admitted_ids(result) == []
    reason = reason_of(result, "w")
    assert reason.code is PendingCode.EXCEEDS_MAX_QUOTA
    assert {s.flavor for s in reason.shortfalls} == {"spot", "on-demand"}


def test_a_pod_set_borrows_in_a_single_flavor() -> None:
    # Kueue: for each pod-set resource a cluster queue borrows quota for one flavor only.
    q = cq("q").cohort("c").quota("cpu", "spot", nominal="2").quota("cpu", "on-demand", nominal="2")
    lender = (
        cq("lender")
        .cohort("c")
        .quota("cpu", "spot", nominal="1")
        .quota("cpu", "on-demand", nominal="1")
    )
    snap = snapshot(cqs=[q, lender], workloads=[wl("w").queue("q").request("cpu", "4")])
    # 3 CPUs per flavor in the cohort, 6 in all: 4 fit in no single flavor.
    assert admitted_ids(run(snap)) == []
    snap = snapshot(cqs=[q, lender], workloads=[wl("w").queue("q").request("cpu", "3")])
    result = run(snap)
    assert flavors_of(result, "w") == {"cpu": "spot"}
    assert result.admitted[0].borrowing
