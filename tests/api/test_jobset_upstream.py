"""Upstream jobset.x-k8s.io/v1alpha2 JobSet YAML is accepted as the JobSet controller accepts
it, and its webhook's rules are reported with field paths."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from api.codec import decode, load_documents
from api.k8s.jobset import JobSet
from api.kinds import REGISTRY
from tests.api.helpers import errors_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PYTORCH_JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: pytorch
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: ml-queue}
spec:
  managedBy: multiq.dev/hub
  suspend: true
  ttlSecondsAfterFinished: 3600
  network: {enableDNSHostnames: true, subdomain: pytorch-net, publishNotReadyAddresses: true}
  coordinator: {replicatedJob: leader, jobIndex: 0, podIndex: 0}
  successPolicy: {operator: Any, targetReplicatedJobs: [leader]}
  failurePolicy:
    maxRestarts: 3
    restartStrategy: BlockingRecreate
    rules:
      - name: failOnBadConfig
        action: FailJobSet
        onJobFailureReasons: [PodFailurePolicy]
        onJobFailureMessagePatterns: ["exit code 42"]
      - name: preemption
        action: RestartJobSetAndIgnoreMaxRestarts
        onJobFailureReasons: [BackoffLimitExceeded]
        targetReplicatedJobs: [workers]
  replicatedJobs:
    - name: leader
      replicas: 1
      template:
        metadata:
          labels: {role: leader}
        spec:
          parallelism: 1
          completions: 1
          backoffLimit: 0
          template:
            metadata:
              annotations: {kueue.x-k8s.io/podset-required-topology: cloud.provider.com/block}
            spec:
              containers:
                - name: leader
                  image: pytorch/pytorch:2.4.0
                  command: [torchrun, --nnodes=3, train.py]
                  env:
                    - {name: MASTER_ADDR, value: pytorch-leader-0-0.pytorch-net}
                  ports: [{containerPort: 29500}]
                  resources:
                    limits: {nvidia.com/gpu: "8", cpu: "32", memory: 256Gi}
    - name: workers
      replicas: 2
      dependsOn: [{name: leader, status: Ready}]
      template:
        spec:
          parallelism: 4
          completions: 4
          completionMode: Indexed
          backoffLimit: 0
          podFailurePolicy:
            rules:
              - action: FailJob
                onExitCodes: {containerName: worker, operator: In, values: [42]}
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: worker
                  image: pytorch/pytorch:2.4.0
                  command: [torchrun, --nnodes=3, train.py]
                  resources:
                    limits: {nvidia.com/gpu: "8", cpu: "32", memory: 256Gi}
"""


def pytorch() -> dict[str, Any]:
    body = yaml.safe_load(PYTORCH_JOBSET)
    assert isinstance(body, dict)
    return body


def test_a_realistic_pytorch_jobset_is_accepted_and_round_trips() -> None:
    (doc,) = load_documents(PYTORCH_JOBSET)
    js = decode(doc.body, REGISTRY)
    assert isinstance(js, JobSet)
    assert [rj.name for rj in js.spec.replicated_jobs] == ["leader", "workers"]
    assert js.spec.network is not None and js.spec.network.enable_dns_hostnames is True
    assert js.to_wire()["spec"]["network"]["enableDNSHostnames"] is True
    assert decode(js.to_wire(), REGISTRY) == js


def test_the_example_training_jobset_is_accepted() -> None:
    (doc,) = load_documents((EXAMPLES / "jobset-training.yaml").read_text())
    assert isinstance(decode(doc.body, REGISTRY), JobSet)


def test_an_unknown_jobset_field_is_rejected() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][0]["replica"] = 2
    assert errors_of(body) == [
        "spec.replicatedJobs[0].replica: Unknown field: this field is not part of the schema"
    ]


def test_restart_policy_defaults_to_on_failure_in_a_jobset() -> None:
    # leader's template leaves restartPolicy empty: JobSet's webhook makes it OnFailure.
    assert errors_of(pytorch()) == []


def test_replicated_job_names_are_unique() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][1]["name"] = "leader"
    body["spec"]["replicatedJobs"][1]["dependsOn"] = []
    body["spec"]["failurePolicy"]["rules"][1]["targetReplicatedJobs"] = []
    assert errors_of(body) == ['spec.replicatedJobs[1].name: Duplicate value: "leader"']


def test_a_jobset_needs_replicated_jobs() -> None:
    body = pytorch()
    body["spec"] = {"replicatedJobs": []}
    assert errors_of(body) == ["spec.replicatedJobs: Required value: must have at least 1 item"]


def test_success_policy_targets_must_exist() -> None:
    body = pytorch()
    body["spec"]["successPolicy"]["targetReplicatedJobs"] = ["driver"]
    assert errors_of(body) == [
        'spec.successPolicy.targetReplicatedJobs[0]: Not found: "driver": does not appear in '
        "spec.replicatedJobs"
    ]


def test_failure_policy_rule_targets_must_exist() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][0]["targetReplicatedJobs"] = ["ps"]
    assert errors_of(body) == [
        'spec.failurePolicy.rules[0].targetReplicatedJobs[0]: Not found: "ps": does not appear '
        "in spec.replicatedJobs"
    ]


def test_failure_policy_rule_names_are_unique() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][1]["name"] = "failOnBadConfig"
    assert errors_of(body) == [
        'spec.failurePolicy.rules[1].name: Duplicate value: "failOnBadConfig"'
    ]


def test_failure_policy_rule_names_are_identifiers() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][0]["name"] = "fail-on-bad-config"
    assert errors_of(body) == [
        'spec.failurePolicy.rules[0].name: Invalid value: "fail-on-bad-config": must match the '
        "regular expression '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'"
    ]


