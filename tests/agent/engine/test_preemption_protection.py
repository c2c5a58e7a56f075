"""Preemption protection (minAdmitSeconds): a recently admitted workload is no victim for a
preemptor queued after its admission, within its cluster queue or for reclaim by the cohort;
the preemptor waits with a reason naming the protected victims, and the cycle wakes up when
the first protection ends. Every case runs at now=100."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.engine.apply import apply_result
from agent.engine.cycle import schedule
from agent.engine.result import PendingCode, PreemptionReason, ProtectedVictim, Unblock
from agent.engine.snapshot import ClusterQueueName, ResourceName, Snapshot, WorkloadId
from tests.agent.engine.test_properties import scenarios
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

NOW = 100.0


def queue(min_admit: float, within: str = "LowerPriority") -> CQBuilder:
    return cq("q").quota("cpu", nominal="4").preemption(within=within, min_admit=min_admit)


def running(name: str, cpu: str, at: float, prio: int = 0, cq_name: str = "q") -> WorkloadBuilder:
    return wl(name).request("cpu", cpu).priority(prio).created(at - 1).admitted(cq_name, at=at)


def incoming(
    cpu: str = "2", prio: int = 10, created: float = 99.0, cq_name: str = "q"
) -> WorkloadBuilder:
    return wl("new").queue(cq_name).request("cpu", cpu).priority(prio).created(created)


WITHIN = [
    pytest.param(
        0.0,
        [running("old", "2", at=50), running("young", "2", at=98)],
        ["young"],
        id="without protection the most recently admitted goes first, as in Kueue",
    ),
    pytest.param(
        10.0,
        [running("old", "2", at=50), running("young", "2", at=98)],
        ["old"],
        id="a protected victim is passed over for an unprotected one",
    ),
    pytest.param(
        10.0,
        [running("old", "2", at=50), running("young", "2", at=85)],
        ["young"],
        id="once its protection has expired a workload is a victim again",
    ),
    pytest.param(
        10.0,
        [running("old", "2", at=50), running("young", "2", at=90)],
        ["young"],
        id="protection ends exactly minAdmitSeconds after admission",
    ),
    pytest.param(
        10.0,
        [running("a", "2", at=95), running("b", "2", at=99.5, prio=-1)],
        [],
        id="when every candidate is protected nothing is preempted",
    ),
]


@pytest.mark.parametrize(("min_admit", "admitted", "victims"), WITHIN)
def test_protection_within_a_cluster_queue(
    min_admit: float, admitted: list[WorkloadBuilder], victims: list[str]
) -> None:
    # The preemptor was queued at 99.9, after every admission above.
    snap = snapshot(cqs=[queue(min_admit)], workloads=[*admitted, incoming(created=99.9)])
    result = run(snap, NOW)
    assert preempted_ids(result) == ids(*victims)
    assert admitted_ids(result) == []
    if victims:
        assert reason_of(result, "new").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
    else:
        assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED


def test_a_preemptor_blocked_by_protection_waits_with_the_victims_and_their_expiry() -> None:
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("a", "2", at=95), running("b", "2", at=97), incoming(cpu="4")],
    )
    result = run(snap, NOW)
    assert preempted_ids(result) == []
    assert "default/new" not in result.nominated
    reason = reason_of(result, "new")
    assert reason.code is PendingCode.PREEMPTION_PROTECTED
    assert reason.unblock is Unblock.TIME
    assert sorted(reason.protected, key=lambda v: v.workload) == [
        ProtectedVictim(WorkloadId("default/a"), ClusterQueueName("q"), 105.0),
        ProtectedVictim(WorkloadId("default/b"), ClusterQueueName("q"), 107.0),
    ]
    # Both are needed; the first protection to end is when a cycle may decide differently.
    assert reason.retry_at == 105.0
    assert result.next_wakeup == 105.0
    assert "default/a (for 5 s more)" in reason.message
    assert "tries again in 5 s" in reason.message


def test_at_the_wakeup_the_preemptor_preempts_the_victims_that_are_free() -> None:
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("a", "2", at=95), running("b", "2", at=97), incoming(cpu="2")],
    )
    first = run(snap, NOW)
    assert preempted_ids(first) == []
    assert first.next_wakeup == 105.0
    second = run(snap, first.next_wakeup)
    assert preempted_ids(second) == ids("a")
    assert reason_of(second, "new").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS


def test_the_wakeup_is_the_earliest_expiry_even_of_a_candidate_the_plan_would_not_use() -> None:
    # Ignoring protection, the plan would take "recent" (most recently admitted first); but
    # "earlier" is free sooner, and it alone makes room then.
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("earlier", "2", at=92), running("recent", "2", at=98), incoming()],
    )
    result = run(snap, NOW)
    reason = reason_of(result, "new")
    assert [v.workload for v in reason.protected] == ["default/recent"]
    assert result.next_wakeup == 102.0
    assert preempted_ids(run(snap, 102.0)) == ids("earlier")


def test_no_wakeup_when_preempting_could_not_make_room_even_without_protection() -> None:
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[
            running("young", "2", at=98),
            running("high", "2", at=50, prio=50),
            incoming(cpu="4"),
        ],
    )
    result = run(snap, NOW)
    reason = reason_of(result, "new")
    assert reason.code is PendingCode.NO_PREEMPTION_CANDIDATES
    assert reason.protected == ()
    assert result.next_wakeup is None


def test_a_workload_being_evicted_is_never_protected() -> None:
    evicting = running("young", "4", at=99).set(evicting=True)
    result = run(snapshot(cqs=[queue(10.0)], workloads=[evicting, incoming(cpu="4")]), NOW)
    # It frees its quota anyway: the preemptor counts on it without preempting it again.
    assert preempted_ids(result) == []
    assert reason_of(result, "new").code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
    assert "default/new" in result.nominated
    assert result.next_wakeup is None


def test_a_workload_admitted_while_the_preemptor_waited_is_not_protected_from_it() -> None:
    # "late" jumped the queue (admitted at 99 while "new", queued at 90, did not fit).
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("early", "2", at=80), running("late", "2", at=99), incoming(created=90)],
    )
    result = run(snap, NOW)
    assert preempted_ids(result) == ids("late")


def test_a_preemptor_that_waited_at_the_hub_is_queued_here_from_its_arrival() -> None:
    # Created at 90 at the hub, offered to this cluster at 99.5: "running" (admitted at 95)
    # passed nobody here, so it keeps its protection.
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("running", "4", at=95), incoming(created=90).set(arrived_at=99.5)],
    )
    result = run(snap, NOW)
    assert preempted_ids(result) == []
    assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED


def test_a_same_shape_workload_that_arrived_earlier_is_judged_on_its_own_arrival() -> None:
    # "first" goes first (created earlier) and meets x's protection (it arrived after x's
    # admission); "second" arrived before x was admitted, so x passed it and is its victim.
    first = incoming(created=1).set(arrived_at=99.5)
    second = wl("second").queue("q").request("cpu", "2").priority(10).created(2)
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[
            running("x", "2", at=95),
            running("keep", "2", at=50, prio=50),
            first,
            second.set(arrived_at=90),
        ],
    )
    result = run(snap, NOW)
    assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED
    assert [(p.victim, p.preemptor) for p in result.preempted] == [("default/x", "default/second")]


def test_a_workload_admitted_at_the_preemptors_queueing_time_is_not_protected_from_it() -> None:
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("same", "4", at=99), incoming(created=99)],
    )
    assert preempted_ids(run(snap, NOW)) == ids("same")


def test_an_older_workload_is_not_held_back_by_a_newer_sticky_one_of_the_same_shape() -> None:
    # The sticky preemptor goes first and is blocked: "x" was admitted before it was queued.
    # "older" was queued before x's admission, so x is not protected from it.
    sticky = incoming(created=98).set(preempting=True)
    older = wl("older").queue("q").request("cpu", "2").priority(10).created(90)
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("x", "2", at=95), running("keep", "2", at=50, prio=50), sticky, older],
    )
    result = run(snap, NOW)
    assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED
    assert [(p.victim, p.preemptor) for p in result.preempted] == [("default/x", "default/older")]


def test_protection_applies_under_lower_or_newer_equal_priority_too() -> None:
    snap = snapshot(
        cqs=[queue(10.0, within="LowerOrNewerEqualPriority")],
        workloads=[running("lower", "4", at=98), incoming(cpu="4")],
    )
    result = run(snap, NOW)
    assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED
    assert preempted_ids(run(snap, 108.0)) == ids("lower")


def test_an_equal_priority_workload_queued_after_the_preemptor_is_never_protected_from_it() -> None:
    # LowerOrNewerEqualPriority may take an equal priority queued later; being queued later,
    # it was admitted while the preemptor waited, so protection never shields it.
    snap = snapshot(
        cqs=[queue(10.0, within="LowerOrNewerEqualPriority")],
        workloads=[
            wl("newer").request("cpu", "4").priority(10).created(99.5).admitted("q", at=99.6),
            incoming(cpu="4", created=99.0),
        ],
    )
    assert preempted_ids(run(snap, NOW)) == ids("newer")


# --- reclaim across the cohort: the victim's queue decides its protection -------------------


def pair(a_min_admit: float = 0.0, b_min_admit: float = 0.0) -> list[CQBuilder]:
    return [
        cq("a")
        .cohort("c")
        .quota("cpu", nominal="4")
        .preemption(reclaim="LowerPriority", min_admit=a_min_admit),
        cq("b").cohort("c").quota("cpu", nominal="4").preemption(min_admit=b_min_admit),
    ]


# b borrows a's whole quota: two 2-CPU workloads beyond its nominal 4.
def b_borrowing(young_at: float) -> list[WorkloadBuilder]:
    return [
        running("b-own", "4", at=10, prio=100, cq_name="b"),
        running("b-old", "2", at=50, cq_name="b"),
        running("b-young", "2", at=young_at, cq_name="b"),
    ]


RECLAIM = [
    pytest.param(pair(), 98, ["b-young"], id="reclaim takes the most recently admitted borrower"),
    pytest.param(
        pair(b_min_admit=10), 98, ["b-old"], id="reclaim passes over a protected borrower"
    ),
    pytest.param(
        pair(a_min_admit=10),
        98,
        ["b-young"],
        id="the preemptor's own minAdmitSeconds does not protect the other queue's workloads",
    ),
    pytest.param(
        pair(b_min_admit=10), 85, ["b-young"], id="reclaim takes a borrower whose protection ended"
    ),
]


@pytest.mark.parametrize(("cqs", "young_at", "victims"), RECLAIM)
def test_protection_of_reclaim_candidates(
    cqs: list[CQBuilder], young_at: float, victims: list[str]
) -> None:
    snap = snapshot(cqs=cqs, workloads=[*b_borrowing(young_at), incoming(cq_name="a")])
    result = run(snap, NOW)
    assert preempted_ids(result) == ids(*victims)
    assert {p.reason for p in result.preempted} == {PreemptionReason.IN_COHORT_RECLAMATION}


def test_reclaim_blocked_by_protection_waits_for_the_borrowers() -> None:
    snap = snapshot(
        cqs=pair(b_min_admit=10),
        workloads=[*b_borrowing(98), incoming(cpu="4", cq_name="a")],
    )
    result = run(snap, NOW)
    reason = reason_of(result, "new")
    assert reason.code is PendingCode.PREEMPTION_PROTECTED
    assert {(v.workload, v.cluster_queue) for v in reason.protected} == {("default/b-young", "b")}
    assert result.next_wakeup == 108.0
    later = run(snap, 108.0)
    assert preempted_ids(later) == ids("b-old", "b-young")


def test_a_borrower_admitted_while_the_reclaimer_waited_stays_protected() -> None:
    # Unlike within a queue: b-young was admitted by the cohort's order, not by passing "new"
    # in a's queue, so a's waiting does not void its protection.
    snap = snapshot(
        cqs=pair(b_min_admit=10),
        workloads=[*b_borrowing(98), incoming(cpu="4", cq_name="a", created=90)],
    )
    result = run(snap, NOW)
    assert preempted_ids(result) == []
    assert reason_of(result, "new").code is PendingCode.PREEMPTION_PROTECTED
    assert result.next_wakeup == 108.0


# --- flavors: a flavor blocked by protection is no better than a full one -------------------


def two_flavors(min_admit: float, second_cpu: str) -> CQBuilder:
    # MayStopSearch: without protection the first flavor wins by preempting.
    return (
        cq("q")
        .quota("cpu", "first", nominal="4")
        .quota("cpu", "second", nominal=second_cpu)
        .preemption(within="LowerPriority", min_admit=min_admit)
        .fungibility(when_can_preempt="MayStopSearch")
    )


@pytest.mark.parametrize(
    ("min_admit", "victims", "flavor"),
    [
        pytest.param(0.0, ["young"], None, id="without protection the first flavor preempts"),
        pytest.param(10.0, [], "second", id="with protection the second flavor admits"),
    ],
)
def test_a_flavor_whose_victims_are_protected_yields_to_a_later_flavor_with_room(
    min_admit: float, victims: list[str], flavor: str | None
) -> None:
    snap = snapshot(
        cqs=[two_flavors(min_admit, second_cpu="4")],
        workloads=[running("young", "4", at=98).admitted("q", "first", at=98), incoming()],
    )
    result = run(snap, NOW)
    assert preempted_ids(result) == ids(*victims)
    flavors = [a.admission.pod_sets[0].flavors[ResourceName("cpu")] for a in result.admitted]
    assert flavors == ([flavor] if flavor else [])


def test_protection_in_the_only_usable_flavor_still_sets_the_wakeup() -> None:
    snap = snapshot(
        cqs=[two_flavors(10.0, second_cpu="0")],
        workloads=[running("young", "4", at=98).admitted("q", "first", at=98), incoming()],
    )
    result = run(snap, NOW)
    reason = reason_of(result, "new")
    assert reason.code is PendingCode.PREEMPTION_PROTECTED
    assert result.next_wakeup == 108.0
    assert preempted_ids(run(snap, 108.0)) == ids("young")


# --- over cycles ------------------------------------------------------------------------------


def test_over_cycles_a_protected_victim_runs_its_minimum_then_yields() -> None:
    snap = snapshot(
        cqs=[queue(10.0)],
        workloads=[running("low", "4", at=95), incoming(cpu="4")],
    )
    now = NOW
    first = run(snap, now)
    assert first.next_wakeup == 105.0
    snap = apply_result(snap, first)
    second = run(snap, first.next_wakeup)
    assert preempted_ids(second) == ids("low")
    snap = apply_result(snap, second)
    third = run(snap, 105.0)
    assert admitted_ids(third) == ids("new")
    assert reason_of(third, "low").code is PendingCode.NO_PREEMPTION_CANDIDATES


# --- properties -------------------------------------------------------------------------------


def protected_and_raised(snap: Snapshot, min_admits: list[float]) -> Snapshot:
    """Give each cluster queue a minAdmitSeconds, admit what fits at t=1, then raise every
    workload still pending by 10 priorities so that it may preempt."""
    cqs = {
        name: dataclasses.replace(
            q, preemption=dataclasses.replace(q.preemption, min_admit_seconds=min_admits[i % 4])
        )
        for i, (name, q) in enumerate(snap.cluster_queues.items())
    }
    snap = dataclasses.replace(snap, cluster_queues=cqs)
    snap = apply_result(snap, schedule(snap, 1.0))
    wls = {
        k: dataclasses.replace(w, priority=w.priority + 10) if w.admission is None else w
        for k, w in snap.workloads.items()
    }
    return dataclasses.replace(snap, workloads=wls)


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIN_ADMITS = st.lists(st.sampled_from([0.0, 1.0, 5.0, 50.0]), min_size=4, max_size=4)
NOWS = st.sampled_from([1.25, 1.5, 2.0, 3.0, 8.0])


@PROPS
@given(scenarios(), MIN_ADMITS, NOWS)
def test_no_victim_is_taken_within_its_protection(
    snap: Snapshot, min_admits: list[float], now: float
) -> None:
    snap = protected_and_raised(snap, min_admits)
    result = schedule(snap, now)
    for p in result.preempted:
        victim = snap.workloads[p.victim]
        preemptor = snap.workloads[p.preemptor]
        assert victim.admission is not None and victim.admitted_at is not None
        victim_cq = victim.admission.cluster_queue
        protection = snap.cluster_queues[victim_cq].preemption
        own_queue = snap.local_queues[preemptor.local_queue].cluster_queue == victim_cq
        if not own_queue or victim.admitted_at < preemptor.queue_timestamp:
            assert now >= victim.admitted_at + protection.min_admit_seconds, p


@PROPS
@given(scenarios(), MIN_ADMITS, NOWS)
def test_until_the_next_wakeup_a_quiet_cycle_decides_the_same(
    snap: Snapshot, min_admits: list[float], now: float
) -> None:
    snap = protected_and_raised(snap, min_admits)
    result = schedule(snap, now)
    for reason in result.pending.values():
        if reason.code is PendingCode.PREEMPTION_PROTECTED:
            assert reason.retry_at is not None and reason.retry_at > now
            assert result.next_wakeup is not None and result.next_wakeup <= reason.retry_at
    if result.admitted or result.preempted:
        return  # those are events of their own: the next cycle runs anyway
    later = now + 1000.0 if result.next_wakeup is None else (now + result.next_wakeup) / 2
    again = schedule(snap, later)
    assert (again.admitted, again.preempted) == ((), ())
    assert {w: r.code for w, r in again.pending.items()} == {
        w: r.code for w, r in result.pending.items()
    }
