"""Rules of the federation kinds (member clusters, cluster sets, global queues, tenants) and
the researcher templates (application profiles, volume bundles)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.helpers import errors_of, obj


def _namespaced(body: dict[str, Any], namespace: str = "team-a") -> dict[str, Any]:
    body["metadata"]["namespace"] = namespace
    return body


def test_a_member_cluster_names_exactly_one_token_source() -> None:
    both = obj("MemberCluster", "east", {"tokenRef": {"secretName": "t", "file": "t"}})
    neither = obj("MemberCluster", "east", {"tokenRef": {}})
    expected = ['spec.tokenRef: Invalid value: "": exactly one of secretName or file must be set']
    assert errors_of(both) == expected
    assert errors_of(neither) == expected


@pytest.mark.parametrize(
    ("file", "error"),
    [
        (
            "/etc/shadow",
            'spec.tokenRef.file: Invalid value: "/etc/shadow": must be relative to the hub\'s '
            "secrets directory, not absolute",
        ),
        (
            "east/../../etc/shadow",
            'spec.tokenRef.file: Invalid value: "east/../../etc/shadow": must not leave the '
            "hub's secrets directory (..)",
        ),
        (
            "east//token",
            'spec.tokenRef.file: Invalid value: "east//token": must be a file name in the '
            "secrets directory",
        ),
    ],
    ids=["absolute", "dot-dot", "empty-part"],
)
def test_a_member_cluster_token_file_stays_in_the_secrets_directory(file: str, error: str) -> None:
    body = obj("MemberCluster", "east", {"tokenRef": {"file": file}})
    assert errors_of(body) == [error]


def test_a_member_cluster_token_file_relative_to_the_secrets_directory_is_valid() -> None:
    assert errors_of(obj("MemberCluster", "east", {"tokenRef": {"file": "east/token"}})) == []


def test_a_member_cluster_name_is_a_dns_label() -> None:
    (error,) = errors_of(obj("MemberCluster", "east.gpu", {"tokenRef": {"secretName": "t"}}))
    assert error.startswith('metadata.name: Invalid value: "east.gpu": a lowercase RFC 1123 label')


def test_a_member_cluster_loss_timeout_is_positive() -> None:
    body = obj(
        "MemberCluster",
        "east",
        {"tokenRef": {"secretName": "t"}, "fencing": {"lossTimeoutSeconds": 0}},
    )
    assert errors_of(body) == [
        "spec.fencing.lossTimeoutSeconds: Invalid value: 0: must be greater than or equal to 1"
    ]


def test_a_member_cluster_loss_timeout_covers_the_lease_and_its_grace() -> None:
    body = obj(
        "MemberCluster",
        "east",
        {
            "tokenRef": {"secretName": "t"},
            "fencing": {"lossTimeoutSeconds": 60, "leaseSeconds": 50, "graceSeconds": 20},
        },
    )
    (error,) = errors_of(body)
    assert error.startswith(
        "spec.fencing.lossTimeoutSeconds: Invalid value: 60: must be at least leaseSeconds + "
        "graceSeconds (50 + 20)"
    )


def test_a_member_cluster_lease_is_long_enough_to_renew() -> None:
    body = obj(
        "MemberCluster",
        "east",
        {"tokenRef": {"secretName": "t"}, "fencing": {"leaseSeconds": 2, "graceSeconds": 0}},
    )
    assert errors_of(body) == [
        "spec.fencing.leaseSeconds: Invalid value: 2: must be greater than or equal to 3",
        "spec.fencing.graceSeconds: Invalid value: 0: must be greater than or equal to 1",
    ]


def test_a_cluster_set_is_a_list_or_a_selector_but_not_both() -> None:
    both = obj("ClusterSet", "gpu", {"clusters": ["east"], "clusterSelector": {}})
    assert errors_of(both) == [
        'spec: Invalid value: "": exactly one of clusters or clusterSelector must be set'
    ]


def test_a_cluster_set_lists_each_cluster_once() -> None:
    body = obj("ClusterSet", "gpu", {"clusters": ["east", "west", "east"]})
    assert errors_of(body) == ['spec.clusters[2]: Duplicate value: "east"']


def test_a_global_queue_dispatch_policy_type_is_one_of_three() -> None:
    body = obj("GlobalQueue", "q", {"clusterSet": "gpu", "dispatchPolicy": {"type": "Random"}})
    assert errors_of(body) == [
        'spec.dispatchPolicy.type: Unsupported value: "Random": supported values: '
        '"BestFit", "AllAtOnce", "Incremental"'
    ]


def test_incremental_settings_belong_to_the_incremental_policy_only() -> None:
    body = obj(
        "GlobalQueue",
        "q",
        {
            "clusterSet": "gpu",
            "dispatchPolicy": {"type": "BestFit", "incremental": {"stepSize": 2}},
        },
    )
    assert errors_of(body) == [
        "spec.dispatchPolicy.incremental: Forbidden: may only be set when type is Incremental"
    ]


def test_an_incremental_step_is_at_least_one_cluster() -> None:
    body = obj(
        "GlobalQueue",
        "q",
        {
            "clusterSet": "gpu",
            "dispatchPolicy": {"type": "Incremental", "incremental": {"stepSize": 0}},
        },
    )
    assert errors_of(body) == [
        "spec.dispatchPolicy.incremental.stepSize: Invalid value: 0: "
        "must be greater than or equal to 1"
    ]


def test_a_fleet_quota_is_never_negative() -> None:
    body = obj("GlobalQueue", "q", {"clusterSet": "gpu", "fleetQuota": {"nvidia.com/gpu": "-8"}})
    assert errors_of(body) == [
        'spec.fleetQuota[nvidia.com/gpu]: Invalid value: "-8": must be greater than or equal to 0'
    ]


def test_a_preferred_cluster_affinity_weight_is_between_1_and_100() -> None:
    term = {
        "weight": 0,
        "preference": {"matchExpressions": [{"key": "region", "operator": "Exists"}]},
    }
    body = obj("GlobalQueue", "q", {"clusterSet": "gpu", "clusterAffinity": {"preferred": [term]}})
    assert errors_of(body) == [
        "spec.clusterAffinity.preferred[0].weight: Invalid value: 0: must be in the range 1-100"
    ]


def test_a_global_queue_lists_each_tenant_once() -> None:
    body = obj("GlobalQueue", "q", {"clusterSet": "gpu", "tenants": ["a", "a"]})
    assert errors_of(body) == ['spec.tenants[1]: Duplicate value: "a"']


def test_a_tenant_owns_at_least_one_namespace() -> None:
    assert errors_of(obj("Tenant", "vision", {"groups": ["g"]})) == [
        "spec.namespaces: Required value: a tenant owns namespaces"
    ]


def test_a_profile_mode_is_one_of_the_three_modes_the_hub_expands() -> None:
    body = _namespaced(
        obj("ApplicationProfile", "p", {"supportedModes": [{"name": "Ray", "template": "t"}]})
    )
    assert errors_of(body) == [
        'spec.supportedModes[0].name: Unsupported value: "Ray": supported values: '
        '"Job", "JobSet", "Slurm"'
    ]


def test_a_profile_lists_each_mode_once() -> None:
    modes = [{"name": "Job", "template": "t"}, {"name": "Job", "template": "u"}]
    body = _namespaced(obj("ApplicationProfile", "p", {"supportedModes": modes}))
    assert errors_of(body) == ['spec.supportedModes[1].name: Duplicate value: "Job"']


def test_required_flags_come_from_the_mode_vocabulary() -> None:
    modes = [{"name": "Slurm", "template": "t", "requiredFlags": ["partition", "replicas"]}]
    (error,) = errors_of(_namespaced(obj("ApplicationProfile", "p", {"supportedModes": modes})))
    assert error.startswith(
        'spec.supportedModes[0].requiredFlags[1]: Unsupported value: "replicas": supported '
        'values: "job-name", "array"'
    )


def test_a_volume_sets_exactly_one_source() -> None:
    vol = {"name": "data", "nfs": {"server": "s", "path": "/"}, "configMap": {"name": "c"}}
    body = _namespaced(obj("VolumeBundle", "b", {"volumes": [vol]}))
    (error,) = errors_of(body)
    assert error.startswith(
        'spec.volumes[0]: Invalid value: "nfs,configMap": must set exactly one volume source'
    )


def test_a_mount_refers_to_a_volume_of_the_bundle() -> None:
    spec = {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containerVolumeMounts": [{"name": "home", "mountPath": "/home"}],
    }
    assert errors_of(_namespaced(obj("VolumeBundle", "b", spec))) == [
        'spec.containerVolumeMounts[0].name: Not found: "home": no volume of that name'
    ]


def test_mount_paths_are_absolute_and_distinct() -> None:
    spec = {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containerVolumeMounts": [
            {"name": "data", "mountPath": "data"},
            {"name": "data", "mountPath": "data"},
        ],
    }
    assert errors_of(_namespaced(obj("VolumeBundle", "b", spec))) == [
        'spec.containerVolumeMounts[0].mountPath: Invalid value: "data": must be an absolute path',
        'spec.containerVolumeMounts[1].mountPath: Invalid value: "data": must be an absolute path',
        'spec.containerVolumeMounts[1].mountPath: Duplicate value: "data"',
    ]


def test_bundle_environment_variable_names_are_valid() -> None:
    spec = {"volumes": [{"name": "data", "emptyDir": {}}], "envVars": [{"name": "1DIR"}]}
    (error,) = errors_of(_namespaced(obj("VolumeBundle", "b", spec)))
    assert error.startswith('spec.envVars[0].name: Invalid value: "1DIR": a valid environment')
