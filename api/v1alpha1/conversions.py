"""Conversions from the jobs users submit to Workloads: batch/v1 Job, both JobSet kinds
(upstream jobset.x-k8s.io/v1alpha2 and multiq.dev/v1alpha1) and pod groups.

The labels and annotations read here are Kueue's, under both prefixes — `multiq.dev/` and
`kueue.x-k8s.io/` — so Kueue users migrate without touching their YAML (kueue.md §9.2):
queue name, priority class, maximum execution time, partial admission (min parallelism),
topology requests on pod templates (§4.1) and pod groups. The two spellings of one key may
both be present only with the same value.

Every problem is a FieldError addressed into the *source* object (e.g.
`metadata.labels[multiq.dev/queue-name]` or
`spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]`), raised together as a
`ConversionError`. The Workload's own rules are applied to the result and their paths mapped
back to where the user wrote the value.

Called by: the hub's submit handler, qctl (dry runs), tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.errors import FieldError, ObjectInvalidError, Path
from api.k8s import jobset as upstream
from api.k8s.batch import COMPLETION_INDEX_LABEL, Job, pods_count
from api.k8s.pod import Container, Pod, PodTemplateSpec
from api.meta import Object, ObjectMeta, OwnerReference
from api.v1alpha1 import jobset as multiq
from api.v1alpha1.workload import (
    DEFAULT_POD_SET_NAME,
    PodSet,
    PodSetSliceTopologyConstraint,
    PodSetTopologyRequest,
    PriorityClassSource,
    Workload,
    WorkloadSpec,
)

__all__ = [
    "ANNOTATION_PREFIXES",
    "POD_GROUP_WAITING_ANNOTATION",
    "ConversionError",
    "Keys",
    "pod_set_names",
    "to_workload",
    "workload_from_job",
    "workload_from_jobset",
    "workload_from_pods",
    "workload_name",
]

ANNOTATION_PREFIXES = ("multiq.dev/", "kueue.x-k8s.io/")
"""Label/annotation prefixes read, in order of precedence: ours, then Kueue's."""


class Keys:
    """Label and annotation names (without prefix) that conversions read, in one place."""

    QUEUE_NAME = "queue-name"
    PRIORITY_CLASS = "priority-class"
    MAX_EXEC_TIME = "max-exec-time-seconds"
    JOB_MIN_PARALLELISM = "job-min-parallelism"
    POD_GROUP_NAME = "pod-group-name"
    POD_GROUP_TOTAL_COUNT = "pod-group-total-count"
    # Workload topologyRequest field -> pod-template annotation.
    TOPOLOGY: Mapping[str, str] = {
        "required": "podset-required-topology",
        "preferred": "podset-preferred-topology",
        "unconstrained": "podset-unconstrained-topology",
        "podSetSliceRequiredTopology": "podset-slice-required-topology",
        "podSetSliceSize": "podset-slice-size",
        "podSetSliceRequiredTopologyConstraints": "podset-slice-required-topology-constraints",
        "podSetGroupName": "podset-group-name",
    }
    # Annotations MultiQ writes on the Workload to name what it was made from.
    SOURCE_API_VERSION = "multiq.dev/source-api-version"
    SOURCE_KIND = "multiq.dev/source-kind"
    SOURCE_NAME = "multiq.dev/source-name"


WORKLOAD_PRIORITY_CLASS_SOURCE: PriorityClassSource = "multiq.dev/workloadpriorityclass"
MAX_NAME_LENGTH = 253
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_CONSTRAINTS = TypeAdapter(list[PodSetSliceTopologyConstraint])


class ConversionError(ObjectInvalidError):
    """A job could not become a Workload; `errors` are addressed into the job."""


# --- reading prefixed keys ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Found:
    key: str
    value: str
    path: Path


def _lookup(
    values: Mapping[str, str], name: str, path: Path, errors: list[FieldError]
) -> _Found | None:
    """The value under `multiq.dev/<name>` or `kueue.x-k8s.io/<name>`; both must agree."""
    found: _Found | None = None
    for prefix in ANNOTATION_PREFIXES:
        key = prefix + name
        if key not in values:
            continue
        if found is None:
            found = _Found(key, values[key], path.key(key))
        elif values[key] != found.value:
            errors.append(
                FieldError.invalid(
                    path.key(key), values[key], f"conflicts with {found.key}={found.value!r}"
                )
            )
    return found


