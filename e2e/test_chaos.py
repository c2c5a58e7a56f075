"""Whatever fails — a hub killed (the leader or its standby), etcd killed, an agent killed,
an agent frozen past the loss timeout, its connections cut or black-holed, the cluster's API
failing — every workload the hub accepted finishes, exactly once, and no workload runs in
two clusters at once.

The bounded chaos run (e2e.chaos.driver, `ChaosConfig.bounded()`): two hubs on a local etcd,
300 short workloads over the three dispatch modes and one or two faults of each kind of
issue #15, about four minutes. The long run, with every fault ten times over, is
`python -m bench.chaos` (two hubs on etcd; `--single` for one hub on SQLite).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from e2e.chaos.driver import ChaosConfig, run_chaos
from e2e.chaos.faults import FaultKind

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]


def test_under_chaos_nothing_accepted_is_lost_runs_twice_at_once_or_stays_stuck(
    tmp_path: Path,
) -> None:
    config = ChaosConfig.bounded()
    assert config.ha >= 2 and set(config.faults) == set(FaultKind)
    report = asyncio.run(run_chaos(config, tmp_path / "chaos"))
    print(json.dumps(report.to_json(), indent=2))  # shown with -s, and on failure
    verdict = report.verdict
    assert report.not_accepted == {}, report.failure_message()  # all 300 were taken
    assert report.skipped == {}, report.failure_message()
    assert report.not_injected == [], report.failure_message()
    assert {str(k) for k in config.faults} == {str(f.kind) for f in report.faults}, (
        "every planned fault kind was injected"
    )
    assert verdict.lost == (), report.failure_message()
    assert verdict.overlapping == (), report.failure_message()
    assert verdict.stuck == (), report.failure_message()
    assert report.ok, report.failure_message()
