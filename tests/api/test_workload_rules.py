"""Every rule on a Workload (Kueue's and ours) is reported with its field path and problem."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.quantity import Quantity
from api.v1alpha1.workload import Workload, WorkloadConditionType
from tests.api.helpers import decoded, errors_of

PS = "spec.podSets"


def container(name: str = "main", **resources: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "busybox"}
    if resources:
        body["resources"] = resources
    return body


def pod_set(name: str = "main", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [container(requests={"cpu": "1"})]}},
        **extra,
    }


def workload(*pod_sets: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team-a"},
        "spec": {"queueName": "team-a", "podSets": list(pod_sets) or [pod_set()], **spec},
    }


def topology(count: int = 4, **request: Any) -> dict[str, Any]:
    return workload(pod_set(count=count, topologyRequest=request))


def test_a_valid_workload_has_no_errors() -> None:
    assert errors_of(workload()) == []


def test_pod_set_name_defaults_to_main_and_active_to_true() -> None:
    body = workload()
    del body["spec"]["podSets"][0]["name"]
    wl = decoded(body)
    assert isinstance(wl, Workload)
    assert wl.spec.pod_sets[0].name == "main"
    assert wl.spec.active is True


def test_a_workload_needs_at_least_one_pod_set() -> None:
    body = workload()
    body["spec"]["podSets"] = []
    assert errors_of(body) == [f"{PS}: Required value: must have at least 1 item"]


def test_a_workload_has_at_most_eighteen_pod_sets() -> None:
    body = workload(*(pod_set(f"ps{i}") for i in range(19)))
    assert errors_of(body) == [f"{PS}: Too many: 19: must have at most 18 items"]


def test_pod_set_names_are_unique() -> None:
    assert errors_of(workload(pod_set("a"), pod_set("a"))) == [
        f'{PS}[1].name: Duplicate value: "a"'
    ]


def test_pod_set_names_are_dns_labels() -> None:
    (error,) = errors_of(workload(pod_set("Driver")))
    assert error.startswith(f'{PS}[0].name: Invalid value: "Driver": a lowercase RFC 1123 label')


def test_count_may_not_be_negative() -> None:
    assert errors_of(workload(pod_set(count=-1))) == [
        f"{PS}[0].count: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_min_count_may_be_set_on_at_most_one_pod_set() -> None:
    body = workload(pod_set("a", 4, minCount=2), pod_set("b", 4, minCount=2))
    assert errors_of(body) == [f"{PS}: Invalid value: 2: at most one podSet can use minCount"]


def test_min_count_must_be_positive() -> None:
    assert errors_of(workload(pod_set(count=4, minCount=0))) == [
        f"{PS}[0].minCount: Invalid value: 0: must be greater than or equal to 1"
    ]


def test_min_count_may_not_exceed_count() -> None:
    assert errors_of(workload(pod_set(count=4, minCount=5))) == [
        f"{PS}[0].minCount: Invalid value: 5: must be less than or equal to count (4)"
    ]


def test_the_pods_resource_is_reserved() -> None:
    body = workload()
    body["spec"]["podSets"][0]["template"]["spec"]["containers"] = [
        container(requests={"pods": "1"})
    ]
    assert errors_of(body) == [
        f'{PS}[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "pods": '
        "the key is reserved for internal use"
    ]


def test_a_pod_template_needs_containers() -> None:
    body = workload()
    body["spec"]["podSets"][0]["template"]["spec"]["containers"] = []
    assert errors_of(body) == [f"{PS}[0].template.spec.containers: Required value"]


def test_unknown_pod_template_fields_are_rejected() -> None:
    body = workload()
    body["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "x"
    assert errors_of(body) == [
        f"{PS}[0].template.spec.containers[0].imagePullPolicyy: Unknown field: "
        "this field is not part of the schema"
    ]


def test_a_pod_set_template_carries_only_labels_and_annotations() -> None:
    body = workload()
    body["spec"]["podSets"][0]["template"]["metadata"] = {"name": "x", "labels": {"a": "b"}}
    assert errors_of(body) == [
        f"{PS}[0].template.metadata.name: Forbidden: only labels and annotations may be set in "
        "a pod set template's metadata"
    ]


def test_queue_name_is_required() -> None:
    assert errors_of(workload(queueName="")) == ["spec.queueName: Required value"]


def test_queue_name_must_be_a_valid_name() -> None:
    (error,) = errors_of(workload(queueName="Team_A"))
    assert error.startswith('spec.queueName: Invalid value: "Team_A": a lowercase RFC 1123')


def test_priority_is_required_with_a_priority_class() -> None:
    assert errors_of(workload(priorityClassName="high")) == [
        "spec.priority: Required value: priority should not be nil when priorityClassName is set"
    ]


def test_priority_class_source_needs_a_priority_class_name() -> None:
    body = workload(priorityClassSource="multiq.dev/workloadpriorityclass")
    assert errors_of(body) == [
        "spec.priorityClassSource: Forbidden: may only be set with priorityClassName"
    ]


def test_priority_is_a_32_bit_integer() -> None:
    assert errors_of(workload(priority=2**31)) == [
        "spec.priority: Invalid value: 2147483648: must be a 32-bit integer"
    ]


def test_maximum_execution_time_is_at_least_one_second() -> None:
    assert errors_of(workload(maximumExecutionTimeSeconds=0)) == [
        "spec.maximumExecutionTimeSeconds: Invalid value: 0: must be greater than or equal to 1"
    ]


# --- topology requests ----------------------------------------------------------------------

TR = f"{PS}[0].topologyRequest"
RACK = "cloud.provider.com/rack"
BLOCK = "cloud.provider.com/block"


def test_a_valid_topology_request_has_no_errors() -> None:
    assert (
        errors_of(topology(required=BLOCK, podSetSliceRequiredTopology=RACK, podSetSliceSize=2))
        == []
    )


def test_only_one_of_required_preferred_and_unconstrained_may_be_set() -> None:
    assert errors_of(topology(required=RACK, preferred=BLOCK)) == [
        f"{TR}.preferred: Forbidden: may not be set together with required: set only one of "
        "required, preferred and unconstrained"
    ]


def test_topology_levels_must_be_label_keys() -> None:
    (error,) = errors_of(topology(required="-rack"))
    assert error.startswith(f'{TR}.required: Invalid value: "-rack": name part must consist')


def test_slice_size_is_required_with_a_slice_topology() -> None:
    assert errors_of(topology(required=BLOCK, podSetSliceRequiredTopology=RACK)) == [
        f"{TR}.podSetSliceSize: Required value: must be set when podSetSliceRequiredTopology is set"
    ]


def test_slice_size_needs_a_slice_topology() -> None:
    assert errors_of(topology(required=BLOCK, podSetSliceSize=2)) == [
        f"{TR}.podSetSliceSize: Forbidden: may not be set when podSetSliceRequiredTopology is not set"
    ]


def test_slice_size_must_divide_the_pod_set_count() -> None:
    body = topology(count=6, required=BLOCK, podSetSliceRequiredTopology=RACK, podSetSliceSize=4)
    assert errors_of(body) == [
        f"{TR}.podSetSliceSize: Invalid value: 4: must evenly divide the pod set count 6"
    ]


def test_slice_size_must_be_positive() -> None:
    body = topology(required=BLOCK, podSetSliceRequiredTopology=RACK, podSetSliceSize=0)
    assert errors_of(body) == [
        f"{TR}.podSetSliceSize: Invalid value: 0: must be greater than or equal to 1"
    ]


def test_sub_group_count_and_index_label_come_together() -> None:
    assert errors_of(topology(subGroupIndexLabel="jobset.sigs.k8s.io/job-index")) == [
        f"{TR}.subGroupCount: Required value: must be set when subGroupIndexLabel is set"
    ]


def layers(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"topology": t, "size": s} for t, s in pairs]


def test_slice_constraints_have_at_most_three_layers() -> None:
    body = topology(
        count=16,
        required="zone",
        podSetSliceRequiredTopologyConstraints=layers(("a", 16), ("b", 8), ("c", 4), ("d", 2)),
    )
    assert errors_of(body) == [
        f"{TR}.podSetSliceRequiredTopologyConstraints: Too many: 4: must have at most 3 items"
    ]


def test_inner_slice_sizes_must_divide_the_outer_ones() -> None:
    body = topology(
        count=12,
        required="zone",
        podSetSliceRequiredTopologyConstraints=layers((BLOCK, 6), (RACK, 4)),
    )
    assert errors_of(body) == [
        f"{TR}.podSetSliceRequiredTopologyConstraints[1].size: Invalid value: 4: "
        "must evenly divide the parent layer size 6"
    ]


def test_the_outer_slice_size_must_divide_the_pod_set_count() -> None:
    body = topology(
        count=10, required="zone", podSetSliceRequiredTopologyConstraints=layers((BLOCK, 4))
    )
    assert errors_of(body) == [
        f"{TR}.podSetSliceRequiredTopologyConstraints[0].size: Invalid value: 4: "
        "must evenly divide the pod set count 10"
    ]


def test_slice_constraint_topologies_are_unique() -> None:
    body = topology(
        count=8,
        required="zone",
        podSetSliceRequiredTopologyConstraints=layers((RACK, 4), (RACK, 2)),
    )
    assert errors_of(body) == [
        f'{TR}.podSetSliceRequiredTopologyConstraints[1].topology: Duplicate value: "{RACK}"'
    ]


def test_slice_constraints_exclude_the_two_level_slice_fields() -> None:
    body = topology(
        count=8,
        required="zone",
        podSetSliceRequiredTopology=RACK,
        podSetSliceSize=2,
        podSetSliceRequiredTopologyConstraints=layers((RACK, 4)),
    )
    assert errors_of(body) == [
        f"{TR}.podSetSliceRequiredTopologyConstraints: Forbidden: may not be set together with "
        "podSetSliceRequiredTopology or podSetSliceSize"
    ]


def test_a_pod_set_group_needs_a_required_or_preferred_level() -> None:
    body = workload(
        pod_set("leader", 1, topologyRequest={"podSetGroupName": "g", "unconstrained": True}),
        pod_set("workers", 4, topologyRequest={"podSetGroupName": "g", "unconstrained": True}),
    )
    assert errors_of(body) == [
        f"{PS}[0].topologyRequest.podSetGroupName: Forbidden: may not be set when neither "
        "required nor preferred is set",
        f"{PS}[1].topologyRequest.podSetGroupName: Forbidden: may not be set when neither "
        "required nor preferred is set",
    ]


def test_a_pod_set_group_has_exactly_two_pod_sets() -> None:
    body = workload(
        pod_set("leader", 1, topologyRequest={"podSetGroupName": "g", "required": RACK})
    )
    assert errors_of(body) == [
        f'{PS}[0].topologyRequest.podSetGroupName: Invalid value: "g": can only define groups of '
        "exactly 2 pod sets, got: 1 pod set(s)"
    ]


def test_one_pod_set_of_a_group_has_a_single_replica() -> None:
    request = {"podSetGroupName": "g", "required": RACK}
    body = workload(
        pod_set("a", 2, topologyRequest=request), pod_set("b", 3, topologyRequest=request)
    )
    message = (
        'Invalid value: "g": can only define groups where at least one pod set has only 1 '
        "replica, got: 2 replica(s) and 3 replica(s) in the group"
    )
    assert errors_of(body) == [
        f"{PS}[0].topologyRequest.podSetGroupName: {message}",
        f"{PS}[1].topologyRequest.podSetGroupName: {message}",
    ]


def test_pod_sets_of_a_group_request_the_same_level() -> None:
    body = workload(
        pod_set("leader", 1, topologyRequest={"podSetGroupName": "g", "required": RACK}),
        pod_set("workers", 4, topologyRequest={"podSetGroupName": "g", "required": BLOCK}),
    )
    assert len(errors_of(body)) == 2
    assert all("must request the same required/preferred level" in e for e in errors_of(body))


# --- status ---------------------------------------------------------------------------------


def with_status(status: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
    body = copy.deepcopy(body or workload(pod_set(count=4)))
    body["status"] = status
    return body


def admission(**psa: Any) -> dict[str, Any]:
    return {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "4"}, **psa}
        ],
    }


def test_an_admitted_workload_with_conditions_is_valid() -> None:
    body = with_status(
        {
            "admission": admission(count=4),
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                {"type": "Admitted", "status": "True", "reason": "Admitted"},
            ],
            "clusterName": "gpu-east",
            "dispatchGeneration": 3,
        }
    )
    wl = decoded(body)
    assert isinstance(wl, Workload)
    assert wl.is_condition_true(WorkloadConditionType.ADMITTED)
    assert not wl.is_condition_true(WorkloadConditionType.FINISHED)


def test_pod_set_assignments_name_known_pod_sets() -> None:
    assert errors_of(with_status({"admission": admission(name="other")})) == [
        'status.admission.podSetAssignments[0].name: Not found: "other"'
    ]


def test_resource_usage_is_a_multiple_of_the_count() -> None:
    body = with_status({"admission": admission(count=3, resourceUsage={"cpu": "4"})})
    assert errors_of(body) == [
        'status.admission.podSetAssignments[0].resourceUsage[cpu]: Invalid value: "4": '
        "is not a multiple of 3"
    ]


def test_there_is_one_pod_set_assignment_per_pod_set() -> None:
    body = with_status({"admission": {"clusterQueue": "cq", "podSetAssignments": []}})
    assert errors_of(body) == [
        "status.admission.podSetAssignments: Invalid value: 0: must have the same number of "
        "podSetAssignments as spec.podSets (1)"
    ]


def test_condition_types_are_unique() -> None:
    conditions = [{"type": "Admitted", "status": "True"}, {"type": "Admitted", "status": "False"}]
    assert errors_of(with_status({"conditions": conditions})) == [
        'status.conditions[1].type: Duplicate value: "Admitted"'
    ]


def test_condition_reasons_are_camel_case_words() -> None:
    conditions = [{"type": "Admitted", "status": "True", "reason": "not ok"}]
    (error,) = errors_of(with_status({"conditions": conditions}))
    assert error.startswith('status.conditions[0].reason: Invalid value: "not ok": a condition')


def test_a_workload_has_at_most_sixteen_conditions() -> None:
    conditions = [{"type": f"C{i}", "status": "True"} for i in range(17)]
    assert errors_of(with_status({"conditions": conditions})) == [
        "status.conditions: Too many: 17: must have at most 16 items"
    ]


def test_cluster_name_and_nominated_clusters_are_mutually_exclusive() -> None:
    body = with_status({"clusterName": "a", "nominatedClusterNames": ["b"]})
    assert errors_of(body) == [
        "status.nominatedClusterNames: Forbidden: clusterName and nominatedClusterNames are "
        "mutually exclusive"
    ]


def test_pending_reasons_are_one_per_cluster() -> None:
    reasons = [
        {"cluster": "a", "reason": "WaitingForQuota"},
        {"cluster": "a", "reason": "NoMatchingFlavor"},
    ]
    assert errors_of(with_status({"clusterPendingReasons": reasons})) == [
        'status.clusterPendingReasons[1].cluster: Duplicate value: "a"'
    ]


def test_reclaimable_pods_name_a_pod_set_and_stay_within_its_count() -> None:
    body = with_status(
        {"reclaimablePods": [{"name": "main", "count": 5}, {"name": "x", "count": 1}]}
    )
    assert errors_of(body) == [
        "status.reclaimablePods[0].count: Invalid value: 5: should be less or equal to 4",
        'status.reclaimablePods[1].name: Unsupported value: "x": supported values: "main"',
    ]


def test_topology_assignment_slices_are_consistent() -> None:
    assignment = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"universalValue": "b1"}, {"prefix": "r", "roots": ["1"]}],
                "universalPodCount": 2,
            }
        ],
    }
    body = with_status({"admission": admission(count=4, topologyAssignment=assignment)})
    assert errors_of(body) == [
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0].valuesPerLevel[1]"
        ".roots: Invalid value: 1: roots, if set, must have length equal to domainCount of this "
        "TopologyAssignmentSlice"
    ]


def test_topology_assignment_expands_to_node_selectors_and_counts() -> None:
    assignment = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universalValue": "b1"},
                    {"prefix": "rack-", "roots": ["1", "2"]},
                ],
                "podCounts": [3, 1],
            }
        ],
    }
    wl = decoded(with_status({"admission": admission(count=4, topologyAssignment=assignment)}))
    assert isinstance(wl, Workload)
    assert wl.status is not None and wl.status.admission is not None
    ta = wl.status.admission.pod_set_assignments[0].topology_assignment
    assert ta is not None
    assert ta.domains() == [({BLOCK: "b1", RACK: "rack-1"}, 3), ({BLOCK: "b1", RACK: "rack-2"}, 1)]


# --- helpers --------------------------------------------------------------------------------


def test_total_requests_are_count_times_the_effective_pod_requests() -> None:
    body = workload(
        {
            "name": "workers",
            "count": 4,
            "template": {
                "spec": {
                    "initContainers": [container("setup", requests={"cpu": "3"})],
                    "containers": [
                        container("a", requests={"cpu": "500m", "memory": "1Gi"}),
                        container("b", limits={"cpu": "1", "nvidia.com/gpu": "1"}),
                    ],
                }
            },
        }
    )
    wl = decoded(body)
    assert isinstance(wl, Workload)
    assert wl.pod_requests()["workers"] == {
        "cpu": Quantity.parse("3"),
        "memory": Quantity.parse("1Gi"),
        "nvidia.com/gpu": Quantity.parse("1"),
    }
    assert wl.total_requests()["workers"] == {
        "cpu": Quantity.parse("12"),
        "memory": Quantity.parse("4Gi"),
        "nvidia.com/gpu": Quantity.parse("4"),
    }


def test_a_workload_round_trips_through_its_wire_form() -> None:
    body = with_status(
        {
            "admission": admission(count=4),
            "requeueState": {"count": 2, "requeueAt": "2026-01-01T00:00:00Z"},
            "clusterPendingReasons": [
                {"cluster": "b", "reason": "OfferRejected", "message": "no GPUs"}
            ],
        },
        topology(count=4, required=BLOCK),
    )
    wl = decoded(body)
    again = decoded(wl.to_wire())
    assert again == wl


# --- property -------------------------------------------------------------------------------

names = st.from_regex(r"\A[a-z][a-z0-9]{0,10}\Z")
quantities = st.integers(min_value=0, max_value=10**6).map(lambda m: f"{m}m")


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    pod_set_names = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    sets = []
    for name in pod_set_names:
        count = draw(st.integers(min_value=0, max_value=64))
        requests = draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), quantities))
        sets.append(
            pod_set(name, count, template={"spec": {"containers": [container(requests=requests)]}})
        )
    return workload(*sets, active=draw(st.booleans()), priority=draw(st.integers(-10, 10)))


@given(workloads())
def test_workloads_round_trip_through_the_wire_form(body: dict[str, Any]) -> None:
    wl = decoded(body)
    assert decoded(wl.to_wire()) == wl
    assert decoded(json.loads(json.dumps(wl.to_wire()))) == wl


# --- the remaining rules, as a table ---------------------------------------------------------


def _ta(**slice_: Any) -> dict[str, Any]:
    base = {"domainCount": 1, "valuesPerLevel": [{"universalValue": "r1"}], "podCounts": [4]}
    base.update(slice_)
    return {
        "admission": admission(count=4, topologyAssignment={"levels": [RACK], "slices": [base]})
    }


TA = "status.admission.podSetAssignments[0].topologyAssignment"

TABLE = [
    pytest.param(
        workload(priorityClassName="High", priority=1),
        'spec.priorityClassName: Invalid value: "High": a lowercase RFC 1123 subdomain must '
        "consist of lower case alphanumeric characters, '-' or '.', and must start and end with "
        "an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        id="the_priority_class_name_is_a_dns_subdomain",
    ),
    pytest.param(
        topology(subGroupIndexLabel="jobset.sigs.k8s.io/job-index", subGroupCount=0),
        f"{TR}.subGroupCount: Invalid value: 0: must be greater than or equal to 1",
        id="a_sub_group_count_is_positive",
    ),
    pytest.param(
        topology(podIndexLabel="bad label"),
        f'{TR}.podIndexLabel: Invalid value: "bad label": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character, with "
        "at most 63 characters",
        id="the_pod_index_label_is_a_label_key",
    ),
    pytest.param(
        workload(
            pod_set("a", 1, topologyRequest={"podSetGroupName": "7", "required": RACK}),
            pod_set("b", 4, topologyRequest={"podSetGroupName": "7", "required": RACK}),
        ),
        [
            f'{PS}[{i}].topologyRequest.podSetGroupName: Invalid value: "7": must not be a number'
            for i in (0, 1)
        ],
        id="a_pod_set_group_name_is_not_a_number",
    ),
    pytest.param(
        topology(
            count=4,
            required=RACK,
            podSetGroupName="g",
            podSetSliceRequiredTopologyConstraints=layers((RACK, 2)),
        ),
        [
            f"{TR}.podSetSliceRequiredTopologyConstraints: Forbidden: may not be set together "
            "with podSetGroupName",
            f'{TR}.podSetGroupName: Invalid value: "g": can only define groups of exactly 2 pod '
            "sets, got: 1 pod set(s)",
        ],
        id="slice_constraints_exclude_pod_set_groups",
    ),
    pytest.param(
        topology(count=4, required=RACK, podSetSliceRequiredTopologyConstraints=layers((RACK, 0))),
        f"{TR}.podSetSliceRequiredTopologyConstraints[0].size: Invalid value: 0: must be greater "
        "than or equal to 1",
        id="a_slice_constraint_size_is_positive",
    ),
    pytest.param(
        topology(count=4, required=RACK, podSetSliceRequiredTopologyConstraints=[]),
        f"{TR}.podSetSliceRequiredTopologyConstraints: Required value: must have at least 1 layer",
        id="slice_constraints_have_at_least_one_layer",
    ),
    pytest.param(
        with_status({"requeueState": {"count": -1}}),
        "status.requeueState.count: Invalid value: -1: must be greater than or equal to 0",
        id="the_requeue_count_is_not_negative",
    ),
    pytest.param(
        with_status({"accumulatedPastExecutionTimeSeconds": -5}),
        "status.accumulatedPastExecutionTimeSeconds: Invalid value: -5: must be greater than or "
        "equal to 0",
        id="accumulated_execution_time_is_not_negative",
    ),
    pytest.param(
        with_status({"nominatedClusterNames": [f"c{i}" for i in range(21)]}),
        "status.nominatedClusterNames: Too many: 21: must have at most 20 items",
        id="at_most_twenty_clusters_are_nominated",
    ),
    pytest.param(
        with_status({"dispatchGeneration": -1}),
        "status.dispatchGeneration: Invalid value: -1: must be greater than or equal to 0",
        id="the_dispatch_generation_is_not_negative",
    ),
    pytest.param(
        with_status({"admission": {**admission(count=4), "clusterQueue": ""}}),
        "status.admission.clusterQueue: Required value",
        id="an_admission_names_its_cluster_queue",
    ),
    pytest.param(
        with_status({"admission": admission(count=-4)}),
        "status.admission.podSetAssignments[0].count: Invalid value: -4: must be greater than or "
        "equal to 0",
        id="an_assigned_count_is_not_negative",
    ),
    pytest.param(
        with_status({"admission": admission(count=4, topologyAssignment={"levels": []})}),
        f"{TA}.levels: Required value: must have at least 1 item",
        id="a_topology_assignment_has_levels",
    ),
    pytest.param(
        with_status(_ta(domainCount=0, podCounts=None, universalPodCount=4)),
        f"{TA}.slices[0].domainCount: Invalid value: 0: must be greater than or equal to 1",
        id="a_slice_covers_at_least_one_domain",
    ),
    pytest.param(
        with_status(_ta(valuesPerLevel=[])),
        f"{TA}.slices[0].valuesPerLevel: Invalid value: 0: valuesPerLevel must have the same "
        "length as the number of levels in this TopologyAssignment",
        id="a_slice_has_values_for_every_level",
    ),
    pytest.param(
        with_status(_ta(universalPodCount=4)),
        f'{TA}.slices[0]: Invalid value: "": Exactly one of podCounts, universalPodCount must be '
        "set",
        id="a_slice_has_pod_counts_or_a_universal_count",
    ),
    pytest.param(
        with_status(_ta(podCounts=[2, 2])),
        f"{TA}.slices[0].podCounts: Invalid value: 2: podCounts must have length equal to "
        "domainCount",
        id="pod_counts_have_one_entry_per_domain",
    ),
    pytest.param(
        with_status(_ta(valuesPerLevel=[{"universalValue": "r1", "roots": ["r1"]}])),
        f'{TA}.slices[0].valuesPerLevel[0]: Invalid value: "": Exactly one of roots, '
        "universalValue must be set",
        id="a_level_has_roots_or_a_universal_value",
    ),
    pytest.param(
        with_status(_ta(valuesPerLevel=[{"universalValue": "r1", "prefix": "rack-"}])),
        f'{TA}.slices[0].valuesPerLevel[0]: Invalid value: "": universalValue cannot be set '
        "together with prefix or suffix",
        id="a_universal_value_has_no_prefix_or_suffix",
    ),
]


@pytest.mark.parametrize(("body", "expected"), TABLE)
def test_a_workload_breaking_one_rule_reports_its_field(
    body: dict[str, Any], expected: str | list[str]
) -> None:
    assert errors_of(body) == (expected if isinstance(expected, list) else [expected])
