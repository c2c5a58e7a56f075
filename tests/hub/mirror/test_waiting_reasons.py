"""Why a workload waits at the hub: written when the reason changes, refreshed sparingly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hub.dispatch import WAITING_REFRESH_SECONDS, Dispatcher
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.conftest import KEY

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def _waiting(store: SqliteStore) -> dict[str, Any]:
    stored = await store.get(f"/workloads/{KEY}")
    conditions = stored.value["status"]["conditions"]
    return next(c for c in conditions if c["type"] == "QuotaReserved")


async def test_a_new_message_for_the_same_reason_waits_for_the_refresh_interval(
    dispatcher: tuple[SqliteStore, Dispatcher],
) -> None:
    store, d = dispatcher
    await d._write_waiting(KEY, "Waiting", "2 InsufficientHeadroom", T0)
    assert (await _waiting(store))["message"] == "2 InsufficientHeadroom"

    await d._write_waiting(KEY, "Waiting", "1 InsufficientHeadroom", T0 + timedelta(seconds=1))
    assert (await _waiting(store))["message"] == "2 InsufficientHeadroom"

    later = T0 + timedelta(seconds=WAITING_REFRESH_SECONDS)
    await d._write_waiting(KEY, "Waiting", "1 InsufficientHeadroom", later)
    assert (await _waiting(store))["message"] == "1 InsufficientHeadroom"


async def test_a_new_reason_is_written_at_once(dispatcher: tuple[SqliteStore, Dispatcher]) -> None:
    store, d = dispatcher
    await d._write_waiting(KEY, "Waiting", "2 InsufficientHeadroom", T0)
    await d._write_waiting(KEY, "FleetQuotaExceeded", "cpu over", T0 + timedelta(seconds=1))
    waiting = await _waiting(store)
    assert (waiting["reason"], waiting["message"]) == ("FleetQuotaExceeded", "cpu over")
