"""The agent plays the JobSet controller's part: start order (InOrder, dependsOn Ready or
Complete), success policy (All or Any over target replicated jobs), failure policy (rules in
order, restarts against maxRestarts) and the headless Service — as tables over the Jobs'
states."""

from __future__ import annotations

from typing import Any

import pytest

from agent.jobsets import JobSetPolicy, JobView, decide, headless_service, job_view, policy_of


def jobset(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train"},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {}},
                {"name": "workers", "replicas": 2, "template": {}},
            ],
            **spec,
        },
    }


def view(name: str, *, ready: int = 0, complete: bool = False, failed: Any = None) -> JobView:
    role = name.split("-")[1]
    return JobView(name, role, 0, 1, ready=ready, complete=complete, failed=failed)


DRIVER = "train-driver-0"
WORKERS = ("train-workers-0", "train-workers-1")


def policy(**spec: Any) -> JobSetPolicy:
    found = policy_of(jobset(**spec), "train")
    assert found is not None
    return found


class TestStartOrder:
    def test_any_order_starts_every_replicated_job_at_once(self) -> None:
        assert decide(policy(), [], 0).roles_started == {"driver", "workers"}

    def test_in_order_starts_the_next_only_once_every_job_before_is_ready(self) -> None:
        in_order = policy(startupPolicy={"startupPolicyOrder": "InOrder"})
        assert decide(in_order, [], 0).roles_started == {"driver"}
        assert decide(in_order, [view(DRIVER)], 0).roles_started == {"driver"}
        assert decide(in_order, [view(DRIVER, ready=1)], 0).roles_started == {"driver", "workers"}

    def test_depends_on_complete_waits_for_completion(self) -> None:
        spec = jobset()
        spec["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": "Complete"}]
        depends = policy_of(spec, "train")
        assert depends is not None
        assert decide(depends, [view(DRIVER, ready=1)], 0).roles_started == {"driver"}
        started = decide(depends, [view(DRIVER, complete=True)], 0).roles_started
        assert started == {"driver", "workers"}


class TestSuccess:
    def test_all_needs_every_job(self) -> None:
        jobs = [view(DRIVER, complete=True), view(WORKERS[0], complete=True), view(WORKERS[1])]
        assert decide(policy(), jobs, 0).outcome is None
        done = [*jobs[:2], view(WORKERS[1], complete=True)]
        assert decide(policy(), done, 0).outcome == "Succeeded"

    def test_any_over_targets_succeeds_with_the_first_targeted_completion(self) -> None:
        any_driver = policy(successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]})
        assert decide(any_driver, [view(WORKERS[0], complete=True)], 0).outcome is None
        decision = decide(any_driver, [view(DRIVER, complete=True), view(WORKERS[0])], 0)
        assert decision.outcome == "Succeeded"
        assert decision.message == "job train-driver-0 completed (successPolicy Any)"


FAILED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


class TestFailure:
    def test_without_a_failure_policy_a_failed_job_fails_the_jobset(self) -> None:
        decision = decide(policy(), [view(WORKERS[0], failed=FAILED)], 0)
        assert decision.outcome == "Failed"
        assert "job train-workers-0 failed: BackoffLimitExceeded" in decision.message

    def test_a_failure_policy_restarts_every_job_until_max_restarts(self) -> None:
        restarting = policy(failurePolicy={"maxRestarts": 2})
        jobs = [view(DRIVER, ready=1), view(WORKERS[0], failed=FAILED), view(WORKERS[1])]
        decision = decide(restarting, jobs, 1)
        assert decision.outcome is None
        assert decision.restart == (DRIVER, *WORKERS)
        assert decision.counted
        spent = decide(restarting, jobs, 2)
        assert spent.outcome == "Failed"
        assert "reached the maximum of 2 restarts" in spent.message

    @pytest.mark.parametrize(
        ("rule", "outcome", "restart"),
        [
            (
                {"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
                "Failed",
                (),
            ),
            (
                {
                    "action": "RestartJobSetAndIgnoreMaxRestarts",
                    "targetReplicatedJobs": ["workers"],
                },
                None,
                (WORKERS[0],),
            ),
            (
                {"action": "RestartJob", "onJobFailureMessagePatterns": ["backoff limit"]},
                None,
                (WORKERS[0],),
            ),
            ({"action": "FailJobSet", "targetReplicatedJobs": ["driver"]}, None, (WORKERS[0],)),
        ],
        ids=[
            "by_reason",
            "ignoring_max_restarts",
            "only_the_failed_job",
            "a_rule_that_does_not_match",
        ],
    )
    def test_the_first_matching_rule_acts(
        self, rule: dict[str, Any], outcome: str | None, restart: tuple[str, ...]
    ) -> None:
        ruled = policy(
            failurePolicy={"maxRestarts": 0 if outcome else 5, "rules": [{"name": "r", **rule}]}
        )
        decision = decide(ruled, [view(WORKERS[0], failed=FAILED)], 0)
        assert decision.outcome == outcome
        assert decision.restart == restart
        if rule["action"] == "RestartJobSetAndIgnoreMaxRestarts":
            assert not decision.counted


class TestNetwork:
    def test_a_headless_service_selects_the_jobsets_pods(self) -> None:
        service = headless_service(policy(), "ns", {"multiq.dev/workload-uid": "u"})
        assert service is not None
        assert service["metadata"]["name"] == "train"
        assert service["spec"] == {
            "clusterIP": "None",
            "selector": {"jobset.sigs.k8s.io/jobset-name": "train"},
            "publishNotReadyAddresses": True,
        }

    def test_no_service_when_dns_hostnames_are_off_and_the_subdomain_is_used_when_given(
        self,
    ) -> None:
        assert headless_service(policy(network={"enableDNSHostnames": False}), "ns", {}) is None
        named = headless_service(policy(network={"subdomain": "mesh"}), "ns", {})
        assert named is not None and named["metadata"]["name"] == "mesh"


def test_a_job_is_read_with_its_role_attempt_and_state() -> None:
    job = {
        "metadata": {
            "name": "train-workers-1",
            "labels": {
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/restart-attempt": "2",
            },
        },
        "spec": {"parallelism": 4},
        "status": {
            "ready": 3,
            "succeeded": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}],
        },
    }
    seen = job_view(job)
    assert (seen.role, seen.attempt, seen.is_ready, seen.failed) == (
        "workers",
        2,
        True,
        ("DeadlineExceeded", ""),
    )


def test_other_sources_have_no_jobset_policy() -> None:
    assert policy_of({"apiVersion": "batch/v1", "kind": "Job"}, "j") is None
    assert policy_of(None, "j") is None
