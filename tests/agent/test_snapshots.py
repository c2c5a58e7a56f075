"""The engine snapshot the shell builds every cycle: converted once, refreshed on a new
status, without finished workloads."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.capacity import capacity_report
from agent.engine.cycle import schedule
from agent.engine.quota import admitted_usage
from agent.engine.snapshot import Admission, ClusterQueueName, ResourceName, WorkloadId
from agent.records import Record, on_offer
from agent.snapshots import SnapshotCache, api_admission
from api.meta import Condition, ObjectMeta
from api.quantity import Quantity
from api.v1alpha1.federation import WaitForPodsReady
from api.v1alpha1.messages import CapacityReport, ConfigSync, NodeSummary, WorkloadPhase
from api.v1alpha1.queues import WorkloadPriorityClass
from api.v1alpha1.workload import WorkloadStatus
from tests.agent.conftest import config, job_source, offer_for


def held_record(name: str, **changes: Any) -> Record:
    record = on_offer(None, offer_for(job_source(name)), 0.0).record
    assert record is not None
    return replace(record, **changes)


def admitted(record: Record, admission: Admission) -> Record:
    """The record with a new status (a new workload object, as every transition makes)."""
    status = WorkloadStatus(admission=api_admission(admission))
    return replace(record, workload=record.workload.model_copy(update={"status": status}))


def test_a_workload_is_converted_once_and_again_only_when_its_status_is_replaced() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": held_record("a")}
    first = cache.build(cfg, held)
    [wl] = first.workloads.values()
    assert wl.admission is None and wl.pod_sets[0].requests[ResourceName("cpu")] == 500
    assert cache.build(cfg, held).workloads[wl.id] is wl  # cached

    snap = cache.build(cfg, held)
    [admit] = schedule(snap, 100.0).admitted
    held["team-a/job-a"] = admitted(held["team-a/job-a"], admit.admission)
    again = cache.build(cfg, held).workloads[wl.id]
    assert again is not wl and again.admission is not None
    assert again.admission.total == admit.admission.total


def test_snapshots_share_the_held_workloads_and_a_later_build_leaves_an_earlier_one_as_it_was() -> (
    None
):
    # A cycle may run in a worker thread over its snapshot while the loop builds the next:
    # the snapshot must not change under it, and must not cost a copy of every held workload.
    cache = SnapshotCache()
    cfg = config()
    held = {f"team-a/job-{n}": held_record(n) for n in "abc"}
    first = cache.build(cfg, held)
    assert cache.build(cfg, held, set()).workloads is first.workloads  # nothing changed: shared
    before = dict(first.workloads)
    [admit, *_] = schedule(first, 100.0).admitted
    key = str(admit.workload)
    held[key] = admitted(held[key], admit.admission)
    del held["team-a/job-c"]
    second = cache.build(cfg, held, {key, "team-a/job-c"})
    assert dict(first.workloads) == before  # the earlier snapshot is as it was
    assert second.workloads[admit.workload].admission is not None
    assert WorkloadId("team-a/job-c") not in second.workloads
    assert len(second.workloads) == 2
    assert set(cache.build(cfg, held, set(), admitted_only=True).workloads) == {admit.workload}


def test_a_workload_converted_again_for_its_status_keeps_its_pod_sets_until_its_spec_changes() -> (
    None
):
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": held_record("a")}
    snap = cache.build(cfg, held)
    [wl] = snap.workloads.values()
    [admit] = schedule(snap, 100.0).admitted
    held["team-a/job-a"] = admitted(held["team-a/job-a"], admit.admission)
    again = cache.build(cfg, held).workloads[wl.id]
    assert again.admission is not None and again.pod_sets is wl.pod_sets

    record = held["team-a/job-a"]
    spec = record.workload.spec
    bigger = spec.model_copy(
        update={"pod_sets": [spec.pod_sets[0].model_copy(update={"count": 3})]}
    )
    held["team-a/job-a"] = replace(
        record, workload=record.workload.model_copy(update={"spec": bigger})
    )
    resized = cache.build(cfg, held).workloads[wl.id]
    assert [ps.count for ps in resized.pod_sets] == [3]


def with_pods_ready(record: Record) -> Record:
    """The record as a status pass leaves it once its pods are ready: a new status with a
    PodsReady condition, all else the same objects (records._with_pods_ready)."""
    status = record.workload.status
    assert status is not None
    ready = Condition(
        type="PodsReady", status="True", reason="PodsReady", last_transition_time=datetime.now(UTC)
    )
    conditions = [*(c for c in status.conditions if c.type != "PodsReady"), ready]
    status = status.model_copy(update={"conditions": conditions})
    return replace(record, workload=record.workload.model_copy(update={"status": status}))


def config_waiting_for_pods() -> ConfigSync:
    return config().model_copy(update={"wait_for_pods_ready": WaitForPodsReady()})


def test_a_status_whose_conditions_alone_change_keeps_its_converted_admission() -> None:
    cache = SnapshotCache()
    cfg = config_waiting_for_pods()
    held = {"team-a/job-a": held_record("a")}
    snap = cache.build(cfg, held)
    [admit] = schedule(snap, 100.0).admitted
    held["team-a/job-a"] = admitted(held["team-a/job-a"], admit.admission)
    converted = cache.build(cfg, held).workloads[admit.workload]
    assert converted.admission is not None and not converted.pods_ready

    def with_status(record: Record, status: WorkloadStatus) -> Record:
        return replace(record, workload=record.workload.model_copy(update={"status": status}))

    record = held["team-a/job-a"]
    status = record.workload.status
    assert status is not None
    ready = Condition(
        type="PodsReady", status="True", reason="PodsReady", last_transition_time=datetime.now(UTC)
    )
    held["team-a/job-a"] = with_status(
        record, status.model_copy(update={"conditions": [*status.conditions, ready]})
    )
    again = cache.build(cfg, held).workloads[admit.workload]
    assert again.pods_ready and again.admission is converted.admission

    # A new admission object (the same assignment, made again) is converted anew, and an
    # admission taken off is gone.
    readmitted = status.model_copy(update={"admission": api_admission(admit.admission)})
    held["team-a/job-a"] = with_status(record, readmitted)
    anew = cache.build(cfg, held).workloads[admit.workload]
    assert anew.admission == converted.admission and anew.admission is not converted.admission
    held["team-a/job-a"] = with_status(record, status.model_copy(update={"admission": None}))
    assert cache.build(cfg, held).workloads[admit.workload].admission is None


def test_without_wait_for_pods_ready_a_workloads_pods_becoming_ready_changes_nothing_the_engine_sees() -> (
    None
):
    cache = SnapshotCache()
    cfg = config(cpu="500m")  # room for one of the three, the others wait
    held = {f"team-a/job-{n}": held_record(n) for n in "abc"}
    first = cache.build(cfg, held)
    result = cache.cycle(first)(100.0)
    admit = result.admitted[0]
    key = str(admit.workload)
    held[key] = admitted(held[key], admit.admission)
    before = cache.build(cfg, held, {key})
    cache.cycle(before)(101.0)
    view = before.workloads[admit.workload]

    held[key] = with_pods_ready(held[key])
    after = cache.build(cfg, held, {key})
    # The view is kept as it was (not converted again): the next cycle has nothing new.
    assert after.workloads[admit.workload] is view and not view.pods_ready
    assert cache.cycle(after)(102.0).pending_changed == {}
    # What a conversion from scratch makes of it differs only in what the engine does not
    # read without waitForPodsReady.
    scratch = SnapshotCache().build(cfg, held).workloads[admit.workload]
    assert scratch.pods_ready
    assert replace(scratch, pods_ready=False) == view

    # Turning waitForPodsReady on converts every workload anew: PodsReady is seen.
    waiting = cfg.model_copy(update={"wait_for_pods_ready": WaitForPodsReady(), "revision": 2})
    assert cache.build(waiting, held, set()).workloads[admit.workload].pods_ready


def test_a_status_change_beside_pods_ready_is_converted_without_wait_for_pods_ready() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": held_record("a")}
    [admit] = schedule(cache.build(cfg, held), 100.0).admitted
    held["team-a/job-a"] = admitted(held["team-a/job-a"], admit.admission)
    view = cache.build(cfg, held).workloads[admit.workload]
    ready = with_pods_ready(held["team-a/job-a"])
    status = ready.workload.status
    assert status is not None
    # PodsReady and an eviction in one new status: the eviction is the engine's to see.
    evicted = Condition(
        type="Evicted", status="True", reason="Preempted", last_transition_time=datetime.now(UTC)
    )
    both = status.model_copy(update={"conditions": [*status.conditions, evicted]})
    held["team-a/job-a"] = replace(
        ready, workload=ready.workload.model_copy(update={"status": both})
    )
    again = cache.build(cfg, held).workloads[admit.workload]
    assert again is not view and again.evicting


def test_finished_workloads_hold_no_quota_and_a_new_config_reconverts() -> None:
    cache = SnapshotCache()
    held = {
        "team-a/job-a": held_record("a", phase=WorkloadPhase.SUCCEEDED),
        "team-a/job-b": held_record("b", preempting=True),
    }
    snap = cache.build(config(), held)
    assert list(snap.workloads) == ["team-a/job-b"]
    assert snap.workloads[WorkloadId("team-a/job-b")].preempting
    bigger = cache.build(config(revision=2, cpu="9"), held)
    [quota] = (
        bigger.cluster_queues[ClusterQueueName("cq")]
        .resource_groups[0]
        .flavors[0]
        .resources.values()
    )
    assert quota.nominal == 9000


def test_a_config_pushed_again_unchanged_keeps_every_conversion_and_the_cycle_incremental() -> None:
    cache = SnapshotCache()
    cfg = config(cpu="0")  # nothing fits: all wait
    held = {f"team-a/job-{n}": held_record(n) for n in "abc"}
    first = cache.build(cfg, held)
    cache.cycle(first)(100.0)
    # The hub pushes a new ConfigSync (a new revision) when only a queue's status changed.
    again = cache.build(config(revision=2, cpu="0"), held, set())
    assert all(again.workloads[w] is first.workloads[w] for w in first.workloads)
    assert again.cluster_queues is first.cluster_queues
    assert cache.cycle(again)(101.0).pending_changed == {}


def test_a_new_priority_class_value_converts_the_workloads_again() -> None:
    cache = SnapshotCache()
    held = {"team-a/job-a": held_record("a")}
    held["team-a/job-a"].workload.spec.priority_class_name = "high"
    low = WorkloadPriorityClass(metadata=ObjectMeta(name="high"), value=1)
    cfg = config().model_copy(update={"workload_priority_classes": [low]})
    [wl] = cache.build(cfg, held).workloads.values()
    assert wl.priority == 1
    high = cfg.model_copy(
        update={"workload_priority_classes": [low.model_copy(update={"value": 9})]}
    )
    assert cache.build(high, held, set()).workloads[wl.id].priority == 9
    same = high.model_copy(update={"revision": 3})
    assert cache.build(same, held, set()).workloads[wl.id].priority == 9


def test_a_build_told_what_changed_equals_a_build_from_scratch() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {f"team-a/job-{n}": held_record(n) for n in "abcd"}
    first = cache.build(cfg, held)
    assert len(first.workloads) == 4

    [admit, *_] = schedule(first, 100.0).admitted
    admitted_key = str(admit.workload)
    held[admitted_key] = admitted(held[admitted_key], admit.admission)
    finished_key = next(k for k in held if k != admitted_key)
    held[finished_key] = replace(held[finished_key], phase=WorkloadPhase.SUCCEEDED)
    removed_key = next(k for k in held if k not in (admitted_key, finished_key))
    del held[removed_key]
    held["team-a/job-e"] = held_record("e")
    held["team-a/job-d"] = replace(held["team-a/job-d"], preempting=True)
    changed = {admitted_key, finished_key, removed_key, "team-a/job-e", "team-a/job-d"}

    told = cache.build(cfg, held, changed)
    scratch = SnapshotCache().build(cfg, held)
    assert told.workloads == scratch.workloads
    assert WorkloadId(finished_key) not in told.workloads
    assert WorkloadId(removed_key) not in told.workloads
    assert told.workloads[WorkloadId("team-a/job-d")].preempting
    assert told.workloads[WorkloadId(admitted_key)].admission is not None


def test_a_build_told_nothing_changed_reuses_every_conversion() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": held_record("a")}
    [wl] = cache.build(cfg, held).workloads.values()
    held["team-a/job-a"] = replace(held["team-a/job-a"], phase=WorkloadPhase.SUCCEEDED)
    # Not told: the snapshot keeps it.
    assert list(cache.build(cfg, held, set()).workloads.values()) == [wl]
    assert not cache.build(cfg, held, {"team-a/job-a"}).workloads


def test_a_record_change_the_engine_cannot_see_leaves_its_next_cycle_nothing_to_look_at() -> None:
    cache = SnapshotCache()
    cfg = config(cpu="0")  # nothing fits: all wait
    held = {f"team-a/job-{n}": held_record(n) for n in "abc"}
    first = cache.build(cfg, held)
    result = cache.cycle(first)(100.0)
    assert set(result.pending) == set(first.workloads)
    # A report sent (the record changes, its workload does not), and a status replaced by
    # an equal one (a new object the engine converts to the same workload).
    held["team-a/job-a"] = replace(held["team-a/job-a"], pending_reported_at=100.0)
    b = held["team-a/job-b"].workload
    copied = b.model_copy(update={"status": (b.status or WorkloadStatus()).model_copy()})
    held["team-a/job-b"] = replace(held["team-a/job-b"], workload=copied)
    again = cache.build(cfg, held, {"team-a/job-a", "team-a/job-b"})
    assert again.workloads == first.workloads
    assert all(again.workloads[w] is first.workloads[w] for w in first.workloads)
    assert cache.cycle(again)(101.0).pending_changed == {}


def test_a_capacity_report_over_the_admitted_workloads_alone_equals_one_over_all() -> None:
    cache = SnapshotCache()
    cfg = config(cpu="2")
    held = {f"team-a/job-{n}": held_record(n) for n in "abcdef"}
    nodes = NodeSummary(total=1, ready=1, schedulable=1)
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def both(changed: set[str] | None) -> tuple[CapacityReport, CapacityReport]:
        counted = SnapshotCache().build(cfg, held)  # every workload, from scratch
        admitted = cache.build(cfg, held, changed, admitted_only=True)
        assert set(admitted.workloads) == {
            w for w, wl in counted.workloads.items() if wl.admission is not None
        }
        assert cache.admitted_usage() == admitted_usage(counted.workloads.values())
        kept = capacity_report(
            cluster="c",
            snapshot=admitted,
            nodes=nodes,
            observed_at=at,
            config_revision=1,
            usage=cache.admitted_usage(),
        )
        reports = tuple(
            capacity_report(cluster="c", snapshot=s, nodes=nodes, observed_at=at, config_revision=1)
            for s in (counted, admitted)
        )
        assert kept == reports[1]
        return reports  # type: ignore[return-value]

    first, alone = both(None)
    assert first == alone and first.queues[0].usage == Quantity(0)
    admits = schedule(cache.build(cfg, held), 100.0).admitted
    for admit in admits:
        key = str(admit.workload)
        held[key] = admitted(held[key], admit.admission)
    report, alone = both({str(a.workload) for a in admits})
    assert report == alone and report.queues[0].usage == Quantity.parse("2")
    done, gone = str(admits[0].workload), str(admits[1].workload)
    held[done] = replace(held[done], phase=WorkloadPhase.SUCCEEDED)
    del held[gone]
    report, alone = both({done, gone})
    assert report == alone and report.queues[0].usage == Quantity.parse("1")


def test_a_cycle_over_a_few_changes_on_the_last_carry_is_small_and_a_rebuild_or_a_burst_is_not() -> (
    None
):
    cache = SnapshotCache()
    cfg = config(cpu="0")  # nothing fits: all wait
    held = {f"team-a/job-{n}": held_record(n) for n in "abc"}
    first = cache.build(cfg, held)
    assert not cache.next_cycle_is_small()  # (no carry yet: a rebuild)
    cache.cycle(first)(100.0)
    held["team-a/job-d"] = held_record("d")
    again = cache.build(cfg, held, {"team-a/job-d"})
    assert cache.next_cycle_is_small()
    cache.cycle(again)(101.0)

    burst = {f"team-a/job-x{i}": held_record(f"x{i}") for i in range(100)}
    held.update(burst)
    cache.build(cfg, held, set(burst))
    assert not cache.next_cycle_is_small()


@pytest.mark.parametrize("seed", range(6))
def test_the_usage_kept_as_workloads_come_and_go_equals_a_sum_over_the_admitted(seed: int) -> None:
    rng = random.Random(seed)
    cache = SnapshotCache()
    cfgs = [config(cpu="3"), config(revision=2, cpu="5")]
    cfg = cfgs[0]
    held: dict[str, Record] = {}
    names = [f"w{i}" for i in range(12)]
    for _ in range(60):
        changed: set[str] | None = set()
        roll = rng.random()
        if roll < 0.4:
            name = rng.choice(names)
            held[f"team-a/job-{name}"] = held_record(name)
            changed = {f"team-a/job-{name}"}
        elif roll < 0.65:
            admits = schedule(cache.build(cfg, held, set()), 100.0).admitted
            for admit in admits:
                key = str(admit.workload)
                held[key] = admitted(held[key], admit.admission)
            changed = {str(admit.workload) for admit in admits}
        elif roll < 0.85 and held:
            key = rng.choice(sorted(held))
            if rng.random() < 0.5:
                held[key] = replace(held[key], phase=WorkloadPhase.SUCCEEDED)
            else:
                del held[key]
            changed = {key}
        elif roll < 0.92:
            cfg = rng.choice(cfgs)  # a new config object: a rebuild
        else:
            changed = None  # the shell cannot name what changed
        snapshot = cache.build(cfg, held, changed)
        assert cache.admitted_usage() == admitted_usage(snapshot.workloads.values())
        scratch = SnapshotCache().build(cfg, held)
        assert cache.admitted_usage() == admitted_usage(scratch.workloads.values())
