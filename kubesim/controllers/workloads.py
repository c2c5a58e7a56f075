"""The apps/v1 controllers: Deployment -> ReplicaSet -> Pod, as kube-controller-manager runs them.

`ReplicaSetController` keeps as many active pods (not terminal, not deleting) as a ReplicaSet
asks for: it creates them from the template (`generateName` `<rs>-`, the template's labels,
a controller ownerReference) and, when scaling down, deletes the least useful first
(unscheduled, then pending, then not ready, then the newest), and reports replicas,
fullyLabeledReplicas, readyReplicas, availableReplicas (ready for minReadySeconds) and
observedGeneration.

`DeploymentController` owns ReplicaSets named `<deployment>-<pod-template-hash>` (the hash of
the pod template and collisionCount, encoded as upstream's `rand.SafeEncodeString`), each with
the `pod-template-hash` label in its selector and template and the revision annotations, and
rolls them over with the Recreate strategy (old ReplicaSets to zero, then — once none of their
pods runs — the new one up) or RollingUpdate (`rolling_step`: maxSurge rounded up,
maxUnavailable rounded down, as upstream's fenceposts). `spec.paused` stops rollouts but not
scaling. Status carries what kubectl reads: observedGeneration, replicas, updatedReplicas,
readyReplicas, availableReplicas, unavailableReplicas and the Available / Progressing
conditions with upstream's reasons and messages (no ProgressDeadlineExceeded: kubesim never
times a rollout out). Old ReplicaSets beyond revisionHistoryLimit are deleted; events
`ScalingReplicaSet` are recorded. Deleting a Deployment cascades through the garbage
collector (`kubesim.controllers.gc`) by the ownerReferences set here.

Readiness is the kubelet's: a pod is Ready when all its containers run (kubesim runs no
readiness probes). Both controllers are started by `kubesim.cluster`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.selectors import selector_from_object
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.errors import KubeSimError
from kubesim.objects import JsonObject, clone, now, parse_time, rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = [
    "HASH_LABEL",
    "REVISION_ANNOTATION",
    "DeploymentController",
    "ReplicaSetController",
    "RollingStep",
    "pod_template_hash",
    "rolling_step",
]

HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_ANNOTATION = "deployment.kubernetes.io/max-replicas"
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL = ("Succeeded", "Failed")

Key = tuple[str, str]


def _fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _normalized(value: Any) -> Any:
    """JSON as a Go decoder into typed structs sees it: nulls and empty objects or lists are
    the same as absent (kubectl rollout undo sends `creationTimestamp: null` back)."""
    if isinstance(value, dict):
        kept = {k: _normalized(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _template_without_hash(template: JsonObject) -> Any:
    normal = _normalized(template)
    labels = normal.get("metadata", {}).get("labels")
    if labels and HASH_LABEL in labels:
        labels = {k: v for k, v in labels.items() if k != HASH_LABEL}
        meta = {**normal["metadata"], "labels": labels}
        normal = {**normal, "metadata": {k: v for k, v in meta.items() if v}}
    return normal


def pod_template_hash(template: JsonObject, collision_count: int = 0) -> str:
    """A stable short name for a pod template, shaped like upstream's (fnv32a, safe-encoded)."""
    text = json.dumps(_normalized(template), sort_keys=True, separators=(",", ":"))
    if collision_count:
        text += str(collision_count)
    digits = str(_fnv32a(text.encode()))
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in digits)


def _controller_uid(obj: JsonObject, kind: str) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == kind:
            uid = ref.get("uid")
            return str(uid) if uid else None
    return None


def _owner_reference(owner: JsonObject) -> JsonObject:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _is_active(pod: JsonObject) -> bool:
    return pod.get("status", {}).get("phase") not in _TERMINAL and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _ready_since(pod: JsonObject) -> str | None:
    for condition in pod.get("status", {}).get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return str(condition.get("lastTransitionTime") or "") or rfc3339()
    return None


