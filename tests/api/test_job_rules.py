"""batch/v1 Job: real YAML is accepted, and the API server's rules on the fields MultiQ relies
on are reported with their field paths."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from api.codec import decode, load_documents
from api.k8s.batch import Job, pods_count
from api.k8s.pod import Pod
from api.kinds import REGISTRY
from tests.api.helpers import errors_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

REAL_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "2"}
spec:
  parallelism: 3
  completions: 3
  completionMode: Indexed
  backoffLimitPerIndex: 1
  maxFailedIndexes: 1
  activeDeadlineSeconds: 3600
  ttlSecondsAfterFinished: 600
  suspend: true
  podReplacementPolicy: Failed
  podFailurePolicy:
    rules:
      - action: FailJob
        onExitCodes: {containerName: pi, operator: In, values: [42]}
      - action: Ignore
        onPodConditions: [{type: DisruptionTarget}]
  successPolicy:
    rules: [{succeededIndexes: "0-1", succeededCount: 1}]
  template:
    metadata:
      labels: {app: pi}
      annotations: {kueue.x-k8s.io/podset-preferred-topology: cloud.provider.com/rack}
    spec:
      restartPolicy: Never
      priorityClassName: high
      serviceAccountName: runner
      schedulerName: default-scheduler
      terminationGracePeriodSeconds: 30
      hostname: pi
      subdomain: pi-svc
      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: topology.kubernetes.io/zone, operator: In, values: [us-east1-b]}
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              preference:
                matchExpressions: [{key: pool, operator: NotIn, values: [spot]}]
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                labelSelector: {matchLabels: {app: pi}}
                topologyKey: kubernetes.io/hostname
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector: {matchLabels: {app: pi}}
      securityContext: {runAsNonRoot: true, fsGroup: 1000}
      imagePullSecrets: [{name: regcred}]
      volumes:
        - {name: data, persistentVolumeClaim: {claimName: datasets, readOnly: true}}
        - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Gi}}
        - {name: config, configMap: {name: pi-config, items: [{key: a, path: a.yaml}]}}
        - {name: shared, nfs: {server: nfs.local, path: /exports}}
        - name: s3
          csi: {driver: s3.csi.aws.com, volumeAttributes: {bucketName: data}}
        - name: token
          projected: {sources: [{serviceAccountToken: {path: token}}]}
      initContainers:
        - name: fetch
          image: busybox
          command: [sh, -c, "cp /data/x /scratch"]
          volumeMounts: [{name: scratch, mountPath: /scratch}]
        - name: log-shipper
          image: fluent-bit
          restartPolicy: Always
          resources: {requests: {cpu: 100m, memory: 64Mi}}
      containers:
        - name: pi
          image: perl:5.34.0
          imagePullPolicy: IfNotPresent
          command: [perl, -Mbignum=bpi, -wle, "print bpi(2000)"]
          args: ["--verbose"]
          workingDir: /work
          env:
            - {name: MODE, value: fast}
            - name: NODE
              valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
            - name: TOKEN
              valueFrom: {secretKeyRef: {name: creds, key: token, optional: true}}
            - name: CPU_LIMIT
              valueFrom: {resourceFieldRef: {containerName: pi, resource: limits.cpu, divisor: 1m}}
          envFrom:
            - configMapRef: {name: pi-env}
            - {prefix: S3_, secretRef: {name: s3}}
          ports: [{containerPort: 8080, name: http, protocol: TCP}]
          resources:
            requests: {cpu: "2", memory: 4Gi}
            limits: {cpu: "4", memory: 4Gi, nvidia.com/gpu: "1"}
            claims: [{name: gpu}]
          volumeMounts:
            - {name: data, mountPath: /data, readOnly: true}
            - {name: scratch, mountPath: /scratch}
            - {name: config, mountPath: /etc/pi, subPath: a.yaml}
          livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 10}
          readinessProbe: {exec: {command: [cat, /tmp/ready]}}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          lifecycle: {preStop: {exec: {command: [sleep, "5"]}}}
          terminationMessagePolicy: FallbackToLogsOnError
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"""


def job_body(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }
        }
    }
    base.update(spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": base,
    }


def test_a_job_with_every_common_field_is_accepted() -> None:
    (doc,) = load_documents(REAL_JOB)
    job = decode(doc.body, REGISTRY)
    assert isinstance(job, Job)
    assert job.spec.template.spec.init_containers[1].is_sidecar
    assert decode(job.to_wire(), REGISTRY) == job


