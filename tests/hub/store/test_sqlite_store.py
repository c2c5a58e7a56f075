"""What only the embedded store promises: crash durability, group commit, single ownership,
bounded history, and a faithful reopen."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.store.base import Compacted, Revision, Unavailable
from hub.store.sqlite import GATHER_UP_TO, SqliteStore, _Writer

REPO = Path(__file__).resolve().parents[3]


def run_writer_until_killed(path: Path, *, acks: int) -> dict[str, int]:
    """Start the writer child, SIGKILL it once `acks` creates were acknowledged, and return
    every acknowledgement it printed (including those in flight when it died)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.hub.store.sqlite_writer_child", str(path), "16"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acked: dict[str, int] = {}
    try:
        for line in child.stdout:
            key, revision = line.split()
            acked[key] = int(revision)
            if len(acked) >= acks:
                os.kill(child.pid, signal.SIGKILL)
                break
        # Lines written before the kill are acknowledgements too.
        for line in child.stdout:
            if line.endswith("\n"):
                key, revision = line.split()
                acked[key] = int(revision)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL, "the writer must die by SIGKILL, mid-stream"
    return acked


async def first_events(store: SqliteStore, count: int) -> list[tuple[str, str, int]]:
    """The first `count` events of a watch of /w/ from the start: (type, key, revision)."""
    got: list[tuple[str, str, int]] = []
    async with store.watch("/w/", since=Revision(0)) as events, asyncio.timeout(5):
        async for event in events:
            got.append((event.type.value, event.key, event.revision))
            if len(got) == count:
                break
    return got


async def test_every_acknowledged_create_survives_kill_9_of_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    acked = await asyncio.to_thread(run_writer_until_killed, path, acks=600)

    async with await SqliteStore.open(path) as store:
        listing = await store.list("/acked/")
        stored = {o.key: o.revision for o in listing.items}
        assert {k: stored.get(k) for k in acked} == acked
        # The counter was rebuilt: nothing acknowledged is reused, and new writes go after.
        assert listing.revision >= max(acked.values())
        created = await store.create("/after/restart", {})
        assert created.revision == listing.revision + 1


