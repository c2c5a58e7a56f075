"""What a Slurm submission becomes: one batch/v1 Job per task, which the hub converts into a
Workload like any submitted Job, and the annotations that keep the Slurm facts on it.

- A plain job is one task. `--nodes` N > 1 makes it an Indexed Job of N pods that run at once
  (parallelism = completions = N): one pod set, admitted whole (a gang). Each pod runs the
  script, with its index as SLURM_NODEID (api.slurm.environment).
- An array is one task (one Job, one Workload) per index. Each task has its own job id,
  state, log and output file, and can be cancelled or depended on alone (`1233_7`); the hub
  counts the array's live tasks to enforce the `%` throttle (hub.placement.holds). An indexed
  form (one Job for the array) would have made those per-task facts a matter of parsing pod
  indices, and the throttle the Job controller's parallelism, which is fixed for all tasks.
- The container runs `sh -c PROLOGUE` with the script text in its environment; requests are
  the options' CPUs, memory and GPUs per node; `--time` is the Job's activeDeadlineSeconds
  (Kubernetes fails it with DeadlineExceeded: Slurm's TIMEOUT); `--chdir` is where the
  prologue changes to; `backoffLimit: 0` (Slurm does not retry a failed batch job).
- `automountServiceAccountToken: false`: a batch job holds no credential for the cluster it
  runs in (a Slurm job has none either; least privilege), and a pod without the token volume
  is cheaper to start. A job template that names a service account or sets the field itself
  decides instead (hub.templates).

Annotations (prefix `slurm.multiq.dev/`) carry what the hub decides with and what squeue and
sacct show: `SlurmFacts.from_annotations` reads them back.

Pure. Called by: hub.slurm (submission), hub.placement.holds and hub.slurm (facts), tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from api.slurm.environment import (
    CLUSTER_ANNOTATION,
    PROLOGUE,
    SCRIPT_VARIABLE,
    BatchContext,
    batch_environment,
)
from api.slurm.ids import TaskIds
from api.slurm.options import DependencySpec, SbatchOptions, parse_dependency

__all__ = [
    "ANNOTATION_PREFIX",
    "DEFAULT_GPU_RESOURCE",
    "DEFAULT_IMAGE",
    "SlurmAnnotations",
    "SlurmFacts",
    "build_job",
    "default_job_name",
    "task_workload_name",
]

ANNOTATION_PREFIX = "slurm.multiq.dev/"
DEFAULT_IMAGE = "docker.io/library/bash:5.2"
"""The image a batch script runs in until a profile (issue #19 item 3) names another."""
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
CONTAINER = "batch"
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")
_BASE_NAME_LIMIT = 40


class SlurmAnnotations:
    JOB_ID = ANNOTATION_PREFIX + "job-id"
    ARRAY_JOB_ID = ANNOTATION_PREFIX + "array-job-id"
    ARRAY_TASK_ID = ANNOTATION_PREFIX + "array-task-id"
    ARRAY_TASKS = ANNOTATION_PREFIX + "array"
    """The whole --array specification (with its throttle)."""
    THROTTLE = ANNOTATION_PREFIX + "array-throttle"
    NAME = ANNOTATION_PREFIX + "job-name"
    USER = ANNOTATION_PREFIX + "user"
    PARTITION = ANNOTATION_PREFIX + "partition"
    NODES = ANNOTATION_PREFIX + "nodes"
    DEPENDENCY = ANNOTATION_PREFIX + "dependency"
    HOLD = ANNOTATION_PREFIX + "hold"
    BEGIN = ANNOTATION_PREFIX + "begin"
    TIME_LIMIT = ANNOTATION_PREFIX + "time-limit"
    OUTPUT = ANNOTATION_PREFIX + "output"
    ERROR = ANNOTATION_PREFIX + "error"
    COMMENT = ANNOTATION_PREFIX + "comment"
    SUBMIT_DIR = ANNOTATION_PREFIX + "submit-dir"


@dataclass(frozen=True, slots=True)
class SlurmFacts:
    """The Slurm side of one task's workload, read back from its annotations."""

    ids: TaskIds
    name: str
    user: str
    partition: str = ""
    nodes: int = 1
    throttle: int | None = None
    dependency: DependencySpec = field(default_factory=DependencySpec)
    held: bool = False
    begin: datetime | None = None
    time_limit_seconds: int | None = None
    output: str | None = None
    error: str | None = None
    comment: str | None = None

    @staticmethod
    def from_annotations(annotations: Mapping[str, str]) -> SlurmFacts | None:
        """None when the workload was not submitted through the Slurm mode, or its
        annotations cannot be read (it is then an ordinary workload)."""
        a = SlurmAnnotations
        job_id = annotations.get(a.JOB_ID)
        if job_id is None:
            return None
        try:
            array_job = annotations.get(a.ARRAY_JOB_ID)
            task = annotations.get(a.ARRAY_TASK_ID)
            ids = TaskIds(
                int(job_id),
                int(array_job) if array_job is not None else None,
                int(task) if task is not None else None,
            )
            dependency = annotations.get(a.DEPENDENCY)
            begin = annotations.get(a.BEGIN)
            throttle = annotations.get(a.THROTTLE)
            limit = annotations.get(a.TIME_LIMIT)
            return SlurmFacts(
                ids=ids,
                name=annotations.get(a.NAME, ""),
                user=annotations.get(a.USER, ""),
                partition=annotations.get(a.PARTITION, ""),
                nodes=int(annotations.get(a.NODES, "1")),
                throttle=int(throttle) if throttle else None,
                dependency=parse_dependency(dependency) if dependency else DependencySpec(),
                held=annotations.get(a.HOLD) == "true",
                begin=datetime.fromisoformat(begin) if begin else None,
                time_limit_seconds=int(limit) if limit else None,
                output=annotations.get(a.OUTPUT),
                error=annotations.get(a.ERROR),
                comment=annotations.get(a.COMMENT),
            )
        except ValueError:
            return None


def default_job_name(script_path: str | None, wrap: bool) -> str:
    """sbatch's default job name: the script's file name, or "wrap"."""
    if wrap or not script_path:
        return "wrap"
    return script_path.rstrip("/").rsplit("/", 1)[-1] or "sbatch"


def _label(text: str) -> str:
    base = _NAME_CHARS.sub("-", text.lower()).strip("-")[:_BASE_NAME_LIMIT].strip("-")
    return base or "job"


def task_workload_name(job_name: str, ids: TaskIds, array_size: int = 1) -> str:
    """`<name>-<job id>`, or `<name>-<array id>-<index>` (zero-padded, so names sort in index
    order) for an array task."""
    if ids.array_job_id is None:
        return f"{_label(job_name)}-{ids.job_id}"
    width = len(str(max(array_size - 1, 0)))
    return f"{_label(job_name)}-{ids.array_job_id}-{ids.array_task_id:0{width}d}"


def _escape_all(text: str) -> str:
    # Kubernetes expands `$(VAR)` and reduces `$$` in command, args and env values: every `$`
    # here is meant literally.
    return text.replace("$", "$$")


def _resources(options: SbatchOptions) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": str(options.cpus_per_node)}
    limits: dict[str, str] = {}
    memory = options.memory_per_node_mib
    if memory is not None:
        requests["memory"] = f"{memory}Mi"
    gpus = options.gpus_on_node
    if gpus is not None:
        resource = gpus.kind if gpus.kind and "/" in gpus.kind else DEFAULT_GPU_RESOURCE
        requests[resource] = limits[resource] = str(gpus.count)
    out: dict[str, Any] = {"requests": requests}
    if limits:
        out["limits"] = limits
    return out


def build_job(
    options: SbatchOptions,
    script: str,
    script_args: list[str] | tuple[str, ...],
    ids: TaskIds,
    context: BatchContext,
    *,
    namespace: str,
    queue: str,
    begin: datetime | None = None,
    image: str = DEFAULT_IMAGE,
) -> dict[str, Any]:
    """The batch/v1 Job (wire form) of one task; see the module docstring."""
    array_size = options.array.count if options.array is not None else 1
    name = task_workload_name(context.job_name, ids, array_size)
    nodes = options.nodes
    if nodes > 1:
        # The pods' hostnames, as the Job controller names an Indexed Job's pods.
        context = replace(context, nodelist=f"{name}-[0-{nodes - 1}]")
    env = batch_environment(options, ids, context)
    env_list: list[dict[str, Any]] = [{"name": k, "value": _escape_all(v)} for k, v in env.items()]
    env_list += [
        {"name": "SLURMD_NODENAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {
            "name": "SLURM_CLUSTER_NAME",
            "valueFrom": {
                "fieldRef": {"fieldPath": f"metadata.annotations['{CLUSTER_ANNOTATION}']"}
            },
        },
        {"name": SCRIPT_VARIABLE, "value": _escape_all(script)},
    ]
    annotations = _annotations(options, ids, context, begin)
    spec: dict[str, Any] = {
        "parallelism": nodes,
        "completions": nodes,
        "backoffLimit": 0,
        "template": {
            "metadata": {"annotations": {SlurmAnnotations.JOB_ID: str(ids.job_id)}},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": image,
                        "command": [
                            "/bin/sh",
                            "-c",
                            _escape_all(PROLOGUE),
                            "slurm_script",
                            *(_escape_all(a) for a in script_args),
                        ],
                        "env": env_list,
                        "resources": _resources(options),
                    }
                ],
            },
        },
    }
    if nodes > 1:
        spec["completionMode"] = "Indexed"
        spec["template"]["spec"]["subdomain"] = name
    if options.time_limit_seconds is not None:
        spec["activeDeadlineSeconds"] = options.time_limit_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"multiq.dev/queue-name": queue},
            "annotations": annotations,
        },
        "spec": spec,
    }


