"""Turning an admitted workload into Kubernetes objects in its tenant namespace — exactly once.

What is created (`plan_jobs`, pure):
- a batch/v1 Job source: that Job, under its own name (a generateName-only source gets a name
  derived from the workload uid, so the name is deterministic);
- a JobSet source (jobset.x-k8s.io/v1alpha2 or multiq.dev/v1alpha1): no JobSet object — member
  clusters need no JobSet controller — but what its controller would create: one batch/v1
  Job per replicated-job replica, named `<jobset>-<replicatedJob>-<index>`, with the
  JobSet's labels (`jobset.sigs.k8s.io/jobset-name`, `replicatedjob-name`, `job-index`,
  `replicatedjob-replicas`) on the Job and its pods, and the pods' `subdomain` set to the
  JobSet's (DNS hostnames; the headless Service is not created);
- a Pod source (a plain Pod) or a v1 List of Pods (a pod group, submitted whole): those
  Pods, under their own names, without any Job — created with Kueue's scheduling gate
  (`Labels.ADMISSION_GATE`), and ungated together once every pod of the group exists, so none
  of them runs before all can (all or nothing); each pod gets its pod set's flavor
  (`api.v1alpha1.conversions.pod_set_names`). A pod's `activeDeadlineSeconds` can only be
  shortened, never pushed forward, so bare pods carry no fencing deadline (a fenced agent
  still deletes them; one that is gone for good does not);
- no source (a Workload submitted directly): one Indexed Job per pod set, `<workload>-<podset>`.

Every Job and pod template gets the workload's identity labels (`inventory.Labels`), the
assigned flavor's nodeLabels merged into nodeSelector and its tolerations appended, and for a
topology assignment the level values all its domains share (widest first: one rack's block
and rack; only the block when the pods span racks of one block) — so a pod set that required
one rack runs in that rack. When the assignment has more than one domain, the pod templates
are also gated (`agent.topology_landing`): the agent lands each pod in its domain as it
appears, so each domain gets exactly its count. A partially admitted pod set runs with the
admitted count as parallelism (and completions, when they were equal). Jobs are created
unsuspended; Kueue's queue-name label is dropped so a Kueue on the member cluster does not
manage them too; server-owned metadata and the selector are
stripped. Every Job carries the fencing deadline it is given (`agent.deadlines`: the smaller of
the agent's and the user's `activeDeadlineSeconds`, the user's remembered in an annotation).

`Materializer.ensure` creates the namespace when missing and each planned Job (or Pod) unless one of
that name exists: an existing Job with the same workload uid and generation is adopted (after
an agent restart, or a redelivered offer); one of an older generation of the same workload is
deleted first; anything else is a conflict (`MaterializeError`). Names are deterministic, so
creating twice is impossible. Pods are then ungated (those still gated: after an agent
restart, a group half made before it is completed first).

`Materializer.make` keeps ensuring while the workload is still wanted, through transient
errors; `stop` deletes a workload's Jobs and bare Pods (from the inventory's mirror when it
has them all, else by a LIST); `reap` deletes running Jobs and Pods of workloads nobody
holds.

Called by: agent.job_making (on admission), agent.stopper (to stop), agent.admission (to reap
orphans).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.deadlines import with_deadline
from agent.errors import (
    K8sAlreadyExistsError,
    K8sConflictError,
    K8sNotFoundError,
    MaterializeError,
)
from agent.jobsets import RESTART_ATTEMPT
from agent.k8s.client import JsonObject, Kube, Resource, labels_selector
from agent.labels import Labels
from agent.retry import K8S_TRANSIENT
from agent.topology_landing import gate_template, needs_gate
from api.k8s.pod import Pod
from api.v1alpha1.conversions import pod_set_names
from api.v1alpha1.queues import ResourceFlavor
from api.v1alpha1.workload import Admission, TopologyAssignment, Workload

__all__ = [
    "Materializer",
    "identity_labels",
    "is_pod_source",
    "jobset_name",
    "plan_jobs",
]

log = logging.getLogger(__name__)

_ATTEMPTS = 50
_PAUSE = 0.2
"""Waiting for an older dispatch's Job to go: up to _ATTEMPTS × _PAUSE seconds."""

