"""A Job's modifications that change nothing its readers look at are kept by the jobs mirror
but not announced: a plain Job's pod counters (kubesim's and Kubernetes' Job controllers write
them twice as a pod starts) and its fencing deadline do not make the status pass look at its
workload again. Whatever `job_seen` leaves out changes no reader's outcome."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.deadlines import USER_DEADLINE_ANNOTATION
from agent.inventory import job_seen, slim_job
from agent.jobsets import REPLICATED_JOB_NAME, job_view
from agent.k8s.client import Resource, WatchEvent
from agent.k8s.watching import Mirror, Relisted
from agent.status import observe
from tests.agent.test_mirror_slim import LABELS

JsonObject = dict[str, Any]

INDEX = ("multiq.dev/workload-namespace", "multiq.dev/workload-name")


def job(
    *,
    conditions: list[JsonObject] | None = None,
    counts: JsonObject | None = None,
    role: str | None = None,
    deadline: int | None = None,
    user_deadline: str | None = None,
) -> JsonObject:
    labels = dict(LABELS) | ({REPLICATED_JOB_NAME: role} if role else {})
    annotations = {} if user_deadline is None else {USER_DEADLINE_ANNOTATION: user_deadline}
    spec: JsonObject = {"parallelism": 2, "template": {"spec": {"containers": []}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "w",
            "namespace": "team-a",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"conditions": conditions or [], **(counts or {})},
    }


def jobs_mirror(announced: list[Resource]) -> Mirror:
    return Mirror(
        None,  # type: ignore[arg-type]
        Resource.JOBS,
        index=INDEX,
        on_change=announced.append,
        slim=slim_job,
        seen=job_seen,
    )


def test_a_plain_jobs_counters_and_deadline_are_kept_but_not_announced() -> None:
    announced: list[Resource] = []
    mirror = jobs_mirror(announced)
    mirror.apply(WatchEvent("ADDED", job()))
    assert mirror.take_changes() == (False, {("team-a", "job-w")}) and len(announced) == 1
    started = job(counts={"active": 1, "ready": 0, "startTime": "2026-12-07T01:00:00Z"})
    mirror.apply(WatchEvent("MODIFIED", started))
    mirror.apply(WatchEvent("MODIFIED", job(counts={"active": 1, "ready": 1}, deadline=90)))
    assert mirror.take_changes() == (False, set()) and len(announced) == 1
    kept = mirror.objects["team-a/w"]
    assert kept["status"]["ready"] == 1 and kept["spec"]["activeDeadlineSeconds"] == 90
    assert mirror.owned_by("team-a", "job-w") == [kept]


def test_a_jobs_condition_its_deletion_or_its_labels_are_announced() -> None:
    announced: list[Resource] = []
    mirror = jobs_mirror(announced)
    mirror.apply(WatchEvent("ADDED", job()))
    going = job()
    going["metadata"]["deletionTimestamp"] = "2026-12-07T01:00:00Z"
    relabelled = job()
    relabelled["metadata"]["labels"]["multiq.dev/dispatch-generation"] = "2"
    complete = job(conditions=[{"type": "Complete", "status": "True"}])
    for changed in (going, relabelled, complete):
        mirror.take_changes()
        mirror.apply(WatchEvent("MODIFIED", changed))
        assert mirror.take_changes() == (False, {("team-a", "job-w")})
    assert len(announced) == 4
    assert "template" not in mirror.objects["team-a/w"]["spec"]  # (slimmed once finished)


def test_a_failed_jobs_deadlines_are_announced_they_say_whether_fencing_failed_it() -> None:
    announced: list[Resource] = []
    mirror = jobs_mirror(announced)
    failed = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]
    mirror.apply(WatchEvent("ADDED", job(conditions=failed, deadline=60)))
    for changed in (
        job(conditions=failed, deadline=90),
        job(conditions=failed, deadline=90, user_deadline="80"),
    ):
        mirror.take_changes()
        mirror.apply(WatchEvent("MODIFIED", changed))
        assert mirror.take_changes() == (False, {("team-a", "job-w")})
    assert len(announced) == 3


def test_a_jobset_jobs_ready_and_succeeded_pods_are_announced() -> None:
    announced: list[Resource] = []
    mirror = jobs_mirror(announced)
    mirror.apply(WatchEvent("ADDED", job(role="workers")))
    for counts in ({"ready": 1}, {"ready": 2}, {"ready": 1, "succeeded": 1}):
        mirror.take_changes()
        mirror.apply(WatchEvent("MODIFIED", job(role="workers", counts=counts)))
        assert mirror.take_changes() == (False, {("team-a", "job-w")})
    mirror.apply(
        WatchEvent(
            "MODIFIED", job(role="workers", counts={"ready": 1, "succeeded": 1, "active": 1})
        )
    )
    assert mirror.take_changes() == (False, set())


def test_a_relist_keeps_slimmed_objects_and_marks_everything() -> None:
    mirror = jobs_mirror([])
    done = job(conditions=[{"type": "Complete", "status": "True"}])
    mirror.apply(Relisted([copy.deepcopy(done)], "7"))
    assert "template" not in mirror.objects["team-a/w"]["spec"]
    assert mirror.take_changes()[0] is True


conditions = st.sampled_from(
    [
        [],
        [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}],
        [{"type": "Complete", "status": "True", "reason": ""}],
        [{"type": "Failed", "status": "False", "reason": ""}],
        [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}],
    ]
)
"""A Job's conditions: none, or one of each kind and reason the status pass tells apart."""
counts = st.fixed_dictionaries(
    {},
    optional={
        "active": st.integers(0, 3),
        "ready": st.integers(0, 3),
        "succeeded": st.integers(0, 3),
        "failed": st.integers(0, 3),
        "startTime": st.sampled_from(["2026-12-07T01:00:00Z", "2026-12-07T01:00:09Z"]),
    },
)


deadlines = st.tuples(st.sampled_from([None, 60, 90]), st.sampled_from([None, "60", "120"]))
"""The Job's activeDeadlineSeconds, and the user's own as the agent remembers it."""


@settings(max_examples=400)  # (a fenced failure's deadlines differing: ~1 example in 30)
@given(
    role=st.sampled_from([None, "workers"]),
    before=st.tuples(conditions, counts, deadlines),
    after=st.tuples(conditions, counts, deadlines),
    same_conditions=st.booleans(),
)
def test_a_job_modification_left_unannounced_changes_nothing_the_status_pass_or_a_jobset_reads(
    role: str | None,
    before: tuple[list[JsonObject], JsonObject, tuple[int | None, str | None]],
    after: tuple[list[JsonObject], JsonObject, tuple[int | None, str | None]],
    same_conditions: bool,
) -> None:
    a = job(
        conditions=before[0],
        counts=before[1],
        deadline=before[2][0],
        user_deadline=before[2][1],
        role=role,
    )
    b = job(
        conditions=before[0] if same_conditions else after[0],
        counts=after[1],
        deadline=after[2][0],
        user_deadline=after[2][1],
        role=role,
    )
    announced: list[Resource] = []
    mirror = jobs_mirror(announced)
    mirror.apply(WatchEvent("ADDED", a))
    mirror.apply(WatchEvent("MODIFIED", b))
    if len(announced) == 2:
        return
    look = {"uid": "uid-w", "generation": 1, "job_names": ["w"], "pods": []}
    assert observe(jobs=[a], **look) == observe(jobs=[b], **look)  # type: ignore[arg-type]
    if role is not None:
        assert job_view(a) == job_view(b)
