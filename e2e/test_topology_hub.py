"""The hub sends a gang that requires one rack only to a cluster with a rack free for it, and
with no such rack anywhere the gang waits at the hub, saying per cluster why.

Two kubesim clusters (process runtime), each 2 racks × 4 hosts of 4 CPUs (a profile written
here), a Topology of racks and hosts and a flavor placed by it. On sim-0 one host of each
rack is cordoned, on sim-1 one host of rack-1: only sim-1's rack-0 holds four 4-CPU pods.
The hub learns that from the agents' capacity reports alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import kubectl, qctl, workload
from e2e.test_federation import eventually
from qctl.commands.dev import DevFederation

RACK = "example.com/topology-rack"
PROFILE = {
    "nodes": [
        {
            "namePrefix": "host",
            "count": 8,
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "labels": {"example.com/pool": "racked"},
            "topology": [{"label": RACK, "size": 4, "prefix": "rack-"}],
        }
    ]
}
API = "multiq.dev/v1alpha1"
CONFIG = [
    {
        "apiVersion": API,
        "kind": "Topology",
        "metadata": {"name": "racks"},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]},
    },
    {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": "racked"},
        "spec": {"nodeLabels": {"example.com/pool": "racked"}, "topologyName": "racks"},
    },
    {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": "racked"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"multiq.dev/tenant": "default"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "racked",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "32"},
                                {"name": "memory", "nominalQuota": "128Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "racked", "namespace": "default"},
        "spec": {"clusterQueue": "racked"},
    },
]


@pytest.fixture
def racked(tmp_path: Path) -> Any:
    profile = tmp_path / "racks.profile"
    profile.write_text(yaml.safe_dump(PROFILE))
    fed = DevFederation(
        tmp_path / "fed", clusters=2, nodes=8, runtime="process", port=0, profile=profile
    )
    try:
        fed.start(detach=False)
        yield fed
    finally:
        fed.stop()


def rack_gang(tmp: Path, name: str) -> Path:
    """Four pods of 4 CPUs (a whole host each) that require one rack."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "racked"}},
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", "sleep 300"],
                            "resources": {"requests": {"cpu": "4", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(job))
    return path


def hosts_by_rack(fed: DevFederation, cluster: str) -> dict[str, list[str]]:
    nodes = json.loads(kubectl(fed, cluster, "get", "nodes", "-o", "json"))["items"]
    out: dict[str, list[str]] = {}
    for node in nodes:
        meta = node["metadata"]
        out.setdefault(meta["labels"][RACK], []).append(meta["name"])
    return {rack: sorted(names) for rack, names in sorted(out.items())}


def schedulable_nodes(fed: DevFederation, cluster: str) -> int:
    members = json.loads(qctl(fed, "get", "clusters", "-o", "json").stdout)
    items = members.get("items", members) if isinstance(members, dict) else members
    for member in items:
        if member["metadata"]["name"] == cluster:
            return int(
                ((member.get("status") or {}).get("capacity") or {}).get("schedulableNodes", -1)
            )
    return -1


def waiting_message(fed: DevFederation, name: str) -> str:
    for condition in (workload(fed, name).get("status") or {}).get("conditions", []):
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return ""


def test_a_rack_requiring_gang_goes_only_to_the_cluster_with_a_free_rack_and_then_waits(
    racked: DevFederation, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump_all(CONFIG))
    qctl(racked, "apply", "-f", str(config))
    for cluster, cordoned in (("sim-0", ["rack-0", "rack-1"]), ("sim-1", ["rack-1"])):
        racks = hosts_by_rack(racked, cluster)
        assert sorted(racks) == ["rack-0", "rack-1"] and all(len(h) == 4 for h in racks.values())
        for rack in cordoned:
            kubectl(racked, cluster, "cordon", racks[rack][0])
    # The hub's view of both clusters is the one after the cordons (the status is written
    # from the capacity reports that carry the racks' room).
    eventually(lambda: schedulable_nodes(racked, "sim-0") == 6, within=60)
    eventually(lambda: schedulable_nodes(racked, "sim-1") == 7, within=60)

    qctl(racked, "submit", "-f", str(rack_gang(tmp_path, "first")))
    bound = eventually(
        lambda: (workload(racked, "job-first").get("status") or {}).get("clusterName"), within=60
    )
    # Without topology the hub would pick sim-0 (as much quota, first by name).
    assert bound == "sim-1"

    qctl(racked, "submit", "-f", str(rack_gang(tmp_path, "second")))
    message = eventually(
        lambda: "sim-1: no free rack" in (m := waiting_message(racked, "job-second")) and m,
        within=60,
    )
    assert "sim-0: no free rack holds 4 pods (largest 3)" in message
    assert "sim-1: no free rack holds 4 pods (largest 3)" in message
    assert not (workload(racked, "job-second").get("status") or {}).get("clusterName")
    described = qctl(racked, "describe", "workload", "job-second").stdout
    assert "sim-0: no free rack holds 4 pods (largest 3)" in described