JOBSET_KINDS = {("jobset.x-k8s.io/v1alpha2", "JobSet"), ("multiq.dev/v1alpha1", "JobSet")}
POD_KINDS = {("v1", "Pod"), ("v1", "List")}
"""A plain Pod, or a pod group submitted whole as a v1 List of its Pods."""
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
_DROPPED_LABELS = ("kueue.x-k8s.io/queue-name",)


def identity_labels(workload: Workload, generation: int) -> dict[str, str]:
    meta = workload.metadata
    return {
        Labels.NAMESPACE: meta.namespace or "default",
        Labels.NAME: Labels.value(meta.name),
        Labels.UID: meta.uid or "",
        Labels.GENERATION: str(generation),
        Labels.MANAGED: Labels.MANAGED_VALUE,
    }


@dataclass(frozen=True, slots=True)
class _Injection:
    node_selector: Mapping[str, str]
    tolerations: Sequence[JsonObject]
    count: int | None
    """Admitted pod count when partial, else None."""
    gated_pod_set: str | None = None
    """The pod set's name when its pods land one by one (agent.topology_landing)."""


def _shared_domain(assignment: TopologyAssignment) -> dict[str, str]:
    """The level values every assigned domain shares, from the widest level down to the
    first where they differ."""
    domains = assignment.domains()
    out: dict[str, str] = {}
    for level in assignment.levels:
        values = {selector.get(level) for selector, _ in domains}
        if len(values) != 1 or None in values:
            break
        out[level] = values.pop() or ""
    return out


def _injections(
    workload: Workload, admission: Admission, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, _Injection]:
    out: dict[str, _Injection] = {}
    for psa in admission.pod_set_assignments:
        selector: dict[str, str] = {}
        tolerations: list[JsonObject] = []
        for flavor_name in dict.fromkeys(psa.flavors.values()):
            flavor = flavors.get(flavor_name)
            if flavor is None:
                raise MaterializeError(f"flavor {flavor_name!r} is not in the configuration")
            selector.update(flavor.spec.node_labels)
            if psa.topology_assignment is not None:
                selector.update(_shared_domain(psa.topology_assignment))
            tolerations += [
                t.model_dump(mode="json", by_alias=True, exclude_defaults=True)
                for t in flavor.spec.tolerations
            ]
        pod_set = workload.pod_set(psa.name)
        partial = (
            psa.count
            if pod_set is not None and psa.count is not None and psa.count < pod_set.count
            else None
        )
        gated = psa.name if needs_gate(psa.topology_assignment) else None
        out[psa.name] = _Injection(selector, tolerations, partial, gated)
    return out


def _inject_pod_template(
    template: JsonObject, labels: Mapping[str, str], inj: _Injection, rank_offset: int | None
) -> JsonObject:
    """`template` with the workload's labels and the flavor's node selector and tolerations,
    gated when its pod set lands pod by pod (`rank_offset`: its Job's first rank, for Indexed
    Jobs).

    Copy on write: the dicts on the way to what changes are new, everything else is shared
    with `template` (which nobody changes afterwards), so a Job costs no deep copy."""
    template = dict(template)
    meta = template["metadata"] = dict(template.get("metadata") or {})
    tlabels = meta["labels"] = dict(meta.get("labels") or {})
    for key in _CONTROLLER_LABELS + _DROPPED_LABELS:
        tlabels.pop(key, None)
    tlabels.update(labels)
    spec = template["spec"] = dict(template.get("spec") or {})
    if inj.node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **inj.node_selector}
    if inj.tolerations:
        existing = list(spec.get("tolerations") or [])
        spec["tolerations"] = existing + [t for t in inj.tolerations if t not in existing]
    if inj.gated_pod_set is not None:
        template = gate_template(template, inj.gated_pod_set, rank_offset)
    return template


