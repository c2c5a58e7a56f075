"""Researcher templates, made by admins: ApplicationProfile, JobTemplate and VolumeBundle.

A researcher names a profile and a mode (`qctl create job --profile gpu-research --cmd …`,
`qctl sbatch --profile gpu-research …`); the profile names the JobTemplate that becomes the
Kubernetes object in that mode, the flags the researcher must pass, and the volume bundles
every container of it gets (shared filesystems, datasets, object stores). Modelled on kjob's
objects; the JobSet mode makes a JobSet of one replicated job from its JobTemplate. The hub
expands them (hub.templates), so every client gets the same object.

What is checked here, when an admin applies them: a profile's modes (known, once each, flags
of their mode), a template's Job (containers, …), a bundle's volumes (one source each) and that
its mounts name its own volumes. What depends on several objects (a mode's template exists, a
bundle's volume does not clash with the template's) is checked when a profile is expanded.

Called by: api.kinds (registry), hub.templates (expansion), hub.slurm (sbatch --profile).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.batch import JobTemplateSpec, job_spec_errors
from api.meta import (
    API_VERSION,
    Int32,
    Object,
    StrictModel,
    dns1123_label_errors,
    dns1123_subdomain_errors,
)

__all__ = [
    "MODES",
    "MODE_FLAGS",
    "ApplicationProfile",
    "ApplicationProfileSpec",
    "EnvVar",
    "JobRequest",
    "JobTemplate",
    "SupportedMode",
    "Volume",
    "VolumeBundle",
    "VolumeBundleSpec",
    "VolumeMount",
]

Mode = Literal["Job", "JobSet", "Slurm"]
MODES: tuple[str, ...] = ("Job", "JobSet", "Slurm")

# The flags each mode accepts (kjob's vocabulary; JobSet adds `replicas`), which are also the
# flags a profile may make required. A flag outside its mode's list is refused, as kjob refuses
# `--replicas` for a Job. The Slurm mode's flags are sbatch's own options (api.slurm.options):
# `qctl create slurm --localqueue Q` is sent as `--partition Q`.
_POD_FLAGS = ("cmd", "request", "localqueue", "time", "priority")
_POD_TEMPLATE_FLAGS = ("pod-template-label", "pod-template-annotation")
MODE_FLAGS: dict[str, tuple[str, ...]] = {
    "Job": (*_POD_FLAGS, "parallelism", "completions", *_POD_TEMPLATE_FLAGS),
    "JobSet": (*_POD_FLAGS, "replicas", *_POD_TEMPLATE_FLAGS),
    "Slurm": (
        "job-name",
        "array",
        "nodes",
        "ntasks",
        "ntasks-per-node",
        "cpus-per-task",
        "mem",
        "mem-per-cpu",
        "gpus",
        "gpus-per-node",
        "gpus-per-task",
        "gres",
        "time",
        "partition",
        "clusters",
        "output",
        "error",
        "chdir",
        "export",
        "dependency",
        "wait",
        "hold",
        "begin",
        "comment",
    ),
}
MAX_REQUIRED_FLAGS = 14

# Each field of a JobRequest and the flag it is (what MODE_FLAGS and requiredFlags name).
REQUEST_FLAGS: dict[str, str] = {
    "cmd": "cmd",
    "parallelism": "parallelism",
    "completions": "completions",
    "replicas": "replicas",
    "requests": "request",
    "localQueue": "localqueue",
    "priority": "priority",
    "time": "time",
    "podTemplateLabels": "pod-template-label",
    "podTemplateAnnotations": "pod-template-annotation",
}


class SupportedMode(StrictModel):
    name: Mode
    # The JobTemplate that becomes the Job (Job mode), the replicated job (JobSet mode) or the
    # pod settings of each batch task (Slurm mode: image, volumes, env, node selection).
    template: str
    required_flags: list[str] = Field(default_factory=list)


class ApplicationProfileSpec(StrictModel):
    supported_modes: list[SupportedMode]
    volume_bundles: list[str] = Field(default_factory=list)


class ApplicationProfile(Object):
    """What researchers pick by name: modes, their templates and required flags, volumes."""

    KIND: ClassVar[str] = "ApplicationProfile"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ap", "profile", "profiles", "applicationprofiles")
    kind: Literal["ApplicationProfile"] = "ApplicationProfile"
    spec: ApplicationProfileSpec

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        mpath = Path("spec", "supportedModes")
        modes = self.spec.supported_modes
        if not modes:
            errors.append(FieldError.required(mpath, "must have at least 1 item"))
        seen: set[str] = set()
        for i, mode in enumerate(modes):
            path = mpath.index(i)
            if mode.name in seen:
                errors.append(FieldError.duplicate(path.child("name"), mode.name))
            seen.add(mode.name)
            errors += dns1123_subdomain_errors(path.child("template"), mode.template)
            errors += _required_flag_errors(path.child("requiredFlags"), mode)
        bpath = Path("spec", "volumeBundles")
        for i, bundle in enumerate(self.spec.volume_bundles):
            errors += dns1123_subdomain_errors(bpath.index(i), bundle)
        return errors


def _required_flag_errors(path: Path, mode: SupportedMode) -> Iterator[FieldError]:
    flags = mode.required_flags
    if len(flags) > MAX_REQUIRED_FLAGS:
        yield FieldError.too_many(path, len(flags), MAX_REQUIRED_FLAGS)
    allowed = MODE_FLAGS[mode.name]
    seen: set[str] = set()
    for i, flag in enumerate(flags):
        if flag not in allowed:
            yield FieldError.unsupported(path.index(i), flag, allowed)
        if flag in seen:
            yield FieldError.duplicate(path.index(i), flag)
        seen.add(flag)


class JobRequest(StrictModel):
    """What a researcher asks of a profile (`qctl create job|jobset --profile P …`): the body
    of `POST …/namespaces/{ns}/applicationprofiles/{name}/instantiate`. Never stored; a field
    left out is a flag not given. The Slurm mode is asked through the Slurm API instead
    (`qctl sbatch --profile P`, `qctl create slurm`), whose options are sbatch's."""

    api_version: Literal["multiq.dev/v1alpha1"] = API_VERSION  # type: ignore[assignment]
    kind: Literal["JobRequest"] = "JobRequest"
    mode: Mode
    name: str | None = None
    """The object's name; without it the hub generates `<profile>-<mode>-<5 characters>`."""
    cmd: list[str] | None = None
    parallelism: Int32 | None = Field(default=None, ge=0)
    completions: Int32 | None = Field(default=None, ge=0)
    replicas: Int32 | None = Field(default=None, ge=0)
    requests: dict[str, str] | None = None
    local_queue: str | None = None
    priority: str | None = None
    time: str | None = None
    """A Slurm-style time limit (`90`, `1:30:00`, `2-00:00:00`): the Job's deadline."""
    pod_template_labels: dict[str, str] | None = None
    pod_template_annotations: dict[str, str] | None = None

    def flags(self) -> dict[str, str]:
        """The flags given, each with the field that gave it."""
        wire = self.model_dump(by_alias=True, exclude_none=True)
        return {flag: field for field, flag in REQUEST_FLAGS.items() if field in wire}


