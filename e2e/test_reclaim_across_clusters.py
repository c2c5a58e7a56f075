"""Preemption across a federation of two clusters, when no cluster has room:
- a cluster queue takes back the quota it lent: queue A borrows every cohort's spare room on
  both clusters, then queue B, under its nominal quota and allowed to take it back from any
  borrower (`reclaimWithinCohort: Any`), submits; the hub offers B's work to a cluster where
  B's lent quota is borrowed, and that cluster's engine preempts A's borrowed work for it;
- urgent work preempts lower priorities of its own queue (`withinClusterQueue:
  LowerPriority`): the hub offers it to one cluster where lower-priority work of the queue
  holds the room, and that cluster's engine preempts one of them.
Before, the hub offered only room that was free, and such work waited at the hub until
something finished."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import (
    KUEUE_API,
    apply_documents,
    kueue_cluster_queue,
    kueue_local_queue,
    qctl,
    workload,
)
from e2e.test_fair_sharing import submit
from e2e.test_federation import eventually, sleeper_job
from qctl.commands.dev import DevFederation

CLUSTERS = ("sim-0", "sim-1")


def _queue(name: str, nominal_cpu: str) -> dict[str, Any]:
    return kueue_cluster_queue(
        name,
        nominal_cpu,
        f"{nominal_cpu}Gi",
        cohortName="research",
        preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
    )


def _to_both_clusters(queue: str, cluster_queues: list[str]) -> list[dict[str, Any]]:
    """A ClusterSet of both clusters and the GlobalQueue `queue` that sends these cluster
    queues' work to it."""
    api = "multiq.dev/v1alpha1"
    return [
        {
            "apiVersion": api,
            "kind": "ClusterSet",
            "metadata": {"name": "both"},
            "spec": {"clusters": list(CLUSTERS)},
        },
        {
            "apiVersion": api,
            "kind": "GlobalQueue",
            "metadata": {"name": queue},
            "spec": {"clusterSet": "both", "clusterQueues": cluster_queues},
        },
    ]


def _setup() -> list[dict[str, Any]]:
    local_queues = [kueue_local_queue(f"team-{team}", f"team-{team}") for team in ("a", "b")]
    routing = _to_both_clusters("research", ["team-a", "team-b"])
    # Per cluster the cohort holds 3 CPUs: A owns 1, B owns 2 and lends them while idle.
    return [_queue("team-a", "1"), _queue("team-b", "2"), *local_queues, *routing]


def admitted_on(fed: DevFederation, name: str) -> str | None:
    status = workload(fed, name).get("status") or {}
    ok = any(
        c["type"] == "Admitted" and c["status"] == "True" for c in status.get("conditions", [])
    )
    return status.get("clusterName") if ok else None


def test_a_queue_takes_back_its_lent_quota_in_one_cluster_when_none_has_room(
    federation: DevFederation, tmp_path: Path
) -> None:
    apply_documents(federation, tmp_path, "queues", _setup())
    a_jobs = [submit(federation, tmp_path, "team-a", f"a-{i}", 300) for i in range(6)]
    eventually(lambda: all(admitted_on(federation, n) for n in a_jobs), within=40)
    assert (
        sorted(str(admitted_on(federation, n)) for n in a_jobs) == ["sim-0"] * 3 + ["sim-1"] * 3
    ), "A borrows all of both clusters' cohorts"

    b_jobs = [submit(federation, tmp_path, "team-b", f"b-{i}", 300) for i in range(2)]
    eventually(lambda: all(admitted_on(federation, n) for n in b_jobs), within=40)
    preempted = [n for n in a_jobs if admitted_on(federation, n) is None]
    assert len(preempted) == 2, preempted
    for name in preempted:
        described = qctl(federation, "describe", "workload", name).stdout
        assert "InCohortReclamation" in described, described
        assert preempted_by(federation, name) == "InCohortReclamation"


def preempted_by(fed: DevFederation, name: str) -> str | None:
    """The reason of the workload's Preempted condition, when it stands (Kueue's)."""
    conditions = (workload(fed, name).get("status") or {}).get("conditions", [])
    return next(
        (c["reason"] for c in conditions if c["type"] == "Preempted" and c["status"] == "True"),
        None,
    )


def _priority_setup() -> list[dict[str, Any]]:
    queue = kueue_cluster_queue(
        "team-p", "2", "2Gi", preemption={"withinClusterQueue": "LowerPriority"}
    )
    classes = [
        {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("low", 0), ("high", 100))
    ]
    local = kueue_local_queue("team-p", "team-p")
    routing = _to_both_clusters("urgent", ["team-p"])
    return [queue, *classes, local, *routing]


def test_urgent_work_preempts_lower_priorities_of_its_queue_in_one_cluster_when_none_has_room(
    federation: DevFederation, tmp_path: Path
) -> None:
    apply_documents(federation, tmp_path, "queues", _priority_setup())

    def job(name: str, priority: str) -> str:
        path = sleeper_job(tmp_path, name, 300, queue="team-p")
        body = yaml.safe_load(path.read_text())
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
        path.write_text(yaml.safe_dump(body))
        qctl(federation, "submit", "-f", str(path))
        return f"job-{name}"

    low = [job(f"low-{i}", "low") for i in range(4)]
    eventually(lambda: all(admitted_on(federation, n) for n in low), within=40)
    urgent = job("urgent", "high")
    eventually(lambda: admitted_on(federation, urgent), within=40)
    preempted = [n for n in low if admitted_on(federation, n) is None]
    assert len(preempted) == 1, preempted
    described = qctl(federation, "describe", "workload", preempted[0]).stdout
    assert "InClusterQueue" in described, described
    assert preempted_by(federation, preempted[0]) == "InClusterQueue"
