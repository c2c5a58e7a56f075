"""Template expansion: an ApplicationProfile's mode, its JobTemplate and VolumeBundles, and what
a researcher passed, made into the object the hub then submits as `qctl submit` would — a
batch/v1 Job (Job mode), a JobSet of one replicated job (JobSet mode), or, in the Slurm mode,
each task's Job (api.slurm.work) dressed in the template's pod settings.

Only the hub expands, so every client gets the same object: qctl create sends the flags (a
JobRequest), a REST caller the same body, and `?dryRun=All` answers with what would be
submitted. Pure: no I/O, no clock; `resolve` reads the objects through the lookup it is given
(the hub's in-memory mirror), and the generated name's suffix is an argument.

What a request does (kjob's behaviour, paraphrased):
- The object is named `name`, else `<profile>-<mode>-<suffix>`, in the profile's namespace. Its
  labels are the template's plus `multiq.dev/profile` and `multiq.dev/mode`; `localQueue` sets
  `multiq.dev/queue-name`, `priority` `multiq.dev/priority-class`, `time` (Slurm's format)
  `multiq.dev/max-exec-time-seconds` (the workload's maximum execution time).
- `cmd` replaces the first container's command (and drops its args), `requests` are set over
  its requests (kjob replaces them all, which drops a GPU request the template's limit needs;
  the first container is the researcher's, others are the admin's sidecars); `parallelism` and
  `completions` the Job's, `replicas` the JobSet's replicated job's; pod template labels and
  annotations are added to the template's.
- Every bundle's volumes are added to the pod, its mounts and env vars to every container and
  init container, then PROFILE and TASK_NAME (`<namespace>_<profile>`) and USER_ID (who asked).
  kjob also sets TIMESTAMP and TASK_ID (which holds it): left out, so an expansion is a function
  of its inputs and a dry run shows exactly what a submission stores.
- Slurm mode: the task's Job keeps its command, environment (after the template's and the
  bundles'), resources and Job spec; the template gives the first container's image and other
  settings (its `args` dropped: the batch prologue takes positional arguments), the rest of
  the pod (node selector, tolerations, sidecars, volumes) and Job fields the task leaves unset.
  A template that names a service account or sets `automountServiceAccountToken` decides
  whether the pod gets a token (a task alone gets none: api.slurm.work).

Errors (hub.errors, never a 5xx): a profile, template or bundle that does not exist is a 404
naming it; a mode the profile does not offer (naming the ones it does), a flag the mode does not
take, a required flag not given, and a template and bundles that clash (one volume name or
mount path twice) are 422s naming the field.

Called by: hub.http.templates (POST …/applicationprofiles/{name}/instantiate), hub.slurm
(sbatch --profile), tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.errors import FieldError, Path
from api.meta import Object
from api.quantity import QuantityError, parse_quantity
from api.slurm.units import UnitError, parse_time_limit
from api.v1alpha1.templates import (
    MODE_FLAGS,
    ApplicationProfile,
    JobRequest,
    JobTemplate,
    SupportedMode,
    VolumeBundle,
)
from hub.errors import InvalidObjectError, NotFoundError

__all__ = [
    "MODE_LABEL",
    "PROFILE_LABEL",
    "Find",
    "JobOverrides",
    "Resolved",
    "SlurmTask",
    "check_flags",
    "expand",
    "generated_name",
    "mode_of",
    "resolve",
    "sbatch_flags",
    "template_queue",
]

PROFILE_LABEL = "multiq.dev/profile"
MODE_LABEL = "multiq.dev/mode"
QUEUE_LABEL = "multiq.dev/queue-name"
PRIORITY_LABEL = "multiq.dev/priority-class"
MAX_EXEC_TIME_LABEL = "multiq.dev/max-exec-time-seconds"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB = "main"
"""The JobSet mode's one replicated job: its pods are `<jobset>-main-<job>-<pod>`."""
_NAME_LIMIT = 63  # a Job's name is also its pods' label value

Find = Callable[[type[Object], str, str], Object | None]
"""The lookup `resolve` reads through: (kind, name, namespace) → the object or None."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """A profile's mode and the objects it names, all found."""

    profile: ApplicationProfile
    mode: SupportedMode
    template: JobTemplate
    bundles: tuple[VolumeBundle, ...]


@dataclass(frozen=True, slots=True)
class JobOverrides:
    """A Job or JobSet mode request, with what the hub adds: who asks and the suffix of a
    generated name."""

    request: JobRequest
    user: str
    suffix: str


