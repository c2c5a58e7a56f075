"""Errors of the contract layer, and Kubernetes-style field errors.

Owns the vocabulary every component uses to say *what* in an object is wrong. A `FieldError`
names a field path and the problem the way the Kubernetes API server does, e.g.::

    spec.resourceGroups[0].flavors[1].resources[0].nominalQuota: Invalid value: "-1": must be
    greater than or equal to 0

The tree::

    ApiError                       anything wrong with an object or document
    ├── DecodeError                the text is not YAML/JSON, or not an object
    ├── UnknownKindError           apiVersion/kind names no kind we accept
    └── ObjectInvalidError         one object broke rules; carries every FieldError found

Components map these to statuses in one place each (hub: HTTP 400/422; qctl: exit code 1).
Called by: api.codec, every kind's semantic validation, hub request handling, qctl validate.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ApiError",
    "DecodeError",
    "ErrorType",
    "FieldError",
    "ObjectInvalidError",
    "Path",
    "UnknownKindError",
]


class ErrorType(enum.StrEnum):
    """The kinds of field error, spelled as Kubernetes spells them in messages."""

    INVALID = "Invalid value"
    REQUIRED = "Required value"
    UNSUPPORTED = "Unsupported value"
    DUPLICATE = "Duplicate value"
    TOO_MANY = "Too many"
    TOO_LONG = "Too long"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "Not found"
    UNKNOWN_FIELD = "Unknown field"


class Path:
    """A field path that renders as `spec.resourceGroups[0].flavors[1]`.

    Immutable; `child` and `index` return new paths so validators can pass them down freely.
    """

    __slots__ = ("_parts",)

    def __init__(self, *parts: str | int) -> None:
        self._parts: tuple[str | int, ...] = parts

    @classmethod
    def _of(cls, parts: tuple[str | int, ...]) -> Path:
        # Validators build a path for every field they look at, errors or not: skipping
        # __init__'s argument unpacking halves the cost of each.
        path = cls.__new__(cls)
        path._parts = parts
        return path

    def child(self, *names: str) -> Path:
        path = Path.__new__(Path)  # (as `_of`, inline: the most frequent call by far)
        path._parts = self._parts + names
        return path

    def index(self, i: int) -> Path:
        return Path._of((*self._parts, i))

    def key(self, k: str) -> Path:
        """A map entry: renders as `labels[app]`, as Kubernetes does."""
        return Path._of((*self._parts, f"[{k}]"))

    @property
    def parts(self) -> tuple[str | int, ...]:
        return self._parts

    def __str__(self) -> str:
        out = ""
        for part in self._parts:
            if isinstance(part, int):
                out += f"[{part}]"
            elif part.startswith("["):
                out += part
            else:
                out += f".{part}" if out else part
        return out

    def __repr__(self) -> str:
        return f"Path({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other._parts == self._parts

    def __hash__(self) -> int:
        return hash(self._parts)


def _render_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field. `str()` gives the Kubernetes-style one-line message."""

    type: ErrorType
    path: str
    detail: str = ""
    value: object = None
    has_value: bool = False

    @classmethod
    def invalid(cls, path: Path | str, value: object, detail: str) -> FieldError:
        return cls(ErrorType.INVALID, str(path), detail, value, True)

    @classmethod
    def required(cls, path: Path | str, detail: str = "") -> FieldError:
        return cls(ErrorType.REQUIRED, str(path), detail)

    @classmethod
    def unsupported(cls, path: Path | str, value: object, supported: Iterable[str]) -> FieldError:
        values = ", ".join(json.dumps(s) for s in supported)
        return cls(ErrorType.UNSUPPORTED, str(path), f"supported values: {values}", value, True)

    @classmethod
    def duplicate(cls, path: Path | str, value: object) -> FieldError:
        return cls(ErrorType.DUPLICATE, str(path), "", value, True)

    @classmethod
    def too_many(cls, path: Path | str, actual: int, limit: int) -> FieldError:
        return cls(ErrorType.TOO_MANY, str(path), f"must have at most {limit} items", actual, True)

    @classmethod
    def too_long(cls, path: Path | str, limit: int) -> FieldError:
        return cls(ErrorType.TOO_LONG, str(path), f"may not be more than {limit} bytes")

    @classmethod
    def forbidden(cls, path: Path | str, detail: str) -> FieldError:
        return cls(ErrorType.FORBIDDEN, str(path), detail)

    @classmethod
    def not_found(cls, path: Path | str, value: object, detail: str = "") -> FieldError:
        return cls(ErrorType.NOT_FOUND, str(path), detail, value, True)

    @classmethod
    def unknown_field(cls, path: Path | str) -> FieldError:
        return cls(ErrorType.UNKNOWN_FIELD, str(path), "this field is not part of the schema")

    def __str__(self) -> str:
        text = f"{self.path}: {self.type.value}"
        if self.has_value:
            # Kubernetes prints "Too many: 17: must have ..." without quotes around counts.
            shown = str(self.value) if self.type is ErrorType.TOO_MANY else None
            text += f": {shown if shown is not None else _render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def to_dict(self) -> dict[str, str]:
        """The `details.causes[]` entry of a Kubernetes Status object."""
        return {"reason": _CAUSE_REASON[self.type], "field": self.path, "message": str(self)}


_CAUSE_REASON = {
    ErrorType.INVALID: "FieldValueInvalid",
    ErrorType.REQUIRED: "FieldValueRequired",
    ErrorType.UNSUPPORTED: "FieldValueNotSupported",
    ErrorType.DUPLICATE: "FieldValueDuplicate",
    ErrorType.TOO_MANY: "FieldValueTooMany",
    ErrorType.TOO_LONG: "FieldValueTooLong",
    ErrorType.FORBIDDEN: "FieldValueForbidden",
    ErrorType.NOT_FOUND: "FieldValueNotFound",
    ErrorType.UNKNOWN_FIELD: "FieldValueInvalid",
}


class ApiError(Exception):
    """Root of the contract layer's errors."""


class DecodeError(ApiError):
    """The text is not valid YAML or JSON, or a document is not an object."""


class UnknownKindError(ApiError):
    """The document's apiVersion/kind is not a kind we accept."""

    def __init__(self, api_version: object, kind: object, supported: Sequence[str]) -> None:
        self.api_version = api_version
        self.kind = kind
        self.supported = tuple(supported)
        super().__init__(
            f"no kind {kind!r} is registered for version {api_version!r}; "
            f"accepted: {', '.join(self.supported)}"
        )


class ObjectInvalidError(ApiError):
    """An object broke one or more rules. `errors` holds all of them, in document order."""

    def __init__(self, kind: str, name: str, errors: Sequence[FieldError]) -> None:
        self.kind = kind
        self.name = name
        self.errors = tuple(errors)
        lines = "; ".join(str(e) for e in self.errors)
        super().__init__(f'{kind} "{name}" is invalid: {lines}')
