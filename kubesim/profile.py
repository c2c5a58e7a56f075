"""Node profiles: what nodes a simulated cluster starts with, as YAML data.

A profile lists node groups; each group has a count, a capacity (cpu, memory, pods,
nvidia.com/gpu or any extended resource), labels, taints, and topology levels that label node
i of the group with its block / rack / ... (`index // size`). `build_nodes` turns a profile
into Node objects; the CLI's `--nodes M` overrides the total count. Read by `kubesim.cli` and
`kubesim.testing`; examples live in `examples/kubesim/*.profile` (YAML; not named .yaml
because `qctl validate -f examples/` reads those as Kubernetes manifests).

    nodes:
      - namePrefix: gpu
        count: 8
        capacity: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}
        allocatable: {cpu: "31500m"}
        labels: {node.kubernetes.io/instance-type: a3-highgpu-8g}
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
        topology:
          - {label: cloud.google.com/gce-topology-block, size: 4, prefix: block}
          - {label: cloud.google.com/gce-topology-subblock, size: 2, prefix: rack}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kubesim.objects import JsonObject, rfc3339

__all__ = ["NodeGroup", "NodeProfile", "TopologyLevel", "build_nodes", "load_profile"]

KUBELET_VERSION = "v1.32.4-kubesim"


class TopologyLevel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    size: int = Field(gt=0, description="Consecutive nodes sharing one value of this level.")
    prefix: str = ""


class NodeGroup(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name_prefix: str = Field(default="node", alias="namePrefix")
    count: int = Field(default=1, ge=0)
    capacity: dict[str, str] = Field(
        default_factory=lambda: {"cpu": "8", "memory": "32Gi", "pods": "110"}
    )
    allocatable: dict[str, str] = Field(
        default_factory=dict,
        description="Overrides of allocatable (e.g. less than capacity for system reserve).",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, Any]] = Field(default_factory=list)
    topology: list[TopologyLevel] = Field(default_factory=list)


class NodeProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: list[NodeGroup] = Field(default_factory=lambda: [NodeGroup()])

    def with_total(self, total: int) -> NodeProfile:
        """Scale the groups so their counts add up to `total` (proportionally, first gets rest)."""
        current = sum(group.count for group in self.nodes) or 1
        groups = [
            group.model_copy(update={"count": group.count * total // current})
            for group in self.nodes
        ]
        short = total - sum(group.count for group in groups)
        groups[0] = groups[0].model_copy(update={"count": groups[0].count + short})
        return NodeProfile(nodes=groups)


def load_profile(path: str | Path | None) -> NodeProfile:
    if path is None:
        return NodeProfile()
    data = yaml.safe_load(Path(path).read_text()) or {}
    return NodeProfile.model_validate(data)


def _node(name: str, group: NodeGroup, index: int, ordinal: int) -> JsonObject:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kubesim",
        **group.labels,
    }
    for level in group.topology:
        labels[level.label] = f"{level.prefix}{index // level.size}"
    capacity = {"pods": "110", **group.capacity}
    stamp = rfc3339()
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, reason, message in (
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    ip = f"10.{(ordinal >> 16) & 255}.{(ordinal >> 8) & 255}.{ordinal & 255}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kubesim.dev/node": "true", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": f"10.244.{ordinal % 256}.0/24",
            **({"taints": [dict(t) for t in group.taints]} if group.taints else {}),
        },
        "status": {
            "capacity": dict(capacity),
            "allocatable": {**capacity, **group.allocatable},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"kubesim-{ordinal}",
                "systemUUID": f"kubesim-{ordinal}",
                "bootID": f"kubesim-{ordinal}",
                "kernelVersion": "6.1.0-kubesim",
                "osImage": "kubesim",
                "containerRuntimeVersion": "kubesim://1.0.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def build_nodes(profile: NodeProfile) -> list[JsonObject]:
    nodes: list[JsonObject] = []
    for group in profile.nodes:
        for index in range(group.count):
            nodes.append(_node(f"{group.name_prefix}-{index}", group, index, len(nodes) + 1))
    return nodes
