"""A victim search that only the preemptor's own queue can satisfy skips listing the rest of
the cohort's candidates (`Preemptor._own_queue_decides`); it must choose what the full search
chooses. Checked cycle by cycle over the incremental-cycle test's seeded random streams
(cohorts with borrowing, random preemption policies, protection in some configurations), the
cycle with the shortcut against the cycle with it turned off."""

from __future__ import annotations

import random

import pytest

from agent.engine.apply import apply_result
from agent.engine.cycle import schedule
from agent.engine.preemption import Preemptor
from agent.engine.result import CycleResult
from tests.agent.engine.test_incremental_cycle import _config, _events


def _decisions(result: CycleResult) -> tuple[object, ...]:
    return (
        result.admitted,
        result.preempted,
        dict(result.pending),
        result.nominated,
        result.new_preemptors,
        result.next_wakeup,
    )


def _stream(seed: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """One stream; returns how many cycles preempted."""
    rng = random.Random(seed)
    odd = rng.choice([0.0, 0.02, 0.1, 0.3])
    snap = _config(rng, {})
    now, n, preempting = 0.0, 0, 0
    for step in range(40):
        if step and rng.random() < 0.08:
            snap = _config(rng, dict(snap.workloads))
        snap, n = _events(rng, snap, now, n, odd)
        fast = schedule(snap, now)
        with monkeypatch.context() as m:
            m.setattr(Preemptor, "_plain", lambda self, cq: False)
            full = schedule(snap, now)
        assert _decisions(fast) == _decisions(full), (seed, step)
        preempting += bool(full.preempted)
        snap = apply_result(snap, full)
        now += rng.choice([0.25, 0.5, 1.0])
    return preempting


def test_a_search_the_own_queue_decides_chooses_the_victims_the_full_search_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    preempting = sum(_stream(seed, monkeypatch) for seed in range(40))
    assert preempting > 0, "no stream preempted"
