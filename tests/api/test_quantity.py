"""Quantities are parsed as Kubernetes parses them and compared exactly, never as floats."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.quantity import Quantity, QuantityError, resource_amount

SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u"]


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("4Gi", 4 * 2**30 * 1000),
        ("1e3", 1_000_000),
        ("0.5", 500),
        ("1.5", 1500),
        ("100n", 1),
        ("2", 2000),
        ("1E-3", 1),
        (".5", 500),
    ],
)
def test_quantities_parse_to_exact_milli_units(text: str, milli: int) -> None:
    assert Quantity.parse(text).milli() == milli


def test_decimal_fractions_add_up_exactly_where_floats_would_not() -> None:
    assert Quantity.parse("0.1") + Quantity.parse("0.2") == Quantity.parse("300m")


def test_binary_and_plain_spellings_of_the_same_amount_are_equal() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1073741824")
    assert Quantity.parse("1024Mi") == Quantity.parse("1Gi")


def test_integers_and_floats_from_yaml_are_read_through_their_text() -> None:
    assert Quantity.parse(2) == Quantity.parse("2")
    assert Quantity.parse(0.5) == Quantity.parse("500m")


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5Xi", "--1", "1 Gi", " 1", "1e"])
def test_malformed_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_canonical_form_uses_the_largest_exact_suffix() -> None:
    assert Quantity.parse("1000m").canonical() == "1"
    assert Quantity.parse("1536Mi").canonical() == "1536Mi"
    assert Quantity.parse("2048Mi").canonical() == "2Gi"
    assert Quantity.parse("1500").canonical() == "1500"
    assert Quantity.parse("3000").canonical() == "3k"


def test_values_below_one_nano_round_up_as_kubernetes_does() -> None:
    assert Quantity.parse("0.0000000001").value == Fraction(1, 10**9)


quantities = st.builds(
    lambda n, frac, suffix: f"{n}{'.' + frac if frac else ''}{suffix}",
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "5", "25", "125"]),
    st.sampled_from(SUFFIXES),
)


@given(quantities)
def test_the_canonical_form_parses_back_to_the_same_quantity(text: str) -> None:
    q = Quantity.parse(text)
    assert Quantity.parse(q.canonical()) == q
    if not text.endswith("i"):
        assert Quantity.parse(q.canonical()).canonical() == q.canonical()


def test_a_binary_quantity_no_binary_suffix_divides_is_written_in_bytes_as_kubernetes_does() -> (
    None
):
    # Kubernetes' CanonicalizeBytes prints 531.25Ki as "544000"; read back, that is a
    # decimal quantity, spelled "544k". The value survives; the spelling follows the format.
    assert Quantity.parse("531.25Ki").canonical() == "544000"
    assert Quantity.parse("544000").canonical() == "544k"


@given(quantities, quantities)
def test_ordering_agrees_with_the_exact_values(a: str, b: str) -> None:
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    assert (qa < qb) == (qa.value < qb.value)
    assert (qa == qb) == (qa.value == qb.value)
    assert (qa + qb) - qb == qa


@given(quantities)
def test_milli_units_never_undercount(text: str) -> None:
    q = Quantity.parse(text)
    assert Fraction(q.milli(), 1000) >= q.value
    assert Fraction(q.milli(), 1000) - q.value < Fraction(1, 1000)


@given(quantities, quantities, st.integers(min_value=-50, max_value=50))
def test_arithmetic_needs_no_rounding_and_spells_as_a_freshly_made_quantity_would(
    a: str, b: str, factor: int
) -> None:
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    for result, binary in (
        (qa + qb, qa.is_binary and qb.is_binary),
        (qa - qb, qa.is_binary and qb.is_binary),
        (qa * factor, qa.is_binary),
        (-qa, qa.is_binary),
    ):
        fresh = Quantity(result.value, binary=binary)
        assert result.value == fresh.value
        assert result.canonical() == fresh.canonical()
        assert Quantity.parse(result.canonical()) == result


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_milli_units_make_the_quantity_they_name(milli: int) -> None:
    q = Quantity.from_milli(milli)
    assert q.milli() == milli and q == Quantity(Fraction(milli, 1000))
    assert Quantity.parse(q.canonical()) == q


def test_amounts_of_bytes_are_written_in_binary_units_and_the_rest_in_decimal() -> None:
    gib = 2**30 * 1000
    assert resource_amount("memory", 4 * gib).canonical() == "4Gi"
    assert resource_amount("ephemeral-storage", 10 * gib).canonical() == "10Gi"
    assert resource_amount("hugepages-2Mi", 2 * 2**20 * 1000).canonical() == "2Mi"
    assert resource_amount("cpu", 4_000_000).canonical() == "4k"
    assert resource_amount("cpu", 1500).canonical() == "1500m"
    assert resource_amount("memory", 1500).canonical() == "1500m"  # not whole bytes