def _parse_int(found: _Found, errors: list[FieldError]) -> int | None:
    try:
        return int(found.value)
    except ValueError:
        errors.append(FieldError.invalid(found.path, found.value, "must be an integer"))
        return None


# --- the shared build -----------------------------------------------------------------------


@dataclass
class _PodSetSource:
    """Where one pod set comes from in the source object, for values and error paths."""

    name: str
    template: PodTemplateSpec
    count: int
    template_path: Path
    count_path: Path
    name_path: Path | None = None
    pod_index_label: str | None = None
    sub_group: tuple[str, int] | None = None
    min_count: int | None = None
    min_count_path: Path | None = None


@dataclass
class _Build:
    source: Object
    errors: list[FieldError] = field(default_factory=list)
    # The caller hands the source over (it was parsed for this conversion alone): the
    # Workload may share its pod templates instead of copying them.
    take_ownership: bool = False
    # The caller checked the source by its kind's rules (the hub's decode): the pod templates
    # the Workload takes from it are not checked again (Workload.semantic_errors).
    source_checked: bool = False
    # Workload path prefix -> source path prefix, for mapping the Workload's own errors back.
    # Kept as given and rendered only for an error: most conversions have none.
    paths: dict[str, Path | str] = field(default_factory=dict)

    def map_path(self, workload_prefix: str, source: Path | str) -> None:
        self.paths[workload_prefix] = source

    def translate(self, error: FieldError) -> FieldError:
        for prefix in sorted(self.paths, key=len, reverse=True):
            rest = error.path[len(prefix) :]
            if error.path.startswith(prefix) and (rest == "" or rest[0] in ".["):
                return replace(error, path=f"{self.paths[prefix]}{rest}")
        return error


def workload_name(kind: str, name: str) -> str:
    """`<kind>-<name>`, shortened with a stable hash when longer than a Kubernetes name."""
    base = f"{kind.lower()}-{name}"
    if len(base) <= MAX_NAME_LENGTH:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{base[: MAX_NAME_LENGTH - 9].rstrip('-.')}-{digest}"


def _name_for(kind: str, source: Object) -> str:
    """The Workload's name, or its generateName prefix when the source only has one."""
    meta = source.metadata
    if meta.name:
        return workload_name(kind, meta.name)
    return workload_name(kind, meta.generate_name or "")


def _topology_request(
    build: _Build, ps: _PodSetSource, workload_path: str
) -> PodSetTopologyRequest | None:
    annotations = ps.template.metadata.annotations
    apath = ps.template_path.child("metadata", "annotations")
    values: dict[str, Any] = {}
    for field_name, suffix in Keys.TOPOLOGY.items():
        found = _lookup(annotations, suffix, apath, build.errors)
        if found is None:
            continue
        build.map_path(f"{workload_path}.{field_name}", found.path)
        if field_name == "unconstrained":
            if found.value not in _TRUE | _FALSE:
                build.errors.append(
                    FieldError.invalid(found.path, found.value, "must be a boolean value")
                )
                continue
            values[field_name] = found.value in _TRUE
        elif field_name == "podSetSliceSize":
            try:
                values[field_name] = int(found.value)
            except ValueError:
                build.errors.append(
                    FieldError.invalid(found.path, found.value, "must be a numeric value")
                )
        elif field_name == "podSetSliceRequiredTopologyConstraints":
            try:
                values[field_name] = _CONSTRAINTS.validate_json(found.value)
            except ValidationError as exc:
                build.errors.append(
                    FieldError.invalid(
                        found.path,
                        found.value,
                        "must be a JSON array of {topology, size} objects: "
                        + "; ".join(e["msg"] for e in exc.errors(include_url=False)),
                    )
                )
        else:
            values[field_name] = found.value
    build.map_path(workload_path, apath)
    if not values and ps.pod_index_label is None:
        return None
    request = PodSetTopologyRequest.model_validate(values)
    request.pod_index_label = ps.pod_index_label
    if ps.sub_group is not None:
        request.sub_group_index_label, request.sub_group_count = ps.sub_group
    return request


