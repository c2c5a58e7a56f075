"""Switching preemption-based fair sharing on: the agent's `--fair-sharing` flag, and a
MemberCluster's `spec.fairSharing` sent by the hub in ConfigSync, which wins."""

from __future__ import annotations

import pydantic
import pytest

from agent.engine.snapshot import FairSharing as EngineFairSharing
from agent.engine.snapshot import FairSharingStrategy
from agent.settings import parse_args
from agent.snapshots import SnapshotCache
from api.v1alpha1.federation import FairSharing
from api.v1alpha1.messages import ConfigSync

REQUIRED = ["--hub", "http://hub", "--cluster", "c", "--token", "t"]
FINAL = FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
INITIAL = FairSharingStrategy.LESS_THAN_INITIAL_SHARE


@pytest.mark.parametrize(
    ("flag", "strategies"),
    [
        pytest.param([], None, id="off by default"),
        pytest.param(["--fair-sharing", "default"], (FINAL, INITIAL), id="default: both"),
        pytest.param(["--fair-sharing", "LessThanInitialShare"], (INITIAL,), id="one named"),
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


def test_the_hubs_setting_wins_over_the_agents_flag() -> None:
    cache = SnapshotCache(fair_sharing=FairSharing())
    pushed = ConfigSync(
        revision=2, fair_sharing=FairSharing(preemption_strategies=["LessThanInitialShare"])
    )
    assert cache.build(pushed, {}).config.fair_sharing == EngineFairSharing((INITIAL,))
    sync = ConfigSync.model_validate_json(pushed.model_dump_json(by_alias=True))
    assert sync.fair_sharing == pushed.fair_sharing
