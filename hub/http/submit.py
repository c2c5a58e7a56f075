"""Submissions: `POST /apis/multiq.dev/v1alpha1/namespaces/{ns}/submissions[?queue=Q]
[&clusterSet=S]` with a batch/v1 Job, a JobSet (upstream or ours), a Pod, a pod group's Pods
(a v1 List of them, as qctl sends a group's Pod documents, or one by one) or a Workload, as
JSON or YAML.

A pod group is one Workload, `pod-group-<group>`, whose source is the v1 List of its Pods.
Until its `pod-group-total-count` pods are in, it waits at the hub (Kueue waits for the total
count as well): annotated `multiq.dev/pod-group-waiting: <given>/<total>`, its QuotaReserved
condition False with reason WaitingForPodGroup, never dispatched (hub.state.is_pending). Each
further pod of the group joins it (`_join_group`); the last one makes it pending like any
other workload. A pod of a name the group already has is a 409, one too many a 422. Pods of
one group sent at once are taken one at a time (a lock per group), all of them.

The object is validated, converted to a Workload (queue from `?queue=` or the job's
`multiq.dev/queue-name` / `kueue.x-k8s.io/queue-name` label, priority from its priority-class
label), checked against the hub's queues and cluster sets, and made durable — the submitted
object and its Workload in one store transaction — before the hub answers 201 with the
Workload. Anything invalid is a 4xx naming the field, and nothing is stored. A `status` in the
submitted object is ignored, as Kubernetes ignores it on create: only the hub writes a
Workload's status.

What a tenant's user may ask for (admins may ask for anything the conversion accepts):
- a priority only through a WorkloadPriorityClass its namespace's tenants may use (a Tenant's
  `priorityClasses`; none listed: every class); a number written in a submitted Workload must
  equal its class's value, and without a class only 0 is allowed — else a 403 naming
  `spec.priority` or the class's field;
- for everyone, a cluster set (`?clusterSet=`, or a submitted Workload's
  `multiq.dev/cluster-set` annotation) only within the clusters its queue's GlobalQueue
  dispatches to: a set that reaches other clusters is a 403 naming the field.

Called by: hub.app (route); qctl submit; hub.http.templates (a profile's expansion is
submitted through `SubmitRoutes.accept`, as if qctl submit had sent it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from aiohttp import web

from api.errors import FieldError
from api.k8s.pod import Pod
from api.meta import API_VERSION, Object
from api.v1alpha1.conversions import (
    ANNOTATION_PREFIXES,
    POD_GROUP_WAITING_ANNOTATION,
    ConversionError,
    Keys,
    to_workload,
    workload_from_pods,
)
from api.v1alpha1.federation import (
    SUBMITTER_ANNOTATION,
    ClusterSet,
    GlobalQueue,
    MemberCluster,
    Tenant,
)
from api.v1alpha1.queues import LocalQueue, WorkloadPriorityClass
from api.v1alpha1.workload import Workload
from hub.auth import Principal, require_namespace
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ForbiddenError,
    InvalidObjectError,
    NotFoundError,
)
from hub.http.middleware import PRINCIPAL, json_reply, read_body
from hub.objects import (
    ObjectRepository,
    check_path_names,
    translate_store_error,
    without_status,
)
from hub.placement.routing import CLUSTER_SET_ANNOTATION, Routing
from hub.state import SOURCE_PREFIX, HubState
from hub.store import base as store_base
from hub.store.base import JsonObject, Revision
from hub.tracing import keep_trace, submission_stage, traced_submission
from hub.transitions import QUOTA_RESERVED, set_condition
from hub.writes import WorkloadWriter

__all__ = ["SubmitRoutes", "classes_usable_in"]

PRIORITY_LABEL = "multiq.dev/priority-class"


def classes_usable_in(namespace: str, tenants: list[Tenant]) -> frozenset[str] | None:
    """The WorkloadPriorityClasses work in `namespace` may name: those its tenants list, or
    every class (None) when one of them lists none."""
    usable: set[str] = set()
    for tenant in tenants:
        if namespace in tenant.spec.namespaces:
            if not tenant.spec.priority_classes:
                return None
            usable.update(tenant.spec.priority_classes)
    return frozenset(usable)


_GROUP_LABELS = tuple(prefix + Keys.POD_GROUP_NAME for prefix in ANNOTATION_PREFIXES)


def _waiting(workload: Workload) -> bool:
    """A pod group's Workload that still waits for some of its pods."""
    return POD_GROUP_WAITING_ANNOTATION in workload.metadata.annotations


def _say_waiting(workload: Workload, now: datetime) -> None:
    given, total = workload.metadata.annotations[POD_GROUP_WAITING_ANNOTATION].split("/")
    set_condition(
        workload,
        QUOTA_RESERVED,
        False,
        "WaitingForPodGroup",
        f"{given} of the group's {total} pods submitted: it waits at the hub for the rest "
        "(Kueue's pod group semantics: admitted only once its total count is there)",
        now,
    )


