"""The federation the chaos driver breaks: kubesim clusters (simulated runtime, real durations),
the hub, and one agent per cluster that reaches the hub only through its own `FaultyLink`.

It is `qctl dev up`'s federation (`DevFederation`: its process spawning, kill and restart,
secrets, bootstrap and readiness checks) with three differences:

- each agent's `--hub` is its link's URL, so the driver can cut or black-hole one agent's
  traffic without touching a process;
- the MemberClusters carry short fencing timings (`ChaosTimings`), so losing a cluster and
  letting go of its work happen within a test;
- the fleet has one ClusterSet, ClusterQueue, LocalQueue and GlobalQueue per dispatch mode
  (`MODES`: BestFit, AllAtOnce, Incremental), each cluster queue a share of every cluster.

Several hubs on one etcd (hub HA) are being built on another branch; `ha_unavailable()`
says why the HA faults cannot run here, and `HaControl` is the hook they will use.

Called by: e2e.chaos.driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import yaml

from e2e.chaos.proxy import FaultyLink
from qctl.commands.dev import (
    ADMIN_GROUP,
    NODE_CPU,
    NODE_MEMORY_GI,
    STARTUP_SECONDS,
    DevFederation,
    _free_port,
    _tool,
)

__all__ = [
    "MODES",
    "ChaosFederation",
    "ChaosTimings",
    "HaControl",
    "ha_unavailable",
    "queue_of",
]

MODES = ("BestFit", "AllAtOnce", "Incremental")
"""Every dispatch mode, each with its own queue (`queue_of`)."""


def queue_of(mode: str) -> str:
    """The LocalQueue (and ClusterQueue, GlobalQueue, ClusterSet) of a dispatch mode."""
    return mode.lower()


@dataclass(frozen=True)
class ChaosTimings:
    """Fencing on every MemberCluster, short enough for a test (the API checks
    lossTimeoutSeconds ≥ leaseSeconds + graceSeconds), and the Incremental step."""

    loss_timeout_seconds: int = 12
    lease_seconds: int = 6
    grace_seconds: int = 4
    incremental_interval_seconds: int = 3


class HaControl(Protocol):
    """What the driver needs from a federation with several hubs on etcd (the hub-ha
    branch): kill and restart etcd, and find, kill and restart the leader hub."""

    async def kill_etcd(self) -> None: ...

    async def restart_etcd(self) -> None: ...

    async def kill_leader(self) -> str:
        """SIGKILL the hub that leads now (a standby keeps running); its process name."""
        ...

    async def restart_hub(self, name: str) -> None: ...


@functools.cache
def ha_unavailable() -> str | None:
    """Why this federation cannot run the HA faults, or None once it can.

    The hook for hub HA (branch hub-ha): once `multiq-hub` campaigns on etcd (its
    `--election-ttl` flag), `ChaosFederation.start_async` is to start etcd
    (`hub.store.localetcd`), two or three hubs on it (`--store etcd://…`, `--advertise-url`),
    one link per agent and hub, and agents with every link's URL (`--hub a,b`); then set
    `ChaosFederation.ha_control` to an `HaControl` over them (the leader is the hub whose `/readyz`
    says it leads) and return None here."""
    usage = subprocess.run(
        [_tool("multiq-hub"), "--help"], capture_output=True, text=True, check=False
    ).stdout
    if "--election-ttl" not in usage:
        return (
            "hub HA is not on this branch: multiq-hub does not campaign for leadership on "
            "etcd (no --election-ttl) and agents take one hub URL (issue #15, branch hub-ha); "
            "the etcd SIGKILL and leader SIGKILL faults need it"
        )
    return (
        "multiq-hub campaigns on etcd, but the chaos launcher does not start several hubs yet: "
        "write ChaosFederation's HA start and its HaControl (e2e/chaos/federation.py, "
        "ha_unavailable)"
    )


@dataclass
class ChaosFederation(DevFederation):
    timings: ChaosTimings = field(default_factory=ChaosTimings)
    links: dict[str, FaultyLink] = field(default_factory=dict)
    cluster_urls: dict[str, str] = field(default_factory=dict)
    ha_control: HaControl | None = None

    # --- start and stop ---------------------------------------------------------------------

    async def start_async(self) -> None:
        """Start kubesim, the hub, one link and one agent per cluster; return once every
        agent is connected and has reported capacity."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port(0)
        self._write_secrets()
        kube_dir = self.state_dir / "kubeconfigs"
        self._spawn(
            "kubesim",
            [
                _tool("kubesim"),
                "up",
                "--clusters",
                str(self.clusters),
                "--nodes",
                str(self.nodes),
                "--runtime",
                "simulated",
                "--no-events",  # no component reads them; they cost kubesim CPU
                "--dir",
                str(kube_dir),
                "--name-prefix",
                "sim",
            ],
            detach=False,
        )
        self._spawn_hub(detach=False)
        await self._until(
            lambda: all((kube_dir / f"{n}.kubeconfig").exists() for n in self.names),
            "kubesim clusters",
        )
        for name in self.names:
            self.cluster_urls[name] = _server_of(kube_dir / f"{name}.kubeconfig")
        await self._bootstrap()
        for name in self.names:
            link = FaultyLink(f"agent-{name}", "127.0.0.1", self.port)
            await link.start()
            self.links[name] = link
            self._spawn(f"agent-{name}", self._agent_argv(name, link.url), detach=False)
        await self._wait_connected()

    def _agent_argv(self, name: str, hub_url: str) -> list[str]:
        token_file = self.state_dir / "secrets" / f"agent-token-{name}" / "token"
        return [
            _tool("multiq-agent"),
            "--kubeconfig",
            str(self.state_dir / "kubeconfigs" / f"{name}.kubeconfig"),
            "--hub",
            hub_url,
            "--token-file",
            str(token_file),
            "--cluster",
            name,
            "--state-dir",
            str(self.state_dir / "agents" / name),
        ]

    async def stop_async(self) -> None:
        for link in self.links.values():
            await link.stop()
        self.resume_all()
        self.stop()

    async def _until(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not start in {STARTUP_SECONDS:.0f}s")
            await asyncio.sleep(0.1)

    # --- processes --------------------------------------------------------------------------

    def process(self, name: str) -> int | None:
        """The pid (and process group) of a running process of the federation."""
        return next((p.pid for n, p in self.processes if n == name), None)

    def signal(self, name: str, sig: int) -> None:
        """Send `sig` to a process's group without forgetting the process (SIGSTOP, SIGCONT)."""
        pid = self.process(name)
        if pid is None:
            raise KeyError(name)
        os.killpg(pid, sig)

    def resume_all(self) -> None:
        """SIGCONT every process, so none stays frozen whatever the driver was doing."""
        for _, proc in self.processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)

    # --- what the fleet is ------------------------------------------------------------------

    def fleet_objects(self) -> list[dict[str, Any]]:
        api = "multiq.dev/v1alpha1"
        t = self.timings
        # Each mode's cluster queue gets an equal share of every cluster, so the three modes
        # together never admit more than the nodes hold.
        cpu = self.nodes * NODE_CPU // len(MODES)
        memory = self.nodes * NODE_MEMORY_GI // len(MODES)
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": api,
                "kind": "MemberCluster",
                "metadata": {"name": name},
                "spec": {
                    "tokenRef": {"secretName": f"agent-token-{name}"},
                    "fencing": {
                        "lossTimeoutSeconds": t.loss_timeout_seconds,
                        "leaseSeconds": t.lease_seconds,
                        "graceSeconds": t.grace_seconds,
                    },
                },
            }
            for name in self.names
        ]
        objects.append(
            {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
        )
        objects.append(
            {
                "apiVersion": api,
                "kind": "Tenant",
                "metadata": {"name": "default"},
                "spec": {"namespaces": ["default"], "groups": [ADMIN_GROUP]},
            }
        )
        for mode in MODES:
            name = queue_of(mode)
            policy: dict[str, Any] = {"type": mode}
            if mode == "Incremental":
                policy["incremental"] = {
                    "stepSize": 1,
                    "intervalSeconds": t.incremental_interval_seconds,
                }
            objects += [
                {
                    "apiVersion": api,
                    "kind": "ClusterSet",
                    "metadata": {"name": name},
                    "spec": {"clusters": self.names},
                },
                {
                    "apiVersion": api,
                    "kind": "ClusterQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory"],
                                "flavors": [
                                    {
                                        "name": "default",
                                        "resources": [
                                            {"name": "cpu", "nominalQuota": str(cpu)},
                                            {"name": "memory", "nominalQuota": f"{memory}Gi"},
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                },
                {
                    "apiVersion": api,
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"clusterQueue": name},
                },
                {
                    "apiVersion": api,
                    "kind": "GlobalQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "clusterSet": name,
                        "clusterQueues": [name],
                        "dispatchPolicy": policy,
                    },
                },
            ]
        return objects

    # --- kubesim ----------------------------------------------------------------------------

    async def kubesim_admin(
        self, http: aiohttp.ClientSession, cluster: str, path: str, body: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """POST (with a body) or GET one of a cluster's `/_kubesim/` admin paths."""
        url = f"{self.cluster_urls[cluster]}/_kubesim/{path}"
        method = "POST" if body is not None else "GET"
        async with http.request(method, url, json=body) as response:
            response.raise_for_status()
            result: dict[str, Any] = await response.json()
            return result


def _server_of(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"])
