"""Version, discovery and the minimal OpenAPI v3 documents, built from the resource registry.

* `/version` reports 1.32: the GKE kubectl dispatcher installed here picks the kubectl binary
  from the server's minor version.
* `/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>` in the legacy JSON form, and `/api` and `/apis`
  also as aggregated discovery (apidiscovery.k8s.io/v2) when the client asks for it, as
  kubectl 1.32 does first.
* `/openapi/v3` and one document per group-version whose paths carry a `patch` operation with
  `x-kubernetes-group-version-kind` and a `fieldValidation` parameter: exactly what kubectl's
  `supportsQueryParamV3` looks for before it leaves validation to the server.

Called by the routes in `kubesim.apiserver.app`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubesim.resources import ResourceRegistry, ResourceType

__all__ = [
    "AGGREGATED_CONTENT_TYPE",
    "AGGREGATED_MEDIA_TYPE",
    "VERSION_INFO",
    "aggregated",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "openapi_group_version",
    "openapi_root",
]

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "eviction": ["create"],
    "finalize": ["update"],
    "scale": ["get", "patch", "update"],
    "token": ["create"],
}
# Subresources whose kind is not the parent's: (group, version, kind). kubectl's scale client
# finds autoscaling/v1 Scale here.
_SUBRESOURCE_KINDS = {
    "log": ("", "v1", "Pod"),
    "binding": ("", "v1", "Binding"),
    "eviction": ("", "v1", "Eviction"),
    "scale": ("autoscaling", "v1", "Scale"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group_list(types: ResourceRegistry) -> dict[str, Any]:
    groups = []
    for group, versions in sorted(types.group_versions().items()):
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entry(resource: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
        "storageVersionHash": hashlib.sha256(resource.plural.encode()).hexdigest()[:11],
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def api_resource_list(types: ResourceRegistry, group: str, version: str) -> dict[str, Any] | None:
    resources = sorted(types.in_group_version(group, version), key=lambda r: r.plural)
    if not resources:
        return None
    entries = []
    for resource in resources:
        entries.append(_resource_entry(resource))
        for sub in sorted(resource.subresources):
            sub_group, sub_version, sub_kind = _SUBRESOURCE_KINDS.get(
                sub, (resource.group, resource.version, resource.kind)
            )
            entry = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": sub_kind,
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if sub_group != resource.group:
                entry["group"] = sub_group
                entry["version"] = sub_version
            entries.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }


AGGREGATED_MEDIA_TYPE = "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_CONTENT_TYPE = f"application/json;{AGGREGATED_MEDIA_TYPE}"


def _aggregated_resource(resource: ResourceType) -> dict[str, Any]:
    kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": kind,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    subresources = []
    for sub in sorted(resource.subresources):
        sub_group, sub_version, sub_kind = _SUBRESOURCE_KINDS.get(
            sub, (resource.group, resource.version, resource.kind)
        )
        subresources.append(
            {
                "subresource": sub,
                "responseKind": {"group": sub_group, "version": sub_version, "kind": sub_kind},
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated(types: ResourceRegistry, *, core: bool) -> dict[str, Any]:
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api (core) or /apis (the rest)."""
    items = []
    for group, versions in sorted(types.group_versions().items()):
        if (group == "") != core:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": version,
                        "resources": [
                            _aggregated_resource(r)
                            for r in sorted(
                                types.in_group_version(group, version), key=lambda r: r.plural
                            )
                        ],
                        "freshness": "Current",
                    }
                    for version in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root(types: ResourceRegistry) -> dict[str, Any]:
    paths = {}
    for group, versions in types.group_versions().items():
        for version in versions:
            path = _gv_path(group, version)
            digest = (
                hashlib.sha256(
                    ",".join(
                        sorted(r.plural for r in types.in_group_version(group, version))
                    ).encode()
                )
                .hexdigest()[:16]
                .upper()
            )
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def openapi_group_version(
    types: ResourceRegistry, group: str, version: str
) -> dict[str, Any] | None:
    resources = types.in_group_version(group, version)
    if not resources:
        return None
    field_validation = {
        "name": "fieldValidation",
        "in": "query",
        "description": "fieldValidation instructs the server on how to handle objects in the "
        "request containing unknown or duplicate fields.",
        "schema": {"type": "string", "uniqueItems": True},
    }
    paths: dict[str, Any] = {}
    prefix = "/" + _gv_path(group, version)
    for resource in resources:
        gvk = {"group": group, "version": version, "kind": resource.kind}
        scope = f"{prefix}/namespaces/{{namespace}}" if resource.namespaced else prefix
        operation = {
            "operationId": f"patch{resource.kind}",
            "parameters": [field_validation],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{scope}/{resource.plural}/{{name}}"] = {
            "patch": operation,
            "put": {
                **operation,
                "operationId": f"replace{resource.kind}",
                "x-kubernetes-action": "put",
            },
        }
        paths[f"{scope}/{resource.plural}"] = {
            "post": {
                **operation,
                "operationId": f"create{resource.kind}",
                "x-kubernetes-action": "post",
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
