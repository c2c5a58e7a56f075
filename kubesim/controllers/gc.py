"""Garbage collection through ownerReferences, and the namespace lifecycle.

`GarbageCollector` indexes every object by uid and every dependent by its owners' uids (from
store events), then:
* Background: once an owner is gone, deletes dependents none of whose owners exist;
* Foreground: an owner carrying the `foregroundDeletion` finalizer has its dependents deleted,
  and loses the finalizer when none is left;
* Orphan: an owner carrying the `orphan` finalizer has itself removed from its dependents'
  ownerReferences, then loses the finalizer.

`NamespaceController` gives each new namespace its `default` ServiceAccount and its
`kube-root-ca.crt` ConfigMap (the CA of the cluster's HTTPS port, as the root-CA publisher
does; pods' service-account volumes read it) and, when a
namespace is Terminating, waits `ClusterConfig.namespace_deletion_delay` (as the real one
spends discovering resource types), deletes everything in it and then releases the
`kubernetes` finalizer so the namespace disappears. Both are started by `kubesim.cluster`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from kubesim.apiserver.registry import (
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    DeleteOptions,
)
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.errors import KubeSimError
from kubesim.objects import JsonObject
from kubesim.resources import ResourceType

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["ROOT_CA_CONFIGMAP", "GarbageCollector", "NamespaceController"]

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"

ObjectRef = tuple[tuple[str, str], str, str]  # (resource key, namespace, name)
_BACKGROUND = DeleteOptions(propagation_policy="Background")


class GarbageCollector(QueueController[tuple[str, str]]):
    """Keys: ("owner-gone", uid) and ("finalize", uid)."""

    name = "garbage-collector"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._by_uid: dict[str, ObjectRef] = {}
        self._dependents: dict[str, set[ObjectRef]] = {}
        self.store.subscribe(None, self._on_event)

    @staticmethod
    def _owner_uids(obj: JsonObject | None) -> set[str]:
        if obj is None:
            return set()
        return {ref["uid"] for ref in obj["metadata"].get("ownerReferences") or [] if "uid" in ref}

    def _on_event(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        uid = meta.get("uid")
        if uid is None:
            return
        resource = event.resource
        self._types[resource.key] = resource
        ref: ObjectRef = (resource.key, meta.get("namespace", ""), meta["name"])
        owners_now = self._owner_uids(event.obj) if event.type is not EventType.DELETED else set()
        owners_before = self._owner_uids(event.old)
        for owner in owners_before - owners_now:
            dependents = self._dependents.get(owner)
            if dependents is not None:
                dependents.discard(ref)
                if not dependents:
                    del self._dependents[owner]
        for owner in owners_now - owners_before:
            self._dependents.setdefault(owner, set()).add(ref)
        if event.type is EventType.DELETED:
            self._by_uid.pop(uid, None)
            if uid in self._dependents:
                self.enqueue(("owner-gone", uid))
            for owner in owners_before:
                if owner in self._by_uid:
                    self.enqueue(("finalize", owner))
            return
        self._by_uid[uid] = ref
        finalizers = meta.get("finalizers") or ()
        if meta.get("deletionTimestamp") and (
            ORPHAN_FINALIZER in finalizers or FOREGROUND_FINALIZER in finalizers
        ):
            self.enqueue(("finalize", uid))
        if (
            event.type is EventType.ADDED
            and owners_now
            and not any(o in self._by_uid for o in owners_now)
        ):
            for owner in owners_now:
                self.enqueue(("owner-gone", owner))

    def _fetch(self, ref: ObjectRef) -> tuple[ResourceType, JsonObject] | None:
        resource = self._types.get(ref[0])
        if resource is None:
            return None
        obj = self.store.get(resource, ref[1], ref[2])
        return (resource, obj) if obj is not None else None

    def _delete(self, resource: ResourceType, obj: JsonObject) -> None:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return
        # Already gone or changed underneath: the next event re-evaluates.
        with contextlib.suppress(KubeSimError):
            self.registry.delete(resource, meta.get("namespace", ""), meta["name"], _BACKGROUND)

    def reconcile(self, key: tuple[str, str]) -> None:
        action, uid = key
        if action == "owner-gone":
            if uid in self._by_uid:
                return
            for ref in list(self._dependents.get(uid, ())):
                found = self._fetch(ref)
                if found is None:
                    continue
                resource, obj = found
                if not any(o in self._by_uid for o in self._owner_uids(obj)):
                    self._delete(resource, obj)
            return
        owner_ref = self._by_uid.get(uid)
        if owner_ref is None:
            return
        found = self._fetch(owner_ref)
        if found is None:
            return
        owner_type, owner = found
        finalizers = owner["metadata"].get("finalizers") or []
        dependents = [d for d in (self._fetch(r) for r in list(self._dependents.get(uid, ()))) if d]
        if ORPHAN_FINALIZER in finalizers:
            for resource, obj in dependents:
                meta = obj["metadata"]

                def drop_owner(dependent: JsonObject) -> None:
                    refs = [
                        r
                        for r in dependent["metadata"].get("ownerReferences") or []
                        if r.get("uid") != uid
                    ]
                    if refs:
                        dependent["metadata"]["ownerReferences"] = refs
                    else:
                        dependent["metadata"].pop("ownerReferences", None)

                self.registry.mutate(resource, meta.get("namespace", ""), meta["name"], drop_owner)
            self._remove_finalizer(owner_type, owner, ORPHAN_FINALIZER)
        elif FOREGROUND_FINALIZER in finalizers:
            if dependents:
                for resource, obj in dependents:
                    self._delete(resource, obj)
                return
            self._remove_finalizer(owner_type, owner, FOREGROUND_FINALIZER)

    def _remove_finalizer(self, resource: ResourceType, obj: JsonObject, finalizer: str) -> None:
        meta = obj["metadata"]

        def remove(new: JsonObject) -> None:
            new["metadata"]["finalizers"] = [
                f for f in new["metadata"].get("finalizers") or [] if f != finalizer
            ]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]

        self.registry.mutate(resource, meta.get("namespace", ""), meta["name"], remove)


class NamespaceController(QueueController[str]):
    """Default ServiceAccounts for new namespaces; emptying and removing Terminating ones."""

    name = "namespace-controller"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.namespaces = cluster.types.core("namespaces")
        self.service_accounts = cluster.types.core("serviceaccounts")
        self.config_maps = cluster.types.core("configmaps")
        self.cluster = cluster
        self.deletion_delay = cluster.config.namespace_deletion_delay
        self._emptying_from: dict[str, float] = {}
        self._terminating: set[str] = set()
        self.store.subscribe(None, self._on_event)

    def _on_event(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if event.resource is self.namespaces:
            if event.type is EventType.DELETED:
                self._terminating.discard(meta["name"])
                self._emptying_from.pop(meta["name"], None)
            elif event.type is EventType.ADDED or meta.get("deletionTimestamp"):
                self.enqueue(meta["name"])
        elif event.type is EventType.DELETED and meta.get("namespace") in self._terminating:
            self.enqueue(meta["namespace"])

    def reconcile(self, key: str) -> None:
        namespace = self.store.get(self.namespaces, "", key)
        if namespace is None:
            return
        if not namespace["metadata"].get("deletionTimestamp"):
            if self.store.get(self.service_accounts, key, "default") is None:
                self.registry.create(
                    self.service_accounts, {"metadata": {"name": "default"}}, namespace=key
                )
            tls = self.cluster.tls
            if tls is not None and self.store.get(self.config_maps, key, ROOT_CA_CONFIGMAP) is None:
                self.registry.create(
                    self.config_maps,
                    {
                        "metadata": {
                            "name": ROOT_CA_CONFIGMAP,
                            "annotations": {
                                "kubernetes.io/description": (
                                    "Contains a CA bundle that can be used to verify the "
                                    "kube-apiserver when using internal endpoints such as the "
                                    "internal service IP or kubernetes.default.svc. No other "
                                    "usage is guaranteed across distributions of Kubernetes "
                                    "clusters."
                                )
                            },
                        },
                        "data": {"ca.crt": tls.ca_pem},
                    },
                    namespace=key,
                )
            return
        if key not in self._terminating:
            # kube-controller-manager's namespace controller first discovers every resource
            # type, which takes it a moment; `kubectl delete -k` of a namespace and its contents
            # relies on the contents still being there when it deletes them next.
            self._terminating.add(key)
            loop = asyncio.get_running_loop()
            self._emptying_from[key] = loop.time() + self.deletion_delay
            self.enqueue_after(key, self.deletion_delay)
            return
        if asyncio.get_running_loop().time() < self._emptying_from.get(key, 0.0):
            return  # a dependent went away meanwhile; the timer comes back for the rest
        remaining = 0
        for bucket in self.store.buckets():
            resource = bucket.resource
            if not resource.namespaced:
                continue
            for obj in list(bucket.iter_objects(key)):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    with contextlib.suppress(KubeSimError):
                        self.registry.delete(resource, key, obj["metadata"]["name"], _BACKGROUND)
        if remaining:
            return

        def release(new: JsonObject) -> None:
            new.setdefault("spec", {})["finalizers"] = []

        self.registry.mutate(self.namespaces, "", key, release)
