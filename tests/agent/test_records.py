"""Every transition of a held workload's record, on its own: the record and the fact in, the
new record and the effects out (agent.records). No cluster, no hub, no clock."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.engine.result import PendingCode, PendingReason, Unblock
from agent.records import (
    NOT_HELD,
    RESERVATION_EXPIRED,
    Cadence,
    LogShip,
    Materialize,
    Persist,
    Record,
    Reject,
    Report,
    Sighting,
    Step,
    StopJobs,
    next_report,
    observable,
    on_bind,
    on_engine_admit,
    on_evict,
    on_fence,
    on_materialize_denied,
    on_materialize_failed,
    on_materialized,
    on_offer,
    on_pending,
    on_timer,
    on_withdraw,
    wakeup,
)
from agent.status import Observation
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    ContainerExit,
    DispatchOffer,
    Envelope,
    PodCounts,
    RejectReason,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission, PodSetAssignment, WorkloadStatus
from tests.agent.conftest import job_source, offer_for

NOW = 1000.0
KEY = "team-a/job-w"
CADENCE = Cadence(status_interval=1.0, pending_refresh=30.0, finished_ttl=3600.0, settle=5.0)
ADMISSION = Admission(
    cluster_queue="cq",
    pod_set_assignments=[PodSetAssignment(name="main", flavors={"cpu": "default"}, count=1)],
)
P = WorkloadPhase


def offer(generation: int = 1, *, bound: bool = True, timeout: int = 30) -> DispatchOffer:
    made = offer_for(job_source("w"), generation=generation)
    return made.model_copy(update={"bound": bound, "reservation_timeout_seconds": timeout})


def held(phase: WorkloadPhase = P.PENDING, generation: int = 1, **changes: Any) -> Record:
    """A record as the transitions leave it in `phase` (admitted ones carry the admission)."""
    bound = changes.pop("bound", True)
    record = on_offer(None, offer(generation, bound=bound), NOW - 100).record
    assert record is not None
    if phase is not P.PENDING:
        admitted = on_engine_admit(record, ADMISSION, NOW - 90).record
        assert admitted is not None
        # (reported since, unless the test says otherwise)
        record = replace(admitted, phase=phase, unreported_since=None)
    if phase in (P.RUNNING, P.SUCCEEDED, P.FAILED) or changes.pop("materialised", False):
        record = replace(record, job_names=("w",), jobs_seen=True)
    return replace(record, **changes)


def report(phase: WorkloadPhase, at: float = NOW - 50, **fields: Any) -> WorkloadStatusReport:
    return WorkloadStatusReport(
        workload=KEY,
        generation=1,
        phase=phase,
        observed_at=datetime.fromtimestamp(at, UTC),
        **fields,
    )


def effects(step: Step) -> list[tuple[Any, ...]]:
    """The effects in a form a table can spell: ("Report", phase, reason, generation),
    ("Reject", reason), ("StopJobs", names), ("Materialize",), ("Persist", with_offer)."""
    out: list[tuple[Any, ...]] = []
    for effect in step.effects:
        match effect:
            case Report(payload=r):
                out.append(("Report", r.phase, r.pending_reason, r.generation))
            case Reject(payload=r):
                out.append(("Reject", r.reason))
            case StopJobs(job_names=names):
                out.append(("StopJobs", names))
            case Materialize():
                out.append(("Materialize",))
            case Persist(with_offer=with_offer):
                out.append(("Persist", with_offer))
    return out


def phase_of(step: Step) -> WorkloadPhase | None:
    return None if step.record is None else step.record.phase


def assert_given_back(step: Step, phase: WorkloadPhase) -> None:
    """The generation is kept as given back: settled, nothing made, its report kept."""
    record = step.record
    assert record is not None and record.settled and record.phase is phase
    assert record.job_names == () and record.finished_at == NOW
    assert record.last_report is not None and record.last_report.phase is phase


# hub messages ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "message", "phase", "expected"),
    [
        pytest.param(
            None, offer(), P.PENDING, [("Persist", True)], id="a new offer is held pending"
        ),
        pytest.param(
            held(P.RUNNING),
            offer(2),
            P.PENDING,
            [("StopJobs", ("w",)), ("Persist", True)],
            id="a newer generation replaces the held one once its Jobs are stopped",
        ),
        pytest.param(
            held(P.RESERVED, bound=False),
            offer(2),
            P.PENDING,
            [("StopJobs", ()), ("Persist", True)],
            id="a newer generation over an unmaterialised one stops whatever Jobs exist",
        ),
        pytest.param(
            held(P.RUNNING, 3),
            offer(2),
            P.RUNNING,
            [("Reject", RejectReason.STALE_GENERATION)],
            id="an older generation is rejected and the held one kept",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING)),
            offer(),
            P.RUNNING,
            [("Report", P.RUNNING, None, 1)],
            id="a redelivered offer only repeats the latest report",
        ),
        pytest.param(
            held(P.PENDING),
            offer(),
            P.PENDING,
            [],
            id="a redelivered offer of a workload never reported says nothing",
        ),
        pytest.param(
            held(P.RESERVED, bound=False),
            offer(bound=True),
            P.ADMITTED,
            [("Materialize",), ("Persist", False)],
            id="a redelivered offer that is now bound binds the held reservation",
        ),
    ],
)
def test_an_offer(
    before: Record | None, message: DispatchOffer, phase: WorkloadPhase, expected: list[Any]
) -> None:
    step = on_offer(before, message, NOW)
    assert phase_of(step) is phase
    assert effects(step) == expected


def test_an_older_hubs_offer_with_the_hubs_status_is_taken_and_that_status_dropped() -> None:
    # Hubs now offer a workload without its status; an older one sent the status it holds
    # (Dispatched, the cluster name): the agent never reads it, and makes its own.
    from_older_hub = offer()
    from_older_hub.workload.status = WorkloadStatus(cluster_name="sim-0", dispatch_generation=1)
    step = on_offer(None, from_older_hub, NOW)
    assert step.record is not None and phase_of(step) is P.PENDING
    assert step.record.workload.status is None
    assert step.record.offer.workload.status is None  # nor persisted with the offer


def test_an_offer_keeps_the_hubs_workload_and_fills_what_the_agent_needs() -> None:
    bare = offer(bound=False, timeout=7)
    bare.workload.metadata.uid = None
    step = on_offer(None, bare, NOW)
    record = step.record
    assert record is not None
    assert (record.key, record.generation, record.bound) == (KEY, 1, False)
    assert record.offered_at == NOW and record.workload.status is None
    assert record.workload.metadata.uid and len(record.workload.metadata.uid) == 36
    assert record.workload.metadata.creation_timestamp == datetime.fromtimestamp(NOW, UTC)
    assert bare.workload.metadata.uid is None, "the message itself is not changed"


@pytest.mark.parametrize(
    ("before", "generation", "phase", "expected"),
    [
        pytest.param(
            held(P.RESERVED, bound=False),
            1,
            P.ADMITTED,
            [("Materialize",), ("Persist", False)],
            id="a reservation is bound and materialised",
        ),
        pytest.param(
            held(P.PENDING, bound=False),
            1,
            P.PENDING,
            [("Persist", False)],
            id="a pending reservation request is marked bound and waits for the engine",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING)),
            1,
            P.RUNNING,
            [("Report", P.RUNNING, None, 1)],
            id="a redelivered Bind repeats the latest report",
        ),
        pytest.param(
            None,
            1,
            None,
            [("Report", P.WITHDRAWN, NOT_HELD, 1)],
            id="a Bind for a workload not held is answered Withdrawn",
        ),
        pytest.param(
            held(P.RESERVED, 1, bound=False),
            2,
            P.RESERVED,
            [("Report", P.WITHDRAWN, NOT_HELD, 2)],
            id="a Bind for a generation not held is answered Withdrawn for that generation",
        ),
        pytest.param(
            held(P.RESERVED, 3, bound=False),
            2,
            P.RESERVED,
            [],
            id="a Bind older than the held generation is ignored",
        ),
    ],
)
def test_a_bind(
    before: Record | None, generation: int, phase: WorkloadPhase | None, expected: list[Any]
) -> None:
    step = on_bind(before, Bind(workload=KEY, generation=generation), NOW)
    assert phase_of(step) is phase
    assert effects(step) == expected
    if phase is P.ADMITTED or (before is not None and before.phase is P.PENDING):
        assert step.record is not None and step.record.bound
    if phase is P.ADMITTED and before is not None and before.phase is P.RESERVED:
        # Bound now: its Admitted report waits for the pods, as an engine admission's does.
        assert step.record is not None and step.record.unreported_since == NOW


@pytest.mark.parametrize(
    ("before", "message", "expected"),
    [
        pytest.param(
            held(P.RUNNING),
            Withdraw(workload=KEY, generation=1, reason="BoundElsewhere"),
            [
                ("StopJobs", ("w",)),
                ("Report", P.WITHDRAWN, "BoundElsewhere", 1),
                ("Persist", False),
            ],
            id="a running workload withdrawn loses its Jobs",
        ),
        pytest.param(
            held(P.RESERVED, bound=False),
            Withdraw(workload=KEY, generation=1, reason="BoundElsewhere"),
            [("Report", P.WITHDRAWN, "BoundElsewhere", 1), ("Persist", False)],
            id="a withdrawn reservation is released with no call to the cluster",
        ),
        pytest.param(
            None,
            Withdraw(workload=KEY, generation=4, reason="NotDispatchedHere"),
            [("StopJobs", ()), ("Report", P.WITHDRAWN, "NotDispatchedHere", 4)],
            id="Jobs of a workload not held are deleted all the same",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True),
            Cancel(workload=KEY, generation=1, reason="UserDelete"),
            [("StopJobs", ("w",)), ("Report", P.WITHDRAWN, "UserDelete", 1), ("Persist", False)],
            id="a cancelled workload loses its Jobs",
        ),
    ],
)
def test_a_withdraw_or_cancel_stops_the_workload_and_keeps_its_generation_as_given_back(
    before: Record | None, message: Withdraw | Cancel, expected: list[Any]
) -> None:
    step = on_withdraw(before, message, NOW)
    if before is None:
        assert step.record is None
    else:
        assert_given_back(step, P.WITHDRAWN)
    assert effects(step) == expected


def test_a_withdraw_of_an_older_generation_is_ignored() -> None:
    before = held(P.RUNNING, 3)
    step = on_withdraw(before, Withdraw(workload=KEY, generation=2, reason="Stale"), NOW)
    assert step == Step(before)


def test_a_withdrawn_report_says_who_asked_when_the_hub_gives_no_message() -> None:
    step = on_withdraw(held(P.RUNNING), Cancel(workload=KEY, generation=1, reason=""), NOW)
    [_, sent, _] = step.effects
    assert isinstance(sent, Report)
    assert (sent.payload.pending_reason, sent.payload.pending_message) == (
        "Cancel",
        "Cancel by the hub",
    )
    assert sent.payload.conditions[0].type == "Evicted"


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        pytest.param(
            held(P.RUNNING),
            [("StopJobs", ("w",)), ("Report", P.EVICTED, "ClusterLost", 1), ("Persist", False)],
            id="a running workload is stopped and given back",
        ),
        pytest.param(
            held(P.RESERVED, bound=False),
            [("Report", P.EVICTED, "ClusterLost", 1), ("Persist", False)],
            id="a reservation is dropped",
        ),
        pytest.param(
            held(P.PENDING),
            [("Report", P.EVICTED, "ClusterLost", 1), ("Persist", False)],
            id="a pending offer too",
        ),
    ],
)
def test_a_fence_gives_back_everything_unfinished(before: Record, expected: list[Any]) -> None:
    step = on_fence(before, "fenced: the lease ran out", NOW)
    assert_given_back(step, P.EVICTED)
    assert effects(step) == expected


def test_a_fence_leaves_a_finished_workload_alone() -> None:
    before = held(P.SUCCEEDED)
    assert on_fence(before, "fenced", NOW) == Step(before)


# the engine ------------------------------------------------------------------------------------


def test_an_admitted_bound_workload_is_materialised_and_saved_once_its_jobs_exist() -> None:
    step = on_engine_admit(held(P.PENDING, preempting=True), ADMISSION, NOW)
    record = step.record
    assert record is not None and record.phase is P.ADMITTED and not record.preempting
    assert effects(step) == [("Materialize",)]
    assert record.workload.status is not None
    assert record.workload.status.admission == ADMISSION
    assert record.workload.status.conditions[0].type == "QuotaReserved"
    assert record.unreported_since == NOW

    made = on_materialized(record, ("w",))
    assert made.record is not None and made.record.job_names == ("w",)
    # Saved; Admitted is reported by the status passes, with Running if the pods start soon.
    assert effects(made) == [("Persist", False)]
    assert made.record.unreported_since == NOW
    assert made.record.look_again_at is None  # (the pass that applies it looks at once)


def test_jobs_the_cluster_forbids_are_reported_admitted_with_why_at_once() -> None:
    admitted = on_engine_admit(held(P.PENDING), ADMISSION, NOW).record
    assert admitted is not None and admitted.unreported_since == NOW
    denied = on_materialize_denied(admitted, "jobs.batch is forbidden", NOW + 0.1)
    assert effects(denied) == [("Report", P.ADMITTED, "JobsForbidden", 1)]
    assert denied.record is not None and denied.record.unreported_since is None


def test_an_admitted_reservation_creates_nothing_and_reports_reserved_with_its_admission() -> None:
    step = on_engine_admit(held(P.PENDING, bound=False), ADMISSION, NOW)
    record = step.record
    assert record is not None and record.phase is P.RESERVED and record.reserved_at == NOW
    assert effects(step) == [("Report", P.RESERVED, None, 1)]
    [sent] = step.effects
    assert isinstance(sent, Report) and sent.payload.admission == ADMISSION
    assert record.last_report == sent.payload


def test_a_workload_that_cannot_be_materialised_is_rejected_and_forgotten() -> None:
    step = on_materialize_failed(held(P.ADMITTED), "job exists and belongs to another workload")
    assert step.record is None
    assert effects(step) == [("Reject", RejectReason.INVALID)]


QUOTA = PendingReason(PendingCode.WAITING_FOR_QUOTA, "1 more cpu needed", Unblock.QUOTA_RELEASED)


@pytest.mark.parametrize(
    ("before", "reason", "expected", "kept"),
    [
        pytest.param(
            held(P.PENDING), QUOTA, [("Report", P.PENDING, "WaitingForQuota", 1)], True,
            id="the first reason is reported",
        ),
        pytest.param(
            held(
                P.PENDING,
                last_report=report(
                    P.PENDING, pending_reason="WaitingForQuota", pending_message="1 more cpu needed"
                ),
            ),
            QUOTA, [], True,
            id="the same reason again is not",
        ),
        pytest.param(
            held(P.PENDING),
            PendingReason(PendingCode.LOCAL_QUEUE_NOT_FOUND, "no lq", Unblock.QUOTA_CHANGED),
            [("Reject", RejectReason.NO_SUCH_QUEUE)], False,
            id="a queue this cluster lacks rejects the offer",
        ),
        pytest.param(
            held(P.PENDING),
            PendingReason(PendingCode.EXCEEDS_MAX_QUOTA, "exceeds", Unblock.QUOTA_CHANGED),
            [("Reject", RejectReason.INADMISSIBLE)], False,
            id="what only a new configuration could admit is rejected as inadmissible",
        ),
        pytest.param(
            held(P.RESERVED, bound=False), QUOTA, [], True,
            id="a reservation is not pending any more",
        ),
    ],
)  # fmt: skip
def test_a_pending_reason(
    before: Record, reason: PendingReason, expected: list[Any], kept: bool
) -> None:
    step = on_pending(before, reason, NOW, CADENCE)
    assert effects(step) == expected
    assert (step.record is not None) is kept


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        pytest.param(
            held(P.RUNNING),
            [("StopJobs", ("w",)), ("Report", P.EVICTED, "Preempted", 1), ("Persist", False)],
            id="a running victim loses its Jobs",
        ),
        pytest.param(
            held(P.ADMITTED),
            [("StopJobs", ()), ("Report", P.EVICTED, "Preempted", 1), ("Persist", False)],
            id="a victim still being materialised loses whatever Jobs it got",
        ),
        pytest.param(
            held(P.RESERVED, bound=False),
            [("Report", P.EVICTED, "Preempted", 1), ("Persist", False)],
            id="a reservation is evicted like an admitted workload",
        ),
    ],
)
def test_an_eviction(before: Record, expected: list[Any]) -> None:
    step = on_evict(before, "Preempted", "preempted by team-a/job-high", NOW)
    assert_given_back(step, P.EVICTED)
    assert effects(step) == expected


@pytest.mark.parametrize(
    ("step", "logs"),
    [
        (
            on_withdraw(held(P.RUNNING), Cancel(workload=KEY, generation=1, reason="U"), NOW),
            LogShip.BEFORE,
        ),
        (
            on_evict(held(P.RUNNING), "Preempted", "preempted by team-a/job-high", NOW),
            LogShip.ALONGSIDE,
        ),
        (on_evict(held(P.RUNNING), "PodsReadyTimeout", "not ready", NOW), LogShip.ALONGSIDE),
        (
            on_withdraw(held(P.RUNNING), Withdraw(workload=KEY, generation=1, reason="X"), NOW),
            LogShip.NONE,
        ),
        (on_fence(held(P.RUNNING), "fenced: the lease ran out", NOW), LogShip.NONE),
        (on_offer(held(P.RUNNING), offer(2), NOW), LogShip.NONE),
    ],
    ids=["cancel", "preemption", "eviction", "withdrawal", "fence", "a newer generation"],
)
def test_a_cancel_ships_the_logs_before_the_jobs_go_an_eviction_alongside_others_not(
    step: Step, logs: LogShip
) -> None:
    stops = [e for e in step.effects if isinstance(e, StopJobs)]
    assert len(stops) == 1
    assert stops[0].logs is logs


@pytest.mark.parametrize(
    "given_back",
    [
        on_evict(held(P.RUNNING), "ClusterLost", "fenced", NOW).record,
        on_withdraw(held(P.RUNNING), Withdraw(workload=KEY, generation=1, reason="X"), NOW).record,
    ],
    ids=["evicted", "withdrawn"],
)
def test_a_generation_given_back_is_never_run_again_only_reported_again(
    given_back: Record | None,
) -> None:
    assert given_back is not None
    again = given_back.last_report
    offer = on_offer(given_back, given_back.offer.model_copy(update={"bound": True}), NOW + 1)
    bind = on_bind(given_back, Bind(workload=KEY, generation=1), NOW + 1)
    withdraw = on_withdraw(given_back, Withdraw(workload=KEY, generation=1, reason="Y"), NOW + 1)
    for step in (offer, bind, withdraw):
        assert step.record is given_back
        assert step.effects == (Report(again),) if again is not None else ()
    newer = on_offer(given_back, given_back.offer.model_copy(update={"generation": 2}), NOW + 1)
    assert newer.record is not None and newer.record.phase is P.PENDING
    assert newer.record.generation == 2
    assert not any(isinstance(e, StopJobs) for e in newer.effects)  # nothing runs to stop


# timers ----------------------------------------------------------------------------------------


def test_a_reservation_not_bound_in_time_is_released() -> None:
    reserved = held(P.RESERVED, bound=False, reserved_at=NOW - 30)
    assert wakeup(reserved, CADENCE) == NOW  # the offer's 30 s
    assert on_timer(reserved, NOW - 0.1, CADENCE) == Step(reserved)
    step = on_timer(reserved, NOW, CADENCE)
    assert_given_back(step, P.WITHDRAWN)
    assert effects(step) == [("Report", P.WITHDRAWN, RESERVATION_EXPIRED, 1), ("Persist", False)]


def test_a_bound_workload_has_no_reservation_timer() -> None:
    assert wakeup(held(P.RUNNING, reserved_at=NOW - 99), CADENCE) is None


def test_a_finished_workload_is_forgotten_after_its_ttl_without_a_word() -> None:
    done = held(P.SUCCEEDED, finished_at=NOW - 3600)
    assert wakeup(done, CADENCE) == NOW
    assert on_timer(done, NOW, CADENCE) == Step(None)
    younger = replace(done, finished_at=NOW - 10)
    assert on_timer(younger, NOW, CADENCE) == Step(younger)


def test_a_look_again_time_that_came_is_cleared() -> None:
    waiting = held(P.RUNNING, look_again_at=NOW - 1)
    assert wakeup(waiting, CADENCE) == NOW - 1
    step = on_timer(waiting, NOW, CADENCE)
    assert step.record is not None and step.record.look_again_at is None
    assert step.effects == ()


# the status pass -------------------------------------------------------------------------------

RUNNING_PODS = PodCounts(running=1, ready=1)
DONE_PODS = PodCounts(succeeded=1)
EXIT = ContainerExit(pod="w-abc", container="main", exit_code=0, reason="Completed")


def seen(
    phase: WorkloadPhase,
    pods: PodCounts = RUNNING_PODS,
    *,
    exist: bool = True,
    message: str = "",
    fenced: bool = False,
    relisted: bool = False,
) -> Sighting:
    exits = (EXIT,) if phase is P.SUCCEEDED else ()
    return Sighting(Observation(phase, pods, exits, message, fenced), exist, relisted)


@pytest.mark.parametrize(
    ("before", "sighting", "phase", "expected"),
    [
        pytest.param(
            held(P.ADMITTED, materialised=True, last_report=report(P.ADMITTED, NOW - 2)),
            seen(P.RUNNING),
            P.RUNNING,
            [("Report", P.RUNNING, None, 1)],
            id="running is reported once the status interval has passed",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, last_report=report(P.ADMITTED, NOW - 0.5)),
            seen(P.RUNNING),
            P.ADMITTED,
            [],
            id="running within the status interval of admitted waits",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, unreported_since=NOW - 0.5),
            seen(P.ADMITTED, PodCounts(pending=1)),
            P.ADMITTED,
            [],
            id="admitted waits for its pods to start, within the status interval",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, unreported_since=NOW - 0.5),
            seen(P.RUNNING),
            P.RUNNING,
            [("Report", P.RUNNING, None, 1)],
            id="pods started within it: one report, running",
        ),
        pytest.param(
            held(
                P.ADMITTED,
                materialised=True,
                unreported_since=NOW - 0.5,
                last_report=report(P.RESERVED, NOW - 0.6),
            ),
            seen(P.RUNNING),
            P.RUNNING,
            [("Report", P.RUNNING, None, 1)],
            id="a reservation's recent report does not hold back running",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, unreported_since=NOW - 1),
            seen(P.ADMITTED, PodCounts(pending=1)),
            P.ADMITTED,
            [("Report", P.ADMITTED, None, 1)],
            id="pods not started within the status interval: admitted is reported then",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, unreported_since=NOW - 0.5),
            seen(P.SUCCEEDED, DONE_PODS),
            P.SUCCEEDED,
            [("Report", P.SUCCEEDED, None, 1), ("Persist", False)],
            id="a job done before admitted was reported: one report, its end",
        ),
        pytest.param(
            held(P.ADMITTED, materialised=True, last_report=report(P.ADMITTED, NOW - 0.5)),
            seen(P.SUCCEEDED, DONE_PODS),
            P.SUCCEEDED,
            [("Report", P.SUCCEEDED, None, 1), ("Persist", False)],
            id="a finish is reported at once, and saved",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 0.5, pods=RUNNING_PODS)),
            seen(P.RUNNING, PodCounts(running=1)),
            P.RUNNING,
            [],
            id="new pod counts within the status interval wait",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5, pods=RUNNING_PODS)),
            seen(P.RUNNING),
            P.RUNNING,
            [],
            id="nothing new is not reported",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.ADMITTED, PodCounts(pending=1)),
            P.RUNNING,
            [],
            id="a lagging mirror never moves a phase backwards",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.RUNNING, exist=False),
            P.FAILED,
            [("Report", P.FAILED, None, 1), ("Persist", False)],
            id="jobs seen and gone were deleted outside MultiQ",
        ),
        pytest.param(
            held(
                P.ADMITTED,
                materialised=True,
                jobs_seen=False,
                last_report=report(P.ADMITTED, NOW - 5),
            ),
            seen(P.ADMITTED, PodCounts(), exist=False),
            P.ADMITTED,
            [],
            id="jobs not mirrored yet are not missing",
        ),
        pytest.param(
            held(P.RUNNING, jobs_seen=False, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.RUNNING, exist=False, relisted=True),
            P.FAILED,
            [("Report", P.FAILED, None, 1), ("Persist", False)],
            id="jobs missing after a restart's listing are gone",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.FAILED, message="job w: DeadlineExceeded", fenced=True),
            P.EVICTED,
            [("StopJobs", ("w",)), ("Report", P.EVICTED, "ClusterLost", 1), ("Persist", False)],
            id="a job failed by the fencing deadline is given back, not failed",
        ),
        pytest.param(
            held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.SUCCEEDED, PodCounts(running=1, succeeded=1)),
            P.RUNNING,
            [],
            id="done per the jobs, pods still running: the report waits for them",
        ),
        pytest.param(
            held(P.RUNNING, settling_since=NOW - 5, last_report=report(P.RUNNING, NOW - 5)),
            seen(P.SUCCEEDED, PodCounts(running=1, succeeded=1)),
            P.SUCCEEDED,
            [("Report", P.SUCCEEDED, None, 1), ("Persist", False)],
            id="but not longer than the settle time",
        ),
    ],
)
def test_a_status_pass(
    before: Record, sighting: Sighting, phase: WorkloadPhase | None, expected: list[Any]
) -> None:
    step = next_report(before, sighting, NOW, CADENCE)
    assert phase_of(step) is phase
    assert effects(step) == expected


def test_a_look_while_a_report_is_held_back_keeps_the_record_as_it_is() -> None:
    before = held(P.ADMITTED, materialised=True, last_report=report(P.ADMITTED, NOW - 0.25))
    waiting = next_report(before, seen(P.RUNNING), NOW, CADENCE).record
    assert waiting is not None and waiting.look_again_at == NOW + 0.75
    again = next_report(waiting, seen(P.RUNNING), NOW + 0.5, CADENCE)
    assert again.record is waiting and again.effects == ()
    done_per_jobs = seen(P.SUCCEEDED, PodCounts(running=1, succeeded=1))
    settling = next_report(held(P.RUNNING), done_per_jobs, NOW, CADENCE).record
    assert settling is not None and settling.look_again_at == NOW + 5
    assert next_report(settling, done_per_jobs, NOW + 1, CADENCE).record is settling


def test_an_admitted_report_held_for_its_pods_is_due_when_the_status_interval_ends() -> None:
    before = held(P.ADMITTED, materialised=True, unreported_since=NOW - 0.25)
    step = next_report(before, seen(P.ADMITTED, PodCounts(pending=1)), NOW, CADENCE)
    assert step.record is not None and step.effects == ()
    assert step.record.look_again_at == NOW + 0.75
    assert wakeup(step.record, CADENCE) == NOW + 0.75
    sent = next_report(step.record, seen(P.RUNNING), NOW + 0.5, CADENCE).record
    assert sent is not None and sent.unreported_since is None
    assert sent.last_report is not None and sent.last_report.phase is P.RUNNING
    assert sent.last_report.admission == ADMISSION  # the hub learns the admission with it


def test_a_report_sent_from_a_held_back_record_leaves_no_look_again_time() -> None:
    waiting = held(
        P.ADMITTED, materialised=True, unreported_since=NOW - 0.5, look_again_at=NOW + 0.5
    )
    assert wakeup(waiting, CADENCE) == NOW + 0.5
    sent = next_report(waiting, seen(P.RUNNING), NOW, CADENCE).record
    assert sent is not None and sent.last_report is not None
    assert sent.look_again_at is None and wakeup(sent, CADENCE) is None


def test_a_held_back_report_sets_when_to_look_again() -> None:
    before = held(P.ADMITTED, materialised=True, last_report=report(P.ADMITTED, NOW - 0.25))
    step = next_report(before, seen(P.RUNNING), NOW, CADENCE)
    assert step.record is not None and step.record.look_again_at == NOW + 0.75
    settling = next_report(
        held(P.RUNNING), seen(P.SUCCEEDED, PodCounts(running=1, succeeded=1)), NOW, CADENCE
    )
    assert settling.record is not None
    assert (settling.record.settling_since, settling.record.look_again_at) == (NOW, NOW + 5)


def test_a_finished_workload_gets_its_condition_frees_its_quota_and_starts_its_ttl() -> None:
    before = held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5))
    step = next_report(before, seen(P.SUCCEEDED, DONE_PODS), NOW, CADENCE)
    record = step.record
    assert record is not None and record.finished and record.finished_at == NOW
    assert record.workload is not before.workload  # the snapshot sees a new object
    assert record.workload.status is not None
    conditions = [c.type for c in record.workload.status.conditions]
    assert conditions == ["QuotaReserved", "PodsReady", "Finished"]
    assert wakeup(record, CADENCE) == NOW + 3600
    assert not observable(record)
    sent = record.last_report
    assert sent is not None and sent.exits == [EXIT] and sent.pods == DONE_PODS


def test_a_failure_with_no_exit_code_says_why_in_its_message() -> None:
    before = held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5))
    step = next_report(before, seen(P.RUNNING, exist=False), NOW, CADENCE)
    assert step.record is not None and step.record.last_report is not None
    assert "deleted outside MultiQ" in step.record.last_report.pending_message


def test_jobs_deleted_after_their_pods_were_seen_killed_are_reported_as_deleted() -> None:
    # The deletion's SIGTERM ends the pods (exit 143) before they go; whether the mirror saw
    # that first is a race, and the report says the same either way.
    killed = ContainerExit(pod="w-abc", container="main", exit_code=143, reason="Error")
    before = held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5))
    sighting = Sighting(Observation(P.RUNNING, RUNNING_PODS, (killed,)), False, False)
    step = next_report(before, sighting, NOW, CADENCE)
    sent = step.record.last_report if step.record is not None else None
    assert sent is not None and sent.phase is P.FAILED
    assert sent.exits == [killed]
    assert sent.pending_message == "its Jobs were deleted outside MultiQ"


def test_a_failed_job_whose_exit_codes_tell_why_sends_no_message_of_its_own() -> None:
    failed = ContainerExit(pod="w-abc", container="main", exit_code=1, reason="Error")
    before = held(P.RUNNING, last_report=report(P.RUNNING, NOW - 5))
    sighting = Sighting(
        Observation(P.FAILED, PodCounts(failed=1), (failed,), "job w: BackoffLimitExceeded"),
        True,
        False,
    )
    step = next_report(before, sighting, NOW, CADENCE)
    sent = step.record.last_report if step.record is not None else None
    assert sent is not None and sent.phase is P.FAILED and sent.exits == [failed]
    assert sent.pending_message == ""


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(held(P.PENDING), id="pending"),
        pytest.param(held(P.RESERVED, bound=False), id="reserved"),
        pytest.param(held(P.ADMITTED), id="admitted, its Jobs not made yet"),
        pytest.param(held(P.SUCCEEDED), id="finished"),
    ],
)
def test_a_status_pass_does_not_look_at_a_workload_without_running_jobs(record: Record) -> None:
    assert not observable(record)
    assert next_report(record, seen(P.RUNNING), NOW, CADENCE) == Step(record)


# persistence -----------------------------------------------------------------------------------


def test_a_record_comes_back_from_its_json_with_its_binding_and_reservation() -> None:
    reserved = held(P.RESERVED, bound=False)
    again = Record.from_json(reserved.offer_json(), reserved.state_json())
    assert (again.key, again.phase, again.bound, again.reserved_at) == (
        KEY,
        P.RESERVED,
        False,
        NOW - 90,
    )
    assert again.workload.status == reserved.workload.status
    running = held(P.RUNNING)
    assert Record.from_json(running.offer_json(), running.state_json()).job_names == ("w",)


def _envelope_of(made: DispatchOffer, **extra: Any) -> str:
    """The text a hub's lane delivers the offer in (with `extra` members, as a newer hub)."""
    text = Envelope.wrap(made, seq=7, ack=3).to_json()
    if not extra:
        return text
    data = json.loads(text)
    data["payload"].update(extra)
    return json.dumps(data)


