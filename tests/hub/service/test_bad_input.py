"""Every request the hub can be sent is accepted or refused with a 4xx naming what is wrong —
never a 500 — and what is refused leaves nothing in the store (issue #20, found by fuzzing)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.service.conftest import ALICE, HubUnderTest, fleet_objects, job

API = "/apis/multiq.dev/v1alpha1"
SUBMIT = f"{API}/namespaces/vision/submissions"


async def stored_workloads(hub: HubUnderTest) -> list[Any]:
    return [item.value for item in (await hub.hub.store.list("/workloads/")).items]


async def send_raw(
    hub: HubUnderTest, raw: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {ALICE}", "Content-Type": content_type}
    async with hub.session.post(hub.url + SUBMIT, data=raw, headers=headers) as response:
        return response.status, await response.json()


@pytest.mark.parametrize(
    ("raw", "content_type", "message"),
    [
        (b'{"kind": "Job\xff"}', "application/json", "the body is not valid UTF-8"),
        (b"kind: Job\xff\n", "application/yaml", "the body is not valid YAML"),
        (b"[" * 1000 + b"]" * 1000, "application/json", "nested more than 100 levels"),
        (b'{"a":' * 1000 + b"1" + b"}" * 1000, "application/json", "nested more than 100"),
        (b"a: [" * 1000, "application/yaml", "nested more than 100 levels"),
    ],
)
async def test_a_body_that_cannot_be_parsed_is_a_400(
    hub: HubUnderTest, raw: bytes, content_type: str, message: str
) -> None:
    await hub.apply(*fleet_objects())
    status, body = await send_raw(hub, raw, content_type)
    assert status == 400, body
    assert message in body["message"]
    assert await stored_workloads(hub) == []


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
async def test_a_5000_digit_integer_is_a_422_naming_its_field(
    hub: HubUnderTest, content_type: str
) -> None:
    await hub.apply(*fleet_objects())
    digits = "9" * 5000
    raw = (
        f'{{"apiVersion": "batch/v1", "kind": "Job", "spec": {{"parallelism": {digits}}}}}'
        if content_type == "application/json"
        else f"apiVersion: batch/v1\nkind: Job\nspec:\n  parallelism: {digits}\n"
    )
    status, body = await send_raw(hub, raw.encode(), content_type)
    assert status == 422, body
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.parallelism"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"apiVersion": 5}, "apiVersion"),
        ({"kind": ["Job"]}, "kind"),
        ({"kind": "Nope"}, "kind"),
        ({"apiVersion": "batch/v9"}, "apiVersion"),
    ],
)
async def test_a_wrong_api_version_or_kind_is_refused_naming_the_field(
    hub: HubUnderTest, change: dict[str, Any], field: str
) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call("POST", SUBMIT, token=ALICE, body={**job(), **change})
    assert status in (400, 422), body
    assert [c["field"] for c in body["details"]["causes"]] == [field]
    assert await stored_workloads(hub) == []


def _job_with(**spec: Any) -> dict[str, Any]:
    body = job()
    body["spec"].update(spec)
    body["spec"]["completionMode"] = "NonIndexed"
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (job(cpu="1e30"), "spec.template.spec.containers[0].resources.requests[cpu]"),
        (job(cpu="9e18Ei"), "spec.template.spec.containers[0].resources.requests[cpu]"),
        (job(cpu=10**30), "spec.template.spec.containers[0].resources.requests.cpu"),  # type: ignore[arg-type]
        (_job_with(parallelism=2**63, completions=1), "spec.parallelism"),
        (_job_with(parallelism=1e9, completions=1), "spec.parallelism"),
        (job(name="a" * 64), "metadata.name"),
    ],
)
async def test_absurd_values_are_a_422_and_nothing_is_stored(
    hub: HubUnderTest, body: dict[str, Any], field: str
) -> None:
    await hub.apply(*fleet_objects())
    status, reply = await hub.call("POST", SUBMIT, token=ALICE, body=body)
    assert status == 422, reply
    assert [c["field"] for c in reply["details"]["causes"]] == [field]
    assert await stored_workloads(hub) == []
    assert (await hub.hub.store.list("/workloadsources/")).items == ()


async def test_a_status_written_on_create_is_ignored(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    workload = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "done-already", "namespace": "vision"},
        "spec": {
            "queueName": "vision",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        }
                    },
                }
            ],
        },
        "status": {
            "conditions": [
                {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "x"}
            ]
        },
    }
    status, created = await hub.call("POST", SUBMIT, token=ALICE, body=workload)
    assert status == 201, created
    stored = await hub.hub.store.get("/workloads/vision/done-already")
    assert "Finished" not in str(stored.value.get("status"))
    cq = {**fleet_objects()[1], "metadata": {"name": "with-status"}}
    cq["status"] = {"pendingWorkloads": 7}
    status, reply = await hub.call("POST", f"{API}/clusterqueues", body=cq)
    assert status == 201, reply
    assert (await hub.hub.store.get("/clusterqueues/with-status")).value.get("status") is None


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/namespaces/vi%01sion/localqueues/vision",
        f"{API}/namespaces/vision/localqueues/vis%7Fion",
        f"{API}/namespaces/vision/localqueues/vision%0A",
        f"{API}/clusterqueues/{'a' * 254}",
        f"{API}/namespaces/vision/workloads/x%00/log",
    ],
)
async def test_a_name_or_namespace_no_object_can_have_is_a_400(
    hub: HubUnderTest, path: str
) -> None:
    await hub.apply(*fleet_objects())
    for method in ("GET", "DELETE", "PUT") if not path.endswith("/log") else ("GET",):
        async with hub.session.request(
            method,
            hub.url + path,
            headers={"Authorization": "Bearer admin-token"},
            json=fleet_objects()[2],
        ) as response:
            assert response.status == 400, (method, await response.text())
            causes = (await response.json())["details"]["causes"]
            assert causes[0]["field"] in ("metadata.name", "metadata.namespace")


async def test_a_submission_to_an_impossible_namespace_is_a_400(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call("POST", f"{API}/namespaces/Vi%01/submissions", body=job())
    assert status in (400, 403), body


@pytest.mark.parametrize("version", ["abc", "-1", "1.5", "²", "9" * 30])
async def test_a_resource_version_that_is_not_a_revision_is_a_400_and_deletes_nothing(
    hub: HubUnderTest, version: str
) -> None:
    await hub.apply(*fleet_objects())
    path = f"{API}/namespaces/vision/localqueues/vision"
    status, body = await hub.call("DELETE", path, params={"resourceVersion": version})
    assert status == 400, body
    assert (await hub.call("GET", path))[0] == 200
    status, body = await hub.call(
        "GET", f"{API}/localqueues", params={"watch": "true", "resourceVersion": version}
    )
    assert status == 400, body
    _, queue = await hub.call("GET", path)
    queue["metadata"]["resourceVersion"] = version
    status, body = await hub.call("PUT", path, body=queue)
    assert status == 400, body
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


async def test_a_namespaced_object_is_reached_only_through_its_namespace(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call("GET", f"{API}/localqueues/vision")
    assert status == 404 and "namespaces/NAMESPACE/localqueues/vision" in body["message"]
    status, _ = await hub.call("GET", f"{API}/localqueues")
    assert status == 200


@pytest.mark.parametrize("tail", ["²", "9" * 30, "-3", "x"])
async def test_a_log_parameter_that_is_not_a_small_count_is_a_400(
    hub: HubUnderTest, tail: str
) -> None:
    await hub.apply(*fleet_objects())
    status, _ = await hub.call("POST", SUBMIT, token=ALICE, body=job())
    _, listing = await hub.call("GET", f"{API}/namespaces/vision/workloads")
    name = listing["items"][0]["metadata"]["name"]
    status, body = await hub.call(
        "GET", f"{API}/namespaces/vision/workloads/{name}/log", params={"tailLines": tail}
    )
    assert status == 400, body
    assert body["details"]["causes"][0]["field"] == "tailLines"
