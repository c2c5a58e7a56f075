"""`qctl get queues`: a GlobalQueue's workloads by state, and with -o wide its fleet usage
against its fleet quota."""

from __future__ import annotations

from typing import Any

from qctl.render import columns_for, render_table

QUEUE: dict[str, Any] = {
    "apiVersion": "multiq.dev/v1alpha1",
    "kind": "GlobalQueue",
    "metadata": {"name": "gpu-training", "creationTimestamp": "2026-12-03T10:00:00Z"},
    "spec": {"clusterSet": "gpu", "fleetQuota": {"cpu": "512", "nvidia.com/gpu": "64"}},
    "status": {
        "pendingWorkloads": 7,
        "dispatchedWorkloads": 2,
        "runningWorkloads": 5,
        "fleetUsage": {"cpu": "40", "memory": "4Gi", "nvidia.com/gpu": "8"},
    },
}


def _rows(wide: bool) -> list[dict[str, str]]:
    columns = columns_for("GlobalQueue", namespaced=False, all_namespaces=False, wide=wide)
    header, *lines = render_table([QUEUE], columns).splitlines()
    return [dict(zip(header.split(), line.split(), strict=True)) for line in lines]


def test_a_queue_row_counts_its_workloads_pending_dispatched_and_running() -> None:
    (row,) = _rows(wide=False)
    assert (row["NAME"], row["PENDING"], row["DISPATCHED"], row["RUNNING"]) == (
        "gpu-training",
        "7",
        "2",
        "5",
    )
    assert "FLEET-USAGE" not in row


def test_the_wide_row_shows_fleet_usage_against_the_quota_of_each_resource() -> None:
    (row,) = _rows(wide=True)
    assert row["FLEET-USAGE"] == "cpu=40/512,memory=4Gi,nvidia.com/gpu=8/64"


def test_a_queue_with_no_status_yet_shows_zeros_and_no_usage() -> None:
    bare = {k: v for k, v in QUEUE.items() if k != "status"}
    bare["spec"] = {"clusterSet": "gpu"}
    columns = columns_for("GlobalQueue", namespaced=False, all_namespaces=False, wide=True)
    header, line = render_table([bare], columns).splitlines()
    row = dict(zip(header.split(), line.split(), strict=True))
    assert (row["PENDING"], row["DISPATCHED"], row["RUNNING"], row["FLEET-USAGE"]) == (
        "0",
        "0",
        "0",
        "<none>",
    )
