"""JSON Schema export of every registered kind, by apiVersion and kind.

Feeds the hub's OpenAPI document and CRD manifests; `qctl schema` prints it.
Called by: qctl.commands.schema, hub (OpenAPI), tests.
"""

from __future__ import annotations

from typing import Any

from api.kinds import ALL_KINDS
from api.meta import Object

__all__ = ["json_schema", "json_schemas"]


def json_schema(kind: type[Object]) -> dict[str, Any]:
    """The wire-form (camelCase) schema of one kind, with its GroupVersionKind attached."""
    schema = kind.model_json_schema(by_alias=True, mode="validation")
    group, _, version = kind.API_VERSION.rpartition("/")
    schema["x-kubernetes-group-version-kind"] = [
        {"group": group, "version": version, "kind": kind.KIND}
    ]
    schema["x-multiq-namespaced"] = kind.NAMESPACED
    return schema


def json_schemas() -> dict[str, dict[str, Any]]:
    """Every kind's schema keyed by `apiVersion/kind`."""
    return {f"{k.API_VERSION}/{k.KIND}": json_schema(k) for k in ALL_KINDS}
