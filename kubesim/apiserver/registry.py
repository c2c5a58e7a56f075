"""Kubernetes object semantics on top of the raw store: kubesim's `pkg/registry`.

`ObjectRegistry` is the only writer of the `Store`. It implements what a real apiserver does on
create (namespace checks, generateName, uid, creationTimestamp, generation, defaulting, the
mutating admission plugins registered in `admission` (e.g. the ServiceAccount plugin of
`kubesim.apiserver.admission`), validation), update (optimistic concurrency with the exact
409 text, status subresource splitting, generation bumps only on spec changes, no-op updates
that keep the resourceVersion) and delete (preconditions, graceful pod deletion, finalizers
and deletionTimestamp, the orphan/foreground finalizers the garbage collector honours,
namespaces going Terminating).
The HTTP handlers and every in-process controller go through it, so both see one semantics.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.apiserver.defaults import apply_defaults
from kubesim.apiserver.pod_updates import pod_update_causes
from kubesim.apiserver.store import Store
from kubesim.apiserver.validation import validate_object
from kubesim.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
)
from kubesim.objects import JsonObject, clone, format_time, now, random_suffix, rfc3339
from kubesim.resources import ResourceRegistry, ResourceType

__all__ = ["DeleteOptions", "ObjectRegistry"]

ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
_IDENTITY_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


@dataclass(frozen=True)
class DeleteOptions:
    """The parts of metav1.DeleteOptions kubesim honours."""

    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    dry_run: bool = False

    @classmethod
    def from_body(cls, body: dict[str, Any] | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        preconditions = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = body.get("propagationPolicy", query.get("propagationPolicy"))
        if propagation is None and body.get("orphanDependents") is not None:
            propagation = "Orphan" if body["orphanDependents"] else "Background"
        dry_run = body.get("dryRun") or query.get("dryRun")
        return cls(
            grace_period_seconds=int(grace) if grace is not None else None,
            propagation_policy=propagation,
            precondition_uid=preconditions.get("uid"),
            precondition_resource_version=preconditions.get("resourceVersion"),
            dry_run=bool(dry_run),
        )


def _spec_of(obj: JsonObject) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class ObjectRegistry:
    """Create, update and delete with Kubernetes semantics, for one cluster."""

    def __init__(self, store: Store, types: ResourceRegistry) -> None:
        self.store = store
        self.types = types
        self.namespaces = types.core("namespaces")
        self.pods = types.core("pods")
        self.events = types.core("events")
        self._event_names: dict[tuple[str, str, str, str], str] = {}
        self.events_enabled = True
        # Mutating admission on create, after defaulting: (group, plural) -> plugins.
        self.admission: dict[tuple[str, str], list[Callable[[JsonObject], None]]] = {}

    # -- reads -------------------------------------------------------------------------------

    def get(self, resource: ResourceType, namespace: str, name: str) -> JsonObject:
        obj = self.store.get(resource, namespace if resource.namespaced else "", name)
        if obj is None:
            raise NotFoundError.of(resource.plural, resource.group, name)
        return obj

    def find(self, resource: ResourceType, namespace: str, name: str) -> JsonObject | None:
        return self.store.get(resource, namespace if resource.namespaced else "", name)

    # -- create ------------------------------------------------------------------------------

    def _check_namespace(self, resource: ResourceType, namespace: str, name: str) -> None:
        ns = self.store.get(self.namespaces, "", namespace)
        if ns is None:
            raise NotFoundError.of("namespaces", "", namespace)
        if ns.get("status", {}).get("phase") == "Terminating" and resource.plural != "events":
            raise ForbiddenError(
                f'{resource.plural} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )

    def create(
        self,
        resource: ResourceType,
        obj: JsonObject,
        *,
        namespace: str = "",
        dry_run: bool = False,
        validate: bool = True,
    ) -> JsonObject:
        """Create `obj` (which the registry takes ownership of) and return the stored object."""
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise BadRequestError("metadata must be an object")
        if resource.namespaced:
            body_namespace = meta.get("namespace")
            if body_namespace and namespace and body_namespace != namespace:
                raise BadRequestError(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            namespace = namespace or body_namespace or "default"
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(10):
                candidate = f"{meta['generateName']}{random_suffix()}"
                if self.store.get(resource, namespace, candidate) is None:
                    meta["name"] = candidate
                    break
        name = meta.get("name", "")
        if resource.namespaced:
            self._check_namespace(resource, namespace, name)
        obj["apiVersion"] = resource.api_version
        obj["kind"] = resource.kind
        for stale in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(stale, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339()
        meta["generation"] = 1
        if resource.has_status:
            obj["status"] = {}
        apply_defaults(resource.group, resource.plural, obj)
        for plugin in self.admission.get(resource.key, ()):
            plugin(obj)
        if validate:
            validate_object(obj, resource, creating=True)
        if self.store.get(resource, namespace, name) is not None:
            raise AlreadyExistsError.of(resource.plural, resource.group, name)
        if dry_run:
            return obj
        meta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(resource, obj, old=None)
        return obj

    # -- update ------------------------------------------------------------------------------

    def update(
        self,
        resource: ResourceType,
        obj: JsonObject,
        *,
        namespace: str,
        name: str,
        subresource: str | None = None,
        dry_run: bool = False,
        validate: bool = True,
    ) -> JsonObject:
        """PUT semantics: optimistic concurrency when the body carries a resourceVersion."""
        current = self.get(resource, namespace, name)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise BadRequestError("metadata must be an object")
        if meta.get("name", name) != name:
            raise BadRequestError(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise ConflictError.stale(resource.plural, resource.group, name)
        if subresource == "status":
            new = {**current, "status": obj.get("status", {})}
            # A private metadata copy: _commit stamps it, and `current` is shared and immutable.
            new["metadata"] = dict(current["metadata"])
        else:
            new = obj
            new["apiVersion"] = resource.api_version
            new["kind"] = resource.kind
            new_meta = dict(meta)
            new_meta["name"] = name
            if resource.namespaced:
                new_meta["namespace"] = current["metadata"]["namespace"]
            for field in (*_IDENTITY_FIELDS, "generation"):
                if field in current["metadata"]:
                    new_meta[field] = current["metadata"][field]
                else:
                    new_meta.pop(field, None)
            new["metadata"] = new_meta
            if resource.has_status:
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
        if validate:
            validate_object(new, resource, creating=False)
            if resource.plural == "pods" and resource.group == "" and subresource is None:
                causes = pod_update_causes(new, current)
                if causes:
                    raise InvalidError.of(resource.kind, resource.group, name, tuple(causes))
        return self._commit(resource, new, current, dry_run=dry_run)

    def mutate(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[JsonObject], None],
        *,
        touches: tuple[str, ...] | None = None,
    ) -> JsonObject | None:
        """Controller helper: copy, apply `change`, commit. None when the object is gone.

        `touches` names the top-level fields `change` modifies in place (metadata always
        may be: the commit writes to it). Only those are deep-copied; every other field is
        shared with the stored object, which is immutable, so `change` may replace such a
        field but never modify it. None copies everything. Controllers write pod and Job
        status thousands of times a second, and copying a whole pod spec for each write was
        a fifth of kubesim's time."""
        current = self.find(resource, namespace, name)
        if current is None:
            return None
        if touches is None:
            new = clone(current)
        else:
            new = dict(current)
            for key in ("metadata", *touches):
                if key in current:
                    new[key] = clone(current[key])
        change(new)
        return self._commit(resource, new, current, dry_run=False)

    def _commit(
        self, resource: ResourceType, new: JsonObject, current: JsonObject, *, dry_run: bool
    ) -> JsonObject:
        meta = new["metadata"]
        current_meta = current["metadata"]
        meta["resourceVersion"] = current_meta["resourceVersion"]
        if meta.get("generation") is not None and _spec_of(new) != _spec_of(current):
            meta["generation"] = current_meta.get("generation", 1) + 1
        if new == current:
            return current  # a no-op update keeps the resourceVersion, as on a real apiserver
        if dry_run:
            return new
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and self._may_vanish(resource, new)
        ):
            return self.store.remove(resource, new)
        meta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(resource, new, old=current)
        return new

    def _may_vanish(self, resource: ResourceType, obj: JsonObject) -> bool:
        """Whether a deleting object with no finalizers left is removed by this write."""
        if resource is self.pods:
            return bool(obj["metadata"].get("deletionGracePeriodSeconds") == 0)
        if resource is self.namespaces:
            return not obj.get("spec", {}).get("finalizers")
        return True

    # -- delete ------------------------------------------------------------------------------

    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        options: DeleteOptions | None = None,
    ) -> tuple[JsonObject, bool]:
        """Delete or start deleting; returns (object, removed_now)."""
        options = options or DeleteOptions()
        current = self.get(resource, namespace, name)
        meta = current["metadata"]
        if options.precondition_uid is not None and options.precondition_uid != meta["uid"]:
            raise ConflictError(
                f"Precondition failed: UID in precondition: {options.precondition_uid}, "
                f"UID in object meta: {meta['uid']}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        if (
            options.precondition_resource_version is not None
            and options.precondition_resource_version != meta["resourceVersion"]
        ):
            raise ConflictError(
                "Precondition failed: ResourceVersion in precondition: "
                f"{options.precondition_resource_version}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        if options.dry_run:
            return current, False
        new = clone(current)
        new_meta = new["metadata"]
        finalizers: list[str] = list(new_meta.get("finalizers") or [])
        policy = options.propagation_policy
        if policy is None and resource.group == "batch" and resource.plural == "jobs":
            policy = "Orphan"  # batch/v1 Jobs still default to orphaning their pods
        if not new_meta.get("deletionTimestamp"):
            if policy == "Orphan" and ORPHAN_FINALIZER not in finalizers:
                finalizers.append(ORPHAN_FINALIZER)
            elif policy == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
                finalizers.append(FOREGROUND_FINALIZER)
        if finalizers:
            new_meta["finalizers"] = finalizers
        if resource is self.namespaces:
            return self._start_namespace_termination(new, current), False
        grace = self._grace_period(resource, current, options)
        if grace == 0 and not finalizers:
            return self.store.remove(resource, current), True
        if new_meta.get("deletionTimestamp"):
            if grace == 0 and new_meta.get("deletionGracePeriodSeconds") != 0:
                new_meta["deletionGracePeriodSeconds"] = 0
                return self._commit(resource, new, current, dry_run=False), False
            if new_meta.get("finalizers") == meta.get("finalizers"):
                return current, False
        else:
            moment = now() + dt.timedelta(seconds=grace)
            new_meta["deletionTimestamp"] = format_time(moment)
            new_meta["deletionGracePeriodSeconds"] = grace
        new_meta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(resource, new, old=current)
        return new, False

    def _grace_period(
        self, resource: ResourceType, current: JsonObject, options: DeleteOptions
    ) -> int:
        if resource is not self.pods:
            return 0
        spec = current.get("spec", {})
        phase = current.get("status", {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if options.grace_period_seconds is not None:
            return max(0, options.grace_period_seconds)
        return int(spec.get("terminationGracePeriodSeconds", 30))

    def _start_namespace_termination(self, new: JsonObject, current: JsonObject) -> JsonObject:
        if current.get("status", {}).get("phase") == "Terminating":
            return current
        new["metadata"]["deletionTimestamp"] = rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        new["metadata"]["resourceVersion"] = str(self.store.next_revision())
        self.store.put(self.namespaces, new, old=current)
        return new

    # -- events ------------------------------------------------------------------------------

    def record_event(
        self,
        involved: JsonObject,
        *,
        type_: str,
        reason: str,
        message: str,
        component: str,
    ) -> None:
        """Emit (or bump the count of) a core/v1 Event about `involved`."""
        if not self.events_enabled:
            return
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        if self.store.get(self.namespaces, "", namespace) is None:
            return
        key = (namespace, meta["uid"], reason, message)
        stamp = rfc3339()
        existing_name = self._event_names.get(key)
        if existing_name is not None:
            existing = self.store.get(self.events, namespace, existing_name)
            if existing is not None:

                def bump(event: JsonObject) -> None:
                    event["count"] = event.get("count", 1) + 1
                    event["lastTimestamp"] = stamp

                self.mutate(self.events, namespace, existing_name, bump)
                return
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        self._event_names[key] = name
        if len(self._event_names) > 50_000:
            self._event_names.clear()
        event: JsonObject = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": involved.get("kind"),
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": involved.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
        }
        if not event["involvedObject"]["namespace"]:
            event["involvedObject"].pop("namespace")
        self.create(self.events, event, namespace=namespace, validate=False)
