"""batch/v1 Job → Workload: the count Kueue computes, Indexed jobs, Kueue's and MultiQ's labels
and annotations, and errors addressed into the Job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from api.errors import FieldError, ObjectInvalidError, Path
from api.k8s.batch import Job
from api.k8s.pod import PodTemplateSpec, pod_template_errors
from api.quantity import Quantity
from api.v1alpha1 import workload as workload_module
from api.v1alpha1.conversions import ConversionError, to_workload, workload_from_job
from api.v1alpha1.workload import Workload
from tests.api.helpers import decoded

INDEXED_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: sweep
  namespace: vision
  uid: 0b6b1f8e-1111-2222-3333-444455556666
  labels:
    kueue.x-k8s.io/queue-name: vision
    multiq.dev/priority-class: experiment
    multiq.dev/max-exec-time-seconds: "7200"
  annotations:
    kueue.x-k8s.io/job-min-parallelism: "2"
spec:
  parallelism: 4
  completions: 8
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/block
        kueue.x-k8s.io/podset-slice-required-topology: cloud.provider.com/rack
        kueue.x-k8s.io/podset-slice-size: "2"
    spec:
      restartPolicy: Never
      initContainers:
        - name: stage
          image: busybox
          resources: {requests: {cpu: "4"}}
      containers:
        - name: trial
          image: python:3.11-slim
          resources:
            requests: {cpu: "2", memory: 8Gi}
            limits: {nvidia.com/gpu: "1"}
"""


def job(text: str = INDEXED_JOB, **changes: Any) -> Job:
    body = yaml.safe_load(text)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = body
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    obj = decoded(body)
    assert isinstance(obj, Job)
    return obj


def errors(j: Job, **kwargs: Any) -> list[str]:
    with pytest.raises(ConversionError) as info:
        workload_from_job(j, **kwargs)
    return [str(e) for e in info.value.errors]


def test_an_indexed_job_becomes_one_pod_set_with_topology_and_partial_admission() -> None:
    wl = workload_from_job(job(), priority_classes={"experiment": 100})
    assert wl.metadata.name == "job-sweep"
    assert wl.metadata.namespace == "vision"
    assert wl.metadata.owner_references[0].kind == "Job"
    assert wl.metadata.annotations["multiq.dev/source-kind"] == "Job"
    assert wl.spec.queue_name == "vision"
    assert (wl.spec.priority_class_name, wl.spec.priority) == ("experiment", 100)
    assert wl.spec.maximum_execution_time_seconds == 7200
    (ps,) = wl.spec.pod_sets
    assert (ps.name, ps.count, ps.min_count) == ("main", 4, 2)
    assert ps.topology_request is not None
    assert ps.topology_request.required == "cloud.provider.com/block"
    assert ps.topology_request.pod_set_slice_size == 2
    assert ps.topology_request.pod_index_label == "batch.kubernetes.io/job-completion-index"
    assert ps.pod_requests() == {
        "cpu": Quantity.parse("4"),
        "memory": Quantity.parse("8Gi"),
        "nvidia.com/gpu": Quantity.parse("1"),
    }
    assert wl.semantic_errors() == []
    assert isinstance(decoded(wl.to_wire()), Workload)


@pytest.mark.parametrize(
    ("parallelism", "completions", "count"), [(4, 8, 4), (8, 3, 3), (None, None, 1), (5, None, 5)]
)
def test_count_is_parallelism_capped_by_completions(
    parallelism: int | None, completions: int | None, count: int
) -> None:
    j = job(
        spec__parallelism=parallelism,
        spec__completions=completions,
        spec__completionMode=None,
        metadata__annotations={},
    )
    j.spec.template.metadata.annotations.clear()
    assert workload_from_job(j).spec.pod_sets[0].count == count


def test_a_non_indexed_job_without_topology_has_no_topology_request() -> None:
    j = job(spec__completionMode=None, metadata__annotations={})
    j.spec.template.metadata.annotations.clear()
    assert workload_from_job(j).spec.pod_sets[0].topology_request is None


def test_the_multiq_queue_label_works_as_well_as_kueues() -> None:
    j = job(metadata__labels={"multiq.dev/queue-name": "q2"})
    assert workload_from_job(j).spec.queue_name == "q2"


def test_a_missing_queue_name_is_a_clear_error() -> None:
    assert errors(job(metadata__labels={})) == [
        "metadata.labels[multiq.dev/queue-name]: Required value: a queue name is required: "
        "label the Job with multiq.dev/queue-name (or kueue.x-k8s.io/queue-name) naming a "
        "LocalQueue"
    ]


def test_the_two_spellings_of_a_label_must_agree() -> None:
    labels = {"multiq.dev/queue-name": "a", "kueue.x-k8s.io/queue-name": "b"}
    assert errors(job(metadata__labels=labels)) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": conflicts with '
        "multiq.dev/queue-name='a'"
    ]


def test_an_invalid_queue_name_is_reported_at_the_label() -> None:
    (error,) = errors(job(metadata__labels={"kueue.x-k8s.io/queue-name": "Bad_Queue"}))
    assert error.startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Bad_Queue": a lowercase'
    )


def test_an_unknown_priority_class_is_reported_when_classes_are_given() -> None:
    assert errors(job(), priority_classes={"high": 1000}) == [
        'metadata.labels[multiq.dev/priority-class]: Not found: "experiment": no '
        "WorkloadPriorityClass of that name"
    ]


