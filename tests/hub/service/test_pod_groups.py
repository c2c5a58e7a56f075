"""Pods at the hub: a plain Pod is one workload; a pod group, as a v1 List of its Pods (what
`qctl submit` sends for a group's Pod documents) or pod by pod, is one workload with the List
of its pods kept as the source the agent makes them from — waiting at the hub, with its
reason, until the last of its pods is in; a List that is not of Pods of this namespace, a pod
the group has already or one too many is a 4xx that changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

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


async def test_a_group_submitted_pod_by_pod_waits_at_the_hub_until_its_last_pod(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, wl = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-0"))
    assert status == 201, wl
    assert wl["metadata"]["annotations"]["multiq.dev/pod-group-waiting"] == "1/3"
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert (reserved["status"], reserved["reason"]) == ("False", "WaitingForPodGroup")
    assert reserved["message"].startswith("1 of the group's 3 pods submitted")
    assert "vision/pod-group-ring" in hub.hub.state.workloads
    assert "vision/pod-group-ring" not in hub.hub.state.pending

    status, wl = await hub.call("POST", SUBMIT, token=ALICE, body=group(pod("ring-1")))
    assert status == 201, wl
    assert wl["metadata"]["annotations"]["multiq.dev/pod-group-waiting"] == "2/3"
    status, body = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-1"))
    assert status == 409, body
    assert 'pods "ring-1" already exists' in body["message"]

    status, wl = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-2"))
    assert status == 201, wl
    assert "multiq.dev/pod-group-waiting" not in wl["metadata"]["annotations"]
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 3)]
    [reserved] = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert reserved["reason"] == "Pending"
    source = await hub.hub.store.get("/workloadsources/vision/pod-group-ring")
    assert [p["metadata"]["name"] for p in source.value["items"]] == ["ring-0", "ring-1", "ring-2"]
    stored = await hub.hub.store.get("/workloads/vision/pod-group-ring")
    assert "multiq.dev/pod-group-waiting" not in stored.value["metadata"]["annotations"]
    for _ in range(100):  # the mirror learns of the write from the store's watch
        if "vision/pod-group-ring" in hub.hub.state.pending:
            break
        await asyncio.sleep(0.05)
    assert "vision/pod-group-ring" in hub.hub.state.pending

    status, body = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-3"))
    assert status == 409, body  # the group is whole: it is an ordinary workload now


async def test_a_groups_pods_submitted_all_at_once_are_all_taken(hub: HubUnderTest) -> None:
    # As `xargs -P` would send them: the first pods race to create the group, the rest to join.
    await hub.apply(*fleet_objects())
    total = 6
    answers = await asyncio.gather(
        *(
            hub.call("POST", SUBMIT, token=ALICE, body=pod(f"ring-{i}", total=total))
            for i in range(total)
        )
    )
    assert [status for status, _ in answers] == [201] * total, answers
    source = await hub.hub.store.get("/workloadsources/vision/pod-group-ring")
    names = sorted(p["metadata"]["name"] for p in source.value["items"])
    assert names == [f"ring-{i}" for i in range(total)]
    stored = await hub.hub.store.get("/workloads/vision/pod-group-ring")
    assert "multiq.dev/pod-group-waiting" not in stored.value["metadata"]["annotations"]
    assert [ps["count"] for ps in stored.value["spec"]["podSets"]] == [total]


async def test_a_pod_too_many_for_a_waiting_group_is_a_422_that_changes_nothing(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, _ = await hub.call("POST", SUBMIT, token=ALICE, body=pod("ring-0", total=2))
    assert status == 201
    status, body = await hub.call(
        "POST", SUBMIT, token=ALICE, body=group(pod("ring-1", total=2), pod("ring-2", total=2))
    )
    assert status == 422, body
    assert "more pods than its total count 2" in body["message"]
    source = await hub.hub.store.get("/workloadsources/vision/pod-group-ring")
    assert [p["metadata"]["name"] for p in source.value["items"]] == ["ring-0"]


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
