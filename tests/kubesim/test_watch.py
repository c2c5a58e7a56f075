"""Watch semantics through kubernetes_asyncio and raw HTTP: framing, replay, bookmarks, 410."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from kubesim.cluster import Cluster
from kubesim.testing import RunningSimulator
from tests.kubesim.conftest import eventually, manifest, names_of


def _cm(name: str, **labels: str) -> Any:
    return manifest({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})


async def test_a_watch_from_a_list_resource_version_sees_only_later_changes(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map("default", _cm("before"))
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("default", _cm("after"))
    await core.delete_namespaced_config_map("before", "default")
    seen = []
    async with Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        ):
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "after"), ("DELETED", "before")]


async def test_a_watch_without_resource_version_starts_with_synthetic_added_events(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map("default", _cm("one"))
    seen = []
    async with Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_config_map, "default", timeout_seconds=1
        ):
            seen.append((event["type"], event["object"].metadata.name))
    assert ("ADDED", "one") in seen


async def test_label_selector_transitions_become_added_and_deleted(
    core: client.CoreV1Api, simulator: RunningSimulator
) -> None:
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("default", _cm("moving", tier="a"))
    await core.patch_namespaced_config_map(
        "moving", "default", {"metadata": {"labels": {"tier": "b"}}}
    )
    await core.patch_namespaced_config_map(
        "moving", "default", {"metadata": {"labels": {"tier": "a"}}}
    )
    seen = []
    async with Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            label_selector="tier=a",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        ):
            seen.append(event["type"])
    assert seen == ["ADDED", "DELETED", "ADDED"]


async def test_bookmarks_arrive_and_advance_the_resource_version(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("kube-system", _cm("elsewhere"))
    types = []
    watch = Watch()
    async for event in watch.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    ):
        types.append(event["type"])
    await watch.close()
    assert "BOOKMARK" in types
    last_seen: Any = watch.resource_version  # typed None by the client, set from bookmarks
    assert int(last_seen) > int(listed.metadata.resource_version)


async def test_a_watch_from_a_compacted_resource_version_gets_410_and_a_relist_recovers(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    listed = await core.list_namespaced_config_map("default")
    old_rv = listed.metadata.resource_version
    await core.create_namespaced_config_map("default", _cm("new"))
    cluster.store.compact()
    with pytest.raises(ApiException) as caught:
        async with Watch() as watch:
            async for _ in watch.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=old_rv,
                timeout_seconds=2,
            ):
                pass
    assert caught.value.status == 410
    relisted = await core.list_namespaced_config_map("default")
    assert names_of(relisted.items) == ["new"]
    seen = []
    async with Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=relisted.metadata.resource_version,
            timeout_seconds=1,
        ):
            seen.append(event)
    assert seen == []


async def test_the_expired_error_event_is_a_status_with_reason_expired(
    simulator: RunningSimulator, cluster: Cluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("default", _cm("x"))
    cluster.store.compact()
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    params = {"watch": "1", "resourceVersion": "1"}
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        assert response.status == 200
        body = await response.read()
    frames = [json.loads(line) for line in body.splitlines()]
    assert len(frames) == 1
    assert frames[0]["type"] == "ERROR"
    status = frames[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: 1 (")


async def test_watch_frames_are_newline_terminated_json_and_go_booleans_are_honoured(
    simulator: RunningSimulator, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("default", _cm("framed"))
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    params = {"watch": "True", "allowWatchBookmarks": "", "timeoutSeconds": "1"}
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        assert response.headers["Content-Type"].startswith("application/json")
        body = await response.read()
    assert body.endswith(b"\n")
    frames = [json.loads(line) for line in body.splitlines()]
    assert frames[0]["type"] == "ADDED"
    assert frames[-1]["type"] == "BOOKMARK"
    assert set(frames[-1]["object"]["metadata"]) == {"resourceVersion"}


async def test_send_initial_events_ends_with_the_initial_events_end_bookmark(
    simulator: RunningSimulator, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("default", _cm("initial"))
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "1",
    }
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        body = await response.read()
    frames = [json.loads(line) for line in body.splitlines()]
    # Two ADDED: the ConfigMap, and the kube-root-ca.crt every namespace holds.
    assert [frame["type"] for frame in frames[:3]] == ["ADDED", "ADDED", "BOOKMARK"]
    annotations = frames[2]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


async def test_dropping_all_watches_ends_open_streams(
    simulator: RunningSimulator, cluster: Cluster
) -> None:
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    admin = simulator.urls["sim-0"] + "/_kubesim/faults/drop-watches"
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, params={"watch": "1"}) as response,
    ):
        assert response.status == 200
        async with session.post(admin) as dropped:
            assert (await dropped.json())["dropped"] == 1
        await response.read()  # returns: the server ended the stream
    assert len(cluster.api.watches) == 0


async def test_a_watch_without_timeout_still_ends_after_the_server_maximum() -> None:
    from kubesim.cluster import ClusterConfig
    from kubesim.testing import running

    async with running(template=ClusterConfig(watch_max_seconds=0.3)) as sim:
        url = sim.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as session:
            started = asyncio.get_running_loop().time()
            async with session.get(url, params={"watch": "1"}) as response:
                await response.read()
            elapsed = asyncio.get_running_loop().time() - started
    assert 0.3 <= elapsed < 5


async def test_relisting_watchers_converge_despite_compaction_and_dropped_watches(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    """The kopf/agent pattern: list, watch from its RV, relist on 410; must end in sync."""
    views: list[set[str]] = [set(), set(), set()]

    async def follow(view: set[str]) -> None:
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    listed = await core.list_namespaced_config_map("default")
                    view.clear()
                    view.update(cm.metadata.name for cm in listed.items)
                    resource_version = listed.metadata.resource_version
                async with Watch() as watch:
                    async for event in watch.stream(
                        core.list_namespaced_config_map,
                        "default",
                        resource_version=resource_version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=1,
                    ):
                        if event["type"] == "BOOKMARK":  # kubernetes_asyncio leaves a dict
                            resource_version = event["object"]["metadata"]["resourceVersion"]
                            continue
                        resource_version = event["object"].metadata.resource_version
                        name = event["object"].metadata.name
                        if event["type"] == "DELETED":
                            view.discard(name)
                        else:
                            view.add(name)
            except ApiException as error:
                assert error.status == 410
                resource_version = None

    watchers = [asyncio.create_task(follow(view)) for view in views]
    for step in range(150):
        name = f"cm-{step * 7 % 23}"
        try:
            if step % 3:
                await core.create_namespaced_config_map("default", _cm(name))
            else:
                await core.delete_namespaced_config_map(name, "default")
        except ApiException:
            pass
        if step == 50:
            cluster.compact()
        if step == 100:
            cluster.drop_watches()
    truth = {
        o["metadata"]["name"]
        for o in cluster.store.list(cluster.types.core("configmaps"), "default")
    }
    try:
        await eventually(lambda: all(view == truth for view in views), within=10)
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
