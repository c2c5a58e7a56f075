"""Fixtures for the store suites: a real etcd server per session, stores per test.

The etcd server (Debian's etcd-server) starts once, lazily, the first time a test needs it,
with its data on tmpfs when available (fsync on tmpfs is cheap, which keeps the suite fast;
durability across crashes is the SQLite suite's business). Each etcd-backed store gets its
own root prefix, so tests sharing the server never see each other's keys. A missing etcd
binary fails the tests that need it: CI installs it, and nothing may be skipped silently.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.store.base import Store
from hub.store.etcd import EtcdStore
from hub.store.localetcd import EtcdNotInstalledError, LocalEtcd
from hub.store.sqlite import SqliteStore

StoreFactory = Callable[..., Awaitable[Store]]


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[LocalEtcd]:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() else None
    data_dir = Path(tempfile.mkdtemp(prefix="multiq-test-etcd-", dir=base))
    try:
        server = LocalEtcd.start(data_dir)
    except EtcdNotInstalledError as exc:
        shutil.rmtree(data_dir, ignore_errors=True)
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


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
