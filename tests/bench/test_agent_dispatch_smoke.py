"""The agent dispatch benchmark counts a workload admitted at its first report as Admitted or
later, so Jobs that run before the agent's next status pass still count."""

from __future__ import annotations

import asyncio
import math

import pytest

from bench.agent_dispatch import bench

pytestmark = pytest.mark.slow


def test_the_agent_dispatch_bench_times_every_paced_offer_against_a_separate_kubesim() -> None:
    figures = asyncio.run(bench(20, 5, 50, separate=True))
    assert figures["admitted"] == figures["succeeded"] == 20
    p50, p99 = figures["admit_latency_p50_ms"], figures["admit_latency_p99_ms"]
    assert isinstance(p50, float) and isinstance(p99, float)
    assert math.isfinite(p50) and 0 < p50 <= p99
