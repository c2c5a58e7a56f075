"""Hub placement sees topology: a pod set that requires one domain of a level goes only to a
cluster that reported such a domain free now; where one could only ever fit it waits (or is
queued at the one cluster that could take it), where none could the cluster is ruled out —
and the waiting reason says, per cluster, why. Preferred levels restrict nothing.

The clusters' reports are built as an agent sends them (api.v1alpha1.messages.TopologyRoom)
and read by hub.placement.topology, as the hub does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from api.quantity import Quantity
from api.v1alpha1.messages import DomainRoom, LevelRoom, NodeGroupRoom, TopologyRoom
from api.v1alpha1.workload import Workload
from hub.placement.book import Assumed, DispatchBook, DispatchRecord
from hub.placement.core import place
from hub.placement.cycle import dispatch
from hub.placement.plan import Verdict
from hub.placement.snapshot import (
    ClusterName,
    ClusterView,
    FlavorHeadroom,
    PlacementRequest,
    QueueView,
)
from hub.placement.topology import (
    Fit,
    TopologyNeed,
    TopologyView,
    judge,
    take_offered,
    topology_needs,
    topology_views,
)
from tests.hub.placement.test_cycle import snapshot as cycle_snapshot
from tests.hub.placement.test_cycle import view as cycle_view

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
RACK = "example.com/topology-rack"
BLOCK = "example.com/topology-block"
CPU = 1000

Racks = dict[str, list[tuple[int, int]]]
"""Rack name → [(nodes, free CPUs of each)]."""


def _domains(racks: Racks) -> list[DomainRoom]:
    return [
        DomainRoom(
            name=name,
            nodes=[
                NodeGroupRoom(
                    nodes=n,
                    room={"cpu": Quantity.from_milli(cpu * CPU), "pods": Quantity.parse("110")},
                )
                for n, cpu in groups
            ],
        )
        for name, groups in racks.items()
    ]


def report(
    free: Racks,
    allocatable: Racks | None = None,
    *,
    free_elsewhere: int = 0,
    flavor: str = "tas",
) -> dict[str, TopologyView]:
    """One flavor's rack level as an agent reports it (every rack 4 hosts of 4 CPUs when
    empty, unless `allocatable` says otherwise)."""
    allocatable = allocatable or {name: [(4, 4)] for name in free}
    elsewhere = {"cpu": Quantity.from_milli(free_elsewhere * CPU)} if free_elsewhere else {}
    views = topology_views(
        [
            TopologyRoom(
                flavor=flavor,
                topology="fabric",
                levels=[
                    LevelRoom(
                        level=RACK,
                        domains=len(allocatable),
                        free=_domains(free),
                        free_elsewhere=elsewhere,
                        allocatable=_domains(allocatable),
                    )
                ],
            )
        ]
    )
    assert views is not None
    return views


def need(pods: int, cpu: int = 1, level: str = RACK, name: str = "main") -> TopologyNeed:
    return TopologyNeed(name, level, pods, (("cpu", cpu * CPU), ("pods", 1000)))


# the judgement, as a table ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("free", "allocatable", "needs", "fit", "message"),
    [
        pytest.param(
            {"r0": [(4, 4)], "r1": [(2, 4)]},
            None,
            [need(2, cpu=4)],
            Fit.NOW,
            "fits rack r1",
            id="the smallest rack that holds it (best fit)",
        ),
        pytest.param(
            {"r0": [(2, 2)]},
            None,
            [need(1, cpu=3)],
            Fit.LATER,
            "no free rack holds 1 pod (largest 0)",
            id="a rack's free CPU split over hosts too small for one pod",
        ),
        pytest.param(
            {"r0": [(3, 4)], "r1": [(1, 4), (2, 1)]},
            None,
            [need(4, cpu=4)],
            Fit.LATER,
            "no free rack holds 4 pods (largest 3)",
            id="busy now, could fit when empty",
        ),
        pytest.param(
            {"r0": [(3, 4)]},
            {"r0": [(3, 4)]},
            [need(4, cpu=4)],
            Fit.NEVER,
            "no rack could ever hold 4 pods (largest 3 when empty)",
            id="too large for any rack",
        ),
        pytest.param(
            {"r0": [(4, 4)]},
            None,
            [need(2, level=BLOCK)],
            Fit.NEVER,
            "no flavor of its cluster queue has a topology with level block",
            id="no flavor has the level",
        ),
        pytest.param(
            {"r0": [(3, 4)]},
            None,
            [need(3, cpu=4, name="workers"), need(4, cpu=4, name="ps")],
            Fit.LATER,
            "pod set ps: no free rack holds 4 pods (largest 3)",
            id="the worst pod set decides and is named",
        ),
    ],
)
def test_whether_a_pod_set_requiring_a_rack_fits_a_clusters_report(
    free: Racks, allocatable: Racks | None, needs: list[TopologyNeed], fit: Fit, message: str
) -> None:
    judged = judge(report(free, allocatable), ["tas"], needs)
    assert judged is not None
    assert (judged.fit, judged.message) == (fit, message)


def test_a_rack_not_reported_in_full_that_might_hold_it_counts_as_room() -> None:
    judged = judge(report({"r0": [(1, 4)]}, free_elsewhere=16), ["tas"], [need(4, cpu=4)])
    assert judged is not None and judged.fit is Fit.NOW
    assert judged.message == "may fit a rack (not among the racks it reported in full)"


def test_a_bound_too_small_for_the_gang_rules_the_unreported_racks_out() -> None:
    judged = judge(report({"r0": [(1, 4)]}, free_elsewhere=8), ["tas"], [need(4, cpu=4)])
    assert judged is not None and judged.fit is Fit.LATER


def test_any_flavor_of_the_cluster_queue_may_hold_it() -> None:
    views = {**report({"r0": [(1, 4)]}, flavor="a"), **report({"r0": [(4, 4)]}, flavor="b")}
    judged = judge(views, ["a", "b"], [need(4, cpu=4)])
    assert judged is not None and judged.fit is Fit.NOW
    judged = judge(views, ["a"], [need(4, cpu=4)])
    assert judged is not None and judged.fit is Fit.LATER


def test_a_cluster_whose_agent_reports_no_topologies_is_not_judged() -> None:
    assert judge(None, ["tas"], [need(4)]) is None


# which pod sets the hub checks --------------------------------------------------------------


def gang(name: str, pods: int, cpu: str = "1", **topology: Any) -> Workload:
    """(Names are unique per test: the hub remembers a workload's requests by its uid.)"""
    return Workload.model_validate(
        {
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-rack-test-{name}"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": pods,
                        "topologyRequest": topology or None,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "i",
                                        "resources": {"requests": {"cpu": cpu}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
    )


def test_only_required_levels_are_checked_at_the_hub() -> None:
    assert topology_needs(gang("a", 4, "2", required=RACK)) == (need(4, cpu=2),)
    assert topology_needs(gang("b", 4, preferred=RACK)) == ()
    assert topology_needs(gang("c", 4, unconstrained=True)) == ()
    assert topology_needs(gang("d", 4)) == ()
    sliced = gang("e", 4, required=BLOCK, podSetSliceRequiredTopology=RACK, podSetSliceSize=2)
    assert topology_needs(sliced) == ()


# placement ----------------------------------------------------------------------------------


def cluster(name: str, free_cpu: int, topologies: dict[str, TopologyView] | None) -> ClusterView:
    flavor = FlavorHeadroom("tas", {"cpu": free_cpu * CPU}, {"cpu": 64 * CPU})
    return ClusterView(
        ClusterName(name),
        {},
        connected=True,
        queues={"cq": QueueView("cq", (flavor,))},
        topologies=topologies,
    )


def rack_request(pods: int, cpu: int = 4, *clusters: str) -> PlacementRequest:
    return PlacementRequest(
        workload="team/gang",
        cluster_queue="cq",
        requests={"cpu": pods * cpu * CPU},
        cluster_set=frozenset(ClusterName(c) for c in clusters or ("sim-0", "sim-1")),
        topology=(need(pods, cpu=cpu),),
    )


def test_a_rack_requiring_gang_goes_only_to_the_cluster_with_a_free_rack() -> None:
    # sim-0 has more quota headroom, but its racks are split: no rack holds 4 pods of 4 CPUs.
    busy = cluster("sim-0", 48, report({"r0": [(3, 4)], "r1": [(3, 4), (1, 2)]}))
    free = cluster("sim-1", 20, report({"r0": [(2, 4)], "r3": [(4, 4)]}))
    p = place([busy, free], rack_request(4), NOW)
    assert p.offer_to == ("sim-1",)
    verdicts = {str(v.cluster): (v.verdict, v.message) for v in p.verdicts}
    assert verdicts["sim-0"] == (Verdict.NO_FREE_DOMAIN, "no free rack holds 4 pods (largest 3)")
    assert verdicts["sim-1"][0] is Verdict.CANDIDATE
    assert verdicts["sim-1"][1].endswith("; fits rack r3")


def test_with_no_free_rack_anywhere_it_waits_and_says_so_per_cluster() -> None:
    a = cluster("sim-0", 48, report({"r0": [(3, 4)]}))
    b = cluster("sim-1", 48, report({"r0": [(2, 4)]}))
    p = place([a, b], rack_request(4), NOW)
    assert p.offer_to == ()
    assert p.waiting_reason == (
        "no cluster can take it now — sim-0: no free rack holds 4 pods (largest 3); "
        "sim-1: no free rack holds 4 pods (largest 2)"
    )


def test_it_is_queued_at_the_only_cluster_where_a_rack_could_ever_hold_it() -> None:
    small = {"r0": [(2, 4)]}
    never = cluster("sim-0", 48, report(small, small))
    later = cluster("sim-1", 48, report({"r0": [(2, 4)]}))
    p = place([never, later], rack_request(4), NOW)
    assert p.offer_to == ("sim-1",)
    assert p.verdicts[0].verdict is Verdict.ONLY_CLUSTER
    assert "no free rack holds 4 pods (largest 2)" in p.verdicts[0].message
    assert p.verdicts[1].verdict is Verdict.NO_DOMAIN


def test_when_no_rack_anywhere_could_ever_hold_it_the_reason_says_never() -> None:
    small = {"r0": [(2, 4)]}
    p = place(
        [cluster("sim-0", 48, report(small, small)), cluster("sim-1", 48, report(small, small))],
        rack_request(4),
        NOW,
    )
    assert p.offer_to == ()
    assert p.waiting_reason.startswith("no cluster could ever take it — sim-0: no rack could")


def test_quota_still_decides_first_where_a_rack_is_free() -> None:
    p = place([cluster("sim-0", 8, report({"r0": [(4, 4)]}))], rack_request(4, 4, "sim-0"), NOW)
    assert p.verdicts[0].verdict in (Verdict.INSUFFICIENT_HEADROOM, Verdict.ONLY_CLUSTER)


def test_an_older_agent_without_topology_reports_is_offered_by_quota_alone() -> None:
    p = place([cluster("sim-0", 48, None), cluster("sim-1", 20, None)], rack_request(4), NOW)
    assert p.offer_to == ("sim-0",)


def test_a_workload_without_required_levels_is_placed_as_before() -> None:
    busy = cluster("sim-0", 48, report({"r0": [(1, 4)]}))
    plain = replace(rack_request(4), topology=())
    assert place([busy, cluster("sim-1", 20, None)], plain, NOW).offer_to == ("sim-0",)


# the cycle ----------------------------------------------------------------------------------


def test_a_rack_gang_and_a_plain_workload_of_the_same_size_are_told_apart_when_parked() -> None:
    # Both ask 4 CPUs in total; only the gang needs a rack, and no cluster has one free.
    workloads = {
        "team/gang": gang("gang", 4, required=RACK),
        "team/plain": gang("plain", 4),
    }
    snap = cycle_snapshot(workloads, free={"east": 8, "west": 8}, book=DispatchBook())
    racks = report({"r0": [(3, 1)]}, flavor="default")
    snap = replace(
        snap, views=[replace(cycle_view(n, 8), topologies=racks) for n in ("east", "west")]
    )
    plan = dispatch(snap, NOW)
    assert [o.key for o in plan.offers] == ["team/plain"]
    assert [w.key for w in plan.waits] == ["team/gang"]
    assert "east: no free rack holds 4 pods (largest 3)" in plan.waits[0].message
    assert [p.key for p in plan.parks] == ["team/gang"]


# room booked by offers ----------------------------------------------------------------------


def test_an_offered_gang_takes_its_racks_room_until_the_cluster_reports_again() -> None:
    views = report({"r0": [(4, 4)], "r1": [(2, 4), (2, 2)]})
    booked = take_offered(views, ["tas"], [need(4, cpu=4)])
    again = judge(booked, ["tas"], [need(4, cpu=4)])
    assert again is not None
    assert (again.fit, again.message) == (Fit.LATER, "no free rack holds 4 pods (largest 2)")
    # What is left of r0 is still counted host by host: one pod of 4 CPUs taken from a
    # rack of 4 such hosts leaves 3.
    one = take_offered(report({"r0": [(4, 4)]}), ["tas"], [need(1, cpu=4)])
    left = judge(one, ["tas"], [need(3, cpu=4)])
    assert left is not None and left.fit is Fit.NOW


def test_two_rack_gangs_of_one_cycle_are_not_offered_the_same_free_rack() -> None:
    workloads = {
        "team/first": gang("first", 4, required=RACK),
        "team/second": gang("second", 4, required=RACK),
    }
    snap = cycle_snapshot(workloads, free={"east": 8, "west": 8}, book=DispatchBook())
    east = report({"r0": [(4, 1)]}, flavor="default")
    west = report({"r0": [(2, 1)]}, flavor="default")
    snap = replace(
        snap,
        views=[
            replace(cycle_view("east", 8), topologies=east),
            replace(cycle_view("west", 8), topologies=west),
        ],
    )
    plan = dispatch(snap, NOW)
    assert [(o.key, o.clusters) for o in plan.offers] == [("team/first", ("east",))]
    assert [w.key for w in plan.waits] == ["team/second"]
    assert "east: no free rack holds 4 pods (largest 0)" in plan.waits[0].message


def test_the_book_keeps_an_offers_domains_per_cluster_until_its_room_is_given_back() -> None:
    book = DispatchBook()
    needs = (need(4, cpu=4),)
    book.put("team/a", DispatchRecord(assumed={"east": Assumed("cq", "tas", {}, topology=needs)}))
    book.put("team/b", DispatchRecord(assumed={"east": Assumed("cq", "tas", {"cpu": 1})}))
    assert book.domains == {"east": {"team/a": ("cq", needs)}}
    book.give_back_room("team/a", "east")
    assert book.domains == {}
