"""The federation dispatch bench runs a small real federation (hub, agents, kubesim) through
both of its phases and prints each process's CPU and the ratio issue 15 bounds."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from bench.federation_dispatch import control_plane_ratio, main

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_the_ratio_is_hub_plus_agent_over_kubesim() -> None:
    assert control_plane_ratio({"hub": 1.0, "agent": 1.5, "kubesim": 1.25, "bench": 9.0}) == 2.0


def test_the_bench_admits_every_workload_of_both_phases_and_prints_cpu_and_the_ratio() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--workloads", "40", "--paced", "20", "--rate", "100", "--nodes", "4"]) == 0
    figures = json.loads(out.getvalue())
    assert figures["throughput"]["workloads"] == 40 and figures["latency"]["workloads"] == 20
    for phase in ("throughput", "latency"):
        cpu = figures[phase]["cpu_ms_per_workload"]
        assert {"hub", "agent", "kubesim", "bench"} <= set(cpu)
        assert all(cpu[role] > 0 for role in ("hub", "agent", "kubesim"))
        assert figures[phase]["ratio_hub_plus_agent_to_kubesim"] == control_plane_ratio(cpu)
        assert figures[phase]["hub_steps_per_workload"]["reports_running"] > 0
