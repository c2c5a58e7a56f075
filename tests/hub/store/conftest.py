"""Fixtures for the store suites: stores per test, on SQLite or on the session's etcd server
(`etcd_server`, tests/hub/conftest.py).

Each etcd-backed store gets its own root prefix, so tests sharing the server never see each
other's keys.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from hub.store.base import Store
from hub.store.etcd import EtcdStore
from hub.store.localetcd import LocalEtcd
from hub.store.sqlite import SqliteStore

StoreFactory = Callable[..., Awaitable[Store]]


async def connect_etcd(server: LocalEtcd, **options: Any) -> EtcdStore:
    return await EtcdStore.connect(
        server.host, server.port, root=f"/test-{uuid.uuid4().hex[:12]}", **options
    )


@pytest.fixture(params=["sqlite", "etcd"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Builds stores of the parametrised kind (options: watch_buffer); closes them after."""
    opened: list[Store] = []
    server: LocalEtcd | None = (
        request.getfixturevalue("etcd_server") if request.param == "etcd" else None
    )

    async def make(**options: Any) -> Store:
        store: Store
        if server is None:
            store = await SqliteStore.open(tmp_path / f"store-{len(opened)}.db", **options)
        else:
            store = await connect_etcd(server, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
async def store(make_store: StoreFactory) -> Store:
    return await make_store()
