"""ObjectMeta as an API server returns it: `kubectl get -o yaml` output of a Job or of our own
kinds decodes, keeps the server's fields, and encodes back unchanged."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from api.codec import decode, encode
from api.k8s.batch import Job
from api.kinds import REGISTRY
from api.meta import ObjectMeta
from tests.api.helpers import errors_of, obj

KUBECTL_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  annotations:
    batch.kubernetes.io/job-tracking: ""
  creationTimestamp: "2024-05-02T10:00:00Z"
  deletionGracePeriodSeconds: 0
  deletionTimestamp: "2024-05-02T10:05:00Z"
  finalizers:
  - foregroundDeletion
  generation: 1
  labels:
    batch.kubernetes.io/controller-uid: 4f0e1d3c-1111-2222-3333-444455556666
    batch.kubernetes.io/job-name: pi
    controller-uid: 4f0e1d3c-1111-2222-3333-444455556666
    job-name: pi
  managedFields:
  - apiVersion: batch/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:backoffLimit: {}
        f:template:
          f:spec:
            f:containers:
              k:{"name":"pi"}:
                .: {}
                f:image: {}
    manager: kubectl-create
    operation: Update
    time: "2024-05-02T10:00:00Z"
  - apiVersion: batch/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:status:
        f:active: {}
    manager: kube-controller-manager
    operation: Update
    subresource: status
    time: "2024-05-02T10:00:01Z"
  name: pi
  namespace: default
  ownerReferences:
  - apiVersion: batch/v1
    blockOwnerDeletion: true
    controller: true
    kind: CronJob
    name: pi-cron
    uid: 0a0b0c0d-1111-2222-3333-444455556666
  resourceVersion: "123456"
  selfLink: /apis/batch/v1/namespaces/default/jobs/pi
  uid: 4f0e1d3c-1111-2222-3333-444455556666
spec:
  backoffLimit: 4
  completionMode: NonIndexed
  completions: 1
  manualSelector: false
  parallelism: 1
  podReplacementPolicy: TerminatingOrFailed
  selector:
    matchLabels:
      batch.kubernetes.io/controller-uid: 4f0e1d3c-1111-2222-3333-444455556666
  suspend: false
  template:
    metadata:
      creationTimestamp: null
      labels:
        batch.kubernetes.io/controller-uid: 4f0e1d3c-1111-2222-3333-444455556666
        batch.kubernetes.io/job-name: pi
        controller-uid: 4f0e1d3c-1111-2222-3333-444455556666
        job-name: pi
    spec:
      containers:
      - command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]
        image: perl:5.34.0
        imagePullPolicy: IfNotPresent
        name: pi
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Never
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  active: 1
  ready: 0
  startTime: "2024-05-02T10:00:00Z"
  terminating: 0
  uncountedTerminatedPods: {}
"""


def server_metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "uid": "4f0e1d3c-1111-2222-3333-444455556666",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "selfLink": f"/apis/multiq.dev/v1alpha1/clusterqueues/{name}",
        "finalizers": ["multiq.dev/cleanup"],
        "managedFields": [
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:cohort": {}}},
                "manager": "qctl",
                "operation": "Apply",
                "time": "2026-01-02T03:04:05Z",
            }
        ],
    }


def test_a_job_from_kubectl_get_o_yaml_decodes() -> None:
    job = decode(yaml.safe_load(KUBECTL_JOB), REGISTRY)
    assert isinstance(job, Job)
    meta = job.metadata
    assert meta.self_link == "/apis/batch/v1/namespaces/default/jobs/pi"
    assert meta.deletion_grace_period_seconds == 0
    assert meta.finalizers == ["foregroundDeletion"]
    assert [(o.kind, o.name, o.controller) for o in meta.owner_references] == [
        ("CronJob", "pi-cron", True)
    ]
    assert [m["manager"] for m in meta.managed_fields] == [
        "kubectl-create",
        "kube-controller-manager",
    ]


def test_the_server_fields_of_a_job_survive_a_round_trip() -> None:
    body = yaml.safe_load(KUBECTL_JOB)
    job = decode(copy.deepcopy(body), REGISTRY)
    wire = encode(job)
    assert wire["metadata"]["managedFields"] == body["metadata"]["managedFields"]
    assert wire["metadata"]["selfLink"] == body["metadata"]["selfLink"]
    assert wire["metadata"]["deletionGracePeriodSeconds"] == 0
    assert wire["metadata"]["ownerReferences"] == body["metadata"]["ownerReferences"]
    assert wire["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert decode(wire, REGISTRY) == job


def test_our_own_kind_as_a_server_returns_it_decodes_and_round_trips() -> None:
    body = obj("ClusterQueue", "cq", {}, metadata=server_metadata("cq"))
    assert errors_of(body) == []
    cq = decode(copy.deepcopy(body), REGISTRY)
    wire = encode(cq)
    assert wire["metadata"] == body["metadata"]
    assert decode(wire, REGISTRY) == cq


def test_a_genuinely_unknown_metadata_key_is_still_rejected() -> None:
    body = obj("ClusterQueue", "cq", {})
    body["metadata"]["managedField"] = []
    assert errors_of(body) == [
        "metadata.managedField: Unknown field: this field is not part of the schema"
    ]


def test_managed_fields_must_be_a_list_of_objects() -> None:
    body = obj("ClusterQueue", "cq", {})
    body["metadata"]["managedFields"] = ["kubectl"]
    (error,) = errors_of(body)
    assert error.startswith("metadata.managedFields[0]: Invalid value")


def test_server_fields_default_to_absent() -> None:
    meta = ObjectMeta(name="x")
    assert meta.self_link is None
    assert meta.deletion_grace_period_seconds is None
    assert meta.managed_fields == []
