"""The hub's pure dispatch cycle: BestFit binds before it offers, AllAtOnce and Incremental ask
for reservations; offers that time out end (a bound one is asked back); a lost cluster's
reservations end at once and its bound work goes only when the fencing rules allow; the
same snapshot gives the same plan and reading it changes nothing."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.v1alpha1.federation import ClusterSet, GlobalQueue, MemberCluster
from api.v1alpha1.queues import LocalQueue
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.placement.book import DispatchBook, DispatchRecord
from hub.placement.cycle import (
    ClusterFacts,
    CycleSettings,
    DispatchPlan,
    Expiry,
    HubSnapshot,
    LetGo,
    dispatch,
    let_go_time,
    record_plan,
)
from hub.placement.routing import Routing
from hub.placement.snapshot import ClusterName, ClusterView, FlavorHeadroom, QueueView

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
CLUSTERS = ("east", "west")


@dataclass
class Entry:
    workload: Workload
    order: tuple[int, float] = (0, 0.0)


def workload(name: str, cpu: str = "1", **status: Any) -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
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
            "status": status or None,
        }
    )


def routing(mode: str = "BestFit", step_size: int | None = None) -> Routing:
    policy: dict[str, Any] = {"type": mode}
    if step_size is not None:
        policy["incremental"] = {"stepSize": step_size}
    return Routing.of(
        local_queues=[
            LocalQueue.model_validate(
                {"metadata": {"name": "q", "namespace": "team"}, "spec": {"clusterQueue": "cq"}}
            )
        ],
        global_queues=[
            GlobalQueue.model_validate(
                {
                    "metadata": {"name": "g"},
                    "spec": {"clusterSet": "all", "dispatchPolicy": policy},
                }
            )
        ],
        tenants=[],
        cluster_sets=[
            ClusterSet.model_validate(
                {"metadata": {"name": "all"}, "spec": {"clusters": list(CLUSTERS)}}
            )
        ],
        members=[
            MemberCluster.model_validate(
                {"metadata": {"name": n}, "spec": {"tokenRef": {"secretName": "t"}}}
            )
            for n in CLUSTERS
        ],
    )


def view(name: str, free_cpu: int, *, connected: bool = True) -> ClusterView:
    flavor = FlavorHeadroom("default", {"cpu": free_cpu * 1000}, {"cpu": 8000})
    return ClusterView(
        ClusterName(name), {}, connected=connected, queues={"cq": QueueView("cq", (flavor,))}
    )


def snapshot(
    workloads: dict[str, Workload],
    *,
    mode: str = "BestFit",
    step_size: int | None = None,
    free: dict[str, int] | None = None,
    book: DispatchBook | None = None,
    facts: dict[str, ClusterFacts] | None = None,
    expiry_checked_at: datetime | None = None,
) -> HubSnapshot:
    free = free or {"east": 2, "west": 6}
    facts = facts or {n: ClusterFacts(n, connected=True) for n in CLUSTERS}
    by_cluster: dict[str, set[str]] = {}
    pending = set()
    for key, wl in workloads.items():
        st = wl.status
        if st is None or not st.cluster_name:
            pending.add(key)
        for cluster in [st.cluster_name, *st.nominated_cluster_names] if st else []:
            if cluster:
                by_cluster.setdefault(cluster, set()).add(key)
    return HubSnapshot(
        workloads={k: Entry(wl) for k, wl in workloads.items()},
        pending=pending,
        by_cluster=by_cluster,
        book=book or DispatchBook(),
        routing=routing(mode, step_size),
        clusters=facts,
        views=[view(n, free[n], connected=facts[n].connected) for n in CLUSTERS],
        usage={},
        config_generation=1,
        settings=CycleSettings(offer_timeout_seconds=30),
        expiry_checked_at=expiry_checked_at,
    )


def test_best_fit_binds_the_cluster_with_the_most_headroom_and_offers_it_there() -> None:
    plan = dispatch(snapshot({"team/a": workload("a")}), NOW)
    (offer,) = plan.offers
    assert (offer.key, offer.clusters, offer.generation) == ("team/a", ("west",), 1)
    assert offer.bound and set(offer.booked) == {"west"}


def test_all_at_once_asks_every_cluster_with_room_to_reserve() -> None:
    plan = dispatch(snapshot({"team/a": workload("a")}, mode="AllAtOnce"), NOW)
    (offer,) = plan.offers
    assert offer.clusters == ("west", "east") and not offer.bound and offer.generation == 1


def test_incremental_asks_a_step_of_clusters_to_reserve() -> None:
    plan = dispatch(snapshot({"team/a": workload("a")}, mode="Incremental", step_size=1), NOW)
    (offer,) = plan.offers
    assert offer.clusters == ("west",) and not offer.bound


def test_each_offer_of_a_cycle_books_its_room_for_the_next() -> None:
    plan = dispatch(snapshot({f"team/w{i}": workload(f"w{i}", "2") for i in range(4)}), NOW)
    # West has 6 free CPUs, east 2: three 2-CPU workloads go west, one east.
    assert sorted(o.clusters[0] for o in plan.offers) == ["east", "west", "west", "west"]


def _open(record: DispatchRecord, **offers: datetime) -> DispatchRecord:
    return replace(record, offers=offers)


def test_offers_unanswered_for_the_timeout_end_and_a_bound_one_is_asked_back() -> None:
    late = NOW - timedelta(seconds=31)
    book = DispatchBook()
    book.put("team/bound", DispatchRecord(offers={"east": late}, bound=True))
    book.put("team/reserve", DispatchRecord(offers={"west": late}, mode="AllAtOnce"))
    book.put("team/queued", DispatchRecord(offers={"west": late}, queued=frozenset({"west"})))
    book.put("team/fresh", DispatchRecord(offers={"west": NOW}, bound=True))
    workloads = {
        "team/bound": transitions.mark_bound_offer(workload("bound"), "east", 1, late),
        "team/reserve": transitions.mark_offered(workload("reserve"), ["west"], 1, late),
        "team/queued": transitions.mark_bound_offer(workload("queued"), "west", 1, late),
        "team/fresh": transitions.mark_bound_offer(workload("fresh"), "west", 1, NOW),
    }
    plan = dispatch(snapshot(workloads, book=book), NOW)
    assert plan.expired == [
        Expiry("team/bound", "east", bound=True),
        Expiry("team/reserve", "west", bound=False),
    ]


def test_offer_timeouts_are_looked_at_no_more_than_every_tenth_of_the_timeout() -> None:
    book = DispatchBook()
    book.put("team/a", DispatchRecord(offers={"east": NOW - timedelta(seconds=60)}, bound=True))
    wl = transitions.mark_bound_offer(workload("a"), "east", 1, NOW)
    recent = NOW - timedelta(seconds=0.5)
    assert (
        dispatch(snapshot({"team/a": wl}, book=book, expiry_checked_at=recent), NOW).expired == []
    )


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (ClusterFacts("c", connected=True), None),
        (ClusterFacts("c", connected=False, lost_since=NOW, fencing=False), None),
        (
            ClusterFacts("c", connected=False, lost_since=NOW, loss_timeout_seconds=60),
            NOW + timedelta(seconds=60),
        ),
        (
            ClusterFacts(
                "c",
                connected=False,
                lost_since=NOW,
                loss_timeout_seconds=60,
                lease_expires=NOW + timedelta(seconds=50),
                grace_seconds=20,
            ),
            NOW + timedelta(seconds=70),
        ),
        (
            ClusterFacts("c", connected=False, member=False, let_go_at=NOW),
            NOW,
        ),
    ],
    ids=["connected", "fencing-off", "loss-timeout", "lease-and-grace", "departed"],
)
def test_when_a_lost_clusters_work_may_run_elsewhere(
    facts: ClusterFacts, expected: datetime | None
) -> None:
    assert let_go_time(facts) == expected


def test_a_lost_clusters_reservations_end_at_once_and_its_bound_work_waits() -> None:
    lost = ClusterFacts(
        "east",
        connected=False,
        lost_since=NOW - timedelta(seconds=5),
        loss_timeout_seconds=60,
        lease_expires=NOW,
        grace_seconds=10,
    )
    facts = {"east": lost, "west": ClusterFacts("west", connected=True)}
    workloads = {
        "team/bound": transitions.mark_bound_offer(workload("bound"), "east", 1, NOW),
        "team/asked": transitions.mark_offered(workload("asked"), ["east", "west"], 1, NOW),
    }
    plan = dispatch(snapshot(workloads, facts=facts), NOW)
    assert [(g.key, g.cluster, g.bound) for g in plan.let_go] == [("team/asked", "east", False)]

    later = NOW + timedelta(seconds=60)
    plan = dispatch(snapshot(workloads, facts=facts), later)
    assert sorted((g.key, g.bound) for g in plan.let_go) == [
        ("team/asked", False),
        ("team/bound", True),
    ]
    assert all(isinstance(g, LetGo) for g in plan.let_go)


def test_a_lost_clusters_bare_pods_are_not_let_go_as_no_deadline_stops_them_there() -> None:
    lost = ClusterFacts("east", connected=False, lost_since=NOW, loss_timeout_seconds=60)
    facts = {"east": lost, "west": ClusterFacts("west", connected=True)}
    pods = workload("pods")
    pods.metadata.annotations["multiq.dev/source-kind"] = "Pod"
    workloads = {
        "team/pods": transitions.mark_bound_offer(pods, "east", 1, NOW),
        "team/job": transitions.mark_bound_offer(workload("job"), "east", 1, NOW),
    }
    later = NOW + timedelta(seconds=3600)
    plan = dispatch(snapshot(workloads, facts=facts), later)
    assert [(g.key, g.bound) for g in plan.let_go] == [("team/job", True)]
    # An admin deleting the MemberCluster lets them go.
    departed = {**facts, "east": ClusterFacts("east", connected=False, member=False, let_go_at=NOW)}
    plan = dispatch(snapshot(workloads, facts=departed), later)
    assert sorted(g.key for g in plan.let_go) == ["team/job", "team/pods"]


def test_the_same_snapshot_gives_the_same_plan_and_reading_it_changes_nothing() -> None:
    book = DispatchBook()
    book.put("team/old", DispatchRecord(offers={"east": NOW - timedelta(seconds=40)}, bound=True))
    workloads = {f"team/w{i}": workload(f"w{i}", str(i % 4 + 1)) for i in range(12)}
    workloads["team/old"] = transitions.mark_bound_offer(workload("old"), "east", 1, NOW)
    snap = snapshot(workloads, book=book)
    before = copy.deepcopy(book)
    first, second = dispatch(snap, NOW), dispatch(snap, NOW)
    assert first == second
    assert book == before


def test_a_deep_parked_group_given_room_for_a_few_per_cycle_is_ordered_once_and_read_on() -> None:
    workloads = {f"team/d{i:02}": workload(f"d{i:02}", "2") for i in range(40)}
    book = DispatchBook()
    fixed = routing()  # one routing, as the shell keeps while the configuration holds
    entries = {k: Entry(wl, (0, i)) for i, (k, wl) in enumerate(sorted(workloads.items()))}

    def cycle(west_free: int) -> DispatchPlan:
        snap = snapshot(workloads, free={"east": 0, "west": west_free}, book=book)
        plan = dispatch(replace(snap, workloads=entries, routing=fixed), NOW)
        record_plan(book, plan, NOW)
        return plan

    first = cycle(0)
    assert len(first.parks) == 40 and not first.offers
    (shape,) = book.groups
    orders = []
    for _ in range(3):
        book.room_grew()  # two 2-CPU slots free up on west each time
        plan = cycle(4)
        offered = [o.key for o in plan.offers]
        orders.append(plan.rankings[shape])
        # The two oldest still waiting go; the next is found not to fit and stays parked,
        # and no other member is looked at.
        assert plan.visited == [*offered, plan.parks[0].key] and len(offered) == 2
        assert len(book.members[shape]) == 40 - 2 * len(orders)
    assert [o.start for o in orders] == [0, 2, 4]
    assert orders[1].ranked is orders[0].ranked is orders[2].ranked  # sorted once
    assert [o.key for o in plan.offers] == ["team/d04", "team/d05"]
    # A member joining the group (here: one given back) orders it afresh.
    book.update("team/d00", parked=shape, parked_as=workloads["team/d00"])
    book.room_grew()
    assert cycle(4).rankings[shape].ranked is not orders[0].ranked
