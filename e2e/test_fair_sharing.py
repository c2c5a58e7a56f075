"""Preemption-based fair sharing through the federation: a MemberCluster switched to
`spec.fairSharing`, two ClusterQueues of one cohort weighted 2:1 applied as Kueue writes them,
and their work routed to that cluster by a GlobalQueue. Queue A fills the cohort by borrowing;
queue B's work then takes back what B's weight is owed, preempting A's borrowed work on the
cluster (reason InCohortFairSharing), until both queues' weighted shares are equal — A
borrowing twice what B does. Without fair sharing, B gets its nominal quota only and waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import (
    KUEUE_API,
    apply_documents,
    change_member_cluster,
    kueue_cluster_queue,
    kueue_local_queue,
    kueue_resource_groups,
    qctl,
    workload,
)
from e2e.test_federation import eventually, sleeper_job
from qctl.commands.dev import DevFederation

CLUSTER = "sim-0"

# The cohort owns 6 CPUs (and 6Gi) of its own; each queue owns 1. A queue borrows what it
# uses beyond its own from the 8 the cohort could lend it, and its weighted share is that
# over its weight. A holding 5 jobs of 1 CPU borrows 4: 4/8/2 = 250‰; B holding 3 borrows 2:
# 2/8/1 = 250‰. One more for B would make B's share 375‰ while A's fell to 187‰: not fair.
FAIR_A, FAIR_B = 5, 3


def _queue(name: str, weight: int) -> dict[str, Any]:
    return kueue_cluster_queue(
        name,
        "1",
        "1Gi",
        cohortName="research",
        fairSharing={"weight": str(weight)},
        # Kueue's classic rules alone would let B reclaim its own nominal quota and
        # nothing more: borrowing, it may not preempt (borrowWithinCohort: Never).
        preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
    )


def _kueue_setup() -> list[dict[str, Any]]:
    cohort = {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {"resourceGroups": kueue_resource_groups("6", "6Gi")},
    }
    local_queues = [kueue_local_queue(f"team-{team}", f"team-{team}") for team in ("a", "b")]
    return [cohort, _queue("team-a", 2), _queue("team-b", 1), *local_queues]


def route_to_one_cluster(cluster_queues: list[str]) -> list[dict[str, Any]]:
    """A ClusterSet of the one cluster and the GlobalQueue that sends these cluster queues'
    work there: the cluster's own engine then orders it and preempts for it."""
    api = "multiq.dev/v1alpha1"
    return [
        {
            "apiVersion": api,
            "kind": "ClusterSet",
            "metadata": {"name": f"only-{CLUSTER}"},
            "spec": {"clusters": [CLUSTER]},
        },
        {
            "apiVersion": api,
            "kind": "GlobalQueue",
            "metadata": {"name": "research"},
            "spec": {"clusterSet": f"only-{CLUSTER}", "clusterQueues": cluster_queues},
        },
    ]


def admitted(fed: DevFederation, name: str) -> bool:
    status = workload(fed, name).get("status") or {}
    return status.get("clusterName") == CLUSTER and any(
        c["type"] == "Admitted" and c["status"] == "True" for c in status.get("conditions", [])
    )


def submit(fed: DevFederation, tmp: Path, queue: str, name: str, seconds: int) -> str:
    qctl(fed, "submit", "-f", str(sleeper_job(tmp, name, seconds, queue=queue)))
    return f"job-{name}"


def weighted_shares(fed: DevFederation) -> dict[str, str]:
    """The WEIGHTED-SHARE column of `qctl get cq -o wide`, by team queue."""
    lines = qctl(fed, "get", "cq", "-o", "wide").stdout.splitlines()
    column = lines[0].split().index("WEIGHTED-SHARE")
    rows = {line.split()[0]: line.split()[column] for line in lines[1:]}
    return {name: rows[name] for name in ("team-a", "team-b")}


@pytest.mark.parametrize(
    "fair_sharing",
    [{}, {"preemptionStrategies": ["MultiQTowardFairShare"]}],
    ids=["kueue-default-strategies", "multiq-toward-fair-share"],
)
def test_a_borrowing_queue_gives_back_by_weight_to_a_queue_that_submits_later(
    federation: DevFederation, tmp_path: Path, fair_sharing: dict[str, Any]
) -> None:
    change_member_cluster(federation, tmp_path, CLUSTER, fairSharing=fair_sharing)
    routing = route_to_one_cluster(["team-a", "team-b"])
    apply_documents(federation, tmp_path, "queues", [*_kueue_setup(), *routing])

    a_jobs = [submit(federation, tmp_path, "team-a", f"a-{i}", 300) for i in range(8)]
    eventually(lambda: all(admitted(federation, n) for n in a_jobs), within=30)
    # A borrows 7 of the 8 the cohort could lend it, at weight 2: 7/8/2 = 437.5‰.
    eventually(lambda: weighted_shares(federation) == {"team-a": "438", "team-b": "0"})

    b_jobs = [submit(federation, tmp_path, "team-b", f"b-{i}", 300) for i in range(4)]

    def settled() -> list[str] | None:
        a = [n for n in a_jobs if admitted(federation, n)]
        b = [n for n in b_jobs if admitted(federation, n)]
        return a if (len(a), len(b)) == (FAIR_A, FAIR_B) else None

    running_a = eventually(settled, within=40)
    for preempted in sorted(set(a_jobs) - set(running_a)):
        described = qctl(federation, "describe", "workload", preempted).stdout
        assert "(InCohortFairSharing) in team-b" in described, described
        # Kueue's conditions: Evicted because Preempted, and Preempted saying by which rule.
        conditions = {c["type"]: c for c in workload(federation, preempted)["status"]["conditions"]}
        assert conditions["Evicted"]["reason"] == "Preempted"
        assert (conditions["Preempted"]["status"], conditions["Preempted"]["reason"]) == (
            "True",
            "InCohortFairSharing",
        )
    # Equal weighted shares, A borrowing twice what B does: the weights 2:1.
    eventually(lambda: weighted_shares(federation) == {"team-a": "250", "team-b": "250"})
