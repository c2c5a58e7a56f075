"""Reading and writing objects: YAML and JSON text, multi-document files, dispatch on
apiVersion/kind to the registered model, and conversion of every problem into FieldErrors.

`decode` is the single door through which untrusted input becomes a typed object: structure
first (pydantic, unknown fields rejected), then each kind's semantic rules. All errors of one
object are reported together. `encode` gives the stable wire form: decode(encode(x)) == x.
Splitting text into documents is api.documents' (re-exported here: Document, load_documents).

Called by: qctl (validate, apply), the hub's REST handlers and store codec, tests.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import yaml
from pydantic import BaseModel, ValidationError

from api.documents import Document, load_documents
from api.errors import FieldError, ObjectInvalidError, Path, UnknownKindError
from api.meta import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Object

__all__ = [
    "Document",
    "KindRegistry",
    "decode",
    "dump_json",
    "dump_yaml",
    "encode",
    "load_documents",
    "pydantic_errors_to_field_errors",
]


class KindRegistry:
    """Which model class handles which (apiVersion, kind). Decisions are data: one table."""

    def __init__(self, kinds: Iterable[type[Object]] = ()) -> None:
        self._by_key: dict[tuple[str, str], type[Object]] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: type[Object]) -> None:
        self._by_key[(kind.API_VERSION, kind.KIND)] = kind

    def lookup(self, api_version: object, kind: object) -> type[Object]:
        found = self._by_key.get((str(api_version), str(kind)))
        if found is None:
            raise UnknownKindError(api_version, kind, self.names())
        return found

    def by_kind(self, kind: str) -> type[Object] | None:
        for (_, name), cls in self._by_key.items():
            if name == kind:
                return cls
        return None

    def names(self) -> list[str]:
        return sorted(f"{v}/{k}" for v, k in self._by_key)

    def kinds(self) -> list[type[Object]]:
        return list(self._by_key.values())


_EXPECTED_LITERAL = re.compile(r"'([^']*)'")
# The bounds of Int32 and of every other integer field (api.meta), as Kubernetes words them.
_INTEGER_BOUND_BITS = {INT32_MIN: 32, INT32_MAX: 32, INT64_MIN: 64, INT64_MAX: 64}

Schema = Mapping[str, Any]
"""A node of a pydantic-core schema (the typed dicts of pydantic_core.core_schema)."""

# Schema nodes that add no segment to an error's `loc`: the walk goes straight through them.
_PASS_THROUGH = {
    "default": "schema",
    "nullable": "schema",
    "model": "schema",
    "function-before": "schema",
    "function-after": "schema",
    "function-wrap": "schema",
    "lax-or-strict": "lax_schema",
    "json-or-python": "python_schema",
}


@functools.cache
def _schema_refs(model: type[BaseModel]) -> dict[str, Schema]:
    """Every node of the model's core schema that carries a `ref`, by that ref."""
    refs: dict[str, Schema] = {}
    stack: list[object] = [model.__pydantic_core_schema__]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            ref = node.get("ref")
            if isinstance(ref, str) and isinstance(node.get("type"), str):
                refs.setdefault(ref, node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return refs


def _resolve(node: Schema | None, refs: Mapping[str, Schema]) -> Schema | None:
    """Follow references and the wrappers that add nothing to a `loc`."""
    for _ in range(100):  # a cycle of references without a field in between cannot happen
        if node is None:
            return None
        kind = node.get("type")
        if kind == "definitions":
            node = node["schema"]
        elif kind == "definition-ref":
            node = refs.get(node["schema_ref"])
        elif kind in _PASS_THROUGH and _PASS_THROUGH[kind] in node:
            node = node[_PASS_THROUGH[kind]]
        else:
            return node
    return None


def _union_choice(node: Schema, tag: str, refs: Mapping[str, Schema]) -> Schema | None:
    """The member of a plain union that pydantic labelled `tag` in a `loc`."""
    for choice in node["choices"]:
        schema, label = choice if isinstance(choice, tuple) else (choice, None)
        if label is not None:
            if label == tag:
                return cast(Schema, schema)
            continue
        target = cast(Schema, schema)
        while target.get("type") == "definition-ref" and target["schema_ref"] in refs:
            target = refs[target["schema_ref"]]
        if target.get("type") == "model" and target["cls"].__name__ == tag:
            return cast(Schema, schema)
        kind = target.get("type")
        if isinstance(kind, str) and (tag == kind or tag.startswith(f"{kind}[")):
            return cast(Schema, schema)
    return None


def _field_schema(node: Schema, name: str) -> Schema | None:
    """The schema of a model field named `name` (its alias or its Python name), if any."""
    fields: Mapping[str, Schema] = node.get("fields", {})
    if name in fields:
        return cast(Schema, fields[name]["schema"])
    for field in fields.values():
        if field.get("validation_alias") == name or field.get("serialization_alias") == name:
            return cast(Schema, field["schema"])
    return None


def _loc_to_path(
    loc: Sequence[str | int], base: Sequence[str | int], model: type[BaseModel] | None
) -> Path:
    """Render a pydantic `loc` as a Kubernetes field path, walking the model's schema beside it
    so that a map key becomes `requests[cpu]` and a union's member tag is left out."""
    refs = _schema_refs(model) if model is not None else {}
    node = _resolve(model.__pydantic_core_schema__, refs) if model is not None else None
    path = Path(*base)
    for part in loc:
        kind = node.get("type") if node is not None else None
        if part == "[key]":
            node = None  # pydantic's marker after a map key that failed validation
        elif kind in ("model-fields", "typed-dict"):
            assert node is not None
            path = path.child(str(part))
            node = _field_schema(node, str(part))
        elif kind == "dict":
            assert node is not None
            path = path.key(str(part))
            node = node.get("values_schema")
        elif kind in ("list", "set", "frozenset", "tuple") and isinstance(part, int):
            assert node is not None
            path = path.index(part)
            items = node.get("items_schema")
            if isinstance(items, list):  # a tuple's positional items
                items = items[min(part, len(items) - 1)] if items else None
            node = items
        elif kind == "tagged-union":
            assert node is not None
            choices: Mapping[Any, Schema] = node["choices"]
            node = choices.get(part) or next(
                (s for t, s in choices.items() if str(t) == str(part)), None
            )
        elif kind == "union":
            assert node is not None
            node = _union_choice(node, str(part), refs)
        elif isinstance(part, int):
            path, node = path.index(part), None
        elif "[" in part or part.startswith("function-"):
            node = None  # pydantic's internal union/validator tags are not fields
        else:
            path, node = path.child(part), None
        node = _resolve(node, refs)
    return path


def _integer_bound_bits(ctx: Mapping[str, Any]) -> int | None:
    bound = ctx.get("le", ctx.get("ge"))
    return _INTEGER_BOUND_BITS.get(bound) if isinstance(bound, int) else None


def pydantic_errors_to_field_errors(
    exc: ValidationError, base: Path | None = None, *, model: type[BaseModel] | None = None
) -> list[FieldError]:
    """Translate pydantic's errors into Kubernetes-style field errors, in input order.

    Pass the `model` that raised `exc` so that its schema tells map keys (rendered
    `requests[cpu]`) from fields and union tags (left out) from both; without it every
    string segment is taken for a field.
    """
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        path = _loc_to_path(err["loc"], base.parts if base else (), model)
        kind = err["type"]
        value = err.get("input")
        if kind == "extra_forbidden":
            out.append(FieldError.unknown_field(path))
        elif kind == "missing":
            out.append(FieldError.required(path))
        elif kind in ("less_than_equal", "greater_than_equal") and (
            bits := _integer_bound_bits(err.get("ctx", {}))
        ):
            out.append(FieldError.invalid(path, value, f"must be a {bits}-bit integer"))
        elif kind == "literal_error":
            expected = _EXPECTED_LITERAL.findall(str(err.get("ctx", {}).get("expected", "")))
            out.append(FieldError.unsupported(path, value, expected))
        else:
            message = err["msg"].removeprefix("Value error, ")
            shown = value if isinstance(value, str | int | float | bool) else type(value).__name__
            out.append(FieldError.invalid(path, shown, message))
    return out


def decode(body: dict[str, Any], registry: KindRegistry) -> Object:
    """Turn one parsed document into a typed, fully validated object, or raise with all errors."""
    api_version = body.get("apiVersion")
    kind = body.get("kind")
    name = (
        str((body.get("metadata") or {}).get("name", ""))
        if isinstance(body.get("metadata"), dict)
        else ""
    )
    if api_version is None or kind is None:
        missing = [
            FieldError.required(field)
            for field, value in (("apiVersion", api_version), ("kind", kind))
            if value is None
        ]
        raise ObjectInvalidError(str(kind or "Object"), name, missing)
    wrong_types = [
        FieldError.invalid(field, type(value).__name__, "must be a string")
        for field, value in (("apiVersion", api_version), ("kind", kind))
        if not isinstance(value, str)
    ]
    if wrong_types:
        raise ObjectInvalidError("Object", name, wrong_types)
    cls = registry.lookup(api_version, kind)
    try:
        obj = cls.model_validate(body)
    except ValidationError as exc:
        raise ObjectInvalidError(
            cls.KIND, name, pydantic_errors_to_field_errors(exc, model=cls)
        ) from exc
    errors = obj.semantic_errors()
    if errors:
        raise ObjectInvalidError(cls.KIND, name, errors)
    return obj


def encode(obj: Object) -> dict[str, Any]:
    """The wire form: camelCase keys, no nulls, canonical quantities."""
    return obj.to_wire()


def dump_yaml(objs: Sequence[Object]) -> str:
    return yaml.safe_dump_all([encode(o) for o in objs], sort_keys=False, default_flow_style=False)


def dump_json(objs: Sequence[Object]) -> str:
    if len(objs) == 1:
        return json.dumps(encode(objs[0]), indent=2)
    return json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [encode(o) for o in objs]}, indent=2
    )


def iter_field_errors(exc: ObjectInvalidError) -> Iterator[str]:
    for err in exc.errors:
        yield str(err)
