"""Readiness and liveness probes of process-runtime pods (httpGet, tcpSocket, exec).

The thresholds are checked as a table over `ProbeSchedule`; the probes themselves against real
processes: a pod is Ready only once its probe passes (and only then an endpoint of its
Service), and a container failing its liveness probe is restarted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubesim.cluster import Cluster
from kubesim.kubelet.probes import ProbeSchedule
from tests.kubesim.conftest import Kubectl, eventually


@pytest.mark.parametrize(
    ("why", "thresholds", "results", "passing"),
    [
        ("readiness starts failing and one success passes", (1, 3, False), [True], [True]),
        ("liveness starts passing; it takes three failures to fail", (1, 3, True),
         [False, False, False], [True, True, False]),
        ("a success resets the failure count", (1, 2, True), [False, True, False, False],
         [True, True, True, False]),
        ("successThreshold 2 needs two in a row", (2, 1, False), [True, False, True, True],
         [False, False, False, True]),
    ],
)  # fmt: skip
def test_a_probe_passes_and_fails_by_its_thresholds(
    why: str, thresholds: tuple[int, int, bool], results: list[bool], passing: list[bool]
) -> None:
    success, failure, at_start = thresholds
    schedule = ProbeSchedule.of(
        {"successThreshold": success, "failureThreshold": failure}, passing_at_start=at_start
    )
    seen = []
    for ok in results:
        schedule.record(ok)
        seen.append(schedule.passing)
    assert seen == passing, why


def _ready(cluster: Cluster, name: str) -> bool:
    pod = cluster.get("pods", "default", name) or {}
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or ()
    )


async def test_an_exec_readiness_probe_holds_a_pod_unready_until_it_passes(
    process_kubectl: Kubectl, process_cluster: Cluster, tmp_path: Path
) -> None:
    flag = tmp_path / "ready"
    pod = f"""
apiVersion: v1
kind: Pod
metadata: {{name: gated, labels: {{app: gated}}}}
spec:
  containers:
  - name: main
    image: busybox
    command: [sleep, "60"]
    readinessProbe:
      exec: {{command: [test, -f, {flag}]}}
      periodSeconds: 1
"""
    await process_kubectl("apply", "-f", "-", stdin=pod)

    def running() -> bool:
        found = process_cluster.get("pods", "default", "gated") or {}
        return bool(found.get("status", {}).get("phase") == "Running")

    await eventually(running)
    shown = (await process_kubectl("get", "pod", "gated", "--no-headers")).stdout.split()
    assert shown[1:3] == ["0/1", "Running"]
    flag.touch()
    await eventually(lambda: _ready(process_cluster, "gated"), within=10)


async def test_an_http_readiness_probe_makes_the_pod_an_endpoint_once_it_serves(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    manifest = f"""
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: http}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: web, labels: {{app: web}}}}
spec:
  containers:
  - name: main
    image: python:3.11
    command: [sh, -c, 'sleep 1; exec {sys.executable} -m http.server 18933 --bind 127.0.0.1']
    ports: [{{name: http, containerPort: 18933}}]
    readinessProbe:
      httpGet: {{path: /, port: http}}
      periodSeconds: 1
"""
    await process_kubectl("apply", "-f", "-", stdin=manifest)
    await eventually(lambda: _ready(process_cluster, "web"), within=15)

    async def listed() -> bool:
        endpoints = (await process_kubectl("get", "endpoints", "web", "-o", "json")).json()
        return bool(endpoints.get("subsets", [{}])[0].get("addresses"))

    await eventually(listed)


async def test_a_failing_liveness_probe_restarts_the_container(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: sick}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: [sleep, "60"]
    livenessProbe:
      tcpSocket: {port: 1}
      periodSeconds: 1
      failureThreshold: 2
"""
    await process_kubectl("apply", "-f", "-", stdin=pod)

    def restarted() -> bool:
        found = process_cluster.get("pods", "default", "sick") or {}
        statuses = found.get("status", {}).get("containerStatuses") or [{}]
        return bool(statuses[0].get("restartCount", 0) >= 1)

    await eventually(restarted, within=20)
    events = (await process_kubectl("get", "events", "--field-selector",
                                    "involvedObject.name=sick")).stdout  # fmt: skip
    assert "Liveness probe failed" in events
    assert "failed liveness probe, will be restarted" in events
