"""The `scale` subresource of Deployments and ReplicaSets (autoscaling/v1 Scale).

`kubectl scale` reads the Scale kind from discovery and PATCHes `<resource>/NAME/scale` with a
merge patch of `spec.replicas`; autoscalers GET and PUT it. The Scale is a view: spec.replicas
is the parent's, status.replicas the parent's status.replicas and status.selector its label
selector as a string. A write changes only the parent's spec.replicas (with optimistic
concurrency on the parent's resourceVersion). Dispatched from `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

from aiohttp import web

from kubesim.apiserver.context import ApiContext, Target, json_response
from kubesim.apiserver.patch import apply_patch
from kubesim.apiserver.validation import decode_body
from kubesim.errors import (
    BadRequestError,
    Cause,
    ConflictError,
    InvalidError,
    MethodNotAllowedError,
)
from kubesim.objects import JsonObject

__all__ = ["handle_scale"]


def _selector_text(selector: JsonObject | None) -> str:
    parts = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for expression in (selector or {}).get("matchExpressions") or []:
        operator = expression.get("operator")
        values = ",".join(expression.get("values") or [])
        if operator == "In":
            parts.append(f"{expression['key']} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{expression['key']} notin ({values})")
        elif operator == "Exists":
            parts.append(str(expression["key"]))
        else:
            parts.append(f"!{expression['key']}")
    return ",".join(parts)


def scale_of(parent: JsonObject) -> JsonObject:
    meta = parent["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": parent.get("spec", {}).get("replicas", 1)},
        "status": {
            "replicas": parent.get("status", {}).get("replicas", 0),
            "selector": _selector_text(parent.get("spec", {}).get("selector")),
        },
    }


async def handle_scale(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    assert target.name is not None
    resource = target.resource
    namespace = target.namespace or ""
    parent = ctx.registry.get(resource, namespace, target.name)
    current = scale_of(parent)
    if request.method == "GET":
        return json_response(current)
    raw = await request.read()
    if request.method == "PATCH":
        wanted = apply_patch(
            current, raw, request.headers.get("Content-Type", ""), custom_resource=False
        )
    elif request.method == "PUT":
        wanted, _ = decode_body(raw, request.headers.get("Content-Type", ""))
    else:
        raise MethodNotAllowedError(
            "the server does not allow this method on the requested resource"
        )
    if not isinstance(wanted, dict):
        raise BadRequestError("the body of the request must be a Scale object")
    version = (wanted.get("metadata") or {}).get("resourceVersion")
    if version and version != parent["metadata"]["resourceVersion"]:
        raise ConflictError.stale(resource.plural, resource.group, target.name)
    replicas = (wanted.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or replicas < 0:
        raise InvalidError.of(
            "Scale",
            "autoscaling",
            target.name,
            (Cause("spec.replicas", "FieldValueInvalid", "must be greater than or equal to 0"),),
        )

    def resize(obj: JsonObject) -> None:
        obj.setdefault("spec", {})["replicas"] = replicas

    updated = ctx.registry.mutate(resource, namespace, target.name, resize, touches=("spec",))
    return json_response(scale_of(updated or parent))
