"""Logs that outlive pods and the hub's memory: a Job's logs are read back after its pods are
deleted and after the hub is killed with SIGKILL; `qctl logs -l` follows several workloads
at once, each line prefixed [workload/pod/container]."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import kubectl, qctl, workload
from e2e.test_federation import eventually, jobs_for, state_of
from qctl.commands.dev import DevFederation


def job_file(tmp: Path, name: str, script: str, labels: dict[str, str] | None = None) -> Path:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"multiq.dev/queue-name": "default", **(labels or {})},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", script],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                }
            }
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def pods_of(fed: DevFederation, cluster: str, job: str) -> list[str]:
    listed = json.loads(kubectl(fed, cluster, "get", "pods", "-A", "-o", "json"))
    return [p["metadata"]["name"] for p in listed["items"] if p["metadata"]["name"].startswith(job)]


def test_a_jobs_logs_are_read_after_its_pods_are_deleted_and_after_a_hub_sigkill(
    federation: DevFederation, tmp_path: Path
) -> None:
    count = 5000
    script = f"i=1; while [ $i -le {count} ]; do echo chatty-$i; i=$((i+1)); done"
    qctl(federation, "submit", "-f", str(job_file(tmp_path, "chatty", script)))
    eventually(lambda: state_of(federation, "job-chatty") == "Succeeded", within=90)
    cluster = workload(federation, "job-chatty")["status"]["clusterName"]
    # Nobody followed it: what the hub has, the agent shipped when it finished.
    for job in jobs_for(federation, cluster, "job-chatty"):
        kubectl(federation, cluster, "delete", "job", "-n", "default", job, "--wait=true")
    eventually(lambda: not jobs_for(federation, cluster, "job-chatty"))
    eventually(lambda: not pods_of(federation, cluster, "job-chatty"), within=60)
    want = [f"chatty-{n}" for n in range(1, count + 1)]

    def lines() -> list[str]:
        out = qctl(federation, "logs", "job-chatty").stdout.splitlines()
        return [line.rsplit(" ", 1)[-1] for line in out]

    assert lines() == want
    federation.kill("hub", signal.SIGKILL)
    federation.restart("hub")
    eventually(lambda: qctl(federation, "get", "workloads", check=False).returncode == 0)
    assert lines() == want


def labelled_workload(
    tmp: Path, name: str, script: str, *, cpu: str = "1", priority: int | None = None
) -> Path:
    """A Workload written directly, labelled team=logs (a Job's labels stay on the Job)."""
    wl: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "labels": {"team": "logs"}},
        "spec": {
            **({} if priority is None else {"priority": priority}),
            "queueName": "default",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "command": ["sh", "-c", script],
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(wl))
    return path


def test_qctl_logs_with_a_selector_follows_two_workloads_with_prefixes(
    federation: DevFederation, tmp_path: Path
) -> None:
    names = ("log-left", "log-right")
    for name in names:
        script = f"sleep 2; echo {name}-one; sleep 1; echo {name}-two"
        qctl(federation, "submit", "-f", str(labelled_workload(tmp_path, name, script)))
    followed = qctl(federation, "logs", "-f", "-l", "team=logs", timeout=120).stdout.splitlines()
    for name in names:
        mine = [line for line in followed if line.startswith(f"[{name}/")]
        assert [line.split("] ", 1)[1] for line in mine] == [f"{name}-one", f"{name}-two"]
        assert all(line.split("] ", 1)[0].endswith("/main") for line in mine)
    assert len(followed) == 4, followed
    # And afterwards, read back together (from the hub's store once the agents shipped).
    eventually(lambda: all(state_of(federation, n) == "Succeeded" for n in names))
    again = qctl(federation, "logs", "-l", "team=logs").stdout.splitlines()
    assert sorted(line.split("] ", 1)[1] for line in again) == sorted(
        f"{n}-{w}" for n in names for w in ("one", "two")
    )


@pytest.fixture
def one_cluster(tmp_path: Path) -> Iterator[DevFederation]:
    """One cluster of one 8-CPU node whose queue preempts lower priorities."""
    fed = DevFederation(tmp_path / "fed", clusters=1, nodes=1, runtime="process", port=0)
    try:
        fed.start(detach=False)
        queue = next(o for o in fed.fleet_objects() if o["kind"] == "ClusterQueue")
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        path = tmp_path / "queue.yaml"
        path.write_text(yaml.safe_dump(queue))
        qctl(fed, "apply", "-f", str(path))
        yield fed
    finally:
        fed.stop()


def test_a_preempted_workloads_lines_are_at_the_hub_after_its_pods_are_gone(
    one_cluster: DevFederation, tmp_path: Path
) -> None:
    fed = one_cluster
    count = 2000
    # What it prints as it is stopped (SIGTERM) is kept too.
    script = (
        "trap 'echo low-bye; exit 0' TERM; "
        f"i=1; while [ $i -le {count} ]; do echo low-$i; i=$((i+1)); done; sleep 600 & wait"
    )
    qctl(fed, "submit", "-f", str(labelled_workload(tmp_path, "low", script, cpu="8", priority=1)))
    eventually(lambda: state_of(fed, "low") == "Bound", within=60)
    cluster = fed.names[0]

    def said_last() -> bool:
        pods = pods_of(fed, cluster, "low")
        logged = kubectl(fed, cluster, "logs", "-n", "default", pods[0]) if pods else ""
        return f"low-{count}" in logged

    eventually(said_last, within=60)
    # Nobody follows it. A higher priority takes its quota: it is preempted.
    high = labelled_workload(tmp_path, "high", "sleep 600", cpu="8", priority=100)
    qctl(fed, "submit", "-f", str(high))
    eventually(lambda: state_of(fed, "high") == "Bound", within=60)
    eventually(lambda: not pods_of(fed, cluster, "low"), within=60)
    want = [*(f"low-{n}" for n in range(1, count + 1)), "low-bye"]

    def lines() -> list[str]:
        out = qctl(fed, "logs", "low").stdout.splitlines()
        return [line.rsplit(" ", 1)[-1] for line in out]

    eventually(lambda: lines() == want, within=20)