def _build_workload(
    build: _Build,
    meta: ObjectMeta,
    meta_path: Path,
    pod_sets: Sequence[_PodSetSource],
    pod_sets_path: Path,
    priority_classes: Mapping[str, int] | None,
    default_queue_name: str | None,
    name: str,
) -> Workload:
    errors = build.errors
    labels_path = meta_path.child("labels")
    queue = _lookup(meta.labels, Keys.QUEUE_NAME, labels_path, errors)
    if queue is None and default_queue_name is not None:
        # The namespace's default LocalQueue (Kueue: a LocalQueue named "default") applies.
        queue = _Found("", default_queue_name, labels_path)
    if queue is None:
        errors.append(
            FieldError.required(
                labels_path.key(ANNOTATION_PREFIXES[0] + Keys.QUEUE_NAME),
                f"a queue name is required: label the {build.source.KIND} with "
                f"{ANNOTATION_PREFIXES[0]}{Keys.QUEUE_NAME} (or "
                f"{ANNOTATION_PREFIXES[1]}{Keys.QUEUE_NAME}) naming a LocalQueue",
            )
        )
    else:
        build.map_path("spec.queueName", queue.path)
    spec = WorkloadSpec(queue_name=queue.value if queue else "")
    priority_class = _lookup(meta.labels, Keys.PRIORITY_CLASS, labels_path, errors)
    if priority_class is not None:
        build.map_path("spec.priorityClassName", priority_class.path)
        spec.priority_class_name = priority_class.value
        spec.priority_class_source = WORKLOAD_PRIORITY_CLASS_SOURCE
        if priority_classes is not None:
            if priority_class.value in priority_classes:
                spec.priority = priority_classes[priority_class.value]
            else:
                errors.append(
                    FieldError.not_found(
                        priority_class.path,
                        priority_class.value,
                        "no WorkloadPriorityClass of that name",
                    )
                )
    max_exec = _lookup(meta.labels, Keys.MAX_EXEC_TIME, labels_path, errors)
    if max_exec is not None:
        build.map_path("spec.maximumExecutionTimeSeconds", max_exec.path)
        spec.maximum_execution_time_seconds = _parse_int(max_exec, errors)
    build.map_path("spec.podSets", pod_sets_path)
    for i, ps in enumerate(pod_sets):
        wpath = f"spec.podSets[{i}]"
        build.map_path(f"{wpath}.template", ps.template_path)
        build.map_path(f"{wpath}.count", ps.count_path)
        if ps.name_path is not None:
            build.map_path(f"{wpath}.name", ps.name_path)
        if ps.min_count_path is not None:
            build.map_path(f"{wpath}.minCount", ps.min_count_path)
        spec.pod_sets.append(
            PodSet(
                name=ps.name,
                template=ps.template if build.take_ownership else ps.template.model_copy(deep=True),
                count=ps.count,
                min_count=ps.min_count,
                topology_request=_topology_request(build, ps, f"{wpath}.topologyRequest"),
            )
        )
    source = build.source
    annotations = {
        Keys.SOURCE_API_VERSION: source.api_version,
        Keys.SOURCE_KIND: source.KIND,
        Keys.SOURCE_NAME: source.metadata.name,
    }
    owners = []
    if source.metadata.uid:
        owners.append(
            OwnerReference(
                api_version=source.api_version,
                kind=source.KIND,
                name=source.metadata.name,
                uid=source.metadata.uid,
                controller=True,
            )
        )
    workload = Workload(
        metadata=ObjectMeta(
            name=name if source.metadata.name else "",
            generate_name=None if source.metadata.name else name,
            namespace=source.metadata.namespace,
            annotations=annotations,
            owner_references=owners,
        ),
        spec=spec,
    )
    build.map_path("metadata", meta_path)
    if not errors:
        for error in workload.semantic_errors(templates_checked=build.source_checked):
            # Priority values are resolved by the hub when it is not given the classes here.
            if priority_classes is None and error.path == "spec.priority":
                continue
            errors.append(build.translate(error))
    if errors:
        raise ConversionError(source.KIND, source.metadata.name, errors)
    return workload


# --- batch/v1 Job ---------------------------------------------------------------------------