def test_the_example_indexed_job_is_accepted() -> None:
    (doc,) = load_documents((EXAMPLES / "indexed-job.yaml").read_text())
    job = decode(doc.body, REGISTRY)
    assert isinstance(job, Job)
    assert job.spec.pods_count() == 4


@pytest.mark.parametrize(
    ("parallelism", "completions", "expected"),
    [(None, None, 1), (4, None, 4), (4, 8, 4), (8, 3, 3), (0, 5, 0)],
)
def test_pods_count_is_parallelism_capped_by_completions(
    parallelism: int | None, completions: int | None, expected: int
) -> None:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    job = Job.model_validate(job_body(**spec))
    assert pods_count(job.spec) == expected


def test_an_unknown_job_field_is_rejected() -> None:
    assert errors_of(job_body(paralelism=2)) == [
        "spec.paralelism: Unknown field: this field is not part of the schema"
    ]


def test_an_unknown_container_field_is_rejected() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"][0]["cpu"] = "1"
    assert errors_of(body) == [
        "spec.template.spec.containers[0].cpu: Unknown field: this field is not part of the schema"
    ]


@pytest.mark.parametrize(
    "field",
    [
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ],
)
def test_job_counts_may_not_be_negative(field: str) -> None:
    assert errors_of(job_body(**{field: -1})) == [
        f"spec.{field}: Invalid value: -1: must be greater than or equal to 0"
    ]


@pytest.mark.parametrize("field", ["backoffLimitPerIndex", "maxFailedIndexes"])
def test_per_index_counts_may_not_be_negative(field: str) -> None:
    indexed = {"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1}
    assert errors_of(job_body(**{**indexed, field: -1})) == [
        f"spec.{field}: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_completions_are_required_for_an_indexed_job_with_parallelism() -> None:
    # With neither set, the API server defaults both to 1, which is a valid Indexed job.
    assert errors_of(job_body(completionMode="Indexed")) == []
    assert errors_of(job_body(completionMode="Indexed", parallelism=2)) == [
        "spec.completions: Required value: when completion mode is Indexed"
    ]


def test_completion_mode_is_indexed_or_non_indexed() -> None:
    assert errors_of(job_body(completionMode="Ordered")) == [
        'spec.completionMode: Unsupported value: "Ordered": supported values: "NonIndexed", '
        '"Indexed"'
    ]


def test_the_restart_policy_must_be_never_or_on_failure() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert errors_of(body) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"OnFailure", "Never"'
    ]


def test_the_restart_policy_is_required() -> None:
    body = job_body()
    del body["spec"]["template"]["spec"]["restartPolicy"]
    assert errors_of(body) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'
    ]


def test_a_job_needs_containers() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"] = []
    assert errors_of(body) == ["spec.template.spec.containers: Required value"]


def test_a_container_needs_an_image() -> None:
    body = job_body()
    del body["spec"]["template"]["spec"]["containers"][0]["image"]
    assert errors_of(body) == ["spec.template.spec.containers[0].image: Required value"]


def test_container_names_are_unique_across_init_and_regular_containers() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["initContainers"] = [{"name": "main", "image": "x"}]
    assert errors_of(body) == ['spec.template.spec.containers[0].name: Duplicate value: "main"']


def test_requests_may_not_exceed_limits() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2"},
        "limits": {"cpu": "1"},
    }
    assert errors_of(body) == [
        'spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1"
    ]


def test_resource_quantities_are_parsed_exactly_and_rejected_when_malformed() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2 cores"}
    }
    (error,) = errors_of(body)
    assert error.startswith(
        'spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "2 cores"'
    )


def test_only_init_containers_may_be_sidecars() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"][0]["restartPolicy"] = "Always"
    assert errors_of(body) == [
        "spec.template.spec.containers[0].restartPolicy: Forbidden: may not be set for "
        "non-init containers"
    ]


def test_a_volume_mount_names_a_volume_of_the_pod() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"}
    ]
    assert errors_of(body) == [
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data"'
    ]


def test_a_volume_has_exactly_one_source() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": "a", "emptyDir": {}, "nfs": {"server": "s", "path": "/"}},
        {"name": "b"},
    ]
    assert errors_of(body) == [
        "spec.template.spec.volumes[0].nfs: Forbidden: may not specify more than 1 volume type",
        "spec.template.spec.volumes[1]: Required value: must specify a volume type",
    ]


