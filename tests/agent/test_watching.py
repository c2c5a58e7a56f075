"""The watch stream's contract on a scripted cluster: list first, resume from the last
resourceVersion when a watch request ends, relist on 410 and on any other failure, and never
give up — with the Mirror keeping what the stream says."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from agent.errors import K8sConnectionError, K8sGoneError, K8sServerError
from agent.k8s.client import JsonObject, ObjectList, Resource, WatchEvent
from agent.k8s.watching import Mirror, Relisted, watch_objects


def obj(name: str, rv: int, **labels: str) -> JsonObject:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv), "labels": labels}
    }


class ScriptedKube:
    """Lists and watches answer from scripts; every call is recorded."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[str] = []

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        self.calls.append("list")
        step = self.lists.pop(0)
        if isinstance(step, Exception):
            raise step
        return ObjectList(step[0], step[1])

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        self.calls.append(f"watch@{resource_version}")
        for step in self.watches.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step


async def collect(kube: ScriptedKube, iterations: int) -> list[Relisted | WatchEvent]:
    return [
        item
        async for item in watch_objects(
            kube,  # type: ignore[arg-type]
            Resource.PODS,
            retry_delay=0,
            iterations=iterations,
        )
    ]


async def test_a_watch_resumes_from_the_last_resource_version_and_relists_on_410() -> None:
    kube = ScriptedKube(
        lists=[([obj("a", 5)], "5"), ([obj("b", 20)], "20")],
        watches=[
            [WatchEvent("ADDED", obj("b", 6)), WatchEvent("BOOKMARK", obj("", 9))],
            [WatchEvent("DELETED", obj("a", 10)), K8sGoneError("too old", status=410)],
            [],
        ],
    )

    async def bounded() -> list[Relisted | WatchEvent]:
        out: list[Relisted | WatchEvent] = []
        stream = watch_objects(kube, Resource.PODS, retry_delay=0, iterations=2)  # type: ignore[arg-type]
        async with aclosing(stream):
            async for item in stream:
                out.append(item)
                if len(out) == 4:
                    break
        return out

    items = await bounded()
    assert isinstance(items[0], Relisted) and items[0].resource_version == "5"
    events = [i for i in items[1:3] if isinstance(i, WatchEvent)]
    assert [(i.type, i.object["metadata"]["name"]) for i in events] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]  # bookmarks move the version on but are not passed on
    assert isinstance(items[3], Relisted) and items[3].resource_version == "20"
    assert kube.calls == ["list", "watch@5", "watch@9", "list"]


async def test_failing_lists_and_watches_are_retried_without_end() -> None:
    kube = ScriptedKube(
        lists=[
            K8sConnectionError("refused"),
            K8sServerError("500", status=500),
            ([], "1"),
            ([], "2"),
        ],
        watches=[[K8sConnectionError("reset")], [K8sGoneError("gone", status=410)]],
    )
    items = await collect(kube, iterations=4)
    assert [type(i).__name__ for i in items] == ["Relisted", "Relisted"]
    assert kube.calls == ["list", "list", "list", "watch@1", "list", "watch@2"]


async def test_a_mirror_indexes_objects_by_owner_labels_and_forgets_them_on_relist() -> None:
    mirror = Mirror(None, Resource.PODS, index=("team", "app"))  # type: ignore[arg-type]
    changes: list[Resource] = []
    mirror._on_change = changes.append
    mirror._put("ns/a", obj("a", 1, team="t", app="x"))
    mirror._put("ns/b", obj("b", 2, team="t", app="x"))
    mirror._put("ns/c", obj("c", 3, team="t"))
    assert sorted(o["metadata"]["name"] for o in mirror.owned_by("t", "x")) == ["a", "b"]
    mirror._drop("ns/a")
    assert [o["metadata"]["name"] for o in mirror.owned_by("t", "x")] == ["b"]
    mirror._drop("ns/b")
    assert mirror.owned_by("t", "x") == [] and ("t", "x") not in mirror.by_owner
