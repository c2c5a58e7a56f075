"""The catalogue of resource types kubesim serves, as data.

One `ResourceType` per served resource says everything the generic machinery needs: where it
lives in the URL space, its kind, scope, short names and categories (discovery), subresources,
the field selectors it accepts (and where each label reads from), and the kubernetes_asyncio
model used for strict field validation. `ResourceRegistry` holds the built-in catalogue plus
the types CRDs add at run time. Called by discovery, routing, the store and the controllers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["BUILTIN_TYPES", "FieldPath", "ResourceRegistry", "ResourceType"]

FieldPath = tuple[str, ...]

_COMMON_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_META_FIELDS: dict[str, tuple[FieldPath, str]] = {
    "metadata.name": (("metadata", "name"), ""),
    "metadata.namespace": (("metadata", "namespace"), ""),
}


@dataclass(frozen=True)
class ResourceType:
    """Everything the generic API machinery knows about one resource."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    # Extra field-selector labels beyond metadata.name/namespace: label -> (path, default).
    extra_field_selectors: dict[str, tuple[FieldPath, str]] = field(default_factory=dict)
    # kubernetes_asyncio model class used to reject unknown fields; None = schemaless.
    model: str | None = None
    verbs: tuple[str, ...] = _COMMON_VERBS
    # CRD additionalPrinterColumns: (name, type, jsonPath, priority, description).
    printer_columns: tuple[tuple[str, str, str, int, str], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one bucket per (group, plural), independent of version."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def field_selectors(self) -> dict[str, tuple[FieldPath, str]]:
        fields = dict(_META_FIELDS)
        if not self.namespaced:
            fields.pop("metadata.namespace")
        fields.update(self.extra_field_selectors)
        return fields


def _core(
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: frozenset[str] = frozenset(),
    extra_field_selectors: dict[str, tuple[FieldPath, str]] | None = None,
    model: str | None = None,
) -> ResourceType:
    return ResourceType(
        group="",
        version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short_names,
        categories=categories,
        subresources=subresources,
        extra_field_selectors=extra_field_selectors or {},
        model=model,
    )


_POD_FIELDS: dict[str, tuple[FieldPath, str]] = {
    "spec.nodeName": (("spec", "nodeName"), ""),
    "spec.restartPolicy": (("spec", "restartPolicy"), ""),
    "spec.schedulerName": (("spec", "schedulerName"), ""),
    "spec.serviceAccountName": (("spec", "serviceAccountName"), ""),
    "spec.hostNetwork": (("spec", "hostNetwork"), "false"),
    "status.phase": (("status", "phase"), ""),
    "status.podIP": (("status", "podIP"), ""),
    "status.nominatedNodeName": (("status", "nominatedNodeName"), ""),
}
_EVENT_FIELDS: dict[str, tuple[FieldPath, str]] = {
    **{
        f"involvedObject.{name}": (("involvedObject", name), "")
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    },
    "reason": (("reason",), ""),
    "reportingComponent": (("reportingComponent",), ""),
    "source": (("source", "component"), ""),
    "type": (("type",), ""),
}

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core(
        "Namespace",
        "namespaces",
        namespaced=False,
        short_names=("ns",),
        subresources=frozenset({"status", "finalize"}),
        extra_field_selectors={"status.phase": (("status", "phase"), "")},
        model="V1Namespace",
    ),
    _core(
        "Node",
        "nodes",
        namespaced=False,
        short_names=("no",),
        subresources=frozenset({"status"}),
        extra_field_selectors={"spec.unschedulable": (("spec", "unschedulable"), "false")},
        model="V1Node",
    ),
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status", "log", "binding", "eviction"}),
        extra_field_selectors=_POD_FIELDS,
        model="V1Pod",
    ),
    _core(
        "Event",
        "events",
        short_names=("ev",),
        extra_field_selectors=_EVENT_FIELDS,
        model="CoreV1Event",
    ),
    _core("ConfigMap", "configmaps", short_names=("cm",), model="V1ConfigMap"),
    _core(
        "Secret",
        "secrets",
        extra_field_selectors={"type": (("type",), "")},
        model="V1Secret",
    ),
    _core(
        "Service",
        "services",
        short_names=("svc",),
        categories=("all",),
        subresources=frozenset({"status"}),
        model="V1Service",
    ),
    _core(
        "ServiceAccount",
        "serviceaccounts",
        short_names=("sa",),
        subresources=frozenset({"token"}),
        model="V1ServiceAccount",
    ),
    _core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        short_names=("pvc",),
        subresources=frozenset({"status"}),
        model="V1PersistentVolumeClaim",
    ),
    _core("Endpoints", "endpoints", short_names=("ep",), model="V1Endpoints"),
    ResourceType(
        group="coordination.k8s.io",
        version="v1",
        kind="Lease",
        plural="leases",
        singular="lease",
        namespaced=True,
        model="V1Lease",
    ),
    ResourceType(
        group="discovery.k8s.io",
        version="v1",
        kind="EndpointSlice",
        plural="endpointslices",
        singular="endpointslice",
        namespaced=True,
        model="V1EndpointSlice",
    ),
    ResourceType(
        group="batch",
        version="v1",
        kind="Job",
        plural="jobs",
        singular="job",
        namespaced=True,
        categories=("all",),
        subresources=frozenset({"status"}),
        extra_field_selectors={"status.successful": (("status", "succeeded"), "0")},
        model="V1Job",
    ),
    ResourceType(
        group="apps",
        version="v1",
        kind="Deployment",
        plural="deployments",
        singular="deployment",
        namespaced=True,
        short_names=("deploy",),
        categories=("all",),
        subresources=frozenset({"status", "scale"}),
        model="V1Deployment",
    ),
    ResourceType(
        group="apps",
        version="v1",
        kind="ReplicaSet",
        plural="replicasets",
        singular="replicaset",
        namespaced=True,
        short_names=("rs",),
        categories=("all",),
        subresources=frozenset({"status", "scale"}),
        model="V1ReplicaSet",
    ),
    ResourceType(
        group="policy",
        version="v1",
        kind="PodDisruptionBudget",
        plural="poddisruptionbudgets",
        singular="poddisruptionbudget",
        namespaced=True,
        short_names=("pdb",),
        subresources=frozenset({"status"}),
        model="V1PodDisruptionBudget",
    ),
    ResourceType(
        group="apps",
        version="v1",
        kind="StatefulSet",
        plural="statefulsets",
        singular="statefulset",
        namespaced=True,
        short_names=("sts",),
        categories=("all",),
        subresources=frozenset({"status"}),
        model="V1StatefulSet",
    ),
    *(
        ResourceType(
            group="rbac.authorization.k8s.io",
            version="v1",
            kind=kind,
            plural=f"{kind.lower()}s",
            singular=kind.lower(),
            namespaced=namespaced,
            model=f"V1{kind}",
        )
        for kind, namespaced in (
            ("Role", True),
            ("RoleBinding", True),
            ("ClusterRole", False),
            ("ClusterRoleBinding", False),
        )
    ),
    # Reviews are answers computed per request and never stored (kubesim.apiserver.reviews).
    *(
        ResourceType(
            group=group,
            version="v1",
            kind=kind,
            plural=f"{kind.lower()}s",
            singular=kind.lower(),
            namespaced=kind.startswith("Local"),
            verbs=("create",),
        )
        for group, kind in (
            ("authorization.k8s.io", "SelfSubjectAccessReview"),
            ("authorization.k8s.io", "SubjectAccessReview"),
            ("authorization.k8s.io", "LocalSubjectAccessReview"),
            ("authorization.k8s.io", "SelfSubjectRulesReview"),
            ("authentication.k8s.io", "SelfSubjectReview"),
            ("authentication.k8s.io", "TokenReview"),
        )
    ),
    ResourceType(
        group="apiextensions.k8s.io",
        version="v1",
        kind="CustomResourceDefinition",
        plural="customresourcedefinitions",
        singular="customresourcedefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        subresources=frozenset({"status"}),
        model="V1CustomResourceDefinition",
    ),
)


class ResourceRegistry:
    """Built-in types plus those registered by CRDs; looked up by (group, version, plural)."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for resource in types:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        self._by_path[(resource.group, resource.version, resource.plural)] = resource
        self._by_kind[(resource.api_version, resource.kind)] = resource

    def remove(self, resource: ResourceType) -> None:
        self._by_path.pop((resource.group, resource.version, resource.plural), None)
        self._by_kind.pop((resource.api_version, resource.kind), None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def core(self, plural: str) -> ResourceType:
        """A built-in type the controllers rely on; missing means a kubesim bug."""
        for group in (
            "",
            "batch",
            "coordination.k8s.io",
            "apps",
            "policy",
            "discovery.k8s.io",
            "rbac.authorization.k8s.io",
            "apiextensions.k8s.io",
        ):
            for resource in self._by_path.values():
                if resource.group == group and resource.plural == plural:
                    return resource
        raise KeyError(plural)

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions served, core group under ""."""
        out: dict[str, list[str]] = {}
        for resource in self._by_path.values():
            versions = out.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self._by_path.values() if r.group == group and r.version == version]

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_path.values()))
