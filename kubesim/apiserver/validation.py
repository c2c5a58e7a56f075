"""Decoding request bodies and validating objects the way kube-apiserver does.

* `decode_body`: JSON or YAML in, protobuf for the few kinds `kubesim.apiserver.protobuf`
  reads and otherwise refused with the exact 415 kubectl prints,
  duplicate keys remembered for strict field validation; a body nested deeper than
  `MAX_BODY_DEPTH`, with a number Python will not convert (5,000 digits) or not UTF-8 is a
  400, never a 500. `check_depth` is that depth rule, for patches too.
* `check_fields`: the `fieldValidation` query parameter (Strict / Warn / Ignore). Known fields
  come from the kubernetes_asyncio models (`openapi_types` / `attribute_map`), so the set of
  fields tracks the client the agents really use. Unknown fields are rejected under Strict
  (400, "strict decoding error: unknown field ..."), reported as warnings under Warn, and
  dropped in every mode, as a Go decoder would. Wrong JSON types are a 400 in every mode.
* `validate_object`: the few semantic rules clients depend on (names, Job restartPolicy,
  Job terminal conditions needing their interim condition), as 422 InvalidError.

Called by the create/update/patch handlers in `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import yaml
from kubernetes_asyncio.client import models as k8s_models

from kubesim.apiserver.protobuf import decode_protobuf
from kubesim.apiserver.selectors import selector_from_object
from kubesim.errors import BadRequestError, Cause, InvalidError, UnsupportedMediaTypeError
from kubesim.objects import JsonObject
from kubesim.resources import ResourceType

__all__ = [
    "MAX_BODY_DEPTH",
    "FieldValidation",
    "check_depth",
    "check_fields",
    "decode_body",
    "validate_object",
]

# Deeper than any Kubernetes object (a pod template is about 15 levels) and shallow enough
# that nothing recursive (merge patches, copies) reaches Python's recursion limit.
MAX_BODY_DEPTH = 100


def check_depth(value: Any) -> None:
    """A 400 for a value nested deeper than MAX_BODY_DEPTH (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_BODY_DEPTH:
            raise BadRequestError(f"the body is nested more than {MAX_BODY_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


_PROTOBUF_MESSAGE = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json, application/yaml"
)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class FieldValidation:
    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"


class _DuplicateTracker:
    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                self.duplicates.append(key)
            result[key] = value
        return result


def decode_body(body: bytes, content_type: str) -> tuple[Any, list[str]]:
    """Parse a request body; returns the value and any duplicated keys."""
    media = content_type.split(";", 1)[0].strip().lower()
    if "protobuf" in media:
        return decode_protobuf(body, _PROTOBUF_MESSAGE), []
    if media in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            document = yaml.safe_load(body)
        except (yaml.YAMLError, ValueError) as error:  # ValueError: a 5,000-digit integer
            raise BadRequestError(f"error decoding YAML: {error}") from error
        except RecursionError as error:
            raise BadRequestError(
                f"the body is nested more than {MAX_BODY_DEPTH} levels deep"
            ) from error
        check_depth(document)
        return document, []
    if media not in ("", "application/json", "*/*"):
        raise UnsupportedMediaTypeError(_PROTOBUF_MESSAGE)
    tracker = _DuplicateTracker()
    try:
        value = json.loads(body, object_pairs_hook=tracker.hook)
    except ValueError as error:
        raise BadRequestError(f"error decoding JSON: {error}") from error
    except RecursionError as error:
        raise BadRequestError(
            f"the body is nested more than {MAX_BODY_DEPTH} levels deep"
        ) from error
    check_depth(value)
    return value, tracker.duplicates


@cache
def _model_fields(model_name: str) -> dict[str, str] | None:
    model = getattr(k8s_models, model_name, None)
    if model is None:
        return None
    types: dict[str, str] = model.openapi_types
    names: dict[str, str] = model.attribute_map
    return {names[attr]: type_name for attr, type_name in types.items()}


_GO_TYPES = {"int": "int64", "bool": "bool", "float": "float64"}


class _Walker:
    def __init__(self, resource: ResourceType) -> None:
        self.resource = resource
        self.unknown: list[str] = []

    def type_error(self, path: str, value: Any, expected: str) -> BadRequestError:
        got = {
            str: "string",
            bool: "bool",
            int: "number",
            float: "number",
            list: "array",
            dict: "object",
        }.get(type(value), "value")
        kind = self.resource.kind
        return BadRequestError(
            f'{kind} in version "{self.resource.version}" cannot be handled as a {kind}: '
            f"json: cannot unmarshal {got} into Go struct field {path} of type {expected}"
        )

    def walk(self, value: Any, type_name: str, path: str) -> Any:
        if value is None:
            return None
        if type_name == "object":
            return value
        if type_name.startswith("list["):
            if not isinstance(value, list):
                raise self.type_error(path, value, "[]" + type_name[5:-1])
            inner = type_name[5:-1]
            return [self.walk(item, inner, f"{path}[{i}]") for i, item in enumerate(value)]
        if type_name.startswith("dict("):
            if not isinstance(value, dict):
                raise self.type_error(path, value, "map")
            inner = type_name[type_name.index(",") + 1 : -1].strip()
            return {k: self.walk(v, inner, f"{path}[{k}]") for k, v in value.items()}
        if type_name in ("str", "datetime", "date"):
            if isinstance(value, (bool, dict | list)):
                raise self.type_error(path, value, "string")
            if isinstance(value, int | float):
                # Quantities arrive as YAML numbers ("cpu: 1"); the apiserver accepts them.
                return str(value)
            return value
        if type_name in _GO_TYPES:
            ok = {
                "int": isinstance(value, int) and not isinstance(value, bool),
                "bool": isinstance(value, bool),
                "float": isinstance(value, int | float) and not isinstance(value, bool),
            }[type_name]
            if not ok and type_name == "int" and isinstance(value, float) and value.is_integer():
                return int(value)
            if not ok:
                raise self.type_error(path, value, _GO_TYPES[type_name])
            return value
        fields = _model_fields(type_name)
        if fields is None:
            return value
        if not isinstance(value, dict):
            raise self.type_error(path, value, "struct")
        result: dict[str, Any] = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key not in fields:
                self.unknown.append(child)
                continue
            result[key] = self.walk(item, fields[key], child)
        return result


def check_fields(
    obj: JsonObject,
    resource: ResourceType,
    *,
    mode: str,
    duplicates: list[str],
) -> tuple[JsonObject, list[str]]:
    """Prune unknown fields; raise under Strict, return warnings under Warn."""
    if resource.model is None:
        return obj, []
    walker = _Walker(resource)
    pruned = walker.walk(obj, resource.model, "")
    problems = [f'unknown field "{path}"' for path in walker.unknown]
    problems += [f'duplicate field "{key}"' for key in duplicates]
    if not problems or mode == FieldValidation.IGNORE:
        return pruned, []
    if mode == FieldValidation.STRICT:
        raise BadRequestError("strict decoding error: " + ", ".join(problems))
    return pruned, problems


def _name_causes(obj: JsonObject, resource: ResourceType) -> list[Cause]:
    name = obj.get("metadata", {}).get("name", "")
    if not name:
        return [
            Cause(
                "metadata.name",
                "FieldValueRequired",
                "Required value: name or generateName is required",
            )
        ]
    pattern = _DNS_LABEL if resource.plural in ("namespaces", "services") else _DNS_SUBDOMAIN
    if resource.plural in ("nodes", "events", "leases") or resource.group.startswith("rbac"):
        return []
    if len(name) > 253 or not pattern.match(name):
        return [
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        ]
    return []


def _job_causes(obj: JsonObject) -> list[Cause]:
    causes: list[Cause] = []
    template_spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    policy = template_spec.get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        causes.append(
            Cause(
                "spec.template.spec.restartPolicy",
                "FieldValueRequired" if policy is None else "FieldValueNotSupported",
                'Required value: valid values: "OnFailure", "Never"'
                if policy is None
                else f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
            )
        )
    if not template_spec.get("containers"):
        causes.append(
            Cause("spec.template.spec.containers", "FieldValueRequired", "Required value")
        )
    return causes


def job_status_causes(obj: JsonObject) -> list[Cause]:
    """Terminal Job conditions need their interim condition first (1.31+ status validation)."""
    conditions = {
        c.get("type"): c.get("status") for c in obj.get("status", {}).get("conditions") or []
    }
    causes: list[Cause] = []
    if conditions.get("Complete") == "True" and conditions.get("SuccessCriteriaMet") != "True":
        causes.append(
            Cause(
                "status.conditions",
                "FieldValueInvalid",
                "Invalid value: cannot set Complete=True condition without the "
                "SuccessCriteriaMet=true condition",
            )
        )
    if conditions.get("Failed") == "True" and conditions.get("FailureTarget") != "True":
        causes.append(
            Cause(
                "status.conditions",
                "FieldValueInvalid",
                "Invalid value: cannot set Failed=True condition without the "
                "FailureTarget=true condition",
            )
        )
    return causes


def _workload_causes(obj: JsonObject) -> list[Cause]:
    """A Deployment's or ReplicaSet's selector must exist and select its own template."""
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return [Cause("spec.selector", "FieldValueRequired", "Required value")]
    labels = (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    if not selector_from_object(selector).matches(labels):
        shown = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
        return [
            Cause(
                "spec.template.metadata.labels",
                "FieldValueInvalid",
                f"Invalid value: map[string]string{{{shown}}}: `selector` does not match "
                "template `labels`",
            )
        ]
    if spec.get("replicas", 0) < 0:
        return [Cause("spec.replicas", "FieldValueInvalid", "Invalid value: must be >= 0")]
    return []


def validate_object(obj: JsonObject, resource: ResourceType, *, creating: bool) -> None:
    """422 InvalidError for the semantic rules kubesim enforces."""
    causes = _name_causes(obj, resource) if creating else []
    if resource.plural == "jobs" and resource.group == "batch":
        causes += _job_causes(obj)
        causes += job_status_causes(obj)
    if resource.group == "apps" and resource.plural in ("deployments", "replicasets"):
        causes += _workload_causes(obj)
    if resource.group == "policy" and resource.plural == "poddisruptionbudgets":
        spec = obj.get("spec") or {}
        if "minAvailable" in spec and "maxUnavailable" in spec:
            causes.append(
                Cause(
                    "spec",
                    "FieldValueInvalid",
                    "minAvailable and maxUnavailable cannot be both set",
                )
            )
    if (
        resource.plural == "pods"
        and resource.group == ""
        and not obj.get("spec", {}).get("containers")
    ):
        causes.append(Cause("spec.containers", "FieldValueRequired", "Required value"))
    if causes:
        name = obj.get("metadata", {}).get("name", "")
        raise InvalidError.of(resource.kind, resource.group, name, tuple(causes))
