"""The store seam: what the hub may ask of durable storage, whatever keeps the bytes.

Every hub object (workloads, queues, clusters, …) lives under a string key such as
`/workloads/<namespace>/<name>`. Values are JSON objects: the api/ models' wire form
(`api.codec.encode`), so the store never imports api/ and the hub keeps one codec at its edge.
Each store encodes them once (compact UTF-8 JSON) and hands back freshly decoded dicts.

Revisions come from one counter per store that grows with every successful write (create,
update or delete; by one, but for a `create_with` of several keys in etcd, which writes them
all at one revision), like etcd's; in etcd, writes outside our root (elections, other
installations) advance it too, so rely on order, never on gaps. An object's `revision` is the
revision of its last write (Kubernetes' resourceVersion), `create_revision` that of its
creation. A list answers with the store revision it saw, so "list, then watch since that
revision" misses nothing.

Implementations: `hub.store.sqlite.SqliteStore` (embedded default) and
`hub.store.etcd.EtcdStore` (HA). One contract suite (`tests/hub/store/`) runs against both.
Called by: the hub's REST handlers, dispatch loop and registries (through `Store` only).

Errors (the hub maps `http_status` to its own Status replies in one place):

    StoreError            500  anything unexpected from the backend
    ├── NotFound          404  no object under the key
    ├── AlreadyExists     409  create of an existing key
    ├── Conflict          409  expected revision differs; carries the current revision
    ├── Compacted         410  watch history is gone (compaction or a watcher too slow): relist
    ├── TooLarge          413  an encoded value over MAX_VALUE_BYTES
    └── Unavailable       503  backend unreachable or closed; transient. From a write it means
                               the outcome is unknown (etcd may have committed it before the
                               reply was lost): re-read before retrying, or retry a create and
                               accept AlreadyExists with the same content as success.
        └── NotLeader     503  a fenced write from a hub that no longer leads (etcd only)
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, NewType, Protocol, Self

from pydantic_core import PydanticSerializationError, to_json

__all__ = [
    "MAX_VALUE_BYTES",
    "AlreadyExists",
    "Compacted",
    "Conflict",
    "Event",
    "EventType",
    "JsonObject",
    "Listing",
    "NotFound",
    "NotLeader",
    "Revision",
    "Store",
    "StoreError",
    "StoredObject",
    "TooLarge",
    "Unavailable",
    "WatchStream",
    "encode_json",
    "encode_value",
    "modify",
    "prefix_end",
    "validate_key",
    "validate_prefix",
    "with_resource_version",
    "with_resource_version_text",
]

Revision = NewType("Revision", int)
"""A point in the store's history; 0 means "before the first write"."""

JsonObject = dict[str, Any]
"""A JSON object (the wire form of an api/ model). Treat values handed out as read-only: the
stores share one decoded value between all watchers of an event."""


# --- errors -------------------------------------------------------------------------------


class StoreError(Exception):
    """Base of every store failure; backend exceptions are chained as `__cause__`."""

    http_status: ClassVar[int] = 500


class NotFound(StoreError):  # noqa: N818  (read as store.NotFound)
    http_status = 404

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: not found")
        self.key = key


class AlreadyExists(StoreError):  # noqa: N818
    http_status = 409

    def __init__(self, key: str, *, current: Revision) -> None:
        super().__init__(f"{key}: already exists (revision {current})")
        self.key = key
        self.current = current


class Conflict(StoreError):  # noqa: N818
    """The object changed since the caller read it: re-read, recompute, try again."""

    http_status = 409

    def __init__(self, key: str, *, expected: Revision, current: Revision) -> None:
        super().__init__(f"{key}: expected revision {expected}, found {current}")
        self.key = key
        self.expected = expected
        self.current = current


class Compacted(StoreError):  # noqa: N818
    """The watch cannot continue from where it is: list again, then watch from the list."""

    http_status = 410

    def __init__(self, message: str, *, revision: Revision) -> None:
        super().__init__(message)
        self.revision = revision  # the revision the watcher asked for or had reached


class TooLarge(StoreError):  # noqa: N818
    http_status = 413

    def __init__(self, key: str, *, size: int) -> None:
        super().__init__(f"{key}: value of {size} bytes exceeds {MAX_VALUE_BYTES}")
        self.key = key
        self.size = size


class Unavailable(StoreError):  # noqa: N818
    http_status = 503