def _clean_meta(meta: JsonObject, namespace: str, labels: Mapping[str, str]) -> JsonObject:
    out = {k: v for k, v in meta.items() if k not in _SERVER_META}
    out["namespace"] = namespace
    olabels = dict(out.get("labels") or {})
    for key in _DROPPED_LABELS:
        olabels.pop(key, None)
    olabels.update(labels)
    out["labels"] = olabels
    return out


def _job_spec(
    spec: JsonObject, labels: Mapping[str, str], inj: _Injection, first_rank: int = 0
) -> JsonObject:
    """`first_rank`: the rank of the Job's index 0 in its pod set (a JobSet's replicas)."""
    spec = dict(spec)  # copy on write, as `_inject_pod_template`
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
    spec["suspend"] = False
    # Another controller named in managedBy (e.g. Kueue's MultiKueue) would leave the Job to
    # itself and nothing would run it here.
    spec.pop("managedBy", None)
    if inj.count is not None:
        before = spec.get("parallelism", 1)
        spec["parallelism"] = inj.count
        if spec.get("completions") == before and spec.get("completionMode") != "Indexed":
            spec["completions"] = inj.count
    indexed = spec.get("completionMode") == "Indexed"
    spec["template"] = _inject_pod_template(
        spec.get("template") or {}, labels, inj, first_rank if indexed else None
    )
    return spec


def _default_name(workload: Workload, prefix: str) -> str:
    digest = hashlib.sha256((workload.metadata.uid or workload.metadata.name).encode()).hexdigest()
    return f"{prefix}{digest[:5]}"


def plan_jobs(
    workload: Workload,
    generation: int,
    source: Mapping[str, Any] | None,
    admission: Admission,
    flavors: Mapping[str, ResourceFlavor],
    deadline_seconds: int | None = None,
    cluster: str | None = None,
    *,
    roles: Container[str] | None = None,
    attempts: Mapping[str, int] | None = None,
) -> list[JsonObject]:
    """The batch/v1 Jobs that run the admitted workload (pure; see the module docstring).
    `deadline_seconds`: the fencing deadline (None: fencing is off); `cluster`: this member
    cluster's name, annotated on every pod template. For a JobSet: only the Jobs of the
    replicated jobs in `roles` (None: all), each labelled with its restart attempt
    (agent.jobsets)."""
    namespace = workload.metadata.namespace or "default"
    labels = identity_labels(workload, generation)
    injections = _injections(workload, admission, flavors)
    jobs = _plan(workload, namespace, labels, injections, source, roles, attempts or {})
    key = f"{namespace}/{workload.metadata.name}"
    for job in jobs:
        job["metadata"]["annotations"] = {
            **(job["metadata"].get("annotations") or {}),
            Labels.WORKLOAD_ANNOTATION: key,
            **({Labels.CLUSTER_ANNOTATION: cluster} if cluster and job["kind"] == "Pod" else {}),
        }
        if cluster is not None and job["kind"] == "Job":
            _annotate_pods(job, Labels.CLUSTER_ANNOTATION, cluster)
    if is_pod_source(source):
        return jobs  # (no fencing deadline: see the module docstring)
    return [with_deadline(job, deadline_seconds) for job in jobs]


def is_pod_source(source: Mapping[str, Any] | None) -> bool:
    """Whether a workload submitted as `source` runs as bare Pods (a plain Pod, a pod group)."""
    return source is not None and (
        (str(source.get("apiVersion", "")), str(source.get("kind", ""))) in POD_KINDS
    )


def _annotate_pods(job: JsonObject, key: str, value: str) -> None:
    spec = job["spec"] = dict(job.get("spec") or {})
    template = spec["template"] = dict(spec.get("template") or {})
    meta = template["metadata"] = dict(template.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), key: value}