def test_the_priority_is_left_to_the_hub_when_classes_are_not_given() -> None:
    wl = workload_from_job(job())
    assert (wl.spec.priority_class_name, wl.spec.priority) == ("experiment", None)


def test_max_exec_time_must_be_a_positive_integer() -> None:
    labels = {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/max-exec-time-seconds": "soon"}
    assert errors(job(metadata__labels=labels)) == [
        'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "soon": '
        "must be an integer"
    ]
    labels["kueue.x-k8s.io/max-exec-time-seconds"] = "0"
    assert errors(job(metadata__labels=labels)) == [
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: must be "
        "greater than or equal to 1"
    ]


def test_min_parallelism_must_be_below_the_pod_count() -> None:
    j = job(metadata__annotations={"multiq.dev/job-min-parallelism": "4"})
    assert errors(j) == [
        "metadata.annotations[multiq.dev/job-min-parallelism]: Invalid value: 4: must be "
        "greater than 0 and less than the job's pod count 4"
    ]


def test_topology_annotations_are_validated_at_the_annotation() -> None:
    j = job()
    j.spec.template.metadata.annotations["kueue.x-k8s.io/podset-slice-size"] = "3"
    assert errors(j) == [
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: "
        "3: must evenly divide the pod set count 4"
    ]


def test_only_one_topology_level_annotation_may_be_set() -> None:
    j = job()
    j.spec.template.metadata.annotations["multiq.dev/podset-preferred-topology"] = "zone"
    assert errors(j) == [
        "spec.template.metadata.annotations[multiq.dev/podset-preferred-topology]: Forbidden: "
        "may not be set together with required: set only one of required, preferred and "
        "unconstrained"
    ]


def test_the_unconstrained_annotation_is_a_boolean() -> None:
    j = job()
    annotations = j.spec.template.metadata.annotations
    annotations.clear()
    annotations["kueue.x-k8s.io/podset-unconstrained-topology"] = "yes"
    assert errors(j) == [
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: "
        'Invalid value: "yes": must be a boolean value'
    ]


def test_multi_layer_slice_constraints_are_read_from_json() -> None:
    j = job(spec__parallelism=8)
    annotations = j.spec.template.metadata.annotations
    del annotations["kueue.x-k8s.io/podset-slice-required-topology"]
    del annotations["kueue.x-k8s.io/podset-slice-size"]
    layers = [{"topology": "rack", "size": 4}, {"topology": "host", "size": 3}]
    annotations["kueue.x-k8s.io/podset-slice-required-topology-constraints"] = json.dumps(layers)
    assert errors(j) == [
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-"
        "constraints][1].size: Invalid value: 3: must evenly divide the parent layer size 4"
    ]
    layers[1]["size"] = 2
    annotations["kueue.x-k8s.io/podset-slice-required-topology-constraints"] = json.dumps(layers)
    request = workload_from_job(j).spec.pod_sets[0].topology_request
    assert request is not None and request.pod_set_slice_required_topology_constraints is not None
    assert [c.size for c in request.pod_set_slice_required_topology_constraints] == [4, 2]


def test_malformed_slice_constraints_are_reported() -> None:
    j = job()
    annotations = j.spec.template.metadata.annotations
    annotations["kueue.x-k8s.io/podset-slice-required-topology-constraints"] = "[{"
    (error,) = errors(j)
    assert error.startswith(
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-"
        'constraints]: Invalid value: "[{": must be a JSON array of {topology, size} objects'
    )


def test_conversion_errors_are_object_invalid_errors_of_the_job() -> None:
    with pytest.raises(ObjectInvalidError) as info:
        workload_from_job(job(metadata__labels={}))
    assert (info.value.kind, info.value.name) == ("Job", "sweep")


def test_to_workload_dispatches_on_the_kind() -> None:
    wl = to_workload(job())
    assert wl.metadata.name == "job-sweep"
    assert to_workload(wl) is wl


def test_a_job_with_only_a_generate_name_gets_a_generated_workload_name() -> None:
    j = job(metadata__name=None, metadata__generateName="sweep-")
    wl = workload_from_job(j)
    assert (wl.metadata.name, wl.metadata.generate_name) == ("", "job-sweep-")


def test_the_namespace_default_queue_applies_when_no_queue_is_named() -> None:
    wl = workload_from_job(job(metadata__labels={}), default_queue_name="default")
    assert wl.spec.queue_name == "default"
    labelled = workload_from_job(job(), default_queue_name="default")
    assert labelled.spec.queue_name == "vision"


def test_a_checked_jobs_templates_are_not_checked_again_but_the_workloads_own_rules_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[str] = []
    original = pod_template_errors

    def counted(path: Path, template: PodTemplateSpec) -> Iterator[FieldError]:
        checked.append(str(path))
        return original(path, template)

    monkeypatch.setattr(workload_module, "pod_template_errors", counted)
    to_workload(job(), source_checked=True)
    assert checked == []
    to_workload(job())
    assert checked == ["spec.podSets[0].template"]

    named = job()
    named.spec.template.metadata.name = "pod"  # a Job may; a Workload's pod set may not
    with pytest.raises(ConversionError) as raised:
        to_workload(named, source_checked=True)
    assert [e.path for e in raised.value.errors] == ["spec.template.metadata.name"]
