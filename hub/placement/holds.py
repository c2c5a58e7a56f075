"""PURE: which Slurm-mode workloads the hub holds back, and why — a user hold (`-H`), a begin
time (`--begin`), a dependency (`--dependency`) and an array's throttle (`--array=…%N`) — and
which can never run (a dependency that can never be satisfied, so the job is cancelled).

What a Slurm job's state is, as squeue and sacct say it, is decided here too (`job_state`), from
its Workload: the dependency rules read the states of the jobs depended on.

Dependencies, as sbatch(1) defines them, per job named (`N`: a job, or every task of array N;
`N_I`: one task): `after` — it started (or ended); `afterany` — it ended; `afterok` — it
completed with exit code 0 (never, once it ended otherwise); `afternotok` — it ended otherwise
than completed (never, once it completed). A task list (an array) satisfies a term when every
task does (`afternotok`: every task ended and at least one did not complete). A job MultiQ no
longer knows satisfies every term (Slurm forgets a job after a while too). `singleton`: no
other unfinished job of the same name and user with a lower id. `,` needs every term, `?` any.

Read by the dispatch cycle (hub.placement.cycle, before routing each candidate) and by the
Slurm listing (hub.slurm), which shows the same reasons squeue shows. No I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from api.slurm.options import Dependency
from api.slurm.work import SlurmFacts
from api.v1alpha1.workload import Workload
from hub import transitions

__all__ = [
    "ARRAY_TASK_LIMIT",
    "NEVER_SATISFIED",
    "Hold",
    "JobState",
    "SlurmJobs",
    "hold_of",
    "is_live",
    "job_state",
    "throttle_hold",
]

NEVER_SATISFIED = "DependencyNeverSatisfied"
ARRAY_TASK_LIMIT = "JobArrayTaskLimit"
DEADLINE_EXCEEDED = "DeadlineExceeded"
CANCEL_REASONS = frozenset({"Cancelled", NEVER_SATISFIED})


class JobState(enum.StrEnum):
    """Slurm's job states (squeue's %T; %t is `code`)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"

    @property
    def code(self) -> str:
        return _CODES[self]

    @property
    def ended(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING)


_CODES = {
    JobState.PENDING: "PD",
    JobState.RUNNING: "R",
    JobState.COMPLETED: "CD",
    JobState.FAILED: "F",
    JobState.CANCELLED: "CA",
    JobState.TIMEOUT: "TO",
}


class Candidate(Protocol):
    @property
    def workload(self) -> Workload: ...


class SlurmJobs(Protocol):
    """The Slurm-mode workloads the hub knows, indexed (hub.slurm_index keeps one)."""

    @property
    def facts(self) -> Mapping[str, SlurmFacts]: ...

    def key_of_job(self, job_id: int) -> str | None: ...

    def tasks_of_array(self, array_job_id: int) -> Set[str]: ...

    def keys_named(self, name: str, user: str) -> Set[str]: ...


@dataclass(frozen=True, slots=True)
class Hold:
    reason: str
    message: str
    never: bool = False
    """The job can never run: cancel it (reason DependencyNeverSatisfied)."""


def job_state(wl: Workload) -> JobState:
    finished = wl.condition(transitions.FINISHED)
    if finished is not None and finished.status == "True":
        if finished.reason == "Succeeded":
            return JobState.COMPLETED
        if finished.reason in CANCEL_REASONS:
            return JobState.CANCELLED
        if DEADLINE_EXCEEDED in finished.message:
            return JobState.TIMEOUT
        return JobState.FAILED
    st = wl.status
    if st is not None and st.cluster_name and transitions.is_admitted(wl):
        return JobState.RUNNING
    return JobState.PENDING


def is_live(wl: Workload, offered: bool) -> bool:
    """Counts against its array's throttle: offered, bound or running, and not ended."""
    if transitions.is_finished(wl):
        return False
    st = wl.status
    return offered or (st is not None and bool(st.cluster_name or st.nominated_cluster_names))


