"""Timestamps are written as Kubernetes writes metav1.Time: seconds precision, UTC, `Z`."""

from __future__ import annotations

import datetime as dt

from kubesim.objects import format_time

UTC = dt.UTC


def test_a_timestamp_is_written_to_the_second_in_utc() -> None:
    assert format_time(dt.datetime(2026, 12, 3, 8, 30, 5, 999_999, tzinfo=UTC)) == (
        "2026-12-03T08:30:05Z"
    )
    paris = dt.timezone(dt.timedelta(hours=1))
    assert format_time(dt.datetime(2026, 12, 3, 9, 30, 5, tzinfo=paris)) == "2026-12-03T08:30:05Z"


def test_moments_within_one_second_share_a_text_and_the_next_second_gets_its_own() -> None:
    # Recent seconds' texts are kept; any other second, in either direction, is formatted anew.
    moments = [
        dt.datetime(2026, 12, 3, 8, 30, 5, 100, tzinfo=UTC),
        dt.datetime(2026, 12, 3, 8, 30, 5, 900_000, tzinfo=UTC),
        dt.datetime(2026, 12, 3, 8, 30, 6, tzinfo=UTC),
        dt.datetime(2026, 12, 3, 8, 30, 4, 999_999, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
    ]
    assert [format_time(m) for m in moments] == [
        "2026-12-03T08:30:05Z",
        "2026-12-03T08:30:05Z",
        "2026-12-03T08:30:06Z",
        "2026-12-03T08:30:04Z",
        "1969-12-31T23:59:59Z",
    ]
