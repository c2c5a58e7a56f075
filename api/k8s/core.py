"""Small core/v1 and meta/v1 types shared by many kinds: taints, tolerations, label selectors.

Called by: api.v1alpha1 kinds (flavors, cluster queues, cluster sets), api.k8s pod models.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.meta import StrictModel, label_key_errors, label_value_errors

__all__ = [
    "LabelSelector",
    "LabelSelectorRequirement",
    "Taint",
    "TaintEffect",
    "Toleration",
    "selector_matches",
]

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(StrictModel):
    key: str
    value: str = ""
    effect: TaintEffect
    time_added: str | None = None

    def errors(self, path: Path) -> Iterator[FieldError]:
        yield from label_key_errors(path.child("key"), self.key)
        if self.value:
            yield from label_value_errors(path.child("value"), self.value)


class Toleration(StrictModel):
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: TaintEffect | Literal[""] = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """The rule of k8s.io/api/core/v1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value

    def errors(self, path: Path) -> Iterator[FieldError]:
        """The rules of ValidateTolerations (k8s.io/kubernetes/pkg/apis/core/validation), in
        its order and with its paths."""
        if self.key:
            yield from label_key_errors(path.child("key"), self.key)
        elif self.operator != "Exists":
            yield FieldError.invalid(
                path.child("operator"),
                self.operator,
                'operator must be Exists when `key` is empty, which means "match all values '
                'and all keys"',
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            yield FieldError.invalid(
                path.child("effect"),
                self.effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
        if self.operator == "Exists" and self.value:
            yield FieldError.invalid(
                path.child("operator"),
                self.value,
                "value must be empty when `operator` is 'Exists'",
            )
        elif self.operator == "Equal":
            # Kubernetes reports a bad value at `operator`, as it does for Exists above.
            yield from label_value_errors(path.child("operator"), self.value)


class LabelSelectorRequirement(StrictModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    def errors(self, path: Path) -> Iterator[FieldError]:
        yield from label_key_errors(path.child("key"), self.key)
        if self.operator in ("In", "NotIn") and not self.values:
            yield FieldError.required(
                path.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            yield FieldError.forbidden(
                path.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


class LabelSelector(StrictModel):
    """metav1.LabelSelector. An empty selector matches everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def errors(self, path: Path) -> Iterator[FieldError]:
        for key, value in self.match_labels.items():
            yield from label_key_errors(path.child("matchLabels"), key)
            yield from label_value_errors(path.child("matchLabels").key(key), value)
        for i, req in enumerate(self.match_expressions):
            yield from req.errors(path.child("matchExpressions").index(i))

    def matches(self, labels: dict[str, str]) -> bool:
        return selector_matches(self, labels)


def selector_matches(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
    """A nil selector matches nothing, an empty one everything (Kubernetes' convention)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(req.matches(labels) for req in selector.match_expressions)
