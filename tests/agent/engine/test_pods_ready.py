"""waitForPodsReady timeouts, backoff and deactivation; stop policies; max execution time."""

from __future__ import annotations

from typing import Any

import pytest

from agent.engine.apply import apply_result
from agent.engine.podsready import backoff_seconds
from agent.engine.result import EvictionReason, PendingCode
from agent.engine.snapshot import EngineConfig, RequeueTimestamp, WaitForPodsReady
from tests.builders import admitted_ids, cq, ids, lq, reason_of, run, snapshot, wl


def config(**kw: Any) -> EngineConfig:
    return EngineConfig(wait_for_pods_ready=WaitForPodsReady(enabled=True, **kw))


@pytest.mark.parametrize(
    ("count", "delay"),
    [(1, 60), (2, 120), (3, 240), (6, 1920), (7, 3600), (100, 3600)],
    ids=str,
)
def test_backoff_doubles_from_base_up_to_max(count: int, delay: float) -> None:
    assert backoff_seconds(WaitForPodsReady(), count) == delay


def test_pods_not_ready_within_the_timeout_are_evicted_and_requeued_with_backoff() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").request("cpu", "1").admitted("q", at=0.0)
    snap = snapshot(cqs=[q], workloads=[w], config=config(timeout_seconds=300))
    early = run(snap, now=299)
    assert early.evicted == ()
    assert early.next_wakeup == 300
    (ev,) = run(snap, now=300).evicted
    assert ev.reason is EvictionReason.PODS_READY_TIMEOUT
    assert (ev.requeue_after, ev.requeue_count, ev.requeued_at) == (360, 1, 300)


@pytest.mark.parametrize(
    ("timestamp", "requeued_at"),
    [
        pytest.param(RequeueTimestamp.EVICTION, 300, id="Eviction requeues behind later ones"),
        pytest.param(RequeueTimestamp.CREATION, None, id="Creation keeps its place in the queue"),
    ],
)
def test_the_requeuing_timestamp_decides_the_place_after_a_timeout(
    timestamp: RequeueTimestamp, requeued_at: float | None
) -> None:
    q = cq("q").quota("cpu", nominal="1")
    w = wl("w").request("cpu", "1").created(5).admitted("q", at=0.0)
    later = wl("later").queue("q").request("cpu", "1").created(100)
    cfg = config(timeout_seconds=300, requeue_timestamp=timestamp, backoff_base_seconds=0)
    snap = snapshot(cqs=[q], workloads=[w, later], config=cfg)
    evicted = run(snap, now=300)
    (ev,) = evicted.evicted
    assert ev.requeued_at == requeued_at
    # Once the quota is free and the backoff over, the queue order decides who goes first.
    after = apply_result(snap, evicted)
    first = "later" if timestamp is RequeueTimestamp.EVICTION else "w"
    assert admitted_ids(run(after, now=301)) == ids(first)


def test_a_requeued_workload_waits_out_its_backoff() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").queue("q").request("cpu", "1").set(requeue_after=360.0, requeue_count=1)
    snap = snapshot(cqs=[q], workloads=[w], config=config())
    waiting = run(snap, now=359)
    assert reason_of(waiting, "w").code is PendingCode.BACKOFF
    assert reason_of(waiting, "w").retry_at == 360
    assert waiting.next_wakeup == 360
    assert admitted_ids(run(snap, now=360)) == ids("w")


def test_exceeding_the_requeuing_limit_deactivates() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").request("cpu", "1").admitted("q", at=0.0).set(requeue_count=2)
    snap = snapshot(
        cqs=[q], workloads=[w], config=config(timeout_seconds=10, backoff_limit_count=2)
    )
    (ev,) = run(snap, now=10).evicted
    assert ev.deactivate
    after = apply_result(snap, run(snap, now=10))
    assert reason_of(run(after, now=20), "w").code is PendingCode.INACTIVE


def test_recovery_timeout_applies_when_ready_pods_are_lost() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").request("cpu", "1").admitted("q", at=0.0).set(pods_ready_lost_at=1000.0)
    snap = snapshot(
        cqs=[q], workloads=[w], config=config(timeout_seconds=10, recovery_timeout_seconds=60)
    )
    assert run(snap, now=1059).evicted == ()
    assert run(snap, now=1060).evicted[0].reason is EvictionReason.PODS_READY_TIMEOUT


def test_ready_workloads_are_never_evicted_for_timeouts() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").request("cpu", "1").admitted("q", at=0.0).set(pods_ready=True)
    snap = snapshot(cqs=[q], workloads=[w], config=config(timeout_seconds=10))
    assert run(snap, now=1e6).evicted == ()


def test_block_admission_waits_for_admitted_pods_to_be_ready() -> None:
    q = cq("q").quota("cpu", nominal="4")
    workloads = [
        wl("starting").request("cpu", "1").admitted("q", at=0.0),
        wl("next").queue("q").request("cpu", "1"),
    ]
    snap = snapshot(cqs=[q], workloads=workloads, config=config(block_admission=True))
    result = run(snap, now=1)
    assert admitted_ids(result) == []
    assert reason_of(result, "next").code is PendingCode.WAITING_FOR_PODS_READY


def test_block_admission_admits_one_at_a_time() -> None:
    q = cq("q").quota("cpu", nominal="4")
    workloads = [wl(f"w{i}").queue("q").request("cpu", "1").created(i) for i in range(3)]
    snap = snapshot(cqs=[q], workloads=workloads, config=config(block_admission=True))
    assert admitted_ids(run(snap)) == ids("w0")


def test_hold_and_drain_evicts_admitted_workloads() -> None:
    q = cq("q").quota("cpu", nominal="4").stop("HoldAndDrain")
    other = cq("other").quota("cpu", nominal="4")
    workloads = [
        wl("in-q").request("cpu", "1").admitted("q"),
        wl("via-lq").queue("drained").request("cpu", "1").admitted("other"),
        wl("fine").request("cpu", "1").admitted("other"),
    ]
    snap = snapshot(
        cqs=[q, other], lqs=[lq("drained", "other", stop="HoldAndDrain")], workloads=workloads
    )
    reasons = {e.workload: e.reason for e in run(snap).evicted}
    assert reasons == {
        "default/in-q": EvictionReason.CLUSTER_QUEUE_STOPPED,
        "default/via-lq": EvictionReason.LOCAL_QUEUE_STOPPED,
    }


def test_maximum_execution_time_accumulates_across_admissions() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = (
        wl("w")
        .request("cpu", "1")
        .admitted("q", at=100.0)
        .set(max_execution_seconds=60, accumulated_execution_seconds=50.0)
    )
    snap = snapshot(cqs=[q], workloads=[w])
    assert run(snap, now=109).evicted == ()
    assert run(snap, now=109).next_wakeup == 110
    (ev,) = run(snap, now=110).evicted
    assert ev.reason is EvictionReason.MAXIMUM_EXECUTION_TIME_EXCEEDED
    assert ev.deactivate


def test_a_deactivated_admitted_workload_is_evicted() -> None:
    q = cq("q").quota("cpu", nominal="4")
    w = wl("w").request("cpu", "1").admitted("q").set(active=False)
    (ev,) = run(snapshot(cqs=[q], workloads=[w])).evicted
    assert ev.reason is EvictionReason.DEACTIVATED
