"""Every pending workload carries a structured reason: what is missing, where, what unblocks."""

from __future__ import annotations

import dataclasses

from agent.engine.result import PendingCode, PendingReason, Shortfall, Unblock
from agent.engine.snapshot import ClusterQueueName, FlavorName, ResourceFlavor, ResourceName
from tests.builders import cohort, cq, flavor, reason_of, run, snapshot, wl


def test_waiting_for_quota_says_which_cell_and_how_much_is_missing() -> None:
    snap = snapshot(
        cqs=[
            cq("a").cohort("c").quota("cpu", nominal="4"),
            cq("b").cohort("c").quota("cpu", nominal="2"),
        ],
        workloads=[
            wl("run").request("cpu", "5").admitted("a"),
            wl("w").queue("a").request("cpu", "2.5"),
        ],
    )
    reason = reason_of(run(snap), "w")
    assert reason.code is PendingCode.WAITING_FOR_QUOTA
    assert reason.unblock is Unblock.QUOTA_RELEASED
    assert reason.shortfalls == (
        Shortfall(FlavorName("default"), ResourceName("cpu"), 2500, 1000, 6000),
    )
    assert reason.shortfalls[0].missing == 1500
    assert "1500m more needed" in reason.message
    assert "cohort c" in reason.message


def test_a_request_larger_than_anything_reachable_needs_a_quota_change() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", nominal="4")],
        workloads=[wl("w").queue("a").request("cpu", "3").count(2)],
    )
    reason = reason_of(run(snap), "w")
    assert reason.code is PendingCode.EXCEEDS_MAX_QUOTA
    assert reason.unblock is Unblock.QUOTA_CHANGED
    assert "request 6 exceeds the maximum 4" in reason.message


def test_no_preemption_candidates_names_the_policy() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", nominal="4").preemption(within="LowerPriority")],
        workloads=[
            wl("run").request("cpu", "4").priority(10).admitted("a"),
            wl("w").queue("a").request("cpu", "1").priority(10),
        ],
    )
    reason = reason_of(run(snap), "w")
    assert reason.code is PendingCode.NO_PREEMPTION_CANDIDATES
    assert "policy" in reason.message


def test_a_queue_referencing_a_missing_flavor_is_inactive() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", "gone", nominal="4")],
        workloads=[wl("w").queue("a").request("cpu", "1")],
    )
    snap = dataclasses.replace(snap, flavors={})
    reason = reason_of(run(snap), "w")
    assert reason.code is PendingCode.CLUSTER_QUEUE_INACTIVE
    assert "gone" in reason.message


def test_an_inactive_workload_waits_for_a_user() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", nominal="4")],
        workloads=[wl("w").queue("a").request("cpu", "1").set(active=False)],
    )
    reason = reason_of(run(snap), "w")
    assert (reason.code, reason.unblock) == (PendingCode.INACTIVE, Unblock.USER_ACTION)


def test_flavors_tried_explain_each_skipped_flavor() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", "gpu-nodes", nominal="4").quota("cpu", "cpu-nodes", nominal="1")],
        flavors=[flavor("gpu-nodes").taint("gpu", "true"), flavor("cpu-nodes")],
        workloads=[wl("w").queue("a").request("cpu", "2")],
    )
    reason = reason_of(run(snap), "w")
    tried = {str(a.flavor): a.reason for a in reason.flavors_tried}
    assert "untolerated taint gpu=true:NoSchedule" in tried["gpu-nodes"]
    assert "more needed" in tried["cpu-nodes"] or "exceeds" in tried["cpu-nodes"]


def test_every_workload_not_admitted_has_a_reason_and_routed_ones_a_position() -> None:
    snap = snapshot(
        cohorts=[cohort("c")],
        cqs=[
            cq("a").cohort("c").quota("cpu", nominal="3").strict_fifo(),
            cq("b").cohort("c").quota("cpu", nominal="3"),
        ],
        workloads=[
            *(wl(f"a{i}").queue("a").request("cpu", str(i % 3 + 1)).created(i) for i in range(6)),
            *(wl(f"b{i}").queue("b").request("cpu", "2").created(i) for i in range(4)),
            wl("lost").queue("nowhere").request("cpu", "1"),
        ],
    )
    result = run(snap)
    admitted = {a.workload for a in result.admitted}
    assert set(result.pending) | admitted == set(snap.workloads)
    assert not set(result.pending) & admitted
    for name in ("a", "b"):
        order = result.queue_order[ClusterQueueName(name)]
        assert all(wid in result.pending for wid in order)
    assert reason_of(result, "lost").code is PendingCode.LOCAL_QUEUE_NOT_FOUND


def test_workloads_waiting_for_the_same_thing_share_one_reason_object() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", nominal="1")],
        workloads=[wl(f"w{i}").queue("a").request("cpu", "2").created(i) for i in range(5)],
    )
    result = run(snap)
    assert len({id(r) for r in result.pending.values()}) == 1


def test_an_unused_flavor_object_does_not_matter() -> None:
    snap = snapshot(
        cqs=[cq("a").quota("cpu", nominal="1")],
        flavors=[flavor("spare")],
        workloads=[wl("w").queue("a").request("cpu", "1")],
    )
    assert ResourceFlavor(FlavorName("spare")) in snap.flavors.values()
    assert [a.workload for a in run(snap).admitted] == ["default/w"]


def test_a_misconfigured_queue_admits_nothing_and_says_why() -> None:
    from agent.engine.snapshot import FlavorQuotas, ResourceGroup, ResourceQuota

    q = cq("a").quota("cpu", nominal="4").build()
    bad = dataclasses.replace(
        q,
        resource_groups=(
            ResourceGroup(
                (ResourceName("cpu"), ResourceName("memory")),
                (FlavorQuotas(FlavorName("default"), {ResourceName("cpu"): ResourceQuota(4000)}),),
            ),
        ),
    )
    snap = snapshot(cqs=[bad], workloads=[wl("w").queue("a").request("cpu", "1")])
    reason = reason_of(run(snap), "w")
    assert reason.code is PendingCode.MISCONFIGURED
    assert "exactly the covered resources" in reason.message


def test_a_reason_written_when_read_equals_the_same_reason_written_out() -> None:
    short = (Shortfall(FlavorName("default"), ResourceName("cpu"), 2500, 1000, 6000),)
    lazy = PendingReason.about_shortfalls(
        PendingCode.WAITING_FOR_QUOTA, "{}; waits in {{a}}", Unblock.QUOTA_RELEASED, short, ()
    )
    text = "insufficient unused quota for cpu in flavor default, 1500m more needed; waits in {a}"
    eager = PendingReason(PendingCode.WAITING_FOR_QUOTA, text, Unblock.QUOTA_RELEASED, short)
    assert lazy == eager and hash(lazy) == hash(eager)
    assert lazy.message == text
    assert lazy != PendingReason(
        PendingCode.WAITING_FOR_QUOTA, "other", Unblock.QUOTA_RELEASED, short
    )
    assert "1500m more needed" in repr(lazy)