def _revision(replica_set: JsonObject) -> int:
    value = (replica_set["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0")
    return int(value) if str(value).isdigit() else 0


def _replicas(obj: JsonObject) -> int:
    return int(obj.get("spec", {}).get("replicas", 1))


def _status_count(obj: JsonObject, field: str) -> int:
    return int(obj.get("status", {}).get(field, 0) or 0)


# -- ReplicaSets --------------------------------------------------------------------------------


class ReplicaSetController(QueueController[Key]):
    """Keys: (namespace, name) of ReplicaSets."""

    name = "replicaset-controller"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.replica_sets = cluster.types.core("replicasets")
        self.pods = cluster.types.core("pods")
        self._pods_by_owner: dict[str, set[Key]] = {}
        # Told about a ReplicaSet whenever it was reconciled: the Deployment controller listens.
        self.on_pods_changed: list[Callable[[JsonObject], None]] = []
        self.store.subscribe(self.replica_sets, self._on_replica_set)
        self.store.subscribe(self.pods, self._on_pod)

    def _on_replica_set(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if event.type is EventType.DELETED:
            self._pods_by_owner.pop(meta["uid"], None)
            return
        self.enqueue((meta["namespace"], meta["name"]))

    def _on_pod(self, event: StoreEvent) -> None:
        owner = _controller_uid(event.obj, "ReplicaSet")
        if owner is None:
            return
        meta = event.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        pods = self._pods_by_owner.setdefault(owner, set())
        if event.type is EventType.DELETED:
            pods.discard(key)
        else:
            pods.add(key)
        for ref in meta.get("ownerReferences") or ():
            if ref.get("uid") == owner:
                self.enqueue((meta["namespace"], ref["name"]))

    def pods_of(self, replica_set: JsonObject) -> list[JsonObject]:
        """Every pod the ReplicaSet controls, terminating ones included."""
        keys = self._pods_by_owner.get(replica_set["metadata"]["uid"], ())
        return [pod for key in list(keys) if (pod := self.store.get(self.pods, *key)) is not None]

    def reconcile(self, key: Key) -> None:
        replica_set = self.store.get(self.replica_sets, *key)
        if replica_set is None or replica_set["metadata"].get("deletionTimestamp"):
            return
        pods = self.pods_of(replica_set)
        active = [pod for pod in pods if _is_active(pod)]
        wanted = _replicas(replica_set)
        if len(active) < wanted:
            for _ in range(wanted - len(active)):
                active.append(self._create_pod(replica_set))
        elif len(active) > wanted:
            for pod in sorted(active, key=_deletion_rank)[: len(active) - wanted]:
                with contextlib.suppress(KubeSimError):
                    self.registry.delete(self.pods, key[0], pod["metadata"]["name"])
                active.remove(pod)
        self._write_status(replica_set, active)
        for callback in self.on_pods_changed:
            callback(replica_set)

    def _create_pod(self, replica_set: JsonObject) -> JsonObject:
        template = replica_set.get("spec", {}).get("template") or {}
        template_meta = template.get("metadata") or {}
        meta: JsonObject = {
            "generateName": f"{replica_set['metadata']['name']}-",
            "labels": dict(template_meta.get("labels") or {}),
            "ownerReferences": [_owner_reference(replica_set)],
        }
        if template_meta.get("annotations"):
            meta["annotations"] = dict(template_meta["annotations"])
        pod = {"metadata": meta, "spec": clone(template.get("spec") or {})}
        return self.registry.create(self.pods, pod, namespace=replica_set["metadata"]["namespace"])

    def _write_status(self, replica_set: JsonObject, active: list[JsonObject]) -> None:
        min_ready = int(replica_set.get("spec", {}).get("minReadySeconds", 0) or 0)
        selector = selector_from_object(replica_set.get("spec", {}).get("selector"))
        template_labels = (
            replica_set.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}
        )
        ready = available = labelled = 0
        moment = now()
        for pod in active:
            labels = pod["metadata"].get("labels") or {}
            if selector.matches(labels) and all(
                labels.get(k) == v for k, v in template_labels.items()
            ):
                labelled += 1
            since = _ready_since(pod)
            if since is None:
                continue
            ready += 1
            waited = (moment - parse_time(since)).total_seconds()
            if waited >= min_ready:
                available += 1
            else:
                meta = replica_set["metadata"]
                self.enqueue_after((meta["namespace"], meta["name"]), min_ready - waited)
        status: JsonObject = {
            "replicas": len(active),
            "fullyLabeledReplicas": labelled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": replica_set["metadata"].get("generation", 1),
        }
        status = {k: v for k, v in status.items() if v or k in ("replicas", "observedGeneration")}
        if replica_set.get("status") == status:
            return

        def write(new: JsonObject) -> None:
            new["status"] = status

        meta = replica_set["metadata"]
        self.registry.mutate(self.replica_sets, meta["namespace"], meta["name"], write, touches=())


def _deletion_rank(pod: JsonObject) -> tuple[int, int, int, float]:
    """Sort key: the pods a scale-down removes first (upstream's ActivePods ordering):
    unscheduled, then pending, then not ready, then the newest."""
    phase = pod.get("status", {}).get("phase")
    created = pod["metadata"].get("creationTimestamp")
    return (
        0 if not pod.get("spec", {}).get("nodeName") else 1,
        {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(phase), 0),
        0 if _ready_since(pod) is None else 1,
        -parse_time(created).timestamp() if created else 0.0,
    )


# -- Deployments --------------------------------------------------------------------------------


def _resolve(value: Any, total: int, *, round_up: bool) -> int:
    """An IntOrString (3 or "25%") against `total`, as intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


@dataclass(frozen=True)
class RollingStep:
    """One RollingUpdate decision: the new ReplicaSet's size and each old one's."""

    new_replicas: int
    old_replicas: tuple[int, ...]


def fenceposts(deployment: JsonObject) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) resolved against spec.replicas; never both zero."""
    replicas = _replicas(deployment)
    strategy = deployment.get("spec", {}).get("strategy") or {}
    if strategy.get("type") != "RollingUpdate":
        return 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rolling_step(
    replicas: int,
    max_surge: int,
    max_unavailable: int,
    new: tuple[int, int],
    old: Iterable[tuple[int, int]],
) -> RollingStep:
    """Upstream's rolloutRolling for one pass. `new` and each of `old` (oldest first) are
    (spec.replicas, status.availableReplicas) of a ReplicaSet."""
    old_sizes = [size for size, _ in old]
    old_available = [ready for _, ready in old]
    new_size, new_available = new
    # Scale up the new ReplicaSet within replicas + maxSurge.
    total = new_size + sum(old_sizes)
    if new_size < replicas and total < replicas + max_surge:
        new_size += min(replicas + max_surge - total, replicas - new_size)
    elif new_size > replicas:
        new_size = replicas
    # Scale down old ReplicaSets, keeping replicas - maxUnavailable available.
    min_available = replicas - max_unavailable
    new_unavailable = new_size - new_available
    budget = new_size + sum(old_sizes) - min_available - new_unavailable
    # First the old pods that are not available anyway (they count against nothing).
    for index, size in enumerate(old_sizes):
        if budget <= 0:
            break
        unhealthy = min(size - old_available[index], budget)
        if unhealthy > 0:
            old_sizes[index] -= unhealthy
            old_available[index] = min(old_available[index], old_sizes[index])
            budget -= unhealthy
    available = new_available + sum(old_available)
    budget = min(budget, available - min_available)
    for index, size in enumerate(old_sizes):
        if budget <= 0:
            break
        cut = min(size, budget)
        old_sizes[index] -= cut
        budget -= cut
    return RollingStep(new_size, tuple(old_sizes))


def _condition(status: JsonObject, kind: str) -> JsonObject | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == kind:
            found: JsonObject = condition
            return found
    return None


def _set_condition(status: JsonObject, kind: str, value: str, reason: str, message: str) -> None:
    stamp = rfc3339()
    existing = _condition(status, kind)
    if existing is not None:
        if (existing.get("status"), existing.get("reason"), existing.get("message")) == (
            value,
            reason,
            message,
        ):
            return
        if existing.get("status") != value:
            existing["lastTransitionTime"] = stamp
        existing.update(
            {"status": value, "reason": reason, "message": message, "lastUpdateTime": stamp}
        )
        return
    status.setdefault("conditions", []).append(
        {
            "type": kind,
            "status": value,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }
    )


class DeploymentController(QueueController[Key]):
    """Keys: (namespace, name) of Deployments."""

    name = "deployment-controller"

    def __init__(self, cluster: Cluster, replica_sets: ReplicaSetController) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.deployments = cluster.types.core("deployments")
        self.replica_set_type = cluster.types.core("replicasets")
        self.replica_sets = replica_sets
        self._owned: dict[str, set[Key]] = {}
        self.store.subscribe(self.deployments, self._on_deployment)
        self.store.subscribe(self.replica_set_type, self._on_replica_set)
        replica_sets.on_pods_changed.append(self._replica_set_pods_changed)

    def _on_deployment(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if event.type is EventType.DELETED:
            self._owned.pop(meta["uid"], None)
            return
        self.enqueue((meta["namespace"], meta["name"]))

    def _on_replica_set(self, event: StoreEvent) -> None:
        owner = _controller_uid(event.obj, "Deployment")
        if owner is None:
            return
        meta = event.obj["metadata"]
        owned = self._owned.setdefault(owner, set())
        if event.type is EventType.DELETED:
            owned.discard((meta["namespace"], meta["name"]))
        else:
            owned.add((meta["namespace"], meta["name"]))
        self._replica_set_pods_changed(event.obj)

    def _replica_set_pods_changed(self, replica_set: JsonObject) -> None:
        for ref in replica_set["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "Deployment":
                self.enqueue((replica_set["metadata"]["namespace"], ref["name"]))

    def _owned_replica_sets(self, deployment: JsonObject) -> list[JsonObject]:
        keys = self._owned.get(deployment["metadata"]["uid"], ())
        found = [rs for key in list(keys) if (rs := self.store.get(self.replica_set_type, *key))]
        return sorted(found, key=lambda rs: (rs["metadata"]["creationTimestamp"], _revision(rs)))

    def reconcile(self, key: Key) -> None:
        deployment = self.store.get(self.deployments, *key)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return
        spec = deployment.get("spec", {})
        template = spec.get("template") or {}
        collisions = int(deployment.get("status", {}).get("collisionCount", 0) or 0)
        template_hash = pod_template_hash(template, collisions)
        owned = self._owned_replica_sets(deployment)
        # Like upstream's EqualIgnoreHash: the ReplicaSet whose template is the Deployment's.
        wanted = _template_without_hash(template)
        new = next(
            (
                rs
                for rs in reversed(owned)
                if _template_without_hash(rs.get("spec", {}).get("template") or {}) == wanted
            ),
            None,
        )
        old = [rs for rs in owned if rs is not new]
        paused = bool(spec.get("paused"))
        created = False
        replicas = _replicas(deployment)
        if new is None and not paused:
            new = self._create_replica_set(deployment, template_hash, old)
            created = True
        elif new is not None and not paused:
            new = self._bump_revision(deployment, new, old)
        if paused:
            self._scale_paused(deployment, new, old)
        elif spec.get("strategy", {}).get("type") == "Recreate":
            self._recreate(deployment, new, old)
        else:
            surge, unavailable = fenceposts(deployment)
            step = rolling_step(
                replicas,
                surge,
                unavailable,
                (_replicas(new), _status_count(new, "availableReplicas")) if new else (0, 0),
                [(_replicas(rs), _status_count(rs, "availableReplicas")) for rs in old],
            )
            if new is not None:
                self._scale(deployment, new, step.new_replicas)
            for rs, size in zip(old, step.old_replicas, strict=True):
                self._scale(deployment, rs, size)
        self._clean_history(deployment, old)
        self._write_status(deployment, new, old, created=created)

    # -- ReplicaSets ----------------------------------------------------------------------

    def _create_replica_set(
        self, deployment: JsonObject, template_hash: str, old: list[JsonObject]
    ) -> JsonObject:
        meta = deployment["metadata"]
        spec = deployment.get("spec", {})
        template = clone(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = template_hash
        selector = clone(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = template_hash
        labels = dict(template["metadata"]["labels"])
        surge, _ = fenceposts(deployment)
        revision = max((_revision(rs) for rs in old), default=0) + 1
        body: JsonObject = {
            "metadata": {
                "name": f"{meta['name']}-{template_hash}",
                "labels": labels,
                "annotations": {
                    DESIRED_ANNOTATION: str(_replicas(deployment)),
                    MAX_ANNOTATION: str(_replicas(deployment) + surge),
                    REVISION_ANNOTATION: str(revision),
                },
                "ownerReferences": [_owner_reference(deployment)],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        return self.registry.create(
            self.replica_set_type, body, namespace=meta["namespace"], validate=False
        )

    def _bump_revision(
        self, deployment: JsonObject, new: JsonObject, old: list[JsonObject]
    ) -> JsonObject:
        """A rollback to an older template makes its ReplicaSet the newest revision."""
        wanted = max((_revision(rs) for rs in old), default=0) + 1
        if _revision(new) >= wanted:
            return new

        def bump(rs: JsonObject) -> None:
            rs["metadata"].setdefault("annotations", {})[REVISION_ANNOTATION] = str(wanted)

        meta = new["metadata"]
        return (
            self.registry.mutate(self.replica_set_type, meta["namespace"], meta["name"], bump)
            or new
        )

    def _scale(self, deployment: JsonObject, replica_set: JsonObject, size: int) -> None:
        before = _replicas(replica_set)
        desired = str(_replicas(deployment))
        annotations = replica_set["metadata"].get("annotations") or {}
        if before == size and annotations.get(DESIRED_ANNOTATION) == desired:
            return
        surge, _ = fenceposts(deployment)

        def resize(rs: JsonObject) -> None:
            rs.setdefault("spec", {})["replicas"] = size
            rs_annotations = rs["metadata"].setdefault("annotations", {})
            rs_annotations[DESIRED_ANNOTATION] = desired
            rs_annotations[MAX_ANNOTATION] = str(_replicas(deployment) + surge)

        meta = replica_set["metadata"]
        self.registry.mutate(
            self.replica_set_type, meta["namespace"], meta["name"], resize, touches=("spec",)
        )
        if before != size:
            direction = "up" if size > before else "down"
            self.registry.record_event(
                deployment,
                type_="Normal",
                reason="ScalingReplicaSet",
                message=f"Scaled {direction} replica set {meta['name']} from {before} to {size}",
                component="deployment-controller",
            )

    def _recreate(
        self, deployment: JsonObject, new: JsonObject | None, old: list[JsonObject]
    ) -> None:
        for rs in old:
            self._scale(deployment, rs, 0)
        still_running = any(
            pod.get("status", {}).get("phase") not in _TERMINAL
            for rs in old
            for pod in self.replica_sets.pods_of(rs)
        )
        if new is not None and not still_running:
            self._scale(deployment, new, _replicas(deployment))

    def _scale_paused(
        self, deployment: JsonObject, new: JsonObject | None, old: list[JsonObject]
    ) -> None:
        """A paused Deployment still scales: the newest ReplicaSet takes the difference."""
        target = new or (old[-1] if old else None)
        if target is None:
            return
        others = sum(_replicas(rs) for rs in old if rs is not target)
        self._scale(deployment, target, max(0, _replicas(deployment) - others))

    def _clean_history(self, deployment: JsonObject, old: list[JsonObject]) -> None:
        limit = deployment.get("spec", {}).get("revisionHistoryLimit", 10)
        idle = [
            rs
            for rs in old
            if _replicas(rs) == 0
            and _status_count(rs, "replicas") == 0
            and not rs["metadata"].get("deletionTimestamp")
        ]
        idle.sort(key=_revision)
        for rs in idle[: max(0, len(idle) - int(limit))]:
            meta = rs["metadata"]
            with contextlib.suppress(KubeSimError):
                self.registry.delete(self.replica_set_type, meta["namespace"], meta["name"])

    # -- status ---------------------------------------------------------------------------

    def _write_status(
        self,
        deployment: JsonObject,
        new: JsonObject | None,
        old: list[JsonObject],
        *,
        created: bool,
    ) -> None:
        every = [*old, *([new] if new else [])]
        replicas = _replicas(deployment)
        status = clone(deployment.get("status") or {})
        total = sum(_status_count(rs, "replicas") for rs in every)
        updated = _status_count(new, "replicas") if new else 0
        available = sum(_status_count(rs, "availableReplicas") for rs in every)
        status.update(
            {
                "observedGeneration": deployment["metadata"].get("generation", 1),
                "replicas": total,
                "updatedReplicas": updated,
                "readyReplicas": sum(_status_count(rs, "readyReplicas") for rs in every),
                "availableReplicas": available,
            }
        )
        unavailable = max(0, max(replicas, total) - available)
        if unavailable:
            status["unavailableReplicas"] = unavailable
        else:
            status.pop("unavailableReplicas", None)
        for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            if not status[field]:
                del status[field]
        _, max_unavailable = fenceposts(deployment)
        if available >= replicas - max_unavailable:
            _set_condition(
                status, "Available", "True", "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )  # fmt: skip
        else:
            _set_condition(
                status, "Available", "False", "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )  # fmt: skip
        self._progressing(deployment, status, new, old, created=created)
        revision = str(_revision(new)) if new is not None else None
        annotations = deployment["metadata"].get("annotations") or {}
        stale_revision = revision is not None and annotations.get(REVISION_ANNOTATION) != revision
        if status != deployment.get("status") or stale_revision:

            def write(obj: JsonObject) -> None:
                obj["status"] = status
                if revision is not None:
                    obj["metadata"].setdefault("annotations", {})[REVISION_ANNOTATION] = revision

            meta = deployment["metadata"]
            self.registry.mutate(
                self.deployments, meta["namespace"], meta["name"], write, touches=()
            )

    def _progressing(
        self,
        deployment: JsonObject,
        status: JsonObject,
        new: JsonObject | None,
        old: list[JsonObject],
        *,
        created: bool,
    ) -> None:
        if deployment.get("spec", {}).get("paused"):
            _set_condition(status, "Progressing", "Unknown", "DeploymentPaused",
                           "Deployment is paused")  # fmt: skip
            return
        current = _condition(status, "Progressing")
        if current is not None and current.get("reason") == "DeploymentPaused":
            _set_condition(status, "Progressing", "Unknown", "DeploymentResumed",
                           "Deployment is resumed")  # fmt: skip
        if new is None:
            return
        name = new["metadata"]["name"]
        replicas = _replicas(deployment)
        complete = (
            status.get("updatedReplicas", 0) == replicas
            and status.get("replicas", 0) == replicas
            and status.get("availableReplicas", 0) == replicas
            and all(_replicas(rs) == 0 for rs in old)
        )
        if complete:
            _set_condition(status, "Progressing", "True", "NewReplicaSetAvailable",
                           f'ReplicaSet "{name}" has successfully progressed.')  # fmt: skip
        elif created:
            _set_condition(status, "Progressing", "True", "NewReplicaSetCreated",
                           f'Created new replica set "{name}"')  # fmt: skip
        elif current is None:
            _set_condition(status, "Progressing", "True", "FoundNewReplicaSet",
                           f'Found new replica set "{name}"')  # fmt: skip
        else:
            _set_condition(status, "Progressing", "True", "ReplicaSetUpdated",
                           f'ReplicaSet "{name}" is progressing.')  # fmt: skip
