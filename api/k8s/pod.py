"""The core/v1 pod subset MultiQ reads: Pod, PodTemplateSpec, PodSpec and Container, strictly
typed so that every field users write in Job/JobSet YAML is accepted and anything else is
rejected, plus the effective pod requests computed exactly as Kubernetes computes them.

Fields MultiQ interprets (containers, resources, scheduling constraints, volumes, hostnames)
are typed models; rarely-interpreted nested structures (probes, security contexts, exotic
volume sources, pod affinity terms) are kept as opaque mappings, so they round-trip untouched.
The field list follows core/v1 as of Kubernetes 1.34 (kubernetes_asyncio's `V1PodSpec` and
`V1Container`).

Called by: api.k8s.batch (job templates), api.k8s.jobset, api.v1alpha1.workload (pod sets),
api.v1alpha1.conversions (pod groups), the agent's snapshot builders (pod requests).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.core import LabelSelector, Toleration
from api.meta import (
    Object,
    ObjectMeta,
    StrictModel,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_map_errors,
)
from api.quantity import Quantity, parse_field

__all__ = [
    "Affinity",
    "CompactModel",
    "ConfigMapKeySelector",
    "Container",
    "ContainerPort",
    "ContainerResizePolicy",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "HostAlias",
    "LocalObjectReference",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectFieldSelector",
    "Pod",
    "PodOS",
    "PodReadinessGate",
    "PodResourceClaim",
    "PodSchedulingGate",
    "PodSpec",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceClaim",
    "ResourceFieldSelector",
    "ResourceList",
    "ResourceRequirements",
    "SecretKeySelector",
    "TopologySpreadConstraint",
    "Volume",
    "VolumeDevice",
    "VolumeMount",
    "add_resources",
    "container_requests",
    "effective_pod_requests",
    "max_resources",
    "pod_spec_errors",
    "pod_template_errors",
    "room_requests",
    "scale_resources",
]

ResourceList = dict[str, Quantity]
RestartPolicy = Literal["Always", "OnFailure", "Never"]
# The only restartPolicy an init container may carry; it makes the container a sidecar.
SIDECAR_RESTART_POLICY = "Always"
# Resources a pod-level `resources` stanza may set (PodLevelResources, Kubernetes 1.32+).
POD_LEVEL_RESOURCES = ("cpu", "memory")
POD_LEVEL_RESOURCE_PREFIX = "hugepages-"


class CompactModel(StrictModel):
    """A StrictModel whose wire form omits empty lists and maps that are empty by default.

    Pod specs have dozens of list fields; writing `volumes: []` and `env: []` everywhere
    would bury what the user wrote (in qctl output and in the objects agents create).
    Empty values that mean something (`emptyDir: {}`, a None-defaulted field) are kept, and
    decoding the compact form gives back an equal object.

    The rule itself is StrictModel's field-level `exclude_if`, applied in pydantic's core:
    a Python model serializer here cost a pass over every field of every nested model on
    every dump (17 % of the hub's CPU when dispatching).
    """


Opaque = dict[str, Any]
"""A nested core/v1 structure MultiQ passes through without interpreting it."""


# --- resources ------------------------------------------------------------------------------


class ResourceClaim(CompactModel):
    """A container's use of one of the pod's dynamic resource claims (DRA)."""

    name: str
    request: str | None = None


class ResourceRequirements(CompactModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)
    claims: list[ResourceClaim] = Field(default_factory=list)

    def defaulted_requests(self) -> ResourceList:
        """Requests as the API server stores them: a resource with only a limit requests it."""
        out = dict(self.requests)
        for name, limit in self.limits.items():
            out.setdefault(name, limit)
        return out


class ContainerResizePolicy(CompactModel):
    resource_name: str
    restart_policy: Literal["NotRequired", "RestartContainer"]


# --- environment ----------------------------------------------------------------------------


class ConfigMapKeySelector(CompactModel):
    name: str = ""
    key: str
    optional: bool | None = None


class SecretKeySelector(CompactModel):
    name: str = ""
    key: str
    optional: bool | None = None


class ObjectFieldSelector(CompactModel):
    api_version: str | None = None
    field_path: str


class ResourceFieldSelector(CompactModel):
    container_name: str | None = None
    resource: str
    divisor: Quantity | None = None


class EnvVarSource(CompactModel):
    config_map_key_ref: ConfigMapKeySelector | None = None
    secret_key_ref: SecretKeySelector | None = None
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    file_key_ref: Opaque | None = None

    def sources(self) -> list[str]:
        return [
            name
            for name, value in (
                ("configMapKeyRef", self.config_map_key_ref),
                ("secretKeyRef", self.secret_key_ref),
                ("fieldRef", self.field_ref),
                ("resourceFieldRef", self.resource_field_ref),
                ("fileKeyRef", self.file_key_ref),
            )
            if value is not None
        ]


class EnvVar(CompactModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class _EnvFromRef(CompactModel):
    name: str = ""
    optional: bool | None = None


class EnvFromSource(CompactModel):
    prefix: str | None = None
    config_map_ref: _EnvFromRef | None = None
    secret_ref: _EnvFromRef | None = None


# --- containers -----------------------------------------------------------------------------


class ContainerPort(CompactModel):
    container_port: int
    name: str | None = None
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class VolumeMount(CompactModel):
    name: str
    mount_path: str
    sub_path: str | None = None
    sub_path_expr: str | None = None
    read_only: bool | None = None
    recursive_read_only: Literal["Disabled", "IfPossible", "Enabled"] | None = None
    mount_propagation: Literal["None", "HostToContainer", "Bidirectional"] | None = None


class VolumeDevice(CompactModel):
    name: str
    device_path: str


class Container(CompactModel):
    """core/v1 Container (also used for init containers; ephemeral ones stay opaque)."""

    name: str
    image: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    working_dir: str | None = None
    env: list[EnvVar] = Field(default_factory=list)
    env_from: list[EnvFromSource] = Field(default_factory=list)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    resize_policy: list[ContainerResizePolicy] = Field(default_factory=list)
    ports: list[ContainerPort] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list)
    volume_devices: list[VolumeDevice] = Field(default_factory=list)
    restart_policy: RestartPolicy | None = None
    restart_policy_rules: list[Opaque] = Field(default_factory=list)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    lifecycle: Opaque | None = None
    liveness_probe: Opaque | None = None
    readiness_probe: Opaque | None = None
    startup_probe: Opaque | None = None
    security_context: Opaque | None = None
    termination_message_path: str | None = None
    termination_message_policy: Literal["File", "FallbackToLogsOnError"] | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None

    @property
    def is_sidecar(self) -> bool:
        """True for an init container that keeps running beside the main containers."""
        return self.restart_policy == SIDECAR_RESTART_POLICY


# --- volumes --------------------------------------------------------------------------------


class _KeyToPath(CompactModel):
    key: str
    path: str
    mode: int | None = None


class ConfigMapVolumeSource(CompactModel):
    name: str = ""
    items: list[_KeyToPath] = Field(default_factory=list)
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(CompactModel):
    secret_name: str = ""
    items: list[_KeyToPath] = Field(default_factory=list)
    default_mode: int | None = None
    optional: bool | None = None


class PersistentVolumeClaimVolumeSource(CompactModel):
    claim_name: str
    read_only: bool | None = None


class NFSVolumeSource(CompactModel):
    server: str
    path: str
    read_only: bool | None = None


class EmptyDirVolumeSource(CompactModel):
    medium: str | None = None
    size_limit: Quantity | None = None


class HostPathVolumeSource(CompactModel):
    path: str
    type: str | None = None


class LocalObjectReference(CompactModel):
    name: str = ""


class CSIVolumeSource(CompactModel):
    driver: str
    read_only: bool | None = None
    fs_type: str | None = None
    volume_attributes: dict[str, str] = Field(default_factory=dict)
    node_publish_secret_ref: LocalObjectReference | None = None


class Volume(CompactModel):
    """A pod volume: a name and exactly one source."""

    name: str
    # The sources MultiQ (volume bundles, qctl) reads are typed; the others pass through.
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None
    nfs: NFSVolumeSource | None = None
    host_path: HostPathVolumeSource | None = None
    csi: CSIVolumeSource | None = None
    projected: Opaque | None = None
    downward_api: Opaque | None = Field(default=None, alias="downwardAPI")
    ephemeral: Opaque | None = None
    image: Opaque | None = None
    aws_elastic_block_store: Opaque | None = None
    azure_disk: Opaque | None = None
    azure_file: Opaque | None = None
    cephfs: Opaque | None = None
    cinder: Opaque | None = None
    fc: Opaque | None = None
    flex_volume: Opaque | None = None
    flocker: Opaque | None = None
    gce_persistent_disk: Opaque | None = None
    git_repo: Opaque | None = None
    glusterfs: Opaque | None = None
    iscsi: Opaque | None = None
    photon_persistent_disk: Opaque | None = None
    portworx_volume: Opaque | None = None
    quobyte: Opaque | None = None
    rbd: Opaque | None = None
    scale_io: Opaque | None = Field(default=None, alias="scaleIO")
    storageos: Opaque | None = None
    vsphere_volume: Opaque | None = None

    def sources(self) -> list[str]:
        """The wire names of the sources set on this volume (valid: exactly one)."""
        out = []
        for name, info in type(self).model_fields.items():
            if name != "name" and getattr(self, name) is not None:
                out.append(info.alias or name)
        return out


# --- scheduling -----------------------------------------------------------------------------


class NodeSelectorRequirement(CompactModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """The rule of k8s.io/component-helpers nodeaffinity for one requirement."""
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if not present or len(self.values) != 1:
            return False
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.operator == "Gt" else have < want

    def errors(self, path: Path) -> Iterator[FieldError]:
        yield from label_key_errors(path.child("key"), self.key)
        vpath = path.child("values")
        if self.operator in ("In", "NotIn") and not self.values:
            yield FieldError.required(vpath, "must be specified when `operator` is 'In' or 'NotIn'")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            yield FieldError.forbidden(
                vpath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1:
                yield FieldError.required(
                    vpath, "must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            elif not self.values[0].lstrip("-").isdigit():
                yield FieldError.invalid(
                    vpath.index(0),
                    self.values[0],
                    "must be an integer when `operator` is 'Lt' or 'Gt'",
                )


class NodeSelectorTerm(CompactModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Label part only; matchFields (metadata.name) is checked by the caller if at all."""
        return all(req.matches(labels) for req in self.match_expressions)


class NodeSelector(CompactModel):
    node_selector_terms: list[NodeSelectorTerm]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Terms are ORed, requirements within a term ANDed (an empty term matches nothing)."""
        return any(
            (term.match_expressions or term.match_fields) and term.matches(labels)
            for term in self.node_selector_terms
        )


class PreferredSchedulingTerm(CompactModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(CompactModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


class Affinity(CompactModel):
    node_affinity: NodeAffinity | None = None
    # Inter-pod (anti-)affinity is left to kube-scheduler; MultiQ passes it through.
    pod_affinity: Opaque | None = None
    pod_anti_affinity: Opaque | None = None


class TopologySpreadConstraint(CompactModel):
    max_skew: int
    topology_key: str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[str] = Field(default_factory=list)


class HostAlias(CompactModel):
    ip: str
    hostnames: list[str] = Field(default_factory=list)


class PodReadinessGate(CompactModel):
    condition_type: str


class PodSchedulingGate(CompactModel):
    name: str


class PodResourceClaim(CompactModel):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodOS(CompactModel):
    name: Literal["linux", "windows"]


# --- pod spec and template ------------------------------------------------------------------


class PodSpec(CompactModel):
    """core/v1 PodSpec: every field of Kubernetes 1.34."""

    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    ephemeral_containers: list[Opaque] = Field(default_factory=list)
    restart_policy: RestartPolicy | None = None
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: Literal["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"] | None = None
    dns_config: Opaque | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_name: str | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    scheduler_name: str | None = None
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    scheduling_group: Opaque | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    runtime_class_name: str | None = None
    overhead: ResourceList = Field(default_factory=dict)
    resources: ResourceRequirements | None = None
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    volumes: list[Volume] = Field(default_factory=list)
    hostname: str | None = None
    hostname_override: str | None = None
    subdomain: str | None = None
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    host_aliases: list[HostAlias] = Field(default_factory=list)
    host_network: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    host_users: bool | None = None
    share_process_namespace: bool | None = None
    enable_service_links: bool | None = None
    security_context: Opaque | None = None
    readiness_gates: list[PodReadinessGate] = Field(default_factory=list)
    os: PodOS | None = None

    def effective_requests(self) -> ResourceList:
        """See `effective_pod_requests`."""
        return effective_pod_requests(self)


class PodTemplateSpec(CompactModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class Pod(Object):
    """core/v1 Pod: read for pod groups (pods labelled with a pod-group name)."""

    KIND: ClassVar[str] = "Pod"
    API_VERSION: ClassVar[str] = "v1"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("po", "pods")
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec
    # Status is the kubelet's; MultiQ reads phases through its own watch, not through here.
    status: Opaque | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        errors += pod_spec_errors(Path("spec"), self.spec)
        return errors


# --- effective requests ---------------------------------------------------------------------


def add_resources(into: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    """into += more, per resource."""
    for name, q in more.items():
        into[name] = into[name] + q if name in into else q


def max_resources(into: dict[str, Quantity], other: Mapping[str, Quantity]) -> None:
    """into = max(into, other), per resource."""
    for name, q in other.items():
        if name not in into or q > into[name]:
            into[name] = q


def scale_resources(resources: Mapping[str, Quantity], factor: int) -> ResourceList:
    return {name: q * factor for name, q in resources.items()}


def container_requests(container: Container) -> ResourceList:
    """One container's requests after API-server defaulting (requests default to limits)."""
    return container.resources.defaulted_requests()


def _is_pod_level_resource(name: str) -> bool:
    return name in POD_LEVEL_RESOURCES or name.startswith(POD_LEVEL_RESOURCE_PREFIX)


def effective_pod_requests(spec: PodSpec) -> ResourceList:
    """What one pod of this spec requests, computed as Kubernetes' `resource.PodRequests`.

    - regular containers and sidecars (init containers with restartPolicy Always) run together,
      so their requests add up;
    - a regular init container runs alone, beside only the sidecars started before it, so it
      needs its own requests plus theirs; a sidecar, while starting, needs itself plus the
      sidecars before it;
    - the pod needs the maximum of those phases; pod-level `resources.requests` (cpu, memory,
      hugepages) replace the container sum; `overhead` (RuntimeClass) is added last.

    Requests default to limits where only a limit is set, as the API server's defaulting does.
    """
    total: ResourceList = {}
    for container in spec.containers:
        add_resources(total, container_requests(container))
    sidecars_so_far: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.init_containers:
        requests = container_requests(container)
        if container.is_sidecar:
            add_resources(total, requests)
            add_resources(sidecars_so_far, requests)
            phase = dict(sidecars_so_far)
        else:
            phase = dict(requests)
            add_resources(phase, sidecars_so_far)
        max_resources(init_peak, phase)
    max_resources(total, init_peak)
    if spec.resources is not None:
        for name, q in spec.resources.defaulted_requests().items():
            if _is_pod_level_resource(name):
                total[name] = q
    add_resources(total, spec.overhead)
    return total


def room_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What one pod of this PodSpec (as the API server returns it) holds on its node, in
    milli-units, with one `pods`: `effective_pod_requests`, as the scheduler counts it. A
    spec this model cannot read (a field of a newer Kubernetes) counts as its one pod, unless
    it is a plain one (`_plain_pod_requests`), whose containers are all there is to read."""
    requests = _plain_pod_requests(spec)
    if requests is None:
        try:
            requests = effective_pod_requests(PodSpec.model_validate(spec))
        except ValueError:
            requests = {}
    amounts = {name: q.milli() for name, q in requests.items()}
    amounts["pods"] = 1000
    return amounts


def _plain_pod_requests(spec: Mapping[str, Any]) -> ResourceList | None:
    """`effective_pod_requests` of a plain spec read from its wire form: one with no init
    containers, no pod-level resources and no overhead, whose pod needs the sum of its
    containers' requests (each defaulted to its limit). None for any other spec, or one whose
    containers cannot be read so: the full model decides those. The agent reads every pod it
    sees placed, and validating a whole PodSpec costs ten times this."""
    if spec.get("initContainers") or spec.get("resources") or spec.get("overhead"):
        return None
    containers = spec.get("containers")
    if type(containers) is not list or not containers:
        return None
    total: ResourceList = {}
    try:
        for container in containers:
            resources = container.get("resources") or {}
            # As `ResourceRequirements.defaulted_requests`: a limit alone is the request.
            defaulted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            add_resources(total, {name: parse_field(raw) for name, raw in defaulted.items()})
    except (AttributeError, TypeError, ValueError):
        return None
    return total


# --- validation (k8s.io/kubernetes pkg/apis/core/validation, the parts MultiQ relies on) ----

_MAX_PORT = 65535


def _non_negative_quantities(path: Path, resources: Mapping[str, Quantity]) -> Iterator[FieldError]:
    for name, q in resources.items():
        yield from label_key_errors(path, name)
        if q.is_negative():
            yield FieldError.invalid(
                path.key(name), q.canonical(), "must be greater than or equal to 0"
            )


def _resource_errors(path: Path, res: ResourceRequirements) -> Iterator[FieldError]:
    # (Paths are made only for what is there: every pod template of every submission and
    # offer passes here, most with no limits, overhead, node selector or template labels.)
    if res.limits:
        yield from _non_negative_quantities(path.child("limits"), res.limits)
    if res.requests:
        yield from _non_negative_quantities(path.child("requests"), res.requests)
    for name, request in res.requests.items():
        limit = res.limits.get(name)
        if limit is not None and request > limit:
            yield FieldError.invalid(
                path.child("requests").key(name),
                request.canonical(),
                f"must be less than or equal to {name} limit of {limit.canonical()}",
            )


def _container_errors(
    path: Path, container: Container, *, init: bool, volumes: set[str]
) -> Iterator[FieldError]:
    yield from dns1123_label_errors(path.child("name"), container.name)
    if not container.image:
        yield FieldError.required(path.child("image"))
    yield from _resource_errors(path.child("resources"), container.resources)
    if container.restart_policy is not None:
        rpath = path.child("restartPolicy")
        if not init:
            yield FieldError.forbidden(rpath, "may not be set for non-init containers")
        elif container.restart_policy != SIDECAR_RESTART_POLICY:
            yield FieldError.unsupported(rpath, container.restart_policy, [SIDECAR_RESTART_POLICY])
    for i, env in enumerate(container.env):
        epath = path.child("env").index(i)
        if not env.name:
            yield FieldError.required(epath.child("name"))
        if env.value_from is not None:
            sources = env.value_from.sources()
            if env.value:
                yield FieldError.invalid(
                    epath.child("valueFrom"),
                    "",
                    "may not be specified when `value` is not empty",
                )
            if len(sources) != 1:
                yield FieldError.invalid(
                    epath.child("valueFrom"),
                    "",
                    "may not have more than one field specified at a time"
                    if sources
                    else "must specify one of: `fieldRef`, `resourceFieldRef`, "
                    "`configMapKeyRef`, `secretKeyRef` or `fileKeyRef`",
                )
    port_names: set[str] = set()
    for i, port in enumerate(container.ports):
        ppath = path.child("ports").index(i)
        if not 1 <= port.container_port <= _MAX_PORT:
            yield FieldError.invalid(
                ppath.child("containerPort"),
                port.container_port,
                "must be between 1 and 65535, inclusive",
            )
        if port.host_port is not None and not 0 <= port.host_port <= _MAX_PORT:
            yield FieldError.invalid(
                ppath.child("hostPort"), port.host_port, "must be between 1 and 65535, inclusive"
            )
        if port.name:
            if port.name in port_names:
                yield FieldError.duplicate(ppath.child("name"), port.name)
            port_names.add(port.name)
    mount_paths: set[str] = set()
    for i, mount in enumerate(container.volume_mounts):
        mpath = path.child("volumeMounts").index(i)
        if mount.name not in volumes:
            yield FieldError.not_found(mpath.child("name"), mount.name)
        if not mount.mount_path:
            yield FieldError.required(mpath.child("mountPath"))
        elif mount.mount_path in mount_paths:
            yield FieldError.invalid(mpath.child("mountPath"), mount.mount_path, "must be unique")
        mount_paths.add(mount.mount_path)
        if mount.sub_path and mount.sub_path_expr:
            yield FieldError.invalid(
                mpath.child("subPathExpr"),
                mount.sub_path_expr,
                "subPathExpr and subPath are mutually exclusive",
            )


def _affinity_errors(path: Path, affinity: Affinity) -> Iterator[FieldError]:
    node = affinity.node_affinity
    if node is None:
        return
    npath = path.child("nodeAffinity")
    required = node.required_during_scheduling_ignored_during_execution
    if required is not None:
        rpath = npath.child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
        if not required.node_selector_terms:
            yield FieldError.required(rpath, "must have at least one node selector term")
        for ti, term in enumerate(required.node_selector_terms):
            for ri, req in enumerate(term.match_expressions):
                yield from req.errors(rpath.index(ti).child("matchExpressions").index(ri))
    ppath = npath.child("preferredDuringSchedulingIgnoredDuringExecution")
    for i, pref in enumerate(node.preferred_during_scheduling_ignored_during_execution):
        if not 1 <= pref.weight <= 100:
            yield FieldError.invalid(
                ppath.index(i).child("weight"), pref.weight, "must be in the range 1-100"
            )
        for ri, req in enumerate(pref.preference.match_expressions):
            yield from req.errors(ppath.index(i).child("preference", "matchExpressions").index(ri))


def pod_spec_errors(path: Path, spec: PodSpec) -> Iterator[FieldError]:
    """The pod-spec rules of the API server that MultiQ needs to trust what it schedules."""
    volume_names: set[str] = set()
    for i, volume in enumerate(spec.volumes):
        vpath = path.child("volumes").index(i)
        yield from dns1123_label_errors(vpath.child("name"), volume.name)
        if volume.name in volume_names:
            yield FieldError.duplicate(vpath.child("name"), volume.name)
        volume_names.add(volume.name)
        sources = volume.sources()
        if not sources:
            yield FieldError.required(vpath, "must specify a volume type")
        elif len(sources) > 1:
            yield FieldError.forbidden(
                vpath.child(sources[1]), "may not specify more than 1 volume type"
            )
    if not spec.containers:
        yield FieldError.required(path.child("containers"))
    seen: set[str] = set()
    groups: Iterable[tuple[str, list[Container], bool]] = (
        ("initContainers", spec.init_containers, True),
        ("containers", spec.containers, False),
    )
    for field, containers, init in groups:
        for i, container in enumerate(containers):
            cpath = path.child(field).index(i)
            if container.name in seen:
                yield FieldError.duplicate(cpath.child("name"), container.name)
            seen.add(container.name)
            yield from _container_errors(cpath, container, init=init, volumes=volume_names)
    if spec.overhead:
        yield from _non_negative_quantities(path.child("overhead"), spec.overhead)
    if spec.resources is not None:
        rpath = path.child("resources")
        yield from _resource_errors(rpath, spec.resources)
        for field_name, values in (
            ("requests", spec.resources.requests),
            ("limits", spec.resources.limits),
        ):
            for name in values:
                if not _is_pod_level_resource(name):
                    yield FieldError.unsupported(
                        rpath.child(field_name).key(name),
                        name,
                        [*POD_LEVEL_RESOURCES, "hugepages-*"],
                    )
    if spec.node_selector:
        yield from label_map_errors(path.child("nodeSelector"), spec.node_selector)
    for i, toleration in enumerate(spec.tolerations):
        yield from toleration.errors(path.child("tolerations").index(i))
    if spec.affinity is not None:
        yield from _affinity_errors(path.child("affinity"), spec.affinity)
    if spec.active_deadline_seconds is not None and spec.active_deadline_seconds <= 0:
        yield FieldError.invalid(
            path.child("activeDeadlineSeconds"),
            spec.active_deadline_seconds,
            "must be between 1 and 2147483647, inclusive",
        )
    if (
        spec.termination_grace_period_seconds is not None
        and spec.termination_grace_period_seconds < 0
    ):
        yield FieldError.invalid(
            path.child("terminationGracePeriodSeconds"),
            spec.termination_grace_period_seconds,
            "must be greater than or equal to 0",
        )
    if spec.hostname:
        yield from dns1123_label_errors(path.child("hostname"), spec.hostname)
    if spec.subdomain:
        yield from dns1123_label_errors(path.child("subdomain"), spec.subdomain)
    if spec.priority_class_name:
        yield from dns1123_subdomain_errors(
            path.child("priorityClassName"), spec.priority_class_name
        )
    for i, constraint in enumerate(spec.topology_spread_constraints):
        tpath = path.child("topologySpreadConstraints").index(i)
        if constraint.max_skew <= 0:
            yield FieldError.invalid(
                tpath.child("maxSkew"), constraint.max_skew, "must be greater than zero"
            )
        yield from label_key_errors(tpath.child("topologyKey"), constraint.topology_key)
    gates: set[str] = set()
    for i, gate in enumerate(spec.scheduling_gates):
        gpath = path.child("schedulingGates").index(i).child("name")
        yield from label_key_errors(gpath, gate.name)
        if gate.name in gates:
            yield FieldError.duplicate(gpath, gate.name)
        gates.add(gate.name)


def pod_template_errors(path: Path, template: PodTemplateSpec) -> Iterator[FieldError]:
    """Rules for a pod template inside a Job, JobSet or Workload: labels, annotations, spec."""
    labels, annotations = template.metadata.labels, template.metadata.annotations
    if labels:
        yield from label_map_errors(path.child("metadata", "labels"), labels)
    if annotations:
        annotations_path = path.child("metadata", "annotations")
        for key in annotations:
            yield from label_key_errors(annotations_path, key)
    yield from pod_spec_errors(path.child("spec"), template.spec)
