"""Placement offers a workload to the cluster with the most headroom in its cluster queue,
skips clusters that are lost, cordoned, excluded or already tried, and explains every cluster."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from api.k8s.core import LabelSelectorRequirement
from hub.placement.core import TIMEOUT_RETRY_SECONDS, place
from hub.placement.plan import Placement, Verdict
from hub.placement.snapshot import (
    ClusterName,
    ClusterView,
    DispatchMode,
    FlavorHeadroom,
    Offer,
    PlacementRequest,
    PreferredTerm,
    QueueView,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CPU = 1000  # one core in milli-units


def cluster(
    name: str,
    free_cpu: int,
    *,
    capacity_cpu: int = 16,
    connected: bool = True,
    cordoned: bool = False,
    labels: dict[str, str] | None = None,
    queue: str = "team-a",
) -> ClusterView:
    flavor = FlavorHeadroom("default", {"cpu": free_cpu * CPU}, {"cpu": capacity_cpu * CPU})
    return ClusterView(
        ClusterName(name),
        labels or {},
        connected=connected,
        cordoned=cordoned,
        queues={queue: QueueView(queue, (flavor,))},
    )


def request(cpu: int, *clusters: str, **changes: Any) -> PlacementRequest:
    names = clusters or ("a", "b", "c")
    base = PlacementRequest(
        workload="team-a/job",
        cluster_queue="team-a",
        requests={"cpu": cpu * CPU},
        cluster_set=frozenset(ClusterName(n) for n in names),
    )
    return replace(base, **changes)


def verdict_of(placement: Placement, name: str) -> Verdict:
    for v in placement.verdicts:
        if v.cluster == name:
            return v.verdict
    raise AssertionError(name)


def test_the_cluster_with_the_most_headroom_left_gets_the_offer() -> None:
    p = place([cluster("a", 4), cluster("b", 12), cluster("c", 8)], request(2), NOW)
    assert p.offer_to == ("b",)


def test_headroom_is_measured_relative_to_the_flavor_capacity() -> None:
    small = cluster("a", 6, capacity_cpu=8)  # 4 of 8 left = 50%
    large = cluster("b", 10, capacity_cpu=64)  # 8 of 64 left = 12.5%
    assert place([small, large], request(2, "a", "b"), NOW).offer_to == ("a",)


def test_disconnected_and_cordoned_clusters_are_skipped_with_a_reason() -> None:
    p = place(
        [cluster("a", 16, connected=False), cluster("b", 16, cordoned=True), cluster("c", 2)],
        request(1),
        NOW,
    )
    assert p.offer_to == ("c",)
    assert verdict_of(p, "a") is Verdict.DISCONNECTED
    assert verdict_of(p, "b") is Verdict.CORDONED


def test_clusters_outside_the_cluster_set_are_never_offered() -> None:
    p = place([cluster("a", 16), cluster("z", 16)], request(1, "a"), NOW)
    assert p.offer_to == ("a",)
    assert verdict_of(p, "z") is Verdict.NOT_IN_CLUSTER_SET


def test_a_cluster_that_rejected_the_workload_is_not_offered_it_again() -> None:
    offers = (Offer(ClusterName("b"), NOW - timedelta(seconds=5), "rejected", "no quota"),)
    p = place([cluster("a", 4), cluster("b", 12)], request(2, offers=offers), NOW)
    assert p.offer_to == ("a",)
    assert verdict_of(p, "b") is Verdict.REJECTED


def test_a_cluster_that_timed_out_is_tried_again_after_the_retry_interval() -> None:
    late = NOW - timedelta(seconds=TIMEOUT_RETRY_SECONDS)
    recent = NOW - timedelta(seconds=TIMEOUT_RETRY_SECONDS - 1)
    timed_out = (Offer(ClusterName("a"), late, "timeout"),)
    assert place([cluster("a", 8)], request(2, "a", offers=timed_out), NOW).offer_to == ("a",)
    timed_out = (Offer(ClusterName("a"), recent, "timeout"),)
    p = place([cluster("a", 8)], request(2, "a", offers=timed_out), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "a") is Verdict.TIMED_OUT


def test_best_fit_waits_while_an_offer_is_open() -> None:
    offers = (Offer(ClusterName("b"), NOW - timedelta(seconds=5)),)
    p = place([cluster("a", 4), cluster("b", 12)], request(2, offers=offers), NOW)
    assert p.offer_to == ()
    assert p.waiting_reason == "waiting for the clusters it was offered to"


def test_a_workload_too_large_for_now_waits_at_the_hub() -> None:
    p = place([cluster("a", 2), cluster("b", 3)], request(4, "a", "b"), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "a") is Verdict.INSUFFICIENT_HEADROOM
    assert p.waiting_reason == "no cluster can take it now: 2 InsufficientHeadroom"


def test_the_only_cluster_that_can_run_a_workload_gets_it_queued_even_when_full() -> None:
    p = place([cluster("a", 2), cluster("b", 16, queue="other")], request(4, "a", "b"), NOW)
    assert p.offer_to == ("a",)
    assert verdict_of(p, "a") is Verdict.ONLY_CLUSTER
    assert verdict_of(p, "b") is Verdict.NO_SUCH_QUEUE


def test_a_full_cluster_is_not_chosen_while_a_disconnected_one_may_come_back() -> None:
    p = place([cluster("a", 2), cluster("b", 16, connected=False)], request(4, "a", "b"), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "a") is Verdict.INSUFFICIENT_HEADROOM


def test_a_connected_cluster_yet_to_report_its_capacity_is_not_ruled_out() -> None:
    # A hub that just took over hears capacity reports one by one: the first cluster to
    # report must not be taken for the only one that can run what does not fit it now.
    silent = replace(cluster("b", 0), queues={}, reported=False)
    p = place([cluster("a", 2), silent], request(4, "a", "b"), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "b") is Verdict.AWAITING_CAPACITY
    assert verdict_of(p, "a") is Verdict.INSUFFICIENT_HEADROOM


def test_a_cluster_that_rejected_the_workload_leaves_the_other_as_the_only_one() -> None:
    offers = (Offer(ClusterName("b"), NOW - timedelta(seconds=5), "rejected", "no quota"),)
    p = place([cluster("a", 2), cluster("b", 2)], request(4, "a", "b", offers=offers), NOW)
    assert p.offer_to == ("a",)


def test_a_workload_larger_than_any_cluster_says_so() -> None:
    p = place([cluster("a", 16), cluster("b", 16)], request(32, "a", "b"), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "a") is Verdict.NEVER_FITS
    assert p.waiting_reason == "too large for every cluster of its cluster set"


def test_partial_admission_lets_a_workload_go_where_its_minimum_fits() -> None:
    req = request(8, "a", min_requests={"cpu": 2 * CPU})
    assert place([cluster("a", 3)], req, NOW).offer_to == ("a",)


def test_a_cluster_without_the_cluster_queue_is_skipped() -> None:
    p = place([cluster("a", 16, queue="other"), cluster("b", 1)], request(1, "a", "b"), NOW)
    assert p.offer_to == ("b",)
    assert verdict_of(p, "a") is Verdict.NO_SUCH_QUEUE


def test_required_cluster_affinity_filters_by_cluster_labels() -> None:
    east = LabelSelectorRequirement(key="region", operator="In", values=["east"])
    clusters = [
        cluster("a", 16, labels={"region": "west"}),
        cluster("b", 2, labels={"region": "east"}),
    ]
    p = place(clusters, request(1, "a", "b", required_terms=((east,),)), NOW)
    assert p.offer_to == ("b",)
    assert verdict_of(p, "a") is Verdict.AFFINITY_MISMATCH


def test_preferred_cluster_affinity_outweighs_headroom() -> None:
    east = LabelSelectorRequirement(key="region", operator="In", values=["east"])
    clusters = [
        cluster("a", 16, labels={"region": "west"}),
        cluster("b", 2, labels={"region": "east"}),
    ]
    pref = (PreferredTerm(50, (east,)),)
    assert place(clusters, request(1, "a", "b", preferred_terms=pref), NOW).offer_to == ("b",)


def test_all_at_once_offers_to_every_cluster_with_room_best_first() -> None:
    clusters = [cluster("a", 4), cluster("b", 12), cluster("c", 1)]
    p = place(clusters, request(2, mode=DispatchMode.ALL_AT_ONCE), NOW)
    assert p.offer_to == ("b", "a")


def test_incremental_adds_a_step_of_clusters_each_interval() -> None:
    clusters = [cluster("a", 4), cluster("b", 12), cluster("c", 8)]
    first = place(clusters, request(2, mode=DispatchMode.INCREMENTAL, step_size=1), NOW)
    assert first.offer_to == ("b",)
    open_offer = (Offer(ClusterName("b"), NOW),)
    early = place(
        clusters,
        request(2, mode=DispatchMode.INCREMENTAL, interval_seconds=60, offers=open_offer),
        NOW + timedelta(seconds=20),
    )
    assert early.offer_to == ()
    assert early.retry_after_seconds == 40
    later = place(
        clusters,
        request(2, mode=DispatchMode.INCREMENTAL, interval_seconds=60, offers=open_offer),
        NOW + timedelta(seconds=61),
    )
    assert later.offer_to == ("c",)


def test_placement_is_deterministic_for_equal_scores() -> None:
    clusters = [cluster("c", 8), cluster("a", 8), cluster("b", 8)]
    assert place(clusters, request(1), NOW).offer_to == ("a",)


# --- taking back lent quota ------------------------------------------------------------------


def lent(
    name: str, free_cpu: int, unused_nominal_cpu: int, *, reclaims: bool = True
) -> ClusterView:
    """A cluster whose queue has `unused_nominal_cpu` of its nominal quota lent out (others
    in its cohort borrow it) and `free_cpu` free now."""
    flavor = FlavorHeadroom(
        "default",
        {"cpu": free_cpu * CPU},
        {"cpu": 16 * CPU},
        {"cpu": unused_nominal_cpu * CPU},
    )
    return ClusterView(
        ClusterName(name),
        {},
        connected=True,
        queues={"team-a": QueueView("team-a", (flavor,), reclaims=reclaims)},
    )


def test_when_no_cluster_has_room_the_queue_takes_back_lent_quota_in_one_cluster() -> None:
    p = place([lent("a", 0, 2), lent("b", 0, 6)], request(2, "a", "b"), NOW)
    assert p.offer_to == ("b",)  # the most quota left to take back after it
    assert verdict_of(p, "b") is Verdict.RECLAIM
    assert verdict_of(p, "a") is Verdict.RECLAIM  # could too, not offered: one preempts
    [said] = [v.message for v in p.verdicts if v.cluster == "b"]
    assert "may take back quota it lent to its cohort in flavor 'default'" in said


def test_a_cluster_with_room_now_goes_before_taking_back_lent_quota() -> None:
    p = place([lent("a", 0, 6), lent("b", 3, 0)], request(2, "a", "b"), NOW)
    assert p.offer_to == ("b",)
    assert verdict_of(p, "b") is Verdict.CANDIDATE
    assert verdict_of(p, "a") is Verdict.RECLAIM


def test_lent_quota_is_taken_back_in_one_cluster_only_whatever_the_dispatch_mode() -> None:
    for mode in (DispatchMode.ALL_AT_ONCE, DispatchMode.INCREMENTAL):
        p = place([lent("a", 0, 4), lent("b", 0, 4)], request(2, "a", "b", mode=mode), NOW)
        assert len(p.offer_to) == 1, mode


def test_a_queue_that_does_not_reclaim_or_asks_more_than_it_lent_waits() -> None:
    p = place(
        [lent("a", 0, 6, reclaims=False), lent("b", 0, 6, reclaims=False)],
        request(2, "a", "b"),
        NOW,
    )
    assert p.offer_to == ()
    assert verdict_of(p, "a") is Verdict.INSUFFICIENT_HEADROOM
    p = place([lent("a", 0, 1), lent("b", 0, 1)], request(2, "a", "b"), NOW)
    assert p.offer_to == ()
    assert verdict_of(p, "b") is Verdict.INSUFFICIENT_HEADROOM


def test_when_no_cluster_has_room_lower_priorities_of_its_queue_make_it_in_one_cluster() -> None:
    lower = {
        ClusterName("a"): {"default": {"cpu": 1 * CPU}},
        ClusterName("b"): {"default": {"cpu": 4 * CPU}},
    }
    p = place([cluster("a", 1), cluster("b", 0)], request(2, "a", "b", preemptible=lower), NOW)
    assert p.offer_to == ("b",)  # a: 1 free + 1 lower = 2 leaves 0; b: 0 + 4 leaves 2
    assert verdict_of(p, "b") is Verdict.PREEMPT
    assert verdict_of(p, "a") is Verdict.PREEMPT
    without = place([cluster("a", 1), cluster("b", 0)], request(2, "a", "b"), NOW)
    assert without.offer_to == ()


def test_taking_back_lent_quota_goes_before_preempting_lower_priorities() -> None:
    lower = {ClusterName("a"): {"default": {"cpu": 8 * CPU}}}
    p = place([cluster("a", 0), lent("b", 0, 2)], request(2, "a", "b", preemptible=lower), NOW)
    assert p.offer_to == ("b",)
    assert verdict_of(p, "b") is Verdict.RECLAIM