# --- JobTemplate ----------------------------------------------------------------------------


class JobTemplate(Object):
    """The batch/v1 Job a profile's Job and Slurm modes start from (kjob's JobTemplate).

    qctl fills in what the researcher passes (command, requests, parallelism, queue, …);
    the admin's template supplies everything else: image, volumes, security settings.
    """

    KIND: ClassVar[str] = "JobTemplate"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("jt", "jobtemplates")
    kind: Literal["JobTemplate"] = "JobTemplate"
    template: JobTemplateSpec

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        errors += job_spec_errors(Path("template", "spec"), self.template.spec)
        return errors


# --- VolumeBundle ---------------------------------------------------------------------------

# The volume sources a bundle may carry: shared filesystems, claims (including CSI-backed
# object stores such as S3 or GCS mounted through a PVC or an inline CSI volume), config.
_VOLUME_SOURCES = (
    "nfs",
    "persistentVolumeClaim",
    "configMap",
    "secret",
    "csi",
    "emptyDir",
    "hostPath",
    "ephemeral",
    "projected",
)


class Volume(StrictModel):
    """A core/v1 Volume restricted to the sources a bundle may carry; exactly one is set."""

    name: str
    nfs: dict[str, Any] | None = None
    persistent_volume_claim: dict[str, Any] | None = None
    config_map: dict[str, Any] | None = None
    secret: dict[str, Any] | None = None
    csi: dict[str, Any] | None = None
    empty_dir: dict[str, Any] | None = None
    host_path: dict[str, Any] | None = None
    ephemeral: dict[str, Any] | None = None
    projected: dict[str, Any] | None = None

    def sources(self) -> list[str]:
        wire = self.to_wire()
        return [s for s in _VOLUME_SOURCES if s in wire]


