"""The wire form leaves out what is empty by default, as Kubernetes' `omitempty` does: no
`labels: {}`, `finalizers: []` or `name: ''`; decoding puts the defaults back."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import Field

from api.codec import decode, encode
from api.k8s.core import Toleration
from api.k8s.pod import CompactModel, Container, ResourceRequirements
from api.kinds import REGISTRY
from api.meta import ObjectMeta, StrictModel
from api.v1alpha1.messages import Envelope, LogClose
from tests.api.helpers import obj


class Strict(StrictModel):
    name: str = ""
    mode: str = "Auto"
    labels: dict[str, str] = Field(default_factory=dict)
    items: list[str] = Field(default_factory=list)
    maybe: list[str] | None = None


class Compact(CompactModel):
    name: str = ""
    mode: str = "Auto"
    labels: dict[str, str] = Field(default_factory=dict)
    items: list[str] = Field(default_factory=list)
    maybe: list[str] | None = None


def test_object_metadata_with_only_a_name_is_only_a_name() -> None:
    assert ObjectMeta(name="x").to_wire() == {"name": "x"}


def test_an_object_without_labels_or_owners_writes_none_of_them() -> None:
    cq = decode(obj("ClusterQueue", "cq", {}), REGISTRY)
    assert encode(cq)["metadata"] == {"name": "cq"}


def test_an_empty_name_is_left_out_when_generate_name_is_used() -> None:
    assert ObjectMeta(generate_name="job-").to_wire() == {"generateName": "job-"}


def test_a_non_empty_default_is_written() -> None:
    assert Toleration(key="k").to_wire() == {"key": "k", "operator": "Equal"}


def test_set_values_are_written_even_when_they_equal_nothing_by_another_default() -> None:
    assert Strict(maybe=[], name="n", items=["a"]).to_wire() == {
        "name": "n",
        "mode": "Auto",
        "items": ["a"],
        "maybe": [],
    }


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"name": "n"},
        {"labels": {"a": "b"}, "items": []},
        {"maybe": [], "mode": ""},
        {"name": "", "labels": {}, "items": ["x"], "maybe": None},
    ],
)
def test_strict_and_compact_models_write_the_same_wire_form(fields: dict[str, Any]) -> None:
    assert Strict(**fields).to_wire() == Compact(**fields).to_wire()
    assert Strict(**fields).model_dump_json(by_alias=True) == Compact(**fields).model_dump_json(
        by_alias=True
    )


def test_pod_models_leave_out_their_empty_defaults_too() -> None:
    assert ResourceRequirements().to_wire() == {}
    # A nested struct is not a collection: it is written, as the API server writes it.
    assert Container(name="c", image="i").to_wire() == {"name": "c", "image": "i", "resources": {}}


def test_the_compact_form_decodes_to_an_equal_object() -> None:
    body = obj("ClusterQueue", "cq", {})
    body["metadata"].update(labels={}, annotations={}, finalizers=[], ownerReferences=[])
    cq = decode(copy.deepcopy(body), REGISTRY)
    wire = encode(cq)
    assert "labels" not in wire["metadata"]
    assert decode(wire, REGISTRY) == cq


def test_messages_on_the_wire_are_compact_and_decode_equal() -> None:
    envelope = Envelope.wrap(LogClose(stream_id="s"), seq=1)
    assert '"reason"' not in envelope.to_json()
    assert Envelope.from_json(envelope.to_json()) == envelope


def _subclasses(cls: type[StrictModel]) -> list[type[StrictModel]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_model_marks_each_field_with_an_empty_default() -> None:
    unmarked = []
    for model in _subclasses(StrictModel):
        model.model_rebuild()
        for name, field in model.model_fields.items():
            empty = field.default_factory in (list, dict) or field.default == ""
            if empty and field.exclude_if is None:
                unmarked.append(f"{model.__qualname__}.{name}")
    assert unmarked == []
