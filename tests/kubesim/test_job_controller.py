"""The Job controller in the simulated runtime: modes, limits, conditions, suspend, managedBy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cluster import Cluster, ClusterConfig
from kubesim.objects import parse_time
from kubesim.testing import running
from tests.kubesim.conftest import Kubectl, eventually, manifest


def _job(name: str, *, annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    return manifest(
        {
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "metadata": {"annotations": annotations or {}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}],
                    },
                },
                **spec,
            },
        }
    )


def _job_status(cluster: Cluster, name: str) -> dict[str, Any]:
    job = cluster.get("jobs", "default", name) or {}
    status: dict[str, Any] = job.get("status", {})
    return status


def _true_conditions(cluster: Cluster, name: str) -> list[str]:
    return [
        c["type"]
        for c in _job_status(cluster, name).get("conditions") or []
        if c["status"] == "True"
    ]


def _job_pods(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.store.list(cluster.types.core("pods"), "default")
        if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == name
    ]


async def test_a_job_completes_through_success_criteria_met(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job("default", _job("ok", completions=3, parallelism=2))
    await eventually(lambda: "Complete" in _true_conditions(cluster, "ok"))
    status = _job_status(cluster, "ok")
    assert status["succeeded"] == 3
    assert _true_conditions(cluster, "ok") == ["SuccessCriteriaMet", "Complete"]
    assert status["completionTime"] and status["startTime"]


async def test_job_pods_carry_the_standard_labels_owner_reference_and_tracking_finalizer(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    job = await batch.create_namespaced_job(
        "default", _job("labelled", annotations={"kubesim.dev/duration": "30"})
    )
    pods = await eventually(lambda: _job_pods(cluster, "labelled"))
    meta = pods[0]["metadata"]
    uid = job.metadata.uid
    assert meta["labels"]["batch.kubernetes.io/controller-uid"] == uid
    assert meta["labels"]["controller-uid"] == uid
    assert meta["labels"]["job-name"] == "labelled"
    assert meta["ownerReferences"][0] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "labelled",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]


async def test_an_indexed_job_gives_each_pod_its_completion_index(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default", _job("idx", completions=3, parallelism=3, completionMode="Indexed")
    )
    await eventually(lambda: "Complete" in _true_conditions(cluster, "idx"))
    assert _job_status(cluster, "idx")["completedIndexes"] == "0-2"


async def test_indexed_pods_get_job_completion_index_in_their_env(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job(
            "env",
            completions=2,
            parallelism=2,
            completionMode="Indexed",
            annotations={"kubesim.dev/duration": "30"},
        ),
    )
    pods = await eventually(
        lambda: len(_job_pods(cluster, "env")) == 2 and _job_pods(cluster, "env")
    )
    env = pods[0]["spec"]["containers"][0]["env"]
    assert env == [
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                }
            },
        }
    ]
    assert sorted(
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods
    ) == ["0", "1"]


async def test_a_job_fails_after_its_backoff_limit_through_failure_target(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default", _job("flaky", backoffLimit=1, annotations={"kubesim.dev/exit-code": "1"})
    )
    await eventually(lambda: "Failed" in _true_conditions(cluster, "flaky"))
    status = _job_status(cluster, "flaky")
    assert status["failed"] == 2
    assert _true_conditions(cluster, "flaky") == ["FailureTarget", "Failed"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"


async def test_active_deadline_seconds_fails_a_running_job(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job("slow", activeDeadlineSeconds=1, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: "Failed" in _true_conditions(cluster, "slow"), within=10)
    failed = next(c for c in _job_status(cluster, "slow")["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    await eventually(lambda: not _job_pods(cluster, "slow"))


async def test_a_raised_active_deadline_moves_the_deadline_of_a_running_job(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    # An agent keeps its Jobs alive by raising the deadline while it holds its lease.
    await batch.create_namespaced_job(
        "default",
        _job("extended", activeDeadlineSeconds=1, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: _job_status(cluster, "extended").get("startTime"))
    await batch.patch_namespaced_job(
        "extended",
        "default",
        {"spec": {"activeDeadlineSeconds": 3}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )
    await asyncio.sleep(1.5)  # past the first deadline
    assert "Failed" not in _true_conditions(cluster, "extended")
    await eventually(lambda: "Failed" in _true_conditions(cluster, "extended"), within=5)
    started = _job_status(cluster, "extended")["startTime"]
    failed = next(
        c for c in _job_status(cluster, "extended")["conditions"] if c["type"] == "Failed"
    )
    assert failed["reason"] == "DeadlineExceeded"
    assert (parse_time(failed["lastTransitionTime"]) - parse_time(started)).total_seconds() >= 3


async def test_a_lowered_active_deadline_fails_a_running_job_by_the_new_deadline(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job("shortened", activeDeadlineSeconds=60, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: _job_status(cluster, "shortened").get("startTime"))
    await batch.patch_namespaced_job(
        "shortened",
        "default",
        {"spec": {"activeDeadlineSeconds": 1}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )
    await eventually(lambda: "Failed" in _true_conditions(cluster, "shortened"), within=5)


async def test_pod_failure_policy_fail_job_on_an_exit_code(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]
    }
    await batch.create_namespaced_job(
        "default",
        _job(
            "fatal",
            backoffLimit=6,
            podFailurePolicy=policy,
            annotations={"kubesim.dev/exit-code": "42"},
        ),
    )
    await eventually(lambda: "Failed" in _true_conditions(cluster, "fatal"))
    failed = next(c for c in _job_status(cluster, "fatal")["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy"
    assert "exit code 42" in failed["message"]


async def test_suspend_deletes_active_pods_and_resume_starts_again(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default", _job("pausable", suspend=True, annotations={"kubesim.dev/duration": "60"})
    )
    await eventually(lambda: "Suspended" in _true_conditions(cluster, "pausable"))
    assert _job_pods(cluster, "pausable") == []
    assert "startTime" not in _job_status(cluster, "pausable")
    await batch.patch_namespaced_job("pausable", "default", {"spec": {"suspend": False}})
    await eventually(lambda: _job_status(cluster, "pausable").get("active") == 1)
    assert _job_status(cluster, "pausable")["startTime"]
    resumed = next(
        c for c in _job_status(cluster, "pausable")["conditions"] if c["type"] == "Suspended"
    )
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed")
    await batch.patch_namespaced_job("pausable", "default", {"spec": {"suspend": True}})
    await eventually(lambda: not _job_pods(cluster, "pausable"))
    status = _job_status(cluster, "pausable")
    assert "Suspended" in _true_conditions(cluster, "pausable")
    assert status.get("failed", 0) == 0


async def test_a_job_managed_by_another_controller_is_left_alone(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job("default", _job("mirrored", managedBy="multiq.dev/hub"))
    await batch.create_namespaced_job("default", _job("local"))
    await eventually(lambda: "Complete" in _true_conditions(cluster, "local"))
    assert _job_pods(cluster, "mirrored") == []
    assert _job_status(cluster, "mirrored") == {}


async def test_ttl_after_finished_deletes_the_job_and_its_pods(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job("default", _job("brief", ttlSecondsAfterFinished=0))
    await eventually(lambda: cluster.get("jobs", "default", "brief") is None)
    await eventually(lambda: not _job_pods(cluster, "brief"))


async def test_complete_status_without_success_criteria_met_is_rejected(
    batch: client.BatchV1Api,
) -> None:
    await batch.create_namespaced_job("default", _job("external", managedBy="multiq.dev/hub"))
    with pytest.raises(ApiException) as caught:
        await batch.patch_namespaced_job_status(
            "external",
            "default",
            {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
        )
    assert caught.value.status == 422
    done = await batch.patch_namespaced_job_status(
        "external",
        "default",
        {
            "status": {
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True"},
                    {"type": "Complete", "status": "True"},
                ],
                "succeeded": 1,
            }
        },
    )
    assert done.status.succeeded == 1


async def test_deleting_a_job_in_the_background_collects_its_pods(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job("doomed", parallelism=2, completions=2, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: len(_job_pods(cluster, "doomed")) == 2)
    await batch.delete_namespaced_job("doomed", "default", propagation_policy="Background")
    await eventually(lambda: not _job_pods(cluster, "doomed"))


async def test_deleting_a_job_without_a_policy_orphans_its_pods(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default", _job("parent", annotations={"kubesim.dev/duration": "60"})
    )
    await eventually(lambda: _job_pods(cluster, "parent"))
    await batch.delete_namespaced_job("parent", "default")
    await eventually(lambda: cluster.get("jobs", "default", "parent") is None)
    pods = _job_pods(cluster, "parent")
    assert len(pods) == 1
    assert "ownerReferences" not in pods[0]["metadata"]


async def test_pod_failure_policy_ignore_does_not_count_against_the_backoff_limit(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}}]}
    await batch.create_namespaced_job(
        "default",
        _job(
            "tolerant",
            backoffLimit=0,
            podFailurePolicy=policy,
            annotations={"kubesim.dev/exit-code": "7"},
        ),
    )
    await eventually(lambda: len(_job_pods(cluster, "tolerant")) >= 3)
    assert "Failed" not in _true_conditions(cluster, "tolerant")
    assert _job_status(cluster, "tolerant").get("failed", 0) == 0
    await batch.delete_namespaced_job("tolerant", "default", propagation_policy="Foreground")


async def test_simulated_logs_are_produced_at_the_annotated_rate(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    pod = manifest(
        {
            "metadata": {
                "name": "noisy",
                "annotations": {
                    "kubesim.dev/log-lines-per-second": "20",
                    "kubesim.dev/duration": "1",
                },
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]},
        }
    )
    await core.create_namespaced_pod("default", pod)
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "noisy") or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        within=10,
    )
    log = await core.read_namespaced_pod_log("noisy", "default")
    lines = log.splitlines()
    assert 5 <= len(lines) <= 25
    assert lines[0] == "noisy main line 1"


@pytest.mark.slow
async def test_failed_pods_are_replaced_after_the_configured_backoff() -> None:
    async with running(template=ClusterConfig(job_backoff_seconds=0.5)) as sim:
        cluster = sim.clusters[0]
        loop_time = asyncio.get_running_loop().time
        cluster.registry.create(
            cluster.types.core("jobs"),
            _job("patient", backoffLimit=3, annotations={"kubesim.dev/exit-code": "1"}),
            namespace="default",
        )
        started = loop_time()
        await eventually(lambda: "Failed" in _true_conditions(cluster, "patient"), within=10)
        # three replacements after failures 1, 2 and 3: 0.5 + 1 + 2 seconds of back-off
        assert loop_time() - started >= 3.5
        assert _job_status(cluster, "patient")["failed"] == 4


async def test_a_waiting_reason_annotation_keeps_a_pod_pending_with_that_status(
    core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    pod = manifest(
        {
            "metadata": {
                "name": "stuck",
                "annotations": {
                    "kubesim.dev/waiting-reason": "ImagePullBackOff",
                    "kubesim.dev/waiting-message": 'Back-off pulling image "nope"',
                },
            },
            "spec": {"containers": [{"name": "main", "image": "nope"}]},
        }
    )
    await core.create_namespaced_pod("default", pod)

    async def waiting() -> Any:
        current = await core.read_namespaced_pod("stuck", "default")
        statuses = current.status.container_statuses or []
        return statuses and statuses[0].state.waiting

    state = await eventually(waiting)
    assert (state.reason, state.message) == ("ImagePullBackOff", 'Back-off pulling image "nope"')
    table = await kubectl("get", "pod", "stuck")
    assert table.stdout.splitlines()[1].split()[1:3] == ["0/1", "ImagePullBackOff"]


async def test_lowering_parallelism_removes_excess_pods(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job("wide", parallelism=3, completions=6, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: _job_status(cluster, "wide").get("active") == 3)
    await batch.patch_namespaced_job("wide", "default", {"spec": {"parallelism": 1}})
    await eventually(lambda: len(_job_pods(cluster, "wide")) == 1)
    assert _job_status(cluster, "wide")["active"] == 1
    assert _job_status(cluster, "wide").get("failed", 0) == 0


async def test_a_success_policy_completes_an_indexed_job_early(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    # Index 0 (the "leader") finishes at once; the workers would run for a minute.
    await batch.create_namespaced_job(
        "default",
        _job(
            "leader",
            completions=3,
            parallelism=3,
            completionMode="Indexed",
            successPolicy={"rules": [{"succeededIndexes": "0"}]},
            annotations={"kubesim.dev/duration": "60"},
        ),
    )
    leader = await eventually(
        lambda: next(
            (
                p
                for p in _job_pods(cluster, "leader")
                if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
            ),
            None,
        )
    )
    pods = cluster.types.core("pods")
    await eventually(
        lambda: (
            (cluster.get("pods", "default", leader["metadata"]["name"]) or {})
            .get("status", {})
            .get("phase")
            == "Running"
        )
    )

    def finish(pod: dict[str, Any]) -> None:
        pod["metadata"]["annotations"]["kubesim.dev/duration"] = "0"

    cluster.registry.mutate(pods, "default", leader["metadata"]["name"], finish)
    await eventually(lambda: "Complete" in _true_conditions(cluster, "leader"), within=10)
    met = next(
        c for c in _job_status(cluster, "leader")["conditions"] if c["type"] == "SuccessCriteriaMet"
    )
    assert (met["reason"], met["message"]) == ("SuccessPolicy", "Matched rules at index 0")


async def test_a_job_deleted_in_the_foreground_goes_away_without_recreating_pods(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    await batch.create_namespaced_job(
        "default",
        _job("fg", parallelism=2, completions=4, annotations={"kubesim.dev/duration": "60"}),
    )
    await eventually(lambda: _job_status(cluster, "fg").get("active") == 2)
    before = cluster.store.revision
    await batch.delete_namespaced_job("fg", "default", propagation_policy="Foreground")
    await eventually(lambda: cluster.get("jobs", "default", "fg") is None)
    assert not _job_pods(cluster, "fg")
    assert cluster.store.revision - before < 100  # no create/delete race with the GC


async def test_backoff_limit_per_index_fails_only_the_failing_index(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    # Index 1 always fails; the others succeed. Each index may be retried once.
    await batch.create_namespaced_job(
        "default",
        _job(
            "per-index",
            completions=3,
            parallelism=3,
            completionMode="Indexed",
            backoffLimitPerIndex=1,
            annotations={"kubesim.dev/duration": "0.3"},
        ),
    )
    pods = cluster.types.core("pods")

    def make_index_one_fail() -> bool:
        for pod in _job_pods(cluster, "per-index"):
            annotations = pod["metadata"]["annotations"]
            if (
                annotations["batch.kubernetes.io/job-completion-index"] == "1"
                and "kubesim.dev/exit-code" not in annotations
            ):

                def fail(new: dict[str, Any]) -> None:
                    new["metadata"]["annotations"]["kubesim.dev/exit-code"] = "1"

                cluster.registry.mutate(pods, "default", pod["metadata"]["name"], fail)
        return "Failed" in _true_conditions(cluster, "per-index")

    await eventually(make_index_one_fail, within=15)
    status = _job_status(cluster, "per-index")
    assert status["completedIndexes"] == "0,2"
    assert status["failedIndexes"] == "1"
    assert status["failed"] == 2
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedIndexes"


async def test_the_fail_index_action_fails_an_index_without_retries(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    policy = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]}
    await batch.create_namespaced_job(
        "default",
        _job(
            "fail-index",
            completions=1,
            completionMode="Indexed",
            backoffLimitPerIndex=5,
            podFailurePolicy=policy,
            annotations={"kubesim.dev/exit-code": "3"},
        ),
    )
    await eventually(lambda: "Failed" in _true_conditions(cluster, "fail-index"))
    status = _job_status(cluster, "fail-index")
    assert (status["failed"], status["failedIndexes"]) == (1, "0")