@dataclass(frozen=True, slots=True)
class SlurmTask:
    """One Slurm task's Job (wire form, api.slurm.work.build_job) and the sbatch options given
    (long names without dashes: `partition`, `cpus-per-task`)."""

    job: Mapping[str, Any]
    user: str
    flags: frozenset[str] = field(default_factory=frozenset)


Overrides = JobOverrides | SlurmTask


# --- finding the objects ----------------------------------------------------------------------


def mode_of(profile: ApplicationProfile, mode: str) -> SupportedMode:
    """The profile's supported mode of that name; a 422 naming the ones it offers if none."""
    for supported in profile.spec.supported_modes:
        if supported.name == mode:
            return supported
    offered = [m.name for m in profile.spec.supported_modes]
    detail = f"ApplicationProfile {profile.metadata.name} does not offer the {mode} mode"
    raise InvalidObjectError(
        f"{detail} (it offers: {', '.join(offered) or 'none'})",
        causes=[FieldError.unsupported("mode", mode, offered)],
    )


def resolve(find: Find, namespace: str, profile_name: str, mode: str) -> Resolved:
    """The profile, its mode, the mode's template and the profile's bundles, from `find`."""
    profile = find(ApplicationProfile, profile_name, namespace)
    if not isinstance(profile, ApplicationProfile):
        raise NotFoundError(
            f'applicationprofiles "{profile_name}" not found in namespace {namespace}'
        )
    supported = mode_of(profile, mode)
    named_by = f"named by ApplicationProfile {profile_name}"
    template = find(JobTemplate, supported.template, namespace)
    if not isinstance(template, JobTemplate):
        raise NotFoundError(
            f'jobtemplates "{supported.template}" not found in namespace {namespace} '
            f"({named_by}, mode {mode})"
        )
    bundles: list[VolumeBundle] = []
    for name in profile.spec.volume_bundles:
        bundle = find(VolumeBundle, name, namespace)
        if not isinstance(bundle, VolumeBundle):
            raise NotFoundError(
                f'volumebundles "{name}" not found in namespace {namespace} ({named_by})'
            )
        bundles.append(bundle)
    return Resolved(profile, supported, template, tuple(bundles))


# --- flags ------------------------------------------------------------------------------------


def check_flags(mode: SupportedMode, given: Mapping[str, str]) -> None:
    """`given` maps each flag passed to the field that passed it. A flag the mode does not take
    and a required flag not given are 422s, every such field named."""
    allowed = MODE_FLAGS[mode.name]
    errors = [
        FieldError.forbidden(
            where, f"the {mode.name} mode does not take --{flag} (it takes: {', '.join(allowed)})"
        )
        for flag, where in given.items()
        if flag not in allowed
    ]
    errors += [
        FieldError.required(
            f"--{flag}" if mode.name == "Slurm" else _REQUEST_FIELD.get(flag, flag),
            f"the profile's {mode.name} mode requires --{flag}",
        )
        for flag in mode.required_flags
        if flag not in given
    ]
    if errors:
        raise InvalidObjectError(
            f"the {mode.name} mode's flags: " + "; ".join(f"{e.path}: {e.detail}" for e in errors),
            causes=errors,
        )


def sbatch_flags(given: frozenset[str]) -> dict[str, str]:
    """The sbatch options given (api.slurm.options' SbatchOptions.given) as `check_flags`
    takes them: which options sbatch accepts is api.slurm's to say (it refused the others), so
    only those a profile may require are kept."""
    return {flag: f"--{flag}" for flag in MODE_FLAGS["Slurm"] if flag in given}


_REQUEST_FIELD = {
    "request": "requests",
    "localqueue": "localQueue",
    "pod-template-label": "podTemplateLabels",
    "pod-template-annotation": "podTemplateAnnotations",
}


def _request_errors(request: JobRequest) -> list[FieldError]:
    """What the hub checks of the request's values beyond their types (the expanded object is
    validated again as any submission is)."""
    errors: list[FieldError] = []
    if request.cmd is not None and not request.cmd:
        errors.append(FieldError.required("cmd", "give the command and its arguments"))
    for resource, amount in (request.requests or {}).items():
        try:
            parse_quantity(amount)
        except QuantityError as exc:
            errors.append(FieldError.invalid(Path("requests").key(resource), amount, str(exc)))
    if request.time is not None:
        try:
            parse_time_limit(request.time)
        except (UnitError, ValueError) as exc:
            errors.append(FieldError.invalid("time", request.time, str(exc)))
    return errors


