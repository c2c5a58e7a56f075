"""CustomResourceDefinitions: serving their resources and validating them against the schema.

On every CRD change the served versions are registered with the `ResourceRegistry`
synchronously (inside the store event) so a custom resource can be created right after its
CRD, and a validator built from the storage version's `openAPIV3Schema` is installed: a
structural-schema subset (types, int-or-string, required, enum, nullable, min/max, items,
additionalProperties, preserve-unknown-fields) with pruning of unknown fields, 400 under
Strict field validation and 422 InvalidError on type errors. The controller loop then sets the
NamesAccepted and Established conditions. Deleting a CRD removes its resources and objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.apiserver.validation import FieldValidation
from kubesim.controllers.base import QueueController
from kubesim.errors import BadRequestError, Cause, InvalidError
from kubesim.objects import JsonObject, rfc3339
from kubesim.resources import ResourceType

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["CrdController", "SchemaValidator"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class SchemaValidator:
    """Validates and prunes custom resources of one kind against an openAPIV3Schema."""

    def __init__(self, resource: ResourceType, schema: dict[str, Any]) -> None:
        self.resource = resource
        self.schema = schema

    def __call__(self, obj: JsonObject, mode: str) -> tuple[JsonObject, list[str]]:
        unknown: list[str] = []
        causes: list[Cause] = []
        metadata = obj.get("metadata")
        body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        root = dict(self.schema)
        properties = {
            k: v
            for k, v in (root.get("properties") or {}).items()
            if k not in ("metadata", "apiVersion", "kind")
        }
        root["properties"] = properties
        pruned = self._walk(body, root, "", unknown, causes)
        result: JsonObject = {**pruned}
        for key in ("apiVersion", "kind"):
            if key in obj:
                result[key] = obj[key]
        if metadata is not None:
            result["metadata"] = metadata
        if causes:
            name = (metadata or {}).get("name", "")
            raise InvalidError.of(self.resource.kind, self.resource.group, name, tuple(causes))
        problems = [f'unknown field "{path}"' for path in unknown]
        if problems and mode == FieldValidation.STRICT:
            raise BadRequestError("strict decoding error: " + ", ".join(problems))
        return result, problems if mode == FieldValidation.WARN else []

    def _walk(
        self,
        value: Any,
        schema: dict[str, Any],
        path: str,
        unknown: list[str],
        causes: list[Cause],
    ) -> Any:
        if value is None:
            if not schema.get("nullable") and schema.get("type"):
                causes.append(
                    Cause(
                        path,
                        "FieldValueRequired",
                        f"Required value: {path} in body must not be null",
                    )
                )
            return value
        if schema.get("x-kubernetes-int-or-string"):
            if isinstance(value, bool) or not isinstance(value, int | str):
                causes.append(self._type_cause(path, value, "integer or string"))
            return value
        expected = schema.get("type")
        if expected in _JSON_TYPES:
            ok = isinstance(value, _JSON_TYPES[expected]) and not (
                expected in ("integer", "number") and isinstance(value, bool)
            )
            if not ok:
                causes.append(self._type_cause(path, value, expected))
                return value
        if "enum" in schema and value not in schema["enum"]:
            allowed = ", ".join(f'"{v}"' for v in schema["enum"])
            causes.append(
                Cause(
                    path,
                    "FieldValueNotSupported",
                    f'Unsupported value: "{value}": supported values: {allowed}',
                )
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                causes.append(
                    Cause(
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {value}: {path} in body should be greater than or "
                        f"equal to {schema['minimum']}",
                    )
                )
            if "maximum" in schema and value > schema["maximum"]:
                causes.append(
                    Cause(
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {value}: {path} in body should be less than or "
                        f"equal to {schema['maximum']}",
                    )
                )
        if isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, dict):
                return [
                    self._walk(v, items, f"{path}[{i}]", unknown, causes)
                    for i, v in enumerate(value)
                ]
            return value
        if isinstance(value, dict):
            return self._walk_object(value, schema, path, unknown, causes)
        return value

    def _walk_object(
        self,
        value: dict[str, Any],
        schema: dict[str, Any],
        path: str,
        unknown: list[str],
        causes: list[Cause],
    ) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        for required in schema.get("required") or []:
            if required not in value:
                child = f"{path}.{required}" if path else required
                causes.append(Cause(child, "FieldValueRequired", "Required value"))
        result: dict[str, Any] = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key in properties:
                result[key] = self._walk(item, properties[key], child, unknown, causes)
            elif isinstance(additional, dict):
                result[key] = self._walk(item, additional, child, unknown, causes)
            elif preserve or additional is True or (not properties and not schema.get("type")):
                result[key] = item
            else:
                unknown.append(child)
        return result

    @staticmethod
    def _type_cause(path: str, value: Any, expected: str) -> Cause:
        got = {
            bool: "boolean",
            int: "integer",
            float: "number",
            str: "string",
            list: "array",
            dict: "object",
        }.get(type(value), "value")
        return Cause(
            path,
            "FieldValueTypeInvalid",
            f'Invalid value: "{got}": {path} in body must be of type {expected}: "{got}"',
        )


class CrdController(QueueController[str]):
    name = "crd-controller"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster
        self.crds = cluster.types.core("customresourcedefinitions")
        self._served: dict[str, list[ResourceType]] = {}
        self._deleted: dict[str, JsonObject] = {}
        cluster.store.subscribe(self.crds, self._on_event)

    def _on_event(self, event: StoreEvent) -> None:
        name = event.obj["metadata"]["name"]
        for resource in self._served.pop(name, []):
            self.cluster.types.remove(resource)
            self.cluster.api.custom_validators.pop(resource.key, None)
        if event.type is EventType.DELETED:
            self._deleted[name] = event.obj
            self.enqueue(name)
            return
        self._register(event.obj)
        self.enqueue(name)

    def _register(self, crd: JsonObject) -> None:
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        served: list[ResourceType] = []
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            subresources = version.get("subresources") or {}
            resource = ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                kind=names.get("kind", ""),
                plural=names.get("plural", ""),
                singular=names.get("singular") or names.get("kind", "").lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset({"status"} if "status" in subresources else ()),
                printer_columns=tuple(
                    (
                        str(column.get("name", "")),
                        str(column.get("type", "string")),
                        str(column.get("jsonPath", "")),
                        int(column.get("priority", 0)),
                        str(column.get("description", "")),
                    )
                    for column in version.get("additionalPrinterColumns") or []
                ),
            )
            self.cluster.types.add(resource)
            served.append(resource)
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema and (version.get("storage") or len(spec.get("versions")) == 1):
                self.cluster.api.custom_validators[resource.key] = SchemaValidator(resource, schema)
        self._served[crd["metadata"]["name"]] = served

    def _drop_objects(self, crd: JsonObject) -> None:
        spec = crd.get("spec", {})
        for version in spec.get("versions") or []:
            resource = ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                kind=spec.get("names", {}).get("kind", ""),
                plural=spec.get("names", {}).get("plural", ""),
                singular="",
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            )
            for obj in self.cluster.store.list(resource, None):
                self.cluster.store.remove(resource, obj)

    def reconcile(self, key: str) -> None:
        deleted = self._deleted.pop(key, None)
        if deleted is not None and self.cluster.store.get(self.crds, "", key) is None:
            self._drop_objects(deleted)
            return
        stamp = rfc3339()

        def establish(crd: JsonObject) -> None:
            status = crd.setdefault("status", {})
            existing = {c.get("type") for c in status.get("conditions") or []}
            conditions = list(status.get("conditions") or [])
            for kind, reason, message in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ):
                if kind not in existing:
                    conditions.append(
                        {
                            "type": kind,
                            "status": "True",
                            "reason": reason,
                            "message": message,
                            "lastTransitionTime": stamp,
                        }
                    )
            status["conditions"] = conditions
            status["acceptedNames"] = crd.get("spec", {}).get("names", {})
            status["storedVersions"] = [
                v["name"] for v in crd.get("spec", {}).get("versions") or [] if v.get("storage")
            ]

        self.cluster.registry.mutate(self.crds, "", key, establish)
