"""The lease bookkeeping and the Jobs' fencing deadlines on their own (agent.lease,
agent.deadlines): times are numbers, no clock is read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent.deadlines import (
    USER_DEADLINE_ANNOTATION,
    DeadlineChange,
    creation_deadline,
    deadline_change,
    stopped_by_fencing,
    with_deadline,
)
from agent.lease import Lease, LeaseTerms
from api.v1alpha1.messages import LeaseGrant

TERMS = LeaseTerms(lease_seconds=60, grace_seconds=30, enabled=True)


def grant(renew_id: int, lease: int = 60, grace: int = 30, *, enabled: bool = True) -> LeaseGrant:
    return LeaseGrant(id=renew_id, lease_seconds=lease, grace_seconds=grace, enabled=enabled)


# the lease -------------------------------------------------------------------------------------


def test_a_grant_holds_the_lease_from_when_its_renewal_was_sent() -> None:
    lease = Lease(TERMS, started=0.0)
    assert not lease.held(5.0)  # nothing is created before the first grant
    renew = lease.renewal(10.0)
    lease.grant(grant(renew.id), now=10.5)
    assert lease.deadline == 70.0  # t0 + lease, not the arrival + lease
    assert lease.held(69.9) and not lease.held(70.0)
    assert lease.expired(70.0) and lease.fence_at() == 70.0


def test_renewal_ids_increase_and_a_late_grant_never_shortens_the_lease() -> None:
    lease = Lease(TERMS, started=0.0)
    first, second = lease.renewal(10.0), lease.renewal(30.0)
    assert second.id == first.id + 1
    lease.grant(grant(second.id), now=30.1)
    lease.grant(grant(first.id), now=31.0)  # answered out of order
    assert lease.deadline == 90.0


def test_renewals_go_every_second_until_the_session_has_a_grant_then_every_third_lease() -> None:
    lease = Lease(TERMS, started=0.0, unleased_interval=1.0)
    assert lease.renew_interval() == 1.0
    lease.grant(grant(lease.renewal(0.0).id), now=0.1)
    assert lease.renew_interval() == 20.0
    lease.session_started()  # a new Hello: the hub has to answer again first
    assert lease.renew_interval() == 1.0
    assert lease.held(1.0)  # the lease itself is not lost by reconnecting


def test_a_new_agent_fences_after_one_lease_length_of_the_last_known_terms() -> None:
    lease = Lease(LeaseTerms(6, 4), started=100.0)
    assert lease.fence_at() == 106.0
    assert not lease.expired(105.9) and lease.expired(106.0)


def test_with_fencing_off_the_lease_is_held_once_granted_and_never_runs_out() -> None:
    lease = Lease(TERMS, started=0.0)
    changed = lease.grant(grant(lease.renewal(0.0).id, enabled=False), now=0.1)
    assert changed and lease.terms == LeaseTerms(60, 30, enabled=False)
    assert lease.held(10_000.0) and not lease.expired(10_000.0) and lease.fence_at() is None
    assert lease.job_deadline(1.0) is None and lease.stop_by(1.0, 5000.0) is None


def test_a_grant_after_the_fence_ends_it() -> None:
    lease = Lease(TERMS, started=0.0)
    lease.grant(grant(lease.renewal(0.0).id), now=0.1)
    lease.fenced = True
    assert not lease.grant(grant(lease.renewal(100.0).id), now=100.1)  # same terms
    assert not lease.fenced and lease.held(100.2)


def test_job_deadlines_fall_by_the_lease_deadline_plus_half_the_grace() -> None:
    lease = Lease(TERMS, started=0.0)
    lease.grant(grant(lease.renewal(10.0).id), now=10.2)
    assert lease.job_deadline(20.0) == 65  # 50 s of lease left + 15
    assert lease.stop_by(20.0, wall_now=1_000.0) == 1_065.0


def test_lease_terms_survive_their_json() -> None:
    terms = LeaseTerms(6, 4, enabled=False)
    assert LeaseTerms.from_json(terms.to_json()) == terms


# deadlines -------------------------------------------------------------------------------------


def job(
    deadline: int | None = None, *, user: int | None = None, started: float | None = 1000.0
) -> dict[str, Any]:
    spec: dict[str, Any] = {} if deadline is None else {"activeDeadlineSeconds": deadline}
    meta: dict[str, Any] = {"name": "j", "namespace": "team-a"}
    if user is not None:
        meta["annotations"] = {USER_DEADLINE_ANNOTATION: str(user)}
    status = {}
    if started is not None:
        status["startTime"] = (
            datetime.fromtimestamp(started, UTC).isoformat().replace("+00:00", "Z")
        )
    return {"metadata": meta, "spec": spec, "status": status}


def test_a_creation_deadline_rounds_down_and_is_at_least_a_second() -> None:
    assert creation_deadline(50.9, 30) == 65
    assert creation_deadline(0.2, 1) == 1


def test_a_new_job_gets_the_fencing_deadline_and_the_users_smaller_one_wins() -> None:
    plain = {"metadata": {"name": "j"}, "spec": {"parallelism": 1}}
    ours = with_deadline(plain, 65)
    assert ours["spec"] == {"parallelism": 1, "activeDeadlineSeconds": 65}
    assert plain["spec"] == {"parallelism": 1}, "copy on write"
    assert stopped_by_fencing(ours)

    users = {"metadata": {"name": "j"}, "spec": {"activeDeadlineSeconds": 30}}
    theirs = with_deadline(users, 65)
    assert theirs["spec"]["activeDeadlineSeconds"] == 30
    assert theirs["metadata"]["annotations"] == {USER_DEADLINE_ANNOTATION: "30"}
    assert not stopped_by_fencing(theirs)
    assert with_deadline(users, 10)["spec"]["activeDeadlineSeconds"] == 10

    assert with_deadline(plain, None) is plain  # fencing off, no user deadline: as it is
    assert with_deadline(users, None)["spec"]["activeDeadlineSeconds"] == 30


@pytest.mark.parametrize(
    ("the_job", "stop_by", "now", "change"),
    [
        pytest.param(job(75), 1095.0, 1040.0, None, id="more than half a lease left: no write"),
        pytest.param(
            job(75), 1095.0, 1046.0, DeadlineChange(95), id="less than half a lease: extended"
        ),
        pytest.param(
            job(75, user=90), 1095.0, 1046.0, DeadlineChange(90),
            id="never past the user's own deadline",
        ),
        pytest.param(
            job(90, user=90), 1200.0, 1080.0, None,
            id="the user's deadline already wins: nothing to keep",
        ),
        pytest.param(
            job(None), 1095.0, 1046.0, DeadlineChange(95),
            id="a job made while fencing was off gets the deadline",
        ),
        pytest.param(
            job(120, user=120), 1095.0, 1010.0, DeadlineChange(95),
            id="a user's deadline later than the lease allows is cut",
        ),
        pytest.param(job(75), None, 1046.0, DeadlineChange(None), id="fencing off: ours goes"),
        pytest.param(
            job(75, user=300), None, 1046.0, DeadlineChange(300),
            id="fencing off: the user's comes back",
        ),
        pytest.param(job(None), None, 1046.0, None, id="fencing off and no deadline: nothing"),
        pytest.param(job(75, started=None), 1095.0, 1070.0, None, id="not started: left alone"),
        pytest.param(
            job(75), 1074.5, 1046.0, None, id="a lease that moved nothing writes nothing"
        ),
    ],
)  # fmt: skip
def test_a_running_jobs_deadline(
    the_job: dict[str, Any], stop_by: float | None, now: float, change: DeadlineChange | None
) -> None:
    assert deadline_change(the_job, stop_by=stop_by, half_lease=30.0, now=now) == change


def test_a_deadline_change_is_a_merge_patch_of_that_one_field() -> None:
    assert DeadlineChange(95).patch() == {"spec": {"activeDeadlineSeconds": 95}}
    assert DeadlineChange(None).patch() == {"spec": {"activeDeadlineSeconds": None}}