def test_job_failure_reasons_are_the_known_ones() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][0]["onJobFailureReasons"] = ["OOMKilled"]
    (error,) = errors_of(body)
    assert error.startswith(
        'spec.failurePolicy.rules[0].onJobFailureReasons[0]: Unsupported value: "OOMKilled"'
    )


def test_failure_policy_actions_are_the_known_ones() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][0]["action"] = "Retry"
    (error,) = errors_of(body)
    assert error.startswith('spec.failurePolicy.rules[0].action: Unsupported value: "Retry"')


def test_startup_policy_in_order_and_depends_on_are_mutually_exclusive() -> None:
    body = pytorch()
    body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    assert errors_of(body) == [
        'spec: Invalid value: "": StartupPolicy and DependsOn APIs are mutually exclusive'
    ]


def test_the_first_replicated_job_cannot_depend_on_another() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "workers", "status": "Ready"}]
    assert errors_of(body) == [
        'spec.replicatedJobs[0].dependsOn: Invalid value: "workers": the first replicated job '
        "cannot depend on another"
    ]


def test_depends_on_names_an_earlier_replicated_job() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "workers", "status": "Complete"}]
    assert errors_of(body) == [
        'spec.replicatedJobs[1].dependsOn[0].name: Invalid value: "workers": must name a '
        "replicated job listed before this one"
    ]


def test_depends_on_status_is_ready_or_complete() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "leader", "status": "Running"}]
    assert errors_of(body) == [
        'spec.replicatedJobs[1].dependsOn[0].status: Unsupported value: "Running": supported '
        'values: "Ready", "Complete"'
    ]


def test_the_coordinator_names_an_existing_pod() -> None:
    body = pytorch()
    body["spec"]["coordinator"] = {"replicatedJob": "workers", "jobIndex": 2, "podIndex": 4}
    assert errors_of(body) == [
        "spec.coordinator.jobIndex: Invalid value: 2: must be between 0 and 1 (replicas of "
        "workers)",
        "spec.coordinator.podIndex: Invalid value: 4: must be between 0 and 3 (completions of "
        "workers)",
    ]


def test_the_subdomain_is_a_dns_name() -> None:
    body = pytorch()
    body["spec"]["network"]["subdomain"] = "Bad_Net"
    (error,) = errors_of(body)
    assert error.startswith('spec.network.subdomain: Invalid value: "Bad_Net"')


def test_generated_job_names_must_fit_in_63_characters() -> None:
    body = pytorch()
    body["metadata"]["name"] = "a" * 60
    errors = errors_of(body)
    assert errors[0].startswith('spec.replicatedJobs[0].name: Invalid value: "leader": job name')


def test_replicated_job_templates_get_job_validation() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = -1
    assert errors_of(body) == [
        "spec.replicatedJobs[1].template.spec.parallelism: Invalid value: -1: must be greater "
        "than or equal to 0"
    ]


def test_an_indexed_default_needs_completions_when_parallelism_is_set() -> None:
    body = pytorch()
    del body["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"]
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 2
    assert errors_of(copy.deepcopy(body)) == [
        "spec.replicatedJobs[0].template.spec.completions: Required value: when completion mode "
        "is Indexed"
    ]


def _rj(body: dict[str, Any], i: int) -> dict[str, Any]:
    rj = body["spec"]["replicatedJobs"][i]
    assert isinstance(rj, dict)
    return rj


def test_replicas_may_not_be_negative() -> None:
    body = pytorch()
    _rj(body, 0)["replicas"] = -1
    assert errors_of(body) == [
        "spec.replicatedJobs[0].replicas: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_replicas_times_parallelism_fits_in_32_bits() -> None:
    body = pytorch()
    _rj(body, 1)["replicas"] = 2**30
    errors = errors_of(body)
    assert (
        "spec.replicatedJobs[1].replicas: Invalid value: 1073741824: the product of replicas and "
        "parallelism must not exceed 2147483647"
    ) in errors


def test_depends_on_supports_one_entry() -> None:
    body = pytorch()
    body["spec"]["replicatedJobs"].append(copy.deepcopy(_rj(body, 1)) | {"name": "eval"})
    _rj(body, 2)["dependsOn"] = [
        {"name": "leader", "status": "Complete"},
        {"name": "workers", "status": "Complete"},
    ]
    assert errors_of(body) == [
        "spec.replicatedJobs[2].dependsOn: Too many: 2: must have at most 1 items"
    ]


def test_restarting_single_jobs_needs_at_most_1024_replicas() -> None:
    body = pytorch()
    _rj(body, 1)["replicas"] = 1025
    body["spec"]["failurePolicy"]["rules"][1]["action"] = "RestartJob"
    assert errors_of(body) == [
        'spec.failurePolicy.rules[1].action: Invalid value: "RestartJob": requires every '
        "replicated job to have at most 1024 replicas; spec.replicatedJobs[1] has 1025"
    ]


def test_ttl_after_finished_is_not_negative() -> None:
    body = pytorch()
    body["spec"]["ttlSecondsAfterFinished"] = -1
    assert errors_of(body) == [
        "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_managed_by_is_domain_prefixed() -> None:
    body = pytorch()
    body["spec"]["managedBy"] = "multiq"
    assert errors_of(body) == [
        'spec.managedBy: Invalid value: "multiq": must be a domain-prefixed path (such as '
        '"acme.io/foo")'
    ]


def test_failure_message_patterns_are_valid_regular_expressions() -> None:
    body = pytorch()
    body["spec"]["failurePolicy"]["rules"][0]["onJobFailureMessagePatterns"] = ["["]
    (error,) = errors_of(body)
    assert error.startswith(
        'spec.failurePolicy.rules[0].onJobFailureMessagePatterns[0]: Invalid value: "[": must be '
        "a valid regular expression"
    )
