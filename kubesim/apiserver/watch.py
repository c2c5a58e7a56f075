"""Watch streams: newline-framed JSON events, bookmarks, timeouts and 410 after compaction.

A `WatchStream` subscribes to one resource bucket in the store, filters each change by
namespace and selectors (turning selector transitions into ADDED / DELETED as the apiserver
does), and writes frames to a chunked HTTP response, one JSON object per line, flushed per
batch. Its start position follows the apiserver: RV unset or "0" replays current objects as
ADDED, RV N replays history after N (or answers an ERROR 410 ExpiredError frame and closes when N
was compacted), `sendInitialEvents` ends the replay with the initial-events-end bookmark.
Frames for plain JSON reuse the store event's cached serialisation, so fan-out to many
watchers costs one encoding per change. `WatchHub` tracks live streams so the admin hook
can drop them all. Called by the list handler in `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pydantic_core
from aiohttp import web

from kubesim.apiserver.selectors import FieldSelector, LabelSelector
from kubesim.apiserver.store import EventType, Store, StoreEvent
from kubesim.apiserver.tables import render_table
from kubesim.errors import ExpiredError, status_body
from kubesim.objects import JsonObject, labels_of
from kubesim.resources import ResourceType

__all__ = ["WatchHub", "WatchRequest", "WatchStream"]


@dataclass(frozen=True)
class WatchRequest:
    """What a client asked to watch, parsed from the query string."""

    resource: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str | None
    bookmarks: bool
    timeout_seconds: float | None
    send_initial_events: bool
    as_table: bool
    include_object: str


class WatchStream:
    """One client's watch: a filtered queue of frames drained into an HTTP response."""

    def __init__(self, request: WatchRequest, store: Store, bookmark_interval: float) -> None:
        self.request = request
        self.store = store
        self.bookmark_interval = bookmark_interval
        self._frames: deque[bytes] = deque()
        self._wakeup = asyncio.Event()
        self._closed = False
        self._headers_sent = False

    # -- filtering (runs inside store writes: must stay cheap) --------------------------------

    def _matches(self, obj: JsonObject | None) -> bool:
        if obj is None:
            return False
        request = self.request
        if request.namespace is not None and obj["metadata"].get("namespace") != request.namespace:
            return False
        if not request.labels.empty and not request.labels.matches(labels_of(obj)):
            return False
        return request.fields.empty or request.fields.matches(obj)

    def on_store_event(self, event: StoreEvent) -> None:
        if self._closed:
            return
        now_matches = self._matches(event.obj)
        if event.type is EventType.MODIFIED:
            before = self._matches(event.old)
            if now_matches and not before:
                self._push_frame("ADDED", event.obj)
            elif before and not now_matches:
                self._push_frame("DELETED", event.obj)
            elif now_matches:
                self._push_event(event)
        elif now_matches:
            self._push_event(event)

    def _push_event(self, event: StoreEvent) -> None:
        if self.request.as_table:
            self._push_frame(event.type.value, event.obj)
        else:
            self._frames.append(event.wire())
            self._wakeup.set()

    def _push_frame(self, type_: str, obj: JsonObject) -> None:
        if self.request.as_table:
            payload: Any = render_table(
                self.request.resource,
                [obj],
                resource_version=obj["metadata"].get("resourceVersion", ""),
                include_object=self.request.include_object,
                with_headers=not self._headers_sent,
            )
            self._headers_sent = True
        else:
            payload = obj
        self._frames.append(_frame(type_, payload))
        self._wakeup.set()

    def _push_bookmark(self, *, initial_events_end: bool = False) -> None:
        metadata: dict[str, Any] = {"resourceVersion": str(self.store.revision)}
        if initial_events_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        resource = self.request.resource
        self._frames.append(
            _frame(
                "BOOKMARK",
                {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": metadata},
            )
        )
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    # -- serving ------------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe and queue the replay; synchronous so no change can slip in between."""
        request = self.request
        rv = request.resource_version
        try:
            if rv in (None, "", "0") or request.send_initial_events:
                for obj in self.store.list(request.resource, request.namespace):
                    if self._matches(obj):
                        self._push_frame("ADDED", obj)
                if request.send_initial_events:
                    self._push_bookmark(initial_events_end=True)
            else:
                for event in self.store.events_since(request.resource, int(rv or 0)):
                    self.on_store_event(event)
        except ExpiredError as error:
            self._frames.append(_frame("ERROR", status_body(error)))
            self._closed = True
            return
        except ValueError:
            invalid = ExpiredError(f"invalid resource version: {rv}")
            self._frames.append(_frame("ERROR", status_body(invalid)))
            self._closed = True
            return
        self.store.subscribe(request.resource, self.on_store_event)

    async def serve(self, response: web.StreamResponse) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.request.timeout_seconds if self.request.timeout_seconds else None
        next_bookmark = started + self.bookmark_interval
        try:
            while True:
                if self._frames:
                    batch = b"".join(self._frames)
                    self._frames.clear()
                    await response.write(batch)
                    continue
                if self._closed:
                    return
                now = loop.time()
                if deadline is not None and now >= deadline:
                    return
                if self.request.bookmarks and now >= next_bookmark:
                    self._push_bookmark()
                    next_bookmark = now + self.bookmark_interval
                    continue
                wait_until = next_bookmark if self.request.bookmarks else None
                if deadline is not None:
                    wait_until = deadline if wait_until is None else min(wait_until, deadline)
                self._wakeup.clear()
                if self._frames or self._closed:
                    continue
                timeout = None if wait_until is None else max(0.0, wait_until - now)
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wakeup.wait()
        finally:
            self.store.unsubscribe(self.request.resource, self.on_store_event)
            self._closed = True


def _frame(type_: str, payload: Any) -> bytes:
    return pydantic_core.to_json({"type": type_, "object": payload}) + b"\n"


class WatchHub:
    """The live watch streams of one cluster, so faults can drop them all at once."""

    def __init__(self) -> None:
        self._streams: set[WatchStream] = set()

    def add(self, stream: WatchStream) -> Callable[[], None]:
        self._streams.add(stream)
        return lambda: self._streams.discard(stream)

    def drop_all(self) -> int:
        streams = list(self._streams)
        for stream in streams:
            stream.close()
        return len(streams)

    def __len__(self) -> int:
        return len(self._streams)
