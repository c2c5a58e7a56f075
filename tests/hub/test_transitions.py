"""What an agent's report does to a workload at the hub (docs/exactly-once.md): a report
counts only from the cluster holding the workload's reservation request or its binding for
the current generation; the first reservation binds and the other nominees are withdrawn; a
reservation never runs; a bound offer that was never admitted goes back without an eviction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from api.meta import Condition
from api.v1alpha1.federation import RequeuingStrategy
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Admission, Workload
from hub import transitions
from hub.placement.cycle import Wait, status_change
from hub.transitions import ReportOutcome, apply_rejection, apply_report
from tests.builders import api_workload

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
KEY = "team/train"


def offered_to(*clusters: str, generation: int = 2) -> Workload:
    wl = api_workload("train")
    return transitions.mark_offered(wl, list(clusters), generation, NOW)


def bound_to(cluster: str, *, generation: int = 2, admitted: bool = False) -> Workload:
    wl = transitions.mark_bound_offer(api_workload("train"), cluster, generation, NOW)
    if admitted:
        wl, _ = apply_report(wl, cluster, report(WorkloadPhase.ADMITTED, generation), NOW)
    return wl


def report(phase: WorkloadPhase, generation: int = 2, **kw: Any) -> WorkloadStatusReport:
    return WorkloadStatusReport(workload=KEY, generation=generation, phase=phase, **kw)


def withdrawn_clusters(outcome: ReportOutcome) -> list[tuple[str, str]]:
    return [(cluster, reason) for cluster, reason, _ in outcome.withdraw]


def test_the_first_reservation_binds_and_the_other_nominees_are_withdrawn() -> None:
    wl = offered_to("east", "west", "north")
    admission = Admission(cluster_queue="cq")
    wl, outcome = apply_report(wl, "west", report(WorkloadPhase.RESERVED, admission=admission), NOW)
    assert outcome.accepted and outcome.bind == "west"
    assert withdrawn_clusters(outcome) == [("east", "BoundElsewhere"), ("north", "BoundElsewhere")]
    assert wl.status is not None
    assert wl.status.cluster_name == "west" and wl.status.nominated_cluster_names == []
    assert wl.status.admission == admission
    assert wl.is_condition_true("QuotaReserved") and not transitions.is_admitted(wl)


def test_a_reservation_that_lost_the_race_is_refused_and_withdrawn() -> None:
    wl, _ = apply_report(offered_to("east", "west"), "west", report(WorkloadPhase.RESERVED), NOW)
    again, outcome = apply_report(
        transitions.for_change(wl), "east", report(WorkloadPhase.RESERVED), NOW
    )
    assert not outcome.accepted and outcome.bind is None
    assert withdrawn_clusters(outcome) == [("east", "BoundElsewhere")]
    assert again.status == wl.status


@pytest.mark.parametrize(
    "phase", [WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING, WorkloadPhase.SUCCEEDED]
)
def test_a_nominee_that_runs_a_reservation_it_was_not_bound_is_refused(
    phase: WorkloadPhase,
) -> None:
    wl = offered_to("east", "west")
    after, outcome = apply_report(transitions.for_change(wl), "east", report(phase), NOW)
    assert not outcome.accepted
    assert withdrawn_clusters(outcome) == [("east", "NotBound")]
    assert after.status is not None and after.status.cluster_name is None
    assert not after.is_condition_true("Finished")


@pytest.mark.parametrize(
    ("phase", "told_to_withdraw"),
    [
        (WorkloadPhase.RUNNING, True),
        (WorkloadPhase.RESERVED, True),
        (WorkloadPhase.SUCCEEDED, False),
        (WorkloadPhase.WITHDRAWN, False),
    ],
)
def test_a_cluster_never_offered_the_workload_changes_nothing(
    phase: WorkloadPhase, told_to_withdraw: bool
) -> None:
    wl = bound_to("east", admitted=True)
    after, outcome = apply_report(transitions.for_change(wl), "rogue", report(phase), NOW)
    assert not outcome.accepted
    assert after.status == wl.status
    assert withdrawn_clusters(outcome) == (
        [("rogue", "BoundElsewhere")] if told_to_withdraw else []
    )


def test_a_report_of_another_generation_changes_nothing() -> None:
    wl = bound_to("east", generation=3, admitted=True)
    after, outcome = apply_report(
        transitions.for_change(wl), "east", report(WorkloadPhase.FAILED, generation=2), NOW
    )
    assert not outcome.accepted and "generation 2" in outcome.refusal
    assert after.status == wl.status


def test_the_bound_cluster_admits_runs_and_finishes_the_workload() -> None:
    wl = bound_to("east")
    wl, outcome = apply_report(wl, "east", report(WorkloadPhase.ADMITTED), NOW)
    assert outcome.accepted and transitions.is_admitted(wl)
    wl, _ = apply_report(wl, "east", report(WorkloadPhase.SUCCEEDED), NOW)
    assert wl.is_condition_true("Finished")
    late, outcome = apply_report(
        transitions.for_change(wl), "east", report(WorkloadPhase.RUNNING), NOW
    )
    assert not outcome.accepted and late.status == wl.status


def test_a_bound_offer_given_back_before_admission_waits_at_the_hub_without_an_eviction() -> None:
    wl = bound_to("east")
    wl, outcome = apply_report(
        wl,
        "east",
        report(WorkloadPhase.WITHDRAWN, pending_reason="OfferTimedOut", pending_message="late"),
        NOW,
    )
    assert outcome.accepted
    assert wl.status is not None and wl.status.cluster_name is None
    assert not wl.is_condition_true("Evicted") and wl.status.requeue_state is None
    reasons = {r.cluster: r.reason for r in wl.status.cluster_pending_reasons}
    assert reasons == {"east": "OfferTimedOut"}  # placement skips east for a while


def test_an_admitted_workload_evicted_on_its_cluster_is_requeued() -> None:
    wl = bound_to("east", admitted=True)
    wl, outcome = apply_report(wl, "east", report(WorkloadPhase.EVICTED), NOW)
    assert outcome.accepted
    assert wl.status is not None and wl.status.cluster_name is None
    assert wl.is_condition_true("Evicted") and wl.is_condition_true("Requeued")
    # Only pods-ready timeouts count toward the requeuing limit (Kueue's requeueState).
    assert wl.status.requeue_state is None


def test_a_workload_preempted_on_its_cluster_carries_kueues_preempted_condition() -> None:
    wl = bound_to("east", admitted=True)
    preempted = Condition(type="Preempted", status="True", reason="InCohortReclamation")
    wl, outcome = apply_report(
        wl,
        "east",
        report(
            WorkloadPhase.EVICTED,
            pending_reason="Preempted",
            pending_message="to admit team/urgent",
            conditions=[preempted],
        ),
        NOW,
    )
    assert outcome.accepted
    evicted, condition = wl.condition("Evicted"), wl.condition("Preempted")
    assert evicted is not None and (evicted.status, evicted.reason) == ("True", "Preempted")
    assert condition is not None and condition.status == "True"
    assert condition.reason == "InCohortReclamation"
    assert condition.message == "to admit team/urgent (on cluster east)"
    # Admitted again: the condition turns False and keeps what it said (Kueue).
    again = transitions.mark_bound_offer(wl, "west", 3, NOW)
    again, _ = apply_report(again, "west", report(WorkloadPhase.ADMITTED, 3), NOW)
    settled = again.condition("Preempted")
    assert settled is not None and (settled.status, settled.reason) == ("False", "QuotaReserved")
    assert settled.message == "Previously: to admit team/urgent (on cluster east)"


def test_an_eviction_that_was_no_preemption_sets_no_preempted_condition() -> None:
    wl = bound_to("east", admitted=True)
    wl, _ = apply_report(wl, "east", report(WorkloadPhase.EVICTED), NOW)
    evicted = wl.condition("Evicted")
    assert evicted is not None and evicted.reason == "EvictedOnCluster"
    assert wl.condition("Preempted") is None


def test_a_bound_reservation_reported_again_is_sent_its_bind_again() -> None:
    wl, _ = apply_report(offered_to("east"), "east", report(WorkloadPhase.RESERVED), NOW)
    again, outcome = apply_report(
        transitions.for_change(wl), "east", report(WorkloadPhase.RESERVED), NOW
    )
    assert outcome.accepted and outcome.bind == "east" and outcome.withdraw == ()
    assert again.status == wl.status


def test_a_rejected_bound_offer_goes_back_to_the_hub_and_a_rejected_nominee_drops_out() -> None:
    bound = apply_rejection(bound_to("east"), "east", 2, "Rejected:Inadmissible", "no GPU", NOW)
    assert bound.status is not None and bound.status.cluster_name is None
    nominee = apply_rejection(offered_to("east", "west"), "east", 2, "Rejected:X", "", NOW)
    assert nominee.status is not None and nominee.status.nominated_cluster_names == ["west"]
    stale = bound_to("east", generation=3)
    assert apply_rejection(transitions.for_change(stale), "east", 2, "R", "", NOW).status == (
        stale.status
    )


def test_a_bound_cluster_that_refuses_an_admitted_workloads_offer_again_gives_it_back() -> None:
    wl = bound_to("east", admitted=True)
    after = apply_rejection(wl, "east", 2, "Rejected:StaleGeneration", "given back here", NOW)
    assert after.status is not None and after.status.cluster_name is None
    assert after.is_condition_true("Evicted") and after.is_condition_true("Requeued")


def test_an_admitted_workload_whose_jobs_the_cluster_refuses_says_why_in_pods_ready() -> None:
    wl = bound_to("east")
    refused = report(
        WorkloadPhase.ADMITTED,
        pending_reason="JobsForbidden",
        pending_message="the agent may not create this workload's Jobs: jobs.batch is forbidden",
    )
    wl, outcome = apply_report(wl, "east", refused, NOW)
    assert outcome.accepted and transitions.is_admitted(wl)
    (ready,) = [c for c in wl.status.conditions if c.type == "PodsReady"] if wl.status else []
    assert (ready.status, ready.reason) == ("False", "JobsForbidden")
    assert "jobs.batch is forbidden" in ready.message
    wl, _ = apply_report(
        wl, "east", report(WorkloadPhase.RUNNING, pods={"running": 1, "ready": 1}), NOW
    )
    assert wl.is_condition_true("PodsReady")


class TestPodsReadyRequeuing:
    """An eviction because pods were not ready requeues with Kueue's backoff, and past the
    backoff limit deactivates."""

    STRATEGY = RequeuingStrategy(
        backoff_base_seconds=10, backoff_max_seconds=25, backoff_limit_count=2
    )

    def evicted(self, wl: Workload, generation: int) -> Workload:
        timeout = report(
            WorkloadPhase.EVICTED,
            generation,
            pending_reason="PodsReadyTimeout",
            pending_message="pods not ready within the timeout of 5s",
        )
        wl, outcome = apply_report(wl, "east", timeout, NOW, requeuing=self.STRATEGY)
        assert outcome.accepted
        return wl

    def test_each_requeue_waits_twice_as_long_up_to_the_maximum_then_deactivates(self) -> None:
        waits = []
        wl = bound_to("east", generation=1, admitted=True)
        for generation in (1, 2, 3):
            if generation > 1:
                wl = transitions.mark_bound_offer(wl, "east", generation, NOW)
                wl, _ = apply_report(wl, "east", report(WorkloadPhase.ADMITTED, generation), NOW)
            wl = self.evicted(wl, generation)
            until = transitions.held_back_until(wl)
            waits.append(None if until is None else (until - NOW).total_seconds())
        assert waits[:2] == [10.0, 20.0]
        # The third eviction is past the limit of 2 requeues: deactivated, not held back.
        assert wl.spec.active is False
        requeued = next(c for c in wl.status.conditions if c.type == "Requeued")  # type: ignore[union-attr]
        assert requeued.reason == "RequeuingLimitExceeded"
        assert transitions.backoff_seconds(self.STRATEGY, 3) == 25.0

    def test_a_workload_activated_again_backs_off_from_the_start(self) -> None:
        wl = bound_to("east", generation=1, admitted=True)
        for generation in (1, 2, 3):
            if generation > 1:
                wl = transitions.mark_bound_offer(wl, "east", generation, NOW)
                wl, _ = apply_report(wl, "east", report(WorkloadPhase.ADMITTED, generation), NOW)
            wl = self.evicted(wl, generation)
        assert wl.spec.active is False
        assert transitions.reactivated(transitions.for_change(wl), NOW) == wl  # still stopped
        wl.spec = wl.spec.model_copy(update={"active": True})  # `qctl resume workload`
        wl = transitions.reactivated(transitions.for_change(wl), NOW)
        assert wl.status is not None and wl.status.requeue_state is None
        requeued = next(c for c in wl.status.conditions if c.type == "Requeued")
        assert (requeued.status, requeued.reason) == ("True", "Reactivated")
        assert transitions.reactivated(transitions.for_change(wl), NOW) == wl  # applied once
        # The next pods-ready timeout backs off from the base again, not deactivating.
        wl = transitions.mark_bound_offer(wl, "east", 4, NOW)
        wl, _ = apply_report(wl, "east", report(WorkloadPhase.ADMITTED, 4), NOW)
        wl = self.evicted(wl, 4)
        assert wl.spec.active is True
        until = transitions.held_back_until(wl)
        assert until is not None and (until - NOW).total_seconds() == 10.0

    def test_only_pods_ready_timeouts_count_toward_the_limit(self) -> None:
        wl = bound_to("east", generation=1, admitted=True)
        wl, _ = apply_report(wl, "east", report(WorkloadPhase.EVICTED, 1), NOW)  # preempted
        wl = transitions.mark_bound_offer(wl, "east", 2, NOW)
        wl, _ = apply_report(wl, "east", report(WorkloadPhase.ADMITTED, 2), NOW)
        wl = self.evicted(wl, 2)
        assert wl.status is not None and wl.status.requeue_state is not None
        assert wl.status.requeue_state.count == 1
        until = transitions.held_back_until(wl)
        assert until is not None and (until - NOW).total_seconds() == 10.0

    def test_other_evictions_are_dispatched_again_at_once(self) -> None:
        wl = bound_to("east", admitted=True)
        wl, _ = apply_report(
            wl, "east", report(WorkloadPhase.EVICTED), NOW, requeuing=self.STRATEGY
        )
        assert transitions.held_back_until(wl) is None


def test_a_waiting_note_decided_before_a_reservation_was_bound_leaves_the_binding_as_it_is() -> (
    None
):
    reserved = Condition(type="QuotaReserved", status="True", reason="QuotaReserved",
                         message="reserved on east", last_transition_time=NOW)  # fmt: skip
    bound = api_workload(
        "train", clusterName="east", dispatchGeneration=1, conditions=[reserved.to_wire()]
    )
    note = status_change(Wait(KEY, "Waiting", "no cluster can take it now"), NOW)
    assert note(transitions.for_change(bound)) == bound
    pending = api_workload("train", dispatchGeneration=1)
    waiting = note(transitions.for_change(pending)).condition("QuotaReserved")
    assert waiting is not None and (waiting.status, waiting.reason) == ("False", "Waiting")
