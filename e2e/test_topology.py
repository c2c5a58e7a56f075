"""Topology-aware placement end to end: a hub, one agent and a kubesim cluster of 2 blocks ×
2 racks × 2 hosts (examples/kubesim/tas-small.profile, 2 CPUs a host), pods running as real
processes. Gangs that require one rack land every pod in one rack, an Indexed Job and a
JobSet alike; a gang that prefers one block but cannot fit one spans the fewest blocks with
each host holding exactly the pods its assignment gave it; one that cannot fit any rack waits,
and `qctl describe workload` says why. Where pods ran is read with kubectl: the pods' nodes
and those nodes' labels."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import ROOT, kubectl, qctl, workload
from qctl.commands.dev import DevFederation

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
CLUSTER = "sim-0"
PROFILE = ROOT / "examples" / "kubesim" / "tas-small.profile"

FABRIC = [
    {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "fabric"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    },
    {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "fabric"},
        "spec": {"nodeLabels": {"type": "kubesim"}, "topologyName": "fabric"},
    },
    {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "fabric"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"multiq.dev/tenant": "default"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "fabric", "resources": [{"name": "cpu", "nominalQuota": "16"}]}
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "fabric", "namespace": "default"},
        "spec": {"clusterQueue": "fabric"},
    },
]


def eventually(check: Callable[[], Any], *, within: float = 60.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {within}s: {check}")
        time.sleep(every)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevFederation]:
    """One federation for the module (starting one is most of a test's time); each test
    leaves the cluster empty for the next."""
    tmp_path = tmp_path_factory.mktemp("topology")
    fed = DevFederation(
        tmp_path / "fed", clusters=1, nodes=8, runtime="process", port=0, profile=PROFILE
    )
    try:
        fed.start(detach=False)
        manifests = tmp_path / "fabric.yaml"
        manifests.write_text(yaml.safe_dump_all(FABRIC))
        qctl(fed, "apply", "-f", str(manifests))
        yield fed
    finally:
        fed.stop()


def pod_template(topology: dict[str, str], seconds: int) -> dict[str, Any]:
    return {
        "metadata": {"annotations": topology},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", f"sleep {seconds}"],
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
        },
    }


def indexed_job(name: str, pods: int, topology: dict[str, str], seconds: int = 2) -> Any:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "fabric"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": pod_template(topology, seconds),
        },
    }


def jobset(name: str, replicas: int, pods: int, topology: dict[str, str]) -> Any:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "fabric"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": pods,
                            "parallelism": pods,
                            "template": pod_template(topology, 2),
                        }
                    },
                }
            ]
        },
    }


def submit(fed: DevFederation, tmp: Path, body: Any) -> None:
    path = tmp / f"{body['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    qctl(fed, "submit", "-f", str(path))


def node_labels(fed: DevFederation) -> dict[str, dict[str, str]]:
    nodes = json.loads(kubectl(fed, CLUSTER, "get", "nodes", "-o", "json"))["items"]
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}


def nodes_of(fed: DevFederation, name: str) -> list[str] | None:
    """The nodes the workload's pods were bound to (None until every pod has one)."""
    pods = json.loads(
        kubectl(
            fed,
            CLUSTER,
            "get",
            "pods",
            "-A",
            "-o",
            "json",
            "-l",
            f"multiq.dev/workload-name={name}",
        )
    )["items"]
    bound = [p["spec"].get("nodeName") for p in pods]
    return bound if bound and all(bound) else None


def finished(fed: DevFederation, name: str) -> bool:
    conditions = (workload(fed, name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)


def test_gangs_requiring_one_rack_land_in_one_rack_and_a_preferred_block_gang_spans_fewest_blocks(
    fabric: DevFederation, tmp_path: Path
) -> None:
    labels = node_labels(fabric)
    required_rack = {"kueue.x-k8s.io/podset-required-topology": RACK}
    submit(fabric, tmp_path, indexed_job("rack-job", 4, required_rack))
    submit(fabric, tmp_path, jobset("rack-set", 2, 2, required_rack))
    for name in ("job-rack-job", "jobset-rack-set"):
        nodes = eventually(_bound(fabric, name), within=90)
        assert len(nodes) == 4
        racks = {(labels[n][BLOCK], labels[n][RACK]) for n in nodes}
        assert len(racks) == 1, f"{name} ran in {racks}"
        # 4 one-CPU pods in a rack of two 2-CPU hosts: two a host, so both hosts were given
        # pods one by one and each got exactly its share.
        assert sorted(Counter(nodes).values()) == [2, 2]
    eventually(
        lambda: finished(fabric, "job-rack-job") and finished(fabric, "jobset-rack-set"),
        within=90,
    )

    # 12 pods preferring a block: a block holds 8, so two blocks (not three racks' worth of
    # scattered hosts), and every host holds the count its assignment named.
    submit(
        fabric,
        tmp_path,
        indexed_job("wide", 12, {"kueue.x-k8s.io/podset-preferred-topology": BLOCK}),
    )
    nodes = eventually(_bound(fabric, "job-wide"), within=90)
    assert len(nodes) == 12
    assert len({labels[n][BLOCK] for n in nodes}) == 2
    # The pods can be bound before the agent's report of the admission reaches the hub.
    admission = eventually(
        lambda: (workload(fabric, "job-wide").get("status") or {}).get("admission"), within=30
    )
    [psa] = admission["podSetAssignments"]
    assigned = _assigned_per_host(psa["topologyAssignment"])
    assert sum(assigned.values()) == 12
    assert Counter(nodes) == assigned
    eventually(lambda: finished(fabric, "job-wide"), within=90)


def test_a_gang_no_rack_can_hold_waits_and_says_why(fabric: DevFederation, tmp_path: Path) -> None:
    submit(
        fabric,
        tmp_path,
        indexed_job("too-big", 6, {"kueue.x-k8s.io/podset-required-topology": RACK}),
    )

    # The hub knows from sim-0's capacity report that no rack there can ever hold six pods,
    # so it keeps the gang (it is never offered) and says so per cluster; the engine's own
    # "needs N pods in one rack" reason is for views the hub had not caught up with yet.
    def reason() -> str | None:
        described = qctl(fabric, "describe", "workload", "job-too-big").stdout
        return described if "rack could ever hold" in described else None

    described = eventually(reason, within=60)
    assert "sim-0: no rack could ever hold 6 pods (largest 4 when empty)" in described
    assert nodes_of(fabric, "job-too-big") is None


def _bound(fed: DevFederation, name: str) -> Callable[[], list[str] | None]:
    return lambda: nodes_of(fed, name)


def _assigned_per_host(assignment: dict[str, Any]) -> Counter[str]:
    """Pods per host from Kueue's compressed topologyAssignment."""
    levels = assignment["levels"]
    host_level = levels.index(HOST)
    out: Counter[str] = Counter()
    for slice_ in assignment["slices"]:
        count = slice_["domainCount"]
        values = slice_["valuesPerLevel"][host_level]
        if values.get("universalValue") is not None:
            hosts = [values["universalValue"]] * count
        else:
            prefix, suffix = values.get("prefix") or "", values.get("suffix") or ""
            hosts = [f"{prefix}{root}{suffix}" for root in values["roots"]]
        pods = slice_.get("podCounts") or [slice_.get("universalPodCount")] * count
        for host, n in zip(hosts, pods, strict=True):
            out[host] += n
    return out