def _taken(text: str) -> tuple[Record, Persist]:
    """The record an offer that came in `text` makes, and how it is saved."""
    decoded, _ = Envelope.decode_from_peer(text)
    assert isinstance(decoded.payload, DispatchOffer)
    step = on_offer(None, decoded.payload, NOW, text)
    assert step.record is not None
    (persist,) = [e for e in step.effects if isinstance(e, Persist)]
    return step.record, persist


def test_an_offer_is_persisted_in_the_envelope_it_came_in_and_read_back_as_it_was_held() -> None:
    made = offer()
    made.workload.metadata.creation_timestamp = None
    made.workload.metadata.uid = None
    made.workload.status = WorkloadStatus(admission=ADMISSION)  # as an older hub sent it
    text = _envelope_of(made)
    record, persist = _taken(text)
    assert persist == Persist(with_offer=True, offer_text=text)
    again = Record.from_json(text, record.state_json())
    assert again == record
    assert again.offer == record.offer and again.workload == record.workload
    assert again.workload.status is None and again.offer.workload.metadata.uid
    assert again.workload.metadata.creation_timestamp == record.workload.metadata.creation_timestamp


def test_an_offer_without_its_text_at_hand_is_persisted_encoded_and_read_back() -> None:
    step = on_offer(None, offer(), NOW)
    assert step.record is not None
    assert Persist(with_offer=True) in step.effects
    assert "payload" not in json.loads(step.record.offer_json())
    assert Record.from_json(step.record.offer_json(), step.record.state_json()) == step.record


def test_a_persisted_envelope_from_a_newer_hub_reads_back_without_its_unknown_fields() -> None:
    text = _envelope_of(offer(), priorityBoost=3)
    assert Envelope.decode_from_peer(text)[1]  # (the field it does not know)
    record, persist = _taken(text)
    assert persist.offer_text == text
    assert Record.from_json(text, record.state_json()) == record


def test_a_persisted_envelope_that_holds_no_offer_is_unreadable() -> None:
    record = held(P.PENDING)
    bind = Envelope.wrap(Bind(workload=KEY, generation=1), seq=1).to_json()
    with pytest.raises(ValueError, match="Bind"):
        Record.from_json(bind, record.state_json())
    with pytest.raises(ValueError):
        Record.from_json(bind.replace('"generation":1', '"generation":0'), record.state_json())