class VolumeMount(StrictModel):
    name: str
    mount_path: str
    read_only: bool = False
    sub_path: str | None = None


class EnvVar(StrictModel):
    name: str
    value: str = ""


class VolumeBundleSpec(StrictModel):
    volumes: list[Volume]
    container_volume_mounts: list[VolumeMount] = Field(default_factory=list)
    env_vars: list[EnvVar] = Field(default_factory=list)


class VolumeBundle(Object):
    """Volumes, their mounts and environment, added to every container of a profile's pods."""

    KIND: ClassVar[str] = "VolumeBundle"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vb", "volumebundles")
    kind: Literal["VolumeBundle"] = "VolumeBundle"
    spec: VolumeBundleSpec

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        spec = Path("spec")
        vpath = spec.child("volumes")
        if not self.spec.volumes:
            errors.append(FieldError.required(vpath, "must have at least 1 item"))
        names: set[str] = set()
        for i, vol in enumerate(self.spec.volumes):
            path = vpath.index(i)
            errors += dns1123_label_errors(path.child("name"), vol.name)
            if vol.name in names:
                errors.append(FieldError.duplicate(path.child("name"), vol.name))
            names.add(vol.name)
            sources = vol.sources()
            if len(sources) != 1:
                errors.append(
                    FieldError.invalid(
                        path,
                        ",".join(sources),
                        "must set exactly one volume source of: " + ", ".join(_VOLUME_SOURCES),
                    )
                )
        mpath = spec.child("containerVolumeMounts")
        paths: set[str] = set()
        for i, mount in enumerate(self.spec.container_volume_mounts):
            path = mpath.index(i)
            if mount.name not in names:
                errors.append(
                    FieldError.not_found(path.child("name"), mount.name, "no volume of that name")
                )
            if not mount.mount_path.startswith("/"):
                errors.append(
                    FieldError.invalid(
                        path.child("mountPath"), mount.mount_path, "must be an absolute path"
                    )
                )
            if mount.mount_path in paths:
                errors.append(FieldError.duplicate(path.child("mountPath"), mount.mount_path))
            paths.add(mount.mount_path)
        epath = spec.child("envVars")
        env_names: set[str] = set()
        for i, env in enumerate(self.spec.env_vars):
            if not _is_env_name(env.name):
                errors.append(
                    FieldError.invalid(
                        epath.index(i).child("name"),
                        env.name,
                        "a valid environment variable name must consist of alphabetic "
                        "characters, digits, '_', '-', or '.', and must not start with a digit",
                    )
                )
            if env.name in env_names:
                errors.append(FieldError.duplicate(epath.index(i).child("name"), env.name))
            env_names.add(env.name)
        return errors


def _is_env_name(name: str) -> bool:
    return bool(name) and not name[0].isdigit() and all(c.isalnum() or c in "_-." for c in name)
