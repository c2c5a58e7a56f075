"""The mirrors keep little of a finished pod or Job (an hour of them stays mirrored), and what
they keep reads the same to everything that reads it: a workload's observation, its log
containers, a JobSet's view of its Jobs, what materialisation takes an object for."""

from __future__ import annotations

import copy
from typing import Any

from agent.inventory import slim_job, slim_pod
from agent.jobsets import job_view
from agent.k8s.client import Resource, WatchEvent
from agent.k8s.watching import Mirror
from agent.logs import _started
from agent.materialize import _job_done, _kind
from agent.status import observe

JsonObject = dict[str, Any]

LABELS = {
    "multiq.dev/workload-namespace": "team-a",
    "multiq.dev/workload-name": "job-w",
    "multiq.dev/workload-uid": "uid-w",
    "multiq.dev/dispatch-generation": "1",
}
MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:s": {}}}]


def pod(phase: str) -> JsonObject:
    """A pod of a Job as an API server sends it."""
    terminated = {"terminated": {"exitCode": 3, "reason": "Error", "message": "boom"}}
    running = {"running": {"startedAt": "2026-12-04T21:08:54Z"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "w-0",
            "namespace": "team-a",
            "uid": "p-1",
            "labels": dict(LABELS),
            "ownerReferences": [{"kind": "Job", "name": "w", "uid": "j-1"}],
            "managedFields": copy.deepcopy(MANAGED),
        },
        "spec": {
            "nodeName": "node-0",
            "nodeSelector": {"rack": "r1"},
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}},
                {"name": "side", "image": "busybox", "env": [{"name": "A", "value": "b"}]},
            ],
            "volumes": [{"name": "token", "projected": {"sources": [{"configMap": {}}]}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": phase,
            "reason": "",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True" if phase == "Running" else "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [
                {"name": "main", "state": running if phase == "Running" else terminated},
                {"name": "side", "state": running if phase == "Running" else terminated},
            ],
        },
    }


def job(condition: str | None) -> JsonObject:
    conditions = [] if condition is None else [{"type": condition, "status": "True"}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "w",
            "namespace": "team-a",
            "uid": "j-1",
            "labels": dict(LABELS),
            "managedFields": copy.deepcopy(MANAGED),
        },
        "spec": {
            "parallelism": 1,
            "activeDeadlineSeconds": 74,
            "template": pod("Pending")["spec"] | {"metadata": {"labels": dict(LABELS)}},
        },
        "status": {"succeeded": 1, "conditions": conditions},
    }


def objects(obj: object) -> int:
    """How many dicts and lists make up `obj` (what the garbage collector walks)."""
    if isinstance(obj, dict):
        return 1 + sum(objects(v) for v in obj.values())
    if isinstance(obj, list):
        return 1 + sum(objects(v) for v in obj)
    return 0


def seen(pods: list[JsonObject], jobs: list[JsonObject]) -> object:
    return observe(uid="uid-w", generation=1, job_names=["w"], jobs=jobs, pods=pods)


def test_a_running_pod_and_an_unfinished_job_are_kept_whole() -> None:
    running, active = pod("Running"), job(None)
    assert slim_pod(running) is running
    assert slim_job(active) is active


def test_a_finished_pod_is_kept_slim_and_reads_the_same() -> None:
    for phase in ("Succeeded", "Failed"):
        whole = pod(phase)
        kept = slim_pod(whole)
        assert objects(kept) < objects(whole) * 0.6
        assert "managedFields" not in kept["metadata"]
        assert seen([kept], [job("Complete")]) == seen([whole], [job("Complete")])
        assert [_started(kept, c) for c in ("main", "side", "gone")] == [True, True, False]
        assert [c["name"] for c in kept["spec"]["containers"]] == ["main", "side"]
        assert kept["spec"]["nodeSelector"] == {"rack": "r1"}
        assert _kind(kept) == "Pod" and _job_done(kept)
        assert kept["metadata"]["labels"] == whole["metadata"]["labels"]
        assert kept["metadata"]["ownerReferences"] == whole["metadata"]["ownerReferences"]


def test_a_finished_job_is_kept_without_its_pod_template_and_reads_the_same() -> None:
    for condition in ("Complete", "Failed"):
        whole = job(condition)
        kept = slim_job(whole)
        assert "template" not in kept["spec"] and "managedFields" not in kept["metadata"]
        assert objects(kept) < objects(whole) / 2
        assert job_view(kept) == job_view(whole)
        assert seen([], [kept]) == seen([], [whole])
        assert _kind(kept) == "Job" and _job_done(kept)
        assert kept["spec"]["activeDeadlineSeconds"] == 74


def test_a_mirror_keeps_and_hands_on_what_slim_keeps() -> None:
    handed: list[JsonObject | None] = []
    mirror = Mirror(
        None,  # type: ignore[arg-type]
        Resource.PODS,
        index=("multiq.dev/workload-namespace", "multiq.dev/workload-name"),
        on_object=lambda _key, obj: handed.append(obj),
        slim=slim_pod,
    )
    mirror.apply(WatchEvent("ADDED", pod("Running")))
    assert mirror.objects["team-a/w-0"]["spec"]["volumes"]
    mirror.apply(WatchEvent("MODIFIED", pod("Succeeded")))
    kept = mirror.objects["team-a/w-0"]
    assert "volumes" not in kept["spec"]
    assert handed[-1] is kept
    assert mirror.owned_by("team-a", "job-w") == [kept]
