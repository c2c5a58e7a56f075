"""Researcher templates, made by admins: ApplicationProfile, JobTemplate and VolumeBundle.

A researcher names a profile and a mode (`qctl submit --profile gpu-train --mode Slurm …`);
the profile names the template that becomes the Kubernetes object, the flags the researcher
must pass, and the volume bundles every pod of it gets (shared filesystems, datasets, object
stores). Modelled on kjob's objects, extended with a JobSet mode.

Called by: api.kinds (registry), hub (template expansion), qctl (submit, validate).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.batch import JobTemplateSpec, job_spec_errors
from api.meta import Object, StrictModel, dns1123_label_errors, dns1123_subdomain_errors

__all__ = [
    "MODE_FLAGS",
    "ApplicationProfile",
    "ApplicationProfileSpec",
    "EnvVar",
    "JobTemplate",
    "SupportedMode",
    "Volume",
    "VolumeBundle",
    "VolumeBundleSpec",
    "VolumeMount",
]

Mode = Literal["Job", "JobSet", "Slurm", "Interactive"]

# Flags a profile may make required, per mode (kjob's vocabulary, plus JobSet's replicas).
_COMMON_FLAGS = (
    "cmd",
    "request",
    "localqueue",
    "time",
    "priority",
    "pod-template-label",
    "pod-template-annotation",
)
MODE_FLAGS: dict[str, tuple[str, ...]] = {
    "Job": (*_COMMON_FLAGS, "parallelism", "completions"),
    "JobSet": (*_COMMON_FLAGS, "replicas"),
    "Interactive": _COMMON_FLAGS,
    "Slurm": (
        "localqueue",
        "priority",
        "time",
        "array",
        "cpus-per-task",
        "error",
        "gpus-per-task",
        "input",
        "job-name",
        "mem",
        "mem-per-cpu",
        "mem-per-gpu",
        "mem-per-task",
        "nodes",
        "ntasks",
        "ntasks-per-node",
        "output",
        "partition",
        "chdir",
    ),
}
MAX_REQUIRED_FLAGS = 14


class SupportedMode(StrictModel):
    name: Mode
    # Name of the JobTemplate that becomes the object created in this mode.
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
