"""The kubelet of every node of one cluster: hands bound pods to a runtime.

Pods bound to a node (spec.nodeName) are run by the cluster's default runtime or the one named
by the pod annotation `kubesim.dev/runtime` (`process` or `simulated`). The kubelet assigns
pod IPs, knows node IPs, enforces spec.activeDeadlineSeconds (Failed, DeadlineExceeded), and
on a node failure marks that node's pods Failed (reason NodeLost, condition
DisruptionTarget) after stopping them. Logs of deleted pods are dropped.
Started and stopped by `kubesim.cluster`; told about node faults by
`kubesim.controllers.nodes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kubesim.apiserver.registry import DeleteOptions
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.errors import KubeSimError
from kubesim.kubelet.process import ProcessRuntime
from kubesim.kubelet.simulated import SimulatedRuntime
from kubesim.objects import JsonObject, rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["RUNTIME_ANNOTATION", "Kubelet", "Runtime"]

RUNTIME_ANNOTATION = "kubesim.dev/runtime"


class Runtime(Protocol):
    """What the kubelet needs from a pod runtime."""

    def observe(self, pod: JsonObject) -> None:
        """Called on every change of a pod bound to a live node; must be cheap."""

    def forget(self, uid: str) -> None:
        """The pod is gone from the API: drop all state, stop anything still running."""

    def stop(self, uid: str) -> None:
        """Stop the pod's containers now (its node failed)."""

    async def shutdown(self) -> None:
        """Stop everything (cluster shutdown)."""


class Kubelet:
    name = "kubelet"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.registry = cluster.registry
        self.pods = cluster.types.core("pods")
        self.nodes = cluster.types.core("nodes")
        self.runtimes: dict[str, Runtime] = {
            "simulated": SimulatedRuntime(self),
            "process": ProcessRuntime(self),
        }
        self._runtime_of: dict[str, Runtime] = {}
        self._pods_on_node: dict[str, set[tuple[str, str]]] = {}
        self._ip_counter = itertools.count(1)
        self._ips: dict[str, str] = {}
        self._deadlines: dict[str, asyncio.TimerHandle] = {}
        cluster.store.subscribe(self.pods, self._on_pod)

    def _on_pod(self, event: StoreEvent) -> None:
        pod = event.obj
        meta = pod["metadata"]
        uid = meta["uid"]
        node = pod.get("spec", {}).get("nodeName")
        if event.type is EventType.DELETED:
            timer = self._deadlines.pop(uid, None)
            if timer is not None:
                timer.cancel()
            runtime = self._runtime_of.pop(uid, None)
            if runtime is not None:
                runtime.forget(uid)
            self._ips.pop(uid, None)
            if node:
                self._pods_on_node.get(node, set()).discard((meta["namespace"], meta["name"]))
            self.cluster.logs.forget(uid)
            return
        if not node or node in self.cluster.nodes.failed:
            return
        runtime = self._runtime_of.get(uid)
        if runtime is None:
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") != 0:
                    # Nothing runs any more (e.g. it was stopped with its node): finish deleting.
                    asyncio.get_running_loop().call_soon(
                        self._confirm_deletion, meta["namespace"], meta["name"]
                    )
                return
            if self.registry.find(self.nodes, "", node) is None:
                return  # no such node, so no kubelet: the pod stays Pending, as on a real cluster
            wanted = (meta.get("annotations") or {}).get(
                RUNTIME_ANNOTATION
            ) or self.cluster.config.runtime
            runtime = self.runtimes.get(wanted, self.runtimes["simulated"])
            self._runtime_of[uid] = runtime
            self._pods_on_node.setdefault(node, set()).add((meta["namespace"], meta["name"]))
            deadline = pod.get("spec", {}).get("activeDeadlineSeconds")
            if deadline is not None:
                self._deadlines[uid] = asyncio.get_running_loop().call_later(
                    float(deadline), self._deadline_passed, meta["namespace"], meta["name"], uid
                )
        runtime.observe(pod)

    def _confirm_deletion(self, namespace: str, name: str) -> None:
        with contextlib.suppress(KubeSimError):
            self.registry.delete(self.pods, namespace, name, DeleteOptions(grace_period_seconds=0))

    def node_recovered(self, node_name: str) -> None:
        """A node is back: its kubelet finishes the deletions that were waiting for it."""
        for namespace, name in list(self._pods_on_node.get(node_name, ())):
            pod = self.registry.find(self.pods, namespace, name)
            if pod is not None and pod["metadata"].get("deletionTimestamp"):
                self._confirm_deletion(namespace, name)

    def claims_root(self) -> Path:
        """Where the process runtime keeps PersistentVolumeClaims' data."""
        process = self.runtimes["process"]
        assert isinstance(process, ProcessRuntime)
        return process.claims_root()

    def pod_ip(self, uid: str) -> str:
        ip = self._ips.get(uid)
        if ip is None:
            number = next(self._ip_counter)
            ip = self._ips[uid] = f"10.244.{(number // 250) % 250}.{number % 250 + 1}"
        return ip

    def node_ip(self, node_name: str) -> str:
        node = self.registry.find(self.nodes, "", node_name)
        for address in (node or {}).get("status", {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address.get("address"))
        return "127.0.0.1"

    def node(self, node_name: str) -> JsonObject | None:
        return self.registry.find(self.nodes, "", node_name)

    def _deadline_passed(self, namespace: str, name: str, uid: str) -> None:
        """spec.activeDeadlineSeconds: the kubelet kills the pod and reports it Failed."""
        self._deadlines.pop(uid, None)
        pod = self.registry.find(self.pods, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return
        runtime = self._runtime_of.pop(uid, None)
        if runtime is not None:
            runtime.stop(uid)

        def expire(new: JsonObject) -> None:
            status = new.setdefault("status", {})
            status["phase"] = "Failed"
            status["reason"] = "DeadlineExceeded"
            status["message"] = "Pod was active on the node longer than the specified deadline"
            for condition in status.get("conditions") or []:
                if condition.get("type") in ("Ready", "ContainersReady"):
                    condition["status"] = "False"

        self.registry.mutate(self.pods, namespace, name, expire)

    def node_failed(self, node_name: str) -> None:
        """Stop the node's pods and report them Failed, as the node lifecycle would."""
        stamp = rfc3339()
        for namespace, name in list(self._pods_on_node.get(node_name, ())):
            pod = self.registry.find(self.pods, namespace, name)
            if pod is None:
                continue
            runtime = self._runtime_of.pop(pod["metadata"]["uid"], None)
            if runtime is not None:
                runtime.stop(pod["metadata"]["uid"])
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue

            def lose(new: JsonObject, name: str = name) -> None:
                status = new.setdefault("status", {})
                status["phase"] = "Failed"
                status["reason"] = "NodeLost"
                status["message"] = f"Node {node_name} which was running pod {name} is unresponsive"
                conditions = [
                    c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
                ]
                conditions.append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "DeletionByTaintManager",
                        "message": "Taint manager: deleting due to NoExecute taint",
                        "lastTransitionTime": stamp,
                    }
                )
                for condition in conditions:
                    if condition.get("type") in ("Ready", "ContainersReady"):
                        condition["status"] = "False"
                status["conditions"] = conditions

            self.registry.mutate(self.pods, namespace, name, lose)

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def shutdown(self) -> None:
        for timer in self._deadlines.values():
            timer.cancel()
        self._deadlines.clear()
        for runtime in self.runtimes.values():
            await runtime.shutdown()