def template_queue(template: JobTemplate) -> str | None:
    """The LocalQueue a template's labels name (ours, else Kueue's), if any."""
    labels = template.template.metadata.labels
    return labels.get(QUEUE_LABEL) or labels.get("kueue.x-k8s.io/queue-name")


def generated_name(profile: str, mode: str, suffix: str) -> str:
    """`<profile>-<mode>-<suffix>` (kjob's generateName), cut to fit a label value."""
    prefix = f"{profile}-{mode.lower()}-"
    return prefix[: _NAME_LIMIT - len(suffix)] + suffix


# --- expansion --------------------------------------------------------------------------------


def expand(
    profile: ApplicationProfile,
    template: JobTemplate,
    bundles: Sequence[VolumeBundle],
    mode: str,
    overrides: Overrides,
) -> dict[str, Any]:
    """The object (wire form) the profile's `mode` makes of `overrides`; see the module
    docstring."""
    supported = mode_of(profile, mode)
    if isinstance(overrides, SlurmTask):
        if mode != "Slurm":
            raise InvalidObjectError(f"a Slurm task cannot use the {mode} mode")
        check_flags(supported, sbatch_flags(overrides.flags))
        return _slurm_job(profile, template, bundles, overrides)
    request = overrides.request
    if mode == "Slurm":
        raise InvalidObjectError(
            "the Slurm mode takes a batch script: use qctl sbatch --profile or qctl create "
            "slurm (POST /apis/slurm.multiq.dev/v1alpha1/namespaces/{ns}/jobs)",
            causes=[FieldError.forbidden("mode", "the Slurm mode is asked through the Slurm API")],
        )
    check_flags(supported, request.flags())
    errors = _request_errors(request)
    if errors:
        raise InvalidObjectError("invalid request", causes=errors)
    namespace = profile.metadata.namespace or "default"
    job_template = template.template.to_wire()
    job_meta = job_template.get("metadata") or {}
    job_template["metadata"] = {}
    spec = job_template["spec"]
    pod = spec["template"]
    pod_meta = pod.setdefault("metadata", {})
    pod_spec = pod["spec"]
    _add_bundles(pod_spec, bundles, template, _profile_env(profile, overrides.user))
    containers = pod_spec["containers"]
    if request.cmd is not None:
        containers[0]["command"] = list(request.cmd)
        # kjob keeps the template's args; a new command with the old one's args is rarely meant.
        containers[0].pop("args", None)
    if request.requests is not None:
        resources = containers[0].setdefault("resources", {})
        resources["requests"] = {**resources.get("requests", {}), **request.requests}
    if request.pod_template_labels:
        pod_meta["labels"] = {**pod_meta.get("labels", {}), **request.pod_template_labels}
    if request.pod_template_annotations:
        pod_meta["annotations"] = {
            **pod_meta.get("annotations", {}),
            **request.pod_template_annotations,
        }
    if not pod_meta:
        del pod["metadata"]
    labels: dict[str, str] = {
        **job_meta.get("labels", {}),
        PROFILE_LABEL: profile.metadata.name,
        MODE_LABEL: mode,
    }
    if request.local_queue is not None:
        labels[QUEUE_LABEL] = request.local_queue
    if request.priority is not None:
        labels[PRIORITY_LABEL] = request.priority
    if request.time is not None:
        seconds = parse_time_limit(request.time)
        if seconds is not None:
            labels[MAX_EXEC_TIME_LABEL] = str(seconds)
    metadata: dict[str, Any] = {
        "name": request.name or generated_name(profile.metadata.name, mode, overrides.suffix),
        "namespace": namespace,
        "labels": labels,
    }
    if job_meta.get("annotations"):
        metadata["annotations"] = dict(job_meta["annotations"])
    if mode == "Job":
        if request.parallelism is not None:
            spec["parallelism"] = request.parallelism
        if request.completions is not None:
            spec["completions"] = request.completions
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}
    if not job_template["metadata"]:
        del job_template["metadata"]
    replicated = {
        "name": REPLICATED_JOB,
        "replicas": 1 if request.replicas is None else request.replicas,
        "template": job_template,
    }
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {"replicatedJobs": [replicated]},
    }


def _profile_env(profile: ApplicationProfile, user: str) -> list[dict[str, str]]:
    task = f"{profile.metadata.namespace}_{profile.metadata.name}"
    return [
        {"name": "PROFILE", "value": task},
        {"name": "TASK_NAME", "value": task},
        {"name": "USER_ID", "value": user},
    ]


