"""Bounds on untrusted documents, and the parsers that apply them: what a request body may be
before any model sees it.

A body is parsed (JSON or YAML) into plain values and then walked once, iteratively, against
`InputLimits`: nesting depth, string length, list and map sizes, the number of values in all,
integers that fit in 64 bits and finite floats, and only JSON's types (a YAML timestamp stays
a string, `!!binary` or `!!set` is refused, map keys are strings). Every breach is a
FieldError at the path where it is, so the caller can say which field to fix. The walk counts
values as it goes and stops at `max_values`: YAML aliases can make a small text stand for a
huge tree, and neither this walk nor the models may pay for it. A JSON body whose numbers the
parser found in bounds, whose text is no longer than any count limit and which holds no more
brackets than the depth limit cannot breach a limit, and is not walked (with the default
limits: up to 10,000 characters, which most bodies are).

What cannot even be parsed — invalid UTF-8, broken syntax, nesting deeper than the parser's
own stack, a 5,000-digit number — is a DecodeError with the parser's reason.

Called by: the hub's request bodies (hub.http.middleware.read_body); api.codec's decoders.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import yaml

from api.errors import DecodeError, FieldError, ObjectInvalidError, Path
from api.meta import INT64_MAX, INT64_MIN

__all__ = [
    "DEFAULT_LIMITS",
    "InputLimits",
    "limit_errors",
    "parse_json_object",
    "parse_yaml_object",
]

# More digits than any int64 has (19, and a sign): such a number is refused by its text,
# before Python turns thousands of digits into an int (which it refuses past 4,300 anyway).
_MAX_INTEGER_DIGITS = 20


@dataclass(frozen=True, slots=True)
class InputLimits:
    """What one document may hold. The defaults leave room for every real Kubernetes object
    (a pod template is about 15 levels deep; annotations total at most 256 KiB) and refuse
    what only a fuzzer or an attacker writes."""

    max_depth: int = 100
    max_string_chars: int = 256 * 1024
    max_list_items: int = 10_000
    max_map_entries: int = 10_000
    max_values: int = 200_000


DEFAULT_LIMITS = InputLimits()


class _OversizedNumber:
    """What the parsers return for an integer literal too long to be an int64; the walk
    reports it where it stands."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _NonFiniteNumber:
    """JSON's non-standard NaN, Infinity and -Infinity, which Python would accept."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_int(text: str) -> int | _OversizedNumber:
    if len(text.lstrip("+-")) > _MAX_INTEGER_DIGITS:
        return _OversizedNumber(text)
    return int(text)


def _shown(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def limit_errors(document: object, limits: InputLimits = DEFAULT_LIMITS) -> list[FieldError]:
    """Every breach of `limits` in a parsed document (depth first, in document order, up to
    the first 20), or none."""
    if _within(document, limits):
        return []
    return _breaches(document, limits)


def _within(document: object, limits: InputLimits) -> bool:
    """Whether `document` is plainly within `limits`: the common case, checked without
    building a path for every value (every request body goes through here). False for any
    breach, and for any value not of JSON's exact types (subclasses, the parsers' markers),
    which `_breaches` then judges; so True only where `_breaches` finds nothing."""
    max_depth = limits.max_depth
    max_chars = limits.max_string_chars
    max_items = limits.max_list_items
    max_entries = limits.max_map_entries
    max_values = limits.max_values
    stack: list[tuple[Any, int]] = [(document, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > max_values or depth > max_depth:
            return False
        kind = type(value)
        if kind is dict:
            if len(value) > max_entries:
                return False
            for key, item in value.items():
                if type(key) is not str or len(key) > max_chars:
                    return False
                stack.append((item, depth + 1))
        elif kind is list:
            if len(value) > max_items:
                return False
            stack.extend((item, depth + 1) for item in value)
        elif kind is str:
            if len(value) > max_chars:
                return False
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif not (kind is bool or value is None):
            return False
    return True


def _breaches(document: object, limits: InputLimits) -> list[FieldError]:
    """`limit_errors`' walk with a path for every value, to say where each breach is."""
    errors: list[FieldError] = []
    stack: list[tuple[object, tuple[str | int, ...]]] = [(document, ())]
    seen = 0
    while stack and len(errors) < 20:
        value, parts = stack.pop()
        seen += 1
        if seen > limits.max_values:
            errors.append(
                FieldError.invalid(
                    Path(*parts), "...", f"the document holds more than {limits.max_values} values"
                )
            )
            break
        path = Path(*parts)
        if len(parts) > limits.max_depth:
            errors.append(
                FieldError.invalid(path, "...", f"nested more than {limits.max_depth} levels deep")
            )
            continue
        if isinstance(value, dict):
            if len(value) > limits.max_map_entries:
                errors.append(FieldError.too_many(path, len(value), limits.max_map_entries))
                continue
            children: list[tuple[object, tuple[str | int, ...]]] = []
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.append(
                        FieldError.invalid(path, _shown(str(key)), "map keys must be strings")
                    )
                    continue
                if len(key) > limits.max_string_chars:
                    errors.append(FieldError.too_long(path, limits.max_string_chars))
                    continue
                children.append((item, (*parts, key)))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            if len(value) > limits.max_list_items:
                errors.append(FieldError.too_many(path, len(value), limits.max_list_items))
                continue
            stack.extend((item, (*parts, i)) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            if len(value) > limits.max_string_chars:
                errors.append(FieldError.too_long(path, limits.max_string_chars))
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                errors.append(
                    FieldError.invalid(path, _shown(str(value)), "must fit in a 64-bit integer")
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                errors.append(FieldError.invalid(path, str(value), "must be a finite number"))
        elif isinstance(value, _OversizedNumber):
            errors.append(
                FieldError.invalid(path, _shown(value.text), "must fit in a 64-bit integer")
            )
        elif isinstance(value, _NonFiniteNumber):
            errors.append(FieldError.invalid(path, value.text, "must be a finite number"))
        else:
            errors.append(
                FieldError.invalid(
                    path,
                    type(value).__name__,
                    "must be a JSON value (object, array, string, number, true, false or null)",
                )
            )
    return errors


def _checked(document: object, limits: InputLimits) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise DecodeError(f"the body must be an object, not {_json_type(document)}")
    errors = limit_errors(document, limits)
    if errors:
        kind = document.get("kind")
        meta = document.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        raise ObjectInvalidError(
            kind if isinstance(kind, str) else "Object",
            name if isinstance(name, str) else "",
            errors,
        )
    return document


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float | _OversizedNumber | _NonFiniteNumber):
        return "a number"
    return type(value).__name__


def parse_json_object(raw: bytes, limits: InputLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """One JSON object from UTF-8 bytes, within `limits`.

    Raises DecodeError (the text is not a JSON object) or ObjectInvalidError (a limit is
    breached; each error names its field).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"the body is not valid UTF-8: {exc.reason} at byte {exc.start}") from exc
    odd: list[object] = []  # numbers the walk would refuse, as the parser meets them

    def parse_int(literal: str) -> int | _OversizedNumber:
        value = _parse_int(literal)
        if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
            odd.append(value)
        return value

    def parse_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):  # 1e999
            odd.append(value)
        return value

    def parse_constant(literal: str) -> _NonFiniteNumber:
        odd.append(literal)
        return _NonFiniteNumber(literal)

    try:
        document = json.loads(
            text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
        )
    except json.JSONDecodeError as exc:
        raise DecodeError(f"the body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise DecodeError(f"the body is nested more than {limits.max_depth} levels deep") from exc
    if not odd and isinstance(document, dict) and _short_enough(text, limits):
        return document
    return _checked(document, limits)


def _short_enough(text: str, limits: InputLimits) -> bool:
    """Whether `text`, a JSON document whose numbers are all within bounds, is within
    `limits` by its length and brackets alone, so that the walk can be spared (most request
    bodies are a few kilobytes): every value, string, list item and map entry takes at least
    one character of the text, and every level of nesting one bracket."""
    shortest_limit = min(
        limits.max_string_chars, limits.max_list_items, limits.max_map_entries, limits.max_values
    )
    return len(text) <= shortest_limit and text.count("{") + text.count("[") <= limits.max_depth


class _JsonCompatibleLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it (through JSON): duplicate keys refused, timestamps left as
    strings, integers too long for 64 bits marked rather than converted."""


def _construct_mapping(loader: _JsonCompatibleLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in mapping
        except TypeError:  # an unhashable key (a list or a map): not a JSON key anyway
            raise yaml.constructor.ConstructorError(
                None, None, "map keys must be strings", key_node.start_mark
            ) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


def _construct_int(loader: _JsonCompatibleLoader, node: yaml.ScalarNode) -> object:
    text = str(loader.construct_scalar(node)).replace("_", "")
    if len(text.lstrip("+-")) > _MAX_INTEGER_DIGITS:
        return _OversizedNumber(text)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_JsonCompatibleLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)
_JsonCompatibleLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_JsonCompatibleLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_yaml_object(raw: bytes, limits: InputLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """One YAML document (a mapping) from bytes, within `limits`; errors as parse_json_object."""
    try:
        document = yaml.load(raw, Loader=_JsonCompatibleLoader)  # a SafeLoader: no object tags
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DecodeError(f"the body is not valid YAML{where}: {problem}") from exc
    except RecursionError as exc:
        raise DecodeError(f"the body is nested more than {limits.max_depth} levels deep") from exc
    except ValueError as exc:  # a scalar its constructor cannot convert (a date out of range)
        raise DecodeError(f"the body is not valid YAML: {exc}") from exc
    return _checked(document, limits)
