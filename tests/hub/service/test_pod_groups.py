"""Pods at the hub: a plain Pod is one workload; a pod group arrives whole, as a v1 List of its
Pods (what `qctl submit` sends for a group's Pod documents), becomes one workload with its
List kept as the source the agent makes the pods from; a List that is not a group of Pods of
this namespace, or a group without all its pods, is a 4xx that stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from hub.store.base import NotFound
from tests.hub.service.conftest import ALICE, HubUnderTest, fleet_objects

API = "/apis/multiq.dev/v1alpha1"
SUBMIT = f"{API}/namespaces/vision/submissions"


def pod(name: str, *, group: str | None = "ring", total: int = 3) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "vision"}
    annotations = {}
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def group(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(pods)}


async def test_a_pod_group_submitted_as_a_list_is_one_workload_with_the_list_as_source(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, wl = await hub.call(
        "POST", SUBMIT, token=ALICE, body=group(*(pod(f"ring-{i}") for i in range(3)))
    )
    assert status == 201, wl
    assert wl["metadata"]["name"] == "pod-group-ring"
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 3)]
    source = await hub.hub.store.get("/workloadsources/vision/pod-group-ring")
    assert source.value["kind"] == "List"
    items = source.value["items"]
    assert [p["metadata"]["name"] for p in items] == ["ring-0", "ring-1", "ring-2"]
    assert {p["metadata"]["namespace"] for p in items} == {"vision"}


async def test_a_plain_pod_is_a_workload_of_one_pod(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, wl = await hub.call("POST", SUBMIT, token=ALICE, body=pod("solo", group=None))
    assert status == 201, wl
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [1]
    source = await hub.hub.store.get(f"/workloadsources/vision/{wl['metadata']['name']}")
    assert source.value["kind"] == "Pod"


async def test_a_group_without_all_its_pods_is_a_422_that_stores_nothing(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-0"))
    assert status == 422, body
    assert "submit every pod of the group together" in body["message"]
    status, body = await hub.call(
        "POST", SUBMIT, token=ALICE, body=group(pod("ring-0"), pod("ring-1"))
    )
    assert status == 422, body
    assert "only 2 of its pods were given" in body["message"]
    with pytest.raises(NotFound):
        await hub.hub.store.get("/workloads/vision/pod-group-ring")


async def test_a_list_of_anything_but_pods_of_this_namespace_is_refused(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    job_in_list = group(pod("ring-0"), {"apiVersion": "batch/v1", "kind": "Job"})
    status, body = await hub.call("POST", SUBMIT, token=ALICE, body=job_in_list)
    assert status == 422, body
    assert "items[1]" in body["message"]
    elsewhere = pod("ring-1")
    elsewhere["metadata"]["namespace"] = "other"
    status, body = await hub.call(
        "POST", SUBMIT, token=ALICE, body=group(pod("ring-0"), elsewhere, pod("ring-2"))
    )
    assert status == 400, body
    status, body = await hub.call("POST", SUBMIT, token=ALICE, body=group())
    assert status == 422, body
