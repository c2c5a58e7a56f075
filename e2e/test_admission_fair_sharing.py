"""Admission fair sharing through the federation: a MemberCluster switched to
`spec.admissionFairSharing`, one ClusterQueue with `admissionScope.admissionMode:
UsageBasedAdmissionFairSharing` applied as Kueue writes it, and two LocalQueues on it. The
heavy queue fills the cluster queue first, so it has usage; then both submit while it is full,
the heavy queue first. As room frees, the light queue's work is admitted before the heavy
queue's older work, and `qctl get lq -o wide` shows each queue's decayed usage. Without the
admission mode the cluster queue admits by age: the heavy queue's work would go first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.quantity import Quantity
from e2e.conftest import (
    apply_documents,
    change_member_cluster,
    kueue_cluster_queue,
    kueue_local_queue,
    qctl,
)
from e2e.test_fair_sharing import CLUSTER, admitted, route_to_one_cluster, submit
from e2e.test_federation import eventually
from qctl.commands.dev import DevFederation


def _kueue_setup() -> list[dict[str, Any]]:
    cluster_queue = kueue_cluster_queue(
        "shared",
        "2",
        "2Gi",
        admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
    )
    return [cluster_queue, *(kueue_local_queue(name, "shared") for name in ("heavy", "light"))]


def fair_usage(fed: DevFederation) -> dict[str, dict[str, Quantity]]:
    """The FAIR-USAGE column of `qctl get lq -o wide` (`cpu=14m,memory=…`), by queue."""
    lines = qctl(fed, "get", "lq", "-o", "wide").stdout.splitlines()
    column = lines[0].split().index("FAIR-USAGE")
    usage: dict[str, dict[str, Quantity]] = {}
    for line in lines[1:]:
        cells = line.split()
        shown = cells[column]
        usage[cells[0]] = (
            {}
            if shown == "<none>"
            else {k: Quantity.parse(v) for k, v in (part.split("=") for part in shown.split(","))}
        )
    return usage


def test_the_light_local_queue_is_admitted_before_the_heavy_ones_older_work(
    federation: DevFederation, tmp_path: Path
) -> None:
    # Usage halves every 10 minutes, sampled every second: over this test it only grows.
    change_member_cluster(
        federation,
        tmp_path,
        CLUSTER,
        admissionFairSharing={"usageHalfLifeSeconds": 600, "usageSamplingIntervalSeconds": 1},
    )
    apply_documents(
        federation, tmp_path, "queues", [*_kueue_setup(), *route_to_one_cluster(["shared"])]
    )

    # The heavy queue fills the cluster queue for 10 s: it has usage from then on.
    fill = [submit(federation, tmp_path, "heavy", f"fill-{i}", 10) for i in range(2)]
    eventually(lambda: all(admitted(federation, n) for n in fill), within=30)

    # The cluster queue is full: the heavy queue's work waits, then the light queue's.
    heavy = [submit(federation, tmp_path, "heavy", f"heavy-{i}", 30) for i in range(2)]
    light = [submit(federation, tmp_path, "light", f"light-{i}", 30) for i in range(2)]

    def first_admitted() -> set[str]:
        return {n for n in heavy + light if admitted(federation, n)}

    assert eventually(first_admitted, within=30) <= set(light)
    # The light jobs take the whole quota for 30 s: the heavy ones still wait after both.
    assert eventually(lambda: first_admitted() == set(light), within=20)
    assert not any(admitted(federation, n) for n in heavy)

    # Both queues' usage shows, the light one's still below the heavy one's.
    def light_has_usage() -> dict[str, dict[str, Quantity]] | None:
        usage = fair_usage(federation)
        return usage if usage.get("light", {}).get("cpu", Quantity(0)) > Quantity(0) else None

    usage = eventually(light_has_usage, within=20)
    assert usage["heavy"]["cpu"] > usage["light"]["cpu"], usage
