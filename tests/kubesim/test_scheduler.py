"""The scheduler: fit by requests, selectors, affinity, taints; unschedulable reasons; retry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesim.cluster import Cluster
from kubesim.profile import NodeProfile
from kubesim.testing import running
from tests.kubesim.conftest import eventually

PROFILE = NodeProfile.model_validate(
    {
        "nodes": [
            {
                "namePrefix": "cpu",
                "count": 2,
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "labels": {"pool": "cpu"},
                "topology": [{"label": "example.com/rack", "size": 1, "prefix": "rack-"}],
            },
            {
                "namePrefix": "gpu",
                "count": 1,
                "capacity": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                "labels": {"pool": "gpu"},
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            },
        ]
    }
)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with running(profile=PROFILE) as sim:
        yield sim.clusters[0]


def _create(
    cluster: Cluster, name: str, *, requests: dict[str, str] | None = None, **spec: Any
) -> None:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": requests or {}}}
            ],
            **spec,
        },
    }
    cluster.registry.create(cluster.types.core("pods"), pod, namespace="default")


def _node_of(cluster: Cluster, name: str) -> str | None:
    pod = cluster.get("pods", "default", name) or {}
    node: str | None = pod.get("spec", {}).get("nodeName")
    return node


def _scheduled_condition(cluster: Cluster, name: str) -> dict[str, Any] | None:
    pod = cluster.get("pods", "default", name) or {}
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            found: dict[str, Any] = condition
            return found
    return None


async def test_pods_are_bound_to_nodes_with_room_and_marked_scheduled(cluster: Cluster) -> None:
    _create(cluster, "small", requests={"cpu": "1"})
    node = await eventually(lambda: _node_of(cluster, "small"))
    assert node.startswith("cpu-")
    condition = _scheduled_condition(cluster, "small")
    assert condition is not None and condition["status"] == "True"


async def test_tainted_nodes_need_a_toleration_and_selectors_are_honoured(cluster: Cluster) -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    _create(
        cluster,
        "trainer",
        requests={"nvidia.com/gpu": "2"},
        tolerations=[toleration],
        nodeSelector={"pool": "gpu"},
    )
    assert await eventually(lambda: _node_of(cluster, "trainer")) == "gpu-0"


async def test_required_node_affinity_restricts_placement(cluster: Cluster) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "example.com/rack", "operator": "In", "values": ["rack-1"]}
                        ]
                    }
                ]
            }
        }
    }
    _create(cluster, "racked", affinity=affinity)
    assert await eventually(lambda: _node_of(cluster, "racked")) == "cpu-1"


async def test_an_unschedulable_pod_gets_the_reason_and_an_event(cluster: Cluster) -> None:
    _create(cluster, "huge", requests={"cpu": "64"})
    condition = await eventually(lambda: _scheduled_condition(cluster, "huge"))
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"].startswith(
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "2 Insufficient cpu."
    )
    events = cluster.store.list(cluster.types.core("events"), "default")
    assert any(
        e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "huge" for e in events
    )


async def test_a_pending_pod_is_scheduled_once_capacity_frees(cluster: Cluster) -> None:
    _create(cluster, "hog-a", requests={"cpu": "3"}, nodeSelector={"pool": "cpu"})
    _create(cluster, "hog-b", requests={"cpu": "3"}, nodeSelector={"pool": "cpu"})
    await eventually(lambda: _node_of(cluster, "hog-a") and _node_of(cluster, "hog-b"))
    _create(cluster, "waiter", requests={"cpu": "2"}, nodeSelector={"pool": "cpu"})
    await eventually(
        lambda: (_scheduled_condition(cluster, "waiter") or {}).get("status") == "False"
    )
    cluster.registry.delete(cluster.types.core("pods"), "default", "hog-a")
    await eventually(lambda: _node_of(cluster, "waiter"))


async def test_a_preset_node_name_is_left_alone(cluster: Cluster) -> None:
    _create(cluster, "pinned", nodeName="cpu-1")
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "pinned") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    assert _node_of(cluster, "pinned") == "cpu-1"


async def test_profile_topology_levels_label_the_nodes(cluster: Cluster) -> None:
    node = cluster.get("nodes", "", "cpu-1")
    assert node is not None
    assert node["metadata"]["labels"]["example.com/rack"] == "rack-1"
    assert node["status"]["allocatable"]["cpu"] == "4"
    gpu = cluster.get("nodes", "", "gpu-0")
    assert gpu is not None
    assert gpu["status"]["capacity"]["nvidia.com/gpu"] == "2"


async def test_a_pod_bound_to_a_missing_node_stays_pending(cluster: Cluster) -> None:
    _create(cluster, "orphan", nodeName="no-such-node")
    _create(cluster, "control", nodeName="cpu-0")
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "control") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    assert (cluster.get("pods", "default", "orphan") or {})["status"]["phase"] == "Pending"


def test_a_profile_can_reserve_part_of_the_capacity() -> None:
    from kubesim.profile import build_nodes

    profile = NodeProfile.model_validate(
        {"nodes": [{"count": 1, "capacity": {"cpu": "8"}, "allocatable": {"cpu": "7500m"}}]}
    )
    node = build_nodes(profile)[0]
    assert node["status"]["capacity"]["cpu"] == "8"
    assert node["status"]["allocatable"]["cpu"] == "7500m"
