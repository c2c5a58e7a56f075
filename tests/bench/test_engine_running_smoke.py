"""The engine's running-workloads benchmark at a tiny scale: each cycle sees one finish and
admits one, both cycles decide alike, and its JSON has the figures."""

from __future__ import annotations

import json
import sys

import pytest

from agent.engine.cycle import schedule, schedule_incremental
from bench.engine_running import build, main, steps


def test_each_step_finishes_one_running_workload_and_admits_one_waiting() -> None:
    start = build(50, pods_ready=True)
    plan = steps(start, 10)
    _, carry = schedule_incremental(start, 9.0)
    running_before = sum(1 for w in start.workloads.values() if w.admission is not None)
    for snap, changed, now in plan:
        assert sum(1 for w in snap.workloads.values() if w.admission is not None) == (
            running_before - 1
        )
        incremental, carry = schedule_incremental(snap, now, carry, changed)
        full = schedule(snap, now)
        assert incremental.admitted == full.admitted and len(full.admitted) == 1
        assert incremental.next_wakeup == full.next_wakeup


def test_it_prints_the_cost_per_cycle_of_both_cycles(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["engine_running", "--running", "100", "--cycles", "5"])
    main()
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "engine_running"
    assert [(r["running"], r["wait_for_pods_ready"]) for r in out["results"]] == [
        (100, False),
        (100, True),
    ]
    for result in out["results"]:
        assert result["incremental_us_per_cycle"] > 0 and result["full_us_per_cycle"] > 0
