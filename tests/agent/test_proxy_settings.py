"""The agent decides its API server proxy once, from the environment, at start."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client as k8s

from agent.k8s.client import KubeClient


def _api(host: str) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = host
    return k8s.ApiClient(configuration)


@pytest.fixture(autouse=True)
def _clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_the_environments_proxy_is_used_and_no_longer_looked_up_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    kube = KubeClient(_api("https://api.example:6443"))
    rest = kube._api.rest_client
    assert rest.proxy == "http://proxy.example:3128"
    assert rest.pool_manager.trust_env is False
    await kube.close()


async def test_a_host_in_no_proxy_is_reached_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "api.example")
    kube = KubeClient(_api("https://api.example:6443"))
    assert not kube._api.rest_client.proxy
    await kube.close()


async def test_an_explicit_proxy_in_the_kubeconfig_wins() -> None:
    api = _api("https://api.example:6443")
    api.rest_client.proxy = "http://configured:8080"
    kube = KubeClient(api)
    assert kube._api.rest_client.proxy == "http://configured:8080"
    await kube.close()
