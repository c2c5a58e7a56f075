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