async def test_reopening_restores_objects_revision_and_watch_history(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with await SqliteStore.open(path) as store:
        a = await store.create("/w/a", {"v": 1})
        await store.update("/w/a", {"v": 2}, expected=a.revision)
        b = await store.create("/w/b", {"v": 1})
        await store.delete("/w/b", expected=b.revision)
        before = await store.list("")

    async with await SqliteStore.open(path) as store:
        assert await store.list("") == before
        assert await store.current_revision() == before.revision == 4
        got = await first_events(store, 4)
        assert got == [
            ("ADDED", "/w/a", 1),
            ("MODIFIED", "/w/a", 2),
            ("ADDED", "/w/b", 3),
            ("DELETED", "/w/b", 4),
        ]


SCHEMA_1 = """
CREATE TABLE objects (key TEXT PRIMARY KEY, value TEXT NOT NULL,
    create_revision INTEGER NOT NULL, revision INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE changes (revision INTEGER PRIMARY KEY, key TEXT NOT NULL, type TEXT NOT NULL,
    value TEXT NOT NULL, create_revision INTEGER NOT NULL);
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO objects VALUES ('/w/a', '{"v":2}', 1, 2), ('/w/c', '{"v":1}', 3, 3);
INSERT INTO changes VALUES (1, '/w/a', 'ADDED', '{"v":1}', 1),
    (2, '/w/a', 'MODIFIED', '{"v":2}', 1), (3, '/w/c', 'ADDED', '{"v":1}', 3);
INSERT INTO meta VALUES ('revision', 3), ('floor', 0), ('schema', 1);
"""
"""A store file as schema 1 wrote it: `objects` WITHOUT ROWID."""


async def test_a_file_of_schema_1_is_migrated_with_its_objects_revision_and_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(SCHEMA_1)

    async with await SqliteStore.open(path) as store:
        listing = await store.list("/w/")
        assert [(o.key, o.value, o.revision) for o in listing.items] == [
            ("/w/a", {"v": 2}, 2),
            ("/w/c", {"v": 1}, 3),
        ]
        assert listing.revision == 3
        updated = await store.update("/w/a", {"v": 3}, expected=Revision(2))
        assert (updated.revision, updated.create_revision) == (4, 1)
        got = await first_events(store, 4)
        assert got[-1] == ("MODIFIED", "/w/a", 4) and len(got) == 4

    with contextlib.closing(sqlite3.connect(path)) as conn:
        (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'objects'").fetchone()
        assert "WITHOUT ROWID" not in ddl
        assert conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone() == (2,)
    async with await SqliteStore.open(path) as store:  # and it opens again as it is
        assert (await store.get("/w/a")).value == {"v": 3}


async def test_concurrent_creates_are_group_committed(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "store.db") as store:
        before = store.commits

        created = await asyncio.gather(*(store.create(f"/g/{i}", {"i": i}) for i in range(500)))

        commits = store.commits - before
        assert sorted(o.revision for o in created) == list(range(1, 501))
        # The first write commits alone; everything queued behind its fsync goes together.
        assert commits <= 10, f"{commits} commits for 500 concurrent creates"


async def test_writes_that_trickle_in_among_concurrent_writers_wait_for_the_commit_interval_together(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path / "store.db", commit_interval=1.0) as store:
        # Two writers at once: committed at once (nothing committed before), as one.
        await asyncio.gather(store.create("/t/a", {}), store.create("/t/b", {}))
        before = store.commits

        async def later(key: str, delay: float) -> None:
            await asyncio.sleep(delay)
            await store.create(key, {})

        # Within the second after that commit began, three more arrive one by one: they
        # wait for it to pass and go in one transaction.
        await asyncio.gather(later("/t/c", 0), later("/t/d", 0.05), later("/t/e", 0.1))

        assert store.commits - before == 1


async def test_a_lone_client_writing_in_turn_is_never_held_back_by_the_commit_interval(
    tmp_path: Path,
) -> None:
    interval = 30.0
    async with await SqliteStore.open(tmp_path / "store.db", commit_interval=interval) as store:
        started = asyncio.get_running_loop().time()
        for i in range(5):
            await store.create(f"/l/{i}", {"i": i})

        # Each write alone, committed at once: one held back would have waited 30 s.
        assert asyncio.get_running_loop().time() - started < interval / 2
        assert store.commits == 5


async def test_a_transaction_that_is_large_already_is_not_held_back_by_the_commit_interval(
    tmp_path: Path,
) -> None:
    interval = 30.0
    async with await SqliteStore.open(tmp_path / "store.db", commit_interval=interval) as store:
        await asyncio.gather(store.create("/b/a", {}), store.create("/b/b", {}))
        started = asyncio.get_running_loop().time()

        await asyncio.gather(*(store.create(f"/b/{i}", {}) for i in range(GATHER_UP_TO)))

        # Right after a commit, among concurrent writers: a small batch would wait 30 s.
        assert asyncio.get_running_loop().time() - started < interval / 2


async def test_a_failed_precondition_in_a_batch_fails_only_its_own_write(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path / "store.db") as store:
        await store.create("/g/taken", {})

        results = await asyncio.gather(
            store.create("/g/x", {}),
            store.create("/g/taken", {}),
            store.create("/g/y", {}),
            return_exceptions=True,
        )

        assert [type(r).__name__ for r in results] == [
            "StoredObject",
            "AlreadyExists",
            "StoredObject",
        ]
        assert [o.key for o in (await store.list("/g/")).items] == ["/g/taken", "/g/x", "/g/y"]


async def test_a_second_opener_of_the_same_file_is_refused(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "store.db"):
        with pytest.raises(Unavailable, match="open in another process"):
            await SqliteStore.open(tmp_path / "store.db")
    async with await SqliteStore.open(tmp_path / "store.db"):  # released on close
        pass


async def test_history_is_trimmed_to_its_configured_length(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "store.db", history=20) as store:
        for i in range(100):
            await store.create(f"/h/{i:03d}", {})

        with pytest.raises(Compacted):
            async with store.watch("/h/", since=Revision(0)):
                pass
        async with store.watch("/h/", since=Revision(80)) as events:
            async with asyncio.timeout(5):
                first = await anext(aiter(events))
        assert first.revision == 81


async def test_writes_after_close_are_unavailable(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "store.db")
    await store.close()

    with pytest.raises(Unavailable):
        await store.create("/x/a", {})
    await store.close()  # idempotent


async def test_every_write_queued_when_the_store_closes_is_committed_first(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "store.db")
    writes = [asyncio.ensure_future(store.create(f"/c/{i:02d}", {"i": i})) for i in range(50)]
    await asyncio.sleep(0)  # every one of them queued

    await store.close()

    assert sorted(w.result().revision for w in writes) == list(range(1, 51))
    async with await SqliteStore.open(tmp_path / "store.db") as reopened:
        assert len((await reopened.list("/c/")).items) == 50


async def test_a_bug_while_answering_a_batch_fails_its_writes_and_closes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(tmp_path / "store.db") as store:

        def broken(self: SqliteStore, event: object) -> None:
            raise RuntimeError("a bug in the fan-out")

        monkeypatch.setattr(SqliteStore, "_publish", broken)
        with pytest.raises(Unavailable, match="crashed"):
            await store.create("/b/a", {})  # answered, not left waiting

        with pytest.raises(Unavailable):
            await store.create("/b/next", {})


async def test_a_crash_of_the_writer_thread_fails_the_writes_waiting_for_it_and_closes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class WriterBug(BaseException):
        """Not an error of the disk, which fails its batch only: a bug that ends the thread."""

    def crash(self: _Writer, ops: Any) -> Any:
        raise WriterBug

    async with await SqliteStore.open(tmp_path / "store.db") as store:
        await store.create("/x/before", {})
        monkeypatch.setattr(_Writer, "apply", crash)

        with pytest.raises(Unavailable, match="crashed"):
            await asyncio.wait_for(store.create("/x/waiting", {}), 5)
        with pytest.raises(Unavailable):
            await store.create("/x/after", {})


async def test_a_failed_commit_fails_its_whole_batch_and_the_store_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(tmp_path / "store.db") as store:
        await store.create("/f/before", {})
        real = _Writer._apply_one

        def failing(self: _Writer, op: Any) -> Any:
            if op.key == "/f/poison":
                raise sqlite3.OperationalError("disk I/O error")
            return real(self, op)

        monkeypatch.setattr(_Writer, "_apply_one", failing)
        results = await asyncio.gather(
            store.create("/f/a", {}),
            store.create("/f/poison", {}),
            store.create("/f/b", {}),
            return_exceptions=True,
        )
        monkeypatch.setattr(_Writer, "_apply_one", real)

        assert all(isinstance(r, Unavailable) for r in results)
        assert [o.key for o in (await store.list("/f/")).items] == ["/f/before"]
        after = await store.create("/f/after", {})
        assert after.revision == 2  # the rolled-back batch consumed no revision


async def test_a_long_replay_is_read_in_pages_and_joins_live_writes_without_gaps(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path / "store.db") as store:
        for i in range(100):
            await store.create(f"/p/{i:03d}" if i % 3 else f"/other/{i:03d}", {})
        watch = store.watch("/p/", since=Revision(0))
        watch._page = 7  # many pages, some partly filtered out by the prefix

        revisions = []
        async with watch as events, asyncio.timeout(5):
            async for event in events:
                revisions.append(event.revision)
                if len(revisions) % 10 == 0 and event.revision < 100:
                    await store.create(f"/p/live-{event.revision}", {})
                if event.revision >= 100 and len(revisions) == 66 + 6:
                    break

        expected = [r for r in range(1, 101) if (r - 1) % 3] + list(range(101, 107))
        assert revisions == expected
