"""Watch streams that never die: list, then watch from the list's resourceVersion, resume in
place when a watch request ends, relist on 410 Gone or any other failure (kopf's shape).

`watch_objects` yields `Relisted(items)` after every (re)list — the consumer replaces what it
knew, which also forgets objects deleted while the stream was down — and `WatchEvent`s in
between. `Mirror` keeps a resource's objects by `namespace/name` from such a stream and calls
`on_change` after every change, so the agent can react without polling, and `on_object` with
each object replaced or gone, so a tally over the objects can be kept as they change instead of
counted again from all of them. `slim` chooses what of an object is kept (the inventory keeps
little of a finished pod or Job: an hour of them stays mirrored). `seen` says what of an object
its readers look at: a modification that leaves that the same is kept but not announced (its
owner is not marked changed, `on_change` is not called), so the agent does not look again at a
workload whose Job only counted its pods.

Called by: agent.inventory (nodes, pods, jobs mirrors).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from agent.errors import K8sError, K8sGoneError
from agent.k8s.client import JsonObject, Kube, Resource, WatchEvent

__all__ = ["Mirror", "Relisted", "object_key", "watch_objects"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Relisted:
    """Every object there is, as of `resource_version` (the stream restarted)."""

    items: list[JsonObject]
    resource_version: str


def object_key(obj: JsonObject) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


async def watch_objects(
    kube: Kube,
    resource: Resource,
    *,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
    retry_delay: float = 1.0,
    iterations: int | None = None,  # None: forever; tests bound the loop
) -> AsyncGenerator[Relisted | WatchEvent, None]:
    """List then watch `resource` forever; see the module docstring."""
    done = 0
    while iterations is None or done < iterations:
        done += 1
        try:
            listed = await kube.list(resource, label_selector=label_selector)
        except K8sError as exc:
            log.warning("list %s failed: %s; retrying in %.1fs", resource, exc, retry_delay)
            await asyncio.sleep(retry_delay)
            continue
        yield Relisted(listed.items, listed.resource_version)
        rv = listed.resource_version
        try:
            while True:
                async for event in kube.watch(
                    resource,
                    resource_version=rv,
                    label_selector=label_selector,
                    timeout_seconds=timeout_seconds,
                ):
                    new_rv = (event.object.get("metadata") or {}).get("resourceVersion")
                    if new_rv:
                        rv = str(new_rv)
                    if event.type != "BOOKMARK":
                        yield event
                # The server ended the request (timeout, dropped): resume in place.
        except K8sGoneError:
            log.info("watch %s: resourceVersion %s expired (410); relisting", resource, rv)
        except K8sError as exc:
            log.warning("watch %s failed: %s; relisting in %.1fs", resource, exc, retry_delay)
            await asyncio.sleep(retry_delay)
        except ValueError as exc:  # a frame that is not JSON
            log.warning("watch %s: bad frame (%s); relisting", resource, exc)


class Mirror:
    """The objects of one resource by `namespace/name`, kept current by `run()`, and — when
    `index` names two labels — grouped by their values, so "the objects of owner X" is a
    lookup, not a scan."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        label_selector: str | None = None,
        on_change: Callable[[Resource], None] | None = None,
        timeout_seconds: int = 300,
        retry_delay: float = 1.0,
        index: tuple[str, str] | None = None,
        on_object: Callable[[str, JsonObject | None], None] | None = None,
        slim: Callable[[JsonObject], JsonObject] | None = None,
        seen: Callable[[JsonObject], object] | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.label_selector = label_selector
        self.objects: dict[str, JsonObject] = {}
        self.index = index
        self.by_owner: dict[tuple[str, str], dict[str, JsonObject]] = {}
        self.changed: set[tuple[str, str]] = set()
        """Owners whose objects changed since `take_changes` (with `index`)."""
        self.changed_all = False
        """A relist happened since `take_changes`: anything may have changed."""
        self.listed = asyncio.Event()
        self.relists = 0
        self._on_change = on_change
        self._on_object = on_object
        """Called with an object's key and what it is now (None: gone), after the change."""
        self._slim = slim
        """What of an object is kept (it may return the object itself)."""
        self._seen = seen
        """What of a (kept) object its readers look at; None: all of it."""
        self._timeout = timeout_seconds
        self._retry = retry_delay

    async def run(self) -> None:
        async for item in watch_objects(
            self.kube,
            self.resource,
            label_selector=self.label_selector,
            timeout_seconds=self._timeout,
            retry_delay=self._retry,
        ):
            self.apply(item)

    def apply(self, item: Relisted | WatchEvent) -> None:
        """Take one item of the stream: a relist replaces every object, an event one."""
        on_object = self._on_object
        if isinstance(item, Relisted):
            gone = self.objects
            self.objects = {}
            self.by_owner = {}
            slim = self._slim
            for obj in item.items:
                self._put(object_key(obj), obj if slim is None else slim(obj))
            if on_object is not None:
                for key in gone.keys() - self.objects.keys():
                    on_object(key, None)
                for key, obj in self.objects.items():
                    on_object(key, obj)
            self.relists += 1
            self.changed_all = True
            self.listed.set()
        elif item.type == "DELETED":
            key = object_key(item.object)
            self._drop(key)
            if on_object is not None:
                on_object(key, None)
        else:
            key = object_key(item.object)
            obj = item.object if self._slim is None else self._slim(item.object)
            before = self.objects.get(key)
            seen = self._seen
            quiet = (
                seen is not None
                and before is not None
                and seen(before) == seen(obj)
                and self._owner(before) == self._owner(obj)
            )
            if not quiet:
                self._drop(key)
            self._put(key, obj, announce=not quiet)
            if on_object is not None:
                on_object(key, obj)
            if quiet:
                return
        if self._on_change is not None:
            self._on_change(self.resource)

    def _owner(self, obj: JsonObject) -> tuple[str, str] | None:
        if self.index is None:
            return None
        labels = (obj.get("metadata") or {}).get("labels") or {}
        first, second = labels.get(self.index[0]), labels.get(self.index[1])
        return None if first is None or second is None else (str(first), str(second))

    def _put(self, key: str, obj: JsonObject, *, announce: bool = True) -> None:
        """Keep `obj` (already slimmed); mark its owner changed unless not to `announce`."""
        self.objects[key] = obj
        owner = self._owner(obj)
        if owner is not None:
            self.by_owner.setdefault(owner, {})[key] = obj
            if announce:
                self.changed.add(owner)

    def _drop(self, key: str) -> None:
        old = self.objects.pop(key, None)
        owner = None if old is None else self._owner(old)
        if owner is not None:
            self.changed.add(owner)
            group = self.by_owner.get(owner)
            if group is not None:
                group.pop(key, None)
                if not group:
                    del self.by_owner[owner]

    def take_changes(self) -> tuple[bool, set[tuple[str, str]]]:
        """(relisted, owners changed) since the last call; resets both."""
        changes = (self.changed_all, self.changed)
        self.changed_all, self.changed = False, set()
        return changes

    def owned_by(self, first: str, second: str) -> list[JsonObject]:
        """Objects whose index labels are (first, second)."""
        return list(self.by_owner.get((first, second), {}).values())
