"""The fleet turns a cluster's reported topologies into placement's views once per report,
and takes from them the domains that open offers book until the cluster reports again."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from api.quantity import Quantity
from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.messages import (
    CapacityReport,
    DomainRoom,
    LevelRoom,
    NodeGroupRoom,
    QueueCapacity,
    TopologyRoom,
)
from hub.auth import TokenAuthority
from hub.fleet import ClusterState, Fleet, capacity_cells
from hub.objects import ObjectRepository
from hub.placement.topology import Fit, TopologyNeed, judge
from hub.store.sqlite import SqliteStore

RACK = "example.com/topology-rack"
NEED = TopologyNeed("main", RACK, 4, (("cpu", 4000), ("pods", 1000)))


def rack(name: str, hosts: int) -> DomainRoom:
    room = {"cpu": Quantity.parse("4"), "pods": Quantity.parse("110")}
    return DomainRoom(name=name, nodes=[NodeGroupRoom(nodes=hosts, room=room)])


def report() -> CapacityReport:
    cpu = Quantity.parse("32")
    return CapacityReport(
        cluster="east",
        observed_at=datetime(2026, 12, 4, tzinfo=UTC),
        queues=[
            QueueCapacity(
                cluster_queue="cq",
                flavor="tas",
                resource="cpu",
                nominal=cpu,
                usage=Quantity.parse("0"),
                headroom=cpu,
            )
        ],
        topologies=[
            TopologyRoom(
                flavor="tas",
                topology="racks",
                levels=[
                    LevelRoom(
                        level=RACK,
                        domains=2,
                        free=[rack("r0", 4), rack("r1", 3)],
                        allocatable=[rack("r0", 4), rack("r1", 4)],
                    )
                ],
            )
        ],
    )


async def test_booked_domains_are_taken_from_the_reported_room_until_the_next_report(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    try:
        fleet = Fleet(ObjectRepository(store), TokenAuthority(), secrets_dir=None)
        sent = report()
        fleet.clusters["east"] = ClusterState("east", capacity=sent, cells=capacity_cells(sent))
        (view,) = fleet.views({})
        judged = judge(view.topologies, ["tas"], [NEED])
        assert judged is not None and judged.message == "fits rack r0"
        converted = fleet.clusters["east"].topologies
        (booked,) = fleet.views({}, {"east": {"team/a": ("cq", (NEED,))}})
        judged = judge(booked.topologies, ["tas"], [NEED])
        assert judged is not None
        assert (judged.fit, judged.message) == (Fit.LATER, "no free rack holds 4 pods (largest 3)")
        assert fleet.clusters["east"].topologies is converted  # read once per report
        fleet.clusters["east"].capacity = report()
        fleet.views({})
        assert fleet.clusters["east"].topologies is not converted
    finally:
        await store.close()


async def test_a_cluster_whose_agent_sends_no_topologies_has_none_in_its_view(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    try:
        fleet = Fleet(ObjectRepository(store), TokenAuthority(), secrets_dir=None)
        old = report().model_copy(update={"topologies": None})
        fleet.clusters["east"] = ClusterState("east", capacity=old, cells=capacity_cells(old))
        (view,) = fleet.views({}, {"east": {"team/a": ("cq", (NEED,))}})
        assert view.topologies is None
    finally:
        await store.close()


async def test_the_status_the_fleet_writes_for_a_cluster_reads_back_as_a_member_cluster(
    tmp_path: Path,
) -> None:
    # A status field the hub writes and its own model does not know makes the member
    # unreadable to the hub's mirror, and every dispatch to that cluster stops.
    store = await SqliteStore.open(tmp_path / "hub.db")
    try:
        repo = ObjectRepository(store)
        fleet = Fleet(repo, TokenAuthority(), secrets_dir=None)
        member = MemberCluster.model_validate(
            {"metadata": {"name": "east"}, "spec": {"tokenRef": {"secretName": "t"}}}
        )
        await repo.create(member)
        sent = report()
        state = ClusterState("east", capacity=sent, cells=capacity_cells(sent))
        await fleet.write_status(state)
        read = await repo.get(MemberCluster, "east")
        assert read.status is not None
        assert read.status.capacity is not None
        assert read.status.capacity.schedulable_nodes == sent.nodes.schedulable
        assert [f.flavor for f in read.status.capacity.flavors] == ["tas"]
    finally:
        await store.close()
