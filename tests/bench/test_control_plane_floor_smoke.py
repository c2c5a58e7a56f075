"""The control plane floor bench runs a small federation of floor hub, floor agents and kubesim
to the end: every workload submitted is reported Running, and each process's CPU is counted;
with `--validate` its hub checks and converts each submission as the real hub must, and with
`--agent-batch` its agents create the Jobs of the offers gathered in rounds, none left out;
with `--required` the offers and reports are the protocol's messages and the agents admit
through the engine; with `--commit-interval` its hub gathers commits as multiq-hub's store does."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from bench.control_plane_floor import main

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.mark.parametrize(
    "checks",
    [
        [],
        ["--validate"],
        ["--agent-batch", "0.05"],
        ["--required", "--agent-batch", "0.05"],
        ["--required", "--agent-batch", "0.05", "--commit-interval", "0.01"],
    ],
    ids=[
        "plain",
        "validating",
        "creating-jobs-in-rounds",
        "doing-what-multiq-requires",
        "committing-as-multiq-does",
    ],
)
def test_the_floor_bench_runs_every_workload_of_both_phases_and_prints_each_processs_cpu(
    checks: list[str],
) -> None:
    out = io.StringIO()
    # Enough workloads for every process to spend several clock ticks (10 ms, the unit of
    # /proc's CPU times) in each phase: the floor hub spends ~0.2 ms per workload, so 40 of
    # them came to less than one tick now and then, and read as 0.
    with redirect_stdout(out):
        main(
            [
                "--workloads",
                "200",
                "--paced",
                "100",
                "--rate",
                "200",
                "--clusters",
                "2",
                "--nodes",
                "4",
                *checks,
            ]
        )
    figures = json.loads(out.getvalue())
    assert figures["event_loop"] == "uvloop"
    assert figures["validate"] == ("--validate" in checks or "--required" in checks)
    assert figures["required"] == ("--required" in checks)
    assert figures["agent_batch_seconds"] == (0.05 if "--agent-batch" in checks else 0.0)
    assert figures["commit_interval_seconds"] == (0.01 if "--commit-interval" in checks else 0.0)
    for phase, count in (("throughput", 200), ("paced", 100)):
        assert figures[phase]["workloads"] == count
        cpu = figures[phase]["cpu_ms_per_workload"]
        assert set(cpu) == {"hub", "agent", "kubesim"} and all(ms > 0 for ms in cpu.values())
        assert figures[phase]["floor_ratio_hub_plus_agent_to_kubesim"] == pytest.approx(
            (cpu["hub"] + cpu["agent"]) / cpu["kubesim"], abs=0.01
        )
