"""The engine snapshot the shell builds every cycle: converted once, refreshed on a new
status, without finished workloads."""

from __future__ import annotations

from agent.engine.cycle import schedule
from agent.engine.snapshot import ClusterQueueName, ResourceName, WorkloadId
from agent.snapshots import SnapshotCache, api_admission
from agent.state import Held
from api.v1alpha1.messages import WorkloadPhase
from api.v1alpha1.workload import WorkloadStatus
from tests.agent.conftest import config, job_source, offer_for


def test_a_workload_is_converted_once_and_again_only_when_its_status_is_replaced() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": Held(offer=offer_for(job_source("a")))}
    first = cache.build(cfg, held, ())
    [wl] = first.workloads.values()
    assert wl.admission is None and wl.pod_sets[0].requests[ResourceName("cpu")] == 500
    assert cache.build(cfg, held, ()).workloads[wl.id] is wl  # cached

    snap = cache.build(cfg, held, ())
    [admit] = schedule(snap, 100.0).admitted
    held["team-a/job-a"].offer.workload.status = WorkloadStatus(
        admission=api_admission(admit.admission)
    )
    again = cache.build(cfg, held, ()).workloads[wl.id]
    assert again is not wl and again.admission is not None
    assert again.admission.total == admit.admission.total


def test_finished_workloads_hold_no_quota_and_a_new_config_reconverts() -> None:
    cache = SnapshotCache()
    held = {
        "team-a/job-a": Held(offer=offer_for(job_source("a")), phase=WorkloadPhase.SUCCEEDED),
        "team-a/job-b": Held(offer=offer_for(job_source("b"))),
    }
    snap = cache.build(config(), held, ["team-a/job-b"])
    assert list(snap.workloads) == ["team-a/job-b"]
    assert snap.workloads[WorkloadId("team-a/job-b")].preempting
    bigger = cache.build(config(revision=2, cpu="9"), held, ())
    [quota] = (
        bigger.cluster_queues[ClusterQueueName("cq")]
        .resource_groups[0]
        .flavors[0]
        .resources.values()
    )
    assert quota.nominal == 9000


def test_a_build_told_what_changed_equals_a_build_from_scratch() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {f"team-a/job-{n}": Held(offer=offer_for(job_source(n))) for n in "abcd"}
    first = cache.build(cfg, held, ())
    assert len(first.workloads) == 4

    [admit, *_] = schedule(first, 100.0).admitted
    admitted_key = str(admit.workload)
    held[admitted_key].offer.workload.status = WorkloadStatus(
        admission=api_admission(admit.admission)
    )
    finished_key = next(k for k in held if k != admitted_key)
    held[finished_key].phase = WorkloadPhase.SUCCEEDED
    removed_key = next(k for k in held if k not in (admitted_key, finished_key))
    del held[removed_key]
    held["team-a/job-e"] = Held(offer=offer_for(job_source("e")))
    changed = {admitted_key, finished_key, removed_key, "team-a/job-e", "team-a/job-d"}

    told = cache.build(cfg, held, ["team-a/job-d"], changed)
    scratch = SnapshotCache().build(cfg, held, ["team-a/job-d"])
    assert told.workloads == scratch.workloads
    assert WorkloadId(finished_key) not in told.workloads
    assert WorkloadId(removed_key) not in told.workloads
    assert told.workloads[WorkloadId("team-a/job-d")].preempting
    assert told.workloads[WorkloadId(admitted_key)].admission is not None


def test_a_build_told_nothing_changed_reuses_every_conversion() -> None:
    cache = SnapshotCache()
    cfg = config()
    held = {"team-a/job-a": Held(offer=offer_for(job_source("a")))}
    [wl] = cache.build(cfg, held, ()).workloads.values()
    held["team-a/job-a"].phase = WorkloadPhase.SUCCEEDED  # not told: the snapshot keeps it
    assert list(cache.build(cfg, held, (), set()).workloads.values()) == [wl]
    assert not cache.build(cfg, held, (), {"team-a/job-a"}).workloads
