"""The margin bench says how far MultiQ's ratio is above the required floor's, phase by phase
and round by round, and whether the median is within the bound; a small run of it starts both
benches in turn and reads their figures."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

import pytest

from bench.control_plane_margin import FIGURES, ROLES, main, margins, summary


def _figures(phase_names: tuple[str, str], cpu: list[dict[str, float]]) -> dict[str, Any]:
    return {name: {"cpu_ms_per_workload": c} for name, c in zip(phase_names, cpu, strict=True)}


def _round(
    floor_cpu: list[dict[str, float]], multiq_cpu: list[dict[str, float]]
) -> dict[str, dict[str, float]]:
    """`margins` of one round whose benches gave these CPU figures, throughput then paced."""
    floor = _figures(("throughput", "paced"), floor_cpu)
    multiq = _figures(("throughput", "latency"), [{**c, "bench": 9.0} for c in multiq_cpu])
    return margins(floor, multiq)


def test_a_rounds_margin_is_multiqs_ratio_over_the_floors_in_each_phase() -> None:
    got = _round(
        [{"hub": 0.5, "agent": 0.5, "kubesim": 0.5}, {"hub": 1.0, "agent": 1.0, "kubesim": 1.0}],
        [{"hub": 0.8, "agent": 0.7, "kubesim": 0.6}, {"hub": 1.5, "agent": 1.5, "kubesim": 1.0}],
    )
    assert {figure: got["throughput"][figure] for figure in FIGURES[:3]} == {
        "floor_ratio": 2.0,
        "multiq_ratio": 2.5,
        "margin": 1.25,
    }
    assert {figure: got["paced"][figure] for figure in FIGURES[:3]} == {
        "floor_ratio": 2.0,
        "multiq_ratio": 3.0,
        "margin": 1.5,
    }


def test_each_role_is_set_beside_its_floor_counterpart() -> None:
    got = _round(
        [{"hub": 0.5, "agent": 0.4, "kubesim": 0.5}, {"hub": 1.0, "agent": 1.0, "kubesim": 1.0}],
        [{"hub": 0.8, "agent": 0.6, "kubesim": 0.6}, {"hub": 1.75, "agent": 1.4, "kubesim": 1.1}],
    )
    assert {role: got["throughput"][f"{role}_over_floor"] for role in ROLES} == {
        "hub": 1.6,
        "agent": 1.5,
        "kubesim": 1.2,
    }
    assert {role: got["paced"][f"{role}_over_floor"] for role in ROLES} == {
        "hub": 1.75,
        "agent": 1.4,
        "kubesim": 1.1,
    }


def test_the_summary_takes_each_figures_median_and_holds_the_median_margin_to_the_bound() -> None:
    def round_(margin: float) -> dict[str, dict[str, float]]:
        by_role = {f"{role}_over_floor": margin + i for i, role in enumerate(ROLES)}
        phase = {"floor_ratio": 2.0, "multiq_ratio": 2.0 * margin, "margin": margin, **by_role}
        return {"throughput": phase, "paced": {**phase, "margin": margin + 0.1}}

    got = summary([round_(1.1), round_(1.3), round_(1.15)], bound=1.2)
    assert got["throughput"] == {
        "floor_ratio": 2.0,
        "multiq_ratio": 2.3,
        "margin": 1.15,
        "hub_over_floor": 1.15,
        "agent_over_floor": 2.15,
        "kubesim_over_floor": 3.15,
        "within_bound": True,
    }
    assert got["paced"]["margin"] == 1.25 and got["paced"]["within_bound"] is False


@pytest.mark.slow
@pytest.mark.e2e
def test_a_small_run_measures_both_benches_in_each_round_and_prints_the_margins() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--rounds", "2", "--workloads", "200", "--paced", "100", "--nodes", "4"]) == 0
    figures = json.loads(out.getvalue())
    rounds = figures["rounds"]
    assert len(rounds) == 2
    for phase in ("throughput", "paced"):
        for each in rounds:
            got = each[phase]
            assert got["floor_ratio"] > 0 and got["multiq_ratio"] > 0
            assert got["margin"] == pytest.approx(
                got["multiq_ratio"] / got["floor_ratio"], abs=0.001
            )
            assert all(got[f"{role}_over_floor"] > 0 for role in ROLES)
        # The median of the margins, not the quotient of the medians.
        margins = [each[phase]["margin"] for each in rounds]
        median = figures["median"][phase]
        assert median["margin"] == pytest.approx(sum(margins) / 2, abs=0.001)
        assert median["within_bound"] is (median["margin"] <= figures["bound"])
