"""The pod-spec and job-spec rules not covered one by one elsewhere, as a table: each case
breaks one rule of a valid Job and expects exactly one error, with its field path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api.helpers import errors_of

Body = dict[str, Any]


def valid_job() -> Body:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "completions": 4,
            "parallelism": 2,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }


def pod(body: Body) -> Body:
    spec = body["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def main(body: Body) -> Body:
    container = pod(body)["containers"][0]
    assert isinstance(container, dict)
    return container


def set_pod(**fields: Any) -> Callable[[Body], None]:
    return lambda body: pod(body).update(fields)


def set_main(**fields: Any) -> Callable[[Body], None]:
    return lambda body: main(body).update(fields)


def set_spec(**fields: Any) -> Callable[[Body], None]:
    return lambda body: body["spec"].update(fields)


def set_template_meta(**fields: Any) -> Callable[[Body], None]:
    return lambda body: body["spec"]["template"].update(metadata=fields)


BAD_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character, with at most 63 characters"
)


T = "spec.template.spec"
C = f"{T}.containers[0]"

CASES = [
    pytest.param(
        set_pod(initContainers=[{"name": "i", "image": "x", "restartPolicy": "OnFailure"}]),
        f'{T}.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported '
        'values: "Always"',
        id="an_init_container_restart_policy_can_only_be_always",
    ),
    pytest.param(
        set_main(env=[{"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]),
        f'{C}.env[0].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
        id="an_env_var_has_a_value_or_a_source_not_both",
    ),
    pytest.param(
        set_main(env=[{"name": "A", "valueFrom": {}}]),
        f'{C}.env[0].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
        "`resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`",
        id="an_env_var_source_names_one_source",
    ),
    pytest.param(
        set_main(ports=[{"containerPort": 1, "name": "p"}, {"containerPort": 2, "name": "p"}]),
        f'{C}.ports[1].name: Duplicate value: "p"',
        id="port_names_are_unique_within_a_container",
    ),
    pytest.param(
        lambda b: (
            pod(b).update(volumes=[{"name": "v", "emptyDir": {}}]),
            main(b).update(
                volumeMounts=[{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}]
            ),
        ),
        f'{C}.volumeMounts[1].mountPath: Invalid value: "/a": must be unique',
        id="mount_paths_are_unique_within_a_container",
    ),
    pytest.param(
        lambda b: (
            pod(b).update(volumes=[{"name": "v", "emptyDir": {}}]),
            main(b).update(
                volumeMounts=[{"name": "v", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"}]
            ),
        ),
        f'{C}.volumeMounts[0].subPathExpr: Invalid value: "y": subPathExpr and subPath are '
        "mutually exclusive",
        id="sub_path_and_sub_path_expr_are_exclusive",
    ),
    pytest.param(
        set_pod(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
        f'{T}.volumes[1].name: Duplicate value: "v"',
        id="volume_names_are_unique",
    ),
    *(
        pytest.param(
            set_main(resources={field: {"cpu": "-1"}}),
            f'{C}.resources.{field}[cpu]: Invalid value: "-1": must be greater than or equal to 0',
            id=f"{field}_may_not_be_negative",
        )
        for field in ("limits", "requests")
    ),
    *(
        pytest.param(
            set_template_meta(**{field: {"bad key!": "x"}}),
            f'spec.template.metadata.{field}: Invalid value: "bad key!": {BAD_NAME_PART}',
            id=f"template_{field}_keys_are_qualified_names",
        )
        for field in ("labels", "annotations")
    ),
    pytest.param(
        set_pod(overhead={"memory": "-1Mi"}),
        f'{T}.overhead[memory]: Invalid value: "-1Mi": must be greater than or equal to 0',
        id="overhead_may_not_be_negative",
    ),
    pytest.param(
        set_pod(resources={"requests": {"nvidia.com/gpu": "1"}}),
        f'{T}.resources.requests[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": '
        'supported values: "cpu", "memory", "hugepages-*"',
        id="pod_level_resources_are_cpu_memory_and_hugepages",
    ),
    pytest.param(
        set_pod(activeDeadlineSeconds=0),
        f"{T}.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
        id="a_pod_active_deadline_is_positive",
    ),
    pytest.param(
        set_pod(terminationGracePeriodSeconds=-1),
        f"{T}.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0",
        id="a_termination_grace_period_is_not_negative",
    ),
    pytest.param(
        set_pod(hostname="Not_A_Label"),
        f'{T}.hostname: Invalid value: "Not_A_Label": a lowercase RFC 1123 label must consist of '
        "lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        id="a_hostname_is_a_dns_label",
    ),
    pytest.param(
        set_pod(nodeSelector={"bad key!": "x"}),
        f'{T}.nodeSelector: Invalid value: "bad key!": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character, with "
        "at most 63 characters",
        id="node_selector_keys_are_label_keys",
    ),
    pytest.param(
        set_pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In"}]}
                        ]
                    }
                }
            }
        ),
        f"{T}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'",
        id="an_in_node_selector_requirement_has_values",
    ),
    pytest.param(
        set_pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "gen", "operator": "Gt", "values": ["x"]}
                                ]
                            }
                        ]
                    }
                }
            }
        ),
        f"{T}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        'nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "x": must be an '
        "integer when `operator` is 'Lt' or 'Gt'",
        id="a_gt_node_selector_requirement_has_one_integer",
    ),
    pytest.param(
        set_pod(
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 101, "preference": {"matchExpressions": []}}
                    ]
                }
            }
        ),
        f"{T}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "Invalid value: 101: must be in the range 1-100",
        id="a_preferred_node_affinity_weight_is_1_to_100",
    ),
    pytest.param(
        set_pod(
            topologySpreadConstraints=[
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        ),
        f"{T}.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        id="a_topology_spread_max_skew_is_positive",
    ),
    pytest.param(
        set_pod(schedulingGates=[{"name": "example.com/gate"}, {"name": "example.com/gate"}]),
        f'{T}.schedulingGates[1].name: Duplicate value: "example.com/gate"',
        id="scheduling_gates_are_unique",
    ),
    pytest.param(
        set_pod(tolerations=[{"operator": "Equal", "value": "x"}]),
        f'{T}.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
        '`key` is empty, which means "match all values and all keys"',
        id="a_toleration_without_a_key_must_use_exists",
    ),
    pytest.param(
        set_spec(parallelism=100_001),
        "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when "
        "completion mode is Indexed",
        id="an_indexed_job_runs_at_most_100000_pods_at_once",
    ),
    pytest.param(
        set_spec(backoffLimitPerIndex=1, maxFailedIndexes=5),
        "spec.maxFailedIndexes: Invalid value: 5: must be less than or equal to completions",
        id="max_failed_indexes_is_at_most_completions",
    ),
    pytest.param(
        set_spec(
            podFailurePolicy={
                "rules": [
                    {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [3, 1]}}
                ]
            }
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 1: must be ordered",
        id="exit_codes_are_ordered",
    ),
    pytest.param(
        set_spec(
            podFailurePolicy={
                "rules": [
                    {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1, 1]}}
                ]
            }
        ),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Duplicate value: 1",
        id="exit_codes_are_unique",
    ),
    pytest.param(
        set_spec(
            podFailurePolicy={
                "rules": [
                    {
                        "action": "Ignore",
                        "onExitCodes": {"operator": "In", "values": [1]},
                        "onPodConditions": [{"type": "DisruptionTarget"}],
                    }
                ]
            }
        ),
        'spec.podFailurePolicy.rules[0]: Invalid value: "": specifying both OnExitCodes and '
        "OnPodConditions is not supported",
        id="a_pod_failure_rule_has_exit_codes_or_conditions_not_both",
    ),
    pytest.param(
        set_spec(
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
                * 21
            }
        ),
        "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items",
        id="a_pod_failure_policy_has_at_most_20_rules",
    ),
    pytest.param(
        set_spec(
            podReplacementPolicy="TerminatingOrFailed",
            podFailurePolicy={
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            },
        ),
        'spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": supported values: '
        '"Failed"',
        id="pod_replacement_is_failed_with_a_pod_failure_policy",
    ),
    pytest.param(
        set_spec(successPolicy={"rules": []}),
        "spec.successPolicy.rules: Required value: at least one rules must be specified",
        id="a_success_policy_has_rules",
    ),
    pytest.param(
        set_spec(successPolicy={"rules": [{}]}),
        "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or "
        "succeededIndexes must be specified",
        id="a_success_rule_names_a_count_or_indexes",
    ),
    pytest.param(
        set_spec(successPolicy={"rules": [{"succeededIndexes": "0-2,x"}]}),
        'spec.successPolicy.rules[0].succeededIndexes: Invalid value: "0-2,x": error parsing '
        'succeededIndexes: must be a comma-separated list of indexes or index ranges such as "1,3-5"',
        id="succeeded_indexes_are_index_intervals",
    ),
    pytest.param(
        set_spec(managedBy="example.com/" + "x" * 60),
        "spec.managedBy: Too long: may not be more than 63 bytes",
        id="managed_by_is_at_most_63_characters",
    ),
]


def test_the_base_job_of_the_table_is_valid() -> None:
    assert errors_of(valid_job()) == []


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_a_broken_pod_or_job_spec_reports_the_field(
    change: Callable[[Body], object], expected: str
) -> None:
    body = valid_job()
    change(body)
    assert errors_of(body) == [expected]