def _plan(
    workload: Workload,
    namespace: str,
    labels: Mapping[str, str],
    injections: Mapping[str, _Injection],
    source: Mapping[str, Any] | None,
    roles: Container[str] | None = None,
    attempts: Mapping[str, int] | None = None,
) -> list[JsonObject]:
    if source is None:
        return _jobs_for_pod_sets(workload, namespace, labels, injections)
    kind = (str(source.get("apiVersion", "")), str(source.get("kind", "")))
    if kind == ("batch/v1", "Job"):
        inj = injections.get("main") or next(iter(injections.values()), _Injection({}, [], None))
        meta = _clean_meta(dict(source.get("metadata") or {}), namespace, labels)
        if not meta.get("name"):
            meta["name"] = _default_name(workload, str(meta.pop("generateName", "job-")))
        meta.pop("generateName", None)
        return [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": meta,
                "spec": _job_spec(dict(source.get("spec") or {}), labels, inj),
            }
        ]
    if kind in JOBSET_KINDS:
        return _jobs_for_jobset(
            workload, namespace, source, labels, injections, roles, attempts or {}
        )
    if kind in POD_KINDS:
        return _pods_for_group(workload, namespace, source, labels, injections)
    raise MaterializeError(
        f"cannot run a {kind[1]} ({kind[0]}): only batch/v1 Job, JobSet, Pod and pod groups"
    )


def _pods_for_group(
    workload: Workload,
    namespace: str,
    source: Mapping[str, Any],
    labels: Mapping[str, str],
    injections: Mapping[str, _Injection],
) -> list[JsonObject]:
    """A plain Pod or a pod group's Pods (see the module docstring), gated."""
    items: list[Mapping[str, Any]] = (
        list(source.get("items") or []) if source.get("kind") == "List" else [source]
    )
    pod_sets = pod_set_names([Pod.model_validate(item) for item in items])
    pods = []
    for index, (item, pod_set) in enumerate(zip(items, pod_sets, strict=True)):
        inj = injections.get(pod_set, _Injection({}, [], None))
        if inj.count is not None:
            raise MaterializeError(f"pod set {pod_set!r}: a pod group admits all or nothing")
        meta = _clean_meta(dict(item.get("metadata") or {}), namespace, labels)
        if not meta.get("name"):
            prefix = str(meta.get("generateName") or "pod-")
            meta["name"] = _default_name(workload, f"{prefix}{index}-")
        meta.pop("generateName", None)
        template = _inject_pod_template(
            {"metadata": meta, "spec": item.get("spec") or {}}, labels, inj, None
        )
        spec = template["spec"]
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != _GATE]
        spec["schedulingGates"] = [{"name": _GATE}, *gates]
        spec.pop("nodeName", None)  # the scheduler places it, after the gate
        pods.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": spec}
        )
    return pods


_GATE = Labels.ADMISSION_GATE


