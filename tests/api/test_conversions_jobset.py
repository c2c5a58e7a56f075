"""JobSet (upstream and MultiQ's) → Workload: one pod set per replicated job, of replicas ×
pods per Job, with the Jobs as topology sub-groups; errors point into the JobSet."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from api.k8s.jobset import JobSet as UpstreamJobSet
from api.quantity import Quantity
from api.v1alpha1.conversions import ConversionError, to_workload, workload_from_jobset
from api.v1alpha1.jobset import JobSet as MultiqJobSet
from tests.api.helpers import decoded
from tests.api.test_jobset_upstream import PYTORCH_JOBSET


def upstream(**labels: str) -> UpstreamJobSet:
    body = yaml.safe_load(PYTORCH_JOBSET)
    if labels:
        body["metadata"]["labels"] = labels
    js = decoded(body)
    assert isinstance(js, UpstreamJobSet)
    return js


def multiq(body: dict[str, Any] | None = None) -> MultiqJobSet:
    source = body or yaml.safe_load(PYTORCH_JOBSET)
    source = copy.deepcopy(source)
    source["apiVersion"] = "multiq.dev/v1alpha1"
    spec = source["spec"]
    for key in ("managedBy", "volumeClaimPolicies"):
        spec.pop(key, None)
    spec["failurePolicy"].pop("restartStrategy", None)
    js = decoded(source)
    assert isinstance(js, MultiqJobSet)
    return js


def test_a_pytorch_jobset_becomes_one_pod_set_per_replicated_job() -> None:
    wl = workload_from_jobset(upstream())
    assert wl.metadata.name == "jobset-pytorch"
    assert wl.spec.queue_name == "ml-queue"
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("leader", 1), ("workers", 8)]
    leader, workers = wl.spec.pod_sets
    assert leader.topology_request is not None
    assert leader.topology_request.required == "cloud.provider.com/block"
    assert workers.topology_request is not None
    assert workers.topology_request.pod_index_label == "batch.kubernetes.io/job-completion-index"
    assert workers.topology_request.sub_group_index_label == "jobset.sigs.k8s.io/job-index"
    assert workers.topology_request.sub_group_count == 2
    assert wl.total_requests()["workers"]["nvidia.com/gpu"] == Quantity.parse("64")
    assert wl.semantic_errors() == []


def test_both_jobset_kinds_convert_alike() -> None:
    ours, theirs = workload_from_jobset(multiq()), workload_from_jobset(upstream())
    assert ours.spec.pod_sets == theirs.spec.pod_sets
    assert ours.metadata.annotations["multiq.dev/source-api-version"] == "multiq.dev/v1alpha1"
    assert to_workload(multiq()).spec == ours.spec


def test_a_jobset_without_a_queue_label_is_a_clear_error() -> None:
    with pytest.raises(ConversionError) as info:
        workload_from_jobset(upstream(app="x"))
    assert [str(e) for e in info.value.errors] == [
        "metadata.labels[multiq.dev/queue-name]: Required value: a queue name is required: "
        "label the JobSet with multiq.dev/queue-name (or kueue.x-k8s.io/queue-name) naming a "
        "LocalQueue"
    ]


def test_topology_errors_point_into_the_replicated_job_template() -> None:
    js = upstream()
    annotations = js.spec.replicated_jobs[1].template.spec.template.metadata.annotations
    annotations["kueue.x-k8s.io/podset-slice-required-topology"] = "rack"
    annotations["kueue.x-k8s.io/podset-slice-size"] = "3"
    with pytest.raises(ConversionError) as info:
        workload_from_jobset(js)
    assert [str(e) for e in info.value.errors] == [
        "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
        "[kueue.x-k8s.io/podset-slice-size]: Invalid value: 3: must evenly divide the pod set "
        "count 8"
    ]


def test_a_leader_and_workers_group_is_placed_as_one_unit() -> None:
    js = upstream()
    for rj in js.spec.replicated_jobs:
        annotations = rj.template.spec.template.metadata.annotations
        annotations.clear()
        annotations["kueue.x-k8s.io/podset-required-topology"] = "rack"
        annotations["kueue.x-k8s.io/podset-group-name"] = "ring"
    wl = workload_from_jobset(js)
    assert {
        ps.topology_request.pod_set_group_name for ps in wl.spec.pod_sets if ps.topology_request
    } == {"ring"}
    js.spec.replicated_jobs[0].template.spec.template.metadata.annotations[
        "kueue.x-k8s.io/podset-required-topology"
    ] = "block"
    with pytest.raises(ConversionError) as info:
        workload_from_jobset(js)
    assert [e.path for e in info.value.errors] == [
        "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
        "[kueue.x-k8s.io/podset-group-name]",
        "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
        "[kueue.x-k8s.io/podset-group-name]",
    ]
