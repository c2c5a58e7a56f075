"""Label and field selectors: parsing the query-string grammar and matching objects.

Label selectors follow apimachinery's grammar (`k=v`, `k==v`, `k!=v`, `k in (a,b)`,
`k notin (a,b)`, `k`, `!k`, comma = AND). Field selectors accept `=`, `==`, `!=` on the
per-resource whitelist declared in `kubesim.resources`; anything else is a 400, as on a real
apiserver. `selector_from_object` reads a metav1.LabelSelector object. Called by the list,
watch and deletecollection handlers, validation and the workload controllers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.errors import BadRequestError
from kubesim.objects import JsonObject
from kubesim.resources import ResourceType

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_object",
]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s+\(([^)]*)\)$")
_EQ_RE = re.compile(rf"^({_KEY})\s*(==|!=|=)\s*({_VALUE})$")
_EXISTS_RE = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class Requirement:
    """One label requirement; `operator` in In, NotIn, Exists, DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels, matchExpressions) as requirements; None or {}
    selects everything, as for a Deployment's or ReplicaSet's pods."""
    requirements = [
        Requirement(str(key), "In", frozenset({str(value)}))
        for key, value in ((selector or {}).get("matchLabels") or {}).items()
    ]
    for expression in (selector or {}).get("matchExpressions") or []:
        requirements.append(
            Requirement(
                str(expression.get("key", "")),
                str(expression.get("operator", "")),
                frozenset(str(v) for v in expression.get("values") or ()),
            )
        )
    return LabelSelector(tuple(requirements))


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        if match := _SET_RE.match(part):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            operator = "In" if match.group(2) == "in" else "NotIn"
            requirements.append(Requirement(match.group(1), operator, values))
        elif match := _EQ_RE.match(part):
            operator = "NotIn" if match.group(2) == "!=" else "In"
            requirements.append(Requirement(match.group(1), operator, frozenset({match.group(3)})))
        elif match := _EXISTS_RE.match(part):
            operator = "DoesNotExist" if match.group(1) else "Exists"
            requirements.append(Requirement(match.group(2), operator))
        else:
            raise BadRequestError(
                f"unable to parse requirement: found '{part}', expected: selector"
            )
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True)
class FieldRequirement:
    label: str
    path: tuple[str, ...]
    default: str
    value: str
    negate: bool

    def matches(self, obj: JsonObject) -> bool:
        current: Any = obj
        for step in self.path:
            current = current.get(step) if isinstance(current, dict) else None
            if current is None:
                break
        if current is None:
            actual = self.default
        elif isinstance(current, bool):
            actual = "true" if current else "false"
        else:
            actual = str(current)
        return (actual != self.value) if self.negate else (actual == self.value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: JsonObject) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def exact_name(self) -> str | None:
        """The name when the selector pins `metadata.name=X` (lets GET-like paths stay cheap)."""
        for requirement in self.requirements:
            if requirement.label == "metadata.name" and not requirement.negate:
                return requirement.value
        return None


def parse_field_selector(text: str | None, resource: ResourceType) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    allowed = resource.field_selectors
    requirements: list[FieldRequirement] = []
    for part in _split_top_level(text):
        if not part:
            continue
        for operator in ("!=", "==", "="):
            if operator in part:
                label, value = part.split(operator, 1)
                break
        else:
            raise BadRequestError(f"invalid selector: '{text}'; can't understand '{part}'")
        label = label.strip()
        if label not in allowed:
            raise BadRequestError(f"field label not supported: {label}")
        path, default = allowed[label]
        requirements.append(
            FieldRequirement(label, path, default, value.strip(), negate=operator == "!=")
        )
    return FieldSelector(tuple(requirements))
