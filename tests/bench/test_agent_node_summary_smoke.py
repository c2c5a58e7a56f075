"""The node summary benchmark runs on small counts and prints one figure per count."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from bench.agent_node_summary import main


def test_the_node_summary_bench_prints_a_cost_per_count_of_finished_pods() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["--finished", "10", "200"])
    figures = json.loads(out.getvalue())["cpu_ms_per_node_summary_by_finished_pods"]
    assert set(figures) == {"10", "200"} and all(ms >= 0 for ms in figures.values())
