"""The topology part of the capacity report: per flavor with a topology, each level's roomiest
domains as their nodes' room (equal nodes grouped) and a bound on the others — and the hub's
reading of it agrees with the engine on whether a gang that requires a rack fits now.

The fabric is the engine tests' (2 blocks × 2 racks × 4 hosts, tests/agent/engine/
test_topology.py); the hub's side is the real hub.placement.topology reading the report.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from datetime import UTC, datetime

from agent.capacity import capacity_report
from agent.engine.apply import apply_result
from agent.engine.result import PendingCode
from agent.engine.snapshot import Node, Snapshot, WorkloadId
from agent.topology_summary import topology_rooms
from api.quantity import Quantity
from api.v1alpha1.messages import (
    CapacityReport,
    LevelRoom,
    NodeGroupRoom,
    NodeSummary,
    TopologyRoom,
)
from hub.placement.topology import Fit, TopologyNeed, TopologyView, judge, topology_views
from tests.agent.engine.test_topology import (
    BLOCK,
    HOST,
    PLAIN,
    RACK,
    asking,
    fabric,
    gang,
    required,
    tas_snapshot,
)
from tests.builders import admitted_ids, ids, reason_of, run


def level(rooms: list[TopologyRoom], label: str) -> LevelRoom:
    (room,) = rooms
    return next(lv for lv in room.levels if lv.level == label)


def groups(lv: LevelRoom, *, now: bool = True) -> dict[str, list[tuple[int, str]]]:
    """Domain → [(nodes, their free cpu)] as reported."""
    domains = lv.free if now else lv.allocatable
    return {d.name: [(g.nodes, g.room["cpu"].canonical()) for g in d.nodes] for d in domains}


# what is reported ----------------------------------------------------------------------------


def test_an_idle_fabric_reports_each_domain_as_one_group_of_equal_nodes() -> None:
    rooms = topology_rooms(tas_snapshot())
    assert [(r.flavor, r.topology) for r in rooms] == [("tas", "fabric")]
    assert [lv.level for lv in rooms[0].levels] == [BLOCK, RACK, HOST]
    racks = level(rooms, RACK)
    assert racks.domains == 4
    assert groups(racks) == {r: [(4, "1")] for r in ("b0r0", "b0r1", "b1r0", "b1r1")}
    assert racks.free[0].nodes[0] == NodeGroupRoom(
        nodes=4, room={"cpu": Quantity.parse("1"), "pods": Quantity.parse("110")}
    )


def test_a_racks_free_cpu_split_over_hosts_is_reported_host_by_host() -> None:
    # b0r0 has 2 CPUs free on each of two hosts: 4 in total, yet no 3-CPU pod fits it. (Its
    # full hosts still have room for pods that ask no CPU.)
    used = {"b0r0h0": 4, "b0r0h1": 4, "b0r0h2": 2, "b0r0h3": 2}
    rooms = topology_rooms(tas_snapshot(nodes=fabric(cpu=4, used=used)))
    assert groups(level(rooms, RACK))["b0r0"] == [(2, "0"), (2, "2")]
    assert groups(level(rooms, BLOCK))["b0"] == [(4, "4"), (2, "0"), (2, "2")]


def test_cordoned_nodes_count_when_empty_but_not_now() -> None:
    rooms = topology_rooms(tas_snapshot(nodes=fabric(cordoned=["b0r0h0", "b0r0h1"])))
    racks = level(rooms, RACK)
    assert groups(racks)["b0r0"] == [(2, "1")]
    assert groups(racks, now=False)["b0r0"] == [(4, "1")]


def test_an_admitted_gangs_assignment_takes_its_rack_before_its_pods_run() -> None:
    first = tas_snapshot(asking(gang("a", 4), required(RACK)))
    result = run(first)
    assert admitted_ids(result) == ids("a")
    rooms = topology_rooms(apply_result(first, result))
    racks = groups(level(rooms, RACK))
    assert sorted(name for name, g in racks.items() if g == [(4, "1")]) == ["b0r1", "b1r0", "b1r1"]
    assert "b0r0" not in racks  # no room left: not among the roomiest


def test_only_the_roomiest_domains_go_in_full_and_the_others_as_a_bound() -> None:
    used = {"b0r0h0": 1, "b0r1h0": 1, "b0r1h1": 1, "b1r1h0": 1}
    rooms = topology_rooms(tas_snapshot(nodes=fabric(used=used)), top=1)
    racks = level(rooms, RACK)
    assert [d.name for d in racks.free] == ["b1r0"]  # 4 free CPUs; the others hold 3, 2, 3
    assert racks.free_elsewhere["cpu"] == Quantity.parse("3")
    assert racks.allocatable_elsewhere["cpu"] == Quantity.parse("4")


def test_a_cluster_without_a_topology_flavor_reports_an_empty_list() -> None:
    snap = dataclasses.replace(tas_snapshot(flavors=(PLAIN,)), topologies={})
    report = capacity_report(
        cluster="c",
        snapshot=snap,
        nodes=NodeSummary(),
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        config_revision=None,
    )
    assert report.topologies == []
    assert '"topologies":[]' in report.model_dump_json(by_alias=True, exclude_none=True)


def test_the_report_survives_the_wire() -> None:
    report = capacity_report(
        cluster="c",
        snapshot=tas_snapshot(nodes=fabric(used={"b0r0h0": 1})),
        nodes=NodeSummary(),
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        config_revision=None,
    )
    assert report.topologies
    again = CapacityReport.model_validate_json(report.model_dump_json(by_alias=True))
    assert again == report


# the hub's reading agrees with the engine ---------------------------------------------------


def views_of(snap: Snapshot, top: int = 4) -> dict[str, TopologyView] | None:
    return topology_views(topology_rooms(snap, top=top))


def _engine_admits(nodes: Mapping[str, Node], pods: int, cpu: int) -> bool:
    result = run(tas_snapshot(asking(gang("w", pods, cpu=cpu), required(RACK)), nodes=nodes))
    if admitted_ids(result) == ids("w"):
        return True
    assert reason_of(result, "w").code is PendingCode.TOPOLOGY_PLACEMENT_FAILED
    return False


def _hub_fit(nodes: Mapping[str, Node], pods: int, cpu: int, top: int) -> Fit:
    views = views_of(tas_snapshot(nodes=nodes), top)
    need = TopologyNeed("main", RACK, pods, (("cpu", cpu * 1000), ("pods", 1000)))
    judged = judge(views, ["tas"], [need])
    assert judged is not None
    return judged.fit


def test_with_every_rack_reported_the_hub_says_fits_now_exactly_when_the_engine_admits() -> None:
    rng = random.Random(17)
    for _ in range(200):
        used = {
            f"b{b}r{r}h{h}": rng.randint(0, 4) for b in (0, 1) for r in (0, 1) for h in range(4)
        }
        nodes = fabric(cpu=4, used=used)
        pods, cpu = rng.randint(1, 12), rng.randint(1, 3)
        admits = _engine_admits(nodes, pods, cpu)
        assert (_hub_fit(nodes, pods, cpu, top=4) is Fit.NOW) == admits, (used, pods, cpu)


def test_with_few_racks_reported_the_hub_never_says_no_where_the_engine_admits() -> None:
    rng = random.Random(18)
    for _ in range(200):
        used = {
            f"b{b}r{r}h{h}": rng.randint(0, 4) for b in (0, 1) for r in (0, 1) for h in range(4)
        }
        nodes = fabric(cpu=4, used=used)
        pods, cpu = rng.randint(1, 12), rng.randint(1, 3)
        if _engine_admits(nodes, pods, cpu):
            assert _hub_fit(nodes, pods, cpu, top=1) is Fit.NOW, (used, pods, cpu)


def test_an_admitted_gang_no_longer_leaves_room_for_a_second_in_the_hubs_eyes() -> None:
    first = tas_snapshot(asking(gang("a", 4), required(BLOCK)))
    result = run(first)
    after = apply_result(first, result)
    views = views_of(after)
    need = TopologyNeed("main", BLOCK, 8, (("cpu", 1000), ("pods", 1000)))
    judged = judge(views, ["tas"], [need])
    assert judged is not None and judged.fit is Fit.NOW  # b1 is whole
    second = dataclasses.replace(
        after,
        workloads={
            **after.workloads,
            WorkloadId("default/b"): asking(gang("b", 8).created(1), required(BLOCK)),
        },
    )
    after_both = apply_result(second, run(second))
    judged = judge(views_of(after_both), ["tas"], [need])
    assert judged is not None
    assert (judged.fit, judged.message) == (Fit.LATER, "no free block holds 8 pods (largest 4)")
