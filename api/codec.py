"""Reading and writing objects: YAML and JSON text, multi-document files, dispatch on
apiVersion/kind to the registered model, and conversion of every problem into FieldErrors.

`decode` is the single door through which untrusted input becomes a typed object: structure
first (pydantic, unknown fields rejected), then each kind's semantic rules. All errors of one
object are reported together. `encode` gives the stable wire form: decode(encode(x)) == x.

Called by: qctl (validate, apply, submit), the hub's REST handlers and store codec, tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from api.errors import DecodeError, FieldError, ObjectInvalidError, Path, UnknownKindError
from api.meta import Object

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


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, as the Kubernetes API server does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a file: its 0-based index and the parsed mapping."""

    index: int
    body: dict[str, Any]


def load_documents(text: str) -> list[Document]:
    """Parse YAML or JSON text with one or more documents; empty documents are skipped.

    Raises DecodeError naming the line and column of a syntax error, or the index of a
    document that is not a mapping.
    """
    try:
        raw = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DecodeError(f"invalid YAML{where}: {problem}") from exc
    docs: list[Document] = []
    for index, body in enumerate(raw):
        if body is None:
            continue
        if not isinstance(body, dict):
            raise DecodeError(f"document {index} is a {type(body).__name__}, not an object")
        docs.append(Document(index, body))
    return docs


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


def pydantic_errors_to_field_errors(
    exc: ValidationError, base: Path | None = None
) -> list[FieldError]:
    """Translate pydantic's errors into Kubernetes-style field errors, in input order."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        parts: list[str | int] = list(base.parts) if base else []
        for part in err["loc"]:
            if isinstance(part, str) and ("[" in part or part.startswith("function-")):
                continue  # pydantic's internal union/validator tags are not fields
            parts.append(part)
        path = Path(*parts)
        kind = err["type"]
        value = err.get("input")
        if kind == "extra_forbidden":
            out.append(FieldError.unknown_field(path))
        elif kind == "missing":
            out.append(FieldError.required(path))
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
    cls = registry.lookup(api_version, kind)
    try:
        obj = cls.model_validate(body)
    except ValidationError as exc:
        raise ObjectInvalidError(cls.KIND, name, pydantic_errors_to_field_errors(exc)) from exc
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
