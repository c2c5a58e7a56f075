"""Whatever fails — the hub or an agent killed, an agent frozen past the loss timeout, its
connection cut or black-holed, the cluster's API failing — every workload the hub accepted
finishes, exactly once, and no workload runs in two clusters at once.

The bounded chaos run (e2e.chaos.driver, `ChaosConfig.bounded()`): 300 short workloads over
the three dispatch modes and one or two faults of each kind, about three minutes. The long
run, with every fault ten times over, is `python -m bench.chaos`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from e2e.chaos.driver import ChaosConfig, run_chaos
from e2e.chaos.faults import FaultKind
from e2e.chaos.federation import ha_unavailable

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]


def test_under_chaos_nothing_accepted_is_lost_runs_twice_at_once_or_stays_stuck(
    tmp_path: Path,
) -> None:
    config = ChaosConfig.bounded()
    report = asyncio.run(run_chaos(config, tmp_path / "chaos"))
    print(json.dumps(report.to_json(), indent=2))  # shown with -s, and on failure
    verdict = report.verdict
    assert report.not_accepted == {}, report.failure_message()  # all 300 were taken
    assert {str(k) for k in config.faults if report.skipped.get(str(k)) is None} == {
        str(f.kind) for f in report.faults
    }, "every planned fault not skipped for HA was injected"
    assert verdict.lost == (), report.failure_message()
    assert verdict.overlapping == (), report.failure_message()
    assert verdict.stuck == (), report.failure_message()
    assert report.ok, report.failure_message()


def test_the_hub_failover_faults_run_when_several_hubs_share_etcd(tmp_path: Path) -> None:
    reason = ha_unavailable()
    if reason is not None:
        pytest.skip(reason)
    config = ChaosConfig(
        workloads=300,
        faults={FaultKind.ETCD_KILL: 2, FaultKind.LEADER_KILL: 3},
        holds=ChaosConfig.bounded().holds,
    )
    report = asyncio.run(run_chaos(config, tmp_path / "chaos"))
    assert report.skipped == {}
    assert report.ok, report.failure_message()
