"""The agent's live picture of its cluster: mirrors of nodes, pods, jobs and namespaces
(list + watch, relist on 410), and the node summary the Hello and capacity reports carry.

Namespaces are mirrored for their labels: a ClusterQueue's `namespaceSelector` is matched
against them (`namespace_labels`, handed to every engine snapshot).

Pods and jobs are mirrored cluster-wide (node free capacity needs every pod's requests);
`workload_jobs` / `workload_pods` select the ones MultiQ made, by the labels materialisation
puts on them (`agent.labels`, re-exported here); `workload_objects` and `managed_jobs` count
the bare Pods MultiQ made (plain Pods, pod groups: labelled, owned by nothing) with the Jobs.

The node summary's used room is kept as pods change (`PodRoom`, fed by the pods mirror), not
counted from every mirrored pod on each report: finished pods stay mirrored with their Jobs
for the Jobs' TTL, an hour of them on a busy cluster — and of those the mirrors keep only what
is still read (`slim_pod`, `slim_job`).

Called by: agent.app (runs the mirrors, wakes the loop on change), agent.status,
agent.capacity, agent.logs, agent.materialize (adoption).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from agent.deadlines import USER_DEADLINE_ANNOTATION
from agent.engine.quota import add_signed
from agent.jobsets import REPLICATED_JOB_NAME
from agent.k8s.client import JsonObject, Kube, Resource
from agent.k8s.watching import Mirror
from agent.labels import Labels
from api.k8s.pod import ResourceList, room_requests
from api.quantity import Quantity
from api.v1alpha1.messages import InventorySummary, NodeSummary

__all__ = ["Inventory", "Labels", "PodRoom", "job_seen", "slim_job", "slim_pod"]


def _bare(pod: JsonObject) -> bool:
    """A pod MultiQ made itself, not one of its Jobs' pods."""
    meta = pod.get("metadata") or {}
    return Labels.UID in (meta.get("labels") or {}) and not meta.get("ownerReferences")


def _ready(node: JsonObject) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _add(total: dict[str, Quantity], resources: dict[str, str]) -> None:
    for name, raw in resources.items():
        try:
            q = Quantity.parse(raw)
        except ValueError:
            continue
        total[name] = total.get(name, Quantity(0)) + q


