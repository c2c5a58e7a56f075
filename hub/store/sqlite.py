"""`SqliteStore`: the hub's embedded default store, one SQLite file owned by one hub process.

Called by: the hub's wiring (`SqliteStore.open(path)`), the contract tests and the benchmark.

Durability. The architecture's first invariant is that a workload the hub accepted survives a
crash, so a write returns only after its transaction is committed with `synchronous=FULL` in
WAL mode: the WAL is fsync'd at every commit. (`NORMAL` would survive `kill -9` — the data is
in the OS page cache — but could lose the last commits on power loss or a kernel panic, which
is exactly the window between "201 Created" and the disk.) To keep that fsync from capping
throughput at one write per disk flush, writes are *group committed*: callers append their
operation to a queue and await a future; one writer task takes everything queued, runs it as
one transaction on the writer thread, commits once, then resolves each caller's future with
its own result (a failed precondition fails only that operation and consumes no revision).
While writers are concurrent, commits are at least `COMMIT_INTERVAL_SECONDS` apart (10 ms), so
that a steady trickle of writes is gathered too.

Threads. The stdlib `sqlite3` module on two dedicated single-thread executors — one writer
connection, one read-only reader connection — so the event loop never blocks on SQLite, reads
are not queued behind a commit's fsync (WAL readers see the last committed snapshot), and a
connection is only ever used by the thread that made it. The writer thread serves a queue for
as long as the store is open (`_serve`): the writes submitted in one turn of the event loop
are handed over with one queue put at its end (`_hand_over`), and a batch's outcomes come
back to the loop with one `call_soon_threadsafe` (`_settle`). A write through
`run_in_executor` and a writer task cost the hub more CPU for the hand-over, which a steady
trickle of work pays for every write (`bench.store_throughput`, `cpu_us_per_paced_write`).
aiosqlite would add a dependency for the same thread-per-connection design without the
batching we need.

Schema. `objects` holds current values; `changes` one row per committed write (the event,
including a deleted object's last value) and doubles as the watch history; `meta` holds the
revision counter and the compaction floor, updated in the same transaction as the writes, so
reopening after a crash rebuilds both exactly, and the schema's version. History is trimmed
to the last `history` events; a watch from before the floor gets `Compacted`. A file of an
older schema is migrated when it is opened (`_MIGRATE_FROM_1`).

Watches. A watch first replays `changes` page by page (paced by its consumer), then, once it
has caught up with the last published revision, joins the in-memory fan-out that the writer
task feeds right after each commit. Each watcher's buffer is bounded: a watcher that falls
further behind leaves the fan-out and replays `changes` again, so it gets `Compacted` (and
must relist, like Kubernetes' 410) only when the history it needs has been trimmed.

Ownership. An advisory `flock` on `<path>.lock` keeps a second process (a second hub) from
opening the same file: the revision counter and the fan-out live in this process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import math
import os
import queue
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from pydantic_core import from_json

from hub.store.base import (
    AlreadyExists,
    Compacted,
    Conflict,
    Event,
    EventType,
    JsonObject,
    Listing,
    NotFound,
    Revision,
    StoredObject,
    StoreError,
    Unavailable,
    encode_value,
    prefix_end,
    validate_key,
    validate_prefix,
)

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_SCHEMA_VERSION = 2
# `objects` is a rowid table, its key in an index of its own. Schema 1 made it WITHOUT ROWID,
# which keeps each value inside the key's B-tree: SQLite advises against that for rows this
# large (a Workload is a kilobyte or two), and an update cost the writer thread 22.6 µs of
# CPU there against 13.1 µs in a rowid table (batches of 32 updates of 1 KiB values).
_OBJECTS_TABLE = """
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    create_revision INTEGER NOT NULL,
    revision INTEGER NOT NULL
)"""
_SCHEMA = f"""
{_OBJECTS_TABLE};
CREATE TABLE IF NOT EXISTS changes (
    revision INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    type TEXT NOT NULL,
    value TEXT NOT NULL,
    create_revision INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (name, value) VALUES ('revision', 0), ('floor', 0), ('schema', 2);
"""
_MIGRATE_FROM_1 = (
    "ALTER TABLE objects RENAME TO objects_schema_1",
    _OBJECTS_TABLE,
    "INSERT INTO objects SELECT key, value, create_revision, revision FROM objects_schema_1",
    "DROP TABLE objects_schema_1",
    "UPDATE meta SET value = 2 WHERE name = 'schema'",
)
"""Schema 1 differs only in `objects` (WITHOUT ROWID): its rows are copied to the rowid table
in one transaction, so a file is either migrated whole or left as it was."""

COMMIT_INTERVAL_SECONDS = 0.010
"""The least time between two commits while writers are concurrent (`SqliteStore._serve`).

Every commit costs the hub about as much again as the writes in it: the fsync, the writer
thread's transaction, and, once it is settled, a turn of everything downstream (the mirror's
events, a dispatch cycle, the watches' writes, the answers). Committing whatever is there at
once made small transactions under a steady trickle: in `bench.federation_dispatch`'s paced
phase (200 workloads a second, each a create with its source and two updates), 1.41 commits
per workload at 238 µs of writer CPU each (`bench.federation_meter --meter
hub.store.sqlite:_Writer.apply`).

Waiting a moment gathers them, as PostgreSQL's `commit_delay` and MySQL's
`binlog_group_commit_sync_delay` do. As with PostgreSQL's `commit_siblings`, the wait applies
only when there is company to wait for, so a lone client writing in turn is not slowed. The
price is latency: a write waits at most this long before its transaction begins.

Session 40, 4 interleaved pairs each against committing at once, paced phase:
- 5 ms: the hub's CPU per workload 1.885 → 1.73 ms; p50 submit-to-admitted +3 ms.
- 10 ms: 1.95 → 1.53 ms, the agents' 1.70 → 1.58; 0.49 commits per workload; p50 90 → 103
  ms, p99 121 → 137 ms.
- 10 ms with `GATHER_UP_TO`, as now: 1.935 → 1.56 ms, the agents' 1.70 → 1.615; the burst's
  dispatch rate 711 → 717 a second, its submit rate 795 → 768."""

GATHER_UP_TO = 32
"""A transaction of this many writes or more starts at once, whatever the commit interval.

A commit's own cost is spread thin over that many already: the writer's ~240 µs is under
8 µs a write. Waiting longer would only hold back clients that write in turn, many at once,
each awaiting its last write before the next.

`bench.store_throughput --stores sqlite`, 50 such writers:
- committing at once: 35,205 creates a second;
- with the interval alone: 4,927 (a commit every 10 ms);
- with this: 38,599."""

_OpKind = Literal["create", "update", "delete", "compact"]


@dataclass(frozen=True, slots=True)
class _Put:
    """A key a create writes beside it (`create_with`), whatever is there."""

    key: str
    data: str
    value: JsonObject


@dataclass(frozen=True, slots=True)
class _Op:
    kind: _OpKind
    key: str
    data: str | None = None  # encoded JSON for create/update
    expected: Revision | None = None  # CAS revision; for compact, the target revision
    value: JsonObject | None = None
    """For create/update, the caller's value: the committed object carries it as it is
    rather than a parse of `data` (callers hand their value over and never change it)."""
    puts: tuple[_Put, ...] = ()
    """For create, the keys written beside it in the same transaction (`create_with`)."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    result: StoredObject | StoreError | ValueError | None
    events: tuple[Event, ...] = ()


def _unavailable(cause: Exception) -> Unavailable:
    error = Unavailable(f"store write failed, nothing of it was committed: {cause}")
    error.__cause__ = cause
    return error


# --- the writer thread ------------------------------------------------------------------


class _Writer:
    """State confined to the writer thread: its connection and the revision counter."""

    def __init__(self, path: str, *, history: int) -> None:
        self.history = history
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")  # see the module docstring
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.executescript(_SCHEMA)
        self.revision, self.floor = self._load_meta()

    def _load_meta(self) -> tuple[Revision, Revision]:
        meta = dict(self.conn.execute("SELECT name, value FROM meta").fetchall())
        if meta["schema"] == 1:
            self._migrate(_MIGRATE_FROM_1)
            meta["schema"] = 2
        if meta["schema"] != _SCHEMA_VERSION:
            raise StoreError(f"store schema {meta['schema']} is not {_SCHEMA_VERSION}")
        return Revision(meta["revision"]), Revision(meta["floor"])

    def _migrate(self, statements: Sequence[str]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements:
                self.conn.execute(statement)
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.conn.execute("ROLLBACK")
            raise StoreError(f"cannot migrate the store file: {exc}") from exc

    def apply(self, ops: Sequence[_Op]) -> tuple[list[_Outcome], Revision, Revision]:
        """Run a batch in one transaction; returns outcomes, the revision and the floor."""
        start_revision, start_floor = self.revision, self.floor
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            outcomes = [self._apply_one(op) for op in ops]
            if self.revision != start_revision:
                self.conn.execute(
                    "UPDATE meta SET value = ? WHERE name = 'revision'", (self.revision,)
                )
                self._trim_history()
            if self.floor != start_floor:
                self.conn.execute("UPDATE meta SET value = ? WHERE name = 'floor'", (self.floor,))
            self.conn.execute("COMMIT")
        except Exception as exc:
            # Nothing of the batch is durable: every caller learns so, and the counter goes
            # back to what the file says.
            log.exception("store commit failed; %d writes rolled back", len(ops))
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            self.revision, self.floor = start_revision, start_floor
            return [_Outcome(_unavailable(exc)) for _ in ops], self.revision, self.floor
        return outcomes, self.revision, self.floor

    def _apply_one(self, op: _Op) -> _Outcome:
        try:
            if op.kind == "create":
                return self._create(op)
            if op.kind == "update":
                return self._update(op)
            if op.kind == "delete":
                return self._delete(op)
            return self._compact(op)
        except (StoreError, ValueError) as exc:
            return _Outcome(exc)

    def _create(self, op: _Op) -> _Outcome:
        assert op.data is not None
        row = self.conn.execute("SELECT revision FROM objects WHERE key = ?", (op.key,)).fetchone()
        if row is not None:
            raise AlreadyExists(op.key, current=Revision(row[0]))
        # Past the only precondition: nothing below fails but SQLite itself, which fails the
        # whole batch, so the puts and the create are committed together or not at all.
        events = [self._put(put) for put in op.puts]
        rev = self._next()
        self.conn.execute(
            "INSERT INTO objects (key, value, create_revision, revision) VALUES (?, ?, ?, ?)",
            (op.key, op.data, rev, rev),
        )
        created = self._record(EventType.ADDED, op.key, op.data, rev, rev, op.value)
        return _Outcome(created.result, (*events, *created.events))

    def _put(self, put: _Put) -> Event:
        row = self.conn.execute(
            "SELECT create_revision FROM objects WHERE key = ?", (put.key,)
        ).fetchone()
        rev = self._next()
        if row is None:
            kind, created = EventType.ADDED, rev
            self.conn.execute(
                "INSERT INTO objects (key, value, create_revision, revision) VALUES (?, ?, ?, ?)",
                (put.key, put.data, rev, rev),
            )
        else:
            kind, created = EventType.MODIFIED, Revision(row[0])
            self.conn.execute(
                "UPDATE objects SET value = ?, revision = ? WHERE key = ?", (put.data, rev, put.key)
            )
        (event,) = self._record(kind, put.key, put.data, rev, created, put.value).events
        return event

    def _update(self, op: _Op) -> _Outcome:
        assert op.data is not None
        _, created = self._check(op)
        rev = self._next()
        self.conn.execute(
            "UPDATE objects SET value = ?, revision = ? WHERE key = ?", (op.data, rev, op.key)
        )
        return self._record(EventType.MODIFIED, op.key, op.data, rev, created, op.value)

    def _delete(self, op: _Op) -> _Outcome:
        _, created = self._check(op)
        (data,) = self.conn.execute("SELECT value FROM objects WHERE key = ?", (op.key,)).fetchone()
        rev = self._next()
        self.conn.execute("DELETE FROM objects WHERE key = ?", (op.key,))
        return self._record(EventType.DELETED, op.key, data, rev, created)

    def _compact(self, op: _Op) -> _Outcome:
        target = op.expected
        assert target is not None
        if target > self.revision:
            raise ValueError(f"cannot compact at {target}: the store is at {self.revision}")
        if target - 1 > self.floor:
            self.conn.execute("DELETE FROM changes WHERE revision < ?", (target,))
            self.floor = Revision(target - 1)
        return _Outcome(None)

    def _check(self, op: _Op) -> tuple[Revision, Revision]:
        row = self.conn.execute(
            "SELECT revision, create_revision FROM objects WHERE key = ?", (op.key,)
        ).fetchone()
        if row is None:
            raise NotFound(op.key)
        current, created = Revision(row[0]), Revision(row[1])
        if op.expected is not None and op.expected != current:
            raise Conflict(op.key, expected=op.expected, current=current)
        return current, created

    def _next(self) -> Revision:
        self.revision = Revision(self.revision + 1)
        return self.revision

    def _record(
        self,
        kind: EventType,
        key: str,
        data: str,
        rev: Revision,
        created: Revision,
        value: JsonObject | None = None,
    ) -> _Outcome:
        self.conn.execute(
            "INSERT INTO changes (revision, key, type, value, create_revision)"
            " VALUES (?, ?, ?, ?, ?)",
            (rev, key, kind.value, data, created),
        )
        if value is None:
            value = from_json(data)
        obj = StoredObject(
            key=key, value=value, revision=rev, create_revision=created, encoded=data
        )
        return _Outcome(obj, (Event(kind, obj),))

    def _trim_history(self) -> None:
        # Trim in steps of an eighth of the history, not on every commit.
        if self.revision - self.floor > self.history + max(1, self.history // 8):
            floor = Revision(self.revision - self.history)
            self.conn.execute("DELETE FROM changes WHERE revision <= ?", (floor,))
            self.floor = floor

    def close(self) -> None:
        self.conn.close()


# --- the reader thread ------------------------------------------------------------------


class _Reader:
    """State confined to the reader thread: a read-only connection."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.execute("PRAGMA query_only=1")

    def get(self, key: str) -> StoredObject | None:
        row = self.conn.execute(
            "SELECT value, revision, create_revision FROM objects WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return StoredObject(key, from_json(row[0]), Revision(row[1]), Revision(row[2]))

    def list_objects(self, prefix: str) -> Listing:
        # One read transaction: the items and the revision come from the same snapshot.
        self.conn.execute("BEGIN")
        try:
            (revision,) = self.conn.execute(
                "SELECT value FROM meta WHERE name = 'revision'"
            ).fetchone()
            end = prefix_end(prefix)
            if end is None:
                rows = self.conn.execute(
                    "SELECT key, value, revision, create_revision FROM objects ORDER BY key"
                ).fetchall()
            else:
                rows = self.conn.execute(
                    "SELECT key, value, revision, create_revision FROM objects"
                    " WHERE key >= ? AND key < ? ORDER BY key",
                    (prefix, end),
                ).fetchall()
        finally:
            self.conn.execute("COMMIT")
        items = tuple(
            StoredObject(key, from_json(value), Revision(rev), Revision(created))
            for key, value, rev, created in rows
        )
        return Listing(items=items, revision=Revision(revision))

    def changes(
        self, prefix: str, *, after: Revision, upto: Revision, limit: int
    ) -> tuple[Revision, list[Event], bool]:
        """Events in (after, upto] under prefix, at most `limit`: (floor, events, complete)."""
        self.conn.execute("BEGIN")
        try:
            (floor,) = self.conn.execute("SELECT value FROM meta WHERE name = 'floor'").fetchone()
            end = prefix_end(prefix)
            sql = (
                "SELECT revision, key, type, value, create_revision FROM changes"
                " WHERE revision > ? AND revision <= ?"
            )
            params: tuple[Any, ...] = (after, upto)
            if end is not None:
                sql += " AND key >= ? AND key < ?"
                params += (prefix, end)
            sql += " ORDER BY revision LIMIT ?"
            rows = self.conn.execute(sql, (*params, limit)).fetchall()
        finally:
            self.conn.execute("COMMIT")
        events = [
            Event(
                EventType(kind),
                StoredObject(
                    key, from_json(value), Revision(rev), Revision(created), encoded=value
                ),
            )
            for rev, key, kind, value, created in rows
        ]
        return Revision(floor), events, len(rows) < limit

    def close(self) -> None:
        self.conn.close()


# --- the store ----------------------------------------------------------------------------


@dataclass(eq=False)
class _Pending:
    op: _Op
    future: asyncio.Future[_Outcome]


_STOP = None
"""Handed over by `close` after the last writes: the writer thread stops serving."""


class SqliteStore:
    """The embedded `Store`. Create with `await SqliteStore.open(path)`; one per process."""

    def __init__(
        self,
        *,
        path: str,
        lock_fd: int,
        writer: _Writer,
        reader: _Reader,
        writer_pool: ThreadPoolExecutor,
        reader_pool: ThreadPoolExecutor,
        watch_buffer: int,
        max_batch: int,
        commit_interval: float,
    ) -> None:
        self._path = path
        self._lock_fd = lock_fd
        self._writer = writer
        self._reader = reader
        self._writer_pool = writer_pool
        self._reader_pool = reader_pool
        self._watch_buffer = watch_buffer
        self._max_batch = max_batch
        self._commit_interval = commit_interval
        self._queue: queue.SimpleQueue[list[_Pending] | None] = queue.SimpleQueue()
        self._collected: list[_Pending] = []  # submitted, not handed over yet
        self._in_flight: set[_Pending] = set()  # submitted, not settled yet
        self._closing = False  # no new writes (set by close, or by a crashed writer)
        self._closed = False
        self._published = writer.revision  # last revision handed to the fan-out
        self._floor = writer.floor
        self._watchers: set[_SqliteWatch] = set()
        self._batches = 0
        self._loop = asyncio.get_running_loop()
        self._serving = asyncio.wrap_future(writer_pool.submit(self._serve))
        self._serving.add_done_callback(self._served)

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        history: int = 10_000,
        watch_buffer: int = 1_000,
        max_batch: int = 1_000,
        commit_interval: float = COMMIT_INTERVAL_SECONDS,
    ) -> SqliteStore:
        """Open (creating if needed) the store at `path`.

        `history`: change events kept for resuming watches; `watch_buffer`: events queued per
        live watcher before it falls back to reading history; `max_batch`: writes per commit;
        `commit_interval`: the least time between two commits while writers are concurrent
        (see `_serve`; 0: commit whatever is there at once).
        """
        path = os.fspath(path)
        lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(lock_fd)
            raise Unavailable(f"{path} is open in another process") from exc
        loop = asyncio.get_running_loop()
        writer_pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-store-writer")
        reader_pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-store-reader")
        try:
            writer = await loop.run_in_executor(writer_pool, lambda: _Writer(path, history=history))
            reader = await loop.run_in_executor(reader_pool, _Reader, path)
        except BaseException as exc:
            writer_pool.shutdown()
            reader_pool.shutdown()
            os.close(lock_fd)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open the store at {path}: {exc}") from exc
            raise
        return cls(
            path=path,
            lock_fd=lock_fd,
            writer=writer,
            reader=reader,
            writer_pool=writer_pool,
            reader_pool=reader_pool,
            watch_buffer=watch_buffer,
            max_batch=max_batch,
            commit_interval=commit_interval,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- statistics for tests, benchmarks and metrics --

    @property
    def commits(self) -> int:
        """Transactions committed since open (each is one fsync)."""
        return self._batches

    # -- reads --

    async def _read(self, fn: Callable[[], _T]) -> _T:
        if self._closing:
            raise Unavailable("store is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._reader_pool, fn)
        except sqlite3.Error as exc:
            raise Unavailable(f"store read failed: {exc}") from exc

    async def get(self, key: str) -> StoredObject:
        validate_key(key)
        obj = await self._read(lambda: self._reader.get(key))
        if obj is None:
            raise NotFound(key)
        return obj

    async def list(self, prefix: str) -> Listing:
        validate_prefix(prefix)
        return await self._read(lambda: self._reader.list_objects(prefix))

    async def current_revision(self) -> Revision:
        return self._published

    # -- writes --

    async def create(self, key: str, value: JsonObject) -> StoredObject:
        validate_key(key)
        data = encode_value(key, value).decode()
        return await self._write_object(_Op("create", key, data, value=value))

    async def create_with(
        self, key: str, value: JsonObject, *, put: Mapping[str, JsonObject]
    ) -> StoredObject:
        validate_key(key)
        data = encode_value(key, value).decode()
        puts = []
        for put_key, put_value in put.items():
            validate_key(put_key)
            if put_key == key:
                raise ValueError(f"{key}: created and put in one write")
            puts.append(_Put(put_key, encode_value(put_key, put_value).decode(), put_value))
        return await self._write_object(_Op("create", key, data, value=value, puts=tuple(puts)))

    async def update(
        self, key: str, value: JsonObject, *, expected: Revision | None
    ) -> StoredObject:
        validate_key(key)
        data = encode_value(key, value).decode()
        return await self._write_object(_Op("update", key, data, expected, value))

    async def delete(self, key: str, *, expected: Revision | None) -> StoredObject:
        validate_key(key)
        return await self._write_object(_Op("delete", key, None, expected))

    async def compact(self, revision: Revision) -> None:
        outcome = await self._submit(_Op("compact", "", None, revision))
        if isinstance(outcome.result, Exception):
            raise outcome.result

    async def _write_object(self, op: _Op) -> StoredObject:
        result = (await self._submit(op)).result
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, StoredObject)
        return result

    async def _submit(self, op: _Op) -> _Outcome:
        if self._closing:
            raise Unavailable("store is closed")
        pending = _Pending(op, self._loop.create_future())
        self._in_flight.add(pending)
        if not self._collected:
            self._loop.call_soon(self._hand_over)
        self._collected.append(pending)
        # A cancelled caller does not withdraw its write: it may already be committing.
        return await pending.future

    def _hand_over(self) -> None:
        """Give the writer thread every write submitted since the last hand-over, at once: a
        thread woken by each write would take them one by one (group commit, undone)."""
        if self._collected:
            self._queue.put(self._collected)
            self._collected = []

    def _serve(self) -> None:
        """The writer thread, while the store is open: commit whatever was handed over as one
        transaction (up to `max_batch` writes), hand the outcomes back to the loop, again;
        after `_STOP`, once everything handed over before it is committed, return.

        While writers are concurrent — the last transaction or the one about to start holds
        more than one write — a transaction of fewer than `GATHER_UP_TO` writes starts no
        sooner than `commit_interval` after the last one began, and takes what arrived
        meanwhile (see COMMIT_INTERVAL_SECONDS). A lone write after a lone write (one client
        writing in turn, awaiting each) never waits, nor does a transaction that is large
        already."""
        waiting: collections.deque[_Pending] = collections.deque()
        stopping = False
        last_began = -math.inf
        last_lone = True
        while waiting or not stopping:
            if not waiting:
                handed = self._queue.get()
                if handed is _STOP:
                    stopping = True
                    continue
                waiting.extend(handed)
            stopping = self._take_handed(waiting, stopping)  # and whatever else came meanwhile
            if (
                not stopping
                and not (last_lone and len(waiting) == 1)
                and len(waiting) < GATHER_UP_TO
            ):
                pause = last_began + self._commit_interval - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                    stopping = self._take_handed(waiting, stopping)
            batch = [waiting.popleft() for _ in range(min(len(waiting), self._max_batch))]
            last_began, last_lone = time.monotonic(), len(batch) == 1
            try:
                outcomes, revision, floor = self._writer.apply([p.op for p in batch])
            except Exception as exc:
                log.exception("store writer failed")
                outcomes = [_Outcome(_unavailable(exc)) for _ in batch]
                revision, floor = self._writer.revision, self._writer.floor
            self._loop.call_soon_threadsafe(self._settle, batch, outcomes, revision, floor)

    def _take_handed(self, waiting: collections.deque[_Pending], stopping: bool) -> bool:
        """Add to `waiting` every write handed over and not taken yet; whether `_STOP` came."""
        while not stopping:
            try:
                handed = self._queue.get_nowait()
            except queue.Empty:
                break
            if handed is _STOP:
                stopping = True
            else:
                waiting.extend(handed)
        return stopping

    def _settle(
        self,
        batch: Sequence[_Pending],
        outcomes: Sequence[_Outcome],
        revision: Revision,
        floor: Revision,
    ) -> None:
        """In the loop: publish a committed batch and answer its callers, in one step, so that
        by the time any caller resumes every watcher has its event and current_revision()
        includes the write."""
        try:
            self._batches += 1
            self._floor = floor
            for outcome in outcomes:
                for event in outcome.events:
                    self._publish(event)
            self._published = revision
            for pending, outcome in zip(batch, outcomes, strict=True):
                self._in_flight.discard(pending)
                if not pending.future.done():
                    pending.future.set_result(outcome)
        except Exception:
            # A bug, not a disk error (those fail their batch): refuse further writes rather
            # than leave callers waiting forever.
            log.exception("store writer crashed; the store is closed")
            self._fail_everything(Unavailable("store writer crashed"))

    def _served(self, serving: asyncio.Future[None]) -> None:
        """The writer thread stopped: after `close`, or a bug in it."""
        if not serving.cancelled() and serving.exception() is not None:
            log.error(
                "store writer thread crashed; the store is closed", exc_info=serving.exception()
            )
            self._fail_everything(Unavailable("store writer crashed"))

    def _fail_everything(self, error: Unavailable) -> None:
        self._closing = True
        for pending in self._in_flight:
            if not pending.future.done():
                pending.future.set_exception(error)
        self._in_flight.clear()
        for watcher in tuple(self._watchers):
            watcher.fail(error)

    def _publish(self, event: Event) -> None:
        for watcher in tuple(self._watchers):
            if event.key.startswith(watcher.prefix):
                watcher.offer(event)

    # -- watches --

    def watch(self, prefix: str, *, since: Revision) -> _SqliteWatch:
        validate_prefix(prefix)
        return _SqliteWatch(self, prefix, since)

    # -- lifecycle --

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = self._closing = True
        self._hand_over()
        self._queue.put(_STOP)  # after every write handed over: each is committed first
        await asyncio.wait({self._serving})  # (a crashed writer failed its callers already)
        for watcher in tuple(self._watchers):
            watcher.fail(Unavailable("store is closed"))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer_pool, self._writer.close)
        await loop.run_in_executor(self._reader_pool, self._reader.close)
        self._writer_pool.shutdown()
        self._reader_pool.shutdown()
        os.close(self._lock_fd)


@dataclass(eq=False)
class _SqliteWatch:
    """Replays `changes` after `since`, then follows the live fan-out (see module docstring).

    Events wait in one bounded deque, replayed or live. A live watcher whose deque is full
    leaves the fan-out and, once its consumer has drained the deque, goes back to replaying
    `changes` from its last queued event: a slow consumer costs reads, not memory, and gets
    `Compacted` only when the history it still needs has been trimmed.
    """

    store: SqliteStore
    prefix: str
    since: Revision
    _position: Revision = field(default_factory=lambda: Revision(0))  # last event queued
    _pending: collections.deque[Event] = field(default_factory=collections.deque)
    _joined: bool = False  # in the store's fan-out
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _error: StoreError | None = None
    _page: int = 500

    async def __aenter__(self) -> Self:
        self._position = self.since
        if self.store._closing:
            raise Unavailable("store is closed")
        if self.since < self.store._floor:
            raise self._compacted(self.since)
        self._join_if_caught_up()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._error is not None:
                raise self._error
            if not self._joined:
                await self._catch_up()
                continue
            self._wake.clear()
            await self._wake.wait()

    def _join_if_caught_up(self) -> bool:
        # Synchronous, so nothing can be published between the check and joining.
        if self._position < self.store._published:
            return False
        self._joined = True
        self.store._watchers.add(self)
        return True

    def _leave(self) -> None:
        self._joined = False
        self.store._watchers.discard(self)

    async def _catch_up(self) -> None:
        store = self.store
        if self._join_if_caught_up():
            return
        published = store._published
        after = self._position
        floor, events, complete = await store._read(
            lambda: store._reader.changes(
                self.prefix, after=after, upto=published, limit=self._page
            )
        )
        if after < floor:
            raise self._compacted(after)
        self._pending.extend(events)
        self._position = published if complete else events[-1].revision
        self._join_if_caught_up()

    def offer(self, event: Event) -> None:
        """Called by the writer task for every committed event under our prefix."""
        if event.revision <= self._position:
            return
        if len(self._pending) >= self.store._watch_buffer:
            log.info(
                "watch on %r fell %d events behind; replaying", self.prefix, len(self._pending)
            )
            self._leave()  # resume from `changes` after self._position
            return
        self._pending.append(event)
        self._position = event.revision
        self._wake.set()

    def fail(self, error: StoreError) -> None:
        self._leave()
        self._error = error
        self._wake.set()

    def _compacted(self, after: Revision) -> Compacted:
        return Compacted(
            f"watch on {self.prefix!r} needs the events after revision {after}, but history"
            f" before {self.store._floor + 1} is compacted; relist",
            revision=after,
        )
