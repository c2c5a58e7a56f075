"""What the stopper decides on its own (agent.stopper): which stops ship the logs first,
which reports repeat a stop still going on, which Jobs the orphan reaper spares; and, with a
cluster that fails, that what follows a stop waits until the Jobs are really gone."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any

from agent.errors import K8sServerError
from agent.records import Effect, LogShip, Persist, Record, StopJobs, on_offer
from agent.stopper import Stopper, reap_spared, repeats_stop, ships_logs_first
from api.v1alpha1.messages import WorkloadPhase
from tests.agent.conftest import job_source, offer_for
from tests.agent.test_jobset_runs import jobset_offer, role

NOW = 1000.0


def record(name: str = "w", phase: WorkloadPhase = WorkloadPhase.RUNNING) -> Record:
    made = on_offer(None, offer_for(job_source(name)), NOW).record
    assert made is not None
    return replace(made, phase=phase, job_names=(name,))


def test_only_a_stop_that_asks_for_it_ships_the_logs_first() -> None:
    assert ships_logs_first(StopJobs(logs=LogShip.BEFORE), record(), has_hook=True)
    assert not ships_logs_first(StopJobs(), record(), has_hook=True)


def test_a_stop_ships_no_logs_without_a_way_to_ship_them_or_a_record_to_ship_them_of() -> None:
    assert not ships_logs_first(StopJobs(logs=LogShip.BEFORE), record(), has_hook=False)
    assert not ships_logs_first(StopJobs(logs=LogShip.BEFORE), None, has_hook=True)


def test_a_report_of_a_generation_being_stopped_in_the_background_is_a_repeat() -> None:
    assert repeats_stop(2, 2)
    assert repeats_stop(3, 2)  # (an older generation's report is stale anyway)


def test_a_report_of_a_later_generation_or_with_no_stop_on_goes_out() -> None:
    assert not repeats_stop(2, 3)
    assert not repeats_stop(None, 1)


def test_the_reaper_spares_held_workloads_not_given_back_and_those_being_stopped() -> None:
    held = {
        "team-a/job-run": record("run"),
        "team-a/job-gone": record("gone", WorkloadPhase.EVICTED),
        "team-a/job-back": record("back", WorkloadPhase.WITHDRAWN),
    }
    spared = reap_spared(held, {"team-a/job-back"})
    assert spared == {"team-a/job-run", "team-a/job-back"}


class FailingCluster:
    """A materializer whose first stop fails beyond the client's retries."""

    def __init__(self) -> None:
        self.stopped_for_good = asyncio.Event()

    async def stop(self, namespace: str, name: str, jobs: Any, job_names: Any) -> None:
        raise K8sServerError("the API server is unavailable")

    async def stop_for_good(self, namespace: str, name: str, job_names: Any) -> None:
        self.stopped_for_good.set()


class NoObjects:
    def workload_objects(self, namespace: str, name: str) -> list[Any]:
        return []


async def test_what_follows_a_failed_stop_waits_until_the_jobs_are_gone_for_good() -> None:
    cluster = FailingCluster()
    tasks: list[asyncio.Task[None]] = []
    followed: list[tuple[str, Sequence[Effect]]] = []

    def spawn(work: Coroutine[Any, Any, None], name: str) -> None:
        tasks.append(asyncio.create_task(work, name=name))

    async def follow_up(key: str, _: Record | None, after: Sequence[Effect]) -> None:
        assert cluster.stopped_for_good.is_set()
        followed.append((key, after))

    stopper = Stopper(
        cluster,  # type: ignore[arg-type]
        NoObjects(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # (a plain Job: no JobSet service to delete)
        spawn=spawn,
        follow_up=follow_up,
        wake=lambda: None,
    )
    went_on = await stopper.stop("team-a/job-w", record(), StopJobs(), (Persist(),))
    assert went_on and not followed
    await asyncio.gather(*tasks)
    assert followed == [("team-a/job-w", (Persist(),))]


class ServiceDeletions:
    """A JobSet driver that records the Services it deletes."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete_service(self, record: Record) -> None:
        self.deleted.append(record.key)


async def test_a_jobsets_service_goes_too_when_its_stop_had_to_be_retried() -> None:
    cluster, services = FailingCluster(), ServiceDeletions()
    tasks: list[asyncio.Task[None]] = []

    def spawn(work: Coroutine[Any, Any, None], name: str) -> None:
        tasks.append(asyncio.create_task(work, name=name))

    async def follow_up(key: str, _: Record | None, after: Sequence[Effect]) -> None:
        pass

    made = on_offer(None, jobset_offer("js", [role("workers", 2, "sleep 60")]), NOW).record
    assert made is not None
    stopper = Stopper(
        cluster,  # type: ignore[arg-type]
        NoObjects(),  # type: ignore[arg-type]
        services,  # type: ignore[arg-type]
        spawn=spawn,
        follow_up=follow_up,
        wake=lambda: None,
    )
    assert await stopper.stop(made.key, made, StopJobs(), ())
    while tasks:
        await tasks.pop(0)
    assert services.deleted == [made.key]
