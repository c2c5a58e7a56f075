"""Typed objects over the store: key scheme, server-set metadata, and conversion between
stored JSON and api/ models.

Every api kind the hub serves lives under `/<plural>/<name>` (cluster-scoped) or
`/<plural>/<namespace>/<name>` (namespaced). The store keeps the wire form without
resourceVersion; reading puts the store revision there, so resourceVersion is exactly the
store revision (what compare-and-swap checks). On create the hub sets uid,
creationTimestamp and generation 1; a replace that changes `spec` bumps generation.

Called by: hub.http handlers, the dispatch loop and the agent-session handlers.
"""

from __future__ import annotations

import copy
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from api.codec import decode
from api.errors import ApiError, FieldError, Path
from api.kinds import REGISTRY
from api.meta import INT64_MAX, Object, dns1123_label_errors, dns1123_subdomain_errors
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    GoneError,
    HubError,
    NotFoundError,
    UnavailableError,
    UnreadableWriteError,
    from_api_error,
)
from hub.store import base as store_base
from hub.store.base import JsonObject, Revision, Store, StoredObject

_log = logging.getLogger(__name__)

__all__ = [
    "ObjectRepository",
    "RandomUids",
    "check_path_names",
    "object_key",
    "parse_resource_version",
    "prefix_for",
    "to_wire",
    "translate_store_error",
    "without_status",
]

T = TypeVar("T", bound=Object)


def prefix_for(kind: type[Object], namespace: str | None = None) -> str:
    if kind.NAMESPACED and namespace:
        return f"/{kind.plural()}/{namespace}/"
    return f"/{kind.plural()}/"


def object_key(kind: type[Object], name: str, namespace: str | None = None) -> str:
    if kind.NAMESPACED:
        return f"/{kind.plural()}/{namespace or 'default'}/{name}"
    return f"/{kind.plural()}/{name}"


def to_wire(stored: StoredObject) -> JsonObject:
    """The stored value with resourceVersion set to the store revision (a fresh dict)."""
    return store_base.with_resource_version(stored.value, stored.revision)


def translate_store_error(exc: store_base.StoreError) -> HubError:
    """The store's error as the hub's (one map, hub.errors gives the HTTP status)."""
    if isinstance(exc, store_base.NotFound):
        return NotFoundError(str(exc))
    if isinstance(exc, store_base.AlreadyExists):
        return AlreadyExistsError(str(exc))
    if isinstance(exc, store_base.Conflict):
        return ConflictError(
            "the object has been modified; please apply your changes to the latest version "
            "and try again"
        )
    if isinstance(exc, store_base.Compacted):
        return GoneError(f"too old resource version: {exc.revision}")
    if isinstance(exc, store_base.Unavailable):
        return UnavailableError(f"the store is unavailable: {exc}")
    return HubError(f"store error: {exc}")


class RandomUids:
    """Random (version 4) UUIDs, the uids Kubernetes gives its objects, in their canonical
    text, from a pool of `os.urandom` bytes refilled `BATCH` uids at a time; dropped in a
    forked child, so that two processes never hand out the same uids.

    Written out here rather than with `str(uuid.uuid4())` for the hub's CPU, every create
    paying it (`bench.federation_meter`, paced): `uuid4` cost 15.1 µs a call live against 1.2
    in a loop, and from the pool still 14.3 through `uuid.UUID` and `str` — the path's cost,
    cold at each create, not the system call's; written out, 7.1 (0.8 in a loop)."""

    BATCH = 256

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0
        os.register_at_fork(after_in_child=self._drop)

    def _drop(self) -> None:
        self._pool, self._at = b"", 0

    def __call__(self) -> str:
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(16 * self.BATCH), 0
        raw = bytearray(self._pool[self._at : self._at + 16])
        self._at += 16
        raw[6] = raw[6] & 0x0F | 0x40  # version 4
        raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


new_uid = RandomUids()
"""The hub's uids for the objects it creates."""

_REVISION = re.compile(r"[0-9]{1,19}")