def _keys_named(ref: str, jobs: SlurmJobs) -> list[str]:
    job, _, task = ref.partition("_")
    job_id = int(job)
    tasks = jobs.tasks_of_array(job_id)
    if task:
        wanted = int(task)
        return [
            k
            for k in tasks
            if (f := jobs.facts.get(k)) is not None and f.ids.array_task_id == wanted
        ]
    if tasks:
        return sorted(tasks)
    key = jobs.key_of_job(job_id)
    return [key] if key is not None else []


def _verdict(kind: str, states: list[JobState]) -> bool | None:
    """True: satisfied; False: never; None: not yet."""
    if not states:
        return True  # a job MultiQ no longer knows
    if kind == "after":
        return True if all(s is not JobState.PENDING for s in states) else None
    if kind == "afterany":
        return True if all(s.ended for s in states) else None
    if kind == "afterok":
        if any(s.ended and s is not JobState.COMPLETED for s in states):
            return False
        return True if all(s is JobState.COMPLETED for s in states) else None
    # afternotok
    if not all(s.ended for s in states):
        return None
    return any(s is not JobState.COMPLETED for s in states)


def _term(term: Dependency, jobs: SlurmJobs, workloads: Mapping[str, Candidate]) -> bool | None:
    result: bool | None = True
    for ref in term.job_ids:
        states = [
            job_state(workloads[k].workload) for k in _keys_named(ref, jobs) if k in workloads
        ]
        verdict = _verdict(term.type, states)
        if verdict is False:
            return False
        if verdict is None:
            result = None
    return result


def _singleton(
    facts: SlurmFacts, key: str, jobs: SlurmJobs, workloads: Mapping[str, Candidate]
) -> bool:
    for other in jobs.keys_named(facts.name, facts.user):
        if other == key:
            continue
        theirs = jobs.facts.get(other)
        entry = workloads.get(other)
        if theirs is None or entry is None or theirs.ids.job_id >= facts.ids.job_id:
            continue
        if not job_state(entry.workload).ended:
            return False
    return True


def dependency_verdict(
    facts: SlurmFacts, key: str, jobs: SlurmJobs, workloads: Mapping[str, Candidate]
) -> bool | None:
    """True: satisfied (or none); False: can never be; None: not yet."""
    spec = facts.dependency
    verdicts = [_term(t, jobs, workloads) for t in spec.terms]
    if spec.singleton:
        verdicts.append(True if _singleton(facts, key, jobs, workloads) else None)
    if not verdicts:
        return True
    if spec.any_of:
        if any(v is True for v in verdicts):
            return True
        return False if all(v is False for v in verdicts) else None
    if any(v is False for v in verdicts):
        return False
    return True if all(v is True for v in verdicts) else None


def hold_of(
    key: str,
    facts: SlurmFacts,
    jobs: SlurmJobs,
    workloads: Mapping[str, Candidate],
    now: datetime,
) -> Hold | None:
    """Why this job may not go now (the throttle aside: `throttle_hold`), or None."""
    dependency = (
        dependency_verdict(facts, key, jobs, workloads)
        if (facts.dependency.terms or facts.dependency.singleton)
        else True
    )
    if dependency is False:
        return Hold(NEVER_SATISFIED, "its dependency can never be satisfied", never=True)
    if facts.held:
        return Hold("JobHeldUser", "held by the user (qctl scontrol release releases it)")
    if facts.begin is not None and now < facts.begin:
        return Hold("BeginTime", f"may not start before {facts.begin.isoformat()}")
    if dependency is None:
        return Hold("Dependency", "waiting for the jobs it depends on")
    return None


def throttle_hold(facts: SlurmFacts, live: int) -> Hold | None:
    """An array task waits while `live` tasks of its array (offered, bound or running) have
    reached the array's `%` throttle."""
    if facts.throttle is None or live < facts.throttle:
        return None
    return Hold(
        ARRAY_TASK_LIMIT,
        f"{live} tasks of array {facts.ids.array_job_id} are running (at most {facts.throttle})",
    )
