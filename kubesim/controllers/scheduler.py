"""The scheduler: binds pending pods to nodes.

Filters mirror kube-scheduler's basic plugins: node readiness and cordoning, taints vs
tolerations (NoSchedule / NoExecute), nodeSelector, required node affinity (In, NotIn,
Exists, DoesNotExist, Gt, Lt, matchFields on metadata.name), and resource fit (requests,
or limits where requests are absent, against allocatable minus what bound non-terminal pods
use, including the pod count and extended resources such as nvidia.com/gpu). The first
fitting node from a rotating start wins, which spreads pods and keeps 5,000-node clusters
fast. A pod that fits nowhere gets PodScheduled=False (reason Unschedulable, kube-scheduler's
"0/N nodes are available: ..." message) and a FailedScheduling event, and is retried when
capacity frees or nodes change. A pod with scheduling gates is never bound: it gets
PodScheduled=False (reason SchedulingGated) and is picked up when its last gate is removed
(an update of its spec). Pods with a preset nodeName or another schedulerName are
left alone. Started by `kubesim.cluster`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from api.quantity import QuantityError, parse_quantity
from kubesim.apiserver.pods import bind_pod
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.objects import JsonObject, labels_of, rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["Scheduler", "pod_requests"]

DEFAULT_SCHEDULER = "default-scheduler"
_TERMINAL = ("Succeeded", "Failed")
_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@lru_cache(maxsize=4096)
def _milli(text: str) -> int:
    try:
        return parse_quantity(text).milli()
    except QuantityError:
        return 0


def _amounts(resources: dict[str, Any] | None) -> dict[str, int]:
    return {name: _milli(str(value)) for name, value in (resources or {}).items()}


def pod_requests(pod: JsonObject) -> dict[str, int]:
    """Effective requests in milli-units: containers summed, init containers as a maximum."""
    spec = pod.get("spec", {})
    total: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        total.update(
            _amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})
        )
    for container in spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        amounts = _amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})
        for name, value in amounts.items():
            total[name] = max(total[name], value)
    total["pods"] = 1000
    return dict(total)


@dataclass
class _Node:
    name: str
    obj: JsonObject
    allocatable: dict[str, int]
    used: Counter[str] = field(default_factory=Counter)

    @property
    def ready(self) -> bool:
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in self.obj.get("status", {}).get("conditions") or []
        )


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator", "Equal")
        if not toleration.get("key"):
            if operator == "Exists":
                return True
            continue
        if toleration["key"] != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key = expression.get("key", "")
    operator = expression.get("operator")
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            actual, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _affinity_matches(pod: JsonObject, node: _Node) -> bool:
    spec = pod.get("spec", {})
    labels = labels_of(node.obj)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    for term in terms:
        expressions = term.get("matchExpressions") or []
        field_expressions = term.get("matchFields") or []
        if not expressions and not field_expressions:
            continue
        if all(_expression_matches(e, labels) for e in expressions) and all(
            _expression_matches(e, fields) for e in field_expressions
        ):
            return True
    return False


class Scheduler(QueueController[tuple[str, str]]):
    name = "default-scheduler"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.pods = cluster.types.core("pods")
        self.nodes_type = cluster.types.core("nodes")
        self._nodes: dict[str, _Node] = {}
        self._order: list[str] = []
        self._cursor = 0
        self._charged: dict[str, tuple[str, dict[str, int]]] = {}
        self._parked: dict[tuple[str, str], str] = {}  # pod key -> last unschedulable message
        self._unpark_scheduled = False
        self.store.subscribe(self.pods, self._on_pod)
        self.store.subscribe(self.nodes_type, self._on_node)

    # -- caches -------------------------------------------------------------------------------

    def _on_node(self, event: StoreEvent) -> None:
        name = event.obj["metadata"]["name"]
        if event.type is EventType.DELETED:
            self._nodes.pop(name, None)
            self._order = [n for n in self._order if n != name]
        else:
            node = self._nodes.get(name)
            allocatable = _amounts(event.obj.get("status", {}).get("allocatable"))
            if node is None:
                self._nodes[name] = _Node(name, event.obj, allocatable)
                self._order.append(name)
            else:
                node.obj = event.obj
                node.allocatable = allocatable
        self._unpark_all()

    def _on_pod(self, event: StoreEvent) -> None:
        pod = event.obj
        meta = pod["metadata"]
        uid = meta["uid"]
        key = (meta["namespace"], meta["name"])
        spec = pod.get("spec", {})
        node_name = spec.get("nodeName")
        done = event.type is EventType.DELETED or pod.get("status", {}).get("phase") in _TERMINAL
        if done:
            self._parked.pop(key, None)
            charged = self._charged.pop(uid, None)
            if charged is not None:
                node = self._nodes.get(charged[0])
                if node is not None:
                    node.used.subtract(charged[1])
                self._unpark_all()
            return
        if node_name:
            if uid not in self._charged:
                self._charge(uid, node_name, pod_requests(pod))
            return
        if spec.get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
            return
        if meta.get("deletionTimestamp"):
            return
        if key not in self._parked:
            self.enqueue(key)

    def _charge(self, uid: str, node_name: str, requests: dict[str, int]) -> None:
        node = self._nodes.get(node_name)
        if node is not None:
            node.used.update(requests)
        self._charged[uid] = (node_name, requests)

    def _unpark_all(self) -> None:
        """Retry parked pods soon; coalesced so a burst of frees costs one pass."""
        if not self._parked or self._unpark_scheduled:
            return
        self._unpark_scheduled = True
        asyncio.get_running_loop().call_later(0.02, self._unpark_now)

    def _unpark_now(self) -> None:
        self._unpark_scheduled = False
        for key in self._parked:
            self.enqueue(key)

    # -- scheduling ---------------------------------------------------------------------------

    def _rejection(self, pod: JsonObject, requests: dict[str, int], node: _Node) -> str | None:
        """Why `pod` cannot go to `node` (None when it fits)."""
        if not node.ready:
            return "node(s) were not ready"
        spec_node = node.obj.get("spec", {})
        if spec_node.get("unschedulable"):
            return "node(s) were unschedulable"
        tolerations = pod.get("spec", {}).get("tolerations") or []
        for taint in spec_node.get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
                tolerations, taint
            ):
                if taint.get("key") == "node.kubernetes.io/unschedulable":
                    return "node(s) were unschedulable"
                taint_text = f"{taint.get('key')}: {taint.get('value', '')}"
                return f"node(s) had untolerated taint {{{taint_text}}}"
        if not _affinity_matches(pod, node):
            return "node(s) didn't match Pod's node affinity/selector"
        for name, amount in requests.items():
            if amount and node.used.get(name, 0) + amount > node.allocatable.get(name, 0):
                return "Too many pods" if name == "pods" else f"Insufficient {name}"
        return None

    def reconcile(self, key: tuple[str, str]) -> None:
        pod = self.store.get(self.pods, *key)
        if (
            pod is None
            or pod.get("spec", {}).get("nodeName")
            or pod["metadata"].get("deletionTimestamp")
        ):
            self._parked.pop(key, None)
            return
        if pod["spec"].get("schedulingGates"):
            # Never bound while gated; the update that removes the last gate enqueues it.
            self._parked.pop(key, None)
            self._mark_pending(pod, "SchedulingGated", _GATED_MESSAGE)
            return
        requests = pod_requests(pod)
        count = len(self._order)
        for step in range(count):
            name = self._order[(self._cursor + step) % count]
            node = self._nodes[name]
            if self._rejection(pod, requests, node) is None:
                self._cursor = (self._cursor + step + 1) % max(count, 1)
                self._parked.pop(key, None)
                self._charge(pod["metadata"]["uid"], name, requests)
                bound = bind_pod(self.registry, pod, name)
                if bound is not None:
                    self.registry.record_event(
                        bound,
                        type_="Normal",
                        reason="Scheduled",
                        message=f"Successfully assigned {key[0]}/{key[1]} to {name}",
                        component=DEFAULT_SCHEDULER,
                    )
                return
        reasons = Counter(
            reason
            for node in self._nodes.values()
            if (reason := self._rejection(pod, requests, node)) is not None
        )
        # kube-scheduler sorts the formatted "<count> <reason>" strings.
        detail = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
        reasons_text = f"{detail}. " if detail else ""
        message = (
            f"0/{count} nodes are available: {reasons_text}preemption: 0/{count} nodes are "
            f"available: {count} Preemption is not helpful for scheduling."
        )
        if self._parked.get(key) == message:
            return
        self._parked[key] = message
        self._mark_pending(pod, "Unschedulable", message)

    def _mark_pending(self, pod: JsonObject, reason: str, message: str) -> None:
        """PodScheduled=False with `reason`; a FailedScheduling event when Unschedulable
        (kube-scheduler records none for a gated pod)."""
        for condition in pod.get("status", {}).get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("reason") == reason
                and condition.get("message") == message
            ):
                return
        stamp = rfc3339()

        def mark(new: JsonObject) -> None:
            status = new.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": stamp,
                }
            )
            status["conditions"] = conditions

        meta = pod["metadata"]
        updated = self.registry.mutate(
            self.pods, meta["namespace"], meta["name"], mark, touches=("status",)
        )
        if updated is not None and reason == "Unschedulable":
            self.registry.record_event(
                updated,
                type_="Warning",
                reason="FailedScheduling",
                message=message,
                component=DEFAULT_SCHEDULER,
            )
