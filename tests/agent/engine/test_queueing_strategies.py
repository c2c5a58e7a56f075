"""Queue order and strategies: StrictFIFO, BestEffortFIFO, priority, FIFO, namespaces."""

from __future__ import annotations

import pytest

from agent.engine.apply import apply_result, finish
from agent.engine.result import PendingCode
from agent.engine.snapshot import ClusterQueueName, EngineConfig, WorkloadId
from tests.builders import admitted_ids, cq, ids, lq, reason_of, run, snapshot, wl

STRATEGIES = [
    pytest.param(False, ["small"], id="BestEffortFIFO lets a younger workload that fits pass"),
    pytest.param(True, [], id="StrictFIFO keeps younger workloads behind a head that does not fit"),
]


@pytest.mark.parametrize(("strict", "expected"), STRATEGIES)
def test_a_head_that_does_not_fit(strict: bool, expected: list[str]) -> None:
    q = cq("q").quota("cpu", nominal="4")
    if strict:
        q = q.strict_fifo()
    workloads = [
        wl("running").request("cpu", "2").admitted("q"),
        wl("big").queue("q").request("cpu", "3").created(1),
        wl("small").queue("q").request("cpu", "1").created(2),
    ]
    result = run(snapshot(cqs=[q], workloads=workloads))
    assert admitted_ids(result) == ids(*expected)
    if strict:
        reason = reason_of(result, "small")
        assert reason.code is PendingCode.BLOCKED_BY_HEAD
        assert reason.blocking_workload == "default/big"


def test_a_parked_workload_is_admitted_once_quota_is_released_before_younger_ones() -> None:
    q = cq("q").quota("cpu", nominal="4")
    workloads = [
        wl("running").request("cpu", "3").admitted("q"),
        wl("big").queue("q").request("cpu", "3").created(1),
        wl("small").queue("q").request("cpu", "1").created(2),
        wl("small-2").queue("q").request("cpu", "1").created(3),
    ]
    snap = snapshot(cqs=[q], workloads=workloads)
    first = run(snap, now=10)
    assert admitted_ids(first) == ids("small")
    assert reason_of(first, "big").code is PendingCode.WAITING_FOR_QUOTA
    snap = finish(apply_result(snap, first), "default/running")
    second = run(snap, now=11)
    # BestEffortFIFO parked "big"; the released quota goes to it before the younger small-2.
    assert admitted_ids(second) == ids("big")
    assert reason_of(second, "small-2").code is PendingCode.WAITING_FOR_QUOTA


def test_higher_priority_goes_first_then_older() -> None:
    q = cq("q").quota("cpu", nominal="2")
    workloads = [
        wl("old-low").queue("q").request("cpu", "1").created(1).priority(0),
        wl("new-high").queue("q").request("cpu", "1").created(5).priority(10),
        wl("older-high").queue("q").request("cpu", "1").created(3).priority(10),
    ]
    result = run(snapshot(cqs=[q], workloads=workloads))
    assert admitted_ids(result) == ids("new-high", "older-high")
    assert result.queue_order[ClusterQueueName("q")] == ("default/old-low",)


def test_every_pending_workload_has_its_position_in_cluster_and_local_queue() -> None:
    q = cq("q").quota("cpu", nominal="1")
    workloads = [
        wl("a").queue("q").request("cpu", "1").created(1),
        wl("b").ns("team-x").queue("q").request("cpu", "2").created(2),
        wl("c").queue("q").request("cpu", "2").created(3),
        wl("d").ns("team-x").queue("q").request("cpu", "2").created(4),
    ]
    result = run(snapshot(cqs=[q], workloads=workloads))
    assert admitted_ids(result) == ids("a")
    assert result.position(WorkloadId("default/c")) == (1, 0)
    assert result.position(WorkloadId("team-x/d")) == (2, 1)
    assert set(result.pending) == {"team-x/b", "default/c", "team-x/d"}


def test_kueue_compatible_mode_admits_one_workload_per_queue_per_cycle() -> None:
    q = cq("q").quota("cpu", nominal="10")
    workloads = [wl(f"w{i}").queue("q").request("cpu", "1").created(i) for i in range(3)]
    result = run(
        snapshot(cqs=[q], workloads=workloads, config=EngineConfig(max_admissions_per_queue=1))
    )
    assert admitted_ids(result) == ids("w0")
    assert reason_of(result, "w1").code is PendingCode.QUEUE_ADMISSION_LIMIT


