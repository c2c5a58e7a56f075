"""kubesim answers bodies no parser can take — nested 1,000 deep, a 5,000-digit number, invalid
UTF-8, in JSON, YAML or a patch — with a 400, as kube-apiserver does, never a 500."""

from __future__ import annotations

import aiohttp
import pytest

from kubesim.testing import RunningSimulator

NAMESPACES = "/api/v1/namespaces"
DEEP_JSON = b'{"metadata": {"name": "deep"}, "spec": ' + b"[" * 1000 + b"]" * 1000 + b"}"
DEEP_YAML = b"metadata: {name: deep}\nspec: " + b"[" * 1000 + b"]" * 1000 + b"\n"
HUGE_NUMBER = b'{"metadata": {"name": "n"}, "spec": {"x": ' + b"9" * 5000 + b"}}"


@pytest.mark.parametrize(
    ("method", "path", "content_type", "body"),
    [
        ("POST", NAMESPACES, "application/json", DEEP_JSON),
        ("POST", NAMESPACES, "application/yaml", DEEP_YAML),
        ("POST", NAMESPACES, "application/json", HUGE_NUMBER),
        ("POST", NAMESPACES, "application/yaml", b"metadata: {name: n}\nx: " + b"9" * 5000),
        ("POST", NAMESPACES, "application/json", b'{"metadata": {"name": "\xff"}}'),
        ("POST", NAMESPACES, "application/json", b'{"a":' * 150 + b"1" + b"}" * 150),
        ("PATCH", f"{NAMESPACES}/default", "application/merge-patch+json", DEEP_JSON),
        ("PATCH", f"{NAMESPACES}/default", "application/merge-patch+json", HUGE_NUMBER),
    ],
)
async def test_a_body_no_parser_can_take_is_a_400(
    simulator: RunningSimulator, method: str, path: str, content_type: str, body: bytes
) -> None:
    url = next(iter(simulator.urls.values())) + path
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, data=body, headers={"Content-Type": content_type}) as reply,
    ):
        status = await reply.json()
        assert reply.status == 400, status
        assert status["reason"] == "BadRequest"
