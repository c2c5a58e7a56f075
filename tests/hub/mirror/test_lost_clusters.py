"""A lost cluster's work: the mirror indexes unfinished workloads by the cluster they are bound
or offered to, and the dispatcher lets go of a lost cluster's workloads by that index alone,
once the cluster's loss timeout has passed or it left the fleet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from api.v1alpha1.federation import MemberCluster
from hub.auth import TokenAuthority
from hub.dispatch import UNKNOWN_CLUSTER_LET_GO, Dispatcher
from hub.fleet import ClusterState, Fleet
from hub.objects import ObjectRepository
from hub.state import HubState, WorkloadEntry, clusters_of
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_hub_state import FINISHED, _workload, eventually

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _by_cluster_recomputed(state: HubState) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, entry in state.workloads.items():
        for cluster in clusters_of(entry.workload):
            out.setdefault(cluster, set()).add(key)
    return out


async def _put(store: SqliteStore, state: HubState, name: str, status: dict[str, Any]) -> None:
    key = f"team/{name}"
    entry = state.workloads.get(key)
    if entry is None:
        await store.create(f"/workloads/{key}", _workload(name, status=status))
        await eventually(lambda: key in state.workloads)
        return
    wire = dict(entry.raw)
    wire["status"] = status
    await store.update(f"/workloads/{key}", wire, expected=entry.revision)
    await eventually(lambda: state.workloads[key].revision > entry.revision)


async def test_the_mirror_indexes_unfinished_workloads_by_the_cluster_they_are_bound_or_offered_to(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "waiting", {})
    await _put(store, state, "bound", {"clusterName": "east"})
    await _put(store, state, "offered", {"nominatedClusterNames": ["west", "north"]})
    await _put(store, state, "done", {**FINISHED, "clusterName": "east"})
    assert state.by_cluster == {
        "east": {"team/bound"},
        "west": {"team/offered"},
        "north": {"team/offered"},
    }

    await _put(store, state, "offered", {"clusterName": "west"})
    assert state.by_cluster == {"east": {"team/bound"}, "west": {"team/offered"}}

    await _put(store, state, "bound", {**FINISHED, "clusterName": "east"})
    assert state.by_cluster == {"west": {"team/offered"}}

    entry = state.workloads["team/offered"]
    await store.delete("/workloads/team/offered", expected=entry.revision)
    await eventually(lambda: "team/offered" not in state.workloads)
    assert state.by_cluster == {}
    assert state.by_cluster == _by_cluster_recomputed(state)


def _lost(
    name: str, *, for_seconds: float, timeout: float = 900.0, lease_expired: float | None = None
) -> ClusterState:
    """A cluster lost `for_seconds` ago whose agent last renewed its lease then (or, with
    `lease_expired`, whose lease ran out that many seconds ago)."""
    state = ClusterState(
        name, loss_timeout_seconds=timeout, lost_since=NOW - timedelta(seconds=for_seconds)
    )
    expired = for_seconds if lease_expired is None else lease_expired
    state.lease_expires = NOW - timedelta(seconds=expired)
    return state


class CountingWorkloads(dict[str, WorkloadEntry]):
    """The mirror's workloads, counting how many entries a reader walked or looked up."""

    looked_at = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.looked_at += 1
        return super().get(key, default)

    def items(self) -> Any:
        self.looked_at += len(self)
        return super().items()

    def values(self) -> Any:
        self.looked_at += len(self)
        return super().values()


async def _dispatcher_over(
    store: SqliteStore, state: HubState, clusters: list[ClusterState]
) -> Dispatcher:
    fleet = Fleet(ObjectRepository(store), TokenAuthority(), secrets_dir=None)
    fleet.clusters = {c.name: c for c in clusters}
    return Dispatcher(state, fleet, clock=lambda: NOW)


async def test_a_cluster_lost_past_its_timeout_has_its_work_requeued_and_no_other(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "on-east", {"clusterName": "east"})
    await _put(store, state, "offered-east", {"nominatedClusterNames": ["east", "west"]})
    await _put(store, state, "on-west", {"clusterName": "west"})
    d = await _dispatcher_over(
        store, state, [_lost("east", for_seconds=901), _lost("west", for_seconds=10)]
    )

    await d.cycle()
    await eventually(lambda: "east" not in state.by_cluster)

    on_east = state.workloads["team/on-east"].workload
    assert on_east.status is not None and on_east.status.cluster_name is None
    assert any(c.reason == "ClusterLost" for c in on_east.status.conditions)
    assert "team/on-east" in state.pending
    # Reservations create nothing: those asked of lost clusters end at once.
    offered = state.workloads["team/offered-east"].workload
    assert offered.status is not None and offered.status.nominated_cluster_names == []
    # West is lost too, but for less than its timeout: it may still be running its work.
    assert state.by_cluster == {"west": {"team/on-west"}}
    assert state.workloads["team/on-west"].workload.status.cluster_name == "west"  # type: ignore[union-attr]