NAMESPACES = [
    pytest.param(
        {}, {"team-a": {}}, "team-a", True, id="the empty selector admits every namespace"
    ),
    pytest.param(None, {"team-a": {}}, "team-a", False, id="a nil selector admits no namespace"),
    pytest.param(
        {"team": "a"}, {"team-a": {"team": "a"}}, "team-a", True, id="a matching label admits"
    ),
    pytest.param(
        {"team": "a"}, {"team-b": {"team": "b"}}, "team-b", False, id="a different label does not"
    ),
]


@pytest.mark.parametrize(("selector", "labels", "namespace", "admits"), NAMESPACES)
def test_namespace_selector(
    selector: dict[str, str] | None,
    labels: dict[str, dict[str, str]],
    namespace: str,
    admits: bool,
) -> None:
    q = cq("q").quota("cpu", nominal="4").namespace_selector(selector)
    w = wl("w").ns(namespace).queue("q").request("cpu", "1")
    result = run(snapshot(cqs=[q], workloads=[w], namespaces=labels))
    assert admitted_ids(result) == ([f"{namespace}/w"] if admits else [])
    if not admits:
        reason = result.pending[WorkloadId(f"{namespace}/w")]
        assert reason.code is PendingCode.NAMESPACE_NOT_SELECTED


def test_a_missing_local_queue_is_a_reason_not_an_error() -> None:
    result = run(
        snapshot(cqs=[cq("q").quota("cpu", nominal="1")], workloads=[wl("w").queue("nope")])
    )
    assert reason_of(result, "w").code is PendingCode.LOCAL_QUEUE_NOT_FOUND


def test_stop_policies_hold_admission() -> None:
    stopped = cq("stopped").quota("cpu", nominal="4").stop("Hold")
    open_q = cq("open").quota("cpu", nominal="4")
    held_lq = lq("held", "open", stop="Hold")
    workloads = [
        wl("a").queue("stopped").request("cpu", "1"),
        wl("b").queue("held").request("cpu", "1"),
        wl("c").queue("open").request("cpu", "1"),
    ]
    result = run(snapshot(cqs=[stopped, open_q], lqs=[held_lq], workloads=workloads))
    assert admitted_ids(result) == ids("c")
    assert reason_of(result, "a").code is PendingCode.CLUSTER_QUEUE_STOPPED
    assert reason_of(result, "b").code is PendingCode.LOCAL_QUEUE_STOPPED


@pytest.mark.parametrize(
    ("strict", "code"),
    [
        pytest.param(
            False,
            PendingCode.NO_PREEMPTION_CANDIDATES,
            id="BestEffortFIFO evaluates behind a preempting head, which has reserved its quota",
        ),
        pytest.param(
            True,
            PendingCode.BLOCKED_BY_HEAD,
            id="StrictFIFO holds everything behind a head waiting for its victims",
        ),
    ],
)
def test_a_head_waiting_for_its_victims(strict: bool, code: PendingCode) -> None:
    q = cq("q").quota("cpu", nominal="4").preemption(within="LowerPriority")
    if strict:
        q = q.strict_fifo()
    workloads = [
        wl("victim").request("cpu", "3").priority(0).admitted("q"),
        wl("head").queue("q").request("cpu", "4").priority(5).created(1),
        wl("small").queue("q").request("cpu", "1").priority(5).created(2),
    ]
    result = run(snapshot(cqs=[q], workloads=workloads))
    assert [p.victim for p in result.preempted] == ["default/victim"]
    assert admitted_ids(result) == []
    assert reason_of(result, "small").code is code


def test_workloads_that_ask_alike_share_one_shape_so_a_cycle_tells_them_alike_by_identity() -> None:
    first = wl("first").queue("q").request("cpu", "1").created(1).build()
    second = wl("second").queue("q").request("cpu", "1").created(2).build()
    bigger = wl("bigger").queue("q").request("cpu", "2").created(3).build()
    assert first.shape is second.shape
    assert bigger.shape != first.shape
