"""The floor hub's `--validate`: what any hub must do with a submission — the Job checked with
the api models and converted to the Workload it queues; bad input refused by its fields. And
the floor agents' `--required` admission: offers admitted by MultiQ's engine, within quota."""

from __future__ import annotations

import pytest

from api.errors import ObjectInvalidError
from api.v1alpha1.workload import Workload
from bench.control_plane_floor import FloorAdmission, validated
from bench.federation_dispatch import small_job


def test_a_good_job_becomes_the_workload_the_hub_would_queue() -> None:
    stored = validated(small_job("ok")).to_wire()
    assert stored["kind"] == "Workload"
    assert stored["metadata"]["namespace"] == "default"
    [pod_set] = stored["spec"]["podSets"]
    assert pod_set["count"] == 1
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


def test_a_bad_job_is_refused_with_every_field_it_broke() -> None:
    bad = small_job("Bad_Name")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    with pytest.raises(ObjectInvalidError) as refused:
        validated(bad)
    paths = [error.path for error in refused.value.errors]
    assert "metadata.name" in paths
    assert any(path.endswith("resources.requests[cpu]") for path in paths), paths


def offered(name: str, cpu: str = "100m") -> Workload:
    job = small_job(name)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return validated(job)


def test_the_required_floor_admits_offers_through_the_engine_within_the_queues_quota() -> None:
    # One 8-CPU node: the dev ClusterQueue's nominal quota is 8 CPUs.
    admission = FloorAdmission(nodes=1)
    first = admission.offer(offered("a", "5"), now=1.0)
    second = admission.offer(offered("b", "5"), now=1.0)
    [admit] = admission.cycle(now=1.0)
    assert admit.workload == first
    assert admit.admission.cluster_queue == "default"
    assert admission.cycle(now=2.0) == []  # the second does not fit beside the first
    third = admission.offer(offered("c", "3"), now=3.0)
    assert [a.workload for a in admission.cycle(now=3.0)] == [third]
    assert second not in {a.workload for a in admission.cycle(now=4.0)}
