"""The agent's creates go through kubernetes_asyncio's REST client with what a generated
method would send: the collection's path, wire JSON, the client's User-Agent and a bearer
token asked of the configuration for each request (so a refreshed token is used at once);
what the API server answers maps to the agent's errors as for every other call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s

from agent.errors import K8sAlreadyExistsError, K8sForbiddenError
from agent.k8s.client import KubeClient, Resource
from tests.agent.conftest import job_source

Seen = list[tuple[str, str, dict[str, str], Any]]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[str, Seen]]:
    """A real HTTP server that records each request and answers as an API server would:
    201 with the object, 409 for a second object of the same name, 403 in namespace
    `locked`."""
    seen: Seen = []
    names: set[tuple[str, str]] = set()

    async def create(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append((request.method, request.path, dict(request.headers), body))
        if request.match_info.get("namespace") == "locked":
            status = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"}
            return web.json_response(status, status=403)
        name = body["metadata"]["name"]
        if (request.path, name) in names:
            status = {"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": name}
            return web.json_response(status, status=409)
        names.add((request.path, name))
        return web.json_response(
            {**body, "metadata": {**body["metadata"], "uid": "u-1"}}, status=201
        )

    app = web.Application()
    app.router.add_post("/apis/batch/v1/namespaces/{namespace}/jobs", create)
    app.router.add_post("/api/v1/namespaces/{namespace}/{plural}", create)
    app.router.add_post("/api/v1/namespaces", create)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def client_for(host: str, tokens: list[str]) -> KubeClient:
    configuration = k8s.Configuration(host=host)
    configuration.api_key = {"BearerToken": tokens[0]}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(config: k8s.Configuration) -> None:
        # What an exec plugin or an in-cluster token file does when the token rotates.
        config.api_key["BearerToken"] = tokens[0]

    configuration.refresh_api_key_hook = refresh
    return KubeClient(k8s.ApiClient(configuration))


async def test_a_create_posts_wire_json_to_the_collection_with_the_token_asked_for_then(
    recorder: tuple[str, Seen],
) -> None:
    host, seen = recorder
    tokens = ["first"]
    kube = client_for(host, tokens)
    try:
        created = await kube.create(Resource.JOBS, "team-a", job_source("a", namespace="team-a"))
        tokens[0] = "rotated"
        await kube.create(Resource.PODS, "team-a", {"metadata": {"name": "p"}})
        await kube.create(Resource.SERVICES, "team-a", {"metadata": {"name": "s"}})
        await kube.create(Resource.NAMESPACES, None, {"metadata": {"name": "team-b"}})
    finally:
        await kube.close()
    assert created["metadata"]["uid"] == "u-1"
    assert [(method, path) for method, path, _, _ in seen] == [
        ("POST", "/apis/batch/v1/namespaces/team-a/jobs"),
        ("POST", "/api/v1/namespaces/team-a/pods"),
        ("POST", "/api/v1/namespaces/team-a/services"),
        ("POST", "/api/v1/namespaces"),
    ]
    assert seen[0][3] == json.loads(json.dumps(job_source("a", namespace="team-a")))
    headers = [h for _, _, h, _ in seen]
    assert [h["Authorization"] for h in headers] == ["Bearer first"] + ["Bearer rotated"] * 3
    for h in headers:
        assert h["Content-Type"] == "application/json" and h["Accept"] == "application/json"
        assert h["User-Agent"].startswith("OpenAPI-Generator/")


async def test_a_refused_create_raises_the_mapped_error_and_a_namespaced_one_needs_a_namespace(
    recorder: tuple[str, Seen],
) -> None:
    host, seen = recorder
    kube = client_for(host, ["t"])
    try:
        await kube.create(Resource.JOBS, "team-a", job_source("a", namespace="team-a"))
        with pytest.raises(K8sAlreadyExistsError):
            await kube.create(Resource.JOBS, "team-a", job_source("a", namespace="team-a"))
        with pytest.raises(K8sForbiddenError):
            await kube.create(Resource.JOBS, "locked", job_source("a", namespace="locked"))
        with pytest.raises(ValueError, match="namespaced"):
            await kube.create(Resource.JOBS, None, job_source("a"))
    finally:
        await kube.close()
    assert len(seen) == 3