def workload_from_job(
    job: Job,
    *,
    priority_classes: Mapping[str, int] | None = None,
    default_queue_name: str | None = None,
    take_ownership: bool = False,
    source_checked: bool = False,
) -> Workload:
    """One pod set "main" of min(parallelism, completions) pods, as Kueue builds it.

    `priority_classes` maps WorkloadPriorityClass names to values; when given, the priority is
    resolved (and an unknown class is an error), otherwise it is left for the hub to resolve.
    `default_queue_name` is used when the job names no queue (the hub passes the namespace's
    default LocalQueue if there is one); without it a missing queue name is an error. Both
    keywords mean the same for every conversion below, as do `take_ownership` (the caller
    gives the object up, so the Workload shares its pod templates rather than copies them) and
    `source_checked` (the caller checked the object by its kind's rules, so the pod templates
    the Workload takes from it are not checked a second time).
    """
    build = _Build(job, take_ownership=take_ownership, source_checked=source_checked)
    count = pods_count(job.spec)
    min_count: int | None = None
    min_path: Path | None = None
    found = _lookup(
        job.metadata.annotations,
        Keys.JOB_MIN_PARALLELISM,
        Path("metadata", "annotations"),
        build.errors,
    )
    if found is not None:
        min_path = found.path
        min_count = _parse_int(found, build.errors)
        if min_count is not None and not 0 < min_count < count:
            build.errors.append(
                FieldError.invalid(
                    found.path,
                    min_count,
                    f"must be greater than 0 and less than the job's pod count {count}",
                )
            )
            min_count = None
    pod_set = _PodSetSource(
        name=DEFAULT_POD_SET_NAME,
        template=job.spec.template,
        count=count,
        template_path=Path("spec", "template"),
        count_path=Path("spec", "parallelism"),
        pod_index_label=COMPLETION_INDEX_LABEL if job.spec.is_indexed else None,
        min_count=min_count,
        min_count_path=min_path,
    )
    return _build_workload(
        build,
        job.metadata,
        Path("metadata"),
        [pod_set],
        Path("spec"),
        priority_classes,
        default_queue_name,
        _name_for("Job", job),
    )


# --- JobSet (both kinds) --------------------------------------------------------------------


def workload_from_jobset(
    js: upstream.JobSet | multiq.JobSet,
    *,
    priority_classes: Mapping[str, int] | None = None,
    default_queue_name: str | None = None,
    take_ownership: bool = False,
    source_checked: bool = False,
) -> Workload:
    """One pod set per replicated job, of replicas × pods per Job; the Jobs of a replicated job
    are topology sub-groups (label jobset.sigs.k8s.io/job-index)."""
    build = _Build(js, take_ownership=take_ownership, source_checked=source_checked)
    rpath = Path("spec", "replicatedJobs")
    pod_sets = []
    for i, rj in enumerate(js.spec.replicated_jobs):
        mode = rj.template.spec.completion_mode or upstream.DEFAULT_COMPLETION_MODE
        pod_sets.append(
            _PodSetSource(
                name=rj.name,
                template=rj.template.spec.template,
                count=rj.replicas * pods_count(rj.template.spec),
                template_path=rpath.index(i).child("template", "spec", "template"),
                count_path=rpath.index(i).child("replicas"),
                name_path=rpath.index(i).child("name"),
                pod_index_label=COMPLETION_INDEX_LABEL if mode == "Indexed" else None,
                sub_group=(upstream.JOB_INDEX_LABEL, rj.replicas),
            )
        )
    return _build_workload(
        build,
        js.metadata,
        Path("metadata"),
        pod_sets,
        rpath,
        priority_classes,
        default_queue_name,
        _name_for("JobSet", js),
    )


# --- pod groups -----------------------------------------------------------------------------


def _container_shape(containers: Sequence[Container]) -> list[dict[str, Any]]:
    return [
        c.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            include={"name", "image", "resources", "ports"},
        )
        for c in containers
    ]


