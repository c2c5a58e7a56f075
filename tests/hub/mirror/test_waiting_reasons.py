"""Why a workload waits at the hub: written when the reason changes, refreshed sparingly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hub.auth import TokenAuthority
from hub.dispatch import WAITING_REFRESH_SECONDS, Dispatcher
from hub.fleet import Fleet
from hub.objects import ObjectRepository
from hub.state import HubState
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_hub_state import _workload, eventually

KEY = "team/a"
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
async def dispatcher(tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, Dispatcher]]:
    store = await SqliteStore.open(tmp_path / "hub.db")
    state = HubState(store)
    task = asyncio.create_task(state.run())
    await state.synced.wait()
    await store.create(f"/workloads/{KEY}", _workload("a"))
    await eventually(lambda: KEY in state.workloads)
    fleet = Fleet(ObjectRepository(store), TokenAuthority(), secrets_dir=None)
    yield store, Dispatcher(state, fleet)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await store.close()


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
