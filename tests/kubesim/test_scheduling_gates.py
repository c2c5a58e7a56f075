"""Scheduling gates as Kubernetes has them: a gated pod is never bound and shows
SchedulingGated; gates may only be removed; while gated, its node selector may be extended
and its required node affinity narrowed, and nothing else in its spec may change; the
scheduler binds it once its last gate goes. Checked with the real kubectl 1.32 and
kubernetes_asyncio."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cluster import Cluster
from tests.kubesim.conftest import Kubectl, eventually, manifest

HOST = "kubernetes.io/hostname"


def gated_pod(name: str, *gates: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulingGates": [{"name": gate} for gate in gates],
            "containers": [{"name": "main", "image": "busybox"}],
            **spec,
        },
    }


async def create(kubectl: Kubectl, pod: dict[str, Any]) -> None:
    await kubectl("create", "-f", "-", stdin=json.dumps(pod))


def node_of(cluster: Cluster, name: str) -> str | None:
    pod = cluster.get("pods", "default", name) or {}
    node: str | None = pod.get("spec", {}).get("nodeName")
    return node


def scheduled_condition(cluster: Cluster, name: str) -> dict[str, Any] | None:
    pod = cluster.get("pods", "default", name) or {}
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            found: dict[str, Any] = condition
            return found
    return None


async def patch(kubectl: Kubectl, name: str, ops: list[dict[str, Any]]) -> Any:
    return await kubectl("patch", "pod", name, "--type=json", "-p", json.dumps(ops), check=False)


def node_names(cluster: Cluster) -> list[str]:
    nodes = cluster.store.list(cluster.types.core("nodes"), None)
    return sorted(n["metadata"]["name"] for n in nodes)


# -- a gated pod waits --------------------------------------------------------------------------


async def test_a_gated_pod_is_not_bound_and_kubectl_shows_it_scheduling_gated(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await create(kubectl, gated_pod("held", "example.com/wait"))
    condition = await eventually(lambda: scheduled_condition(cluster, "held"))
    assert condition["status"] == "False"
    assert condition["reason"] == "SchedulingGated"
    assert condition["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    await asyncio.sleep(0.3)
    assert node_of(cluster, "held") is None
    table = await kubectl("get", "pods", "held", "--no-headers")
    assert table.stdout.split()[2] == "SchedulingGated"


async def test_a_pod_is_bound_once_its_last_gate_is_removed_and_not_before(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await create(kubectl, gated_pod("two", "example.com/a", "example.com/b"))
    await eventually(lambda: scheduled_condition(cluster, "two"))
    result = await patch(kubectl, "two", [{"op": "remove", "path": "/spec/schedulingGates/0"}])
    assert result.returncode == 0, result.stderr
    await asyncio.sleep(0.3)
    assert node_of(cluster, "two") is None
    result = await patch(kubectl, "two", [{"op": "remove", "path": "/spec/schedulingGates"}])
    assert result.returncode == 0, result.stderr
    await eventually(lambda: node_of(cluster, "two"))
    condition = scheduled_condition(cluster, "two")
    assert condition is not None and condition["status"] == "True"
    table = await kubectl("get", "pods", "two", "--no-headers")
    assert table.stdout.split()[2] != "SchedulingGated"


# -- what an update may change ------------------------------------------------------------------


async def test_a_gate_cannot_be_added_after_creation(kubectl: Kubectl) -> None:
    await create(kubectl, gated_pod("late", "example.com/a"))
    result = await patch(
        kubectl,
        "late",
        [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x/b"}}],
    )
    assert result.returncode != 0
    assert (
        'The Pod "late" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is '
        "allowed, but found new scheduling gate 'x/b'" in result.stderr
    )


async def test_a_gate_cannot_be_added_to_a_pod_created_without_one(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    await core.create_namespaced_pod("default", manifest(gated_pod("free")))
    await eventually(lambda: node_of(cluster, "free"))
    with pytest.raises(ApiException) as refused:
        await core.patch_namespaced_pod(
            "free", "default", manifest({"spec": {"schedulingGates": [{"name": "x/late"}]}})
        )
    assert refused.value.status == 422
    assert "only deletion is allowed, but found new scheduling gate 'x/late'" in str(
        json.loads(refused.value.body or b"{}")["message"]
    )


async def test_while_gated_the_node_selector_may_gain_keys_and_the_pod_lands_where_it_says(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    target = node_names(cluster)[-1]
    await core.create_namespaced_pod(
        "default",
        manifest(gated_pod("placed", "kueue.x-k8s.io/topology", nodeSelector={"pool": "x"})),
    )
    with pytest.raises(ApiException) as refused:
        await core.patch_namespaced_pod(
            "placed", "default", manifest({"spec": {"nodeSelector": {"pool": "y"}}})
        )
    assert refused.value.status == 422
    assert (
        'spec.nodeSelector: Invalid value: {"pool":"y"}: only additions to spec.nodeSelector '
        "are allowed (no mutations or deletions)"
    ) in json.loads(refused.value.body or b"{}")["message"]
    await core.create_namespaced_pod(
        "default", manifest(gated_pod("landing", "kueue.x-k8s.io/topology"))
    )
    # One patch, as a topology ungater sends it: the selector extended, the gate removed.
    await core.patch_namespaced_pod(
        "landing",
        "default",
        manifest({"spec": {"nodeSelector": {HOST: target}, "schedulingGates": None}}),
    )
    assert await eventually(lambda: node_of(cluster, "landing")) == target


async def test_while_gated_required_node_affinity_may_be_narrowed_but_not_given_a_new_term(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    names = node_names(cluster)
    term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": names[:2]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    await create(kubectl, gated_pod("narrow", "example.com/a", affinity=affinity))
    path = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
    added_term = await patch(
        kubectl,
        "narrow",
        [{"op": "add", "path": f"{path}/nodeSelectorTerms/-", "value": term}],
    )
    assert added_term.returncode != 0
    assert (
        "no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        in added_term.stderr
    )
    changed = await patch(
        kubectl,
        "narrow",
        [
            {
                "op": "replace",
                "path": f"{path}/nodeSelectorTerms/0/matchExpressions/0/values",
                "value": names,
            }
        ],
    )
    assert changed.returncode != 0
    assert "only additions are allowed (no mutations or deletions)" in changed.stderr
    narrowed = await patch(
        kubectl,
        "narrow",
        [
            {
                "op": "add",
                "path": f"{path}/nodeSelectorTerms/0/matchExpressions/-",
                "value": {"key": HOST, "operator": "In", "values": [names[1]]},
            },
            {"op": "remove", "path": "/spec/schedulingGates"},
        ],
    )
    assert narrowed.returncode == 0, narrowed.stderr
    assert await eventually(lambda: node_of(cluster, "narrow")) == names[1]


async def test_once_ungated_the_node_selector_is_as_immutable_as_the_rest_of_the_spec(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await create(kubectl, gated_pod("settled"))
    await eventually(lambda: node_of(cluster, "settled"))
    result = await patch(
        kubectl, "settled", [{"op": "add", "path": "/spec/nodeSelector", "value": {"a": "b"}}]
    )
    assert result.returncode != 0
    assert (
        'The Pod "settled" is invalid: spec: Forbidden: pod updates may not change fields other '
        "than `spec.containers[*].image`,`spec.initContainers[*].image`,"
        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
        "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)"
    ) in result.stderr


async def test_an_image_and_added_tolerations_may_still_change(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await create(kubectl, gated_pod("mutable"))
    result = await patch(
        kubectl,
        "mutable",
        [
            {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.36"},
            {
                "op": "add",
                "path": "/spec/tolerations/-",
                "value": {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            },
        ],
    )
    assert result.returncode == 0, result.stderr
    pod = cluster.get("pods", "default", "mutable") or {}
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.36"