def _parsed(resources: dict[str, str]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    _add(out, resources)
    return out


def _milli(amounts: dict[str, Quantity]) -> dict[str, int]:
    return {k: v.milli() for k, v in amounts.items()}


def _sum_into(total: dict[str, int], amounts: dict[str, int]) -> None:
    for k, v in amounts.items():
        total[k] = total.get(k, 0) + v


_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def _slim_metadata(obj: JsonObject) -> JsonObject:
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return meta
    return {k: v for k, v in meta.items() if k != "managedFields"}


def slim_pod(pod: JsonObject) -> JsonObject:
    """What the mirror keeps of a pod: all of it while it may run; once it finished, what
    its readers still read — metadata (without managedFields), its node, node selector,
    scheduling gates and container names (agent.status, agent.logs, agent.topology_landing),
    its phase, reason, message, container statuses and Ready condition (agent.status). A
    finished pod stays mirrored with its Job for the Job's TTL, an hour of them on a busy
    cluster: whole, each was some 50 objects for the garbage collector to walk."""
    status = pod.get("status") or {}
    if status.get("phase") not in _FINISHED_PHASES:
        return pod
    spec = pod.get("spec") or {}
    kept_spec: JsonObject = {
        k: spec[k] for k in ("nodeName", "nodeSelector", "schedulingGates") if k in spec
    }
    kept_spec["containers"] = [{"name": c.get("name")} for c in spec.get("containers") or []]
    kept_status: JsonObject = {
        k: status[k] for k in ("phase", "reason", "message", "containerStatuses") if k in status
    }
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready:
        kept_status["conditions"] = ready
    kept: JsonObject = {k: pod[k] for k in ("apiVersion", "kind") if k in pod}
    return {**kept, "metadata": _slim_metadata(pod), "spec": kept_spec, "status": kept_status}


def _job_finished(job: JsonObject) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def slim_job(job: JsonObject) -> JsonObject:
    """What the mirror keeps of a Job: all of it until it finished, then all but its pod
    template (nobody reads it then: half of a Job's objects) and metadata.managedFields."""
    if not _job_finished(job):
        return job
    spec = {k: v for k, v in (job.get("spec") or {}).items() if k != "template"}
    return {**job, "metadata": _slim_metadata(job), "spec": spec}


def job_seen(job: JsonObject) -> tuple[object, ...]:
    """What of a Job its readers look at after a change (the jobs mirror's `seen`): its labels
    and deletion (whose workload and attempt it is, whether it is going) and its conditions
    (agent.status: Complete, Failed); once it failed, also its deadlines (whether the agent's
    fencing deadline failed it: agent.deadlines.stopped_by_fencing); for a JobSet's Job also
    what its start order and success rules count (agent.jobsets.job_view: parallelism, ready
    and succeeded pods). A plain Job's counters — kubesim's and Kubernetes' Job controllers
    update them twice as its pod starts — and the fencing deadline of a Job still running
    (extended every half lease) change nothing the status pass reads."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = job.get("status") or {}
    seen: tuple[object, ...] = (labels, meta.get("deletionTimestamp"), status.get("conditions"))
    spec = job.get("spec") or {}
    if _job_failed(job):
        user = (meta.get("annotations") or {}).get(USER_DEADLINE_ANNOTATION)
        seen = (*seen, spec.get("activeDeadlineSeconds"), user)
    if REPLICATED_JOB_NAME not in labels:
        return seen
    return (*seen, spec.get("parallelism"), status.get("ready"), status.get("succeeded"))


def _job_failed(job: JsonObject) -> bool:
    return any(
        c.get("type") == "Failed" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


class PodRoom:
    """The requests of the pods that hold room on a node (placed there, not finished), in
    milli-units and summed per node, kept as the pods mirror reports each pod's change."""

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, int]] = {}
        """Node name → the summed requests of the pods holding room on it (nodes without
        such pods are left out)."""
        self._held: dict[str, tuple[str, str, dict[str, int]]] = {}
        """Pod key → (node, uid, requests) of every pod counted in `by_node`."""

    def pod_changed(self, key: str, pod: JsonObject | None) -> None:
        """The pod at `key` is now `pod` (None: gone)."""
        before = self._held.pop(key, None)
        if before is not None:
            self._take(before[0], before[2], -1)
        if pod is None:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in _FINISHED_PHASES:
            return
        uid = str((pod.get("metadata") or {}).get("uid") or key)
        # A pod's requests never change: parsed once, when it is first placed.
        amounts = before[2] if before is not None and before[1] == uid else None
        if amounts is None:
            amounts = room_requests(pod.get("spec") or {})
        self._held[key] = (str(node), uid, amounts)
        self._take(str(node), amounts, 1)

    def _take(self, node: str, amounts: dict[str, int], sign: int) -> None:
        total = self.by_node.setdefault(node, {})
        add_signed(total, amounts, sign)
        if not total:
            del self.by_node[node]

    def used(self, nodes: Iterable[str]) -> dict[str, int]:
        """The requests held on `nodes`, summed."""
        out: dict[str, int] = {}
        for node in nodes:
            amounts = self.by_node.get(node)
            if amounts is not None:
                _sum_into(out, amounts)
        return out