def _annotations(
    options: SbatchOptions, ids: TaskIds, context: BatchContext, begin: datetime | None
) -> dict[str, str]:
    a = SlurmAnnotations
    out = {
        a.JOB_ID: str(ids.job_id),
        a.NAME: context.job_name,
        a.USER: context.user,
        a.PARTITION: context.partition,
        a.NODES: str(options.nodes),
        a.SUBMIT_DIR: context.submit_dir,
    }
    if ids.array_job_id is not None and options.array is not None:
        out[a.ARRAY_JOB_ID] = str(ids.array_job_id)
        out[a.ARRAY_TASK_ID] = str(ids.array_task_id)
        out[a.ARRAY_TASKS] = str(options.array)
        if options.array.throttle is not None:
            out[a.THROTTLE] = str(options.array.throttle)
    dependency = options.dependency
    if dependency.terms or dependency.singleton:
        out[a.DEPENDENCY] = _dependency_text(dependency)
    if options.hold:
        out[a.HOLD] = "true"
    if begin is not None:
        out[a.BEGIN] = begin.isoformat()
    if options.time_limit_seconds is not None:
        out[a.TIME_LIMIT] = str(options.time_limit_seconds)
    if options.output is not None:
        out[a.OUTPUT] = options.output
    if options.error is not None:
        out[a.ERROR] = options.error
    if options.comment is not None:
        out[a.COMMENT] = options.comment
    return out


def _dependency_text(spec: DependencySpec) -> str:
    terms = [f"{d.type}:{':'.join(d.job_ids)}" for d in spec.terms]
    if spec.singleton:
        terms.append("singleton")
    return ("?" if spec.any_of else ",").join(terms)
