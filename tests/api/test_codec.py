"""The codec reads multi-document YAML and JSON, dispatches on apiVersion/kind, reports all
errors of an object at once, and round-trips objects to a stable wire form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.codec import decode, dump_json, dump_yaml, encode, load_documents
from api.errors import DecodeError, ObjectInvalidError, UnknownKindError
from api.kinds import ALL_KINDS, REGISTRY
from api.v1alpha1.queues import ClusterQueue
from tests.api.helpers import cluster_queue, flavor


def test_multi_document_yaml_keeps_document_indexes_and_skips_empty_documents() -> None:
    text = "---\napiVersion: v1\n---\n---\nkind: X\n"
    docs = load_documents(text)
    assert [d.index for d in docs] == [0, 2]


def test_json_text_is_read_like_yaml() -> None:
    (doc,) = load_documents(json.dumps(cluster_queue()))
    assert isinstance(decode(doc.body, REGISTRY), ClusterQueue)


def test_invalid_yaml_names_the_line_and_column() -> None:
    with pytest.raises(
        DecodeError, match=r"invalid YAML at line 3, column 1: (did not find )?expected .,. or .]."
    ):
        load_documents("a: 1\nb: [1, 2\n")


def test_duplicate_keys_are_rejected_as_the_api_server_does() -> None:
    with pytest.raises(DecodeError, match="duplicate field 'name'"):
        load_documents("metadata:\n  name: a\n  name: b\n")


def test_duplicate_keys_in_json_are_rejected_too() -> None:
    with pytest.raises(DecodeError, match="invalid JSON: duplicate field 'name'"):
        load_documents('{"metadata": {"name": "a", "name": "b"}}')


def test_text_that_opens_like_json_but_is_yaml_is_read_as_yaml() -> None:
    (doc,) = load_documents("{a: 1, b: [x, y]}\n")
    assert doc.body == {"a": 1, "b": ["x", "y"]}


def test_a_document_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(DecodeError, match="document 0 is a list, not an object"):
        load_documents("- a\n- b\n")


def test_an_unknown_kind_names_the_accepted_kinds() -> None:
    with pytest.raises(UnknownKindError, match=r"multiq\.dev/v1alpha1/ClusterQueue"):
        decode({"apiVersion": "multiq.dev/v1alpha1", "kind": "Queue"}, REGISTRY)


def test_missing_api_version_and_kind_are_required_values() -> None:
    with pytest.raises(ObjectInvalidError) as info:
        decode({"metadata": {"name": "x"}}, REGISTRY)
    assert [str(e) for e in info.value.errors] == [
        "apiVersion: Required value",
        "kind: Required value",
    ]


def test_all_errors_of_one_object_are_reported_together() -> None:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [flavor("a", ("cpu", "-1")), flavor("b", ("cpu", "-2"))],
        }
    ]
    with pytest.raises(ObjectInvalidError) as info:
        decode(cluster_queue(groups=groups), REGISTRY)
    assert len(info.value.errors) == 2
    assert str(info.value).startswith('ClusterQueue "team-a" is invalid: ')


def test_wire_form_is_camel_case_with_canonical_quantities_and_no_nulls() -> None:
    obj = decode(cluster_queue(), REGISTRY)
    wire = encode(obj)
    assert wire["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1] == {
        "name": "memory",
        "nominalQuota": "10Gi",
    }
    assert "status" not in wire
    assert wire["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_yaml_and_json_dumps_decode_back_to_equal_objects() -> None:
    obj = decode(cluster_queue(), REGISTRY)
    (from_yaml,) = load_documents(dump_yaml([obj]))
    assert decode(from_yaml.body, REGISTRY) == obj
    assert decode(json.loads(dump_json([obj])), REGISTRY) == obj


def test_every_registered_kind_exports_a_json_schema() -> None:
    for kind in ALL_KINDS:
        schema = kind.model_json_schema(by_alias=True)
        assert schema["type"] == "object"
        assert "apiVersion" in schema["properties"]


quota = st.builds(
    lambda n, s: f"{n}{s}",
    st.integers(min_value=0, max_value=10**5),
    st.sampled_from(["", "m", "Mi", "Gi", "k"]),
)


@given(
    nominal=st.lists(quota, min_size=1, max_size=4),
    strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
    cohort=st.sampled_from([None, "dept"]),
)
def test_cluster_queues_round_trip_through_the_wire_form(
    nominal: list[str], strategy: str, cohort: str | None
) -> None:
    resources = [f"example.com/r{i}" for i in range(len(nominal))]
    groups = [
        {
            "coveredResources": resources,
            "flavors": [flavor("f", *zip(resources, nominal, strict=True))],
        }
    ]
    obj = decode(cluster_queue(cohort=cohort, groups=groups, queueingStrategy=strategy), REGISTRY)
    again = decode(encode(obj), REGISTRY)
    assert again == obj
    assert encode(again) == encode(obj)