class NotLeader(Unavailable):
    """A write fenced by a leadership that has ended: nothing was written. The hub stops its
    leader-only work; the new leader redoes it from the store."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: not written, this hub is no longer the leader")
        self.key = key


# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredObject:
    key: str
    value: JsonObject
    revision: Revision  # last write; for a deleted object, the revision of the delete
    create_revision: Revision
    encoded: str | None = field(default=None, compare=False)
    """The value's JSON as the store holds it, when the store has it at hand (the watch
    events of both stores, live and replayed; a write's result from SQLite): a watch writes
    its events from it (`with_resource_version_text`) instead of encoding the value again."""


@dataclass(frozen=True, slots=True)
class Listing:
    items: tuple[StoredObject, ...]  # sorted by key
    revision: Revision  # the store revision this listing is consistent with


class EventType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Event:
    """One committed write. For DELETED, `object.value` is the last value before the delete
    and `object.revision` the revision of the delete (as Kubernetes watch events carry)."""

    type: EventType
    object: StoredObject

    @property
    def revision(self) -> Revision:
        return self.object.revision

    @property
    def key(self) -> str:
        return self.object.key


# --- the protocol -------------------------------------------------------------------------


class WatchStream(Protocol):
    """`async with store.watch(prefix, since=rev) as events: async for event in events: …`

    Yields every write under the prefix with a revision greater than `since`, in revision
    order, without gaps. Memory is bounded: a consumer that lags more than the store's
    `watch_buffer` events is served from the store's history again, which is slower but
    loses nothing. Raises `Compacted` (from entering or iterating) when history it needs is
    gone; `Unavailable` when the backend connection is lost or the store is closed. Both end
    the stream; the caller relists.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def __anext__(self) -> Event: ...


class Store(Protocol):
    """Durable, linearizable key-value storage with revisions, CAS and watches.

    A write that returned has been committed durably (fsync'd locally or by an etcd quorum).
    Failed preconditions raise and consume no revision.

    Values are JSON-ready dicts shared, never copied: a writer hands its `value` over (the
    returned object and the watch events may carry that very dict), and nobody changes a
    value they got from the store or gave to it.
    """

    async def get(self, key: str) -> StoredObject:
        """The object under `key`; `NotFound` if none."""
        ...

    async def list(self, prefix: str) -> Listing:
        """All objects whose key starts with `prefix`, sorted by key, at one revision."""
        ...

    async def create(self, key: str, value: JsonObject) -> StoredObject:
        """Store a new object; `AlreadyExists` if the key is taken."""
        ...

    async def create_with(
        self, key: str, value: JsonObject, *, put: Mapping[str, JsonObject]
    ) -> StoredObject:
        """Create `key` as `create` does and, in the same transaction, write each of `put`
        whatever is there (created, or replaced at any revision): all of it, or nothing when
        `key` is taken (`AlreadyExists`) or anything fails. One write of several keys: in
        etcd all of them get the transaction's one revision; in SQLite each key its own,
        the created one last. Either way the created object's revision is the highest, and
        a watch never delivers part of it."""
        ...

    async def update(
        self, key: str, value: JsonObject, *, expected: Revision | None
    ) -> StoredObject:
        """Replace the value if the object's revision is `expected` (`Conflict` otherwise);
        `expected=None` replaces unconditionally. `NotFound` if there is no object."""
        ...

    async def delete(self, key: str, *, expected: Revision | None) -> StoredObject:
        """Remove the object if its revision is `expected` (None: unconditionally). Returns the
        last value with the revision of the delete. `NotFound`/`Conflict` as for update."""
        ...

    async def current_revision(self) -> Revision:
        """The revision of the latest committed write."""
        ...

    def watch(self, prefix: str, *, since: Revision) -> WatchStream:
        """Events under `prefix` after revision `since`; see `WatchStream`."""
        ...

    async def compact(self, revision: Revision) -> None:
        """Forget the events before `revision`: afterwards a watch needs `since >= revision - 1`.
        Current objects are untouched. Idempotent; `revision` may not exceed the current one."""
        ...

    async def close(self) -> None:
        """Finish queued writes, end open watches with `Unavailable`, release resources."""
        ...


# --- helpers shared by the implementations and their callers ------------------------------

MAX_VALUE_BYTES = 1024 * 1024
"""One limit for every store: etcd refuses requests over 1.5 MiB by default, and a value is
one Kubernetes-shaped object (Kubernetes itself stops near 1.5 MiB per object)."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The standard library's encoder, for the rare value `_dumps` hands back to it."""


def _dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept: pydantic_core's encoder (already installed with
    pydantic) writes the same text as the standard library's about four times faster, and
    every store write and watch event of the hub goes through here. It writes NaN and
    Infinity where JSON has none, so text with those words goes through the standard
    library's encoder, which refuses them (ValueError); an object it cannot encode is a
    TypeError, as with the standard library."""
    try:
        text = to_json(value).decode()
    except PydanticSerializationError as exc:
        raise TypeError(str(exc)) from exc
    if "NaN" in text or "Infinity" in text:
        return _ENCODER.encode(value)
    return text


_SPECS: dict[int, tuple[object, str]] = {}
"""The JSON of `spec` members already encoded, by the identity of the spec dict (which holds
it, so the identity cannot be reused). Values handed to the store are never changed (the
`Store` contract), and a workload's status writes hand over its stored spec itself, so a
workload's pod templates are encoded once, not at every status write."""
_SPECS_KEPT = 20_000


