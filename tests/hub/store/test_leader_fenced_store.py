"""A hub's store lets writes through only while the hub leads, through the term's writer;
reads and watches never depend on leading."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub.store.base import NotLeader
from hub.store.fencing import LeaderFencedStore
from hub.store.sqlite import SqliteStore


async def test_writes_fail_with_not_leader_until_a_term_begins_and_after_it_ends(
    tmp_path: Path,
) -> None:
    backend = await SqliteStore.open(tmp_path / "hub.db")
    store = LeaderFencedStore(backend)
    try:
        with pytest.raises(NotLeader):
            await store.create("/w/a", {})
        with pytest.raises(NotLeader):
            await store.create_with("/w/a", {}, put={"/s/a": {}})

        store.lead(backend)
        created = await store.create("/w/a", {"n": 1})
        updated = await store.update("/w/a", {"n": 2}, expected=created.revision)
        store.step_down()

        with pytest.raises(NotLeader):
            await store.update("/w/a", {"n": 3}, expected=updated.revision)
        with pytest.raises(NotLeader):
            await store.delete("/w/a", expected=None)
        assert (await backend.get("/w/a")).value == {"n": 2}
        assert (await backend.list("/s/")).items == ()
    finally:
        await store.close()


async def test_reads_and_watches_work_whether_or_not_the_hub_leads(tmp_path: Path) -> None:
    backend = await SqliteStore.open(tmp_path / "hub.db")
    store = LeaderFencedStore(backend)
    try:
        start = await store.current_revision()
        await backend.create("/w/a", {"by": "the leader elsewhere"})
        assert [o.key for o in (await store.list("/w/")).items] == ["/w/a"]
        assert (await store.get("/w/a")).value == {"by": "the leader elsewhere"}
        async with store.watch("/w/", since=start) as events, asyncio.timeout(5):
            assert (await anext(events)).key == "/w/a"
    finally:
        await store.close()
