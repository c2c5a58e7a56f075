"""Which GlobalQueue governs a workload: the most specific one open to its cluster queue and
tenant, whatever the names of the others (hub.placement.routing)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.k8s.pod import add_resources
from api.quantity import Quantity
from api.v1alpha1.federation import ClusterSet, GlobalQueue, Tenant
from api.v1alpha1.queues import LocalQueue
from api.v1alpha1.workload import Workload
from hub.placement.routing import Route, Routing, workload_requests


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


# --- a workload's requests ----------------------------------------------------------------

_AMOUNTS = st.sampled_from(
    ["0", "1", "100m", "250m", "1500m", "3", "1n", "333m", "0.1", "1.5", "64Mi", "1Gi", "7k", "2e3"]
)


def _workload_of(pod_sets: list[tuple[int, int | None, dict[str, str]]]) -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": "w", "namespace": "vision"},
            "spec": {
                "queueName": "team-a",
                "podSets": [
                    {
                        "name": f"set-{i}",
                        "count": count,
                        **({"minCount": minimum} if minimum is not None else {}),
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "busybox",
                                        "resources": {"requests": requests},
                                    }
                                ]
                            }
                        },
                    }
                    for i, (count, minimum, requests) in enumerate(pod_sets)
                ],
            },
        }
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 1000),
            st.one_of(st.none(), st.integers(1, 1000)),
            st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _AMOUNTS),
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_a_workloads_requests_are_the_milli_value_of_its_exact_total(
    pod_sets: list[tuple[int, int | None, dict[str, str]]], minimum: bool
) -> None:
    pod_sets = [(count, min(m, count) if m is not None else None, r) for count, m, r in pod_sets]
    wl = _workload_of(pod_sets)
    exact: dict[str, Quantity] = {}
    for ps in wl.spec.pod_sets:
        count = ps.min_count if minimum and ps.min_count is not None else ps.count
        add_resources(exact, ps.total_requests(count))
    expected = {name: q.milli() for name, q in exact.items()}
    assert workload_requests(wl, minimum=minimum) == expected  # (no uid: not memoised)


def test_requests_round_up_to_a_milli_unit_once_for_the_whole_workload() -> None:
    # 3 pods of 1n and 1 of 1n: 4n in all, one milli-unit — not one per pod set.
    wl = _workload_of([(3, None, {"cpu": "1n"}), (1, None, {"cpu": "1n"})])
    assert workload_requests(wl) == {"cpu": 1}
    wl = _workload_of([(2, 1, {"cpu": "1500m", "memory": "64Mi"})])
    assert workload_requests(wl) == {"cpu": 3000, "memory": 64 * 2**20 * 2 * 1000}
    assert workload_requests(wl, minimum=True) == {"cpu": 1500, "memory": 64 * 2**20 * 1000}
