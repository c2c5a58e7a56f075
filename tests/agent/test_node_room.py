"""The node summary's used room, kept as pods change (agent.inventory.PodRoom fed by the pods
mirror), against a count over every mirrored pod, under random pod and node events."""

from __future__ import annotations

import random
from typing import Any

import pytest

from agent.inventory import Inventory, PodRoom
from agent.k8s.client import JsonObject, WatchEvent
from agent.k8s.watching import Relisted
from api.k8s.pod import room_requests
from api.quantity import Quantity

NODES = ("n0", "n1", "n2", "n3")
PODS = tuple(f"p{i}" for i in range(16))
REQUESTS = (
    {"cpu": "100m", "memory": "512Mi"},
    {"cpu": "1"},
    {"cpu": "2500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
)


def node(name: str, *, ready: bool = True, unschedulable: bool = False) -> JsonObject:
    return {
        "metadata": {"name": name, "resourceVersion": str(random.random())},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": {"cpu": "100", "memory": "512Gi", "nvidia.com/gpu": "16", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, uid: int, *, node_name: str | None, phase: str) -> JsonObject:
    """Requests follow the uid (a pod's requests never change; a pod made again may differ)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": REQUESTS[uid % 3]}}]
    }
    if uid % 2:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-{uid}"},
        "spec": spec,
        "status": {"phase": phase},
    }


def counted_per_node(inventory: Inventory) -> dict[str, dict[str, int]]:
    """Every mirrored pod's requests on its node, unless it is finished: counted afresh."""
    out: dict[str, dict[str, int]] = {}
    for p in inventory.pods.objects.values():
        name = p["spec"].get("nodeName")
        if name is None or p["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        total = out.setdefault(name, {})
        for k, v in room_requests(p["spec"]).items():
            total[k] = total.get(k, 0) + v
    return out


def counted_free(inventory: Inventory) -> dict[str, Quantity]:
    usable = [
        n["metadata"]["name"]
        for n in inventory.nodes.objects.values()
        if n["status"]["conditions"][0]["status"] == "True" and not n["spec"]["unschedulable"]
    ]
    per_node = counted_per_node(inventory)
    free: dict[str, Quantity] = {}
    for name in usable:
        for k, raw in inventory.nodes.objects[name]["status"]["allocatable"].items():
            left = Quantity.parse(raw).milli() - per_node.get(name, {}).get(k, 0)
            free[k] = Quantity.from_milli(free.get(k, Quantity(0)).milli() + left)
    return free


def random_pod(rng: random.Random, uids: dict[str, int]) -> JsonObject:
    name = rng.choice(PODS)
    if rng.random() < 0.1:
        uids[name] = uids.get(name, 0) + 1  # deleted and made again meanwhile
    return pod(
        name,
        uids.get(name, 0),
        node_name=rng.choice((*NODES, None)),
        phase=rng.choice(("Pending", "Running", "Running", "Succeeded", "Failed")),
    )


@pytest.mark.parametrize("seed", range(8))
def test_the_room_pods_hold_kept_as_they_change_equals_a_count_over_every_pod(seed: int) -> None:
    rng = random.Random(seed)
    random.seed(seed)
    inventory = Inventory(None)  # type: ignore[arg-type]  # the mirrors are fed by hand
    inventory.nodes.apply(Relisted([node(n) for n in NODES], "1"))
    inventory.pods.apply(Relisted([], "1"))
    uids: dict[str, int] = {}
    for _ in range(600):
        roll = rng.random()
        if roll < 0.6:
            inventory.pods.apply(
                WatchEvent(rng.choice(("ADDED", "MODIFIED")), random_pod(rng, uids))
            )
        elif roll < 0.85 and inventory.pods.objects:
            gone = rng.choice(sorted(inventory.pods.objects))
            inventory.pods.apply(WatchEvent("DELETED", inventory.pods.objects[gone]))
        elif roll < 0.95:
            name = rng.choice(NODES)
            changed = node(name, ready=rng.random() < 0.7, unschedulable=rng.random() < 0.2)
            inventory.nodes.apply(WatchEvent("MODIFIED", changed))
        else:  # the watch broke: a relist, some pods gone, others changed meanwhile
            kept = [p for p in inventory.pods.objects.values() if rng.random() < 0.7]
            inventory.pods.apply(Relisted(kept + [random_pod(rng, uids) for _ in range(3)], "2"))
        assert inventory.pod_room.by_node == counted_per_node(inventory)
        assert inventory.node_summary().free == counted_free(inventory)


def test_a_pods_sidecars_hold_room_beside_its_containers_as_the_scheduler_counts_them() -> None:
    # A sidecar (an init container that restarts Always) runs beside what starts after it:
    # the plain init container after it needs 2 + 0.5 CPUs, more than the containers' 1 + 0.5
    # (taking the init containers' largest request alone would say 2).
    def container(name: str, cpu: str, **extra: str) -> dict[str, object]:
        return {"name": name, "image": "i", "resources": {"requests": {"cpu": cpu}}, **extra}

    pod = {
        "metadata": {"uid": "u1"},
        "spec": {
            "nodeName": "n1",
            "containers": [container("main", "1")],
            "initContainers": [
                container("proxy", "500m", restartPolicy="Always"),
                container("setup", "2"),
            ],
        },
        "status": {"phase": "Running"},
    }
    room = PodRoom()
    room.pod_changed("default/p", pod)
    assert room.used(["n1"]) == {"cpu": 2500, "pods": 1000}
