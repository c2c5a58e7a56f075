"""The topology report benchmark on 64 nodes of the 1,024-node profile: every state reports
its domains, sends fewer node groups than nodes, and stays small."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from bench.topology_report import main


def test_the_topology_report_bench_measures_every_state_of_the_fabric() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["topology_report", "quick"])
    result = json.loads(out.getvalue())
    assert result["nodes"] == 64
    assert set(result["states"]) == {"idle", "scattered", "racks"}
    for state in result["states"].values():
        assert state["bytes"] > state["bytes_without_topologies"]
        assert state["node_groups_sent"] < 2 * 64
        assert state["domains_sent_in_full"]["rack"] >= 1
