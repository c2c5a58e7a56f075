"""Request bodies the agent sends its API server: written by pydantic's encoder, the same JSON
values the standard library writes, and what the API server stores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client import rest

from agent.k8s.client import KubeClient, Resource, _WireJson
from tests.agent.conftest import job_source


def _job(name: str) -> dict[str, Any]:
    """A Job with non-ASCII text in a label and in its command."""
    job = job_source(name, script='echo "é" && exit 0', pods=2, namespace="default")
    job["metadata"]["labels"]["team"] = "ü-ñ"
    return job


def test_a_body_is_encoded_as_the_same_json_values_the_standard_library_writes() -> None:
    body = _job("values")
    assert json.loads(_WireJson.dumps(body)) == json.loads(json.dumps(body)) == body


def test_options_and_values_it_cannot_encode_take_the_standard_librarys_path() -> None:
    assert _WireJson.dumps({"a": 1}, indent=2) == json.dumps({"a": 1}, indent=2)
    with pytest.raises(TypeError):
        _WireJson.dumps({"a": object()})


def test_the_rest_module_keeps_every_other_json_function() -> None:
    assert _WireJson().loads('{"a": [1]}') == {"a": [1]}


async def test_a_job_created_through_the_client_is_stored_as_sent(kube: KubeClient) -> None:
    assert isinstance(rest.json, _WireJson)  # type: ignore[attr-defined]
    body = _job("stored")
    created = await kube.create(Resource.JOBS, "default", body)
    got = await kube.get(Resource.JOBS, "default", "stored")
    for seen in (created, got):
        assert seen["metadata"]["labels"]["team"] == "ü-ñ"
        assert seen["spec"]["parallelism"] == 2
        container = seen["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["sh", "-c", 'echo "é" && exit 0']
