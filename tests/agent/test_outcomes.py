"""What an admission cycle's result does to the held records (agent.outcomes): the records
and the engine's result in, the steps out in the order the shell applies them. No cluster,
no clock."""

from __future__ import annotations

from dataclasses import replace

from agent import outcomes
from agent.engine.result import (
    Admit,
    CycleResult,
    Eviction,
    EvictionReason,
    PendingCode,
    PendingReason,
    Preemption,
    PreemptionReason,
    Unblock,
)
from agent.engine.snapshot import (
    Admission,
    ClusterQueueName,
    FlavorName,
    PodSetAssignment,
    ResourceName,
    WorkloadId,
)
from agent.records import Record, Report, Step, StopJobs, awaits_jobs
from api.v1alpha1.messages import WorkloadPhase
from tests.agent.test_records import CADENCE, NOW, held

P = WorkloadPhase
CQ = ClusterQueueName("cq")
WAITING = PendingReason(PendingCode.WAITING_FOR_QUOTA, "waits for cpu", Unblock.QUOTA_RELEASED)


def keyed(name: str, record: Record) -> Record:
    return replace(record, key=f"team-a/{name}")


def admit(key: str) -> Admit:
    assignment = PodSetAssignment(
        name="main", count=1, flavors={ResourceName("cpu"): FlavorName("default")}, usage={}
    )
    return Admit(WorkloadId(key), Admission(CQ, (assignment,)), borrowing=False)


def phases(steps: list[tuple[str, Step]]) -> list[tuple[str, WorkloadPhase | None]]:
    return [(key, step.record.phase if step.record else None) for key, step in steps]


def test_victims_and_evictions_give_back_before_admissions_take_quota() -> None:
    held_now = {
        "team-a/victim": keyed("victim", held(P.RUNNING)),
        "team-a/timed-out": keyed("timed-out", held(P.ADMITTED, materialised=True)),
        "team-a/new": keyed("new", held(P.PENDING)),
    }
    result = CycleResult(
        now=NOW,
        admitted=(admit("team-a/new"),),
        preempted=(
            Preemption(
                WorkloadId("team-a/victim"),
                CQ,
                WorkloadId("team-a/new"),
                PreemptionReason.IN_CLUSTER_QUEUE,
                "preempted by team-a/new",
            ),
        ),
        evicted=(
            Eviction(WorkloadId("team-a/timed-out"), EvictionReason.PODS_READY_TIMEOUT, "slow"),
        ),
    )
    steps = list(outcomes.quota_steps(held_now, result, NOW))
    assert phases(steps) == [
        ("team-a/victim", P.EVICTED),
        ("team-a/timed-out", P.EVICTED),
        ("team-a/new", P.ADMITTED),
    ]
    assert any(isinstance(e, StopJobs) for e in steps[0][1].effects)
    victim_report = next(e for e in steps[0][1].effects if isinstance(e, Report))
    assert victim_report.payload.pending_reason == "Preempted"
    # Kueue's pair of conditions: Evicted (Preempted) and Preempted (which rule chose it).
    conditions = {c.type: c.reason for c in victim_report.payload.conditions}
    assert conditions == {"Evicted": "Preempted", "Preempted": "InClusterQueue"}
    timed_out = next(e for e in steps[1][1].effects if isinstance(e, Report))
    assert [c.type for c in timed_out.payload.conditions] == ["Evicted"]


def test_a_step_is_computed_from_the_record_as_it_is_when_taken() -> None:
    live = {"team-a/victim": keyed("victim", held(P.ADMITTED))}
    result = CycleResult(
        now=NOW,
        evicted=(Eviction(WorkloadId("team-a/victim"), EvictionReason.DEACTIVATED, "off"),),
    )
    steps = outcomes.quota_steps(live, result, NOW)
    # Its Jobs were made while the step before was applied: the stop must name them.
    live["team-a/victim"] = replace(live["team-a/victim"], job_names=("victim-0",))
    _, step = next(steps)
    stop = next(e for e in step.effects if isinstance(e, StopJobs))
    assert stop.job_names == ("victim-0",)


def test_workloads_gone_meanwhile_get_no_step() -> None:
    result = CycleResult(
        now=NOW,
        admitted=(admit("team-a/gone"),),
        pending={WorkloadId("team-a/also-gone"): WAITING},
        new_preemptors=frozenset({WorkloadId("team-a/also-gone")}),
    )
    assert list(outcomes.quota_steps({}, result, NOW)) == []
    assert list(outcomes.waiting_steps({}, result, NOW, CADENCE)) == []


def test_a_new_preemptor_is_marked_once_and_its_pending_reason_reported() -> None:
    live = {"team-a/p": keyed("p", held(P.PENDING))}
    result = CycleResult(
        now=NOW,
        pending={WorkloadId("team-a/p"): WAITING},
        new_preemptors=frozenset({WorkloadId("team-a/p")}),
    )
    steps = outcomes.waiting_steps(live, result, NOW, CADENCE)
    key, mark = next(steps)
    assert mark.record is not None and mark.record.preempting and mark.effects == ()
    live[key] = mark.record
    _, pending = next(steps)
    assert [e.payload.pending_reason for e in pending.effects if isinstance(e, Report)] == [
        "WaitingForQuota"
    ]
    assert list(steps) == []
    live["team-a/p"] = replace(live["team-a/p"], preempting=True)
    again = CycleResult(now=NOW, new_preemptors=frozenset({WorkloadId("team-a/p")}))
    assert list(outcomes.waiting_steps(live, again, NOW, CADENCE)) == []


