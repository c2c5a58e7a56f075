"""Building engine snapshots from the api/ models (the contract the agent receives)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from agent.engine.cycle import schedule
from agent.engine.from_api import build_snapshot, workload_from_api
from agent.engine.quota import QuotaTree
from agent.engine.result import PendingCode
from agent.engine.snapshot import (
    ClusterQueueName,
    CohortName,
    FlavorName,
    PreemptionPolicy,
    ResourceName,
    WorkloadId,
)
from api.v1alpha1.queues import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from api.v1alpha1.queues import WorkloadPriorityClass as PriorityClass
from api.v1alpha1.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _workload(name: str, cpu: str, *, priority_class: str | None = None, **status: Any) -> Workload:
    body: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                            ],
                            "nodeSelector": {"tier": "spot"},
                            "tolerations": [
                                {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
                            ],
                        }
                    },
                }
            ],
        },
    }
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    if status:
        body["status"] = status
    return Workload.model_validate(body)


def _queues() -> tuple[ResourceFlavor, ClusterQueue, LocalQueue]:
    flavor = ResourceFlavor.model_validate(
        {"metadata": {"name": "spot"}, "spec": {"nodeLabels": {"tier": "spot"}}}
    )
    cq = ClusterQueue.model_validate(
        {
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                        ],
                    }
                ],
            },
        }
    )
    lq = LocalQueue.model_validate(
        {"metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}
    )
    return flavor, cq, lq


def test_the_example_cohort_tree_becomes_a_quota_tree() -> None:
    docs = _docs("queues.yaml")
    cohorts = [Cohort.model_validate(d) for d in docs if d["kind"] == "Cohort"]
    cqs = [ClusterQueue.model_validate(d) for d in docs if d["kind"] == "ClusterQueue"]
    snap = build_snapshot(
        flavors=[], cluster_queues=cqs, local_queues=[], workloads=[], cohorts=cohorts
    )
    vision = snap.cluster_queues[ClusterQueueName("team-vision")]
    assert vision.cohort == "ml"
    assert vision.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert vision.preemption.reclaim_within_cohort is PreemptionPolicy.ANY
    tree = QuotaTree.from_snapshot(snap)
    gpu = (FlavorName("gpu-h100"), ResourceName("nvidia.com/gpu"))
    assert tree.cohorts[CohortName("research")].nominal[gpu] == 16_000
    assert snap.cohorts[CohortName("ml")].parent == "research"


def test_a_pending_workload_keeps_requests_selectors_tolerations_and_priority() -> None:
    wpc = PriorityClass.model_validate({"metadata": {"name": "high"}, "value": 1000})
    wl = workload_from_api(
        _workload("w", "1500m", priority_class="high"), priorities={"high": wpc.value}
    )
    (ps,) = wl.pod_sets
    assert (wl.id, wl.priority, ps.count, dict(ps.requests)) == ("team-a/w", 1000, 2, {"cpu": 1500})
    assert dict(ps.node_selector) == {"tier": "spot"}
    assert ps.tolerations[0].operator == "Exists"
    assert wl.created_at == 1767225600.0


def test_status_supplies_admission_eviction_and_requeue_state() -> None:
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "spot"},
                    "resourceUsage": {"cpu": "3"},
                    "count": 2,
                }
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": "2026-01-01T00:01:00Z",
            },
            {
                "type": "PodsReady",
                "status": "True",
                "reason": "PodsReady",
                "lastTransitionTime": "2026-01-01T00:02:00Z",
            },
        ],
        "requeueState": {"count": 2},
        "accumulatedPastExecutionTimeSeconds": 30,
    }
    wl = workload_from_api(_workload("w", "1500m", **status))
    assert wl.admission is not None
    assert dict(wl.admission.total) == {("spot", "cpu"): 3000}
    assert wl.admitted_at == 1767225660.0
    assert wl.pods_ready and not wl.evicting
    assert (wl.requeue_count, wl.accumulated_execution_seconds) == (2, 30.0)


def test_api_objects_drive_a_whole_cycle() -> None:
    flavor, cq, lq = _queues()
    pending = [_workload("fits", "2"), _workload("too-big", "3")]
    snap = build_snapshot(
        flavors=[flavor], cluster_queues=[cq], local_queues=[lq], workloads=pending
    )
    result = schedule(snap, 1767225700.0)
    assert [a.workload for a in result.admitted] == ["team-a/fits"]
    reason = result.pending[WorkloadId("team-a/too-big")]
    assert reason.code is PendingCode.EXCEEDS_MAX_QUOTA


def test_finished_workloads_hold_no_quota() -> None:
    flavor, cq, lq = _queues()
    done = _workload(
        "done",
        "2",
        admission={
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "spot"}, "resourceUsage": {"cpu": "4"}}
            ],
        },
        conditions=[{"type": "Finished", "status": "True", "reason": "Succeeded"}],
    )
    snap = build_snapshot(
        flavors=[flavor],
        cluster_queues=[cq],
        local_queues=[lq],
        workloads=[done, _workload("next", "2")],
    )
    assert list(snap.workloads) == ["team-a/next"]
    assert [a.workload for a in schedule(snap, 0.0).admitted] == ["team-a/next"]


def test_min_admit_seconds_protects_from_the_quota_reserved_time() -> None:
    flavor, cq, lq = _queues()
    cq.spec.preemption.min_admit_seconds = 60
    running = _workload(
        "running",
        "2",
        admission={
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "spot"}, "resourceUsage": {"cpu": "4"}}
            ],
        },
        conditions=[
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": "2026-01-01T00:01:00Z",
            }
        ],
    )
    urgent = _workload("urgent", "2")
    urgent.metadata.creation_timestamp = datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    urgent.spec.priority = 100
    snap = build_snapshot(
        flavors=[flavor], cluster_queues=[cq], local_queues=[lq], workloads=[running, urgent]
    )
    assert snap.cluster_queues[ClusterQueueName("cq")].preemption.min_admit_seconds == 60.0
    reserved = 1767225660.0
    waiting = schedule(snap, reserved + 40)
    assert waiting.pending[WorkloadId("team-a/urgent")].code is PendingCode.PREEMPTION_PROTECTED
    assert waiting.next_wakeup == reserved + 60
    assert [p.victim for p in schedule(snap, reserved + 60).preempted] == ["team-a/running"]
