"""The three PATCH flavours Kubernetes clients send, applied to JSON objects.

* `application/merge-patch+json` (RFC 7386): `merge_patch`.
* `application/strategic-merge-patch+json`: `strategic_merge_patch`, with the list merge keys
  of the built-in types (`LIST_MERGE_KEYS`) and the `$patch`, `$retainKeys`,
  `$setElementOrder` and `$deleteFromPrimitiveList` directives kubectl emits.
* `application/json-patch+json` (RFC 6902): `json_patch`, delegated to the `jsonpatch` package.

`apply_patch` dispatches on the content type and owns the 415 answers (server-side apply,
strategic merge on custom resources). Called by the PATCH handler in `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

from kubesim.apiserver.validation import check_depth
from kubesim.errors import BadRequestError, UnsupportedMediaTypeError
from kubesim.objects import JsonObject, clone

__all__ = [
    "JSON_PATCH",
    "LIST_MERGE_KEYS",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Field name -> patchMergeKey for the lists of the built-in types we serve. Lists not named
# here are atomic (replaced whole), which is what `patchStrategy` absent means.
LIST_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "addresses": "type",
    "resourceClaims": "name",
}
# Lists of scalars merged as sets (patchStrategy=merge on a primitive list).
PRIMITIVE_MERGE_LISTS = frozenset({"finalizers"})

_DELETE = object()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _list_merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge on containerPort, Service ports on port.
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return LIST_MERGE_KEYS.get(field)


def _merge_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if field in PRIMITIVE_MERGE_LISTS:
        merged = list(original)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = _list_merge_key(field, original + patch)
    if key is None:
        return [clone(v) for v in patch]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    merged = [clone(i) for i in original]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise BadRequestError(f"map: {item} does not contain declared merge key: {key}")
        index = next(
            (n for n, existing in enumerate(merged) if existing.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append(_strip_directives(clone(item)))
        else:
            merged[index] = _merge_map(merged[index], item)
    return merged


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge_map(original: JsonObject, patch: JsonObject) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    result = clone(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged = _merge_map(current, value)
        elif isinstance(value, dict):
            merged = _merge_map({}, value)
        elif isinstance(value, list) and isinstance(current, list):
            merged = _merge_list(key, current, value)
        elif isinstance(value, list):
            merged = _merge_list(key, [], value)
        else:
            merged = value
        if merged is _DELETE:
            result.pop(key, None)
        else:
            result[key] = merged
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def strategic_merge_patch(target: JsonObject, patch: Any) -> JsonObject:
    if not isinstance(patch, dict):
        raise BadRequestError("strategic merge patch body must be a JSON object")
    merged = _merge_map(target, patch)
    if merged is _DELETE:
        raise BadRequestError("a strategic merge patch cannot delete the whole object")
    result: JsonObject = merged
    return result


def json_patch(target: JsonObject, patch: Any) -> JsonObject:
    if not isinstance(patch, list):
        raise BadRequestError(
            "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
        )
    try:
        result: JsonObject = jsonpatch.apply_patch(target, patch, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise BadRequestError(
            f"the server rejected our request due to an error in our request: {error}"
        ) from error
    except (KeyError, TypeError, IndexError) as error:
        raise BadRequestError(f"invalid JSON patch: {error}") from error
    return result


def apply_patch(
    target: JsonObject, body: bytes, content_type: str, *, custom_resource: bool
) -> JsonObject:
    """Apply a PATCH request body of `content_type` to `target` (which is not modified)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == APPLY_PATCH:
        raise UnsupportedMediaTypeError(
            "server-side apply is not supported by kubesim; use client-side kubectl apply"
        )
    if media == STRATEGIC_MERGE_PATCH and custom_resource:
        raise UnsupportedMediaTypeError(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml"
        )
    if media not in (MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH):
        raise UnsupportedMediaTypeError(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml, application/strategic-merge-patch+json"
        )
    try:
        patch = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise BadRequestError(f"error decoding patch: {error!r}") from error
    check_depth(patch)
    if media == JSON_PATCH:
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise BadRequestError(
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        )
    if media == MERGE_PATCH:
        result: JsonObject = merge_patch(target, patch)
        return result
    return strategic_merge_patch(target, patch)
