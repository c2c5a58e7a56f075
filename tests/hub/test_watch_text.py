"""A watch's events are written from the text the store holds, with the resourceVersion put
in, not from the object encoded again (hub.store.base.with_resource_version_text): the same
objects, live and replayed, whatever the event."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from api.v1alpha1.federation import MemberCluster
from hub.objects import ObjectRepository
from hub.store.base import Revision
from hub.store.sqlite import SqliteStore


def member(name: str) -> MemberCluster:
    return MemberCluster.model_validate(
        {"metadata": {"name": name}, "spec": {"tokenRef": {"secretName": "t"}}}
    )


async def _events(
    repo: ObjectRepository, since: Revision, count: int
) -> list[tuple[str, dict[str, Any], str | None]]:
    got: list[tuple[str, dict[str, Any], str | None]] = []
    async with asyncio.timeout(5):
        async for event in repo.watch_wire(MemberCluster, None, since=since):
            got.append(event)
            if len(got) == count:
                break
    return got


async def test_every_event_comes_with_its_text_and_the_text_is_the_object(
    sqlite_store: SqliteStore,
) -> None:
    repo = ObjectRepository(sqlite_store)
    live = asyncio.ensure_future(_events(repo, Revision(0), 3))
    await asyncio.sleep(0.05)  # the watch is open: these come live

    await repo.create(member("east"))

    def labelled(value: dict[str, Any]) -> dict[str, Any]:
        value["status"] = {"agentVersion": "0.1.0"}
        return value

    await repo.modify(MemberCluster, "east", None, labelled)
    await sqlite_store.delete("/memberclusters/east", expected=None)

    replayed = await _events(repo, Revision(0), 3)  # from the store's history
    for events in (await live, replayed):
        assert [kind for kind, _, _ in events] == ["ADDED", "MODIFIED", "DELETED"]
        for _, obj, text in events:
            assert text is not None
            assert json.loads(text) == obj
        assert [obj["metadata"]["resourceVersion"] for _, obj, _ in events] == ["1", "2", "3"]
