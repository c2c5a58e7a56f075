"""The Slurm holds, decided purely: a user hold, a begin time, each dependency type over single
jobs and arrays (`,` all, `?` any), singleton, the throttle, and which jobs can never run —
read from real Workloads made the way the hub makes them."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from api.k8s.batch import Job
from api.slurm.environment import BatchContext
from api.slurm.ids import task_ids
from api.slurm.options import parse_sbatch
from api.slurm.work import SlurmFacts, build_job
from api.v1alpha1.conversions import to_workload
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.placement.holds import JobState, hold_of, job_state, throttle_hold

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
CONTEXT = BatchContext("job", "p", "alice", 1, 1, "h", "/", 0, "hub:1", {})


@dataclass
class Entry:
    workload: Workload


class Jobs:
    """A SlurmJobs over a dict, as hub.slurm_index keeps it."""

    def __init__(self) -> None:
        self.facts: dict[str, SlurmFacts] = {}
        self.workloads: dict[str, Entry] = {}
        self.next_id = 1

    def submit(self, *argv: str, name: str = "job") -> list[str]:
        options, _ = parse_sbatch([*argv, "-J", name, "--wrap", "true"])
        keys = []
        ids = task_ids(self.next_id, options.array)
        self.next_id += len(ids)
        for task in ids:
            context = replace(CONTEXT, job_name=name)
            wire = build_job(options, "#!/bin/sh\n", [], task, context, namespace="ns", queue="q")
            wl = to_workload(Job.model_validate(wire), default_queue_name="q")
            wl.metadata.annotations.update(wire["metadata"]["annotations"])
            key = f"ns/{wl.metadata.name}"
            facts = SlurmFacts.from_annotations(wl.metadata.annotations)
            assert facts is not None
            self.facts[key], self.workloads[key] = facts, Entry(wl)
            keys.append(key)
        return keys

    def key_of_job(self, job_id: int) -> str | None:
        return next((k for k, f in self.facts.items() if f.ids.job_id == job_id), None)

    def tasks_of_array(self, array_job_id: int) -> Set[str]:
        return {k for k, f in self.facts.items() if f.ids.array_job_id == array_job_id}

    def keys_named(self, name: str, user: str) -> Set[str]:
        return {k for k, f in self.facts.items() if (f.name, f.user) == (name, user)}

    def end(self, key: str, reason: str) -> None:
        transitions.set_condition(self.workloads[key].workload, "Finished", True, reason, "", NOW)

    def hold(self, key: str) -> str | None:
        hold = hold_of(key, self.facts[key], self, self.workloads, NOW)
        if hold is None:
            return None
        return "never" if hold.never else hold.reason


def reasons(jobs: Jobs, keys: Mapping[str, str]) -> dict[str, str | None]:
    return {name: jobs.hold(key) for name, key in keys.items()}


class TestDependencies:
    @pytest.mark.parametrize(
        ("kind", "outcome", "expected"),
        [
            ("afterok", "Succeeded", None),
            ("afterok", "Failed", "never"),
            ("afternotok", "Failed", None),
            ("afternotok", "Succeeded", "never"),
            ("afterany", "Failed", None),
            ("afterany", "Cancelled", None),
            ("after", "Succeeded", None),
        ],
    )
    def test_each_type_once_the_job_ended(
        self, kind: str, outcome: str, expected: str | None
    ) -> None:
        jobs = Jobs()
        (first,) = jobs.submit()
        (second,) = jobs.submit(f"--dependency={kind}:1")
        assert jobs.hold(second) == "Dependency"
        jobs.end(first, outcome)
        assert jobs.hold(second) == expected

    def test_on_an_array_every_task_must_have_ended_well_for_afterok(self) -> None:
        jobs = Jobs()
        tasks = jobs.submit("--array=0-2")
        (after,) = jobs.submit("--dependency=afterok:1")
        (one_task,) = jobs.submit("--dependency=afterok:1_0")
        jobs.end(tasks[0], "Succeeded")
        jobs.end(tasks[1], "Succeeded")
        assert jobs.hold(after) == "Dependency"
        jobs.end(tasks[2], "Failed")
        assert (jobs.hold(after), jobs.hold(one_task)) == ("never", None)

    def test_any_of_holds_as_soon_as_one_term_does_and_fails_only_if_all_do(self) -> None:
        jobs = Jobs()
        (a,) = jobs.submit()
        (b,) = jobs.submit()
        (c,) = jobs.submit("--dependency=afterok:1?afterok:2")
        jobs.end(a, "Failed")
        assert jobs.hold(c) == "Dependency"
        jobs.end(b, "Succeeded")
        assert jobs.hold(c) is None

    def test_singleton_waits_for_earlier_jobs_of_the_same_name_and_user(self) -> None:
        jobs = Jobs()
        (first,) = jobs.submit(name="sweep")
        (other,) = jobs.submit(name="other")
        (second,) = jobs.submit("--dependency=singleton", name="sweep")
        assert jobs.hold(second) == "Dependency"
        jobs.end(first, "Failed")
        assert jobs.hold(second) is None
        assert jobs.hold(other) is None


class TestOtherHolds:
    def test_a_user_hold_shows_before_a_begin_time_and_a_dependency(self) -> None:
        jobs = Jobs()
        jobs.submit()
        (held,) = jobs.submit("-H", "--dependency=afterok:1")
        assert jobs.hold(held) == "JobHeldUser"

    def test_a_begin_time_holds_until_the_clock_reaches_it(self) -> None:
        jobs = Jobs()
        (key,) = jobs.submit()
        jobs.facts[key] = SlurmFacts(jobs.facts[key].ids, "job", "alice", begin=NOW + timedelta(1))
        assert jobs.hold(key) == "BeginTime"
        assert hold_of(key, jobs.facts[key], jobs, jobs.workloads, NOW + timedelta(2)) is None

    def test_the_throttle_holds_once_that_many_tasks_live(self) -> None:
        jobs = Jobs()
        keys = jobs.submit("--array=0-4%2")
        facts = jobs.facts[keys[0]]
        assert throttle_hold(facts, 1) is None
        hold = throttle_hold(facts, 2)
        assert hold is not None and hold.reason == "JobArrayTaskLimit"


def test_job_states_are_read_from_the_workloads_conditions() -> None:
    jobs = Jobs()
    keys = jobs.submit("--array=0-4")
    for key, reason in zip(keys, ["Succeeded", "Failed", "Cancelled"], strict=False):
        jobs.end(key, reason)
    timed_out = jobs.workloads[keys[3]].workload
    transitions.set_condition(timed_out, "Finished", True, "Failed", "DeadlineExceeded", NOW)
    states = [job_state(jobs.workloads[k].workload) for k in keys]
    assert states == [
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.PENDING,
    ]
