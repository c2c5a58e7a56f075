"""Fleet usage per global queue: kept up to date as workloads change, counted afresh when the
configuration changes, and always what summing over every placed workload gives."""

from __future__ import annotations

import random
from typing import Any

from api.v1alpha1.federation import GlobalQueue
from hub.auth import TokenAuthority
from hub.dispatch import Dispatcher
from hub.fleet import Fleet
from hub.objects import ObjectRepository
from hub.placement.routing import Route, workload_requests
from hub.state import HubState, clusters_of
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_hub_state import FINISHED, _workload, eventually
from tests.hub.mirror.test_lost_clusters import CountingWorkloads

API = "multiq.dev/v1alpha1"


def _usage_summed_over_every_workload(d: Dispatcher) -> dict[str, dict[str, int]]:
    """What the fleet usage is by definition: every placed, unfinished workload's requests,
    under its global queue."""
    usage: dict[str, dict[str, int]] = {}
    for entry in d.state.workloads.values():
        if not clusters_of(entry.workload):
            continue
        route = d.routing().route_of(entry.workload)
        if isinstance(route, Route) and route.global_queue is not None:
            bucket = usage.setdefault(route.global_queue.name, {})
            for resource, amount in workload_requests(entry.workload).items():
                bucket[resource] = bucket.get(resource, 0) + amount
    return usage


def _nonzero(usage: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out = {gq: {r: a for r, a in res.items() if a} for gq, res in usage.items()}
    return {gq: res for gq, res in out.items() if res}


def _config(fleet_cpu: str, *, queues: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": API,
            "kind": "ClusterSet",
            "metadata": {"name": "all"},
            "spec": {"clusters": ["east", "west"]},
        },
        *[
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": q, "namespace": "team"},
                "spec": {"clusterQueue": f"cq-{q}"},
            }
            for q in queues
        ],
        {
            "apiVersion": API,
            "kind": "GlobalQueue",
            "metadata": {"name": "capped"},
            "spec": {
                "clusterSet": "all",
                "clusterQueues": ["cq-q"],
                "fleetQuota": {"cpu": fleet_cpu},
            },
        },
    ]


async def _dispatcher(store: SqliteStore, state: HubState, queues: list[str]) -> Dispatcher:
    repo = ObjectRepository(store)
    for doc in _config("100", queues=queues):
        await repo.create(repo.validate(doc))
    await eventually(lambda: state.find(GlobalQueue, "capped") is not None)
    return Dispatcher(state, Fleet(repo, TokenAuthority(), secrets_dir=None))


def _workload_of(name: str, *, queue: str, cpu: str, status: dict[str, Any]) -> dict[str, Any]:
    wl = _workload(name, status=status)
    wl["spec"]["queueName"] = queue
    container = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu}}
    return wl


def _status(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [
            {},
            {"clusterName": "east"},
            {"clusterName": "west"},
            {"nominatedClusterNames": ["east", "west"]},
            {**FINISHED, "clusterName": "west"},
        ]
    )


async def test_fleet_usage_kept_as_workloads_change_equals_the_sum_over_every_workload(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    d = await _dispatcher(store, state, ["q", "other"])
    rng = random.Random(5)
    for step in range(120):
        name = f"w{rng.randrange(12)}"
        key = f"team/{name}"
        entry = state.workloads.get(key)
        if entry is None:
            wl = _workload_of(
                name,
                queue=rng.choice(["q", "other"]),
                cpu=rng.choice(["1", "2", "500m"]),
                status=_status(rng),
            )
            await store.create(f"/workloads/{key}", wl)
            await eventually(lambda k=key: k in state.workloads)  # type: ignore[misc]
        elif rng.random() < 0.2:
            await store.delete(f"/workloads/{key}", expected=entry.revision)
            await eventually(lambda k=key: k not in state.workloads)  # type: ignore[misc]
        else:
            wire = dict(entry.raw)
            wire["status"] = _status(rng)
            await store.update(f"/workloads/{key}", wire, expected=entry.revision)
            await eventually(
                lambda k=key, r=entry.revision: state.workloads[k].revision > r  # type: ignore[misc]
            )
        if step % 3 == 0:
            assert _nonzero(d.fleet_usage()) == _usage_summed_over_every_workload(d), step
        if step == 60:
            # The global queue now governs the other cluster queue: every route changed.
            gq = state.find(GlobalQueue, "capped")
            assert isinstance(gq, GlobalQueue)
            changed = gq.model_copy(deep=True)
            changed.spec.cluster_queues = ["cq-other"]
            await ObjectRepository(store).replace(changed)
            await eventually(
                lambda: state.find(GlobalQueue, "capped").spec.cluster_queues == ["cq-other"]  # type: ignore[union-attr]
            )
    assert _nonzero(d.fleet_usage()) == _usage_summed_over_every_workload(d)


async def test_a_cycle_counts_only_the_workloads_that_changed_since_the_last(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    d = await _dispatcher(store, state, ["q"])
    for i in range(20):
        wl = _workload_of(f"w{i}", queue="q", cpu="1", status={"clusterName": "east"})
        await store.create(f"/workloads/team/w{i}", wl)
    await eventually(lambda: len(state.workloads) == 20)
    assert d.fleet_usage() == {"capped": {"cpu": 20_000}}
    state.workloads = counting = CountingWorkloads(state.workloads)

    d.fleet_usage()
    assert counting.looked_at == 0

    entry = state.workloads["team/w3"]
    wire = dict(entry.raw)
    wire["status"] = FINISHED
    await store.update("/workloads/team/w3", wire, expected=entry.revision)
    await eventually(lambda: "team/w3" not in state.by_cluster.get("east", set()))
    counting.looked_at = 0  # (the mirror's own lookups as it took the change in)
    assert d.fleet_usage() == {"capped": {"cpu": 19_000}}
    assert counting.looked_at == 1