class Inventory:
    """Mirrors of nodes, pods and jobs; `on_change` is called after every change."""

    def __init__(
        self,
        kube: Kube,
        *,
        on_change: Callable[[Resource], None] | None = None,
        watch_timeout: int = 300,
        retry_delay: float = 1.0,
    ) -> None:
        def mirror(
            resource: Resource,
            on_object: Callable[[str, JsonObject | None], None] | None = None,
            slim: Callable[[JsonObject], JsonObject] | None = None,
            seen: Callable[[JsonObject], object] | None = None,
        ) -> Mirror:
            return Mirror(
                kube,
                resource,
                on_change=on_change,
                timeout_seconds=watch_timeout,
                retry_delay=retry_delay,
                index=(Labels.NAMESPACE, Labels.NAME),
                on_object=on_object,
                slim=slim,
                seen=seen,
            )

        self._labels: dict[str, dict[str, str]] | None = None
        """Namespace labels by name, made again after a namespace changed (None)."""

        def namespaces_changed(resource: Resource) -> None:
            self._labels = None
            if on_change is not None:
                on_change(resource)

        self.kube = kube
        self.nodes = mirror(Resource.NODES)
        self.pod_room = PodRoom()
        self.pods = mirror(Resource.PODS, self.pod_room.pod_changed, slim_pod)
        self.jobs = mirror(Resource.JOBS, slim=slim_job, seen=job_seen)
        self.namespaces = Mirror(
            kube,
            Resource.NAMESPACES,
            on_change=namespaces_changed,
            timeout_seconds=watch_timeout,
            retry_delay=retry_delay,
        )
        self.kubernetes_version: str | None = None
        # Parsed allocatable, in milli-units, by node revision.
        self._node_amounts: dict[tuple[str, str], dict[str, int]] = {}

    @property
    def mirrors(self) -> tuple[Mirror, ...]:
        return (self.nodes, self.pods, self.jobs, self.namespaces)

    async def wait_listed(self) -> None:
        await asyncio.gather(*(m.listed.wait() for m in self.mirrors))

    # selections ------------------------------------------------------------------------------

    def workload_jobs(self, namespace: str, name: str) -> list[JsonObject]:
        return self.jobs.owned_by(namespace, Labels.value(name))

    def workload_pods(self, namespace: str, name: str) -> list[JsonObject]:
        return self.pods.owned_by(namespace, Labels.value(name))

    def workload_objects(self, namespace: str, name: str) -> list[JsonObject]:
        """What MultiQ made for the workload: its Jobs and its bare Pods (a plain Pod, a pod
        group's)."""
        bare = [p for p in self.workload_pods(namespace, name) if _bare(p)]
        return self.workload_jobs(namespace, name) + bare

    def made(self, namespace: str, names: Iterable[str]) -> bool:
        """Whether any of these Jobs or bare Pods of `namespace` is in the mirrors."""
        jobs, pods = self.jobs.objects, self.pods.objects
        return any(
            f"{namespace}/{n}" in jobs
            or ((pod := pods.get(f"{namespace}/{n}")) is not None and _bare(pod))
            for n in names
        )

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Every namespace's labels, by name. The same object until a namespace changes, so
        the engine's snapshot is rebuilt only then."""
        labels = self._labels
        if labels is None:
            labels = self._labels = {
                str(meta.get("name")): dict(meta.get("labels") or {})
                for ns in self.namespaces.objects.values()
                if (meta := ns.get("metadata") or {})
            }
        return labels

    def take_changes(self) -> tuple[bool, set[tuple[str, str]]]:
        """Since the last call: whether jobs or pods were relisted, and which workloads'
        (namespace, name label) jobs or pods changed."""
        jobs_all, jobs = self.jobs.take_changes()
        pods_all, pods = self.pods.take_changes()
        return jobs_all or pods_all, jobs | pods

    def managed_jobs(self) -> list[JsonObject]:
        """Every Job and bare Pod MultiQ made, whoever holds its workload."""
        return [
            j
            for j in self.jobs.objects.values()
            if Labels.UID in ((j.get("metadata") or {}).get("labels") or {})
        ] + [p for p in self.pods.objects.values() if _bare(p)]

    # summaries -------------------------------------------------------------------------------

    def node_summary(self) -> NodeSummary:
        allocatable: dict[str, int] = {}
        total = ready = schedulable = 0
        usable: set[str] = set()
        node_cache: dict[tuple[str, str], dict[str, int]] = {}
        for node in self.nodes.objects.values():
            total += 1
            is_ready = _ready(node)
            ready += is_ready
            if is_ready and not (node.get("spec") or {}).get("unschedulable"):
                schedulable += 1
                meta = node.get("metadata") or {}
                usable.add(str(meta.get("name")))
                key = (str(meta.get("name")), str(meta.get("resourceVersion")))
                amounts = self._node_amounts.get(key)
                if amounts is None:
                    amounts = _milli(_parsed((node.get("status") or {}).get("allocatable") or {}))
                node_cache[key] = amounts
                _sum_into(allocatable, amounts)
        used = self.pod_room.used(usable)
        self._node_amounts = node_cache
        free: ResourceList = {
            k: Quantity.from_milli(max(v - used.get(k, 0), 0)) for k, v in allocatable.items()
        }
        return NodeSummary(
            total=total,
            ready=ready,
            schedulable=schedulable,
            allocatable={k: Quantity.from_milli(v) for k, v in allocatable.items()},
            free=free,
        )

    def summary(self, flavors: list[str]) -> InventorySummary:
        nodes = self.node_summary()
        return InventorySummary(
            kubernetes_version=self.kubernetes_version,
            nodes=nodes.total,
            ready_nodes=nodes.ready,
            allocatable=nodes.allocatable,
            flavors=flavors,
        )
