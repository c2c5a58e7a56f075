"""`EtcdStore` and `EtcdElection`: the HA store and leader election, on etcd through aetcd.

Called by: the hub's wiring when configured for etcd (several hub replicas, one leader), the
contract tests and the benchmark. This is the only module that imports aetcd.

Mapping onto etcd. Our keys live under a root prefix (default `/multiq`), so one etcd can serve
several installations and tests. An object's revision is etcd's `mod_revision`, its
`create_revision` etcd's; the store revision is etcd's header revision. Every write is one
etcd transaction whose compare carries the precondition (create: `create_revision == 0`;
CAS update/delete: `mod_revision == expected`; unconditional: the key exists) and whose
failure branch reads the key, so a failed precondition is told apart (`NotFound`, `Conflict`
with the current revision) in the same round trip and consumes no revision, as in SQLite.

Requests are built from etcd's protobuf messages and sent on aetcd's stubs: aetcd's wrappers
drop the response header (we need its revision), cannot page ranges, and wrap gRPC errors by
message. Errors are mapped to the store tree in one function, `_translate`, by gRPC status
code. Watches use aetcd's multiplexed watch stream with `prev_kv` (a DELETED event carries the
last value); a pump task moves events into a bounded buffer; when a slow consumer lets it
fill, the etcd watch is cancelled (aetcd's own queue is unbounded) and reopened from the last
queued revision once the consumer catches up. Reads that fail as `Unavailable` are retried
for up to a request timeout and a leader election (`_read_retry`); writes are not, since a
lost reply may hide a commit.

Endpoints. A store is given every member of the etcd cluster (`etcd://h1:2379,h2:2379,…`);
aetcd's Client talks to one, so `_Endpoints` holds the client of the member in use and, when a
call through it fails as unavailable, moves every later call to the next member (round
robin). The failed call itself is not repeated behind its caller's back: reads retry by
themselves (on the next member), writes report `Unavailable` (their outcome is unknown),
watches end and their consumers reopen them. The client left behind is closed a request
timeout later, so calls still in flight on a healthy but slow member can finish.

Leader election (`EtcdElection`) follows etcd's own concurrency recipe: each candidate puts a
key under the election prefix attached to its lease; the oldest key (lowest create revision)
leads; the others wait for the deletion of the key just older than theirs. The leader keeps
its lease alive (a refresh every third of the TTL, retried at once on another member when
one fails) and declares leadership lost as soon as it can no longer be sure the lease is
alive (a refresh said it expired, or refreshes failed until the lease's deadline). Election
keys live beside the store's objects, not among them (`<root>.elections/<name>/…`), so
listing or watching the store never meets them.
Noticing takes time, so leader-only writes go through `store.fenced(leadership)`: each
transaction also compares the leader key's create revision, so a deposed leader's writes fail
with `NotLeader` however late it notices — the store-level half of "a workload runs in at
most one cluster at a time" across hub replicas.

Stopping. Every task started here (watch pumps, lease keepalives, waits) is stopped with
`hub.tasks.cancel_all`, which never swallows a cancellation of the one stopping it: a
follower hub shutting down just as the key ahead of it went used to swallow its campaign's
cancellation, lead, and hang its shutdown. Libraries lose some cancellations on their own
(aetcd through Python 3.11's `wait_for`, gRPC calls failing instead, then our retries): a
task checks for one before a wait that may not end (`hub.tasks.raise_if_cancelling`), and a
campaign before it leads. A store's close stops its watches and its
elections' keepalives (their leaderships are lost), then its clients, each step within a
request timeout, so closing ends even when etcd is gone or a call never returns.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TypeVar

import aetcd
from aetcd import rpc
from pydantic_core import from_json
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from hub.store.base import (
    AlreadyExists,
    Compacted,
    Conflict,
    Event,
    EventType,
    JsonObject,
    Listing,
    NotFound,
    NotLeader,
    Revision,
    StoredObject,
    StoreError,
    Unavailable,
    encode_value,
    validate_key,
    validate_prefix,
)
from hub.tasks import cancel_all, raise_if_cancelling

__all__ = ["DEFAULT_PORT", "Endpoint", "EtcdElection", "EtcdStore", "Leadership", "parse_endpoints"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_UNAVAILABLE_CODES = frozenset(
    {rpc.StatusCode.UNAVAILABLE, rpc.StatusCode.DEADLINE_EXCEEDED, rpc.StatusCode.CANCELLED}
)
_LIST_PAGE = 500
# After a failed lease refresh, the next try (on the next member) comes this soon: the lease
# has at most two thirds of its TTL left by then.
_KEEPALIVE_RETRY_SECONDS = 0.1
# Lists and watch batches may carry many values; gRPC's 4 MiB default is too small.
_MAX_MESSAGE = 64 * 1024 * 1024
# How long etcd may take to elect a new leader after losing one, on top of a request timeout
# that a read sent meanwhile may use up (etcd's election timeout is 1 s; a busy machine can
# need a second round).
_ELECTION_SECONDS = 3.0
# How soon a connection to a member that went away is tried again (gRPC's default grows to
# two minutes; a restarted member should be usable again within a second).
_RECONNECT_BACKOFF_MS = 1000


def _context_ended(exc: rpc.AioRpcError) -> bool:
    """etcd's own deadline or cancellation, sent as UNKNOWN: a linearizable read that found no
    leader in time (a member died, an election runs) comes back so (etcd-io/etcd#8809). It is
    a call that did not complete, as DEADLINE_EXCEEDED is, not a refusal."""
    return exc.code() is rpc.StatusCode.UNKNOWN and (exc.details() or "") in (
        "context deadline exceeded",
        "context canceled",
    )


def _translate(exc: BaseException) -> StoreError:
    """The one place where etcd / gRPC failures become store errors."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, aetcd.RevisionCompactedError):
        error: StoreError = Compacted(
            f"etcd compacted its history below {exc.compacted_revision}; relist",
            revision=Revision(exc.compacted_revision),
        )
    elif isinstance(exc, aetcd.ConnectionFailedError | aetcd.ConnectionTimeoutError):
        error = Unavailable(f"etcd unavailable: {exc}")
    elif isinstance(exc, aetcd.WatchTimeoutError | TimeoutError):
        error = Unavailable("etcd did not answer in time")
    elif isinstance(exc, rpc.AioRpcError) and (
        exc.code() in _UNAVAILABLE_CODES or _context_ended(exc)
    ):
        error = Unavailable(f"etcd unavailable: {exc.code().name} {exc.details()}")
    elif isinstance(exc, rpc.AioRpcError):
        error = StoreError(f"etcd error: {exc.code().name} {exc.details()}")
    else:
        error = StoreError(f"etcd error: {exc!r}")
    error.__cause__ = exc
    return error


async def _cancel_etcd_watch(watch: Any, within: float) -> None:
    """Cancel an aetcd watch, waiting `within` seconds at most: aetcd's cancel takes its
    watcher's lock and queues a request for the watch stream, which a stalled stream never
    takes; closing the client ends the stream and its watches anyway."""
    with contextlib.suppress(Exception):  # best effort, TimeoutError included
        async with asyncio.timeout(within):
            await watch.cancel()


async def _close_client(client: Any, within: float) -> None:
    """Close an aetcd client, waiting `within` seconds at most. Its close first shuts its
    watcher down (which waits for the watcher's lock and stream task); should that not end,
    the gRPC channel is closed directly: that cancels every call on it and waits for none."""
    with contextlib.suppress(Exception):  # TimeoutError included
        async with asyncio.timeout(within):
            await client.close()
    if client.channel is not None:  # aetcd forgets its channel once closed
        log.warning("an etcd client did not close within %gs; closing its channel", within)
        with contextlib.suppress(Exception):
            await client.channel.close()


def _range_end(prefix: bytes) -> bytes:
    return bytes(aetcd.utils.prefix_range_end(prefix))


def _read_retry(endpoints: int, patience: float) -> AsyncRetrying:
    """Reads are idempotent: retry them when etcd is momentarily unavailable, at least once on
    every endpoint (each failure moves the store to the next one) and for at least `patience`
    seconds. Callers give a request timeout and an election's worth (`_ELECTION_SECONDS`): a
    member without a leader lets a read time out, and the round of members may come back to
    the dead one before the others have elected."""
    return AsyncRetrying(
        retry=retry_if_exception_type(Unavailable),
        stop=stop_after_attempt(max(3, endpoints + 1)) & stop_after_delay(patience),
        wait=wait_exponential(multiplier=0.1, max=1.0),
        reraise=True,
    )


DEFAULT_PORT = 2379


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One etcd member's client address."""

    host: str
    port: int = DEFAULT_PORT

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """`h1:2379,h2:2379,h3` (port 2379 when left out; IPv6 as `[::1]:2379`), optionally after
    `etcd://`. `ValueError` for an empty list or a bad port."""
    text = text.removeprefix("etcd://")
    endpoints = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part.startswith("["):
            host, _, rest = part[1:].partition("]")
            port_text = rest.removeprefix(":")
        elif part.count(":") == 1:
            host, _, port_text = part.partition(":")
        else:
            host, port_text = part, ""
        if not port_text:
            port = DEFAULT_PORT
        elif port_text.isdigit() and 0 < int(port_text) < 65536:
            port = int(port_text)
        else:
            raise ValueError(f"etcd endpoint {part!r}: bad port {port_text!r}")
        endpoints.append(Endpoint(host or "127.0.0.1", port))
    if not endpoints:
        raise ValueError(f"no etcd endpoint in {text!r}: want HOST:PORT[,HOST:PORT…]")
    return tuple(endpoints)


class _Endpoints:
    """The etcd members a store may talk to and the aetcd client of the one in use; see the
    module docstring. Shared by a store and its fenced views, so they move together."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        make_client: Callable[[Endpoint], Any],
        *,
        linger: float,
        close_within: float,
    ) -> None:
        if not endpoints:
            raise ValueError("an etcd store needs at least one endpoint")
        self.endpoints = tuple(endpoints)
        self._make_client = make_client
        self._linger = linger
        self._close_within = close_within
        self._index = 0
        self.client: Any = make_client(self.endpoints[0])
        self._retired: dict[asyncio.Task[None], Any] = {}  # lingering, then closing: client

    @property
    def current(self) -> Endpoint:
        return self.endpoints[self._index]

    def fail_over(self, failed: Any, error: StoreError) -> None:
        """The call through client `failed` found its member unavailable: use the next member
        from now on (once, however many calls through `failed` report it)."""
        if failed is not self.client or len(self.endpoints) < 2:
            return
        before = self.current
        self._index = (self._index + 1) % len(self.endpoints)
        self.client = self._make_client(self.current)
        log.warning("etcd %s: %s; using %s from now on", before, error, self.current)
        task = asyncio.get_running_loop().create_task(self._retire(failed))
        self._retired[task] = failed
        task.add_done_callback(self._retired.pop)

    async def _retire(self, client: Any) -> None:
        await asyncio.sleep(self._linger)
        await _close_client(client, self._close_within)

    async def close(self) -> None:
        """Close every client, those left behind included: each within `close_within`."""
        left_behind = list(self._retired.values())
        await cancel_all(self._retired, within=self._close_within)
        for client in [*left_behind, self.client]:
            await _close_client(client, self._close_within)


class EtcdStore:
    """The etcd `Store`. Create with `await EtcdStore.connect(host, port)` or, for a cluster,
    `await EtcdStore.connect_to(parse_endpoints("h1:2379,h2:2379,h3:2379"))`."""

    def __init__(
        self, endpoints: _Endpoints, *, root: str, timeout: float, watch_buffer: int
    ) -> None:
        self._endpoints = endpoints
        self._root = root
        self._root_bytes = root.encode()
        self._timeout = timeout
        self._watch_buffer = watch_buffer
        self._watches: set[_EtcdWatch] = set()
        # The lease keepalives of elections on this store: a close stops them (their
        # leaderships are lost) rather than leave them refreshing through a closed store.
        self._keepalives: set[asyncio.Task[None]] = set()
        self._closed = False
        self._fence: tuple[bytes, Revision] | None = None  # leader key and its create revision
        self._owner = True  # closing a fenced view leaves the shared client open

    @classmethod
    async def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        root: str = "/multiq",
        request_timeout: float = 5.0,
        watch_buffer: int = 1_000,
    ) -> EtcdStore:
        """Connect to one etcd endpoint; see `connect_to`."""
        return await cls.connect_to(
            [Endpoint(host, port)],
            root=root,
            request_timeout=request_timeout,
            watch_buffer=watch_buffer,
        )

    @classmethod
    async def connect_to(
        cls,
        endpoints: Sequence[Endpoint],
        *,
        root: str = "/multiq",
        request_timeout: float = 5.0,
        watch_buffer: int = 1_000,
    ) -> EtcdStore:
        """Connect to etcd through `endpoints` (the first, then the next whenever the one in use
        is unavailable); every key lives under `root`; `request_timeout` bounds each call."""
        if not root.startswith("/") or root.endswith("/"):
            raise ValueError(f"etcd root {root!r}: want /name")

        def make_client(endpoint: Endpoint) -> Any:
            return aetcd.Client(
                host=endpoint.host,
                port=endpoint.port,
                timeout=request_timeout,
                options={
                    "grpc.max_receive_message_length": _MAX_MESSAGE,
                    "grpc.max_send_message_length": _MAX_MESSAGE,
                    # A client of its own connections: gRPC otherwise shares one connection
                    # per address among all channels of the process, and a new client for a
                    # member that just came back would inherit the old one's reconnect
                    # backoff (up to two minutes) and fail at once.
                    "grpc.use_local_subchannel_pool": 1,
                    "grpc.initial_reconnect_backoff_ms": _RECONNECT_BACKOFF_MS,
                    "grpc.max_reconnect_backoff_ms": _RECONNECT_BACKOFF_MS,
                },
            )

        pool = _Endpoints(
            endpoints, make_client, linger=request_timeout, close_within=request_timeout
        )
        store = cls(pool, root=root, timeout=request_timeout, watch_buffer=watch_buffer)
        await store._call(pool.client.connect)
        return store

    @property
    def endpoint(self) -> Endpoint:
        """The etcd member in use now."""
        return self._endpoints.current

    @property
    def _client(self) -> Any:
        return self._endpoints.client

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- plumbing --

    def _key(self, key: str) -> bytes:
        return self._root_bytes + key.encode()

    def _prefix(self, prefix: str) -> bytes:
        # Every key starts with "/", so "" selects the whole root (and not "/multiqX…").
        return self._root_bytes + (prefix or "/").encode()

    def _user_key(self, raw: bytes) -> str:
        return raw[len(self._root_bytes) :].decode()

    def _object(self, kv: Any, *, text: bool = False) -> StoredObject:
        """`text`: with the value's JSON too (a watch event: its writer splices it)."""
        return StoredObject(
            key=self._user_key(kv.key),
            value=from_json(kv.value),
            revision=Revision(kv.mod_revision),
            create_revision=Revision(kv.create_revision),
            encoded=kv.value.decode() if text else None,
        )

    async def _call(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        if self._closed:
            raise Unavailable("store is closed")
        client = self._endpoints.client
        try:
            return await fn()
        except (StoreError, ValueError, TypeError):
            raise
        except Exception as exc:
            error = _translate(exc)
            self._call_failed(client, error)
            raise error from exc

    def _call_failed(self, client: Any, error: StoreError) -> None:
        """A call through `client` failed with `error`: an unavailable member is left."""
        if isinstance(error, Unavailable) and not self._closed:
            self._endpoints.fail_over(client, error)

    async def _read(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        async for attempt in _read_retry(
            len(self._endpoints.endpoints), self._timeout + _ELECTION_SECONDS
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("etcd read, attempt %d", attempt.retry_state.attempt_number)
                return await self._call(fn)
        raise AssertionError("unreachable")  # pragma: no cover  (reraise=True)

    async def _kv(self, method: str, request: Any) -> Any:
        await self._client.connect()
        stub = getattr(self._client.kvstub, method)
        return await stub(request, timeout=self._timeout, metadata=self._client.metadata)

    async def _txn(
        self, compare: list[Any], success: list[Any], failure: list[Any], *, key: str = ""
    ) -> Any:
        if self._fence is not None:
            # Written only while our election key is the one we won with: a deposed leader's
            # writes fail even if it has not noticed yet (etcd's fencing recipe).
            fence_key, fence_revision = self._fence
            compare = [
                *compare,
                rpc.Compare(
                    key=fence_key,
                    target=rpc.Compare.CREATE,
                    result=rpc.Compare.EQUAL,
                    create_revision=fence_revision,
                ),
            ]
            failure = [*failure, rpc.RequestOp(request_range=rpc.RangeRequest(key=fence_key))]
        request = rpc.TxnRequest(compare=compare, success=success, failure=failure)
        reply = await self._call(lambda: self._kv("Txn", request))
        if not reply.succeeded and self._fence is not None:
            kvs = reply.responses[-1].response_range.kvs
            if not kvs or kvs[0].create_revision != self._fence[1]:
                raise NotLeader(key)
        return reply

    def fenced(self, leadership: Leadership) -> EtcdStore:
        """A view of this store whose writes succeed only while `leadership` holds (else
        `NotLeader`, nothing written). Reads and watches are unchanged; closing the view does
        not close this store."""
        view = copy.copy(self)
        view._fence = (leadership.key.encode(), leadership.revision)
        view._owner = False
        view._watches = set()
        return view

    # -- reads --

    async def get(self, key: str) -> StoredObject:
        validate_key(key)
        reply = await self._read(lambda: self._kv("Range", rpc.RangeRequest(key=self._key(key))))
        if not reply.kvs:
            raise NotFound(key)
        return self._object(reply.kvs[0])

    async def list(self, prefix: str) -> Listing:
        validate_prefix(prefix)
        return await self._read(lambda: self._list(prefix))

    async def _list(self, prefix: str) -> Listing:
        # Paged at one revision: a consistent snapshot without one huge response. Should a
        # compaction pass that revision between pages, start over at the newest one.
        for _ in range(3):
            try:
                return await self._list_at_one_revision(prefix)
            except rpc.AioRpcError as exc:
                if exc.code() != rpc.StatusCode.OUT_OF_RANGE:
                    raise
                log.info("list of %r overtaken by a compaction; listing again", prefix)
        return await self._list_at_one_revision(prefix)

    async def _list_at_one_revision(self, prefix: str) -> Listing:
        start, end = self._prefix(prefix), _range_end(self._prefix(prefix))
        revision = 0
        items: list[StoredObject] = []
        while True:
            reply = await self._kv(
                "Range",
                rpc.RangeRequest(key=start, range_end=end, limit=_LIST_PAGE, revision=revision),
            )
            revision = revision or reply.header.revision
            items.extend(self._object(kv) for kv in reply.kvs)
            if not reply.more:
                return Listing(items=tuple(items), revision=Revision(revision))
            start = reply.kvs[-1].key + b"\0"

    async def current_revision(self) -> Revision:
        reply = await self._read(
            lambda: self._kv("Range", rpc.RangeRequest(key=self._root_bytes, count_only=True))
        )
        return Revision(reply.header.revision)

    # -- writes --

    async def create(self, key: str, value: JsonObject) -> StoredObject:
        return await self.create_with(key, value, put={})

    async def create_with(
        self, key: str, value: JsonObject, *, put: Mapping[str, JsonObject]
    ) -> StoredObject:
        validate_key(key)
        k, data = self._key(key), encode_value(key, value)
        puts = []
        for put_key, put_value in put.items():
            validate_key(put_key)
            if put_key == key:
                raise ValueError(f"{key}: created and put in one write")
            put_data = encode_value(put_key, put_value)
            puts.append(
                rpc.RequestOp(request_put=rpc.PutRequest(key=self._key(put_key), value=put_data))
            )
        reply = await self._txn(
            [
                rpc.Compare(
                    key=k, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0
                )
            ],
            [*puts, rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=data))],
            [rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
            key=key,
        )
        if not reply.succeeded:
            kvs = reply.responses[0].response_range.kvs
            current = Revision(kvs[0].mod_revision) if kvs else Revision(0)
            raise AlreadyExists(key, current=current)
        rev = Revision(reply.header.revision)
        return StoredObject(key, from_json(data), rev, rev)

    async def update(
        self, key: str, value: JsonObject, *, expected: Revision | None
    ) -> StoredObject:
        validate_key(key)
        k, data = self._key(key), encode_value(key, value)
        reply = await self._txn(
            [self._precondition(k, expected)],
            [rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=data, prev_kv=True))],
            [rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
            key=key,
        )
        if not reply.succeeded:
            raise self._failed(key, expected, reply)
        prev = reply.responses[0].response_put.prev_kv
        return StoredObject(
            key, from_json(data), Revision(reply.header.revision), Revision(prev.create_revision)
        )

    async def delete(self, key: str, *, expected: Revision | None) -> StoredObject:
        validate_key(key)
        k = self._key(key)
        reply = await self._txn(
            [self._precondition(k, expected)],
            [rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k, prev_kv=True))],
            [rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
            key=key,
        )
        if not reply.succeeded:
            raise self._failed(key, expected, reply)
        prev = reply.responses[0].response_delete_range.prev_kvs[0]
        return StoredObject(
            key,
            from_json(prev.value),
            Revision(reply.header.revision),
            Revision(prev.create_revision),
        )

    @staticmethod
    def _precondition(k: bytes, expected: Revision | None) -> Any:
        if expected is None:  # exists: create_revision > 0
            return rpc.Compare(
                key=k, target=rpc.Compare.CREATE, result=rpc.Compare.GREATER, create_revision=0
            )
        return rpc.Compare(
            key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=expected
        )

    @staticmethod
    def _failed(key: str, expected: Revision | None, reply: Any) -> StoreError:
        kvs = reply.responses[0].response_range.kvs
        if not kvs:
            return NotFound(key)
        assert expected is not None  # "exists" can only fail on a missing key
        return Conflict(key, expected=expected, current=Revision(kvs[0].mod_revision))

    async def compact(self, revision: Revision) -> None:
        current = await self.current_revision()
        if revision > current:
            raise ValueError(f"cannot compact at {revision}: the store is at {current}")
        try:
            await self._kv("Compact", rpc.CompactionRequest(revision=revision, physical=True))
        except rpc.AioRpcError as exc:
            # OUT_OF_RANGE here means "already compacted" (future revisions were excluded
            # above): compaction is idempotent.
            if exc.code() != rpc.StatusCode.OUT_OF_RANGE:
                raise _translate(exc) from exc

    # -- watches --

    def watch(self, prefix: str, *, since: Revision) -> _EtcdWatch:
        validate_prefix(prefix)
        return _EtcdWatch(self, prefix, since)

    def _event(self, raw: Any) -> Event:
        kv = raw.kv
        if raw.kind == "PUT":
            obj = self._object(kv, text=True)
            kind = EventType.ADDED if kv.version == 1 else EventType.MODIFIED
            return Event(kind, obj)
        if raw.prev_kv is None:
            # The last value of a deleted object was compacted away: we cannot deliver a
            # complete event, so the watcher relists.
            raise Compacted(
                f"the value deleted at revision {kv.mod_revision} was compacted; relist",
                revision=Revision(kv.mod_revision),
            )
        prev = raw.prev_kv
        return Event(
            EventType.DELETED,
            StoredObject(
                key=self._user_key(kv.key),
                value=from_json(prev.value),
                revision=Revision(kv.mod_revision),
                create_revision=Revision(prev.create_revision),
                encoded=prev.value.decode(),
            ),
        )

    # -- lifecycle --

    async def close(self) -> None:
        """Stop this store's watches and its elections' lease keepalives (their leaderships
        are lost), then close its etcd clients. Every step waits a request timeout at most, so
        a close ends even when etcd is gone or one of its calls never returns."""
        if self._closed:
            return
        self._closed = True
        for watch in tuple(self._watches):
            await watch.stop(Unavailable("store is closed"))
        if self._owner:
            await cancel_all(self._keepalives, within=self._timeout)
            await self._endpoints.close()

    # -- leases, for EtcdElection --

    async def _lease_grant(self, ttl: int) -> tuple[int, int]:
        async def grant() -> Any:
            await self._client.connect()
            return await self._client.leasestub.LeaseGrant(
                rpc.LeaseGrantRequest(TTL=ttl),
                timeout=self._timeout,
                metadata=self._client.metadata,
            )

        reply = await self._call(grant)
        return int(reply.ID), int(reply.TTL)

    async def _lease_keepalive(self, lease_id: int, *, answer_within: float | None = None) -> int:
        """One refresh; the lease's remaining TTL in seconds (0: it has expired). A member that
        does not answer `answer_within` seconds (default: the request timeout) is unavailable."""

        async def refresh() -> int:
            await self._client.connect()
            ttl = 0
            # One request then half-close: the server answers once and ends the stream.
            call = self._client.leasestub.LeaseKeepAlive(
                iter([rpc.LeaseKeepAliveRequest(ID=lease_id)]),
                timeout=answer_within or self._timeout,
                metadata=self._client.metadata,
            )
            async for reply in call:
                ttl = int(reply.TTL)
            return ttl

        return await self._call(refresh)

    async def _lease_revoke(self, lease_id: int) -> None:
        async def revoke() -> None:
            await self._client.connect()
            try:
                await self._client.leasestub.LeaseRevoke(
                    rpc.LeaseRevokeRequest(ID=lease_id),
                    timeout=self._timeout,
                    metadata=self._client.metadata,
                )
            except rpc.AioRpcError as exc:
                if exc.code() != rpc.StatusCode.NOT_FOUND:  # already expired
                    raise

        await self._call(revoke)


@dataclass(eq=False)
class _EtcdWatch:
    """An etcd watch pumped into a bounded buffer. When the consumer falls a full buffer
    behind, the etcd watch is cancelled and, once the buffer is drained, reopened from the
    last queued revision: etcd replays its history, and answers `Compacted` only if that
    history is gone. A revision may hold several events (a `create_with`): the buffer is
    never cut between two of them, so reopening after the last queued one misses none."""

    store: EtcdStore
    prefix: str
    since: Revision
    _position: Revision = field(default_factory=lambda: Revision(0))  # last event queued
    _buffer: collections.deque[Event] = field(default_factory=collections.deque)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _error: StoreError | None = None
    _suspended: bool = False  # buffer overflowed; reopen once drained
    _watch: Any = None
    _watch_client: Any = None  # the aetcd client the etcd watch runs on
    _pump_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._position = self.since
        await self._open()
        self.store._watches.add(self)
        return self

    async def _open(self) -> None:
        store = self.store
        start = store._prefix(self.prefix)

        async def open_watch() -> Any:
            self._watch_client = store._client
            await store._client.connect()
            return await store._client.watch(
                start,
                range_end=_range_end(start),
                start_revision=self._position + 1,
                prev_kv=True,
            )

        self._watch = await store._call(open_watch)
        self._pump_task = asyncio.get_running_loop().create_task(
            self._pump(self._watch), name=f"etcd-watch:{self.prefix}"
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop(None)

    async def stop(self, error: StoreError | None) -> None:
        self.store._watches.discard(self)
        if error is not None and self._error is None:
            self._error = error
            self._wake.set()
        if self._pump_task is not None:
            await cancel_all([self._pump_task], within=self.store._timeout)
            self._pump_task = None
        await self._cancel_watch()

    async def _cancel_watch(self) -> None:
        if self._watch is not None:
            watch, self._watch = self._watch, None
            await _cancel_etcd_watch(watch, self.store._timeout)

    async def _pump(self, watch: Any) -> None:
        events = aiter(watch)
        try:
            async for raw in events:
                event = self.store._event(raw)
                full = len(self._buffer) >= self.store._watch_buffer
                if full and event.revision != self._position:
                    log.info(
                        "watch on %r fell behind; will resume from etcd's history", self.prefix
                    )
                    self._suspended = True
                    break
                self._buffer.append(event)
                self._position = event.revision
                self._wake.set()
            else:
                raise Unavailable("etcd ended the watch")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._error = _translate(exc)
            self.store._call_failed(self._watch_client, self._error)
            self._wake.set()
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()
        if self._suspended:
            await self._cancel_watch()
            self._wake.set()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self._error is not None:
                raise self._error
            if self._suspended and self._watch is None:
                self._suspended = False
                await self._open()
                continue
            raise_if_cancelling()
            self._wake.clear()
            await self._wake.wait()


# --- leader election ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leadership:
    """Held while `lost` is not set. `revision` (the create revision of the leader key) grows
    with every new leader, so it can serve as a fencing token."""

    candidate: str
    key: str  # the election key in etcd (beside the store's root, see the module docstring)
    revision: Revision
    lease_id: int
    lost: asyncio.Event


class EtcdElection:
    """Leader election among hub replicas; see the module docstring for the recipe.

    `campaign` blocks until this candidate leads and returns a `Leadership` whose `lost` is set
    when it ends (lease expired or unverifiable, or `resign`). One campaign per instance.
    """

    def __init__(self, store: EtcdStore, name: str, *, ttl: int = 10) -> None:
        validate_key("/" + name)
        self._store = store
        self._prefix = store._root_bytes + f".elections/{name}/".encode()
        self._ttl = ttl
        self._keepalive: asyncio.Task[None] | None = None
        self._leadership: Leadership | None = None
        self._key: str | None = None

    async def campaign(self, candidate: str) -> Leadership:
        store = self._store
        loop = asyncio.get_running_loop()
        granted_at = loop.time()
        lease_id, ttl = await store._lease_grant(self._ttl)
        lost = asyncio.Event()
        self._keepalive = loop.create_task(
            self._keep_alive(lease_id, ttl=ttl, granted_at=granted_at, lost=lost),
            name=f"etcd-lease:{lease_id:x}",
        )
        store._keepalives.add(self._keepalive)
        self._keepalive.add_done_callback(store._keepalives.discard)
        k = self._prefix + f"{lease_id:x}".encode()
        key = self._key = k.decode()
        try:
            reply = await store._txn(
                [
                    rpc.Compare(
                        key=k,
                        target=rpc.Compare.CREATE,
                        result=rpc.Compare.EQUAL,
                        create_revision=0,
                    )
                ],
                [
                    rpc.RequestOp(
                        request_put=rpc.PutRequest(key=k, value=candidate.encode(), lease=lease_id)
                    )
                ],
                [],
            )
            if not reply.succeeded:
                raise StoreError(f"election key {key} exists although its lease is new")
            mine = Revision(reply.header.revision)
            await self._wait_turn(k, mine, lost)
            raise_if_cancelling()  # a campaign cancelled on its way does not lead
        except BaseException:
            await self._stop(lease_id, lost)
            raise
        self._leadership = Leadership(candidate, key, mine, lease_id, lost)
        return self._leadership

    async def _wait_turn(self, k: bytes, mine: Revision, lost: asyncio.Event) -> None:
        store = self._store
        while True:
            raise_if_cancelling()
            if lost.is_set():
                raise Unavailable("lease lost while campaigning")
            kvs, revision = await self._candidates()
            older = [kv for kv in kvs if kv.create_revision < mine]
            if not older:
                return
            # Wait for the deletion of the key just ahead of ours (not the leader's: that
            # would wake every candidate at once).
            watch = await store._call(
                functools.partial(store._client.watch, older[-1].key, start_revision=revision + 1)
            )
            try:
                deleted = asyncio.ensure_future(self._first_delete(watch))
                lost_wait = asyncio.ensure_future(lost.wait())
                try:
                    done, _ = await asyncio.wait(
                        {deleted, lost_wait}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    # Not each task cancelled then awaited under suppress(CancelledError):
                    # that swallowed a cancellation of the campaign arriving meanwhile (as
                    # its hub shut down just as the key ahead went), and the campaign went
                    # on to lead in a hub whose shutdown then waited for it forever.
                    await cancel_all((deleted, lost_wait))
            finally:
                await _cancel_etcd_watch(watch, store._timeout)
            if deleted in done:
                deleted.result()  # the watch's failure, if it failed

    @staticmethod
    async def _first_delete(watch: Any) -> None:
        try:
            async for raw in watch:
                if raw.kind == "DELETE":
                    return
        except Exception as exc:
            raise _translate(exc) from exc

    async def _candidates(self) -> tuple[list[Any], Revision]:
        store = self._store
        start = self._prefix
        reply = await store._read(
            lambda: store._kv(
                "Range",
                rpc.RangeRequest(
                    key=start,
                    range_end=_range_end(start),
                    sort_order=rpc.RangeRequest.ASCEND,
                    sort_target=rpc.RangeRequest.CREATE,
                ),
            )
        )
        return list(reply.kvs), Revision(reply.header.revision)

    async def leader(self) -> str | None:
        """The current leader's candidate name, if any."""
        kvs, _ = await self._candidates()
        return bytes(kvs[0].value).decode() if kvs else None

    async def observe(self) -> AsyncGenerator[str | None, None]:
        """The leader now, then every change of leader (None: no leader). Use within
        `contextlib.aclosing` so the underlying watch is cancelled."""
        store = self._store
        start = self._prefix
        kvs, revision = await self._candidates()
        current = bytes(kvs[0].value).decode() if kvs else None
        yield current
        watch = await store._call(
            lambda: store._client.watch(
                start, range_end=_range_end(start), start_revision=revision + 1
            )
        )
        try:
            raise_if_cancelling()
            async for _ in watch:
                leader = await self.leader()
                if leader != current:
                    current = leader
                    yield current
                raise_if_cancelling()
        except Exception as exc:
            raise _translate(exc) from exc
        finally:
            await _cancel_etcd_watch(watch, store._timeout)

    async def resign(self) -> None:
        """Give up leadership (or the campaign): the next candidate takes over at once."""
        if self._leadership is not None:
            await self._stop(self._leadership.lease_id, self._leadership.lost)

    async def _stop(self, lease_id: int, lost: asyncio.Event) -> None:
        lost.set()
        if self._keepalive is not None:
            await cancel_all([self._keepalive], within=self._store._timeout)
            self._keepalive = None
        with contextlib.suppress(StoreError):
            await self._store._lease_revoke(lease_id)  # deletes our key with the lease

    async def _keep_alive(
        self, lease_id: int, *, ttl: int, granted_at: float, lost: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        interval = ttl / 3
        # Until `deadline` the lease is certainly alive on the server: it was granted or
        # refreshed no earlier than when we sent that request. Past it we cannot know, so
        # leadership is declared lost even if etcd merely stopped answering.
        deadline = granted_at + ttl
        pause = interval
        try:
            while not lost.is_set():
                raise_if_cancelling()
                await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
                sent = loop.time()
                try:
                    async with asyncio.timeout_at(deadline):
                        # A member that has not answered in a third of the TTL is given up for the
                        # next one (the store fails over), while the lease still has time.
                        remaining = await self._store._lease_keepalive(
                            lease_id, answer_within=interval
                        )
                except TimeoutError:
                    log.warning("lease %x: no refresh confirmed within its %ds TTL", lease_id, ttl)
                    return
                except StoreError as exc:
                    log.warning("lease %x: refresh failed, retrying: %s", lease_id, exc)
                    pause = _KEEPALIVE_RETRY_SECONDS
                    continue
                pause = interval
                if remaining <= 0:
                    log.warning("lease %x expired", lease_id)
                    return
                deadline = sent + remaining
        finally:
            # However refreshing ends (`_stop`, or a close of the store cancels it), no one
            # vouches for the lease any more.
            lost.set()