def _forbidden_field(field: str, detail: str) -> ForbiddenError:
    return ForbiddenError(f"{field}: {detail}", causes=[FieldError.forbidden(field, detail)])


class SubmitRoutes:
    def __init__(self, repo: ObjectRepository, state: HubState) -> None:
        self.repo = repo
        self.state = state
        self._group_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per pod group being submitted: its lock and how many submissions hold or await it."""

    @contextlib.asynccontextmanager
    async def _group_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._group_locks.get(key, (asyncio.Lock(), 0))
        self._group_locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._group_locks[key]
            if users == 1:
                del self._group_locks[key]
            else:
                self._group_locks[key] = (lock, users - 1)

    def add_to(self, app: web.Application) -> None:
        path = f"/apis/{API_VERSION}/namespaces/{{ns}}/submissions"
        app.router.add_post(path, traced_submission(self.submit))

    async def submit(self, request: web.Request) -> web.Response:
        ns = request.match_info["ns"]
        principal: Principal = request[PRINCIPAL]
        tenants = [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]
        require_namespace(principal, ns, tenants, "submit workloads", write=True)
        check_path_names(Workload, None, ns)
        body = await read_body(request)
        created = await self.accept(
            principal,
            ns,
            body,
            queue=request.query.get("queue"),
            cluster_set=request.query.get("clusterSet"),
        )
        return json_reply(created, status=201)

    async def accept(
        self,
        principal: Principal,
        ns: str,
        body: dict[str, Any],
        *,
        queue: str | None = None,
        cluster_set: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Check `body` as a submission to namespace `ns` by `principal` (who may submit
        there) and store it and its Workload; the Workload stored. With `dry_run`, every check
        and nothing stored (the Workload it would be)."""
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if meta.get("namespace") not in (None, ns):
            raise BadRequestError(
                f"the namespace of the object ({meta.get('namespace')}) does not match the "
                f"namespace of the request ({ns})"
            )
        meta["namespace"] = ns
        group = self._pod_group(body, ns)
        source = group[0] if group else without_status(self.repo.validate(body))
        submission_stage("validate")
        priorities = {
            p.name: p.value
            for p in self.state.objects(WorkloadPriorityClass)
            if isinstance(p, WorkloadPriorityClass)
        }
        try:
            # The source was parsed for this request alone: the Workload may share its pod
            # templates (neither is changed after this point).
            if group:
                workload = workload_from_pods(
                    group,
                    priority_classes=priorities,
                    default_queue_name=queue,
                    take_ownership=True,
                    incomplete=True,
                )
            else:
                workload = to_workload(
                    source,
                    priority_classes=priorities,
                    default_queue_name=queue,
                    take_ownership=True,
                    source_checked=True,  # by `validate`, above
                )
        except ConversionError as exc:
            raise InvalidObjectError(str(exc), causes=exc.errors) from exc
        submission_stage("convert")
        if queue:
            workload.spec.queue_name = queue
        workload.metadata.namespace = ns
        tenants = [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]
        if not principal.is_admin:
            self._check_priority(workload, ns, tenants, priorities, source)
        self._check_routing(workload, ns, cluster_set)
        if workload.spec.priority is None:
            workload.spec.priority = 0
        keep_trace(workload)
        workload.metadata.annotations[SUBMITTER_ANNOTATION] = principal.name
        if _waiting(workload):
            _say_waiting(workload, self.repo.now())
        # No second semantic check of the whole Workload: the conversion checked what it built
        # (a submitted Workload was checked by `validate`), and of what this route set since,
        # the queue and the cluster set are known objects (`_check_routing`), the namespace is
        # the request's, already checked, and priority 0 is valid.
        key = f"{ns}/{workload.metadata.name}"
        if dry_run:
            if key in self.state.workloads:
                raise AlreadyExistsError(f'workloads "{workload.metadata.name}" already exists')
            return workload.to_wire()
        if not group:
            return await self._store(key, workload, source, group, priorities)
        # A group's pods may come all at once (`xargs -P`): one at a time per group, so the
        # first creates it and the others join it, none overwriting another's pods.
        async with self._group_lock(key):
            return await self._store(key, workload, source, group, priorities)

    async def _store(
        self,
        key: str,
        workload: Workload,
        source: Object,
        group: list[Pod],
        priorities: dict[str, int],
    ) -> dict[str, Any]:
        """Store the submitted object (or join its pod group) with its Workload, in one
        transaction: both or, when the Workload exists or the write fails, neither."""
        ns = workload.metadata.namespace or ""
        sources: dict[str, JsonObject] = {}
        if not isinstance(source, Workload):
            existing = self.state.workloads.get(key)
            if group and existing is not None and _waiting(existing.workload):
                return await self._join_group(ns, workload.metadata.name, group, priorities)
            if existing is not None:
                raise AlreadyExistsError(f'workloads "{workload.metadata.name}" already exists')
            # Replacing whatever an earlier workload of the same name, since deleted, left.
            sources[f"{SOURCE_PREFIX}{key}"] = (
                {"apiVersion": "v1", "kind": "List", "items": [p.to_wire() for p in group]}
                if group
                else source.to_wire()
            )
        # The mirror takes this Workload as it is when the write comes back, not a parse of it.
        written: list[dict[str, object]] = []

        def expect(wire: dict[str, object]) -> None:
            written.append(wire)
            self.state.expect(key, workload, wire)

        try:
            created = await self.repo.create(workload, before_write=expect, put=sources)
        except BaseException:
            self.state.unexpect(key, workload)
            raise
        for source_wire in sources.values():
            self.state.keep_fresh_source(key, source_wire)
        revision = Revision(int(created["metadata"]["resourceVersion"]))
        self.state.remember(key, workload, revision, written[0])
        submission_stage("store")
        return created

    def _pod_group(self, body: dict[str, Any], ns: str) -> list[Pod]:
        """The Pods of a pod group: those of a v1 List (qctl sends a group's Pod documents
        so), or one Pod labelled with a group name; [] for anything else. Each pod is
        validated as a Pod of `ns`."""
        if (body.get("apiVersion"), body.get("kind")) == ("v1", "Pod"):
            labels = (body.get("metadata") or {}).get("labels") or {}
            if not any(k in labels for k in _GROUP_LABELS):
                return []
            pod = without_status(self.repo.validate(body))
            assert isinstance(pod, Pod)
            return [pod]
        if (body.get("apiVersion"), body.get("kind")) != ("v1", "List"):
            return []
        items = body.get("items")
        if not isinstance(items, list) or not items:
            raise InvalidObjectError(
                "a v1 List is submitted as a pod group: its items must be the group's Pods",
                causes=[FieldError.required("items", "the group's Pods")],
            )
        pods: list[Pod] = []
        for i, item in enumerate(items):
            kind = item.get("kind") if isinstance(item, dict) else None
            if kind != "Pod" or item.get("apiVersion") != "v1":
                raise InvalidObjectError(
                    f"items[{i}]: a List is submitted as a pod group, of v1 Pods only",
                    causes=[FieldError.invalid(f"items[{i}].kind", kind or "", "must be Pod")],
                )
            item_meta = item.setdefault("metadata", {})
            if item_meta.get("namespace") not in (None, ns):
                raise BadRequestError(
                    f"items[{i}]: the namespace of the pod ({item_meta.get('namespace')}) "
                    f"does not match the namespace of the request ({ns})"
                )
            item_meta["namespace"] = ns
            pod = without_status(self.repo.validate(item))
            assert isinstance(pod, Pod)
            pods.append(pod)
        return pods

    async def _join_group(
        self, ns: str, name: str, pods: list[Pod], priorities: dict[str, int]
    ) -> dict[str, Any]:
        """Add `pods` to the waiting pod group `ns/name`: its source (compare-and-swap; the
        caller holds the group's lock, so only another hub could conflict) and its Workload,
        made again from every pod so far — dispatched once the last pod is in."""
        store, key = self.repo.store, f"{ns}/{name}"
        source_key = f"{SOURCE_PREFIX}{key}"
        try:
            stored = await store.get(source_key)
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        items = list(stored.value.get("items") or [])
        have = {str((item.get("metadata") or {}).get("name")) for item in items}
        for pod in pods:
            if pod.metadata.name in have:
                raise AlreadyExistsError(
                    f'pods "{pod.metadata.name}" already exists in the group of workload {name}'
                )
        every = [Pod.model_validate(item) for item in items] + pods
        try:
            merged = workload_from_pods(every, priority_classes=priorities, incomplete=True)
        except ConversionError as exc:
            raise InvalidObjectError(str(exc), causes=exc.errors) from exc
        source_wire = {
            "apiVersion": "v1",
            "kind": "List",
            "items": items + [p.to_wire() for p in pods],
        }
        try:
            await store.update(source_key, source_wire, expected=stored.revision)
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        self.state.keep_fresh_source(key, source_wire)
        now = self.repo.now()

        def grow(wl: Workload) -> Workload:
            wl.spec.pod_sets = merged.spec.pod_sets
            waiting = merged.metadata.annotations.get(POD_GROUP_WAITING_ANNOTATION)
            if waiting is not None:
                wl.metadata.annotations[POD_GROUP_WAITING_ANNOTATION] = waiting
                _say_waiting(wl, now)
            else:
                wl.metadata.annotations.pop(POD_GROUP_WAITING_ANNOTATION, None)
                set_condition(
                    wl,
                    QUOTA_RESERVED,
                    False,
                    "Pending",
                    f"every pod of the group is in ({len(every)}): waiting for a cluster",
                    now,
                )
            return wl

        written = await WorkloadWriter(self.state).update(key, grow)
        if written is None:
            raise NotFoundError(f'workloads "{name}" not found')
        return written.to_wire()

    def _check_priority(
        self,
        workload: Workload,
        ns: str,
        tenants: list[Tenant],
        priorities: dict[str, int],
        source: object,
    ) -> None:
        spec = workload.spec
        name = spec.priority_class_name
        labels = getattr(getattr(source, "metadata", None), "labels", None) or {}
        label = next((k for k in labels if k.endswith("/priority-class")), None)
        if name is None:
            if spec.priority not in (None, 0):
                raise _forbidden_field(
                    "spec.priority",
                    f"a priority comes from a WorkloadPriorityClass (label {PRIORITY_LABEL}); "
                    "only admins may write a number",
                )
            return
        field = f"metadata.labels[{label}]" if label else "spec.priorityClassName"
        allowed = classes_usable_in(ns, tenants)
        if name not in priorities or (allowed is not None and name not in allowed):
            usable = sorted(priorities if allowed is None else allowed & priorities.keys())
            raise _forbidden_field(
                field,
                f"WorkloadPriorityClass {name!r} is not one namespace {ns}'s tenants may use "
                f"(they may use: {', '.join(usable) or 'none'})",
            )
        if spec.priority is not None and spec.priority != priorities[name]:
            raise _forbidden_field(
                "spec.priority",
                f"must equal the value of WorkloadPriorityClass {name} ({priorities[name]}); "
                "only admins may write another number",
            )

    def _check_routing(self, workload: Workload, ns: str, cluster_set: str | None) -> None:
        queue = workload.spec.queue_name
        if self.state.find(LocalQueue, queue, ns) is None:
            known = sorted(
                o.name for o in self.state.objects(LocalQueue) if o.metadata.namespace == ns
            )
            detail = f"no LocalQueue of that name in namespace {ns}"
            if known:
                detail += f" (known: {', '.join(known)})"
            raise InvalidObjectError(
                f"unknown queue {queue!r}",
                causes=[FieldError.not_found("spec.queueName", queue, detail)],
            )
        field = "clusterSet"
        if not cluster_set:
            cluster_set = workload.metadata.annotations.get(CLUSTER_SET_ANNOTATION)
            field = f"metadata.annotations[{CLUSTER_SET_ANNOTATION}]"
        if cluster_set:
            if self.state.find(ClusterSet, cluster_set) is None:
                raise InvalidObjectError(
                    f"unknown cluster set {cluster_set!r}",
                    causes=[FieldError.not_found(field, cluster_set, "no such ClusterSet")],
                )
            self._check_within_queue(workload, cluster_set, field)
            workload.metadata.annotations[CLUSTER_SET_ANNOTATION] = cluster_set

    def _check_within_queue(self, workload: Workload, cluster_set: str, field: str) -> None:
        """The asked set's clusters must all be clusters the queue dispatches to (its
        GlobalQueue's set, else the `default` set or every member, as routing decides). A set
        chosen by label selector is judged by the members it has now."""
        state = self.state
        routing = Routing.of(
            local_queues=[q for q in state.objects(LocalQueue) if isinstance(q, LocalQueue)],
            global_queues=[g for g in state.objects(GlobalQueue) if isinstance(g, GlobalQueue)],
            tenants=[t for t in state.objects(Tenant) if isinstance(t, Tenant)],
            cluster_sets=[c for c in state.objects(ClusterSet) if isinstance(c, ClusterSet)],
            members=[m for m in state.objects(MemberCluster) if isinstance(m, MemberCluster)],
        )
        plain = workload.model_copy(deep=False)
        plain.metadata = workload.metadata.model_copy(
            update={
                "annotations": {
                    k: v
                    for k, v in workload.metadata.annotations.items()
                    if k != CLUSTER_SET_ANNOTATION
                }
            }
        )
        route = routing.route_of(plain)
        asked = routing.cluster_set_members(cluster_set)
        if isinstance(route, str) or isinstance(asked, str):
            return  # the queue routes nowhere yet (its reason shows on the workload)
        outside = sorted(asked - route.cluster_set)
        if outside:
            queue = route.global_queue.name if route.global_queue else "the default cluster set"
            raise _forbidden_field(
                field,
                f"ClusterSet {cluster_set} reaches clusters {', '.join(outside)}, outside what "
                f"queue {workload.spec.queue_name} dispatches to ({queue})",
            )
