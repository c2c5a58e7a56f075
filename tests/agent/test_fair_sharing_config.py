"""Preemption-based fair sharing in the agent: switched on by its `--fair-sharing` flag or by
a MemberCluster's `spec.fairSharing` sent by the hub in ConfigSync (which wins), and the
weighted shares its capacity reports carry."""

from __future__ import annotations

from datetime import UTC, datetime

import pydantic
import pytest

from agent.capacity import capacity_report
from agent.engine.snapshot import EngineConfig, FairSharingStrategy
from agent.engine.snapshot import FairSharing as EngineFairSharing
from agent.settings import parse_args
from agent.snapshots import SnapshotCache
from api.v1alpha1.federation import FairSharing
from api.v1alpha1.messages import ConfigSync, NodeSummary
from tests.builders import cohort, cq, snapshot, wl

REQUIRED = ["--hub", "http://hub", "--cluster", "c", "--token", "t"]
FINAL = FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
INITIAL = FairSharingStrategy.LESS_THAN_INITIAL_SHARE
TOWARD = FairSharingStrategy.TOWARD_FAIR_SHARE


@pytest.mark.parametrize(
    ("flag", "strategies"),
    [
        pytest.param([], None, id="off by default"),
        pytest.param(["--fair-sharing", "default"], (FINAL, INITIAL), id="default: both"),
        pytest.param(["--fair-sharing", "LessThanInitialShare"], (INITIAL,), id="one named"),
        pytest.param(
            ["--fair-sharing", "MultiQTowardFairShare"], (TOWARD,), id="MultiQ's strategy"
        ),
    ],
)
def test_the_agents_flag_sets_the_engines_fair_sharing(
    flag: list[str], strategies: tuple[FairSharingStrategy, ...] | None
) -> None:
    settings = parse_args([*REQUIRED, *flag])
    cache = SnapshotCache(fair_sharing=settings.fair_sharing)
    got = cache.build(ConfigSync(revision=1), {}).config.fair_sharing
    assert got == (None if strategies is None else EngineFairSharing(strategies))


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="LessThanOrEqualToFinalShare"):
        parse_args([*REQUIRED, "--fair-sharing", "Greedy"])


def test_multiq_toward_fair_share_beside_a_kueue_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="MultiQTowardFairShare must be the only strategy"):
        parse_args([*REQUIRED, "--fair-sharing", "LessThanInitialShare,MultiQTowardFairShare"])


def test_the_hub_sends_multiq_toward_fair_share_to_the_engine() -> None:
    pushed = ConfigSync(
        revision=3, fair_sharing=FairSharing(preemption_strategies=["MultiQTowardFairShare"])
    )
    sync = ConfigSync.model_validate_json(pushed.model_dump_json(by_alias=True))
    cache = SnapshotCache()
    assert cache.build(sync, {}).config.fair_sharing == EngineFairSharing((TOWARD,))


def test_the_hubs_setting_wins_over_the_agents_flag() -> None:
    cache = SnapshotCache(fair_sharing=FairSharing())
    pushed = ConfigSync(
        revision=2, fair_sharing=FairSharing(preemption_strategies=["LessThanInitialShare"])
    )
    assert cache.build(pushed, {}).config.fair_sharing == EngineFairSharing((INITIAL,))
    sync = ConfigSync.model_validate_json(pushed.model_dump_json(by_alias=True))
    assert sync.fair_sharing == pushed.fair_sharing


@pytest.mark.parametrize(
    ("config", "shares"),
    [
        pytest.param(EngineConfig(), [], id="off: no shares reported"),
        pytest.param(
            EngineConfig(fair_sharing=EngineFairSharing()),
            [("ClusterQueue", "a", 200), ("ClusterQueue", "lender", 0), ("Cohort", "c", 0)],
            id="on: every cluster queue and cohort",
        ),
    ],
)
def test_capacity_reports_carry_the_weighted_shares_when_fair_sharing_is_on(
    config: EngineConfig, shares: list[tuple[str, str, int]]
) -> None:
    snap = snapshot(
        cqs=[
            cq("a").cohort("c").quota("cpu", nominal="0").weight(2),
            cq("lender").cohort("c").quota("cpu", nominal="10"),
        ],
        cohorts=[cohort("c")],
        workloads=[wl("w").request("cpu", "4").admitted("a")],
        config=config,
    )
    report = capacity_report(
        cluster="east",
        snapshot=snap,
        nodes=NodeSummary(),
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        config_revision=1,
    )
    assert [(s.kind, s.name, s.weighted_share) for s in report.weighted_shares] == shares
