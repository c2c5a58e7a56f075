"""Every patch type, label and field selectors, pagination, through kubernetes_asyncio."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cluster import Cluster
from kubesim.testing import RunningSimulator
from tests.kubesim.conftest import ROOT_CA, manifest, names_of


def _pod(name: str, **labels: str) -> Any:
    return manifest(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "containers": [
                    {"name": "main", "image": "a", "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "b"},
                ]
            },
        }
    )


async def test_strategic_merge_patch_merges_lists_by_their_merge_key(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod("default", _pod("p"))
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        # Only an image: a pod's other container fields are immutable, as in Kubernetes.
        {"spec": {"containers": [{"name": "side", "image": "b2"}]}},
    )
    containers = {c.name: c for c in patched.spec.containers}
    assert containers["main"].image == "a"
    assert containers["side"].image == "b2"
    assert [e.name for e in containers["main"].env] == ["A"]


async def test_strategic_merge_patch_delete_directive_removes_a_list_item(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "f", "finalizers": ["a/x", "b/y"]}})
    )
    patched = await core.patch_namespaced_config_map(
        "f", "default", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}}
    )
    assert patched.metadata.finalizers == ["b/y"]


async def test_json_merge_patch_replaces_lists_and_null_deletes(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}})
    )
    patched = await core.patch_namespaced_config_map(
        "m",
        "default",
        {"data": {"a": None, "c": "3"}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )
    assert patched.data == {"b": "2", "c": "3"}


async def test_json_patch_applies_rfc_6902_operations(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "j"}, "data": {"a": "1"}})
    )
    patched = await core.patch_namespaced_config_map(
        "j",
        "default",
        [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}],
    )
    assert patched.data == {"b": "2"}


async def test_a_json_patch_with_an_object_body_is_a_400(
    simulator: RunningSimulator, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "o"}}))
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps/o"
    headers = {"Content-Type": "application/json-patch+json"}
    async with (
        aiohttp.ClientSession() as session,
        session.patch(url, data=json.dumps({"data": {}}), headers=headers) as response,
    ):
        assert response.status == 400


async def test_a_patch_carrying_a_stale_resource_version_is_a_conflict(
    core: client.CoreV1Api,
) -> None:
    created = await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "rv"}})
    )
    await core.patch_namespaced_config_map("rv", "default", {"data": {"x": "1"}})
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_config_map(
            "rv",
            "default",
            {
                "metadata": {"resourceVersion": created.metadata.resource_version},
                "data": {"x": "2"},
            },
        )
    assert caught.value.status == 409


async def test_server_side_apply_is_answered_with_415(
    simulator: RunningSimulator, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "ssa"}}))
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps/ssa"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    async with (
        aiohttp.ClientSession() as session,
        session.patch(url, data=b"data: {}", headers=headers) as response,
    ):
        assert response.status == 415


async def test_status_subresource_updates_only_status(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    await core.create_namespaced_pod("default", _pod("s"))
    await core.patch_namespaced_pod_status(
        "s", "default", {"status": {"message": "hi"}, "metadata": {"labels": {"ignored": "yes"}}}
    )
    stored = cluster.get("pods", "default", "s")
    assert stored is not None
    assert stored["status"]["message"] == "hi"
    assert "ignored" not in (stored["metadata"].get("labels") or {})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier!=db", ["a"]),
        ("tier in (db,cache)", ["b", "c"]),
        ("tier notin (db)", ["a", "c"]),
        ("tier", ["a", "b", "c"]),
        ("!app", ["c"]),
    ],
)
async def test_label_selectors_follow_the_kubernetes_grammar(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    for name, labels in {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "db"},
        "c": {"tier": "cache"},
    }.items():
        await core.create_namespaced_config_map(
            "default", manifest({"metadata": {"name": name, "labels": labels}})
        )
    listed = await core.list_namespaced_config_map("default", label_selector=selector)
    assert names_of(listed.items) == expected


async def test_an_invalid_label_selector_is_a_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_config_map("default", label_selector="a in b")
    assert caught.value.status == 400


async def test_field_selectors_work_on_whitelisted_fields(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    await core.create_namespaced_pod("default", _pod("f1"))
    bound = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=")
    pending = await core.list_namespaced_pod("default", field_selector="metadata.name=f1")
    assert [p.metadata.name for p in pending.items] == ["f1"]
    assert all(p.spec.node_name for p in bound.items)


async def test_a_field_selector_outside_the_whitelist_is_a_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_pod("default", field_selector="spec.image=x")
    assert caught.value.status == 400
    assert "field label not supported: spec.image" in str(caught.value.body)


async def test_pagination_walks_all_items_with_continue_tokens(core: client.CoreV1Api) -> None:
    for i in range(7):
        await core.create_namespaced_config_map(
            "default", manifest({"metadata": {"name": f"cm-{i}"}})
        )
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = await core.list_namespaced_config_map("default", limit=3, _continue=token or "")
        names += [cm.metadata.name for cm in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 8 - len(names)
    # kube-root-ca.crt, which every namespace holds, sorts after the seven.
    assert names == [*(f"cm-{i}" for i in range(7)), ROOT_CA]
    assert pages == 3


async def test_a_continue_token_older_than_compaction_is_410_expired(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    for i in range(3):
        await core.create_namespaced_config_map(
            "default", manifest({"metadata": {"name": f"p-{i}"}})
        )
    page = await core.list_namespaced_config_map("default", limit=1)
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "later"}}))
    cluster.store.compact()
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_config_map("default", limit=1, _continue=page.metadata._continue)
    assert caught.value.status == 410
    assert "The provided continue parameter is too old" in str(caught.value.body)


async def test_pagination_across_namespaces_follows_the_served_order(
    core: client.CoreV1Api,
) -> None:
    # "a-b/..." sorts before "a/..." as text but after it as (namespace, name): no skips.
    for namespace in ("a", "a-b"):
        await core.create_namespace(manifest({"metadata": {"name": namespace}}))
        for name in ("x", "y"):
            await core.create_namespaced_config_map(
                namespace, manifest({"metadata": {"name": name}})
            )
    seen: list[tuple[str, str]] = []
    token = ""
    while True:
        page = await core.list_config_map_for_all_namespaces(limit=1, _continue=token)
        seen += [(cm.metadata.namespace, cm.metadata.name) for cm in page.items]
        seen = [(namespace, name) for namespace, name in seen if name != ROOT_CA]
        token = page.metadata._continue or ""
        if not token:
            break
    assert seen == [("a", "x"), ("a", "y"), ("a-b", "x"), ("a-b", "y")]