def _ungated_spec(pod: JsonObject) -> JsonObject | None:
    """The merge patch that takes the admission gate off `pod`, or None when it has none."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if not any(g.get("name") == _GATE for g in gates):
        return None
    left = [g for g in gates if g.get("name") != _GATE]
    return {"spec": {"schedulingGates": left or None}}


def _jobs_for_jobset(
    workload: Workload,
    namespace: str,
    source: Mapping[str, Any],
    labels: Mapping[str, str],
    injections: Mapping[str, _Injection],
    roles: Container[str] | None = None,
    attempts: Mapping[str, int] | None = None,
) -> list[JsonObject]:
    meta = dict(source.get("metadata") or {})
    name = jobset_name(workload, source)
    spec = dict(source.get("spec") or {})
    network = dict(spec.get("network") or {})
    hostnames = network.get("enableDNSHostnames", True)
    subdomain = network.get("subdomain") or name
    jobs = []
    for rj in spec.get("replicatedJobs") or []:
        rj_name = str(rj["name"])
        if roles is not None and rj_name not in roles:
            continue  # not started yet (agent.jobsets: the start order)
        replicas = int(rj.get("replicas", 1))
        inj = injections.get(rj_name, _Injection({}, [], None))
        if inj.count is not None:
            raise MaterializeError(f"replicated job {rj_name!r}: JobSets admit all or nothing")
        template = dict(rj.get("template") or {})
        for index in range(replicas):
            job_labels = {
                **labels,
                JOBSET_NAME: name,
                REPLICATED_JOB_NAME: rj_name,
                JOB_INDEX: str(index),
                REPLICATED_JOB_REPLICAS: str(replicas),
                RESTART_ATTEMPT: str((attempts or {}).get(f"{name}-{rj_name}-{index}", 0)),
            }
            job_meta = _clean_meta(dict(template.get("metadata") or {}), namespace, job_labels)
            job_meta["name"] = f"{name}-{rj_name}-{index}"
            job_meta["annotations"] = {
                **(meta.get("annotations") or {}),
                **(job_meta.get("annotations") or {}),
            }
            rj_spec = dict(template.get("spec") or {})
            rj_spec.setdefault("completionMode", "Indexed")
            first_rank = index * int(rj_spec.get("parallelism", 1))
            job_spec = _job_spec(rj_spec, job_labels, inj, first_rank)
            pod_spec = job_spec["template"].setdefault("spec", {})
            pod_spec.setdefault("restartPolicy", "OnFailure")
            if hostnames:
                pod_spec.setdefault("subdomain", subdomain)
            jobs.append(
                {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": job_spec}
            )
    return jobs


def jobset_name(workload: Workload, source: Mapping[str, Any]) -> str:
    """The name a JobSet source's Jobs are named after (`<jobset>-<rjob>-<index>`)."""
    meta = source.get("metadata") or {}
    return str(meta.get("name") or _default_name(workload, str(meta.get("generateName", "js-"))))


def _jobs_for_pod_sets(
    workload: Workload,
    namespace: str,
    labels: Mapping[str, str],
    injections: Mapping[str, _Injection],
) -> list[JsonObject]:
    jobs = []
    for ps in workload.spec.pod_sets:
        inj = injections.get(ps.name, _Injection({}, [], None))
        count = inj.count if inj.count is not None else ps.count
        template = ps.template.to_wire()
        template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
        spec: JsonObject = {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "template": _inject_pod_template(
                template,
                labels,
                _Injection(inj.node_selector, inj.tolerations, None, inj.gated_pod_set),
                0,
            ),
        }
        jobs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{workload.metadata.name}-{ps.name}"[:63].rstrip("-."),
                    "namespace": namespace,
                    "labels": dict(labels),
                },
                "spec": spec,
            }
        )
    return jobs


def _kind(obj: JsonObject) -> str:
    """A Job or a Pod (an object from a LIST or the inventory's mirror may carry no kind: a
    Pod's spec has `containers`, a Job's a pod `template`)."""
    kind = obj.get("kind")
    if kind:
        return str(kind)
    return "Pod" if "containers" in (obj.get("spec") or {}) else "Job"


def _resource(obj: JsonObject) -> Resource:
    return Resource.PODS if _kind(obj) == "Pod" else Resource.JOBS


