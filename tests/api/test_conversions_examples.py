"""Every job in examples/ converts to a valid Workload (pod groups as one group)."""

from __future__ import annotations

from pathlib import Path

from api.codec import decode, load_documents
from api.k8s.pod import Pod
from api.kinds import REGISTRY
from api.meta import Object
from api.quantity import Quantity
from api.v1alpha1.conversions import to_workload, workload_from_pods
from api.v1alpha1.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def objects(name: str) -> list[Object]:
    text = (EXAMPLES / name).read_text()
    return [decode(doc.body, REGISTRY) for doc in load_documents(text)]


def test_the_indexed_job_example_converts() -> None:
    (job,) = objects("indexed-job.yaml")
    wl = to_workload(job, priority_classes={"experiment": 100})
    assert wl.semantic_errors() == []
    assert wl.total_requests()["main"]["nvidia.com/gpu"] == Quantity.parse("4")


def test_the_upstream_training_jobset_example_converts() -> None:
    (js,) = objects("jobset-training.yaml")
    wl = to_workload(js)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("driver", 1), ("workers", 4)]


def test_the_multiq_jobset_example_converts_with_its_topology() -> None:
    (js,) = objects("jobs/multiq-jobset.yaml")
    wl = to_workload(js, priority_classes={"experiment": 100})
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    assert counts == {"data": 1, "ps": 1, "workers": 8, "eval": 1}
    workers = wl.pod_set("workers")
    assert workers is not None and workers.topology_request is not None
    assert workers.topology_request.pod_set_slice_size == 4
    # the sidecar runs beside the worker: 32 + 0.1 CPUs per pod
    assert workers.pod_requests()["cpu"] == Quantity.parse("32100m")


def test_the_pod_group_example_converts_to_two_pod_sets() -> None:
    pods = [p for p in objects("jobs/pod-group.yaml") if isinstance(p, Pod)]
    wl = workload_from_pods(pods)
    assert sorted(ps.count for ps in wl.spec.pod_sets) == [1, 2]
    assert wl.spec.queue_name == "nlp"


def test_the_plain_pod_example_converts_to_one_pod() -> None:
    (pod,) = objects("pod.yaml")
    wl = to_workload(pod)
    assert wl.semantic_errors() == []
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("main", 1)]
    assert wl.spec.queue_name == "default"


def test_the_workload_example_is_valid() -> None:
    (wl,) = objects("jobs/workload.yaml")
    assert isinstance(wl, Workload)
    assert wl.total_requests()["workers"]["nvidia.com/gpu"] == Quantity.parse("16")
