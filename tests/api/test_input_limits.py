"""Untrusted input is bounded before and while it becomes an object: bodies that are not
objects, too deep, too long, with numbers no Kubernetes component can hold, or with values
beyond what Kubernetes accepts (int64 milli-units, int32 counts, name lengths per kind) are
refused with errors that name the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.errors import DecodeError, ObjectInvalidError
from api.limits import InputLimits, limit_errors, parse_json_object, parse_yaml_object
from tests.api.helpers import errors_of


def job(name: str = "train", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": spec.pop("cpu", "1")}},
                        }
                    ],
                }
            },
            **spec,
        },
    }


def limit_messages(raw: bytes, *, yaml_text: bool = False, **limits: int) -> list[str]:
    parse = parse_yaml_object if yaml_text else parse_json_object
    with pytest.raises(ObjectInvalidError) as caught:
        parse(raw, InputLimits(**limits))
    return [str(e) for e in caught.value.errors]


# --- bodies that cannot be parsed ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"kind": "\xff"}', "not valid UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "nested more than"),
        (b'{"kind": "Job",', "not valid JSON"),
        (b"[1, 2]", "must be an object, not an array"),
        (b'"Job"', "must be an object, not a string"),
    ],
)
def test_a_json_body_that_is_not_an_object_is_a_decode_error(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        parse_json_object(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"a: [" * 3000, "not valid YAML|nested more than"),
        (b"a: 1\na: 2\n", "duplicate field 'a'"),
        (b"? [1]\n: x\n", "map keys must be strings"),
        (b"a: 1\n---\nb: 2\n", "not valid YAML"),
        (b"- a\n", "must be an object, not an array"),
    ],
)
def test_a_yaml_body_that_is_not_an_object_is_a_decode_error(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        parse_yaml_object(raw)


# --- limits, each error at its field ------------------------------------------------------------


def test_nesting_past_the_depth_limit_names_where_it_goes_too_deep() -> None:
    raw = b'{"spec": {"a": [{"b": {"c": 1}}]}}'
    assert limit_messages(raw, max_depth=3) == [
        'spec.a[0].b: Invalid value: "...": nested more than 3 levels deep'
    ]


def test_a_5000_digit_integer_is_refused_where_it_stands_in_json_and_yaml() -> None:
    digits = "9" * 5000
    expected = f'spec.parallelism: Invalid value: "{digits[:20]}...(5000 characters)": must fit in a 64-bit integer'
    assert limit_messages(f'{{"spec": {{"parallelism": {digits}}}}}'.encode()) == [expected]
    yaml_raw = f"spec:\n  parallelism: {digits}\n".encode()
    assert limit_messages(yaml_raw, yaml_text=True) == [expected]


def test_integers_beyond_int64_and_non_finite_numbers_are_refused() -> None:
    raw = b'{"a": 9223372036854775808, "b": 1e400, "c": NaN, "d": -9223372036854775808}'
    assert limit_messages(raw) == [
        'a: Invalid value: "9223372036854775808": must fit in a 64-bit integer',
        'b: Invalid value: "inf": must be a finite number',
        'c: Invalid value: "NaN": must be a finite number',
    ]


def test_long_strings_lists_and_maps_are_refused() -> None:
    raw = b'{"s": "xxxxx", "l": [1, 2, 3], "m": {"a": 1, "b": 2, "c": 3}}'
    assert limit_messages(raw, max_string_chars=4, max_list_items=2, max_map_entries=3) == [
        "s: Too long: may not be more than 4 bytes",
        "l: Too many: 3: must have at most 2 items",
    ]


def test_long_or_non_string_map_keys_and_too_many_values_are_refused() -> None:
    assert limit_messages(b'{"kind": "Job", "xxxxx": 1}', max_string_chars=4) == [
        ": Too long: may not be more than 4 bytes"
    ]
    assert limit_messages(b"kind: Job\n1: one\n", yaml_text=True) == [
        ': Invalid value: "1": map keys must be strings'
    ]
    assert limit_messages(b'{"a": [1, 2, 3], "b": {"c": "d"}}', max_values=5) == [
        'b: Invalid value: "...": the document holds more than 5 values'
    ]


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        (b'{"":"xxxxx"}', {"max_string_chars": 4}),
        (b'{"":[0,0,0]}', {"max_list_items": 2}),
        (b'{"a":0,"b":0,"c":0}', {"max_map_entries": 2}),
        (b'{"a":0,"b":0,"c":0}', {"max_values": 3}),
        (b'{"":[[0]]}', {"max_depth": 2}),
    ],
)
def test_a_short_body_just_past_one_limit_is_refused(raw: bytes, limit: dict[str, int]) -> None:
    with pytest.raises(ObjectInvalidError) as caught:
        parse_json_object(raw, InputLimits(**limit))
    assert len(caught.value.errors) == 1


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=6), children, max_size=6)
    ),
    max_leaves=40,
)
_LIMIT = st.integers(1, 16) | st.integers(16, 600)  # some near what a short body holds
_SMALL_LIMITS = st.builds(
    InputLimits,
    max_depth=st.integers(1, 6),
    max_string_chars=_LIMIT,
    max_list_items=_LIMIT,
    max_map_entries=_LIMIT,
    max_values=_LIMIT,
)


@settings(max_examples=500)
@given(st.dictionaries(st.text(max_size=6), _JSON_VALUES, max_size=6), _SMALL_LIMITS)
def test_a_json_body_is_refused_exactly_when_walking_all_of_it_finds_a_breach(
    document: dict[str, Any], limits: InputLimits
) -> None:
    # A body short enough to be within the limits by its length and brackets is not walked
    # (api.limits._short_enough); the verdict must be the walk's all the same.
    breaches = [str(e) for e in limit_errors(document, limits)]
    try:
        parsed = parse_json_object(json.dumps(document).encode(), limits)
    except ObjectInvalidError as refused:
        assert [str(e) for e in refused.errors] == breaches
    else:
        assert breaches == []
        assert parsed == document


def test_yaml_aliases_cannot_make_a_small_body_a_huge_tree() -> None:
    laughs = b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefgh":
        previous = chr(ord(level) - 1)
        laughs += f"{level}: &{level} [{', '.join(['*' + previous] * 10)}]\n".encode()
    messages = limit_messages(laughs, yaml_text=True)
    assert len(messages) == 1 and "holds more than 200000 values" in messages[0]


def test_yaml_timestamps_stay_strings_and_binary_values_are_refused() -> None:
    assert parse_yaml_object(b"t: 2024-01-01T00:00:00Z\n") == {"t": "2024-01-01T00:00:00Z"}
    assert limit_messages(b"b: !!binary aGk=\n", yaml_text=True) == [
        'b: Invalid value: "bytes": must be a JSON value (object, array, string, number, true, '
        "false or null)"
    ]


# --- values Kubernetes would not accept ---------------------------------------------------------


def test_non_string_api_version_and_kind_name_the_field() -> None:
    body = job()
    body["apiVersion"], body["kind"] = 5, ["Job"]
    assert errors_of(body) == [
        'apiVersion: Invalid value: "int": must be a string',
        'kind: Invalid value: "list": must be a string',
    ]


@pytest.mark.parametrize("cpu", ["1e30", 1e30, 10**30, "9e18Ei", "1" * 65])
def test_a_quantity_beyond_int64_milli_units_is_refused(cpu: object) -> None:
    (message,) = errors_of(job(cpu=cpu))
    assert message.startswith("spec.template.spec.containers[0].resources.requests[cpu]: ")


def test_the_largest_quantity_in_int64_milli_units_is_accepted() -> None:
    assert errors_of(job(cpu="9223372036854775807m")) == []
    assert errors_of(job(cpu="9223372036854775808m")) != []


@pytest.mark.parametrize(
    ("parallelism", "message"),
    [
        (2**63, "spec.parallelism: Invalid value: 9223372036854775808: must be a 32-bit integer"),
        (2**31, "spec.parallelism: Invalid value: 2147483648: must be a 32-bit integer"),
        (1e9, "spec.parallelism: Invalid value: 1000000000.0: Input should be a valid integer"),
        ("4", 'spec.parallelism: Invalid value: "4": Input should be a valid integer'),
        (True, "spec.parallelism: Invalid value: true: Input should be a valid integer"),
    ],
)
def test_parallelism_is_a_strict_int32(parallelism: object, message: str) -> None:
    assert errors_of(job(parallelism=parallelism)) == [message]


def test_every_integer_field_is_at_most_int64() -> None:
    (message,) = errors_of(job(activeDeadlineSeconds=2**63))
    assert message == (
        "spec.activeDeadlineSeconds: Invalid value: 9223372036854775808: must be a 64-bit integer"
    )


def test_a_job_name_is_a_dns_label_of_at_most_63_characters() -> None:
    assert errors_of(job(name="a" * 63)) == []
    (message,) = errors_of(job(name="a" * 64))
    assert message.startswith("metadata.name: Invalid value: ") and "no more than 63" in message


def test_most_names_are_dns_subdomains_of_at_most_253_characters() -> None:
    flavor = {"apiVersion": "multiq.dev/v1alpha1", "kind": "ResourceFlavor"}
    assert errors_of({**flavor, "metadata": {"name": "a." * 126 + "a"}}) == []
    assert errors_of({**flavor, "metadata": {"name": "a" * 254}}) != []


@pytest.mark.parametrize("name", ["train\n", "tra\x01in", "train\x7f"])
def test_a_name_with_a_trailing_newline_or_control_character_is_invalid(name: str) -> None:
    assert errors_of(job(name=name)) != []


def test_a_generate_name_is_checked_with_the_characters_the_server_appends() -> None:
    body = job()
    body["metadata"] = {"generateName": "train-", "namespace": "vision"}
    assert errors_of(body) == []
    body["metadata"]["generateName"] = "Train\x01"
    (message,) = errors_of(body)
    assert message.startswith('metadata.generateName: Invalid value: "Train\\u0001": with the 5')
    body["metadata"]["generateName"] = "a" * 59
    assert "no more than 63" in errors_of(body)[0]
