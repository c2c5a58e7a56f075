"""The floor hub's `--validate`: what any hub must do with a submission — the Job checked with
the api models and converted to the Workload it queues; bad input refused by its fields."""

from __future__ import annotations

import pytest

from api.errors import ObjectInvalidError
from bench.control_plane_floor import validated
from bench.federation_dispatch import small_job


def test_a_good_job_becomes_the_workload_the_hub_would_queue() -> None:
    stored = validated(small_job("ok"))
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
