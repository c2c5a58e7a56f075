"""Fixtures shared by the hub's suites: one real etcd server per test session, and a hub store
in a fresh SQLite file per test (`sqlite_store`).

The etcd server (Debian's etcd-server) starts once, lazily, the first time a test needs it,
with its data on tmpfs when available (fsync on tmpfs is cheap, which keeps the suite fast;
durability across crashes is the SQLite suite's business). Tests sharing it keep apart by
root prefix. A missing etcd binary fails the tests that need it: CI installs it, and nothing
may be skipped silently.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hub.store.localetcd import EtcdNotInstalledError, LocalEtcd
from hub.store.sqlite import SqliteStore


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


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """A hub store in a fresh SQLite file, closed after the test."""
    opened = await SqliteStore.open(tmp_path / "hub.db")
    try:
        yield opened
    finally:
        await opened.close()
