"""Labelled metric children looked up once: the same values give the very child the registry
exports, so what a hook counts through it is what a scrape reads."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from telemetry.metrics import Children


def test_the_same_values_give_the_same_child_and_its_counts_are_what_the_registry_exports() -> None:
    registry = CollectorRegistry()
    admitted = Counter("admitted", "Admitted workloads.", ["queue"], registry=registry)
    child = Children()
    assert child(admitted, "cq") is child(admitted, "cq")
    assert child(admitted, "cq") is not child(admitted, "other")
    child(admitted, "cq").inc()
    child(admitted, "cq").inc()
    child(admitted, "other").inc()
    assert registry.get_sample_value("admitted_total", {"queue": "cq"}) == 2
    assert registry.get_sample_value("admitted_total", {"queue": "other"}) == 1
