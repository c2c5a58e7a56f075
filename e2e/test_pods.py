"""Plain Pods and pod groups through a dev federation (two kubesim clusters, their agents, the
hub), submitted with `qctl submit -f` as Kueue users write them: a group of three Pods is one
workload, admitted and run together on one cluster — none of its pods starts before the group
is admitted, all succeed, the workload is Succeeded; a single plain Pod runs as itself; a
group submitted pod by pod waits at the hub, saying why, until its last pod is in."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import ROOT, kubectl, qctl, workload
from e2e.test_federation import eventually, state_of
from qctl.commands.dev import DevFederation


def pod(name: str, *, group: str | None = None, total: int = 3) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "default"}
    annotations = {}
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", f"echo {name} started; sleep 1"],
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                }
            ],
        },
    }


def pods_on(fed: DevFederation, cluster: str, workload_name: str) -> list[dict[str, Any]]:
    out = kubectl(
        fed,
        cluster,
        "get",
        "pods",
        "-A",
        "-o",
        "json",
        "-l",
        f"multiq.dev/workload-name={workload_name}",
    )
    return list(json.loads(out)["items"])


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_pod_group_of_three_plain_pods_is_admitted_and_runs_together(
    federation: DevFederation, tmp_path: Path
) -> None:
    path = tmp_path / "ring.yaml"
    path.write_text(yaml.safe_dump_all([pod(f"ring-{i}", group="ring") for i in range(3)]))
    submitted = qctl(federation, "submit", "-f", str(path))
    assert (
        submitted.stdout
        == "workload/pod-group-ring submitted to queue default in namespace default\n"
    )

    eventually(lambda: state_of(federation, "pod-group-ring") == "Succeeded", within=120)
    wl = workload(federation, "pod-group-ring")
    status = wl["status"]
    assert status["pods"]["succeeded"] == 3
    cluster = status["clusterName"]
    pods = pods_on(federation, cluster, "pod-group-ring")
    assert sorted(p["metadata"]["name"] for p in pods) == ["ring-0", "ring-1", "ring-2"]
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    # The other cluster never got any of them (one workload, all or nothing).
    (other,) = [c for c in federation.names if c != cluster]
    assert pods_on(federation, other, "pod-group-ring") == []
    # No pod started before its last pod existed (Kueue's admission gate, taken off the three
    # together; the agent makes the pods only once the group is admitted there). The hub's
    # Admitted time is when the agent's report reached it, which a loaded machine can put
    # after the pods started: it bounds nothing here (CI saw a pod start 1 s before it).
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in status["conditions"])
    last_created = max(_time(p["metadata"]["creationTimestamp"]) for p in pods)
    for p in pods:
        started = _time(p["status"]["startTime"])
        assert started >= last_created


def test_the_plain_pod_example_runs_as_itself(federation: DevFederation) -> None:
    submitted = qctl(federation, "submit", "-f", str(ROOT / "examples" / "pod.yaml"))
    name = submitted.stdout.split()[0].removeprefix("workload/")
    eventually(lambda: state_of(federation, name) == "Succeeded", within=120)
    cluster = workload(federation, name)["status"]["clusterName"]
    [ran] = pods_on(federation, cluster, name)
    assert ran["metadata"]["name"] == "hello-pod"
    assert not ran["metadata"].get("ownerReferences")  # a bare pod, no Job around it
    logs = qctl(federation, "logs", name).stdout
    assert "hello from a plain pod" in logs


def test_a_pod_group_submitted_pod_by_pod_waits_at_the_hub_until_its_last_pod(
    federation: DevFederation, tmp_path: Path
) -> None:
    files = []
    for i in range(3):
        path = tmp_path / f"step-{i}.yaml"
        path.write_text(yaml.safe_dump(pod(f"step-{i}", group="step")))
        files.append(path)
    first = qctl(federation, "submit", "-f", str(files[0])).stdout
    assert first == (
        "workload/pod-group-step submitted to queue default in namespace default"
        " (pod group: 1/3 pods in, it waits for the rest)\n"
    )
    qctl(federation, "submit", "-f", str(files[1]))
    time.sleep(3)  # time enough for a dispatch, were it not waiting
    wl = workload(federation, "pod-group-step")
    assert not (wl.get("status") or {}).get("clusterName")
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert reserved["reason"] == "WaitingForPodGroup"
    assert reserved["message"].startswith("2 of the group's 3 pods submitted")
    assert all(not pods_on(federation, c, "pod-group-step") for c in federation.names)

    qctl(federation, "submit", "-f", str(files[2]))
    eventually(lambda: state_of(federation, "pod-group-step") == "Succeeded", within=120)
    cluster = workload(federation, "pod-group-step")["status"]["clusterName"]
    names = sorted(p["metadata"]["name"] for p in pods_on(federation, cluster, "pod-group-step"))
    assert names == ["step-0", "step-1", "step-2"]
