"""Small helpers for api tests: decode a dict or YAML and get the error lines back."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from api.codec import decode
from api.errors import ObjectInvalidError
from api.kinds import REGISTRY
from api.meta import Object


def errors_of(body: dict[str, Any]) -> list[str]:
    """The error lines decoding `body` produces; empty when it is valid."""
    try:
        decode(copy.deepcopy(body), REGISTRY)
    except ObjectInvalidError as exc:
        return [str(e) for e in exc.errors]
    return []


def decoded(body: dict[str, Any] | str) -> Object:
    if isinstance(body, str):
        body = yaml.safe_load(body)
    assert isinstance(body, dict)
    return decode(copy.deepcopy(body), REGISTRY)


def obj(kind: str, name: str, spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
    }
    if spec is not None:
        body["spec"] = spec
    body.update(extra)
    return body


def cluster_queue(
    name: str = "team-a",
    *,
    cohort: str | None = "dept",
    groups: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body_spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": groups
        if groups is not None
        else [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "10"},
                            {"name": "memory", "nominalQuota": "10Gi"},
                        ],
                    }
                ],
            }
        ],
        **spec,
    }
    if cohort is not None:
        body_spec["cohortName"] = cohort
    return obj("ClusterQueue", name, body_spec)


def flavor(name: str, *resources: tuple[str, str], **limits: str) -> dict[str, Any]:
    """A flavor quota entry: flavor("f", ("cpu", "10"), ("memory", "1Gi"))."""
    return {
        "name": name,
        "resources": [{"name": r, "nominalQuota": q, **limits} for r, q in resources],
    }
