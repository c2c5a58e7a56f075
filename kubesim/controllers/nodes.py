"""Node heartbeats (Leases in kube-node-lease) and the admin node faults.

Every node gets a `coordination.k8s.io/v1` Lease named after it, owned by the node and
renewed every `lease_interval` seconds, spread over the interval in slices so big clusters
renew smoothly; every `node_status_interval` seconds (a kubelet's nodeStatusReportFrequency,
5 min by default) the node's conditions get a fresh lastHeartbeatTime.

`fail` stops a node's heartbeats, turns its Ready condition Unknown and taints it
unreachable (the node lifecycle controller's doing on a real cluster) and tells the kubelet
to fail its pods; `recover` undoes that; `cordon` flips spec.unschedulable with the matching
taint. Called by `kubesim.admin` and started by `kubesim.cluster`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.errors import NotFoundError
from kubesim.objects import JsonObject, now, rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["NodeController"]

LEASE_NAMESPACE = "kube-node-lease"
_UNREACHABLE = "node.kubernetes.io/unreachable"
_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_SLICES = 10


def micro_time(moment: dt.datetime | None = None) -> str:
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeController:
    name = "node-controller"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.registry = cluster.registry
        self.nodes = cluster.types.core("nodes")
        self.leases = cluster.types.core("leases")
        self.failed: set[str] = set()
        self._new_nodes: list[JsonObject] = []
        self._wakeup = asyncio.Event()
        cluster.store.subscribe(self.nodes, self._on_node)

    def _on_node(self, event: StoreEvent) -> None:
        if event.type is EventType.ADDED:
            self._new_nodes.append(event.obj)
            self._wakeup.set()

    def _create_leases(self) -> None:
        nodes, self._new_nodes = self._new_nodes, []
        for node in nodes:
            meta = node["metadata"]
            if self.registry.find(self.leases, LEASE_NAMESPACE, meta["name"]) is not None:
                continue
            lease = {
                "metadata": {
                    "name": meta["name"],
                    "namespace": LEASE_NAMESPACE,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": meta["name"],
                            "uid": meta["uid"],
                        }
                    ],
                },
                "spec": {
                    "holderIdentity": meta["name"],
                    "leaseDurationSeconds": 40,
                    "renewTime": micro_time(),
                },
            }
            self.registry.create(self.leases, lease, namespace=LEASE_NAMESPACE, validate=False)

    def _renew(self, names: list[str]) -> None:
        stamp = micro_time()

        def renew(lease: JsonObject) -> None:
            lease["spec"]["renewTime"] = stamp

        for name in names:
            if name not in self.failed:
                self.registry.mutate(self.leases, LEASE_NAMESPACE, name, renew)

    def _report_status(self, names: list[str]) -> None:
        """Refresh the conditions' lastHeartbeatTime, as a kubelet's periodic status report."""
        stamp = rfc3339()

        def heartbeat(node: JsonObject) -> None:
            for condition in node.get("status", {}).get("conditions") or []:
                condition["lastHeartbeatTime"] = stamp

        for name in names:
            if name not in self.failed:
                self.registry.mutate(self.nodes, "", name, heartbeat)

    async def run(self) -> None:
        interval = self.cluster.config.lease_interval
        status_every = max(1, round(self.cluster.config.node_status_interval / interval))
        turn = 0
        while True:
            if self._new_nodes:
                self._create_leases()
            self._wakeup.clear()
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
                async with asyncio.timeout(interval / _SLICES):
                    await self._wakeup.wait()
                continue
            except TimeoutError:
                pass
            names = sorted(n["metadata"]["name"] for n in self.cluster.store.list(self.nodes, None))
            due = names[turn % _SLICES :: _SLICES]
            self._renew(due)
            if (turn // _SLICES) % status_every == status_every - 1:
                self._report_status(due)
            turn += 1

    # -- admin faults -------------------------------------------------------------------------

    def _node(self, name: str) -> JsonObject:
        node = self.registry.find(self.nodes, "", name)
        if node is None:
            raise NotFoundError.of("nodes", "", name)
        return node

    def _set_ready(self, node: JsonObject, status: str, reason: str, message: str) -> None:
        stamp = rfc3339()
        conditions: list[dict[str, Any]] = node["status"].setdefault("conditions", [])
        for condition in conditions:
            if condition.get("type") == "Ready":
                if condition.get("status") != status:
                    condition["lastTransitionTime"] = stamp
                condition.update(
                    {
                        "status": status,
                        "reason": reason,
                        "message": message,
                        "lastHeartbeatTime": stamp,
                    }
                )

    def fail(self, name: str) -> None:
        self._node(name)
        self.failed.add(name)

        def fail(node: JsonObject) -> None:
            self._set_ready(
                node, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            )
            taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != _UNREACHABLE]
            stamp = rfc3339()
            taints.append({"key": _UNREACHABLE, "effect": "NoSchedule", "timeAdded": stamp})
            taints.append({"key": _UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp})
            node["spec"]["taints"] = taints

        self.registry.mutate(self.nodes, "", name, fail)
        self.cluster.kubelet.node_failed(name)

    def recover(self, name: str) -> None:
        self._node(name)
        self.failed.discard(name)

        def recover(node: JsonObject) -> None:
            self._set_ready(node, "True", "KubeletReady", "kubelet is posting ready status")
            taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != _UNREACHABLE]
            if taints:
                node["spec"]["taints"] = taints
            else:
                node["spec"].pop("taints", None)

        self.registry.mutate(self.nodes, "", name, recover)
        self._renew([name])
        self.cluster.kubelet.node_recovered(name)

    def cordon(self, name: str, *, unschedulable: bool = True) -> None:
        self._node(name)

        def cordon(node: JsonObject) -> None:
            taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != _UNSCHEDULABLE]
            if unschedulable:
                node["spec"]["unschedulable"] = True
                taints.append(
                    {"key": _UNSCHEDULABLE, "effect": "NoSchedule", "timeAdded": rfc3339()}
                )
            else:
                node["spec"].pop("unschedulable", None)
            if taints:
                node["spec"]["taints"] = taints
            else:
                node["spec"].pop("taints", None)

        self.registry.mutate(self.nodes, "", name, cordon)