def test_a_pending_reason_already_reported_makes_no_step() -> None:
    record = keyed("p", held(P.PENDING))
    result = CycleResult(now=NOW, pending={WorkloadId("team-a/p"): WAITING})
    _, first = next(outcomes.waiting_steps({"team-a/p": record}, result, NOW, CADENCE))
    assert first.record is not None
    later = list(outcomes.waiting_steps({"team-a/p": first.record}, result, NOW + 1, CADENCE))
    assert later == []


def test_a_workload_no_longer_pending_gets_no_pending_step() -> None:
    live = {"team-a/p": keyed("p", held(P.ADMITTED))}
    result = CycleResult(
        now=NOW,
        pending={WorkloadId("team-a/p"): WAITING},
        new_preemptors=frozenset({WorkloadId("team-a/p")}),
    )
    assert list(outcomes.waiting_steps(live, result, NOW, CADENCE)) == []


def test_a_materialisation_applies_only_to_the_record_it_was_started_for() -> None:
    started = held(P.ADMITTED)
    assert awaits_jobs(started, started)
    assert not awaits_jobs(None, started)  # forgotten
    assert not awaits_jobs(replace(started, job_names=("w",)), started)  # made meanwhile
    assert not awaits_jobs(replace(started, phase=P.EVICTED), started)  # given back
    reoffered = held(P.ADMITTED, generation=2)
    assert not awaits_jobs(reoffered, started)


def test_over_a_deep_queue_only_the_changed_and_the_put_off_reasons_due_are_looked_at() -> None:
    reasons = {WorkloadId(f"team-a/w{i}"): WAITING for i in range(5)}
    result = CycleResult(
        now=NOW, pending=reasons, pending_changed={WorkloadId("team-a/w1"): WAITING}
    )
    put_off = {"team-a/w3": NOW, "team-a/w4": NOW + 1, "team-a/gone": NOW - 1}
    assert set(outcomes.to_look_at(result, put_off, NOW)) == {"team-a/w1", "team-a/w3"}
    assert set(outcomes.to_look_at(result, put_off, NOW + 1)) == {
        "team-a/w1",
        "team-a/w3",
        "team-a/w4",
    }
    unknown = CycleResult(now=NOW, pending=reasons, pending_changed=None)
    assert set(outcomes.to_look_at(unknown, {}, NOW)) == set(reasons)


def _held_back(key: WorkloadId) -> tuple[dict[str, Record], PendingReason, dict[str, float]]:
    """A pending workload reported at NOW, then given a new message at NOW + 1 that the
    cadence holds back: (its records, the new reason, what is put off)."""
    reported = CycleResult(now=NOW, pending={key: WAITING})
    _, step = next(
        outcomes.waiting_steps({key: keyed("w", held(P.PENDING))}, reported, NOW, CADENCE)
    )
    assert step.record is not None
    live: dict[str, Record] = {key: step.record}
    moved = PendingReason(WAITING.code, "waits for cpu (12 ahead)", WAITING.unblock)
    # The engine names it changed once; the cadence holds the new message back.
    once = CycleResult(now=NOW + 1, pending={key: moved}, pending_changed={key: moved})
    looked = outcomes.to_look_at(once, {}, NOW + 1)
    assert list(outcomes.waiting_steps(live, once, NOW + 1, CADENCE, looked)) == []
    return live, moved, outcomes.still_put_off(live, looked, {}, NOW + 1, CADENCE)


def test_a_new_message_held_back_by_the_cadence_is_looked_at_again_when_due_and_reported() -> None:
    key = WorkloadId("team-a/w")
    live, moved, put_off = _held_back(key)
    assert put_off == {key: NOW + CADENCE.pending_refresh}
    # Later cycles do not name it, but it is looked at once due, and reported.
    at = NOW + CADENCE.pending_refresh
    later = CycleResult(now=at, pending={key: moved}, pending_changed={})
    looked = outcomes.to_look_at(later, put_off, at)
    [(_, due)] = outcomes.waiting_steps(live, later, at, CADENCE, looked)
    assert due.record is not None
    after: dict[str, Record] = {key: due.record}
    assert outcomes.still_put_off(after, looked, put_off, at, CADENCE) == {}


def test_a_held_back_message_is_not_looked_at_before_it_is_due_and_stays_put_off() -> None:
    key = WorkloadId("team-a/w")
    live, moved, put_off = _held_back(key)
    # Cycles before the report is due, the engine naming nothing: nothing to look at, and
    # nothing a look would have done (the cadence would hold the report back still).
    for at in (NOW + 2, NOW + CADENCE.pending_refresh - 1):
        early = CycleResult(now=at, pending={key: moved}, pending_changed={})
        assert outcomes.to_look_at(early, put_off, at) == {}
        assert list(outcomes.waiting_steps(live, early, at, CADENCE, {key: moved})) == []
        assert outcomes.still_put_off(live, {}, put_off, at, CADENCE) == put_off
    # Named by the engine meanwhile (a new code), it is looked at and reported at once.
    blocked = PendingReason(
        PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS, "victims stop", WAITING.unblock
    )
    named = CycleResult(now=NOW + 2, pending={key: blocked}, pending_changed={key: blocked})
    looked = outcomes.to_look_at(named, put_off, NOW + 2)
    [(_, step)] = outcomes.waiting_steps(live, named, NOW + 2, CADENCE, looked)
    assert step.record is not None
    assert outcomes.still_put_off({key: step.record}, looked, put_off, NOW + 2, CADENCE) == {}


def test_a_put_off_workload_no_longer_pending_by_its_due_time_is_dropped() -> None:
    key = WorkloadId("team-a/w")
    live, _, put_off = _held_back(key)
    at = NOW + CADENCE.pending_refresh
    gone = CycleResult(now=at, pending={}, pending_changed={})
    looked = outcomes.to_look_at(gone, put_off, at)
    assert looked == {}
    assert outcomes.still_put_off(live, looked, put_off, at, CADENCE) == {}
