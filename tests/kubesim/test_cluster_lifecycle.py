"""Garbage collection, namespaces, node leases and faults, admin hooks, CRDs, multi-cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cluster import Cluster
from kubesim.testing import RunningSimulator, running
from tests.kubesim.conftest import Kubectl, eventually, manifest, names_of


async def _post(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body or {}) as response:
        assert response.status == 200, await response.text()
        result: dict[str, Any] = await response.json()
        return result


async def test_foreground_deletion_removes_dependents_before_the_owner(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    owner = await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "owner"}})
    )
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "child", "ownerReferences": [reference]}})
    )
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")
    await eventually(lambda: cluster.get("configmaps", "default", "owner") is None)
    assert cluster.get("configmaps", "default", "child") is None


async def test_a_dependent_whose_owner_never_existed_is_collected(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "no-such-uid"}
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "stray", "ownerReferences": [reference]}})
    )
    await eventually(lambda: cluster.get("configmaps", "default", "stray") is None)


async def test_deleting_a_namespace_goes_through_terminating_and_removes_its_contents(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    await core.create_namespace(manifest({"metadata": {"name": "scratch"}}))
    await eventually(lambda: cluster.get("serviceaccounts", "scratch", "default"))
    await core.create_namespaced_config_map(
        "scratch", manifest({"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    )
    await core.delete_namespace("scratch")
    namespace = await core.read_namespace("scratch")
    assert namespace.status.phase == "Terminating"
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("scratch", manifest({"metadata": {"name": "late"}}))
    assert caught.value.status == 403
    await core.patch_namespaced_config_map("held", "scratch", {"metadata": {"finalizers": None}})
    await eventually(lambda: cluster.get("namespaces", "", "scratch") is None)


async def test_every_node_has_a_lease_that_is_renewed() -> None:
    from kubesim.cluster import ClusterConfig

    async with running(nodes=2, template=ClusterConfig(lease_interval=0.2)) as sim:
        cluster = sim.clusters[0]
        lease = await eventually(lambda: cluster.get("leases", "kube-node-lease", "node-1"))
        assert lease["spec"]["holderIdentity"] == "node-1"
        first = lease["spec"]["renewTime"]
        await eventually(
            lambda: cluster.get("leases", "kube-node-lease", "node-1")["spec"]["renewTime"] != first  # type: ignore[index]
        )


async def test_failing_a_node_marks_it_not_ready_and_fails_its_pods(
    simulator: RunningSimulator, cluster: Cluster, kubectl: Kubectl
) -> None:
    pods = cluster.types.core("pods")
    cluster.registry.create(
        pods,
        {
            "metadata": {"name": "victim"},
            "spec": {"nodeName": "node-0", "containers": [{"name": "m", "image": "x"}]},
        },
        namespace="default",
    )
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "victim") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    await _post(simulator.urls["sim-0"] + "/_kubesim/nodes/node-0/fail")
    victim = cluster.get("pods", "default", "victim")
    assert victim is not None
    assert (victim["status"]["phase"], victim["status"]["reason"]) == ("Failed", "NodeLost")
    nodes = await kubectl("get", "nodes")
    assert "node-0   NotReady" in nodes.stdout
    await _post(simulator.urls["sim-0"] + "/_kubesim/nodes/node-0/recover")
    nodes = await kubectl("get", "nodes")
    assert "node-0   Ready" in nodes.stdout


async def test_a_cordoned_node_shows_scheduling_disabled(
    simulator: RunningSimulator, kubectl: Kubectl
) -> None:
    await _post(simulator.urls["sim-0"] + "/_kubesim/nodes/node-2/cordon")
    nodes = await kubectl("get", "nodes")
    assert "node-2   Ready,SchedulingDisabled" in nodes.stdout


async def test_in_process_hooks_match_the_admin_paths(
    cluster: Cluster, core: client.CoreV1Api
) -> None:
    cluster.cordon_node("node-1")
    assert (cluster.get("nodes", "", "node-1") or {})["spec"]["unschedulable"] is True
    cluster.fail_next_requests(1, 500)
    with pytest.raises(ApiException):
        await core.list_namespace()
    cluster.compact()
    assert cluster.drop_watches() == 0


async def test_injected_errors_answer_the_next_requests_then_stop(
    simulator: RunningSimulator, core: client.CoreV1Api
) -> None:
    await _post(simulator.urls["sim-0"] + "/_kubesim/faults/errors", {"count": 2, "code": 429})
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            await core.list_namespace()
        assert caught.value.status == 429
        headers: Any = caught.value.headers
        assert headers["Retry-After"] == "1"
    namespaces = await core.list_namespace()
    assert namespaces.items


async def test_a_paused_server_answers_again_after_resume(
    simulator: RunningSimulator, cluster: Cluster
) -> None:
    await _post(simulator.urls["sim-0"] + "/_kubesim/faults/pause")
    assert cluster.faults.paused
    await _post(simulator.urls["sim-0"] + "/_kubesim/faults/resume")
    async with (
        aiohttp.ClientSession() as session,
        session.get(simulator.urls["sim-0"] + "/version") as response,
    ):
        assert response.status == 200


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "batchruns.example.io"},
    "spec": {
        "group": "example.io",
        "scope": "Namespaced",
        "names": {
            "plural": "batchruns",
            "singular": "batchrun",
            "kind": "BatchRun",
            "shortNames": ["br"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


async def test_a_crd_serves_validated_custom_resources(
    api_client: client.ApiClient, cluster: Cluster, kubectl: Kubectl
) -> None:
    extensions = client.ApiextensionsV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    await extensions.create_custom_resource_definition(manifest(CRD))
    crd = await eventually(
        lambda: cluster.get("customresourcedefinitions", "", "batchruns.example.io")
    )
    await eventually(
        lambda: any(
            c["type"] == "Established"
            for c in (cluster.get("customresourcedefinitions", "", "batchruns.example.io") or {})
            .get("status", {})
            .get("conditions", [])
        )
    )
    assert crd
    run = {
        "apiVersion": "example.io/v1",
        "kind": "BatchRun",
        "metadata": {"name": "r1"},
        "spec": {"size": 2, "unknown": 1, "extra": {"kept": True}},
    }
    created = await custom.create_namespaced_custom_object(
        "example.io", "v1", "default", "batchruns", run
    )
    assert created["spec"] == {"size": 2, "extra": {"kept": True}}
    with pytest.raises(ApiException) as caught:
        await custom.create_namespaced_custom_object(
            "example.io",
            "v1",
            "default",
            "batchruns",
            {**run, "metadata": {"name": "r2"}, "spec": {"size": "big"}},
        )
    assert caught.value.status == 422
    patched = await custom.patch_namespaced_custom_object(
        "example.io", "v1", "default", "batchruns", "r1", {"spec": {"size": 3}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )  # fmt: skip
    assert patched["spec"]["size"] == 3
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    async with (
        aiohttp.ClientSession() as session,
        session.patch(
            cluster.url + "/apis/example.io/v1/namespaces/default/batchruns/r1",
            data=b'{"spec": {"size": 4}}',
            headers=headers,
        ) as response,
    ):
        assert response.status == 415  # strategic merge is for built-in types only
    with_status = await custom.patch_namespaced_custom_object_status(
        "example.io", "v1", "default", "batchruns", "r1", {"status": {"phase": "Done"}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )  # fmt: skip
    assert with_status["status"] == {"phase": "Done"}
    ignored = await custom.patch_namespaced_custom_object(
        "example.io", "v1", "default", "batchruns", "r1", {"status": {"phase": "Lost"}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]
    )  # fmt: skip
    assert ignored["status"] == {"phase": "Done"}  # the main resource ignores status
    listed = await kubectl("get", "br")
    assert listed.stdout.splitlines()[0].split() == ["NAME", "SIZE", "AGE"]
    assert listed.stdout.splitlines()[1].split()[:2] == ["r1", "3"]
    manifest_yaml = (
        "apiVersion: example.io/v1\nkind: BatchRun\nmetadata: {name: r3}\nspec: {size: %d}\n"
    )
    first = await kubectl("apply", "-f", "-", stdin=manifest_yaml % 1)
    assert "batchrun.example.io/r3 created" in first.stdout
    second = await kubectl("apply", "-f", "-", stdin=manifest_yaml % 5)
    assert "batchrun.example.io/r3 configured" in second.stdout
    batchruns = cluster.types.lookup("example.io", "v1", "batchruns")
    assert batchruns is not None
    stored = cluster.store.get(batchruns, "default", "r3")
    assert stored is not None and stored["spec"]["size"] == 5


async def test_several_clusters_run_side_by_side_with_a_merged_kubeconfig() -> None:
    async with running(clusters=2, names=["east", "west"]) as sim:
        assert set(sim.kubeconfigs) == {"east", "west"}
        assert sim.urls["east"] != sim.urls["west"]
        for name in ("east", "west"):
            api = await config.new_client_from_config(config_file=str(sim.kubeconfig), context=name)
            try:
                core = client.CoreV1Api(api)
                await core.create_namespaced_config_map(
                    "default", manifest({"metadata": {"name": name}})
                )
                listed = await core.list_namespaced_config_map("default")
                assert names_of(listed.items) == [name]
            finally:
                await api.close()


async def test_node_status_is_reported_periodically() -> None:
    from kubesim.cluster import ClusterConfig

    template = ClusterConfig(lease_interval=0.1, node_status_interval=0.2)
    async with running(nodes=1, template=template) as sim:
        cluster = sim.clusters[0]
        node = cluster.get("nodes", "", "node-0")
        assert node is not None
        first = node["metadata"]["resourceVersion"]
        await eventually(
            lambda: (
                (cluster.get("nodes", "", "node-0") or {})["metadata"]["resourceVersion"] != first
            ),
            within=5,
        )
        node = cluster.get("nodes", "", "node-0")
        assert node is not None
        assert all(c["lastHeartbeatTime"] for c in node["status"]["conditions"])


async def test_the_admin_status_endpoint_reports_counts(simulator: RunningSimulator) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(simulator.urls["sim-0"] + "/_kubesim/status") as response,
    ):
        status = await response.json()
    assert status["cluster"] == "sim-0"
    assert status["objects"]["nodes"] == 3
    assert status["paused"] is False


async def test_a_pod_deleted_on_a_failed_node_goes_away_when_the_node_recovers(
    cluster: Cluster,
) -> None:
    pods = cluster.types.core("pods")
    cluster.registry.create(
        pods,
        {
            "metadata": {"name": "lost"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "m", "image": "x"}]},
        },
        namespace="default",
    )
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "lost") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    cluster.registry.delete(pods, "default", "lost")  # graceful: the kubelet must confirm...
    cluster.fail_node("node-1")  # ...but its node fails before it can
    await asyncio.sleep(0.2)
    pod = cluster.get("pods", "default", "lost")
    assert pod is not None and pod["metadata"]["deletionTimestamp"]
    cluster.recover_node("node-1")
    await eventually(lambda: cluster.get("pods", "default", "lost") is None)
