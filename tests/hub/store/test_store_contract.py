"""The `Store` contract, run against every implementation (SQLite file, real etcd server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hub.store.base import (
    MAX_VALUE_BYTES,
    AlreadyExists,
    Compacted,
    Conflict,
    Event,
    NotFound,
    Revision,
    Store,
    StoredObject,
    TooLarge,
    Unavailable,
    WatchStream,
    modify,
)
from tests.hub.store.conftest import StoreFactory


async def take(events: WatchStream, n: int, *, within: float = 5.0) -> list[Event]:
    got: list[Event] = []
    async with asyncio.timeout(within):
        async for event in events:
            got.append(event)
            if len(got) == n:
                break
    return got


@contextlib.asynccontextmanager
async def following_live_writes(store: Store) -> AsyncIterator[WatchStream]:
    """A watch of /w/ that has caught up with the store and now follows its live writes."""
    async with store.watch("/w/", since=await store.current_revision()) as events:
        await store.create("/w/first", {})
        await take(events, 1)
        yield events


def summary(events: list[Event]) -> list[tuple[str, str, Any]]:
    return [(e.type.value, e.key, e.object.value) for e in events]


# --- reads and writes ---------------------------------------------------------------------


async def test_a_created_object_reads_back_with_its_revisions(store: Store) -> None:
    created = await store.create("/workloads/ns/a", {"spec": {"n": 1}})

    assert created.value == {"spec": {"n": 1}}
    assert created.revision == created.create_revision
    assert await store.get("/workloads/ns/a") == created
    assert await store.current_revision() == created.revision


async def test_creating_an_existing_key_fails_and_changes_nothing(store: Store) -> None:
    first = await store.create("/q/a", {"v": 1})

    with pytest.raises(AlreadyExists) as caught:
        await store.create("/q/a", {"v": 2})

    assert caught.value.current == first.revision
    assert caught.value.http_status == 409
    assert await store.get("/q/a") == first


async def test_create_with_writes_the_object_and_its_puts_in_one_go(store: Store) -> None:
    old = await store.create("/src/ns/a", {"left": "by a deleted workload"})
    start = await store.current_revision()
    async with store.watch("/", since=start) as events:
        created = await store.create_with(
            "/workloads/ns/a",
            {"spec": {"n": 1}},
            put={"/src/ns/a": {"kind": "Job"}, "/src/ns/b": {"kind": "Pod"}},
        )
        got = await take(events, 3)

    assert await store.get("/workloads/ns/a") == created
    replaced, added = await store.get("/src/ns/a"), await store.get("/src/ns/b")
    assert (replaced.value, replaced.create_revision) == ({"kind": "Job"}, old.revision)
    assert added.value == {"kind": "Pod"}
    # The created object is written last, at the highest revision of the write.
    assert replaced.revision <= created.revision and added.revision <= created.revision
    assert await store.current_revision() == created.revision
    assert sorted(summary(got)) == [
        ("ADDED", "/src/ns/b", {"kind": "Pod"}),
        ("ADDED", "/workloads/ns/a", {"spec": {"n": 1}}),
        ("MODIFIED", "/src/ns/a", {"kind": "Job"}),
    ]
    assert got[-1].key == "/workloads/ns/a"
    assert [e.revision for e in got] == sorted(e.revision for e in got)


async def test_create_with_of_an_existing_key_writes_none_of_its_puts(store: Store) -> None:
    first = await store.create_with("/workloads/ns/a", {"v": 1}, put={"/src/ns/a": {"v": 1}})
    source = await store.get("/src/ns/a")

    with pytest.raises(AlreadyExists) as caught:
        await store.create_with(
            "/workloads/ns/a", {"v": 2}, put={"/src/ns/a": {"v": 2}, "/src/ns/b": {"v": 2}}
        )

    assert caught.value.current == first.revision
    assert await store.get("/src/ns/a") == source
    with pytest.raises(NotFound):
        await store.get("/src/ns/b")
    assert await store.current_revision() == first.revision


async def test_create_with_refuses_bad_puts_before_writing_anything(store: Store) -> None:
    start = await store.current_revision()
    with pytest.raises(ValueError, match="invalid store key"):
        await store.create_with("/w/a", {}, put={"no-slash": {}})
    with pytest.raises(ValueError, match="created and put"):
        await store.create_with("/w/a", {}, put={"/w/a": {}})
    with pytest.raises(TooLarge):
        await store.create_with("/w/a", {}, put={"/w/b": {"x": "y" * MAX_VALUE_BYTES}})
    assert await store.current_revision() == start
    with pytest.raises(NotFound):
        await store.get("/w/a")


async def test_getting_a_missing_key_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        await store.get("/q/missing")
    assert caught.value.http_status == 404


async def test_list_returns_exactly_the_prefix_sorted_by_key_at_one_revision(
    store: Store,
) -> None:
    for key in ["/w/ns/b", "/w/ns/a", "/w/ns2/a", "/w/nsx", "/x/ns/a"]:
        await store.create(key, {"k": key})

    listing = await store.list("/w/ns/")

    assert [o.key for o in listing.items] == ["/w/ns/a", "/w/ns/b"]
    assert listing.revision == await store.current_revision()
    assert [o.key for o in (await store.list("/w/")).items] == [
        "/w/ns/a",
        "/w/ns/b",
        "/w/ns2/a",
        "/w/nsx",
    ]
    assert len((await store.list("")).items) == 5
    assert (await store.list("/nothing/")).items == ()


async def test_update_with_the_current_revision_replaces_the_value(store: Store) -> None:
    created = await store.create("/q/a", {"v": 1})

    updated = await store.update("/q/a", {"v": 2}, expected=created.revision)

    assert updated.value == {"v": 2}
    assert updated.revision > created.revision
    assert updated.create_revision == created.revision
    assert await store.get("/q/a") == updated


async def test_update_with_a_stale_revision_conflicts_and_reports_the_current_one(
    store: Store,
) -> None:
    created = await store.create("/q/a", {"v": 1})
    updated = await store.update("/q/a", {"v": 2}, expected=created.revision)

    with pytest.raises(Conflict) as caught:
        await store.update("/q/a", {"v": 3}, expected=created.revision)

    assert (caught.value.expected, caught.value.current) == (created.revision, updated.revision)
    assert caught.value.http_status == 409
    assert (await store.get("/q/a")).value == {"v": 2}


async def test_unconditional_update_replaces_whatever_is_there(store: Store) -> None:
    created = await store.create("/q/a", {"v": 1})
    await store.update("/q/a", {"v": 2}, expected=created.revision)

    last = await store.update("/q/a", {"v": 3}, expected=None)

    assert (await store.get("/q/a")) == last
    assert last.create_revision == created.revision


async def test_updating_or_deleting_a_missing_key_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.update("/q/missing", {"v": 1}, expected=None)
    with pytest.raises(NotFound):
        await store.update("/q/missing", {"v": 1}, expected=Revision(1))
    with pytest.raises(NotFound):
        await store.delete("/q/missing", expected=None)
    with pytest.raises(NotFound):
        await store.delete("/q/missing", expected=Revision(1))


async def test_delete_checks_the_revision_and_returns_the_last_value(store: Store) -> None:
    created = await store.create("/q/a", {"v": 1})
    updated = await store.update("/q/a", {"v": 2}, expected=created.revision)

    with pytest.raises(Conflict):
        await store.delete("/q/a", expected=created.revision)
    deleted = await store.delete("/q/a", expected=updated.revision)

    assert deleted.value == {"v": 2}
    assert deleted.revision == await store.current_revision() > updated.revision
    assert deleted.create_revision == created.revision
    with pytest.raises(NotFound):
        await store.get("/q/a")
    recreated = await store.create("/q/a", {"v": 3})
    assert recreated.create_revision > deleted.revision


async def test_every_write_advances_the_revision_by_one_and_failures_by_none(
    store: Store,
) -> None:
    start = await store.current_revision()
    a = await store.create("/q/a", {})
    with pytest.raises(AlreadyExists):
        await store.create("/q/a", {})
    with pytest.raises(Conflict):
        await store.update("/q/a", {}, expected=Revision(a.revision + 100))
    with pytest.raises(NotFound):
        await store.delete("/q/b", expected=None)
    b = await store.update("/q/a", {"v": 1}, expected=a.revision)
    c = await store.delete("/q/a", expected=None)

    assert [a.revision, b.revision, c.revision] == [start + 1, start + 2, start + 3]
    assert await store.current_revision() == start + 3


async def test_values_keep_unicode_nesting_and_numbers(store: Store) -> None:
    value = {"name": "ü-λ-🚀", "list": [1, 2.5, None, True, {"deep": ["x"]}], "big": 2**62}

    await store.create("/q/a", value)

    assert (await store.get("/q/a")).value == value
    assert (await store.list("/q/")).items[0].value == value


async def test_values_handed_out_are_independent_of_the_callers_dict(store: Store) -> None:
    value: dict[str, Any] = {"spec": {"n": 1}}
    await store.create("/q/a", value)

    value["spec"]["n"] = 2

    assert (await store.get("/q/a")).value == {"spec": {"n": 1}}


@pytest.mark.parametrize("key", ["", "q/a", "/q/a/", "/q//a", "/q/a\n", "/q/\x00"], ids=repr)
async def test_malformed_keys_are_rejected_before_reaching_the_backend(
    store: Store, key: str
) -> None:
    with pytest.raises(ValueError, match="invalid store key"):
        await store.create(key, {})
    with pytest.raises(ValueError, match="invalid store key"):
        await store.get(key)


async def test_values_must_be_json_objects(store: Store) -> None:
    with pytest.raises(TypeError):
        await store.create("/q/a", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.create("/q/a", {"when": object()})
    with pytest.raises(ValueError):
        await store.create("/q/a", {"cpu": float("nan")})  # no NaN in JSON
    with pytest.raises(NotFound):
        await store.get("/q/a")


async def test_text_that_spells_nan_or_infinity_is_stored_as_it_is(store: Store) -> None:
    value = {"note": "NaN and -Infinity are words here", "ünïcode": "ß", "big": 10**30}
    await store.create("/q/words", value)
    assert (await store.get("/q/words")).value == value


# --- concurrency --------------------------------------------------------------------------


async def test_concurrent_read_modify_write_loses_no_update(store: Store) -> None:
    await store.create("/counters/c", {"n": 0, "by": {}})
    writers, increments = 20, 10

    def bump(writer: int) -> Any:
        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            value["n"] += 1
            value["by"][str(writer)] = value["by"].get(str(writer), 0) + 1
            return value

        return mutate

    async def writer(w: int) -> list[Revision]:
        revisions = []
        for _ in range(increments):
            revisions.append((await modify(store, "/counters/c", bump(w), attempts=1000)).revision)
        return revisions

    per_writer = await asyncio.gather(*(writer(w) for w in range(writers)))

    final = await store.get("/counters/c")
    assert final.value["n"] == writers * increments
    assert final.value["by"] == {str(w): increments for w in range(writers)}
    for revisions in per_writer:  # each writer saw its own writes in increasing order
        assert revisions == sorted(revisions)
    all_revisions = [r for revisions in per_writer for r in revisions]
    assert len(set(all_revisions)) == writers * increments


async def test_concurrent_creates_of_one_key_let_exactly_one_win(store: Store) -> None:
    results = await asyncio.gather(
        *(store.create("/q/contested", {"by": i}) for i in range(30)), return_exceptions=True
    )

    winners = [r for r in results if isinstance(r, StoredObject)]
    assert len(winners) == 1
    assert all(isinstance(r, AlreadyExists) for r in results if r not in winners)
    assert await store.get("/q/contested") == winners[0]


async def test_random_operations_agree_with_a_dict_model(store: Store) -> None:
    rng = random.Random(5)
    model: dict[str, tuple[int, Revision]] = {}
    keys = [f"/m/{c}" for c in "abcdef"]
    for step in range(300):
        key, op = rng.choice(keys), rng.choice(["create", "update", "cas", "delete", "get"])
        current = model.get(key)
        try:
            if op == "create":
                obj = await store.create(key, {"step": step})
                assert current is None
                model[key] = (step, obj.revision)
            elif op == "update":
                obj = await store.update(key, {"step": step}, expected=None)
                assert current is not None
                model[key] = (step, obj.revision)
            elif op == "cas":
                guess = current[1] if current and rng.random() < 0.7 else Revision(1)
                obj = await store.update(key, {"step": step}, expected=guess)
                assert current is not None and guess == current[1]
                model[key] = (step, obj.revision)
            elif op == "delete":
                obj = await store.delete(key, expected=None)
                assert current is not None and obj.value == {"step": current[0]}
                del model[key]
            else:
                obj = await store.get(key)
                assert current == (obj.value["step"], obj.revision)
        except AlreadyExists:
            assert current is not None
        except NotFound:
            assert current is None
        except Conflict:
            assert current is not None and op == "cas"

    listing = await store.list("/m/")
    assert {o.key: (o.value["step"], o.revision) for o in listing.items} == model


# --- watches ------------------------------------------------------------------------------


async def test_watch_delivers_every_write_under_the_prefix_in_order(store: Store) -> None:
    start = await store.current_revision()
    async with store.watch("/w/", since=start) as events:
        a = await store.create("/w/a", {"v": 1})
        await store.create("/other/a", {"v": 1})
        b = await store.update("/w/a", {"v": 2}, expected=a.revision)
        await store.create("/w/b", {"v": 1})
        await store.delete("/w/a", expected=b.revision)

        got = await take(events, 4)

    assert summary(got) == [
        ("ADDED", "/w/a", {"v": 1}),
        ("MODIFIED", "/w/a", {"v": 2}),
        ("ADDED", "/w/b", {"v": 1}),
        ("DELETED", "/w/a", {"v": 2}),
    ]
    assert [e.revision for e in got] == [start + 1, start + 3, start + 4, start + 5]
    assert got[3].object.create_revision == a.revision


async def test_watch_events_carry_the_stored_text_live_and_replayed(store: Store) -> None:
    # (What a watch's writer splices its events from: hub.store.base.with_resource_version_text.)
    start = await store.current_revision()
    async with store.watch("/w/", since=start) as events:
        a = await store.create("/w/a", {"v": "ü", "spec": {"n": [1, 2]}})
        await store.update("/w/a", {"v": 2}, expected=a.revision)
        await store.delete("/w/a", expected=None)
        live = await take(events, 3)
    async with store.watch("/w/", since=start) as events:
        replayed = await take(events, 3)

    for got in (live, replayed):
        assert [e.type.value for e in got] == ["ADDED", "MODIFIED", "DELETED"]
        for event in got:
            assert event.object.encoded is not None
            assert json.loads(event.object.encoded) == event.object.value


async def test_watch_from_an_old_revision_replays_then_follows_live_writes(
    store: Store,
) -> None:
    start = await store.current_revision()
    for i in range(5):
        await store.create(f"/w/{i}", {"i": i})

    async with store.watch("/w/", since=Revision(start + 2)) as events:
        replayed = await take(events, 3)
        await store.create("/w/live", {"i": 99})
        live = await take(events, 1)

    assert [e.key for e in replayed] == ["/w/2", "/w/3", "/w/4"]
    assert [e.revision for e in replayed] == [start + 3, start + 4, start + 5]
    assert summary(live) == [("ADDED", "/w/live", {"i": 99})]


async def test_list_then_watch_from_its_revision_misses_nothing(store: Store) -> None:
    stop = asyncio.Event()

    async def writer() -> int:
        n = 0
        while not stop.is_set():
            await store.create(f"/w/{n:04d}", {"n": n})
            n += 1
            await asyncio.sleep(0)
        return n

    task = asyncio.create_task(writer())
    await asyncio.sleep(0.05)
    listing = await store.list("/w/")
    seen = {o.key for o in listing.items}
    async with store.watch("/w/", since=listing.revision) as events:
        await asyncio.sleep(0.05)
        stop.set()
        written = await task
        async with asyncio.timeout(5):
            async for event in events:
                assert event.key not in seen
                assert event.revision > listing.revision
                seen.add(event.key)
                if len(seen) == written:
                    break

    assert seen == {f"/w/{n:04d}" for n in range(written)}


async def test_watch_since_the_current_revision_sees_only_later_writes(store: Store) -> None:
    await store.create("/w/old", {})
    now = await store.current_revision()

    async with store.watch("/w/", since=now) as events:
        await store.create("/w/new", {})
        got = await take(events, 1)

    assert [e.key for e in got] == ["/w/new"]


async def test_watching_from_before_a_compaction_raises_compacted(store: Store) -> None:
    start = await store.current_revision()
    for i in range(6):
        await store.create(f"/w/{i}", {"i": i})
    at = Revision(start + 4)

    await store.compact(at)
    await store.compact(at)  # idempotent

    with pytest.raises(Compacted) as caught:
        async with store.watch("/w/", since=Revision(at - 2)) as events:
            await take(events, 1)
    assert caught.value.http_status == 410
    async with store.watch("/w/", since=Revision(at - 1)) as events:
        got = await take(events, 3)
    assert [e.key for e in got] == ["/w/3", "/w/4", "/w/5"]
    assert len((await store.list("/w/")).items) == 6  # objects are untouched


async def test_compacting_beyond_the_current_revision_is_refused(store: Store) -> None:
    now = await store.current_revision()
    with pytest.raises(ValueError, match="cannot compact"):
        await store.compact(Revision(now + 10))


async def test_a_watcher_that_falls_behind_its_buffer_catches_up_from_history(
    make_store: StoreFactory,
) -> None:
    store = await make_store(watch_buffer=10)
    start = await store.current_revision()
    async with following_live_writes(store) as events:
        for round_ in range(3):  # falls behind, catches up, falls behind again
            await asyncio.gather(*(store.create(f"/w/{round_}-{i}", {}) for i in range(40)))
            await asyncio.sleep(0.1)  # let the events arrive while nobody reads
            got = await take(events, 40)
            assert [e.revision for e in got] == list(
                range(start + 2 + 40 * round_, start + 42 + 40 * round_)
            )
        await store.create("/w/live-again", {})
        assert [e.key for e in await take(events, 1)] == ["/w/live-again"]


async def test_a_watcher_behind_its_buffer_misses_no_key_of_a_many_key_write(
    make_store: StoreFactory,
) -> None:
    store = await make_store(watch_buffer=10)
    async with following_live_writes(store) as events:
        writes = [
            store.create_with(f"/w/{i}/obj", {}, put={f"/w/{i}/a": {}, f"/w/{i}/b": {}})
            for i in range(20)
        ]
        await asyncio.gather(*writes)
        await asyncio.sleep(0.1)  # let the events arrive while nobody reads
        got = await take(events, 60)

    assert sorted(e.key for e in got) == sorted(
        f"/w/{i}/{part}" for i in range(20) for part in ("a", "b", "obj")
    )
    assert [e.revision for e in got] == sorted(e.revision for e in got)


async def test_a_watcher_whose_missed_history_was_compacted_gets_compacted(
    make_store: StoreFactory,
) -> None:
    store = await make_store(watch_buffer=10)
    async with following_live_writes(store) as events:
        await asyncio.gather(*(store.create(f"/w/{i}", {}) for i in range(40)))
        await asyncio.sleep(0.1)
        await store.compact(await store.current_revision())

        with pytest.raises(Compacted):
            await take(events, 40)


async def test_watches_end_with_unavailable_when_the_store_closes(store: Store) -> None:
    start = await store.current_revision()
    async with store.watch("/w/", since=start) as events:
        await store.create("/w/a", {})
        await take(events, 1)

        await store.close()

        with pytest.raises(Unavailable):
            await take(events, 1)
    with pytest.raises(Unavailable):
        await store.get("/w/a")


async def test_many_watchers_each_get_the_full_ordered_stream(store: Store) -> None:
    start = await store.current_revision()
    async with (
        store.watch("/w/", since=start) as first,
        store.watch("/w/", since=start) as second,
        store.watch("/w/a", since=start) as narrow,
    ):
        await asyncio.gather(*(store.create(f"/w/{c}{i}", {}) for c in "ab" for i in range(10)))
        a, b, n = await take(first, 20), await take(second, 20), await take(narrow, 10)

    assert [e.revision for e in a] == [e.revision for e in b] == sorted(e.revision for e in a)
    assert [e.revision for e in a] == list(range(start + 1, start + 21))
    assert {e.key for e in n} == {f"/w/a{i}" for i in range(10)}


async def test_values_over_the_size_limit_are_refused_alike(store: Store) -> None:
    small = await store.create("/q/a", {"pad": "x" * 1000})
    big = {"pad": "x" * MAX_VALUE_BYTES}

    with pytest.raises(TooLarge) as caught:
        await store.create("/q/b", big)
    with pytest.raises(TooLarge):
        await store.update("/q/a", big, expected=small.revision)

    assert caught.value.http_status == 413
    assert await store.get("/q/a") == small


async def test_a_list_during_writes_is_one_consistent_snapshot(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hub.store.etcd

    monkeypatch.setattr(hub.store.etcd, "_LIST_PAGE", 7)  # many pages for etcd
    first = await asyncio.gather(*(store.create(f"/l/{i:03d}", {"i": i}) for i in range(60)))

    writes = asyncio.gather(*(store.create(f"/l/{i:03d}", {"i": i}) for i in range(60, 120)))
    listing = await store.list("/l/")
    created = [*first, *await writes]

    listed = {o.key: o.revision for o in listing.items}
    assert listed == {o.key: o.revision for o in created if o.revision <= listing.revision}
    assert [o.key for o in listing.items] == sorted(listed)


async def test_a_watch_since_a_future_revision_starts_after_it(store: Store) -> None:
    now = await store.current_revision()

    async with store.watch("/w/", since=Revision(now + 2)) as events:
        for c in "abcd":
            await store.create(f"/w/{c}", {})
        got = await take(events, 2)

    assert [e.key for e in got] == ["/w/c", "/w/d"]


async def test_watchers_joining_mid_stream_see_gapless_sequences(store: Store) -> None:
    """Each watcher starts at a different point of a running write stream (replay, the switch
    to live events, or already live) and must see every revision after its start, once."""
    start = await store.current_revision()
    total = 300
    rng = random.Random(11)

    async def write_all() -> None:
        for i in range(0, total, 10):
            await asyncio.gather(*(store.create(f"/s/{j:04d}", {}) for j in range(i, i + 10)))
            await asyncio.sleep(0.003)  # spread the stream over the watchers' arrivals

    async def watcher(since: Revision) -> list[Revision]:
        async with store.watch("/s/", since=since) as events:
            return [e.revision for e in await take(events, start + total - since, within=10)]

    writing = asyncio.create_task(write_all())
    watchers = []
    for _ in range(8):
        await asyncio.sleep(0.005)
        now = await store.current_revision()
        since = Revision(rng.randint(start, now))
        watchers.append((since, asyncio.create_task(watcher(since))))
    await writing

    for since, task in watchers:
        assert await task == list(range(since + 1, start + total + 1))
