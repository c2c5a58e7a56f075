"""Gang admission (all pod sets or none) and partial admission with minCount."""

from __future__ import annotations

import pytest

from agent.engine.result import PendingCode
from tests.builders import admitted_ids, cq, ids, preempted_ids, reason_of, run, snapshot, wl


def test_all_pod_sets_are_admitted_together_or_not_at_all() -> None:
    q = cq("q").quota("cpu", nominal="5")
    w = (
        wl("gang")
        .queue("q")
        .pod_set("leader", 1)
        .request("cpu", "1")
        .pod_set("workers", 4)
        .request("cpu", "1.5")
    )
    result = run(snapshot(cqs=[q], workloads=[w]))
    assert admitted_ids(result) == []
    assert reason_of(result, "gang").code is PendingCode.WAITING_FOR_QUOTA or (
        reason_of(result, "gang").code is PendingCode.EXCEEDS_MAX_QUOTA
    )


PARTIAL = [
    pytest.param("10", 10, 4, 10, id="a workload that fits whole is admitted whole"),
    pytest.param("7", 10, 4, 7, id="the largest count that fits is admitted"),
    pytest.param("4", 10, 4, 4, id="minCount itself is admitted if that is all that fits"),
    pytest.param("3", 10, 4, None, id="below minCount nothing is admitted"),
]


@pytest.mark.parametrize(("free", "count", "min_count", "admitted_count"), PARTIAL)
def test_partial_admission_with_min_count(
    free: str, count: int, min_count: int, admitted_count: int | None
) -> None:
    q = cq("q").quota("cpu", nominal=free)
    w = wl("w").queue("q").request("cpu", "1").count(count, min_count)
    result = run(snapshot(cqs=[q], workloads=[w]))
    if admitted_count is None:
        assert admitted_ids(result) == []
        return
    (adm,) = result.admitted
    assert adm.admission.pod_sets[0].count == admitted_count
    assert adm.partial == (admitted_count != count)
    assert adm.admission.usage() == {("default", "cpu"): admitted_count * 1000}


def test_partial_admission_only_shrinks_the_pod_set_with_min_count() -> None:
    q = cq("q").quota("cpu", nominal="6")
    w = (
        wl("w")
        .queue("q")
        .pod_set("driver", 2)
        .request("cpu", "1")
        .pod_set("workers", 8, min_count=2)
        .request("cpu", "1")
    )
    (adm,) = run(snapshot(cqs=[q], workloads=[w])).admitted
    assert {ps.name: ps.count for ps in adm.admission.pod_sets} == {"driver": 2, "workers": 4}


def test_partial_admission_prefers_the_largest_count_that_can_preempt() -> None:
    q = cq("q").quota("cpu", nominal="6").preemption(within="LowerPriority")
    running = [
        wl("low").request("cpu", "2").priority(0).admitted("q"),
        wl("high").request("cpu", "4").priority(100).admitted("q"),
    ]
    w = wl("w").queue("q").request("cpu", "1").count(5, 1).priority(10)
    result = run(snapshot(cqs=[q], workloads=[*running, w]))
    assert preempted_ids(result) == ids("low")
    assert reason_of(result, "w").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
