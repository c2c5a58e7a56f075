"""qctl_startup's p90 is a nearest-rank quantile, right for a few runs as for many."""

from __future__ import annotations

from bench.qctl_startup import nearest_rank


def test_p90_of_three_runs_is_the_slowest_not_the_median() -> None:
    assert nearest_rank([1.0, 2.0, 3.0], 0.9) == 3.0


def test_p90_of_thirty_runs_is_the_twenty_seventh() -> None:
    ordered = [float(i) for i in range(1, 31)]
    assert nearest_rank(ordered, 0.9) == 27.0


def test_the_median_rank_of_an_even_count_is_the_lower_middle() -> None:
    assert nearest_rank([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0


def test_a_rank_that_floating_point_puts_a_hair_above_a_whole_number_is_that_number() -> None:
    ordered = [float(i) for i in range(1, 71)]
    assert nearest_rank(ordered, 0.9) == 63.0
