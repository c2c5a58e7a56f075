"""Version, discovery (legacy and aggregated) and the OpenAPI v3 documents kubectl relies on."""

from __future__ import annotations

from typing import Any

import aiohttp

from kubesim.testing import RunningSimulator

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


async def _get(url: str, accept: str = "application/json") -> tuple[aiohttp.ClientResponse, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers={"Accept": accept}) as response,
    ):
        return response, await response.json(content_type=None)


async def test_version_reports_minor_32_so_the_dispatcher_picks_kubectl_1_32(
    simulator: RunningSimulator,
) -> None:
    _, body = await _get(simulator.urls["sim-0"] + "/version?timeout=5s")
    assert (body["major"], body["minor"]) == ("1", "32")
    assert body["gitVersion"].startswith("v1.32.")


async def test_legacy_discovery_lists_groups_and_resources_with_subresources(
    simulator: RunningSimulator,
) -> None:
    base = simulator.urls["sim-0"]
    _, groups = await _get(base + "/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {"batch", "apps", "coordination.k8s.io", "apiextensions.k8s.io"} <= names
    _, core = await _get(base + "/api/v1")
    resources = {r["name"]: r for r in core["resources"]}
    assert {"pods/log", "pods/status", "pods/binding", "pods/eviction"} <= set(resources)
    assert resources["pods"]["shortNames"] == ["po"]
    assert resources["pods"]["categories"] == ["all"]


async def test_aggregated_discovery_answers_in_one_round_trip_with_its_content_type(
    simulator: RunningSimulator,
) -> None:
    response, body = await _get(simulator.urls["sim-0"] + "/apis", AGGREGATED_ACCEPT)
    assert response.headers["Content-Type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert body["kind"] == "APIGroupDiscoveryList"
    batch = next(item for item in body["items"] if item["metadata"]["name"] == "batch")
    jobs = batch["versions"][0]["resources"][0]
    assert jobs["resource"] == "jobs"
    assert jobs["scope"] == "Namespaced"
    assert jobs["subresources"][0]["subresource"] == "status"


async def test_openapi_v3_advertises_field_validation_on_patch(
    simulator: RunningSimulator,
) -> None:
    base = simulator.urls["sim-0"]
    _, root = await _get(base + "/openapi/v3")
    batch_url = root["paths"]["apis/batch/v1"]["serverRelativeURL"]
    _, document = await _get(base + batch_url)
    patch = document["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "batch",
        "version": "v1",
        "kind": "Job",
    }
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    response, _ = await _get(base + "/openapi/v2")
    assert response.status == 404
