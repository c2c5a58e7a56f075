"""`LeaderFencedStore`: the store as one hub replica uses it — reads and watches go straight
to the store; writes go through the writer of the current leadership term, and fail with
`NotLeader` (nothing written) while this hub does not lead.

With etcd the term's writer is `EtcdStore.fenced(leadership)`, whose every write also checks
in etcd that the election key is still the one this hub won with: a leader that was deposed
without noticing yet (a long pause, a partition) writes nothing. With SQLite the hub is alone
and always leads; its writer is the store itself.

Every part of the hub writes through this one object (the mirror, the REST handlers, the
dispatch loop, the sessions), so no write can slip past the fence. Called by: hub.app (builds
it around the opened store) and hub.election (`lead` when a term begins, `step_down` when it
ends).
"""

from __future__ import annotations

from collections.abc import Mapping

from hub.metrics import UNCOUNTED, HubMetrics
from hub.store.base import (
    JsonObject,
    Listing,
    NotLeader,
    Revision,
    Store,
    StoredObject,
    WatchStream,
)

__all__ = ["LeaderFencedStore"]


class LeaderFencedStore:
    def __init__(self, store: Store, metrics: HubMetrics = UNCOUNTED) -> None:
        self.store = store
        self.metrics = metrics
        self._writer: Store | None = None

    @property
    def leading(self) -> bool:
        return self._writer is not None

    def lead(self, writer: Store) -> None:
        """A term begins: write through `writer` (a fenced view of the store)."""
        self._writer = writer

    def step_down(self) -> None:
        """The term ended: every write fails with NotLeader from now on."""
        self._writer = None

    def _writes(self, key: str) -> Store:
        if self._writer is None:
            raise NotLeader(key)
        return self._writer

    # -- reads: straight to the store --

    async def get(self, key: str) -> StoredObject:
        return await self.store.get(key)

    async def list(self, prefix: str) -> Listing:
        return await self.store.list(prefix)

    async def current_revision(self) -> Revision:
        return await self.store.current_revision()

    def watch(self, prefix: str, *, since: Revision) -> WatchStream:
        return self.store.watch(prefix, since=since)

    # -- writes: only while leading, through the term's writer --

    async def create(self, key: str, value: JsonObject) -> StoredObject:
        return await self.metrics.timed_write("create", self._writes(key).create(key, value))

    async def create_with(
        self, key: str, value: JsonObject, *, put: Mapping[str, JsonObject]
    ) -> StoredObject:
        # One transaction, so one write to count, under the op of the key it creates.
        writes = self._writes(key).create_with(key, value, put=put)
        return await self.metrics.timed_write("create", writes)

    async def update(
        self, key: str, value: JsonObject, *, expected: Revision | None
    ) -> StoredObject:
        writes = self._writes(key).update(key, value, expected=expected)
        return await self.metrics.timed_write("update", writes)

    async def delete(self, key: str, *, expected: Revision | None) -> StoredObject:
        writes = self._writes(key).delete(key, expected=expected)
        return await self.metrics.timed_write("delete", writes)

    async def compact(self, revision: Revision) -> None:
        # Compaction changes no object and is safe from any replica.
        await self.store.compact(revision)

    async def close(self) -> None:
        self._writer = None
        await self.store.close()
