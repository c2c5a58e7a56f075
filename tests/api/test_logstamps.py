"""Log line stamps have one canonical text: the cluster's RFC3339Nano and an older agent's
datetime JSON become it, its string order is time order, and it reads back as the time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from api.logstamps import InvalidStampError, all_canonical, canonical_stamp, stamp_of

TIMES = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
NANOS = st.integers(min_value=0, max_value=999)


def kubelet_form(when: datetime, nanos: int = 0) -> str:
    """What a kubelet prints before a line (Go's RFC3339Nano: trailing zeros left out)."""
    fraction = f"{when.microsecond:06d}{nanos:03d}".rstrip("0")
    return when.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


@given(TIMES, NANOS)
def test_the_clusters_stamp_becomes_the_canonical_text_of_its_time(
    when: datetime, nanos: int
) -> None:
    stamp = canonical_stamp(kubelet_form(when, nanos))
    assert stamp == when.isoformat(timespec="microseconds")
    assert datetime.fromisoformat(stamp) == when  # what an older hub parses: the same time


@given(TIMES, NANOS, TIMES, NANOS)
def test_canonical_stamps_compare_as_their_times_do(
    a: datetime, a_nanos: int, b: datetime, b_nanos: int
) -> None:
    first, second = (
        canonical_stamp(kubelet_form(a, a_nanos)),
        canonical_stamp(kubelet_form(b, b_nanos)),
    )
    assert (first < second) == (a < b)
    assert (first == second) == (a == b)


@given(TIMES)
def test_a_canonical_stamp_round_trips(when: datetime) -> None:
    stamp = stamp_of(when)
    assert canonical_stamp(stamp) == stamp
    assert canonical_stamp(stamp_of(datetime.fromisoformat(stamp))) == stamp
    assert all_canonical([stamp, stamp])


@given(TIMES, st.integers(min_value=-23 * 60, max_value=23 * 60))
def test_a_stamp_at_another_offset_becomes_its_utc_time(when: datetime, minutes: int) -> None:
    local = when.astimezone(timezone(timedelta(minutes=minutes)))
    assume(1 < local.year < 9999)
    assert canonical_stamp(local.isoformat()) == stamp_of(when)


@pytest.mark.parametrize(
    ("older_agent", "canonical"),
    [
        ("2026-12-04T10:00:00.123456Z", "2026-12-04T10:00:00.123456+00:00"),
        ("2026-12-04T10:00:00Z", "2026-12-04T10:00:00.000000+00:00"),
        ("2026-12-04T10:00:00.5Z", "2026-12-04T10:00:00.500000+00:00"),
        ("2026-12-04T10:00:00.123+00:00", "2026-12-04T10:00:00.123000+00:00"),
        ("2026-12-04T11:00:00.000007+01:00", "2026-12-04T10:00:00.000007+00:00"),
        ("2026-12-04T10:00:00.123456789-00:30", "2026-12-04T10:30:00.123456+00:00"),
        ("2026-12-04T10:00:00.000001", "2026-12-04T10:00:00.000001+00:00"),
    ],
    ids=[
        "utc Z",
        "no fraction",
        "short fraction",
        "+00:00",
        "+01:00",
        "nanoseconds -00:30",
        "naive",
    ],
)
def test_an_older_agents_datetime_json_is_made_canonical(older_agent: str, canonical: str) -> None:
    assert canonical_stamp(older_agent) == canonical


@pytest.mark.parametrize(
    "stamp",
    [
        "",
        "yesterday",
        "2026-12-04",
        "2026-13-04T10:00:00.123456Z",
        "2026-12-04T24:00:00.123456+00:00",
        "2026-12-04T10:00:60Z",
        "2026-12-04T10:00:00.1234567890Z",
        "2026-12-04T10:00:00.123456+00:00 ",
        "2026-12-04T10:00:00.123456+0000",
    ],
)
def test_a_malformed_stamp_is_refused_naming_it(stamp: str) -> None:
    with pytest.raises(InvalidStampError, match="not an RFC 3339 timestamp"):
        canonical_stamp(stamp)


def test_a_frames_stamps_are_checked_each_whole() -> None:
    good = "2026-12-04T10:00:00.123456+00:00"
    assert all_canonical([]) and all_canonical([good] * 3)
    # Two malformed stamps whose text joined would read as one good one.
    assert not all_canonical([good[:-1], good[-1:]])
    assert not all_canonical([good, "2026-12-04T10:00:00.123456Z"])