def parse_resource_version(text: str | None, where: str) -> Revision | None:
    """A resourceVersion given by a client: none (no precondition), or a store revision.
    Anything else is a 400 naming `where` — never taken for "no precondition"."""
    if text is None or text == "":
        return None
    # SQLite's and etcd's revisions are int64.
    if _REVISION.fullmatch(text) is None or int(text) > INT64_MAX:
        raise BadRequestError(
            f"{where} must be a resourceVersion this hub gave out (a decimal number), not {text!r}",
            causes=[FieldError.invalid(where, text, "must be a decimal number")],
        )
    return Revision(int(text))


def check_path_names(kind: type[Object], name: str | None, namespace: str | None) -> None:
    """A name or namespace in a URL that no object can have is a 400 naming it, before it
    comes near a store key."""
    errors: list[FieldError] = []
    if namespace is not None:
        errors.extend(dns1123_label_errors(Path("metadata", "namespace"), namespace))
    if name is not None:
        rule = dns1123_label_errors if kind.NAME_IS_LABEL else dns1123_subdomain_errors
        errors.extend(rule(Path("metadata", "name"), name))
    if errors:
        raise BadRequestError(
            f"the URL names no possible {kind.KIND}: " + "; ".join(str(e) for e in errors),
            causes=errors,
        )


def without_status(obj: T) -> T:
    """The object as created: Kubernetes ignores a `status` written on create (it changes only
    through the status writers: the hub's own components)."""
    if getattr(obj, "status", None) is None:
        return obj
    return obj.model_copy(update={"status": None})


def _now() -> datetime:
    # Whole seconds, as Kubernetes keeps a creationTimestamp.
    return datetime.now(UTC).replace(microsecond=0)


