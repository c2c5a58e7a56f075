"""The name and label rules remember values they found nothing wrong with: a bad value is
reported at every check, with the path of each, and the memory stays bounded."""

from __future__ import annotations

from api import meta
from api.errors import Path
from api.meta import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
)

RULES = (dns1123_label_errors, dns1123_subdomain_errors, label_key_errors, label_value_errors)


def test_a_bad_value_is_reported_at_every_check_with_that_checks_path() -> None:
    for rule in RULES:
        for field in ("a", "b", "a"):
            errors = rule(Path("metadata", field), "Bad Value!")
            assert errors and all(str(e.path) == f"metadata.{field}" for e in errors)


def test_a_good_value_stays_good_and_a_value_that_breaks_a_rule_is_never_remembered() -> None:
    assert not label_key_errors(Path("k"), "multiq.dev/queue-name")
    assert not label_key_errors(Path("k"), "multiq.dev/queue-name")
    assert label_key_errors(Path("k"), "x" * 64)
    assert label_key_errors(Path("k"), "x" * 64)
    assert not label_value_errors(Path("v"), "")
    assert not dns1123_label_errors(Path("n"), "a" * 63)
    assert dns1123_label_errors(Path("n"), "a" * 64)


def test_the_memory_of_good_values_is_bounded() -> None:
    for i in range(meta._KNOWN_GOOD_KEPT * 2 + 10):
        assert not dns1123_label_errors(Path("n"), f"name-{i}")
        assert len(dns1123_label_errors.good) <= meta._KNOWN_GOOD_KEPT
    assert dns1123_label_errors(Path("n"), "Name")
    assert not dns1123_label_errors(Path("n"), "name-1")
