"""Pod groups → Workload: pods sharing a pod-group name and total count become one Workload;
pods of the same shape share a pod set; errors are addressed as items[i] of the pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.k8s.pod import Pod
from api.v1alpha1.conversions import ConversionError, to_workload, workload_from_pods

GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def pod(name: str, *, role: str = "worker", gpus: str = "1", rank: int = 0, **meta: Any) -> Pod:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {GROUP: "ring", "kueue.x-k8s.io/queue-name": "ml", "role": role},
            "annotations": {TOTAL: "3"},
        },
        "spec": {
            "restartPolicy": "Never",
            "hostname": name,
            "containers": [
                {
                    "name": "main",
                    "image": f"trainer-{role}",
                    "env": [{"name": "RANK", "value": str(rank)}],
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ],
        },
    }
    for key, value in meta.items():
        body["metadata"][key] = value
    return Pod.model_validate(body)


def test_pods_of_one_shape_form_a_single_pod_set() -> None:
    pods = [pod(f"w{i}", rank=i) for i in range(3)]
    wl = workload_from_pods(pods)
    assert wl.metadata.name == "pod-group-ring"
    assert wl.metadata.namespace == "ml"
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("main", 3)]


def test_pods_of_different_shapes_get_a_pod_set_each() -> None:
    pods = [pod("leader", role="leader", gpus="0"), pod("w1", rank=1), pod("w2", rank=2)]
    wl = workload_from_pods(pods)
    assert sorted(ps.count for ps in wl.spec.pod_sets) == [1, 2]
    assert all(len(ps.name) == 8 for ps in wl.spec.pod_sets)


def test_a_group_given_without_all_its_pods_is_refused_unless_it_may_wait() -> None:
    with pytest.raises(ConversionError) as info:
        workload_from_pods([pod("w0")])
    assert [str(e) for e in info.value.errors] == [
        "items: Invalid value: 1: the group's total count is 3 but only 1 of its pods were "
        "given: submit the rest to the hub (it waits for them), or every pod of the group "
        "together"
    ]


def test_a_group_still_waiting_for_pods_has_the_pods_given_and_says_how_many_are_in() -> None:
    wl = workload_from_pods([pod("leader", role="leader"), pod("w1")], incomplete=True)
    assert sorted(ps.count for ps in wl.spec.pod_sets) == [1, 1]
    assert wl.metadata.annotations["multiq.dev/pod-group-waiting"] == "2/3"
    whole = workload_from_pods(
        [pod("leader", role="leader"), pod("w1"), pod("w2")], incomplete=True
    )
    assert "multiq.dev/pod-group-waiting" not in whole.metadata.annotations


def test_every_pod_carries_the_total_count() -> None:
    lonely = pod("w1", annotations={})
    with pytest.raises(ConversionError) as info:
        workload_from_pods([pod("w0"), lonely, pod("w2")])
    assert [str(e) for e in info.value.errors] == [
        "items[1].metadata.annotations[multiq.dev/pod-group-total-count]: Required value: "
        "every pod of a group must give the group's total pod count"
    ]


def test_the_total_count_is_the_same_on_every_pod() -> None:
    other = pod("w2", annotations={TOTAL: "4"})
    with pytest.raises(ConversionError) as info:
        workload_from_pods([pod("w0"), pod("w1"), other])
    assert [str(e) for e in info.value.errors] == [
        "items[2].metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: 4: "
        "must be the same on every pod of the group (3)"
    ]


def test_a_group_has_no_more_pods_than_its_total() -> None:
    with pytest.raises(ConversionError) as info:
        workload_from_pods([pod(f"w{i}") for i in range(4)])
    assert [str(e) for e in info.value.errors] == [
        "items: Invalid value: 4: the group has more pods than its total count 3"
    ]


def test_every_pod_belongs_to_the_same_group_and_queue() -> None:
    stray = pod("w1")
    stray.metadata.labels[GROUP] = "other"
    stray.metadata.labels["kueue.x-k8s.io/queue-name"] = "elsewhere"
    with pytest.raises(ConversionError) as info:
        workload_from_pods([pod("w0"), stray, pod("w2")])
    assert [str(e) for e in info.value.errors] == [
        'items[1].metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "other": '
        "every pod of the group must carry kueue.x-k8s.io/pod-group-name=ring",
        'items[1].metadata.labels[multiq.dev/queue-name]: Invalid value: "elsewhere": every pod '
        "of a group must carry the same value as items[0]",
    ]


def test_a_single_pod_without_a_group_is_a_one_pod_workload() -> None:
    single = copy.deepcopy(pod("solo"))
    del single.metadata.labels[GROUP]
    wl = to_workload(single)
    assert wl.metadata.name == "pod-solo"
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("main", 1)]


def test_several_pods_without_a_group_are_refused() -> None:
    a, b = pod("a"), pod("b")
    for p in (a, b):
        del p.metadata.labels[GROUP]
    with pytest.raises(ConversionError) as info:
        workload_from_pods([a, b])
    assert [str(e) for e in info.value.errors] == [
        "items[0].metadata.labels[multiq.dev/pod-group-name]: Required value: several pods form "
        "a Workload only as a pod group"
    ]


def test_pod_spec_errors_point_at_the_pod() -> None:
    broken = pod("w0")
    broken.spec.containers[0].image = None
    with pytest.raises(ConversionError) as info:
        workload_from_pods([broken, pod("w1"), pod("w2")])
    assert [str(e) for e in info.value.errors] == [
        "items[0].spec.containers[0].image: Required value"
    ]
