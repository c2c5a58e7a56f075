"""A stored value's JSON: what `json` gives, with a workload's spec encoded once however many
status writes share it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hub.store import base
from hub.store.base import encode_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), JSON), JSON)
def test_the_encoding_is_what_json_gives(value: dict[str, Any], spec: Any) -> None:
    value = {**value, "spec": spec}
    assert json.loads(encode_json(value)) == value
    assert encode_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_status_writes_sharing_a_spec_encode_it_once() -> None:
    spec = {"podSets": [{"name": "main", "count": 2}]}
    first = {"kind": "Workload", "spec": spec, "status": {"phase": "a"}}
    second = {"kind": "Workload", "spec": spec, "status": {"phase": "b"}}
    assert json.loads(encode_json(first)) == first
    assert base._SPECS[id(spec)][0] is spec
    assert json.loads(encode_json(second)) == second
    # A new spec dict is encoded afresh, even one equal to the first.
    other = {"podSets": [{"name": "main", "count": 3}]}
    assert json.loads(encode_json({"spec": other})) == {"spec": other}


# --- an event's JSON from the stored text -----------------------------------------------------

NAMES = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters='"\\'), max_size=20
)
"""apiVersion and kind as a stored object has them: nothing JSON escapes (a name that has
such a character is left to the encoder, as the last test shows)."""


@given(
    NAMES,
    NAMES,
    st.dictionaries(st.text().filter(lambda k: k != "resourceVersion"), JSON, max_size=4),
    st.dictionaries(st.text().filter(lambda k: k not in ("apiVersion", "kind")), JSON),
    st.integers(min_value=1, max_value=2**40),
)
def test_the_text_with_a_resource_version_is_the_object_with_it(
    api_version: str, kind: str, metadata: dict[str, Any], rest: dict[str, Any], revision: int
) -> None:
    value = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    value.update({k: v for k, v in rest.items() if k != "metadata"})
    text = base.with_resource_version_text(encode_json(value), base.Revision(revision))
    if '"resourceVersion":' in encode_json(value):
        assert text is None  # (named somewhere in it already: encoded afresh instead)
        return
    assert text is not None
    assert json.loads(text) == base.with_resource_version(value, base.Revision(revision))


def test_a_text_of_another_shape_or_with_a_resource_version_is_left_to_the_encoder() -> None:
    revision = base.Revision(7)
    assert base.with_resource_version_text('{"kind":"Workload","metadata":{}}', revision) is None
    assert base.with_resource_version_text('{"apiVersion":"v1","kind":"Pod"}', revision) is None
    named = '{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"3"}}'
    assert base.with_resource_version_text(named, revision) is None
    escaped = encode_json({"apiVersion": "v1", "kind": 'a"b', "metadata": {}})
    assert base.with_resource_version_text(escaped, revision) is None
    empty = '{"apiVersion":"v1","kind":"Pod","metadata":{}}'
    assert json.loads(base.with_resource_version_text(empty, revision) or "") == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"resourceVersion": "7"},
    }
