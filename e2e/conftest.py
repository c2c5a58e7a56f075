"""End-to-end federation scenarios with real processes: kubesim clusters, the hub, one agent
per cluster, and qctl — exactly what `qctl dev up` runs, started in a temp dir per test.

Every test here is marked `e2e` and `slow`; `pytest -m "not e2e"` skips them.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.v1alpha1.workload import Workload
from qctl.client import HubClient
from qctl.commands.dev import DevFederation

ROOT = Path(__file__).resolve().parents[1]
QCTL = str(Path(sys.executable).parent / "qctl")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


LOG_LINES_ON_FAILURE = 60
"""How much of each federation process's log a failed test's report shows."""


def log_tails(logs: Path, lines: int = LOG_LINES_ON_FAILURE) -> str:
    """The last `lines` lines of every log in `logs`, each under its file's name."""
    parts = []
    for log in sorted(logs.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"--- {log.name} (last {len(tail)} lines)\n" + "\n".join(tail))
    return "\n".join(parts) or f"(no logs in {logs})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that ran a federation shows its processes' last log lines: pytest keeps
    only its last few temporary directories, so by the time a CI failure is read, the logs
    beside a flaky run are gone."""
    report = yield
    fed = getattr(item, "funcargs", {}).get("federation")
    if report.when == "call" and report.failed and isinstance(fed, DevFederation):
        report.sections.append(("federation logs", log_tails(fed.state_dir / "logs")))
    return report


@pytest.fixture
def federation(tmp_path: Path) -> Iterator[DevFederation]:
    fed = DevFederation(tmp_path / "fed", clusters=2, nodes=2, runtime="process", port=0)
    try:
        fed.start(detach=False)
        yield fed
    finally:
        fed.stop()


def qctl(
    fed: DevFederation, *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MULTIQ_SERVER": fed.url,
        "MULTIQ_TOKEN": fed.admin_token,
        "MULTIQ_CONFIG": str(fed.state_dir / "qctl-config.yaml"),
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [QCTL, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"qctl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def apply_documents(
    fed: DevFederation, tmp: Path, name: str, documents: list[dict[str, Any]]
) -> None:
    """`qctl apply -f` of these documents, written as one YAML file as a user would."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    qctl(fed, "apply", "-f", str(path))


def change_member_cluster(fed: DevFederation, tmp: Path, cluster: str, **spec: Any) -> None:
    """Set these `spec` fields of a MemberCluster (camelCase) with `qctl apply`, keeping the
    rest of what `qctl get` shows: how an admin switches a cluster's setting on."""
    member = json.loads(qctl(fed, "get", "clusters", cluster, "-o", "json").stdout)
    changed = {
        "apiVersion": member["apiVersion"],
        "kind": member["kind"],
        "metadata": {"name": cluster, "labels": member["metadata"].get("labels", {})},
        "spec": {**member["spec"], **spec},
    }
    apply_documents(fed, tmp, cluster, [changed])


KUEUE_API = "kueue.x-k8s.io/v1beta2"


def kueue_resource_groups(cpu: str, memory: str) -> list[dict[str, Any]]:
    """One resource group of cpu and memory in the flavor "default", as Kueue's users write
    a ClusterQueue's or a Cohort's quota."""
    quota = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default", "resources": quota}],
        }
    ]


def kueue_cluster_queue(name: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    """A Kueue ClusterQueue open to every namespace with that quota; `spec` adds the rest
    (cohortName, preemption, fairSharing, admissionScope, …)."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            **spec,
            "resourceGroups": kueue_resource_groups(cpu, memory),
        },
    }


def kueue_local_queue(name: str, cluster_queue: str) -> dict[str, Any]:
    """A Kueue LocalQueue in the namespace "default"."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": cluster_queue},
    }


def workload(fed: DevFederation, name: str) -> dict[str, Any]:
    async def get() -> dict[str, Any]:
        async with HubClient(fed.context) as client:
            return await client.get(Workload, name, "default")

    return asyncio.run(get())


def kubectl(fed: DevFederation, cluster: str, *args: str) -> str:
    kubeconfig = fed.state_dir / "kubeconfigs" / f"{cluster}.kubeconfig"
    result = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(fed.state_dir / "kube-cache"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


class JobWatch:
    """`kubectl get jobs --watch` on one cluster for the whole run: every workload that ever
    had a Job there, even one deleted a moment later."""

    def __init__(self, fed: DevFederation, cluster: str) -> None:
        kubeconfig = fed.state_dir / "kubeconfigs" / f"{cluster}.kubeconfig"
        self.cluster = cluster
        self.process = subprocess.Popen(
            [
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "get",
                "jobs",
                "-A",
                "--watch",
                "-o",
                "json",
                "-l",
                "multiq.dev/workload-name",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.workloads: set[str] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self.process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    job, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                name = job["metadata"].get("labels", {}).get("multiq.dev/workload-name")
                if name:
                    self.workloads.add(name)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        self._reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
