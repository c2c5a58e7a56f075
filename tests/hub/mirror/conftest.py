"""Fixtures of the hub's mirror tests: a store with the hub's mirror following it, and a
dispatcher over them holding one workload."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hub.auth import TokenAuthority
from hub.dispatch import Dispatcher
from hub.fleet import Fleet
from hub.objects import ObjectRepository
from hub.state import HubState
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_hub_state import _workload, eventually

KEY = "team/a"
"""The workload the `dispatcher` fixture holds."""


@pytest.fixture
async def mirror(tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, HubState]]:
    store = await SqliteStore.open(tmp_path / "hub.db")
    state = HubState(store)
    task = asyncio.create_task(state.run())
    await state.synced.wait()
    yield store, state
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await store.close()


@pytest.fixture
async def dispatcher(
    mirror: tuple[SqliteStore, HubState],
) -> tuple[SqliteStore, Dispatcher]:
    store, state = mirror
    await store.create(f"/workloads/{KEY}", _workload("a"))
    await eventually(lambda: KEY in state.workloads)
    fleet = Fleet(ObjectRepository(store), TokenAuthority(), secrets_dir=None)
    return store, Dispatcher(state, fleet)
