"""Pod history: every pod's run (labels, node, started, stopped, outcome) outlives the pod, in
process and at `GET /_kubesim/history/pods`, even while the API is paused by a fault."""

from __future__ import annotations

from typing import Any

import aiohttp
from kubernetes_asyncio import client

from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.cluster import Cluster, ClusterConfig
from kubesim.history import PodHistory, PodRun
from kubesim.resources import ResourceRegistry
from kubesim.testing import running
from tests.kubesim.conftest import eventually, manifest

PODS = ResourceRegistry().core("pods")


def _pod_event(
    kind: EventType,
    *,
    uid: str = "u1",
    phase: str = "Pending",
    node: str | None = None,
    reason: str | None = None,
) -> StoreEvent:
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    pod = {
        "metadata": {"name": "p", "namespace": "team", "uid": uid, "labels": {"app": "x"}},
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }
    return StoreEvent(kind, PODS, pod, None, 1)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _runs_by_name(cluster: Cluster) -> dict[str, PodRun]:
    return {run.name: run for run in cluster.history.runs()}


def _started(cluster: Cluster, name: str) -> float | None:
    run = _runs_by_name(cluster).get(name)
    return run.started_at if run is not None else None


# --- the record, event by event (a clock passed in) -------------------------------------------


def test_a_run_starts_at_the_first_running_write_and_stops_at_the_first_terminal_one() -> None:
    clock = FakeClock()
    history = PodHistory("c1", clock=clock)
    history.observe(_pod_event(EventType.ADDED))
    clock.now = 101.0
    history.observe(_pod_event(EventType.MODIFIED, node="n1"))
    clock.now = 102.5
    history.observe(_pod_event(EventType.MODIFIED, phase="Running", node="n1"))
    clock.now = 110.0
    history.observe(_pod_event(EventType.MODIFIED, phase="Running", node="n1"))
    clock.now = 120.0
    history.observe(_pod_event(EventType.MODIFIED, phase="Succeeded", node="n1"))
    clock.now = 125.0
    history.observe(_pod_event(EventType.DELETED, phase="Succeeded", node="n1"))
    [run] = history.runs()
    assert (run.cluster, run.namespace, run.name, run.uid) == ("c1", "team", "p", "u1")
    assert run.labels == {"app": "x"}
    assert run.node == "n1"
    assert (run.created_at, run.started_at, run.stopped_at) == (100.0, 102.5, 120.0)
    assert (run.outcome, run.reason) == ("Succeeded", None)


def test_a_pod_deleted_while_running_stops_at_its_deletion() -> None:
    clock = FakeClock()
    history = PodHistory("c1", clock=clock)
    history.observe(_pod_event(EventType.ADDED, phase="Running", node="n1"))
    clock.now = 130.0
    history.observe(_pod_event(EventType.DELETED, phase="Running", node="n1"))
    [run] = history.runs()
    assert (run.started_at, run.stopped_at, run.outcome) == (100.0, 130.0, "Deleted")


def test_a_pod_that_never_ran_has_no_start_and_keeps_its_failure_reason() -> None:
    clock = FakeClock()
    history = PodHistory("c1", clock=clock)
    history.observe(_pod_event(EventType.ADDED))
    clock.now = 105.0
    history.observe(_pod_event(EventType.MODIFIED, phase="Failed", reason="DeadlineExceeded"))
    [run] = history.runs()
    assert run.started_at is None
    assert (run.stopped_at, run.outcome, run.reason) == (105.0, "Failed", "DeadlineExceeded")


def test_the_oldest_runs_past_the_limit_are_dropped_and_counted() -> None:
    history = PodHistory("c1", clock=FakeClock(), limit=2)
    for uid in ("a", "b", "c"):
        history.observe(_pod_event(EventType.ADDED, uid=uid))
    assert [run.uid for run in history.runs()] == ["b", "c"]
    assert history.dropped == 1
    assert history.to_wire()["dropped"] == 1


def test_a_deletion_of_a_pod_never_seen_records_nothing() -> None:
    history = PodHistory("c1", clock=FakeClock())
    history.observe(_pod_event(EventType.DELETED, phase="Running"))
    assert history.runs() == []


# --- a real cluster --------------------------------------------------------------------------


def _job(name: str, duration: str, labels: dict[str, str]) -> Any:
    return manifest(
        {
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {"kubesim.dev/duration": duration},
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}],
                    },
                }
            },
        }
    )


async def test_a_job_pods_run_is_kept_with_its_labels_after_the_job_is_deleted(
    batch: client.BatchV1Api, cluster: Cluster
) -> None:
    labels = {"multiq.dev/workload-name": "train", "multiq.dev/dispatch-generation": "3"}
    await batch.create_namespaced_job("default", _job("train", "0.3", labels))

    def finished() -> PodRun | None:
        run = next(iter(cluster.history.runs()), None)
        return run if run is not None and run.outcome is not None else None

    run = await eventually(finished)
    await batch.delete_namespaced_job("train", "default", propagation_policy="Foreground")
    await eventually(lambda: not cluster.store.list(cluster.types.core("pods"), "default"))
    [kept] = cluster.history.runs()
    assert kept is run
    assert kept.outcome == "Succeeded"
    assert kept.labels["multiq.dev/workload-name"] == "train"
    assert kept.labels["multiq.dev/dispatch-generation"] == "3"
    assert kept.labels["batch.kubernetes.io/job-name"] == "train"
    assert kept.node is not None
    assert kept.started_at is not None and kept.stopped_at is not None
    assert kept.created_at <= kept.started_at < kept.stopped_at
    assert kept.stopped_at - kept.started_at >= 0.25


async def test_a_running_pod_deleted_stops_running_at_its_deletion(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    pod = {
        "metadata": {"name": "server"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    await core.create_namespaced_pod("default", manifest(pod))
    await eventually(lambda: _started(cluster, "server"))
    assert _runs_by_name(cluster)["server"].stopped_at is None
    await core.delete_namespaced_pod("server", "default")
    await eventually(lambda: _runs_by_name(cluster)["server"].stopped_at)
    run = _runs_by_name(cluster)["server"]
    assert run.outcome == "Failed"  # the kubelet reports the killed containers before removal
    assert run.stopped_at is not None and run.started_at is not None
    assert run.stopped_at >= run.started_at


async def test_the_history_is_served_at_the_admin_path_even_while_the_api_is_paused() -> None:
    async with running(clusters=1, nodes=1, template=ClusterConfig(bookmark_interval=0.3)) as sim:
        cluster = sim.clusters[0]
        async with aiohttp.ClientSession() as http:
            pod = {
                "metadata": {"name": "p", "labels": {"multiq.dev/workload-name": "w"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            }
            async with http.post(f"{cluster.url}/api/v1/namespaces/default/pods", json=pod) as r:
                assert r.status == 201
            await eventually(lambda: cluster.history.runs()[0].started_at)
            cluster.faults.pause()
            async with http.get(f"{cluster.url}/_kubesim/history/pods") as response:
                body = await response.json()
            cluster.faults.resume()
    assert body["cluster"] == "sim-0"
    assert body["dropped"] == 0
    [served] = body["pods"]
    assert served["name"] == "p"
    assert served["namespace"] == "default"
    assert served["labels"] == {"multiq.dev/workload-name": "w"}
    assert served["startedAt"] == cluster.history.runs()[0].started_at
    assert served["stoppedAt"] is None and served["outcome"] is None
    assert set(served) == {
        "cluster",
        "namespace",
        "name",
        "uid",
        "labels",
        "node",
        "createdAt",
        "startedAt",
        "stoppedAt",
        "outcome",
        "reason",
    }