async def test_a_lost_clusters_work_waits_until_its_lease_has_been_expired_for_the_grace(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "on-east", {"clusterName": "east"})
    # Past its loss timeout, but its agent may hold a lease (granted by this hub before it
    # restarted, say) that ran out 10 s ago: it has had 10 of its 30 s to stop.
    d = await _dispatcher_over(store, state, [_lost("east", for_seconds=901, lease_expired=10)])
    await d.cycle()
    assert d.last_plan is not None and d.last_plan.let_go == []
    assert state.workloads["team/on-east"].workload.status.cluster_name == "east"  # type: ignore[union-attr]

    d.fleet.clusters["east"].lease_expires = NOW - timedelta(seconds=31)
    d._expiry_checked_at = None
    await d.cycle()
    await eventually(lambda: "east" not in state.by_cluster)


async def test_with_fencing_off_a_lost_cluster_keeps_its_work_however_long_it_is_gone(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "on-east", {"clusterName": "east"})
    east = _lost("east", for_seconds=100_000)
    east.fencing = False
    d = await _dispatcher_over(store, state, [east])
    await d.cycle()
    assert d.last_plan is not None and d.last_plan.let_go == []
    assert state.by_cluster == {"east": {"team/on-east"}}


async def test_letting_go_of_a_lost_cluster_looks_only_at_that_clusters_workloads(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    for i in range(30):
        await _put(store, state, f"elsewhere-{i}", {"clusterName": "west"})
    await _put(store, state, "on-east", {"clusterName": "east"})
    d = await _dispatcher_over(store, state, [_lost("east", for_seconds=901)])
    # West's agent is connected: its work stays where it is.
    west = d.fleet.clusters["west"] = ClusterState("west")
    west.control = ConnectedLane()  # type: ignore[assignment]
    west.connected_at = west.renewed_at = NOW
    state.workloads = counting = CountingWorkloads(state.workloads)

    await d.cycle()
    assert counting.looked_at <= 5  # east's one workload and its write, not all 31
    await eventually(lambda: "east" not in state.by_cluster)

    # With nothing left on a lost cluster (and nothing waiting), a cycle looks at no workload.
    requeued = state.workloads["team/on-east"]
    await store.delete("/workloads/team/on-east", expected=requeued.revision)
    await eventually(lambda: "team/on-east" not in state.workloads)
    counting.looked_at = 0
    d._expiry_checked_at = None
    await d.cycle()
    assert counting.looked_at == 0


async def test_the_work_of_a_cluster_that_left_the_fleet_goes_once_its_lease_ran_out(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "on-gone", {"clusterName": "gone"})
    repo = ObjectRepository(store)
    clock = Clock(NOW)
    fleet = Fleet(repo, TokenAuthority(), secrets_dir=None, clock=clock)
    member = MemberCluster.model_validate(
        {
            "metadata": {"name": "gone"},
            "spec": {
                "tokenRef": {"secretName": "t"},
                "fencing": {"lossTimeoutSeconds": 60, "leaseSeconds": 20, "graceSeconds": 10},
            },
        }
    )
    fleet.load([member])
    fleet.clusters["gone"].renew_lease(NOW)
    fleet.load([])  # the admin deleted the member; its agent may hold its lease 20 s more
    assert fleet.departed["gone"].let_go_at == NOW + timedelta(seconds=30)
    d = Dispatcher(state, fleet, clock=clock)

    clock.now = NOW + timedelta(seconds=29)
    await d.cycle()
    assert d.last_plan is not None and d.last_plan.let_go == []

    clock.now = NOW + timedelta(seconds=30)
    d._expiry_checked_at = None
    await d.cycle()
    await eventually(lambda: "gone" not in state.by_cluster)
    wl = state.workloads["team/on-gone"].workload
    assert wl.status is not None and wl.status.cluster_name is None
    assert any("no longer a member" in c.message for c in wl.status.conditions)


async def test_a_cluster_the_hub_never_knew_has_its_work_let_go_after_a_default_lease(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await _put(store, state, "on-unknown", {"clusterName": "unknown"})
    clock = Clock(NOW)
    d = await _dispatcher_over(store, state, [])
    d.clock = clock
    d.took_over_at = NOW
    clock.now = NOW + UNKNOWN_CLUSTER_LET_GO - timedelta(seconds=1)
    await d.cycle()
    assert d.last_plan is not None and d.last_plan.let_go == []
    clock.now = NOW + UNKNOWN_CLUSTER_LET_GO
    d._expiry_checked_at = None
    await d.cycle()
    await eventually(lambda: "unknown" not in state.by_cluster)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class ConnectedLane:
    closed = False

    def send(
        self, payload: object, *, trace_context: object = None, encoded: object = None
    ) -> None:
        pass
