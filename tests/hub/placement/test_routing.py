"""Which GlobalQueue governs a workload: the most specific one open to its cluster queue and
tenant, whatever the names of the others (hub.placement.routing)."""

from __future__ import annotations

import pytest

from api.v1alpha1.federation import ClusterSet, GlobalQueue, Tenant
from api.v1alpha1.queues import LocalQueue
from api.v1alpha1.workload import Workload
from hub.placement.routing import Route, Routing


def _global(name: str, cluster_set: str = "everywhere", **spec: object) -> GlobalQueue:
    return GlobalQueue.model_validate(
        {"metadata": {"name": name}, "spec": {"clusterSet": cluster_set, **spec}}
    )


def _routing(*queues: GlobalQueue) -> Routing:
    return Routing.of(
        local_queues=[
            LocalQueue.model_validate(
                {
                    "metadata": {"name": "team-a", "namespace": "vision"},
                    "spec": {"clusterQueue": "team-a"},
                }
            )
        ],
        global_queues=queues,
        tenants=[
            Tenant.model_validate(
                {"metadata": {"name": "vision"}, "spec": {"namespaces": ["vision"]}}
            )
        ],
        cluster_sets=[
            ClusterSet.model_validate(
                {"metadata": {"name": "everywhere"}, "spec": {"clusters": ["east", "west"]}}
            ),
            ClusterSet.model_validate(
                {"metadata": {"name": "only-east"}, "spec": {"clusters": ["east"]}}
            ),
        ],
        members=[],
    )


def _route(routing: Routing) -> Route:
    wl = Workload.model_validate(
        {
            "metadata": {"name": "w", "namespace": "vision"},
            "spec": {
                "queueName": "team-a",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}],
            },
        }
    )
    route = routing.route_of(wl)
    assert isinstance(route, Route), route
    return route


GOVERNING = [
    pytest.param(
        [_global("default"), _global("research", "only-east", clusterQueues=["team-a"])],
        "research",
        id="one that names the cluster queue wins over a catch-all first by name",
    ),
    pytest.param(
        [_global("default"), _global("vision", tenants=["vision"])],
        "vision",
        id="one that names the tenant wins over one open to all",
    ),
    pytest.param(
        [_global("by-tenant", tenants=["vision"]), _global("by-queue", clusterQueues=["team-a"])],
        "by-queue",
        id="naming the cluster queue is more specific than naming the tenant",
    ),
    pytest.param(
        [_global("b", clusterQueues=["team-a"]), _global("a", clusterQueues=["team-a", "x"])],
        "a",
        id="among equals the first by name",
    ),
    pytest.param(
        [_global("a-other", clusterQueues=["other"]), _global("b-catch-all")],
        "b-catch-all",
        id="one written for other queues never governs",
    ),
]


@pytest.mark.parametrize(("queues", "expected"), GOVERNING)
def test_the_most_specific_global_queue_governs_the_work(
    queues: list[GlobalQueue], expected: str
) -> None:
    route = _route(_routing(*queues))
    assert route.global_queue is not None
    assert route.global_queue.name == expected


def test_the_work_goes_to_the_cluster_set_of_the_queue_that_governs_it() -> None:
    routing = _routing(
        _global("default"), _global("research", "only-east", clusterQueues=["team-a"])
    )
    assert _route(routing).cluster_set == frozenset({"east"})
