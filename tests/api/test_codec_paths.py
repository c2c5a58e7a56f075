"""Field paths of schema errors are rendered as Kubernetes renders them: map keys in brackets,
union member tags left out, list indexes in brackets."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from api.codec import pydantic_errors_to_field_errors
from api.errors import Path
from api.meta import StrictModel
from api.v1alpha1.messages import Envelope
from tests.api.helpers import errors_of


def job(**pod_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
    spec.update(pod_spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": {"spec": spec}},
    }


def paths(
    exc: ValidationError, model: type[BaseModel] | None, base: Path | None = None
) -> list[str]:
    return [e.path for e in pydantic_errors_to_field_errors(exc, base, model=model)]


def test_a_resource_name_is_a_map_key_in_brackets() -> None:
    body = job()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    (error,) = errors_of(body)
    assert error.startswith(
        'spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: "lots"'
    )


def test_a_label_value_of_the_wrong_type_is_reported_at_its_key() -> None:
    body = job()
    body["metadata"]["labels"] = {"app": ["x"]}
    (error,) = errors_of(body)
    assert error.startswith("metadata.labels[app]: Invalid value")


def test_a_map_key_with_dots_and_slashes_is_kept_whole() -> None:
    body = job(nodeSelector={"cloud.google.com/gke-accelerator": 7})
    (error,) = errors_of(body)
    assert error.startswith(
        "spec.template.spec.nodeSelector[cloud.google.com/gke-accelerator]: Invalid value"
    )


def test_a_field_named_like_a_map_key_is_still_a_field() -> None:
    body = job()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {}, "cpu": "1"}
    assert errors_of(body) == [
        "spec.template.spec.containers[0].resources.cpu: Unknown field: "
        "this field is not part of the schema"
    ]


def test_the_member_name_of_a_discriminated_union_is_left_out() -> None:
    body = {"type": "LogClose", "seq": 1, "payload": {"streamId": "s", "bogus": 1}}
    with pytest.raises(ValidationError) as info:
        Envelope.model_validate(body)
    assert paths(info.value, Envelope) == ["payload.bogus"]


def test_map_keys_inside_a_union_member_are_in_brackets() -> None:
    body = {
        "type": "CapacityReport",
        "seq": 1,
        "payload": {
            "cluster": "east",
            "observedAt": "2026-01-01T00:00:00Z",
            "nodes": {"allocatable": {"nvidia.com/gpu": "eight"}},
        },
    }
    with pytest.raises(ValidationError) as info:
        Envelope.model_validate(body)
    assert paths(info.value, Envelope) == ["payload.nodes.allocatable[nvidia.com/gpu]"]


class Inner(StrictModel):
    size: int


class Other(StrictModel):
    width: int


class Holder(StrictModel):
    count: int | str | None = None
    part: Inner | Other | None = None
    by_name: dict[str, list[Inner]] = Field(default_factory=dict)


def test_the_member_names_of_a_plain_union_are_left_out() -> None:
    with pytest.raises(ValidationError) as info:
        Holder.model_validate({"count": [1], "part": {"depth": 1}})
    assert paths(info.value, Holder) == [
        "count",
        "count",
        "part.size",
        "part.depth",
        "part.width",
        "part.depth",
    ]


def test_indexes_inside_map_entries_follow_the_key() -> None:
    with pytest.raises(ValidationError) as info:
        Holder.model_validate({"byName": {"a": [{"size": 1}, {"size": "big"}]}})
    assert paths(info.value, Holder, Path("spec")) == ["spec.byName[a][1].size"]


def test_without_the_model_every_segment_is_taken_for_a_field() -> None:
    with pytest.raises(ValidationError) as info:
        Holder.model_validate({"byName": {"a": [{"size": "big"}]}})
    assert paths(info.value, None) == ["byName.a[0].size"]


class Keyed(StrictModel):
    by_id: dict[int, Inner] = Field(default_factory=dict)


def test_a_map_key_that_fails_validation_is_reported_at_its_key() -> None:
    with pytest.raises(ValidationError) as info:
        Keyed.model_validate({"byId": {"seven": {"size": 1}}})
    assert paths(info.value, Keyed) == ["byId[seven]"]
