"""The real-time baseline's watcher measures time to admission as Kueue's harness does."""

from __future__ import annotations

from typing import Any

from bench.federation_kueue_baseline import Watcher


def version(name: str, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "lastTransitionTime": at}
                for kind, status, at in conditions
            ]
        },
    }


ADMITTED_AT_1 = ("Admitted", "True", "2026-12-03T08:00:01+00:00")
ADMITTED_AT_5 = ("Admitted", "True", "2026-12-03T08:00:05+00:00")
EVICTED_AT_3 = ("Evicted", "True", "2026-12-03T08:00:03+00:00")


def test_a_workload_admitted_once_keeps_the_time_it_was_first_seen_admitted() -> None:
    watcher = Watcher()
    watcher.see(version("a", ADMITTED_AT_1), now=1.1)
    watcher.see(version("a", ADMITTED_AT_1, ("Running", "True", "x")), now=2.0)
    assert watcher.admitted == watcher.first_admitted == {"a": 1.1}


def test_a_preempted_workload_counts_until_it_is_admitted_again() -> None:
    watcher = Watcher()
    watcher.see(version("a", ADMITTED_AT_1), now=1.1)
    watcher.see(version("a", ("Admitted", "False", "2026-12-03T08:00:03+00:00"), EVICTED_AT_3), 3.1)
    watcher.see(version("a", ADMITTED_AT_5), now=5.1)
    assert watcher.admitted == {"a": 5.1}
    assert watcher.first_admitted == {"a": 1.1}
    assert len(watcher.evictions) == 1


def test_a_readmission_is_seen_even_when_the_watch_skipped_the_eviction_between() -> None:
    watcher = Watcher()
    watcher.see(version("a", ADMITTED_AT_1), now=1.1)
    watcher.see(version("a", ADMITTED_AT_5), now=5.1)
    assert watcher.admitted == {"a": 5.1}
