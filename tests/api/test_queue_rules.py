"""Every rule Kueue enforces on flavors, cluster queues, local queues, cohorts, priority
classes and topologies is reported with the field path and the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.codec import encode
from api.v1alpha1.queues import ClusterQueue
from tests.api.helpers import cluster_queue, decoded, errors_of, flavor, obj

RG = "spec.resourceGroups"


def test_a_valid_cluster_queue_has_no_errors() -> None:
    assert errors_of(cluster_queue()) == []


def test_a_negative_nominal_quota_is_invalid() -> None:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [flavor("a", ("cpu", "4")), flavor("b", ("cpu", "-1"))],
        }
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[0].flavors[1].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ]


def test_borrowing_limit_is_only_allowed_with_a_cohort() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"), borrowingLimit="2")]}
    ]
    assert errors_of(cluster_queue(cohort=None, groups=groups)) == [
        f"{RG}[0].flavors[0].resources[0].borrowingLimit: Forbidden: "
        "must be nil when cohort is empty"
    ]


def test_lending_limit_is_only_allowed_with_a_cohort() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"), lendingLimit="2")]}
    ]
    assert errors_of(cluster_queue(cohort=None, groups=groups)) == [
        f"{RG}[0].flavors[0].resources[0].lendingLimit: Forbidden: must be nil when cohort is empty"
    ]


def test_lending_limit_may_not_exceed_the_nominal_quota() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"), lendingLimit="5")]}
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[0].flavors[0].resources[0].lendingLimit: Invalid value: "5": '
        "must be less than or equal to the nominalQuota"
    ]


def test_every_flavor_of_a_group_lists_all_covered_resources() -> None:
    groups = [{"coveredResources": ["cpu", "memory"], "flavors": [flavor("a", ("cpu", "4"))]}]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[0].flavors[0].resources: Invalid value: "cpu": '
        "must list exactly the group's coveredResources; missing memory"
    ]


def test_a_flavor_may_not_list_a_resource_its_group_does_not_cover() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"), ("memory", "1Gi"))]}
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[0].flavors[0].resources: Invalid value: "cpu,memory": '
        "must list exactly the group's coveredResources; not covered: memory"
    ]


def test_a_resource_belongs_to_one_resource_group() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"))]},
        {"coveredResources": ["cpu"], "flavors": [flavor("b", ("cpu", "4"))]},
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[1].coveredResources[0]: Duplicate value: "cpu": '
        "a resource belongs to one resource group; already covered in resourceGroups[0]"
    ]


def test_a_flavor_belongs_to_one_resource_group() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "4"))]},
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [flavor("a", ("nvidia.com/gpu", "1"))]},
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f'{RG}[1].flavors[0].name: Duplicate value: "a": a flavor belongs to one resource group'
    ]


def test_a_cluster_queue_has_at_most_sixteen_resource_groups() -> None:
    groups = [
        {
            "coveredResources": [f"example.com/r{i}"],
            "flavors": [flavor(f"f{i}", (f"example.com/r{i}", "1"))],
        }
        for i in range(17)
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f"{RG}: Too many: 17: must have at most 16 items"
    ]


def test_a_resource_group_has_at_most_sixty_four_covered_resources() -> None:
    names = [f"example.com/r{i}" for i in range(65)]
    groups = [{"coveredResources": names, "flavors": [flavor("a", *[(n, "1") for n in names])]}]
    assert errors_of(cluster_queue(groups=groups)) == [
        f"{RG}[0].coveredResources: Too many: 65: must have at most 64 items"
    ]


def test_a_resource_group_has_at_most_sixty_four_flavors() -> None:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [flavor(f"f{i}", ("cpu", "1")) for i in range(65)]}
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f"{RG}[0].flavors: Too many: 65: must have at most 64 items"
    ]


def test_a_cluster_queue_has_at_most_two_hundred_fifty_six_flavors_in_all() -> None:
    groups = [
        {
            "coveredResources": [f"example.com/r{g}"],
            "flavors": [flavor(f"f{g}-{i}", (f"example.com/r{g}", "1")) for i in range(33)],
        }
        for g in range(8)
    ]
    assert errors_of(cluster_queue(groups=groups)) == [
        f"{RG}: Too many: 264: must have at most 256 items"
    ]


def test_borrow_within_cohort_requires_reclaim_within_cohort() -> None:
    body = cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})
    assert errors_of(body) == [
        'spec.preemption.borrowWithinCohort.policy: Invalid value: "LowerPriority": '
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
    ]


def test_max_priority_threshold_needs_a_borrow_within_cohort_policy() -> None:
    body = cluster_queue(
        preemption={
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never", "maxPriorityThreshold": 5},
        }
    )
    assert errors_of(body) == [
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold: Forbidden: "
        "may only be set when borrowWithinCohort.policy is LowerPriority"
    ]


def test_min_admit_seconds_may_not_be_negative() -> None:
    body = cluster_queue(preemption={"withinClusterQueue": "LowerPriority", "minAdmitSeconds": -1})
    assert errors_of(body) == [
        "spec.preemption.minAdmitSeconds: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_min_admit_seconds_is_a_whole_number_of_seconds() -> None:
    body = cluster_queue(preemption={"minAdmitSeconds": 0.5})
    assert errors_of(body) == [
        "spec.preemption.minAdmitSeconds: Invalid value: 0.5: Input should be a valid integer"
    ]
    # Nor a whole number written as a float or a string: Kubernetes' decoder refuses both.
    for written in (300.0, "300"):
        body = cluster_queue(preemption={"minAdmitSeconds": written})
        assert errors_of(body) == [
            f"spec.preemption.minAdmitSeconds: Invalid value: {json.dumps(written)}: "
            "Input should be a valid integer"
        ]


def test_min_admit_seconds_round_trips_and_defaults_to_zero() -> None:
    protected = decoded(cluster_queue(preemption={"minAdmitSeconds": 300}))
    assert isinstance(protected, ClusterQueue)
    assert protected.spec.preemption.min_admit_seconds == 300
    assert encode(protected)["spec"]["preemption"]["minAdmitSeconds"] == 300
    plain = decoded(cluster_queue())
    assert isinstance(plain, ClusterQueue)
    assert plain.spec.preemption.min_admit_seconds == 0


def test_flavor_fungibility_preference_needs_both_try_next_flavor() -> None:
    body = cluster_queue(flavorFungibility={"preference": "PreemptionOverBorrowing"})
    assert errors_of(body) == [
        "spec.flavorFungibility.preference: Forbidden: only takes effect when whenCanBorrow "
        "and whenCanPreempt are both TryNextFlavor"
    ]


@pytest.mark.parametrize(
    ("field", "value", "supported"),
    [
        ("queueingStrategy", "Fifo", '"BestEffortFIFO", "StrictFIFO"'),
        ("stopPolicy", "Stop", '"None", "Hold", "HoldAndDrain"'),
    ],
    ids=["queueing_strategy_is_one_of_two", "stop_policy_is_one_of_three"],
)
def test_enumerated_fields_name_their_supported_values(
    field: str, value: str, supported: str
) -> None:
    body = cluster_queue()
    body["spec"][field] = value
    assert errors_of(body) == [
        f'spec.{field}: Unsupported value: "{value}": supported values: {supported}'
    ]


def test_unknown_fields_are_rejected_wherever_they_appear() -> None:
    body = cluster_queue(colour="blue")
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominal"] = "1"
    assert errors_of(body) == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominal: Unknown field: "
        "this field is not part of the schema",
        "spec.colour: Unknown field: this field is not part of the schema",
    ]


def test_a_malformed_quantity_is_an_invalid_value() -> None:
    groups = [{"coveredResources": ["cpu"], "flavors": [flavor("a", ("cpu", "four"))]}]
    (error,) = errors_of(cluster_queue(groups=groups))
    assert error.startswith(
        f'{RG}[0].flavors[0].resources[0].nominalQuota: Invalid value: "four": '
        "quantities must match the regular expression"
    )


def test_a_cluster_scoped_kind_may_not_have_a_namespace() -> None:
    body = cluster_queue()
    body["metadata"]["namespace"] = "default"
    assert errors_of(body) == [
        "metadata.namespace: Forbidden: ClusterQueue is cluster-scoped: it has no namespace"
    ]


def test_names_must_be_rfc_1123_subdomains() -> None:
    (error,) = errors_of(cluster_queue(name="Team_A"))
    assert error.startswith(
        'metadata.name: Invalid value: "Team_A": a lowercase RFC 1123 subdomain'
    )


def test_a_name_or_generate_name_is_required() -> None:
    body = cluster_queue()
    body["metadata"] = {}
    assert errors_of(body) == ["metadata.name: Required value: name or generateName is required"]


def test_label_values_follow_kubernetes_label_rules() -> None:
    body = cluster_queue()
    body["metadata"]["labels"] = {"team": "a b"}
    (error,) = errors_of(body)
    assert error.startswith('metadata.labels[team]: Invalid value: "a b": a valid label must be')


def test_a_namespace_selector_requirement_needs_values_for_in() -> None:
    body = cluster_queue(
        namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In"}]}
    )
    assert errors_of(body) == [
        "spec.namespaceSelector.matchExpressions[0].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'"
    ]


def test_a_negative_fair_sharing_weight_is_invalid() -> None:
    assert errors_of(cluster_queue(fairSharing={"weight": "-1"})) == [
        'spec.fairSharing.weight: Invalid value: "-1": must be greater than or equal to 0'
    ]


# --- ResourceFlavor -----------------------------------------------------------------------


def test_a_flavor_has_at_most_eight_node_labels() -> None:
    labels = {f"example.com/l{i}": "x" for i in range(9)}
    assert errors_of(obj("ResourceFlavor", "f", {"nodeLabels": labels})) == [
        "spec.nodeLabels: Too many: 9: must have at most 8 items"
    ]


def test_a_flavor_has_at_most_eight_taints_and_eight_tolerations() -> None:
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(9)]
    tolerations = [{"key": f"k{i}", "operator": "Exists"} for i in range(9)]
    assert errors_of(
        obj("ResourceFlavor", "f", {"nodeTaints": taints, "tolerations": tolerations})
    ) == [
        "spec.nodeTaints: Too many: 9: must have at most 8 items",
        "spec.tolerations: Too many: 9: must have at most 8 items",
    ]


def test_a_topology_flavor_needs_at_least_one_node_label() -> None:
    assert errors_of(obj("ResourceFlavor", "f", {"topologyName": "fabric"})) == [
        "spec.nodeLabels: Required value: at least one nodeLabel is required when topologyName is set"
    ]


def test_a_taint_effect_is_one_of_the_kubernetes_effects() -> None:
    body = obj("ResourceFlavor", "f", {"nodeTaints": [{"key": "k", "effect": "Never"}]})
    assert errors_of(body) == [
        'spec.nodeTaints[0].effect: Unsupported value: "Never": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    ]


def test_a_toleration_without_key_must_use_exists() -> None:
    body = obj("ResourceFlavor", "f", {"tolerations": [{"operator": "Equal", "value": "x"}]})
    assert errors_of(body) == [
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
        '`key` is empty, which means "match all values and all keys"'
    ]


# --- LocalQueue, Cohort, WorkloadPriorityClass, Topology -----------------------------------


def test_a_local_queue_names_its_cluster_queue() -> None:
    body = obj("LocalQueue", "q", {})
    body["metadata"]["namespace"] = "team-a"
    assert errors_of(body) == ["spec.clusterQueue: Required value"]


def test_a_cohort_cannot_be_its_own_parent() -> None:
    assert errors_of(obj("Cohort", "dept", {"parentName": "dept"})) == [
        'spec.parentName: Invalid value: "dept": a cohort cannot be its own parent'
    ]


def test_a_root_cohort_may_not_set_borrowing_or_lending_limits() -> None:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [flavor("a", ("cpu", "4"), borrowingLimit="1", lendingLimit="1")],
        }
    ]
    assert errors_of(obj("Cohort", "root", {"resourceGroups": groups})) == [
        f"{RG}[0].flavors[0].resources[0].borrowingLimit: Forbidden: must be nil when parent is empty",
        f"{RG}[0].flavors[0].resources[0].lendingLimit: Forbidden: must be nil when parent is empty",
    ]


def test_a_child_cohort_may_limit_borrowing_and_lending() -> None:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [flavor("a", ("cpu", "4"), borrowingLimit="1", lendingLimit="1")],
        }
    ]
    assert errors_of(obj("Cohort", "team", {"parentName": "dept", "resourceGroups": groups})) == []


def test_a_priority_class_value_is_a_32_bit_integer() -> None:
    assert errors_of(obj("WorkloadPriorityClass", "huge", value=2**31)) == [
        "value: Invalid value: 2147483648: must be a 32-bit integer"
    ]


def _topology(*labels: str) -> dict[str, Any]:
    return obj("Topology", "fabric", {"levels": [{"nodeLabel": label} for label in labels]})


def test_hostname_may_only_be_the_lowest_topology_level() -> None:
    assert errors_of(_topology("kubernetes.io/hostname", "example.com/rack")) == [
        'spec.levels[0].nodeLabel: Invalid value: "kubernetes.io/hostname": '
        "kubernetes.io/hostname can only be used as the lowest topology level"
    ]


def test_topology_levels_are_unique() -> None:
    assert errors_of(_topology("example.com/rack", "example.com/rack")) == [
        'spec.levels[1].nodeLabel: Duplicate value: "example.com/rack"'
    ]


def test_a_topology_has_between_one_and_sixteen_levels() -> None:
    assert errors_of(_topology()) == ["spec.levels: Required value: must have at least 1 item"]
    assert errors_of(_topology(*[f"example.com/l{i}" for i in range(17)])) == [
        "spec.levels: Too many: 17: must have at most 16 items"
    ]
