"""The replay benchmark's simulator on a tiny shape: every workload runs, quota holds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from agent.engine.snapshot import WorkloadId
from bench.engine_common import (
    BASELINE,
    LARGE_SCALE,
    Shape,
    Simulation,
    WorkloadClass,
    makespan_lower_bound,
)
from tests.agent.engine.test_properties import assert_within_quota, scenarios


def test_a_tiny_replay_admits_everything_within_quota() -> None:
    classes = (
        WorkloadClass("small", 20, 0.1, 0.2, 50, 1),
        WorkloadClass("large", 4, 0.5, 0.4, 200, 4),
    )
    sim = Simulation(Shape(cohorts=1, queues_per_cohort=2, classes=classes, nominal_cpu=4))
    sim.run()
    report = sim.report(0.0)
    assert report["never_admitted"] == 0
    assert sim.workloads == {}
    usage = report["cq_usage_of_nominal"]
    assert isinstance(usage, dict)
    assert usage["max"] <= 2.0  # a queue may borrow the other's idle quota, never more
    assert_within_quota(sim.snapshot)


def test_the_ideal_makespan_counts_the_capacity_idle_before_work_arrives() -> None:
    # Two workloads of 4 CPUs × 1 s arrive at 1.0 on 4 CPUs: work ÷ capacity says 2 s, the
    # last arrival plus its runtime 2 s, but nothing can run before 1.0, so 3 s.
    classes = (WorkloadClass("a", 1, 1.0, 1.0, 0, 4), WorkloadClass("b", 1, 1.0, 1.0, 0, 4))
    sim = Simulation(Shape(cohorts=1, queues_per_cohort=2, classes=classes, nominal_cpu=4))
    sim.run()
    report = sim.report(0.0)
    assert (report["ideal_makespan_s"], report["work_over_capacity_s"]) == (3.0, 2.0)
    assert report["makespan_over_ideal"] == 1.0


def test_the_ideal_makespan_is_never_below_work_over_capacity_nor_the_last_arrivals_end() -> None:
    assert makespan_lower_bound([(0.0, 1.0, 2), (0.0, 1.0, 2)], 2) == 2.0
    assert makespan_lower_bound([(5.0, 1.0, 1)], 4) == 6.0


def test_kueues_shapes_lose_the_capacity_idle_before_the_first_large() -> None:
    def bound(classes: tuple[WorkloadClass, ...]) -> float:
        stream = [(k.created_at(i), k.runtime, k.cpu) for k in classes for i in range(k.count)]
        return makespan_lower_bound(stream, 20)

    assert bound(LARGE_SCALE) == pytest.approx(4.538)  # work ÷ capacity: 4.025 s
    assert bound(BASELINE) == pytest.approx(66.92)  # work ÷ capacity: 66.0 s


def _protected_low_priority_replay() -> Simulation:
    """One queue of 4 CPU; each class's first workload arrives one interval in, at 1.0. "low"
    is admitted at 1.5 when high-0 finishes and would run until 11.5; high-1 arrives at 2.0
    but low is protected for 2 s, until 3.5, when high-1 preempts it; low is admitted again
    at 4.0 when high-1 finishes."""
    classes = (
        WorkloadClass("high", 2, 1.0, 0.5, 100, 4),
        WorkloadClass("low", 1, 1.0, 10.0, 0, 4),
    )
    sim = Simulation(
        Shape(cohorts=1, queues_per_cohort=1, classes=classes, nominal_cpu=4, min_admit_seconds=2)
    )
    sim.run()
    return sim


def test_a_replay_runs_a_cycle_when_a_protection_ends_without_any_other_event() -> None:
    stats = _protected_low_priority_replay().stats
    assert stats.first_admit[WorkloadId("cq-0-0-low-0")] == 1.5
    assert stats.first_admit[WorkloadId("cq-0-0-high-1")] == 3.5
    assert (stats.preemptions, stats.wakeup_cycles) == (1, 1)
    assert stats.lost_cpu_seconds == 8.0


def test_a_replay_counts_a_preempted_workloads_time_to_admission_to_its_last_admission() -> None:
    # As Kueue's harness does: "low" arrives at 1.0, is admitted at 1.5, preempted at 3.5
    # and admitted again at 4.0, so its time to admission is 3 s, not 0.5 s.
    report = _protected_low_priority_replay().report(0.0)
    assert report["avg_time_to_admission_ms"] == {"high": 750.0, "low": 3000.0}
    assert report["avg_time_to_first_admission_ms"] == {"high": 750.0, "low": 500.0}


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_many_more_random_trees_keep_within_quota(snap: object) -> None:
    from agent.engine.apply import apply_result
    from agent.engine.cycle import schedule
    from agent.engine.snapshot import Snapshot

    assert isinstance(snap, Snapshot)
    for now in (1.0, 2.0, 3.0):
        snap = apply_result(snap, schedule(snap, now))
        assert_within_quota(snap)