def _role_of(pod: Pod) -> str:
    """Pods with the same scheduling shape (images, resources, ports, placement constraints,
    topology annotations) share a role, i.e. a pod set — per-pod fields such as env, args or
    hostname do not split a group. Kueue's role hash, in spirit."""
    spec = pod.spec
    shape = {
        "containers": _container_shape(spec.containers),
        "initContainers": _container_shape(spec.init_containers),
        "placement": spec.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            include={
                "node_selector",
                "affinity",
                "tolerations",
                "runtime_class_name",
                "priority",
                "priority_class_name",
                "topology_spread_constraints",
                "overhead",
                "resource_claims",
                "resources",
            },
        ),
        "topology": {
            k: v
            for k, v in pod.metadata.annotations.items()
            if any(k == p + s for p in ANNOTATION_PREFIXES for s in Keys.TOPOLOGY.values())
        },
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def pod_set_names(pods: Sequence[Pod]) -> list[str]:
    """The name of the pod set each of a group's `pods` belongs to in the Workload
    `workload_from_pods` makes of them (the agent creates each pod with its pod set's
    flavor)."""
    roles = [_role_of(pod) for pod in pods]
    if len(set(roles)) <= 1:
        return [DEFAULT_POD_SET_NAME] * len(pods)
    return roles


POD_GROUP_WAITING_ANNOTATION = "multiq.dev/pod-group-waiting"
"""On the Workload of a pod group not all of whose pods were given yet: `<given>/<total>`.
Such a Workload waits (the hub does not dispatch it) until the rest arrive."""


