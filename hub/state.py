"""The hub's in-memory mirror of its store: every configuration object and every workload,
kept current by one list-then-watch loop over the whole store (relisting when the history it
needs was compacted), so the dispatch loop and the sessions read memory, not the store.

Writes always go to the store (hub.objects); the mirror learns of them — the hub's own and
anyone else's — from the watch, then tells its listeners: configuration changed, a workload
changed, a workload was deleted. The dispatcher may also put its own successful writes in the
mirror at once (`remember`), so its next decision need not wait for the watch; a watch event
older than what the mirror holds is then skipped.

Workloads are the hot path: a status write changes only `status` and `metadata`, so an event
whose spec equals the mirrored one re-parses just those and shares the parsed spec (specs are
never changed in place). The mirror also keeps `pending`, the keys of workloads still waiting
for a cluster, so the dispatch loop does not walk finished and bound work every cycle, and
`by_cluster`, the unfinished workloads bound or offered to each cluster, so that letting go
of a lost cluster's work looks at that work alone.

Called by: hub.app (starts it), hub.dispatch, hub.sessions, hub.config_push, hub.http.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from api.kinds import ALL_KINDS
from api.meta import Object, ObjectMeta
from api.v1alpha1.conversions import POD_GROUP_WAITING_ANNOTATION
from api.v1alpha1.workload import Workload, WorkloadStatus
from hub import transitions
from hub.store import base as store_base
from hub.store.base import Event, EventType, Revision, Store, StoredObject

__all__ = ["SOURCE_PREFIX", "HubState", "WorkloadEntry", "clusters_of"]

log = logging.getLogger(__name__)

_KINDS_BY_PLURAL: dict[str, type[Object]] = {
    k.plural(): k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")
}
WORKLOADS = Workload.plural()
SOURCE_PREFIX = "/workloadsources/"
"""Where the object a user submitted (a Job, a JobSet) is kept, under `namespace/name`."""
FRESH_SOURCES_KEPT = 10_000


@dataclass
class WorkloadEntry:
    workload: Workload
    revision: Revision
    # The stored form (without resourceVersion): writers reuse its spec instead of
    # serializing the spec again.
    raw: dict[str, Any]

    @cached_property
    def order(self) -> tuple[int, float]:
        """Dispatch order: higher priority first, then older first."""
        wl = self.workload
        created = wl.metadata.creation_timestamp
        return (-(wl.spec.priority or 0), created.timestamp() if created else 0.0)


def is_pending(wl: Workload) -> bool:
    """Still waiting for a cluster: active, not finished, not bound to a cluster, and not a
    pod group still waiting for some of its pods (hub.http.submit)."""
    if not wl.spec.active or POD_GROUP_WAITING_ANNOTATION in wl.metadata.annotations:
        return False
    if wl.status is not None and wl.status.cluster_name:
        return False
    return not transitions.is_finished(wl)


def clusters_of(wl: Workload) -> tuple[str, ...]:
    """The clusters an unfinished workload is bound to or offered to (none once finished)."""
    st = wl.status
    if st is None or transitions.is_finished(wl):
        return ()
    if st.cluster_name:
        if not st.nominated_cluster_names:
            return (st.cluster_name,)
        return tuple(dict.fromkeys((st.cluster_name, *st.nominated_cluster_names)))
    return tuple(dict.fromkeys(st.nominated_cluster_names))


@dataclass
class HubState:
    store: Store
    config: dict[str, dict[str, Object]] = field(default_factory=dict)
    workloads: dict[str, WorkloadEntry] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    # cluster → keys of unfinished workloads bound to it or offered to it (nominated).
    by_cluster: dict[str, set[str]] = field(default_factory=dict)
    _clusters_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Sources submitted through this hub and not offered yet: the first offer takes its
    # source from here instead of reading the store. Bounded; the store has them all.
    fresh_sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    _expected: dict[str, tuple[Workload, dict[str, Any]]] = field(default_factory=dict)
    revision: Revision = field(default_factory=lambda: Revision(0))
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    on_config: list[Callable[[str], None]] = field(default_factory=list)
    on_workload: list[Callable[[str, Workload | None, Workload | None], None]] = field(
        default_factory=list
    )
    # Called with a workload's key whenever the mirror's entry for it changes, including the
    # hub's own writes put in by `remember` (which `on_workload` hears of only later).
    on_indexed: list[Callable[[str], None]] = field(default_factory=list)
    # Counts changes of configuration objects' definitions (spec, labels, annotations; not
    # status, which agents' heartbeats rewrite every few seconds) and relists: whatever was
    # derived from the configuration is stale once it moves.
    config_generation: int = 0

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
        key = "/".join(parts[1:])
        value = store_base.with_resource_version(stored.value, stored.revision)
        try:
            old = self.workloads.get(key) if kind is Workload else None
            if old is not None and old.raw.get("spec") == value.get("spec"):
                obj: Object = self._reparse_status(old.workload, value)
            else:
                obj = kind.model_validate(value)
        except Exception as exc:  # a stored object we cannot read must not stop the hub
            log.error("state: cannot read %s: %s", stored.key, exc)
            return None
        return parts[0], key, obj

    @staticmethod
    def _reparse_status(old: Workload, value: dict[str, Any]) -> Workload:
        status = value.get("status")
        return old.model_copy(
            update={
                "metadata": ObjectMeta.model_validate(value["metadata"]),
                "status": WorkloadStatus.model_validate(status) if status is not None else None,
            }
        )

    def keep_fresh_source(self, key: str, source: dict[str, Any]) -> None:
        self.fresh_sources[key] = source
        while len(self.fresh_sources) > FRESH_SOURCES_KEPT:
            del self.fresh_sources[next(iter(self.fresh_sources))]

    def take_fresh_source(self, key: str) -> dict[str, Any] | None:
        return self.fresh_sources.pop(key, None)

    def expect(self, key: str, workload: Workload, raw: dict[str, Any]) -> None:
        """The hub is about to write `raw` as `workload`: when the watch brings that value
        back, take `workload` as it is instead of parsing it. The caller hands `workload`
        over (it is a copy of its own, not the mirror's): the mirror stamps its
        resourceVersion on it and keeps it, so the caller changes it no more."""
        self._expected[key] = (workload, raw)

    def unexpect(self, key: str, workload: Workload) -> None:
        if (pending := self._expected.get(key)) is not None and pending[0] is workload:
            del self._expected[key]

    def remember(
        self, key: str, workload: Workload, revision: Revision, raw: dict[str, Any]
    ) -> Workload:
        """Put the hub's own successful write in the mirror before its watch event arrives;
        returns what the mirror holds for it (with its resourceVersion). `workload` is
        handed over, as to `expect`."""
        self.unexpect(key, workload)
        current = self.workloads.get(key)
        if current is not None and current.revision >= revision:
            return current.workload if current.revision == revision else workload
        workload = _at_revision(workload, revision)
        self.workloads[key] = WorkloadEntry(workload, revision, raw)
        self._index(key, workload)
        return workload

    def _index(self, key: str, workload: Workload | None) -> None:
        for listener in self.on_indexed:
            listener(key)
        if workload is not None and is_pending(workload):
            self.pending.add(key)
        else:
            self.pending.discard(key)
        clusters = clusters_of(workload) if workload is not None else ()
        before = self._clusters_of.get(key, ())
        if clusters == before:
            return
        for cluster in before:
            keys = self.by_cluster[cluster]
            keys.discard(key)
            if not keys:
                del self.by_cluster[cluster]
        for cluster in clusters:
            self.by_cluster.setdefault(cluster, set()).add(key)
        if clusters:
            self._clusters_of[key] = clusters
        else:
            del self._clusters_of[key]

    def _replace_all(self, items: tuple[StoredObject, ...]) -> None:
        old_workloads = self.workloads
        self.config = {}
        self.workloads = {}
        self.pending = set()
        self.by_cluster = {}
        self._clusters_of = {}
        for stored in items:
            parsed = self._parse(stored)
            if parsed is None:
                continue
            plural, key, obj = parsed
            if plural == WORKLOADS and isinstance(obj, Workload):
                self.workloads[key] = WorkloadEntry(obj, stored.revision, _without_rv(stored.value))
                self._index(key, obj)
            else:
                self.config.setdefault(plural, {})[key] = obj
        self.config_generation += 1
        for plural in _KINDS_BY_PLURAL:
            if plural != WORKLOADS:
                self._notify_config(plural)
        for key in set(old_workloads) | set(self.workloads):
            old = old_workloads.get(key)
            new = self.workloads.get(key)
            self._notify_workload(key, old.workload if old else None, new.workload if new else None)

    def _apply(self, event: Event) -> None:
        deleted = event.type is EventType.DELETED
        if not deleted and event.object.key.startswith(f"/{WORKLOADS}/"):
            key = event.object.key[len(WORKLOADS) + 2 :]
            known = self.workloads.get(key)
            if known is not None and known.revision >= event.revision:
                # Already in the mirror (`remember`), or older than what it holds.
                self._notify_workload(key, known.workload, known.workload)
                return
            expected = self._expected.get(key)
            if expected is not None and _same_value(expected[1], event.object.value):
                # The hub's own write, back before its writer resumed: no need to parse.
                del self._expected[key]
                workload = _at_revision(expected[0], event.revision)
                self.workloads[key] = WorkloadEntry(workload, event.revision, expected[1])
                self._index(key, workload)
                self._notify_workload(key, known.workload if known else None, workload)
                return
        parsed = self._parse(event.object)
        if parsed is None:
            return
        plural, key, obj = parsed
        if plural == WORKLOADS and isinstance(obj, Workload):
            old = self.workloads.get(key)
            if deleted:
                self.workloads.pop(key, None)
                self._index(key, None)
                self._notify_workload(key, obj, None)
            else:
                self.workloads[key] = WorkloadEntry(
                    obj, event.revision, _without_rv(event.object.value)
                )
                self._index(key, obj)
                self._notify_workload(key, old.workload if old else None, obj)
            return
        bucket = self.config.setdefault(plural, {})
        before = bucket.pop(key, None) if deleted else bucket.get(key)
        if not deleted:
            bucket[key] = obj
        if before is None or deleted or _definition(before) != _definition(obj):
            self.config_generation += 1
        self._notify_config(plural)

    def _notify_config(self, plural: str) -> None:
        for listener in self.on_config:
            listener(plural)

    def _notify_workload(self, key: str, old: Workload | None, new: Workload | None) -> None:
        for listener in self.on_workload:
            listener(key, old, new)


def _definition(obj: Object) -> tuple[object, ...]:
    """What of a configuration object routing and placement may depend on: all but status."""
    meta = obj.metadata
    return (getattr(obj, "spec", None), meta.labels, meta.annotations)


def _without_rv(value: dict[str, Any]) -> dict[str, Any]:
    """The stored form as writers give it: without the server-set resourceVersion."""
    meta = value.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        value = {**value, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    else:
        value = dict(value)
    return value


def _same_value(raw: dict[str, Any], stored: dict[str, Any]) -> bool:
    return raw == _without_rv(stored)


def _at_revision(workload: Workload, revision: Revision) -> Workload:
    """`workload`, handed over by its writer (`expect`, `remember`), with its resourceVersion:
    its metadata is copied (a writer's copy shares it with the workload it changed), the
    workload itself is not."""
    workload.metadata = workload.metadata.model_copy(update={"resource_version": str(revision)})
    return workload
