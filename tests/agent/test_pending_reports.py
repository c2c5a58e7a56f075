"""When the agent tells the hub again why a workload still waits: a new reason at once, a
new message for the same reason only after the refresh interval (its amounts move with
every admission, and every report is a write at the hub)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.engine.result import PendingCode, PendingReason, Unblock
from agent.records import pending_report_due
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport

REFRESH = 30.0


def reason(code: PendingCode, message: str) -> PendingReason:
    return PendingReason(code, message, Unblock.QUOTA_RELEASED)


def reported(phase: WorkloadPhase, code: PendingCode | None, message: str) -> WorkloadStatusReport:
    return WorkloadStatusReport(
        workload="team-a/job",
        generation=1,
        phase=phase,
        observed_at=datetime.fromtimestamp(0, UTC),
        pending_reason=code.value if code else None,
        pending_message=message,
    )


QUOTA = PendingCode.WAITING_FOR_QUOTA
SHORT = "insufficient unused quota for cpu in flavor default, 1 more needed"
SHORTER = "insufficient unused quota for cpu in flavor default, 500m more needed"


@pytest.mark.parametrize(
    ("last", "now_reason", "seconds_since", "due"),
    [
        pytest.param(None, reason(QUOTA, SHORT), 0.0, True, id="the first reason goes at once"),
        pytest.param(
            reported(WorkloadPhase.PENDING, QUOTA, SHORT),
            reason(QUOTA, SHORT),
            999.0,
            False,
            id="the same reason and message never go again",
        ),
        pytest.param(
            reported(WorkloadPhase.PENDING, QUOTA, SHORT),
            reason(QUOTA, SHORTER),
            REFRESH - 1,
            False,
            id="a new message for the same reason waits for the refresh interval",
        ),
        pytest.param(
            reported(WorkloadPhase.PENDING, QUOTA, SHORT),
            reason(QUOTA, SHORTER),
            REFRESH,
            True,
            id="a new message for the same reason goes once the interval has passed",
        ),
        pytest.param(
            reported(WorkloadPhase.PENDING, QUOTA, SHORT),
            reason(PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS, "waiting for 1 preempted"),
            0.0,
            True,
            id="a new reason goes at once",
        ),
        pytest.param(
            reported(WorkloadPhase.EVICTED, None, "preempted"),
            reason(QUOTA, SHORT),
            0.0,
            True,
            id="pending again after another phase goes at once",
        ),
    ],
)
def test_pending_reports_are_sent_when_the_reason_changes_and_refreshed_at_most_every_interval(
    last: WorkloadStatusReport | None, now_reason: PendingReason, seconds_since: float, due: bool
) -> None:
    assert pending_report_due(last, now_reason, 1000.0, 1000.0 + seconds_since, REFRESH) is due
