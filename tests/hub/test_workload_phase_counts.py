"""The hub's `multiq_workloads` gauge: a listener of the state mirror moves each workload
between phases as its events come, so the counts hold every workload once, in the phase it is
in now — even when the mirror told it of a change without the step before it."""

from __future__ import annotations

from datetime import UTC, datetime

from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.http.metrics import PHASES, _WorkloadWatcher
from hub.metrics import HubMetrics
from hub.role import Role
from tests.builders import api_workload

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _bound(wl: Workload) -> Workload:
    return transitions.mark_bound_offer(transitions.for_change(wl), "east", 1, NOW)


def _admitted(wl: Workload) -> Workload:
    report = WorkloadStatusReport(workload="team/x", generation=1, phase=WorkloadPhase.ADMITTED)
    admitted, outcome = transitions.apply_report(transitions.for_change(wl), "east", report, NOW)
    assert outcome.accepted
    return admitted


def _counts(watcher: _WorkloadWatcher) -> dict[str, int]:
    return {phase: watcher.phases[phase] for phase in PHASES if watcher.phases[phase]}


def _watcher() -> _WorkloadWatcher:
    return _WorkloadWatcher(HubMetrics(), Role("http://hub"), lambda: NOW)


def test_a_workload_is_counted_in_its_phase_as_it_moves_and_not_once_deleted() -> None:
    watcher = _watcher()
    pending = api_workload("a")
    watcher("team/a", None, pending)
    watcher("team/b", None, api_workload("b"))
    assert _counts(watcher) == {"Pending": 2}
    bound = _bound(pending)
    watcher("team/a", pending, bound)
    assert _counts(watcher) == {"Pending": 1, "Bound": 1}
    watcher("team/a", bound, bound)  # the mirror repeating what it holds
    admitted = _admitted(bound)
    watcher("team/a", bound, admitted)
    assert _counts(watcher) == {"Pending": 1, "Admitted": 1}
    watcher("team/a", admitted, None)
    assert _counts(watcher) == {"Pending": 1}


def test_a_change_heard_of_without_the_step_before_it_leaves_the_counts_true() -> None:
    watcher = _watcher()
    pending = api_workload("a")
    watcher("team/a", None, pending)
    bound = _bound(pending)
    # The mirror took the bound workload in without telling (the hub's own write, put in
    # before its watch event came back), then tells of the next change.
    watcher("team/a", bound, _admitted(bound))
    assert _counts(watcher) == {"Admitted": 1}


def test_a_relist_that_brings_every_workload_again_counts_each_once() -> None:
    watcher = _watcher()
    workloads = {f"team/{n}": api_workload(n) for n in "abc"}
    for key, wl in workloads.items():
        watcher(key, None, wl)
    # A relist parses every workload anew: new objects, the same phases, one of them moved.
    again = {key: api_workload(key.split("/")[1]) for key in workloads}
    again["team/c"] = _bound(again["team/c"])
    for key, before in workloads.items():
        watcher(key, before, again[key])
    assert _counts(watcher) == {"Pending": 2, "Bound": 1}
