"""Why a workload waits at the hub: written when the reason changes, refreshed sparingly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hub.placement.book import WaitingNote
from hub.placement.cycle import waiting_due

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
REFRESH = 10.0


def test_a_first_reason_is_written() -> None:
    assert waiting_due(None, "Waiting", "2 InsufficientHeadroom", T0, REFRESH)


def test_a_new_message_for_the_same_reason_waits_for_the_refresh_interval() -> None:
    last = WaitingNote("Waiting", "2 InsufficientHeadroom", T0)
    soon = T0 + timedelta(seconds=1)
    assert not waiting_due(last, "Waiting", "1 InsufficientHeadroom", soon, REFRESH)
    later = T0 + timedelta(seconds=REFRESH)
    assert waiting_due(last, "Waiting", "1 InsufficientHeadroom", later, REFRESH)


def test_the_same_reason_and_message_again_make_no_write() -> None:
    last = WaitingNote("Waiting", "2 InsufficientHeadroom", T0)
    much_later = T0 + timedelta(seconds=REFRESH * 3)
    assert not waiting_due(last, "Waiting", "2 InsufficientHeadroom", much_later, REFRESH)


def test_a_new_reason_is_written_at_once() -> None:
    last = WaitingNote("Waiting", "2 InsufficientHeadroom", T0)
    soon = T0 + timedelta(seconds=1)
    assert waiting_due(last, "FleetQuotaExceeded", "cpu over", soon, REFRESH)
