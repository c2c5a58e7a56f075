"""Fixtures for the kubesim conformance tests: an in-process cluster and the real clients.

`sim` starts one simulated cluster on an ephemeral 127.0.0.1 port (fast bookmarks, 3 nodes);
`core`, `batch` and `custom` are kubernetes_asyncio APIs bound to it; `process_sim`,
`process_cluster`, `process_kubectl` and `process_core` are the same over a cluster whose pods
run as real processes; `kubectl` runs the real kubectl 1.32 against it with a private
`--cache-dir`, without blocking the event loop that serves it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from kubesim.cluster import Cluster, ClusterConfig
from kubesim.testing import RunningSimulator, running


@dataclass(frozen=True)
class KubectlResult:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class Kubectl:
    """The real kubectl against one kubesim cluster, run as an asyncio subprocess."""

    def __init__(self, kubeconfig: Path, cache_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.cache_dir = cache_dir

    async def __call__(
        self, *args: str, stdin: str | None = None, within: float = 60, check: bool = True
    ) -> KubectlResult:
        process = await asyncio.create_subprocess_exec(
            "kubectl",
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache_dir}",
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), within
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        result = KubectlResult(process.returncode or 0, out.decode(), err.decode())
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        """A long-running kubectl (get -w, logs -f); the caller reads and ends it."""
        return await asyncio.create_subprocess_exec(
            "kubectl",
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache_dir}",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )


@pytest.fixture
async def simulator() -> AsyncIterator[RunningSimulator]:
    template = ClusterConfig(bookmark_interval=0.3)
    async with running(clusters=1, nodes=3, template=template) as sim:
        yield sim


@pytest.fixture
def cluster(simulator: RunningSimulator) -> Cluster:
    return simulator.clusters[0]


@pytest.fixture
async def api_client(simulator: RunningSimulator) -> AsyncIterator[client.ApiClient]:
    api = await config.new_client_from_config(config_file=str(simulator.kubeconfig))
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture
def kubectl(simulator: RunningSimulator, tmp_path: Path) -> Kubectl:
    return Kubectl(simulator.kubeconfig, tmp_path / "kubectl-cache")


@pytest.fixture
async def process_sim() -> AsyncIterator[RunningSimulator]:
    template = ClusterConfig(bookmark_interval=0.3)
    async with running(clusters=1, nodes=2, runtime="process", template=template) as sim:
        yield sim


@pytest.fixture
def process_cluster(process_sim: RunningSimulator) -> Cluster:
    return process_sim.clusters[0]


@pytest.fixture
def process_kubectl(process_sim: RunningSimulator, tmp_path: Path) -> Kubectl:
    return Kubectl(process_sim.kubeconfig, tmp_path / "kubectl-cache")


@pytest.fixture
async def process_core(process_sim: RunningSimulator) -> AsyncIterator[client.CoreV1Api]:
    api = await config.new_client_from_config(config_file=str(process_sim.kubeconfig))
    try:
        yield client.CoreV1Api(api)
    finally:
        await api.close()


ROOT_CA = "kube-root-ca.crt"
"""The ConfigMap every namespace holds (the cluster's CA), as on a real cluster."""


def names_of(items: Any) -> list[str]:
    """The names of listed objects, leaving out the kube-root-ca.crt every namespace has."""
    return [item.metadata.name for item in items if item.metadata.name != ROOT_CA]


def manifest(body: dict[str, Any]) -> Any:
    """A plain dict body for kubernetes_asyncio calls (typed as models, accepting dicts)."""
    return body


async def eventually(check: Any, *, within: float = 10.0, interval: float = 0.05) -> Any:
    """Poll `check` (sync or async) until it returns a truthy value."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(interval)
