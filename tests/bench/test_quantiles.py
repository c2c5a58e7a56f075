"""The benchmarks' quantile is a nearest-rank one, right for a few samples as for many (qctl_startup's
p90 of 3 runs was their median)."""

from __future__ import annotations

import pytest

from bench.quantiles import nearest_rank


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


def test_the_values_need_not_come_sorted() -> None:
    assert nearest_rank([3.0, 1.0, 2.0], 0.5) == 2.0


def test_no_values_have_no_quantile() -> None:
    with pytest.raises(ValueError, match="no quantile"):
        nearest_rank([], 0.99)
