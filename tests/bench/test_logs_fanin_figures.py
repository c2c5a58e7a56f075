"""The logs fan-in benchmark's figures: the MBs it divides by are the bytes its followers
counted, not a product of rounded figures (a short run's window rounded to 0 s and every
per-MB figure came out as spent / 1e-9)."""

from __future__ import annotations

from bench.logs_fanin import Follower, cpu_seconds_per_mb, report


def _line(seq: int, pod: str = "p") -> dict[str, object]:
    return {"line": f"{seq} 1 {'x' * 90}", "pod": pod, "cluster": "sim-0"}


def test_a_report_counts_every_byte_its_followers_got() -> None:
    followers = [Follower("default/a"), Follower("default/b")]
    for seq in (1, 2, 3):
        followers[0].take(_line(seq))
    followers[1].take(_line(1))
    figures = report(followers, expected_per_workload=3)
    line_bytes = len(str(_line(1)["line"])) + 1
    assert figures["bytes"] == 4 * line_bytes


def test_cpu_per_mb_divides_by_the_bytes_delivered() -> None:
    assert cpu_seconds_per_mb({"hub": 0.5, "agent": 0.25}, 2_000_000) == {
        "hub": 0.25,
        "agent": 0.125,
    }


def test_nothing_delivered_gives_no_cpu_per_mb_rather_than_a_huge_one() -> None:
    assert cpu_seconds_per_mb({"hub": 0.5}, 0) == {}
