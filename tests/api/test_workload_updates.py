"""What may not change in a Workload once quota is reserved or a cluster is bound."""

from __future__ import annotations

from api.meta import Condition
from api.v1alpha1.workload import (
    Admission,
    PodSetAssignment,
    ReclaimablePod,
    Workload,
    WorkloadStatus,
    workload_update_errors,
)
from tests.api.test_workload_rules import pod_set, workload


def make(*, reserved: bool = False, **status: object) -> Workload:
    wl = Workload.model_validate(workload(pod_set(count=4)))
    conditions = [Condition(type="QuotaReserved", status="True")] if reserved else []
    wl.status = WorkloadStatus.model_validate({"conditions": conditions, **status})
    return wl


def errors(new: Workload, old: Workload) -> list[str]:
    return [str(e) for e in workload_update_errors(new, old)]


def test_pod_sets_are_immutable_while_quota_is_reserved() -> None:
    old = make(reserved=True)
    new = old.model_copy(deep=True)
    new.spec.pod_sets[0].count = 8
    assert errors(new, old) == [
        'spec.podSets: Invalid value: "": field is immutable while quota is reserved'
    ]
    assert errors(new, make()) == []


def test_the_queue_is_immutable_while_quota_is_reserved() -> None:
    old = make(reserved=True)
    new = old.model_copy(deep=True)
    new.spec.queue_name = "other"
    assert errors(new, old) == [
        'spec.queueName: Invalid value: "other": field is immutable while quota is reserved'
    ]


def test_the_cluster_binding_is_immutable_once_set() -> None:
    old = make(clusterName="east")
    new = make(clusterName="west")
    assert errors(new, old) == [
        'status.clusterName: Invalid value: "west": clusterName is immutable once set'
    ]
    assert errors(make(), old) == []  # cleared on eviction


def test_admission_may_be_set_or_cleared_but_not_edited() -> None:
    admission = Admission(cluster_queue="cq", pod_set_assignments=[PodSetAssignment(count=4)])
    old = make(reserved=True)
    old.status = old.status or WorkloadStatus()
    old.status.admission = admission
    new = old.model_copy(deep=True)
    assert new.status is not None and new.status.admission is not None
    new.status.admission.cluster_queue = "other"
    assert errors(new, old) == ['status.admission: Invalid value: "": field is immutable']
    new.status.admission = None
    assert errors(new, old) == []


def test_reclaimable_pods_only_grow_while_reserved() -> None:
    old = make(reserved=True)
    assert old.status is not None
    old.status.reclaimable_pods = [ReclaimablePod(name="main", count=2)]
    new = old.model_copy(deep=True)
    assert new.status is not None
    new.status.reclaimable_pods = [ReclaimablePod(name="main", count=1)]
    assert errors(new, old) == [
        "status.reclaimablePods[0].count: Invalid value: 1: cannot be less than 2"
    ]