def workload_from_pods(
    pods: Sequence[Pod],
    *,
    priority_classes: Mapping[str, int] | None = None,
    default_queue_name: str | None = None,
    take_ownership: bool = False,
    source_checked: bool = False,
    incomplete: bool = False,
) -> Workload:
    """A pod group (pods labelled with one pod-group name and annotated with the group's total
    count) becomes one Workload with a pod set per role; a single pod without a group label
    becomes a one-pod Workload. Error paths are `items[i]…`, as in a v1 List of the pods.

    A group given without all its pods is an error, unless `incomplete`: then its Workload
    has a pod set per role of the pods given so far and `POD_GROUP_WAITING_ANNOTATION` (Kueue
    waits for the group's total count too); made again with every pod, it loses both."""
    if not pods:
        raise ConversionError("Pod", "", [FieldError.required("items", "no pods given")])
    first = pods[0]
    build = _Build(first, take_ownership=take_ownership, source_checked=source_checked)
    errors = build.errors
    items = Path("items")
    group = _lookup(
        first.metadata.labels,
        Keys.POD_GROUP_NAME,
        items.index(0).child("metadata", "labels"),
        errors,
    )
    if group is None:
        if len(pods) > 1:
            errors.append(
                FieldError.required(
                    items.index(0)
                    .child("metadata", "labels")
                    .key(ANNOTATION_PREFIXES[0] + Keys.POD_GROUP_NAME),
                    "several pods form a Workload only as a pod group",
                )
            )
            raise ConversionError("Pod", first.metadata.name, errors)
        single = _PodSetSource(
            name=DEFAULT_POD_SET_NAME,
            template=PodTemplateSpec(
                metadata=ObjectMeta(
                    labels=first.metadata.labels, annotations=first.metadata.annotations
                ),
                spec=first.spec,
            ),
            count=1,
            template_path=items.index(0),
            count_path=items.index(0),
        )
        return _build_workload(
            build,
            first.metadata,
            items.index(0).child("metadata"),
            [single],
            items,
            priority_classes,
            default_queue_name,
            _name_for("Pod", first),
        )
    total: int | None = None
    roles: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        meta_path = items.index(i).child("metadata")
        found = _lookup(pod.metadata.labels, Keys.POD_GROUP_NAME, meta_path.child("labels"), errors)
        if found is None or found.value != group.value:
            errors.append(
                FieldError.invalid(
                    meta_path.child("labels").key(group.key),
                    found.value if found else "",
                    f"every pod of the group must carry {group.key}={group.value}",
                )
            )
        if pod.metadata.namespace != first.metadata.namespace:
            errors.append(
                FieldError.invalid(
                    meta_path.child("namespace"),
                    pod.metadata.namespace or "",
                    "every pod of a group must be in the same namespace",
                )
            )
        for key in (Keys.QUEUE_NAME, Keys.PRIORITY_CLASS):
            mine = _lookup(pod.metadata.labels, key, meta_path.child("labels"), errors)
            theirs = _lookup(first.metadata.labels, key, Path("_"), [])
            if (mine.value if mine else None) != (theirs.value if theirs else None):
                errors.append(
                    FieldError.invalid(
                        meta_path.child("labels").key(ANNOTATION_PREFIXES[0] + key),
                        mine.value if mine else "",
                        "every pod of a group must carry the same value as items[0]",
                    )
                )
        count_found = _lookup(
            pod.metadata.annotations,
            Keys.POD_GROUP_TOTAL_COUNT,
            meta_path.child("annotations"),
            errors,
        )
        if count_found is None:
            errors.append(
                FieldError.required(
                    meta_path.child("annotations").key(
                        ANNOTATION_PREFIXES[0] + Keys.POD_GROUP_TOTAL_COUNT
                    ),
                    "every pod of a group must give the group's total pod count",
                )
            )
        else:
            value = _parse_int(count_found, errors)
            if value is not None and value < 1:
                errors.append(
                    FieldError.invalid(
                        count_found.path, value, "must be greater than or equal to 1"
                    )
                )
            elif value is not None and total is not None and value != total:
                errors.append(
                    FieldError.invalid(
                        count_found.path,
                        value,
                        f"must be the same on every pod of the group ({total})",
                    )
                )
            elif value is not None:
                total = value
        roles.setdefault(_role_of(pod), []).append(i)
    if errors:
        raise ConversionError("Pod", first.metadata.name, errors)
    assert total is not None  # every pod carried a valid, equal count
    if len(pods) > total:
        errors.append(
            FieldError.invalid(
                items,
                len(pods),
                f"the group has more pods than its total count {total}",
            )
        )
    elif len(pods) < total and not incomplete:
        errors.append(
            FieldError.invalid(
                items,
                len(pods),
                f"the group's total count is {total} but only {len(pods)} of its pods were "
                "given: submit the rest to the hub (it waits for them), or every pod of the "
                "group together",
            )
        )
    if errors:
        raise ConversionError("Pod", first.metadata.name, errors)
    pod_sets = []
    for role, members in roles.items():
        j = members[0]
        count = len(members)
        template_meta = ObjectMeta(
            labels=pods[j].metadata.labels, annotations=pods[j].metadata.annotations
        )
        pod_sets.append(
            _PodSetSource(
                name=role if len(roles) > 1 else DEFAULT_POD_SET_NAME,
                template=PodTemplateSpec(metadata=template_meta, spec=pods[j].spec),
                count=count,
                template_path=items.index(j),
                count_path=items,
            )
        )
    workload = _build_workload(
        build,
        first.metadata,
        items.index(0).child("metadata"),
        pod_sets,
        items,
        priority_classes,
        default_queue_name,
        workload_name("pod-group", group.value),
    )
    if len(pods) < total:
        workload.metadata.annotations[POD_GROUP_WAITING_ANNOTATION] = f"{len(pods)}/{total}"
    return workload


# --- dispatch -------------------------------------------------------------------------------


def to_workload(
    obj: Object,
    *,
    priority_classes: Mapping[str, int] | None = None,
    default_queue_name: str | None = None,
    take_ownership: bool = False,
    source_checked: bool = False,
) -> Workload:
    """Any submittable object as a Workload (a Workload is returned as it is)."""
    if isinstance(obj, Workload):
        return obj
    pc, dq = priority_classes, default_queue_name
    own, checked = take_ownership, source_checked
    if isinstance(obj, Job):
        return workload_from_job(
            obj,
            priority_classes=pc,
            default_queue_name=dq,
            take_ownership=own,
            source_checked=checked,
        )
    if isinstance(obj, upstream.JobSet | multiq.JobSet):
        return workload_from_jobset(
            obj,
            priority_classes=pc,
            default_queue_name=dq,
            take_ownership=own,
            source_checked=checked,
        )
    if isinstance(obj, Pod):
        return workload_from_pods(
            [obj],
            priority_classes=pc,
            default_queue_name=dq,
            take_ownership=own,
            source_checked=checked,
        )
    raise ConversionError(
        obj.KIND,
        obj.metadata.name,
        [FieldError.invalid("kind", obj.KIND, "cannot be submitted as a workload")],
    )
