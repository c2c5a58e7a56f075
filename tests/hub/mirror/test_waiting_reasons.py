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


async def _write(d: Dispatcher, reason: str, message: str, now: datetime) -> bool:
    """Write the Waiting condition if the dispatcher has something new to say; whether it had."""
    write = d._write_waiting(KEY, reason, message, now)
    if write is None:
        return False
    await write
    return True


async def test_a_new_message_for_the_same_reason_waits_for_the_refresh_interval(
    dispatcher: tuple[SqliteStore, Dispatcher],
) -> None:
    store, d = dispatcher
    assert await _write(d, "Waiting", "2 InsufficientHeadroom", T0)
    assert (await _waiting(store))["message"] == "2 InsufficientHeadroom"

    assert not await _write(d, "Waiting", "1 InsufficientHeadroom", T0 + timedelta(seconds=1))
    assert (await _waiting(store))["message"] == "2 InsufficientHeadroom"

    later = T0 + timedelta(seconds=WAITING_REFRESH_SECONDS)
    assert await _write(d, "Waiting", "1 InsufficientHeadroom", later)
    assert (await _waiting(store))["message"] == "1 InsufficientHeadroom"


async def test_the_same_reason_and_message_again_make_no_write(
    dispatcher: tuple[SqliteStore, Dispatcher],
) -> None:
    store, d = dispatcher
    assert await _write(d, "Waiting", "2 InsufficientHeadroom", T0)
    revision = (await store.get(f"/workloads/{KEY}")).revision
    later = T0 + timedelta(seconds=WAITING_REFRESH_SECONDS * 3)
    assert not await _write(d, "Waiting", "2 InsufficientHeadroom", later)
    assert (await store.get(f"/workloads/{KEY}")).revision == revision


async def test_a_new_reason_is_written_at_once(dispatcher: tuple[SqliteStore, Dispatcher]) -> None:
    store, d = dispatcher
    assert await _write(d, "Waiting", "2 InsufficientHeadroom", T0)
    assert await _write(d, "FleetQuotaExceeded", "cpu over", T0 + timedelta(seconds=1))
    waiting = await _waiting(store)
    assert (waiting["reason"], waiting["message"]) == ("FleetQuotaExceeded", "cpu over")
