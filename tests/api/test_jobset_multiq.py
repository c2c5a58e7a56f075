"""MultiQ's own JobSet (multiq.dev/v1alpha1): roles, start order, failure and success policies,
each rule reported with its field path."""

from __future__ import annotations

from typing import Any

from api.v1alpha1.jobset import JobSet
from tests.api.helpers import decoded, errors_of


def role(name: str, replicas: int = 1, parallelism: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {"spec": {"containers": [{"name": "main", "image": "trainer"}]}},
            }
        },
        **extra,
    }


def jobset(*roles: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"multiq.dev/queue-name": "q"}},
        "spec": {
            "replicatedJobs": list(roles)
            or [
                role("driver"),
                role("workers", 2, 4, dependsOn=[{"name": "driver", "status": "Ready"}]),
            ],
            **spec,
        },
    }


def test_a_valid_multiq_jobset_has_no_errors() -> None:
    body = jobset(
        network={"enableDNSHostnames": True, "subdomain": "train"},
        coordinator={"replicatedJob": "driver"},
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]},
        failurePolicy={
            "maxRestarts": 3,
            "rules": [
                {
                    "name": "noRetryOnBadInput",
                    "action": "FailJobSet",
                    "onJobFailureReasons": ["PodFailurePolicy"],
                    "targetReplicatedJobs": ["workers"],
                }
            ],
        },
    )
    assert errors_of(body) == []


def test_it_is_a_different_kind_from_upstream_jobset() -> None:
    js = decoded(jobset())
    assert isinstance(js, JobSet)
    assert js.api_version == "multiq.dev/v1alpha1"


def test_role_names_are_unique() -> None:
    assert errors_of(jobset(role("a"), role("a"))) == [
        'spec.replicatedJobs[1].name: Duplicate value: "a"'
    ]


def test_every_role_has_at_least_one_replica() -> None:
    assert errors_of(jobset(role("a", replicas=0))) == [
        "spec.replicatedJobs[0].replicas: Invalid value: 0: must be greater than or equal to 1"
    ]


def test_a_jobset_has_at_least_one_role() -> None:
    body = jobset()
    body["spec"]["replicatedJobs"] = []
    assert errors_of(body) == ["spec.replicatedJobs: Required value: must have at least 1 item"]


def test_a_jobset_has_at_most_eighteen_roles() -> None:
    assert errors_of(jobset(*(role(f"r{i}") for i in range(19)))) == [
        "spec.replicatedJobs: Too many: 19: must have at most 18 items"
    ]


def test_depends_on_refers_to_earlier_roles_only() -> None:
    body = jobset(role("a", dependsOn=[{"name": "b", "status": "Ready"}]), role("b"))
    assert errors_of(body) == [
        'spec.replicatedJobs[0].dependsOn[0].name: Invalid value: "b": must name a replicated '
        "job listed before this one"
    ]


def test_a_role_cannot_depend_on_itself() -> None:
    body = jobset(role("a"), role("b", dependsOn=[{"name": "b", "status": "Complete"}]))
    assert errors_of(body) == [
        'spec.replicatedJobs[1].dependsOn[0].name: Invalid value: "b": a replicated job cannot '
        "depend on itself"
    ]


def test_depends_on_names_an_existing_role() -> None:
    body = jobset(role("a"), role("b", dependsOn=[{"name": "c", "status": "Complete"}]))
    assert errors_of(body) == [
        'spec.replicatedJobs[1].dependsOn[0].name: Not found: "c": does not appear in '
        "spec.replicatedJobs"
    ]


def test_a_role_may_depend_on_several_earlier_roles_and_starts_in_waves() -> None:
    body = jobset(
        role("data"),
        role("ps"),
        role(
            "workers",
            dependsOn=[{"name": "data", "status": "Complete"}, {"name": "ps", "status": "Ready"}],
        ),
        role("eval", dependsOn=[{"name": "workers", "status": "Complete"}]),
    )
    js = decoded(body)
    assert isinstance(js, JobSet)
    assert js.start_order() == [["data", "ps"], ["workers"], ["eval"]]


def test_in_order_startup_and_depends_on_are_mutually_exclusive() -> None:
    body = jobset(startupPolicy={"startupPolicyOrder": "InOrder"})
    assert errors_of(body) == [
        "spec.startupPolicy: Forbidden: startupPolicyOrder InOrder and dependsOn are mutually "
        "exclusive"
    ]


def test_in_order_startup_starts_one_role_at_a_time() -> None:
    js = decoded(jobset(role("a"), role("b"), startupPolicy={"startupPolicyOrder": "InOrder"}))
    assert isinstance(js, JobSet)
    assert js.start_order() == [["a"], ["b"]]


def test_failure_actions_are_the_ones_multiq_implements() -> None:
    body = jobset(failurePolicy={"rules": [{"action": "RestartJob"}]})
    assert errors_of(body) == [
        'spec.failurePolicy.rules[0].action: Unsupported value: "RestartJob": supported values: '
        '"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"'
    ]


def test_failure_rule_targets_exist() -> None:
    body = jobset(
        failurePolicy={"rules": [{"action": "FailJobSet", "targetReplicatedJobs": ["x"]}]}
    )
    assert errors_of(body) == [
        'spec.failurePolicy.rules[0].targetReplicatedJobs[0]: Not found: "x": does not appear '
        "in spec.replicatedJobs"
    ]


def test_failure_message_patterns_are_regular_expressions() -> None:
    rule = {"action": "FailJobSet", "onJobFailureMessagePatterns": ["(unclosed"]}
    (error,) = errors_of(jobset(failurePolicy={"rules": [rule]}))
    assert error.startswith(
        'spec.failurePolicy.rules[0].onJobFailureMessagePatterns[0]: Invalid value: "(unclosed": '
        "must be a valid regular expression"
    )


def test_max_restarts_may_not_be_negative() -> None:
    assert errors_of(jobset(failurePolicy={"maxRestarts": -1})) == [
        "spec.failurePolicy.maxRestarts: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_success_policy_targets_exist() -> None:
    body = jobset(successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]})
    assert errors_of(body) == [
        'spec.successPolicy.targetReplicatedJobs[0]: Not found: "nope": does not appear in '
        "spec.replicatedJobs"
    ]


def test_the_coordinator_role_exists() -> None:
    assert errors_of(jobset(coordinator={"replicatedJob": "leader"})) == [
        'spec.coordinator.replicatedJob: Not found: "leader": does not appear in '
        "spec.replicatedJobs"
    ]


def test_the_dns_subdomain_is_a_dns_name() -> None:
    (error,) = errors_of(jobset(network={"subdomain": "No_Good"}))
    assert error.startswith('spec.network.subdomain: Invalid value: "No_Good"')


def test_a_role_lists_each_dependency_once() -> None:
    dep = {"name": "a", "status": "Ready"}
    assert errors_of(jobset(role("a"), role("b", dependsOn=[dep, dep]))) == [
        'spec.replicatedJobs[1].dependsOn[1].name: Duplicate value: "a"'
    ]


def test_ttl_after_finished_is_not_negative() -> None:
    assert errors_of(jobset(ttlSecondsAfterFinished=-1)) == [
        "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"
    ]