def _job_done(job: JsonObject) -> bool:
    if _kind(job) == "Pod":
        return (job.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


class Materializer:
    """Creates and deletes a workload's Jobs; see the module docstring."""

    def __init__(self, kube: Kube, cluster: str | None = None) -> None:
        self.kube = kube
        self.cluster = cluster
        """This member cluster's name, annotated on the pods it creates."""
        self._namespaces: set[str] = set()
        self.namespace_labels: Mapping[str, Mapping[str, str]] = {}
        """Labels the hub asserts per namespace (its tenant), given to a namespace made here."""
        self._checking: dict[str, asyncio.Future[None]] = {}
        """Namespaces being looked up: a burst of admissions in a namespace not yet known
        waits for one lookup, not one each (a thousand GETs at the start of a burst)."""

    async def ensure_namespace(self, namespace: str) -> None:
        if namespace in self._namespaces:
            return
        check = self._checking.get(namespace)
        if check is None:
            check = asyncio.ensure_future(self._make_namespace(namespace))
            self._checking[namespace] = check
            check.add_done_callback(lambda _: self._checking.pop(namespace, None))
        # Shielded: a caller cancelled (its workload withdrawn) does not cancel the others'.
        await asyncio.shield(check)

    async def _make_namespace(self, namespace: str) -> None:
        try:
            await self.kube.get(Resource.NAMESPACES, None, namespace)
        except K8sNotFoundError:
            with contextlib.suppress(K8sAlreadyExistsError):
                await self.kube.create(
                    Resource.NAMESPACES,
                    None,
                    {
                        "metadata": {
                            "name": namespace,
                            "labels": {
                                **self.namespace_labels.get(namespace, {}),
                                Labels.MANAGED: Labels.MANAGED_VALUE,
                            },
                        }
                    },
                )
        self._namespaces.add(namespace)

    async def ensure(self, jobs: Sequence[JsonObject]) -> list[JsonObject]:
        """Create (or adopt) every Job or Pod in `jobs`, then ungate the Pods (all of them
        exist by then); returns them as they are in the cluster."""
        out = []
        for job in jobs:
            meta = job["metadata"]
            namespace = str(meta["namespace"])
            await self.ensure_namespace(namespace)
            out.append(await self._ensure_job(namespace, job))
        for made in out:
            patch = _ungated_spec(made) if made.get("kind") == "Pod" else None
            if patch is not None:
                meta = made.get("metadata") or {}
                await self.kube.patch(
                    Resource.PODS, str(meta.get("namespace")), str(meta.get("name")), patch
                )
        return out

    async def _ensure_job(self, namespace: str, job: JsonObject) -> JsonObject:
        want = job["metadata"]["labels"]
        name = str(job["metadata"]["name"])
        resource = _resource(job)
        for _ in range(_ATTEMPTS):
            try:
                made = await self.kube.create(resource, namespace, job)
                return {"kind": job["kind"], **made}
            except K8sAlreadyExistsError:
                pass
            except K8sNotFoundError:
                # The namespace went away since we made it: make it again.
                self._namespaces.discard(namespace)
                await self.ensure_namespace(namespace)
                continue
            try:
                existing = {"kind": job["kind"], **await self.kube.get(resource, namespace, name)}
            except K8sNotFoundError:
                continue  # deleted meanwhile: create again
            have = (existing.get("metadata") or {}).get("labels") or {}
            if have.get(Labels.UID) != want[Labels.UID]:
                raise MaterializeError(
                    f"{job['kind'].lower()} {namespace}/{name} exists and belongs to another "
                    "workload"
                )
            # A JobSet's Job of an earlier restart attempt is as stale as an older dispatch's.
            have_attempt = int(have.get(RESTART_ATTEMPT) or 0)
            want_attempt = int(want.get(RESTART_ATTEMPT) or 0)
            if have.get(Labels.GENERATION) == want[Labels.GENERATION]:
                if have_attempt >= want_attempt:
                    return existing  # adopt
            elif int(have.get(Labels.GENERATION) or 0) > int(want[Labels.GENERATION]):
                raise MaterializeError(
                    f"{job['kind'].lower()} {namespace}/{name} belongs to a newer dispatch"
                )
            # An older dispatch (or attempt) of the same workload: it is stale; delete it, wait,
            # create.
            uid = (existing.get("metadata") or {}).get("uid")
            with contextlib.suppress(K8sNotFoundError):
                await self.kube.delete(resource, namespace, name, uid=uid)
            await asyncio.sleep(_PAUSE)
        raise MaterializeError(
            f"{job['kind'].lower()} {namespace}/{name} of an older dispatch is still there after "
            f"{_ATTEMPTS * _PAUSE:.0f}s"
        )

    async def make(
        self,
        plan: Callable[[], Sequence[JsonObject] | None],
        wanted: Callable[[], bool],
        *,
        what: str,
    ) -> list[str] | None:
        """Create (or adopt) the Jobs `plan()` returns for as long as `wanted()`: transient
        errors that outlast the client's own retries are retried here, more slowly each time;
        `plan()` returning None means not now (the agent holds no lease). Returns the Jobs'
        names, or None once no longer wanted; a conflict or an invalid Job raises
        (`MaterializeError`, `K8sClientError`)."""
        delay = 0.5
        while wanted():
            jobs = plan()
            if jobs is None:
                await asyncio.sleep(0.2)
                continue
            try:
                await self.ensure(jobs)
            except K8S_TRANSIENT as exc:
                log.warning("materialising %s: %s; retrying in %.1fs", what, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            return [str(j["metadata"]["name"]) for j in jobs]
        return None

    async def stop(
        self, namespace: str, name: str, mirrored: Sequence[JsonObject], job_names: Sequence[str]
    ) -> None:
        """Delete the Jobs of workload namespace/name. Once `mirrored` (the inventory's) has
        all of `job_names`, those go without a LIST (a selector query over every Job in the
        cluster, on every eviction); while some may still be being created, ask the server."""
        have = {str((j.get("metadata") or {}).get("name")) for j in mirrored}
        if job_names and set(job_names) <= have:
            await self.delete_jobs(mirrored)
        else:
            await self.delete_all(namespace, name)

    async def stop_for_good(self, namespace: str, name: str, job_names: Sequence[str]) -> None:
        """`stop`, however long the cluster's API keeps failing (more slowly each time)."""
        delay = 0.5
        while True:
            try:
                await self.stop(namespace, name, (), job_names)
                return
            except K8S_TRANSIENT as exc:
                log.warning("stopping %s/%s: %s; retrying in %.1fs", namespace, name, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def reap(self, managed: Sequence[JsonObject], held: Container[str]) -> None:
        """Delete the running Jobs and bare Pods among `managed` whose workload is not `held`
        (a finished one runs nothing: a Job's own TTL decides when it goes, a pod stays for
        its logs as a Job's pods do)."""
        for job in managed:
            meta = job.get("metadata") or {}
            key = (meta.get("annotations") or {}).get(Labels.WORKLOAD_ANNOTATION)
            if not key or key in held or meta.get("deletionTimestamp") or _job_done(job):
                continue
            namespace, name = str(meta.get("namespace")), str(meta.get("name"))
            log.warning(
                "deleting %s %s/%s: it runs %s, which this agent does not hold and the hub "
                "did not offer again",
                _kind(job).lower(),
                namespace,
                name,
                key,
            )
            with contextlib.suppress(K8sNotFoundError):
                await self.kube.delete(_resource(job), namespace, name, uid=meta.get("uid"))

    async def delete_all(
        self,
        namespace: str,
        name: str,
        uid: str | None = None,
        *,
        generation: int | None = None,
    ) -> int:
        """Delete every Job and bare Pod made for workload namespace/name (of that uid and
        generation, when given); returns how many."""
        selector = {Labels.NAMESPACE: namespace, Labels.NAME: Labels.value(name)}
        if uid:
            selector[Labels.UID] = uid
        if generation is not None:
            selector[Labels.GENERATION] = str(generation)
        query = labels_selector(selector)
        jobs = (await self.kube.list(Resource.JOBS, label_selector=query)).items
        pods = (await self.kube.list(Resource.PODS, label_selector=query)).items
        bare = [{"kind": "Pod", **p} for p in pods if not p["metadata"].get("ownerReferences")]
        return await self.delete_jobs([{"kind": "Job", **j} for j in jobs] + bare)

    async def delete_jobs(self, jobs: Sequence[JsonObject]) -> int:
        """Delete these Jobs and Pods (each only if it is still the same object); returns
        how many."""
        deleted = 0
        for job in jobs:
            meta = job.get("metadata") or {}
            try:
                await self.kube.delete(
                    _resource(job),
                    meta.get("namespace"),
                    str(meta.get("name")),
                    uid=meta.get("uid"),
                )
                deleted += 1
            except (K8sNotFoundError, K8sConflictError):
                pass  # gone already, or the name now belongs to another Job
        return deleted
