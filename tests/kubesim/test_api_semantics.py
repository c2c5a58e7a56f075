"""Object semantics through kubernetes_asyncio: create, get, update, conflicts, errors."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cluster import Cluster
from kubesim.testing import RunningSimulator
from tests.kubesim.conftest import manifest


def _pod(name: str = "", **metadata: object) -> Any:
    meta: dict[str, object] = {"name": name} if name else {}
    meta.update(metadata)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body or b"{}")
    return body


async def test_a_created_object_gets_uid_resource_version_generation_and_defaults(
    core: client.CoreV1Api,
) -> None:
    pod = await core.create_namespaced_pod("default", _pod("p1"))
    assert pod.metadata.uid
    assert int(pod.metadata.resource_version) > 0
    assert pod.metadata.generation == 1
    assert pod.metadata.creation_timestamp is not None
    assert pod.status.phase == "Pending"
    assert pod.spec.restart_policy == "Always"
    assert pod.spec.containers[0].termination_message_path == "/dev/termination-log"


async def test_generate_name_appends_five_random_characters(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", _pod(generateName="worker-"))
    assert pod.metadata.name.startswith("worker-")
    assert len(pod.metadata.name) == len("worker-") + 5


async def test_creating_a_duplicate_is_409_already_exists(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "c1"}}))
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "c1"}}))
    assert caught.value.status == 409
    status = _status(caught.value)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'configmaps "c1" already exists'


async def test_a_stale_resource_version_is_rejected_with_the_exact_409_conflict_message(
    core: client.CoreV1Api,
) -> None:
    created = await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "c1"}, "data": {"a": "1"}})
    )
    created.data = {"a": "2"}
    await core.replace_namespaced_config_map("c1", "default", created)
    created.data = {"a": "3"}
    with pytest.raises(ApiException) as caught:
        await core.replace_namespaced_config_map("c1", "default", created)
    assert caught.value.status == 409
    status = _status(caught.value)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "c1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


async def test_a_missing_object_is_404_not_found_with_details(batch: client.BatchV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await batch.read_namespaced_job("nope", "default")
    assert caught.value.status == 404
    status = _status(caught.value)
    assert status["reason"] == "NotFound"
    assert status["message"] == 'jobs.batch "nope" not found'
    assert status["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


async def test_creating_into_a_missing_namespace_fails_with_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod("ghost", _pod("p1"))
    assert caught.value.status == 404
    assert _status(caught.value)["message"] == 'namespaces "ghost" not found'


async def test_generation_only_increases_on_spec_changes(core: client.CoreV1Api) -> None:
    await core.create_namespace(manifest({"metadata": {"name": "team"}}))
    service = await core.create_namespaced_service(
        "team", manifest({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    )
    assert service.metadata.generation == 1
    labelled = await core.patch_namespaced_service(
        "s", "team", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled.metadata.generation == 1
    changed = await core.patch_namespaced_service("s", "team", {"spec": {"ports": [{"port": 81}]}})
    assert changed.metadata.generation == 2


async def test_a_no_op_update_keeps_the_resource_version(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "same"}, "data": {"k": "v"}})
    )
    again = await core.replace_namespaced_config_map("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


async def test_dry_run_create_validates_but_stores_nothing(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", _pod("dry"), dry_run="All")
    assert pod.metadata.name == "dry"
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_pod("dry", "default")
    assert caught.value.status == 404


async def test_finalizers_hold_an_object_with_a_deletion_timestamp_until_removed(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "held", "finalizers": ["example.com/keep"]}})
    )
    await core.delete_namespaced_config_map("held", "default")
    held = await core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_config_map("held", "default")
    assert caught.value.status == 404


async def test_a_delete_precondition_on_a_stale_uid_is_a_conflict(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "pre"}}))
    with pytest.raises(ApiException) as caught:
        await core.delete_namespaced_config_map(
            "pre", "default", body=manifest({"preconditions": {"uid": "not-the-uid"}})
        )
    assert caught.value.status == 409


async def test_unknown_fields_are_rejected_under_strict_field_validation(
    simulator: RunningSimulator,
) -> None:
    url = simulator.urls["sim-0"] + "/apis/batch/v1/namespaces/default/jobs"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "typo"},
        "spec": {
            "backoffLimitt": 3,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}
            },
        },
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, params={"fieldValidation": "Strict"}, json=job) as response,
    ):
        body = await response.json()
    assert response.status == 400
    assert body["reason"] == "BadRequest"
    assert body["message"] == 'strict decoding error: unknown field "spec.backoffLimitt"'


async def test_unknown_fields_are_dropped_with_a_warning_by_default(
    simulator: RunningSimulator,
) -> None:
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    body = {"metadata": {"name": "warned"}, "data": {"a": "b"}, "extra": 1}
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        created = await response.json()
        warning = response.headers.get("Warning", "")
    assert response.status == 201
    assert "extra" not in created
    assert 'unknown field \\"extra\\"' in warning


async def test_a_protobuf_body_gets_a_clear_415(simulator: RunningSimulator) -> None:
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=b"k8s\x00", headers=headers) as response,
    ):
        body = await response.json()
    assert response.status == 415
    assert body["reason"] == "UnsupportedMediaType"
    assert body["message"].startswith(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )


async def test_a_job_with_restart_policy_always_is_422_invalid(batch: client.BatchV1Api) -> None:
    job: Any = {
        "metadata": {"name": "bad"},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
    }
    with pytest.raises(ApiException) as caught:
        await batch.create_namespaced_job("default", job)
    assert caught.value.status == 422
    status = _status(caught.value)
    assert status["reason"] == "Invalid"
    assert "spec.template.spec.restartPolicy" in str(status["message"])


async def test_a_watch_from_a_future_resource_version_is_504_too_large(
    simulator: RunningSimulator, cluster: Cluster
) -> None:
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    future = str(cluster.store.revision + 1000)
    params = {"watch": "1", "resourceVersion": future}
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        body = await response.json()
    assert response.status == 504
    assert body["reason"] == "Timeout"
    assert body["message"].startswith(f"Too large resource version: {future}, current: ")
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


async def test_delete_collection_removes_only_matching_objects(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        await core.create_namespaced_config_map(
            "default", manifest({"metadata": {"name": name, "labels": {"team": team}}})
        )
    await core.delete_collection_namespaced_config_map("default", label_selector="team=x")
    remaining = await core.list_namespaced_config_map("default")
    # kube-root-ca.crt is in every namespace, as on a real cluster, and carries no team label.
    assert [cm.metadata.name for cm in remaining.items] == ["c", "kube-root-ca.crt"]


async def test_workloads_and_rbac_objects_are_stored_and_served(
    api_client: client.ApiClient,
) -> None:
    apps = client.AppsV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    deployment = manifest(
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                },
            },
        }
    )
    created = await apps.create_namespaced_deployment("default", deployment)
    assert created.spec.replicas == 1
    role = manifest(
        {
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        }
    )
    await rbac.create_namespaced_role("default", role)
    roles = await rbac.list_namespaced_role("default")
    assert [r.metadata.name for r in roles.items] == ["reader"]


async def test_duplicate_fields_are_rejected_under_strict_field_validation(
    simulator: RunningSimulator,
) -> None:
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/configmaps"
    body = b'{"metadata": {"name": "dup", "name": "dup2"}}'
    headers = {"Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url, params={"fieldValidation": "Strict"}, data=body, headers=headers
        ) as response,
    ):
        status = await response.json()
    assert response.status == 400
    assert 'duplicate field "name"' in status["message"]


async def test_the_binding_subresource_assigns_a_node(
    simulator: RunningSimulator, cluster: Cluster
) -> None:
    pods = cluster.types.core("pods")
    cluster.registry.create(
        pods,
        {
            "metadata": {"name": "manual"},
            "spec": {"schedulerName": "my-scheduler", "containers": [{"name": "m", "image": "x"}]},
        },
        namespace="default",
    )
    url = simulator.urls["sim-0"] + "/api/v1/namespaces/default/pods/manual/binding"
    binding = {"metadata": {"name": "manual"}, "target": {"kind": "Node", "name": "node-2"}}
    async with aiohttp.ClientSession() as session, session.post(url, json=binding) as response:
        assert response.status == 201
        async with session.post(url, json=binding) as again:
            assert again.status == 409
    assert (cluster.get("pods", "default", "manual") or {})["spec"]["nodeName"] == "node-2"


async def test_an_exact_list_at_a_compacted_resource_version_is_410(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("default", manifest({"metadata": {"name": "n"}}))
    cluster.store.compact()
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_config_map(
            "default",
            resource_version=listed.metadata.resource_version,
            resource_version_match="Exact",
        )
    assert caught.value.status == 410
    assert (
        _status(caught.value)["message"] == "The resourceVersion for the provided list is too old."
    )


@pytest.mark.parametrize(("code", "reason"), [(500, "InternalError"), (504, "Timeout")])
async def test_injected_server_errors_carry_their_status_reason(
    core: client.CoreV1Api, cluster: Cluster, code: int, reason: str
) -> None:
    cluster.faults.fail_next(1, code)
    with pytest.raises(ApiException) as caught:
        await core.list_namespace()
    assert caught.value.status == code
    assert _status(caught.value)["reason"] == reason


async def test_a_status_update_leaves_the_previous_version_untouched_for_watchers(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    await core.create_namespaced_pod("default", _pod("versions"))
    before = cluster.get("pods", "default", "versions")
    assert before is not None
    old_rv = before["metadata"]["resourceVersion"]
    await core.patch_namespaced_pod_status("versions", "default", {"status": {"message": "x"}})
    assert before["metadata"]["resourceVersion"] == old_rv


async def test_dry_run_update_and_delete_change_nothing(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    created = await core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "keep"}, "data": {"a": "1"}})
    )
    patched = await core.patch_namespaced_config_map(
        "keep", "default", {"data": {"a": "2"}}, dry_run="All"
    )
    assert patched.data == {"a": "2"}
    await core.delete_namespaced_config_map("keep", "default", dry_run="All")
    stored = cluster.get("configmaps", "default", "keep")
    assert stored is not None
    assert stored["data"] == {"a": "1"}
    assert stored["metadata"]["resourceVersion"] == created.metadata.resource_version
