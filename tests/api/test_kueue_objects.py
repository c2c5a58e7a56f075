"""Kueue's own queue objects convert to MultiQ's kinds field for field, in every version Kueue
served them; MultiKueue maps onto the hub; what MultiQ cannot honour is an error naming the
Kueue field; and MultiQ's queue kinds write back out as Kueue's, losslessly where the shapes
match."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.codec import decode
from api.errors import ObjectInvalidError
from api.kinds import REGISTRY
from api.kueue import Converted, from_kueue, to_kueue

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a"},
    "spec": {
        "cohortName": "research",
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "queueingStrategy": "StrictFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        "fairSharing": {"weight": "2"},
        "stopPolicy": "Hold",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default-flavor",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "3"},
                            {"name": "memory", "nominalQuota": "36Gi", "lendingLimit": "4Gi"},
                        ],
                    }
                ],
            }
        ],
    },
}

MULTIKUEUE_CHECK: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "dispatch"},
    "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"},
    },
}


def _one(doc: dict[str, Any], *beside: dict[str, Any]) -> Converted:
    result = from_kueue([doc, *beside])[0]
    assert isinstance(result, Converted), result
    return result


def _errors(doc: dict[str, Any], *beside: dict[str, Any]) -> list[str]:
    result = from_kueue([doc, *beside])[0]
    assert isinstance(result, ObjectInvalidError), result
    return [str(e) for e in result.errors]


def _with(doc: dict[str, Any], **spec: Any) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    changed["spec"].update(spec)
    return changed


# --- in ------------------------------------------------------------------------------------


def test_a_v1beta2_cluster_queue_becomes_the_same_multiq_cluster_queue() -> None:
    (body,) = _one(CLUSTER_QUEUE).objects
    cq = decode(body, REGISTRY)
    wire = cq.to_wire()
    assert wire["apiVersion"] == "multiq.dev/v1alpha1"
    preemption = {**CLUSTER_QUEUE["spec"]["preemption"], "minAdmitSeconds": 0}
    assert wire["spec"] == {**CLUSTER_QUEUE["spec"], "preemption": preemption}


def test_a_v1beta1_cluster_queue_has_its_cohort_and_old_fungibility_words_renamed() -> None:
    old = copy.deepcopy(CLUSTER_QUEUE)
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    old["spec"]["cohort"] = old["spec"].pop("cohortName")
    old["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    spec = _one(old).objects[0]["spec"]
    assert spec["cohortName"] == "research"
    assert "cohort" not in spec
    assert spec["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }


def test_a_v1beta2_cluster_queue_may_not_use_the_v1beta1_spelling() -> None:
    old_word = copy.deepcopy(CLUSTER_QUEUE)
    old_word["spec"]["cohort"] = old_word["spec"].pop("cohortName")
    assert _errors(old_word) == [
        "spec.cohort: Forbidden: MultiQ does not support this Kueue field: it has no MultiQ "
        "equivalent"
    ]


@pytest.mark.parametrize(
    ("doc", "kind", "spec"),
    [
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "ResourceFlavor",
                "metadata": {"name": "a100"},
                "spec": {
                    "nodeLabels": {"gpu": "a100"},
                    "nodeTaints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
                    "tolerations": [{"key": "spot", "operator": "Exists"}],
                    "topologyName": "default",
                },
            },
            "ResourceFlavor",
            None,
            id="a_resource_flavor",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1alpha1",
                "kind": "Cohort",
                "metadata": {"name": "child"},
                "spec": {"parent": "root", "fairSharing": {"weight": "0.5"}},
            },
            "Cohort",
            {"parentName": "root", "fairSharing": {"weight": "500m"}},
            id="a_v1alpha1_cohort_with_its_parent_renamed",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "default"},
                "spec": {
                    "levels": [
                        {"nodeLabel": "cloud.provider.com/topology-block"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                },
            },
            "Topology",
            None,
            id="a_v1alpha1_topology",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": "team-a"},
                "spec": {"clusterQueue": "team-a", "stopPolicy": "HoldAndDrain"},
            },
            "LocalQueue",
            None,
            id="a_local_queue",
        ),
    ],
)
def test_each_queue_kind_converts_field_for_field(
    doc: dict[str, Any], kind: str, spec: dict[str, Any] | None
) -> None:
    (body,) = _one(doc).objects
    obj = decode(body, REGISTRY)
    assert obj.kind == kind
    assert obj.to_wire()["spec"] == (spec if spec is not None else doc["spec"])
    assert obj.to_wire()["metadata"] == doc["metadata"]


def test_a_priority_class_keeps_its_value_and_description() -> None:
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "urgent"},
        "value": 10000,
        "description": "deadlines",
    }
    wpc = decode(_one(doc).objects[0], REGISTRY).to_wire()
    assert (wpc["kind"], wpc["value"], wpc["description"]) == (
        "WorkloadPriorityClass",
        10000,
        "deadlines",
    )


def test_server_owned_metadata_and_status_are_dropped_as_a_server_ignores_them() -> None:
    served = copy.deepcopy(CLUSTER_QUEUE)
    served["metadata"].update(
        uid="0b6e", resourceVersion="42", generation=3, creationTimestamp="2026-01-01T00:00:00Z"
    )
    served["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "team": "a",
    }
    served["status"] = {"pendingWorkloads": 3}
    body = _one(served).objects[0]
    assert body["metadata"] == {"name": "team-a", "annotations": {"team": "a"}}
    assert "status" not in body


def test_multikueue_becomes_a_cluster_set_a_global_queue_and_a_join_requirement() -> None:
    cq = _with(CLUSTER_QUEUE, admissionChecksStrategy={"admissionChecks": [{"name": "dispatch"}]})
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "workers"},
        "spec": {"clusters": ["worker-1", "worker-2"]},
    }
    cluster = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": "worker-1"},
        "spec": {"clusterSource": {"kubeConfig": {"location": "w1", "locationType": "Secret"}}},
    }
    results = from_kueue([cq, MULTIKUEUE_CHECK, config, cluster])
    assert all(isinstance(r, Converted) for r in results)
    cq_result, check_result, config_result, cluster_result = results
    assert isinstance(cq_result, Converted) and isinstance(config_result, Converted)
    queue, global_queue = (decode(b, REGISTRY).to_wire() for b in cq_result.objects)
    assert "admissionChecksStrategy" not in queue["spec"]
    assert global_queue["kind"] == "GlobalQueue"
    assert global_queue["metadata"]["name"] == "team-a"
    assert global_queue["spec"]["clusterSet"] == "workers"
    assert global_queue["spec"]["clusterQueues"] == ["team-a"]
    assert global_queue["spec"]["dispatchPolicy"] == {"type": "AllAtOnce"}
    assert isinstance(check_result, Converted) and check_result.objects == []
    cluster_set = decode(config_result.objects[0], REGISTRY).to_wire()
    assert (cluster_set["kind"], cluster_set["spec"]["clusters"]) == (
        "ClusterSet",
        ["worker-1", "worker-2"],
    )
    assert isinstance(cluster_result, Converted)
    assert cluster_result.objects == []
    assert cluster_result.member_cluster == "worker-1"
    assert "qctl cluster join worker-1" in cluster_result.note


def test_a_v1beta1_cluster_queue_may_name_its_multikueue_check_in_the_plain_list() -> None:
    old = copy.deepcopy(CLUSTER_QUEUE)
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    old["spec"]["cohort"] = old["spec"].pop("cohortName")
    old["spec"]["admissionChecks"] = ["dispatch"]
    kinds = [o["kind"] for o in _one(old, MULTIKUEUE_CHECK).objects]
    assert kinds == ["ClusterQueue", "GlobalQueue"]


# --- refused, by name ----------------------------------------------------------------------

PROVISIONING_CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "prov"},
    "spec": {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "ProvisioningRequestConfig",
            "name": "p",
        },
    },
}


@pytest.mark.parametrize(
    ("doc", "beside", "expected"),
    [
        pytest.param(
            _with(CLUSTER_QUEUE, concurrentAdmissionPolicy={"migration": {"mode": "x"}}),
            [],
            "spec.concurrentAdmissionPolicy: Forbidden: MultiQ does not support this Kueue "
            "field: a workload is admitted in one flavor at a time",
            id="concurrent_admission",
        ),
        pytest.param(
            _with(CLUSTER_QUEUE, admissionChecksStrategy={"admissionChecks": [{"name": "x"}]}),
            [],
            'spec.admissionChecksStrategy.admissionChecks[0]: Not found: "x": no '
            "AdmissionCheck of this name is among the documents given; MultiQ keeps no "
            "AdmissionChecks, so give the MultiKueue one with this ClusterQueue",
            id="an_admission_check_not_given",
        ),
        pytest.param(
            _with(
                CLUSTER_QUEUE,
                admissionChecksStrategy={
                    "admissionChecks": [{"name": "dispatch", "onFlavors": ["default-flavor"]}]
                },
            ),
            [MULTIKUEUE_CHECK],
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors: Forbidden: MultiQ does "
            "not support this Kueue field: dispatch through the hub applies to the whole "
            "ClusterQueue, as Kueue's MultiKueue check does",
            id="a_multikueue_check_on_some_flavors",
        ),
        pytest.param(
            PROVISIONING_CHECK,
            [],
            'spec.controllerName: Unsupported value: "kueue.x-k8s.io/provisioning-request": '
            'supported values: "kueue.x-k8s.io/multikueue"',
            id="a_provisioning_request_check",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueConfig",
                "metadata": {"name": "w"},
                "spec": {"clusters": ["a"], "quotaManagement": "Automated"},
            },
            [],
            "spec.quotaManagement: Forbidden: MultiQ does not support this Kueue field: the "
            "hub's fleet quota is set on a GlobalQueue instead",
            id="automated_multikueue_quota",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": "w"},
                "spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}},
            },
            [],
            "spec.clusterSource.clusterProfileRef: Forbidden: MultiQ does not support this "
            "Kueue field: join the cluster with `qctl cluster join`",
            id="a_cluster_profile",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ProvisioningRequestConfig",
                "metadata": {"name": "p"},
            },
            [],
            'kind: Unsupported value: "ProvisioningRequestConfig"',
            id="a_kind_without_an_equivalent",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1alpha1",
                "kind": "ClusterQueue",
                "metadata": {"name": "old"},
                "spec": {},
            },
            [],
            'apiVersion: Unsupported value: "kueue.x-k8s.io/v1alpha1": supported values: '
            '"kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"',
            id="a_version_kueue_never_served_it_in",
        ),
    ],
)
def test_what_multiq_cannot_honour_is_an_error_naming_the_kueue_field(
    doc: dict[str, Any], beside: list[dict[str, Any]], expected: str
) -> None:
    errors = _errors(doc, *beside)
    assert any(e.startswith(expected) for e in errors), errors


def test_documents_of_other_groups_pass_through_untouched() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    assert _one(job).objects == [job]


# --- out -----------------------------------------------------------------------------------


def test_a_cluster_queue_round_trips_through_kueues_shape_unchanged() -> None:
    ours = decode(_one(CLUSTER_QUEUE).objects[0], REGISTRY).to_wire()
    back = to_kueue(ours)
    assert back["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert back["spec"] == CLUSTER_QUEUE["spec"]
    assert decode(_one(back).objects[0], REGISTRY).to_wire() == ours


def test_written_as_v1beta1_a_cluster_queue_uses_the_old_cohort_field() -> None:
    ours = decode(_one(CLUSTER_QUEUE).objects[0], REGISTRY).to_wire()
    back = to_kueue(ours, "v1beta1")
    assert back["spec"]["cohort"] == "research"
    assert "cohortName" not in back["spec"]


def test_a_multiq_only_field_is_refused_by_name_on_the_way_out() -> None:
    ours = decode(_one(CLUSTER_QUEUE).objects[0], REGISTRY).to_wire()
    ours["spec"]["preemption"]["minAdmitSeconds"] = 60
    with pytest.raises(ObjectInvalidError) as caught:
        to_kueue(ours)
    assert [str(e) for e in caught.value.errors] == [
        "spec.preemption.minAdmitSeconds: Forbidden: has no Kueue equivalent (MultiQ-only; 60)"
    ]


def test_a_cluster_set_with_a_cluster_list_writes_out_as_a_multikueue_config() -> None:
    cluster_set = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "ClusterSet",
        "metadata": {"name": "workers"},
        "spec": {"clusters": ["a", "b"]},
    }
    assert to_kueue(cluster_set)["kind"] == "MultiKueueConfig"
    with pytest.raises(ObjectInvalidError):
        to_kueue({**cluster_set, "spec": {"clusterSelector": {"matchLabels": {"x": "y"}}}})


def test_a_kind_with_no_kueue_equivalent_is_refused_on_the_way_out() -> None:
    with pytest.raises(ObjectInvalidError, match="GlobalQueue"):
        to_kueue({"apiVersion": "multiq.dev/v1alpha1", "kind": "GlobalQueue", "metadata": {}})