def encode_json(value: JsonObject) -> str:
    """Compact JSON of a stored value (non-ASCII kept), its `spec` encoded once per object."""
    spec = value.get("spec")
    if type(spec) is not dict or not spec:
        return _dumps(value)
    found = _SPECS.get(id(spec))
    if found is None or found[0] is not spec:
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        found = _SPECS[id(spec)] = (spec, _dumps(spec))
    # The members before the spec and those after it are encoded as one object each (two
    # encoder calls, not two per member), and the spec's JSON goes between them: in order.
    before: JsonObject = {}
    after: JsonObject = {}
    side = before
    for k, v in value.items():
        if k == "spec":
            side = after
        else:
            side[k] = v
    head = _dumps(before)[:-1] + ("," if before else "")
    tail = ("," if after else "") + _dumps(after)[1:]
    return f'{head}"spec":{found[1]}{tail}'


def with_resource_version(value: JsonObject, revision: Revision) -> JsonObject:
    """A stored value as clients see it: with `metadata.resourceVersion` set to `revision` (a
    fresh dict and metadata; the rest, the spec included, shared with `value`)."""
    meta = dict(value.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    return {**value, "metadata": meta}


_METADATA_OPENS = re.compile(r'\{"apiVersion":"[^"\\]*","kind":"[^"\\]*","metadata":\{')
"""How a stored object's JSON opens (`encode_json` of an api model's wire form): up to the
inside of its metadata."""


def with_resource_version_text(text: str, revision: Revision) -> str | None:
    """The JSON `text` of a stored value (without resourceVersion) as clients see the object,
    with `metadata.resourceVersion` set to `revision` — the text of
    `with_resource_version(value, revision)`, but for the member's place, without encoding
    the value again. None when `text` does not open with apiVersion, kind and metadata (as
    every api model's stored form does) or names a resourceVersion already: the caller
    encodes the value then."""
    opened = _METADATA_OPENS.match(text)
    if opened is None or '"resourceVersion":' in text:
        return None
    at = opened.end()
    between = "" if text[at] == "}" else ","
    return f'{text[:at]}"resourceVersion":"{revision}"{between}{text[at:]}'


def encode_value(key: str, value: JsonObject) -> bytes:
    """The stored form: compact UTF-8 JSON. `TypeError` for non-JSON values, `TooLarge`."""
    if not isinstance(value, dict):
        raise TypeError(f"store values are JSON objects, not {type(value).__name__}")
    data = encode_json(value)
    encoded = data.encode()
    if len(encoded) > MAX_VALUE_BYTES:
        raise TooLarge(key, size=len(encoded))
    return encoded


def validate_key(key: str) -> None:
    """Keys are absolute, slash-separated paths of printable characters with no empty
    segment, so that prefixes like `/workloads/ns/` select exactly one subtree."""
    if not key.startswith("/") or key.endswith("/") or "//" in key:
        raise ValueError(f"invalid store key {key!r}: want /segment/…/segment")
    if not key.isprintable():
        raise ValueError(f"invalid store key {key!r}: non-printable characters")


def validate_prefix(prefix: str) -> None:
    """A prefix is empty (everything) or starts with "/"; it usually ends with "/"."""
    if prefix and not prefix.startswith("/"):
        raise ValueError(f"invalid store prefix {prefix!r}: want '' or /…")
    if not prefix.isprintable():
        raise ValueError(f"invalid store prefix {prefix!r}: non-printable characters")


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with `prefix` (None: no bound).

    Used for range scans (`prefix <= key < prefix_end(prefix)`); keys are printable, so
    bumping the last character never overflows in practice.
    """
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


async def modify(
    store: Store,
    key: str,
    mutate: Callable[[JsonObject], JsonObject],
    *,
    attempts: int = 16,
) -> StoredObject:
    """Read-modify-write with compare-and-swap: re-read and recompute on `Conflict`.

    `mutate` gets a private copy of the current value and returns the new one; it may run
    several times, so it must be a pure function of its input. Conflicts are not transient
    failures to back off from: the next read already has what we lost to, so we retry at once.
    """
    for _ in range(attempts - 1):
        current = await store.get(key)
        try:
            return await store.update(
                key, mutate(_deep_copy(current.value)), expected=current.revision
            )
        except Conflict:
            continue
    current = await store.get(key)
    return await store.update(key, mutate(_deep_copy(current.value)), expected=current.revision)


def _deep_copy(value: JsonObject) -> JsonObject:
    # JSON values hold only dicts, lists and scalars; this is several times faster than
    # copy.deepcopy for them.
    def copy(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        if isinstance(v, list):
            return [copy(x) for x in v]
        return v

    result: JsonObject = copy(value)
    return result
