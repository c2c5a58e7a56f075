"""Tolerations follow the API server's ValidateTolerations: tolerationSeconds only with
NoExecute, and an Equal toleration's value must be a valid label value."""

from __future__ import annotations

from typing import Any

import pytest

from api.errors import Path
from api.k8s.core import Taint, Toleration
from tests.api.helpers import errors_of, obj

LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character, with at most 63 characters"
)


def errors(**fields: Any) -> list[str]:
    toleration = Toleration.model_validate(fields)
    return [str(e) for e in toleration.errors(Path("spec", "tolerations", 0))]


def job_with(toleration: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i"}],
                    "tolerations": [toleration],
                }
            }
        },
    }


def test_toleration_seconds_with_no_execute_is_accepted() -> None:
    assert (
        errors(
            key="node.kubernetes.io/unreachable",
            operator="Exists",
            effect="NoExecute",
            tolerationSeconds=300,
        )
        == []
    )


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule"])
def test_toleration_seconds_with_another_effect_is_invalid_at_the_effect(effect: str) -> None:
    assert errors(key="k", value="v", effect=effect, tolerationSeconds=30) == [
        f'spec.tolerations[0].effect: Invalid value: "{effect}": '
        "effect must be 'NoExecute' when `tolerationSeconds` is set"
    ]


def test_toleration_seconds_without_an_effect_is_invalid_too() -> None:
    assert errors(operator="Exists", tolerationSeconds=0) == [
        'spec.tolerations[0].effect: Invalid value: "": '
        "effect must be 'NoExecute' when `tolerationSeconds` is set"
    ]


def test_an_equal_toleration_needs_a_valid_label_value() -> None:
    assert errors(key="gpu", operator="Equal", value="a b", effect="NoSchedule") == [
        f'spec.tolerations[0].operator: Invalid value: "a b": {LABEL_VALUE_RULE}'
    ]


def test_an_equal_toleration_value_may_be_at_most_63_characters() -> None:
    assert errors(key="gpu", value="x" * 64) == [
        f'spec.tolerations[0].operator: Invalid value: "{"x" * 64}": {LABEL_VALUE_RULE}'
    ]


@pytest.mark.parametrize("value", ["", "h100", "nvidia.com_H100-80gb", "x" * 63])
def test_valid_label_values_are_accepted_for_equal(value: str) -> None:
    assert errors(key="gpu", value=value) == []


def test_an_exists_toleration_with_a_value_keeps_its_own_message() -> None:
    assert errors(key="gpu", operator="Exists", value="a b") == [
        'spec.tolerations[0].operator: Invalid value: "a b": '
        "value must be empty when `operator` is 'Exists'"
    ]


def test_problems_are_reported_in_the_api_servers_order() -> None:
    assert errors(operator="Equal", value="-bad", effect="NoSchedule", tolerationSeconds=5) == [
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
        '`key` is empty, which means "match all values and all keys"',
        'spec.tolerations[0].effect: Invalid value: "NoSchedule": '
        "effect must be 'NoExecute' when `tolerationSeconds` is set",
        f'spec.tolerations[0].operator: Invalid value: "-bad": {LABEL_VALUE_RULE}',
    ]


def test_a_job_pod_template_reports_the_toleration_rules_with_their_path() -> None:
    body = job_with({"key": "k", "value": "v", "effect": "NoSchedule", "tolerationSeconds": 60})
    assert errors_of(body) == [
        'spec.template.spec.tolerations[0].effect: Invalid value: "NoSchedule": '
        "effect must be 'NoExecute' when `tolerationSeconds` is set"
    ]


def test_a_resource_flavor_reports_the_toleration_rules_too() -> None:
    body = obj("ResourceFlavor", "gpu", {"tolerations": [{"key": "gpu", "value": "not ok"}]})
    assert errors_of(body) == [
        f'spec.tolerations[0].operator: Invalid value: "not ok": {LABEL_VALUE_RULE}'
    ]


def test_matching_is_unchanged_by_the_new_rules() -> None:
    taint = Taint(key="gpu", value="h100", effect="NoExecute")
    assert Toleration(key="gpu", value="h100", effect="NoExecute", toleration_seconds=30).tolerates(
        taint
    )
    assert not Toleration(key="gpu", value="a100").tolerates(taint)
