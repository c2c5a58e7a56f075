"""The agent state-writes benchmark runs on a small count and prints a CPU figure per mode."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from bench.agent_state_writes import main


def test_the_state_writes_bench_prints_the_cpu_of_a_write_in_each_mode() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["--batches", "20", "--rows", "3", "--interval-ms", "0.1", "--rounds", "1"])
    figures = json.loads(out.getvalue())["cpu_us_per_batch"]
    assert set(figures) == {"in_loop", "thread", "write"}