class ObjectRepository:
    """CRUD of api objects on a Store, with Kubernetes metadata semantics."""

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = _now) -> None:
        self.store = store
        self._clock = clock

    def now(self) -> datetime:
        """The time by the repository's clock (what creationTimestamps are set from)."""
        return self._clock()

    # --- reads ------------------------------------------------------------------------------

    async def get_wire(self, kind: type[Object], name: str, namespace: str | None) -> JsonObject:
        try:
            return to_wire(await self.store.get(object_key(kind, name, namespace)))
        except store_base.NotFound as exc:
            where = f" in namespace {namespace!r}" if kind.NAMESPACED else ""
            raise NotFoundError(f'{kind.plural()} "{name}" not found{where}') from exc
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc

    async def get(self, kind: type[T], name: str, namespace: str | None = None) -> T:
        wire = await self.get_wire(kind, name, namespace)
        return kind.model_validate(wire)

    async def list_wire(
        self, kind: type[Object], namespace: str | None = None
    ) -> tuple[list[JsonObject], Revision]:
        try:
            listing = await self.store.list(prefix_for(kind, namespace))
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return [to_wire(item) for item in listing.items], listing.revision

    async def list(self, kind: type[T], namespace: str | None = None) -> list[T]:
        items, _ = await self.list_wire(kind, namespace)
        return [kind.model_validate(item) for item in items]

    # --- writes -----------------------------------------------------------------------------

    @staticmethod
    def validate(body: dict[str, Any]) -> Object:
        """Decode and fully validate untrusted input; field errors become a 422."""
        try:
            return decode(body, REGISTRY)
        except ApiError as exc:
            raise from_api_error(exc) from exc

    async def create(
        self,
        obj: Object,
        *,
        before_write: Callable[[JsonObject], None] | None = None,
        put: Mapping[str, JsonObject] | None = None,
    ) -> JsonObject:
        """Store a new object with its server-set metadata; `before_write` sees the stored
        form (without resourceVersion) just before it is written. `put`: store keys written
        in the same transaction (`Store.create_with`), whatever is there — nothing of them
        when the object exists."""
        meta = obj.metadata
        if not meta.name and meta.generate_name:
            meta.name = f"{meta.generate_name}{new_uid()[:5]}"  # (its first 5: random hex)
        if obj.NAMESPACED and not meta.namespace:
            meta.namespace = "default"
        meta.uid = new_uid()
        meta.creation_timestamp = self._clock()
        meta.generation = 1
        meta.resource_version = None
        wire = obj.to_wire()
        key = object_key(type(obj), meta.name, meta.namespace)
        if before_write is not None:
            before_write(wire)
        try:
            if put:
                stored = await self.store.create_with(key, wire, put=put)
            else:
                stored = await self.store.create(key, wire)
        except store_base.AlreadyExists as exc:
            raise AlreadyExistsError(f'{obj.plural()} "{meta.name}" already exists') from exc
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return to_wire(stored)

    async def replace(self, obj: Object, *, keep_status: bool = True) -> JsonObject:
        """Replace spec (and labels/annotations) with CAS on metadata.resourceVersion.

        Server-owned metadata is kept from the stored object; `status` too unless the caller
        is a status writer (`keep_status=False`).
        """
        kind = type(obj)
        key = object_key(kind, obj.metadata.name, obj.metadata.namespace)
        expected = parse_resource_version(obj.metadata.resource_version, "metadata.resourceVersion")
        new = obj.to_wire()
        try:
            current = await self.store.get(key)
            old = current.value
            meta = dict(new.get("metadata") or {})
            old_meta = old.get("metadata") or {}
            for server_field in ("uid", "creationTimestamp", "generation"):
                if server_field in old_meta:
                    meta[server_field] = old_meta[server_field]
            if new.get("spec") != old.get("spec"):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
            meta.pop("resourceVersion", None)
            new["metadata"] = meta
            if keep_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            stored = await self.store.update(key, new, expected=expected or current.revision)
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return to_wire(stored)

    async def replace_status(self, obj: Object) -> JsonObject:
        """The status subresource's write: only `status` changes, taken from `obj`; the spec
        and metadata stay as stored (generation too), with CAS on metadata.resourceVersion
        when given. The result is validated whole, as any write."""
        kind = type(obj)
        key = object_key(kind, obj.metadata.name, obj.metadata.namespace)
        expected = parse_resource_version(obj.metadata.resource_version, "metadata.resourceVersion")
        status = obj.to_wire().get("status")
        try:
            current = await self.store.get(key)
            new = dict(current.value)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            self.validate(copy.deepcopy(new))
            stored = await self.store.update(key, new, expected=expected or current.revision)
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return to_wire(stored)

    async def modify(
        self,
        kind: type[Object],
        name: str,
        namespace: str | None,
        mutate: Callable[[JsonObject], JsonObject],
    ) -> JsonObject:
        """Server-side read-modify-write (status updates), retried on conflicts.

        The result is validated against the kind's model before it is written: a field the
        model lacks or a value it refuses raises UnreadableWriteError and stores nothing,
        where writing it would make the object unreadable to every later read."""

        def checked(value: JsonObject) -> JsonObject:
            new = mutate(value)
            try:
                decode(copy.deepcopy(new), REGISTRY)
            except ApiError as exc:
                where = f"{namespace}/{name}" if namespace else name
                error = UnreadableWriteError(
                    f"refusing to write {kind.KIND} {where}: the result is not a valid "
                    f"{kind.KIND}: {exc}",
                )
                # A bug in the hub, whichever caller swallows the error: say so loudly.
                _log.error("%s", error)
                raise error from exc
            return new

        try:
            stored = await store_base.modify(self.store, object_key(kind, name, namespace), checked)
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return to_wire(stored)

    async def delete(
        self, kind: type[Object], name: str, namespace: str | None, *, expected: str | None = None
    ) -> JsonObject:
        revision = parse_resource_version(expected, "resourceVersion")
        try:
            stored = await self.store.delete(object_key(kind, name, namespace), expected=revision)
        except store_base.NotFound as exc:
            raise NotFoundError(f'{kind.plural()} "{name}" not found') from exc
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
        return to_wire(stored)

    # --- watch ------------------------------------------------------------------------------

    async def watch_wire(
        self, kind: type[Object], namespace: str | None, *, since: Revision
    ) -> AsyncIterator[tuple[str, JsonObject, str | None]]:
        """(event type, object, the object's JSON when the store gave its text) after
        `since`; raises GoneError when history is compacted."""
        try:
            async with self.store.watch(prefix_for(kind, namespace), since=since) as events:
                async for event in events:
                    stored = event.object
                    text = (
                        store_base.with_resource_version_text(stored.encoded, stored.revision)
                        if stored.encoded is not None
                        else None
                    )
                    yield event.type.value, to_wire(stored), text
        except store_base.StoreError as exc:
            raise translate_store_error(exc) from exc
