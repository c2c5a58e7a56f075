"""The hub's in-memory mirror of its store: every configuration object and every workload,
kept current by one list-then-watch loop over the whole store (relisting when the history it
needs was compacted), so the dispatch loop and the sessions read memory, not the store.

Writes always go to the store (hub.objects); the mirror learns of them — the hub's own and
anyone else's — from the watch, then tells its listeners: configuration changed, a workload
changed, a workload was deleted.

Called by: hub.app (starts it), hub.dispatch, hub.sessions, hub.config_push, hub.http.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from api.kinds import ALL_KINDS
from api.meta import Object
from api.v1alpha1.workload import Workload
from hub.store import base as store_base
from hub.store.base import Event, EventType, Revision, Store, StoredObject

__all__ = ["HubState", "WorkloadEntry"]

log = logging.getLogger(__name__)

_KINDS_BY_PLURAL: dict[str, type[Object]] = {
    k.plural(): k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")
}
WORKLOADS = Workload.plural()


@dataclass
class WorkloadEntry:
    workload: Workload
    revision: Revision


@dataclass
class HubState:
    store: Store
    config: dict[str, dict[str, Object]] = field(default_factory=dict)
    workloads: dict[str, WorkloadEntry] = field(default_factory=dict)
    revision: Revision = field(default_factory=lambda: Revision(0))
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    on_config: list[Callable[[str], None]] = field(default_factory=list)
    on_workload: list[Callable[[str, Workload | None, Workload | None], None]] = field(
        default_factory=list
    )

    # --- reads ------------------------------------------------------------------------------

    def objects(self, kind: type[Object]) -> list[Object]:
        return list(self.config.get(kind.plural(), {}).values())

    def typed(self, kind: type[Object]) -> list[Object]:
        return self.objects(kind)

    def find(self, kind: type[Object], name: str, namespace: str | None = None) -> Object | None:
        key = f"{namespace}/{name}" if kind.NAMESPACED else name
        return self.config.get(kind.plural(), {}).get(key)

    # --- the mirror loop ------------------------------------------------------------------

    async def run(self) -> None:
        """List everything, then follow the watch; relist when the watch is compacted."""
        while True:
            try:
                listing = await self.store.list("/")
                self._replace_all(listing.items)
                self.revision = listing.revision
                self.synced.set()
                async with self.store.watch("/", since=listing.revision) as events:
                    async for event in events:
                        self._apply(event)
                        self.revision = event.revision
            except store_base.Compacted:
                log.info("state: watch history compacted; relisting")
            except store_base.Unavailable as exc:
                log.warning("state: store unavailable (%s); retrying in 1s", exc)
                await asyncio.sleep(1)

    def _parse(self, stored: StoredObject) -> tuple[str, str, Object] | None:
        parts = stored.key.strip("/").split("/")
        kind = _KINDS_BY_PLURAL.get(parts[0])
        if kind is None:
            return None
        value = dict(stored.value)
        meta = dict(value.get("metadata") or {})
        meta["resourceVersion"] = str(stored.revision)
        value["metadata"] = meta
        try:
            obj = kind.model_validate(value)
        except Exception as exc:  # a stored object we cannot read must not stop the hub
            log.error("state: cannot read %s: %s", stored.key, exc)
            return None
        return parts[0], "/".join(parts[1:]), obj

    def _replace_all(self, items: tuple[StoredObject, ...]) -> None:
        old_workloads = self.workloads
        self.config = {}
        self.workloads = {}
        for stored in items:
            parsed = self._parse(stored)
            if parsed is None:
                continue
            plural, key, obj = parsed
            if plural == WORKLOADS and isinstance(obj, Workload):
                self.workloads[key] = WorkloadEntry(obj, stored.revision)
            else:
                self.config.setdefault(plural, {})[key] = obj
        for plural in _KINDS_BY_PLURAL:
            if plural != WORKLOADS:
                self._notify_config(plural)
        for key in set(old_workloads) | set(self.workloads):
            old = old_workloads.get(key)
            new = self.workloads.get(key)
            self._notify_workload(key, old.workload if old else None, new.workload if new else None)

    def _apply(self, event: Event) -> None:
        parsed = self._parse(event.object)
        if parsed is None:
            return
        plural, key, obj = parsed
        deleted = event.type is EventType.DELETED
        if plural == WORKLOADS and isinstance(obj, Workload):
            old = self.workloads.get(key)
            if deleted:
                self.workloads.pop(key, None)
                self._notify_workload(key, obj, None)
            else:
                self.workloads[key] = WorkloadEntry(obj, event.revision)
                self._notify_workload(key, old.workload if old else None, obj)
            return
        bucket = self.config.setdefault(plural, {})
        if deleted:
            bucket.pop(key, None)
        else:
            bucket[key] = obj
        self._notify_config(plural)

    def _notify_config(self, plural: str) -> None:
        for listener in self.on_config:
            listener(plural)

    def _notify_workload(self, key: str, old: Workload | None, new: Workload | None) -> None:
        for listener in self.on_workload:
            listener(key, old, new)
