"""The fair-sharing benchmark on a small cohort: it reaches the weighted shares and reports
what it counts."""

from __future__ import annotations

from bench.engine_fair_sharing import run


def test_four_weighted_queues_reach_their_shares_and_keep_them() -> None:
    report = run(cpus=16, seconds=8)
    assert report["final_share"] == report["target_share"]
    assert report["fair_within_3_rounds"] is True
    assert report["stays_fair_once_fair"] is True
    preemptions = report["preemptions"]
    not_toward = report["preemptions_not_toward_target"]
    assert isinstance(preemptions, int) and isinstance(not_toward, int)
    assert preemptions > 0 and 0 <= not_toward < preemptions
