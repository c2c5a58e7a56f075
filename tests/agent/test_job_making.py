"""The Jobs a made workload is known by (agent.job_making): those created for a plain Job,
every Job of every role for a JobSet, started or not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.job_making import made_job_names
from agent.records import Record, on_offer
from tests.agent.conftest import job_source, offer_for


def record(source: dict[str, Any] | None = None) -> Record:
    offered = on_offer(None, offer_for(job_source("w")), 1000.0).record
    assert offered is not None
    if source is None:
        return offered
    return replace(offered, offer=offered.offer.model_copy(update={"source": source}))


def jobset(*roles: tuple[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"replicatedJobs": [{"name": n, "replicas": r} for n, r in roles]},
    }


def test_a_plain_job_is_known_by_the_jobs_created() -> None:
    assert made_job_names(record(), ["w"]) == ("w",)


def test_a_jobset_is_known_by_every_job_of_every_role_started_or_not() -> None:
    made = record(jobset(("driver", 1), ("workers", 2)))
    assert made_job_names(made, ["train-driver-0"]) == (
        "train-driver-0",
        "train-workers-0",
        "train-workers-1",
    )