def test_backoff_limit_per_index_requires_an_indexed_job() -> None:
    assert errors_of(job_body(backoffLimitPerIndex=1)) == [
        "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"
    ]


def test_max_failed_indexes_requires_backoff_limit_per_index() -> None:
    body = job_body(completionMode="Indexed", completions=4, maxFailedIndexes=1)
    assert errors_of(body) == [
        "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified"
    ]


def test_a_pod_failure_policy_requires_restart_policy_never() -> None:
    body = job_body(
        podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "X"}]}]}
    )
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert errors_of(body) == [
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is '
        "supported when podFailurePolicy is specified"
    ]


def test_a_pod_failure_rule_has_exit_codes_or_pod_conditions() -> None:
    body = job_body(podFailurePolicy={"rules": [{"action": "FailJob"}]})
    assert errors_of(body) == [
        'spec.podFailurePolicy.rules[0]: Invalid value: "": specifying one of OnExitCodes and '
        "OnPodConditions is required"
    ]


def test_exit_code_zero_is_not_allowed_with_in() -> None:
    rule = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 1]}}
    assert errors_of(job_body(podFailurePolicy={"rules": [rule]})) == [
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: "
        "must not be 0 for the In operator"
    ]


def test_fail_index_requires_backoff_limit_per_index() -> None:
    rule = {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}
    assert errors_of(job_body(podFailurePolicy={"rules": [rule]})) == [
        'spec.podFailurePolicy.rules[0].action: Invalid value: "FailIndex": requires the '
        "backoffLimitPerIndex to be set"
    ]


def test_a_success_policy_requires_an_indexed_job() -> None:
    body = job_body(successPolicy={"rules": [{"succeededCount": 1}]})
    assert errors_of(body) == [
        'spec.successPolicy: Invalid value: "": requires indexed completion mode'
    ]


def test_succeeded_count_may_not_exceed_completions() -> None:
    body = job_body(
        completionMode="Indexed", completions=2, successPolicy={"rules": [{"succeededCount": 3}]}
    )
    assert errors_of(body) == [
        "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or "
        "equal to 2 (the number of specified completions)"
    ]


def test_a_manual_selector_must_be_given_and_match_the_template() -> None:
    assert errors_of(job_body(manualSelector=True)) == ["spec.selector: Required value"]
    body = job_body(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    assert errors_of(body) == [
        'spec.template.metadata.labels: Invalid value: "": `selector` does not match template '
        "`labels`"
    ]


def test_a_selector_without_manual_selector_is_rejected() -> None:
    assert errors_of(job_body(selector={"matchLabels": {"app": "x"}})) == [
        'spec.selector: Invalid value: "": `selector` not auto-generated: set manualSelector: '
        "true to choose your own selector"
    ]


def test_managed_by_is_a_domain_prefixed_path() -> None:
    assert errors_of(job_body(managedBy="multiq")) == [
        'spec.managedBy: Invalid value: "multiq": must be a domain-prefixed path (such as '
        '"acme.io/foo")'
    ]
    assert errors_of(job_body(managedBy="multiq.dev/agent")) == []


def test_a_job_is_namespaced_and_has_a_name() -> None:
    body = job_body()
    body["metadata"] = {"namespace": "ns"}
    assert errors_of(body) == ["metadata.name: Required value: name or generateName is required"]


def test_a_pod_is_accepted_and_validated() -> None:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
    }
    assert errors_of(pod) == []
    broken = copy.deepcopy(pod)
    broken["spec"]["containers"][0]["ports"] = [{"containerPort": 70000}]
    assert errors_of(broken) == [
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 "
        "and 65535, inclusive"
    ]
    assert isinstance(Pod.model_validate(pod), Pod)


def test_the_wire_form_omits_empty_lists_but_keeps_meaningful_empty_values() -> None:
    body = job_body()
    body["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    wire = Job.model_validate(body).to_wire()
    pod_spec = wire["spec"]["template"]["spec"]
    assert pod_spec["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert "initContainers" not in pod_spec
    assert pod_spec["containers"] == [{"name": "main", "image": "busybox", "resources": {}}]
    assert Job.model_validate(wire) == Job.model_validate(body)
