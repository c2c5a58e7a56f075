"""The hub formats a frame's line timestamps in one call; the text is `isoformat`'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from api.v1alpha1.messages import LogData, LogLine
from hub.loghub import _stamps

PLUS_ONE = timezone(timedelta(hours=1))


def frame(*stamps: datetime | None) -> LogData:
    lines = [LogLine(timestamp=stamp, text=f"line {n}") for n, stamp in enumerate(stamps)]
    return LogData(stream_id="s", workload="a/b", cluster="c", pod="p", container="m", lines=lines)


@pytest.mark.parametrize(
    "stamps",
    [
        (),
        (datetime(2026, 12, 4, 10, 0, 0, 123456, tzinfo=UTC),),
        (datetime(2026, 12, 4, 10, 0, tzinfo=UTC), datetime(2026, 12, 4, 10, 0, 0, 1, tzinfo=UTC)),
        (datetime(2026, 12, 4, 10, 0, 0, 5, tzinfo=PLUS_ONE), datetime(2026, 12, 4, 11, 0)),
        (None, datetime(2026, 12, 4, 10, 0, 0, 7, tzinfo=UTC)),
    ],
    ids=["none", "utc", "a zero fraction", "other offsets and naive", "a line without one"],
)
def test_a_frames_stamps_read_as_isoformat_with_microseconds(
    stamps: tuple[datetime | None, ...],
) -> None:
    want = [s.isoformat(timespec="microseconds") if s else None for s in stamps]
    assert _stamps(frame(*stamps)) == want