def _add_bundles(
    pod_spec: dict[str, Any],
    bundles: Sequence[VolumeBundle],
    template: JobTemplate,
    extra_env: list[dict[str, str]],
) -> None:
    """Add every bundle's volumes to the pod and its mounts and env (then `extra_env`) to every
    container and init container; a volume name or a mount path used twice is a 422."""
    errors: list[FieldError] = []
    volumes: list[dict[str, Any]] = pod_spec.setdefault("volumes", [])
    owner = {v["name"]: f"JobTemplate {template.metadata.name}" for v in volumes}
    mounts: list[dict[str, Any]] = []
    env: list[dict[str, Any]] = []
    for i, bundle in enumerate(bundles):
        wire = bundle.spec.to_wire()
        for j, volume in enumerate(wire.get("volumes", [])):
            name = volume["name"]
            if name in owner:
                errors.append(
                    FieldError.invalid(
                        Path("spec", "volumeBundles").index(i),
                        bundle.metadata.name,
                        f"its volume {name} (volumes[{j}]) is also a volume of {owner[name]}",
                    )
                )
            owner[name] = f"VolumeBundle {bundle.metadata.name}"
            volumes.append(volume)
        mounts += wire.get("containerVolumeMounts", [])
        env += wire.get("envVars", [])
    if not volumes:
        del pod_spec["volumes"]
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind, []):
            taken = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            for mount in mounts:
                if mount["mountPath"] in taken:
                    errors.append(
                        FieldError.invalid(
                            Path("spec", "volumeBundles"),
                            mount["mountPath"],
                            f"mount path {mount['mountPath']} is mounted twice in container "
                            f"{container['name']} of JobTemplate {template.metadata.name}",
                        )
                    )
                taken[mount["mountPath"]] = mount["name"]
            if mounts:
                container["volumeMounts"] = [*container.get("volumeMounts", []), *mounts]
            container["env"] = [*container.get("env", []), *env, *extra_env]
    if errors:
        raise InvalidObjectError(
            f"ApplicationProfile's bundles clash with JobTemplate {template.metadata.name}",
            causes=errors,
        )


def _slurm_job(
    profile: ApplicationProfile,
    template: JobTemplate,
    bundles: Sequence[VolumeBundle],
    task: SlurmTask,
) -> dict[str, Any]:
    # Copied where changed only: the result shares the rest with the task's Job (neither is
    # changed afterwards), which a deep copy per task of a large array would spend most on.
    job = dict(task.job)
    job_template = template.template.to_wire()
    job_meta = job_template.get("metadata") or {}
    template_spec = job_template["spec"]
    template_pod = template_spec["template"]
    task_pod = job["spec"]["template"]
    task_pod_spec = task_pod["spec"]
    (batch,) = task_pod_spec["containers"]
    first, *sidecars = template_pod["spec"]["containers"]
    first.pop("args", None)
    container = {
        **first,
        "name": batch["name"],
        "command": batch["command"],
        "resources": batch["resources"],
    }
    task_fields = {k: v for k, v in task_pod_spec.items() if k != "containers"}
    if {"serviceAccountName", "automountServiceAccountToken"} & template_pod["spec"].keys():
        task_fields.pop("automountServiceAccountToken", None)  # the template's account decides
    pod_spec = {
        **template_pod["spec"],
        **task_fields,
        "containers": [container, *sidecars],
    }
    _add_bundles(pod_spec, bundles, template, _profile_env(profile, task.user))
    # The task's own variables (SLURM_*, the script) come last: they win over the template's.
    container["env"] = [*container["env"], *batch.get("env", [])]
    pod_meta = template_pod.get("metadata") or {}
    task_meta = task_pod.get("metadata") or {}
    merged_pod_meta = {
        key: {**pod_meta.get(key, {}), **task_meta.get(key, {})}
        for key in ("labels", "annotations")
        if pod_meta.get(key) or task_meta.get(key)
    }
    task_spec = {k: v for k, v in job["spec"].items() if k != "template"}
    spec = {k: v for k, v in template_spec.items() if k != "template"}
    spec.update(task_spec)
    spec["template"] = {
        **({"metadata": merged_pod_meta} if merged_pod_meta else {}),
        "spec": pod_spec,
    }
    metadata = job["metadata"] = dict(job["metadata"])
    metadata["labels"] = {
        **job_meta.get("labels", {}),
        **metadata.get("labels", {}),
        PROFILE_LABEL: profile.metadata.name,
        MODE_LABEL: "Slurm",
    }
    if job_meta.get("annotations"):
        metadata["annotations"] = {**job_meta["annotations"], **metadata.get("annotations", {})}
    job["spec"] = spec
    return job
