"""The hub's REST API: Kubernetes-style CRUD with CAS, tokens and tenancy, submissions that
are durable before 201, and bad input answered with a clear 4xx that stores nothing."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from api.errors import FieldError
from api.v1alpha1.workload import Workload
from tests.hub.service.conftest import ALICE, MALLORY, HubUnderTest, fleet_objects, job

API = "/apis/multiq.dev/v1alpha1"


async def test_health_version_and_openapi_need_no_token(hub: HubUnderTest) -> None:
    assert (await hub.call("GET", "/healthz", token=None))[0] == 200
    status, version = await hub.call("GET", "/version", token=None)
    assert status == 200 and version["api"] == "multiq.dev/v1alpha1"
    status, doc = await hub.call("GET", "/openapi.json", token=None)
    assert status == 200
    assert f"{API}/clusterqueues" in doc["paths"]
    assert "ClusterQueue" in doc["components"]["schemas"]


async def test_a_request_without_a_valid_token_is_unauthorized(hub: HubUnderTest) -> None:
    status, body = await hub.call("GET", f"{API}/clusterqueues", token=None)
    assert status == 401 and body["reason"] == "Unauthorized"
    status, body = await hub.call("GET", f"{API}/clusterqueues", token="nope")
    assert status == 401 and body["message"] == "the bearer token is not valid"


async def test_admins_create_and_read_queues(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, cq = await hub.call("GET", f"{API}/clusterqueues/team-vision")
    assert status == 200
    assert cq["metadata"]["uid"] and cq["metadata"]["generation"] == 1
    assert cq["metadata"]["resourceVersion"].isdigit()
    status, listing = await hub.call("GET", f"{API}/namespaces/vision/localqueues", token=ALICE)
    assert status == 200 and [i["metadata"]["name"] for i in listing["items"]] == ["vision"]


async def test_researchers_may_not_change_queues(hub: HubUnderTest) -> None:
    status, body = await hub.call(
        "POST", f"{API}/clusterqueues", token=ALICE, body=fleet_objects()[1]
    )
    assert status == 403
    assert body["message"] == "alice may not create clusterqueues: only admins may"


async def test_an_invalid_object_is_a_422_naming_each_field_and_nothing_is_stored(
    hub: HubUnderTest,
) -> None:
    bad = fleet_objects()[1]
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "-1"
    bad["spec"]["queueingStrategy"] = "Random"
    status, body = await hub.call("POST", f"{API}/clusterqueues", body=bad)
    assert status == 422 and body["reason"] == "Invalid"
    fields = [c["field"] for c in body["details"]["causes"]]
    assert fields == ["spec.queueingStrategy"]  # structural errors come first, all of them
    bad["spec"]["queueingStrategy"] = "StrictFIFO"
    status, body = await hub.call("POST", f"{API}/clusterqueues", body=bad)
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0"
    )
    assert (await hub.call("GET", f"{API}/clusterqueues/team-vision"))[0] == 404


async def test_a_stale_resource_version_is_a_conflict(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects()[:2])
    _, cq = await hub.call("GET", f"{API}/clusterqueues/team-vision")
    cq["spec"]["queueingStrategy"] = "StrictFIFO"
    status, updated = await hub.call("PUT", f"{API}/clusterqueues/team-vision", body=cq)
    assert status == 200 and updated["metadata"]["generation"] == 2
    status, body = await hub.call("PUT", f"{API}/clusterqueues/team-vision", body=cq)
    assert status == 409 and body["reason"] == "Conflict"


async def test_creating_an_existing_name_is_already_exists(hub: HubUnderTest) -> None:
    await hub.apply(fleet_objects()[0])
    status, body = await hub.call("POST", f"{API}/resourceflavors", body=fleet_objects()[0])
    assert status == 409 and body["reason"] == "AlreadyExists"


async def test_a_job_submission_becomes_a_durable_workload(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job()
    )
    assert status == 201, wl
    assert wl["kind"] == "Workload" and wl["spec"]["queueName"] == "vision"
    assert wl["spec"]["podSets"][0]["count"] == 2
    stored = await hub.hub.store.get(f"/workloads/vision/{wl['metadata']['name']}")
    assert stored.value["metadata"]["uid"] == wl["metadata"]["uid"]
    source = await hub.hub.store.get(f"/workloadsources/vision/{wl['metadata']['name']}")
    assert source.value["kind"] == "Job"


async def test_of_two_submissions_racing_for_one_name_the_loser_stores_nothing(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    jobs = [job(cpu="1"), job(cpu="2")]  # one name; which job is stored tells who won
    answers = await asyncio.gather(
        *(
            hub.call("POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=j)
            for j in jobs
        )
    )

    assert sorted(status for status, _ in answers) == [201, 409]
    winner = next(j for j, (status, _) in zip(jobs, answers, strict=True) if status == 201)
    source = await hub.hub.store.get("/workloadsources/vision/job-train")
    assert (
        source.value["spec"]["template"]["spec"]["containers"][0]["resources"]
        == (winner["spec"]["template"]["spec"]["containers"][0]["resources"])
    )


async def test_a_submission_while_the_store_is_unavailable_is_a_503(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    await hub.hub.store.close()  # as an etcd outage looks to the hub: Unavailable
    status, body = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job()
    )
    assert status == 503, body
    assert body["reason"] == "ServiceUnavailable"


async def test_yaml_submissions_are_accepted(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, wl = await hub.call(
        "POST",
        f"{API}/namespaces/vision/submissions",
        token=ALICE,
        text=yaml.safe_dump(job()),
        content_type="application/yaml",
    )
    assert status == 201, wl


async def test_an_unknown_queue_is_a_422_and_nothing_is_stored(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job(queue="nope")
    )
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        'spec.queueName: Not found: "nope": no LocalQueue of that name in namespace vision '
        "(known: vision)"
    )
    listing = await hub.hub.store.list("/workloads/")
    assert listing.items == ()
    assert (await hub.hub.store.list("/workloadsources/")).items == ()


async def test_a_queue_given_by_parameter_must_exist_and_nothing_is_stored(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call(
        "POST",
        f"{API}/namespaces/vision/submissions",
        token=ALICE,
        body=job(),
        params={"queue": "Not_A_Name"},
    )
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.queueName"
    assert (await hub.hub.store.list("/workloads/")).items == ()
    assert (await hub.hub.store.list("/workloadsources/")).items == ()


async def test_a_submission_checks_the_workloads_rules_once(
    hub: HubUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    await hub.apply(*fleet_objects())
    checks = []
    original = Workload.semantic_errors

    def counted(self: Workload, *, templates_checked: bool = False) -> list[FieldError]:
        checks.append(self.metadata.name)
        return original(self, templates_checked=templates_checked)

    monkeypatch.setattr(Workload, "semantic_errors", counted)
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job()
    )
    assert status == 201, wl
    assert checks == [wl["metadata"]["name"]]


async def test_a_job_without_a_queue_is_told_how_to_name_one(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job(queue=None)
    )
    assert status == 422
    assert "queue-name" in body["message"]


async def test_invalid_yaml_is_a_400(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call(
        "POST",
        f"{API}/namespaces/vision/submissions",
        token=ALICE,
        text="kind: Job\nmetadata: [",
        content_type="application/yaml",
    )
    assert status == 400 and body["message"].startswith("the body is not valid YAML")


async def test_an_oversized_body_is_a_413(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    big = job()
    big["metadata"]["annotations"] = {"padding": "x" * (3 * 1024 * 1024)}
    status, body = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=big
    )
    assert status == 413 and body["reason"] == "RequestEntityTooLarge"
    assert (await hub.hub.store.list("/workloads/")).items == ()


async def test_users_submit_only_in_their_tenants_namespaces(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, body = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=MALLORY, body=job()
    )
    assert status == 403
    assert body["message"] == (
        "mallory may not submit workloads in namespace 'vision': it belongs to no tenant of theirs"
    )


async def test_agent_tokens_reach_only_agent_endpoints(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    status, _ = await hub.call("GET", f"{API}/clusterqueues", token="east-agent-token")
    assert status == 403


async def test_workloads_cannot_be_created_through_the_generic_route(hub: HubUnderTest) -> None:
    status, body = await hub.call("POST", f"{API}/namespaces/vision/workloads", body={})
    assert status == 400 and "submissions" in body["message"]


async def test_a_watch_streams_existing_objects_then_changes(hub: HubUnderTest) -> None:
    await hub.apply(fleet_objects()[0])
    headers = {"Authorization": "Bearer admin-token"}
    async with hub.session.get(
        f"{hub.url}{API}/resourceflavors?watch=true", headers=headers
    ) as response:
        first = await response.content.readline()
        await hub.apply(
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "kind": "ResourceFlavor",
                "metadata": {"name": "gpu"},
            }
        )
        second = await response.content.readline()
    assert b'"type":"ADDED"' in first and b'"name":"default"' in first
    assert b'"type":"ADDED"' in second and b'"name":"gpu"' in second


async def test_a_watch_with_timeout_seconds_ends_cleanly_after_them(hub: HubUnderTest) -> None:
    await hub.apply(fleet_objects()[0])
    headers = {"Authorization": "Bearer admin-token"}
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with hub.session.get(
        f"{hub.url}{API}/resourceflavors?watch=true&timeoutSeconds=1", headers=headers
    ) as response:
        assert response.status == 200
        lines = (await response.read()).splitlines()  # to its end: the hub closes the stream
    assert 1.0 <= loop.time() - started < 5.0
    assert len(lines) == 1 and b'"name":"default"' in lines[0]


@pytest.mark.parametrize("seconds", ["-1", "1.5", "soon", "9" * 19])
async def test_a_timeout_seconds_that_is_not_a_whole_number_is_a_400_naming_it(
    hub: HubUnderTest, seconds: str
) -> None:
    status, body = await hub.call(
        "GET", f"{API}/resourceflavors", params={"watch": "true", "timeoutSeconds": seconds}
    )
    assert status == 400
    assert body["details"]["causes"][0]["field"] == "timeoutSeconds"
