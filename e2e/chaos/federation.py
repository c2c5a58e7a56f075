"""The federation the chaos driver breaks: kubesim clusters (simulated runtime, real durations),
the hub side — one hub on SQLite, or several hubs on a local etcd (hub HA) — and one agent per
cluster that reaches the hubs only through its own `FaultyLink`s.

It is `qctl dev up`'s federation (`DevFederation`: its process spawning, kill and restart,
secrets, bootstrap and readiness checks, and with `ha` its etcd and hubs) with these
differences:

- each agent has one link per hub (`AgentLinks`) and its `--hub` is every link's URL, so the
  driver can cut or black-hole one agent's traffic to every hub without touching a process,
  and the agent finds the leader by itself, as in production (a follower's leader hint is
  rewritten by the link to the agent's link to the leader: e2e.chaos.proxy). One proxy per
  (agent, hub) rather than one per agent forwarding to "the current leader": the chaos
  harness then needs no idea of who leads, and the agent's own way of following the leader
  (dial every hub, follow the hint, redial after a term ends) is what runs under the faults;
- with several hubs the election TTL is short (`ChaosTimings.election_ttl_seconds`), and
  `ha_control` (`HaControl`) kills and restarts etcd and the hubs, the leader found by asking
  each hub's `/readyz`;
- the MemberClusters carry short fencing timings (`ChaosTimings`), so losing a cluster and
  letting go of its work happen within a test;
- the fleet has one ClusterSet, ClusterQueue, LocalQueue and GlobalQueue per dispatch mode
  (`MODES`: BestFit, AllAtOnce, Incremental), each cluster queue a share of every cluster.

Called by: e2e.chaos.driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from e2e.chaos.proxy import AgentLinks
from qctl.commands.dev import (
    ADMIN_GROUP,
    NODE_CPU,
    NODE_MEMORY_GI,
    STARTUP_SECONDS,
    DevFederation,
    _tool,
    free_port,
)
from qctl.config import ResolvedContext

__all__ = [
    "MODES",
    "SINGLE_HUB",
    "ChaosFederation",
    "ChaosTimings",
    "HaControl",
    "HaFaultError",
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
    lossTimeoutSeconds ≥ leaseSeconds + graceSeconds), the Incremental step, and with several
    hubs their election TTL (the hub's least is 2 s; the default 5 s)."""

    loss_timeout_seconds: int = 12
    lease_seconds: int = 6
    grace_seconds: int = 4
    incremental_interval_seconds: int = 3
    election_ttl_seconds: int = 3


SINGLE_HUB = (
    "one hub on SQLite (no etcd to kill, no standby to take over); hubs on etcd run them "
    "(ChaosConfig.ha of 2 or more: the bounded test, bench.chaos without --single)"
)
"""Why a federation without `ha_control` skips the HA faults."""
LEADER_WAIT_SECONDS = 30.0
"""How long the HA faults wait for some hub to lead (an election after the last fault)."""
ROLE_TIMEOUT_SECONDS = 2.0
DOWN = "down"
"""The role of a hub whose `/readyz` does not answer (or answers not ready)."""


class HaFaultError(RuntimeError):
    """An HA fault could not be injected as planned: no hub led, no standby ran, or etcd did
    not come back — itself a finding about hub HA."""


@dataclass
class HaControl:
    """The HA faults' handle on a federation of several hubs on one local etcd: SIGKILL etcd
    and restart it on its data and ports; find the hub that leads (its `/readyz` says
    "leader"); SIGKILL a hub, or the leader while a standby runs, and restart it with the
    arguments it first had."""

    fed: ChaosFederation

    @property
    def hubs(self) -> list[str]:
        return self.fed.hub_names

    def url_of(self, hub: str) -> str:
        return dict(zip(self.fed.hub_names, self.fed.hub_urls, strict=True))[hub]

    def context_of(self, hub: str) -> ResolvedContext:
        """A qctl context that talks to `hub` alone."""
        return ResolvedContext(self.url_of(hub), self.fed.admin_token, "default", hub)

    async def roles(self) -> dict[str, str]:
        """Each hub's role as its `/readyz` says: "leader", "follower" or `DOWN`."""
        timeout = aiohttp.ClientTimeout(total=ROLE_TIMEOUT_SECONDS)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            found = await asyncio.gather(*(_role(http, self.url_of(h)) for h in self.hubs))
        return dict(zip(self.hubs, found, strict=True))

    async def leader(self, *, within: float = LEADER_WAIT_SECONDS) -> str:
        """The hub that leads, once exactly one says so (waits out an election)."""
        deadline = time.monotonic() + within
        while True:
            roles = await self.roles()
            leaders = [hub for hub, role in roles.items() if role == "leader"]
            if len(leaders) == 1:
                return leaders[0]
            if time.monotonic() > deadline:
                raise HaFaultError(f"no single hub led within {within:.0f}s: {roles}")
            await asyncio.sleep(0.2)

    async def kill_hub(self, hub: str) -> str:
        """SIGKILL `hub`; its role just before."""
        role = (await self.roles())[hub]
        self.fed.kill(hub, signal.SIGKILL)
        return role

    async def kill_leader(self) -> str:
        """SIGKILL the hub that leads while another runs, ready to take over; its name."""
        leader = await self.leader()
        roles = await self.roles()
        standby = [hub for hub, role in roles.items() if hub != leader and role != DOWN]
        if not standby:
            raise HaFaultError(f"no standby hub runs beside the leader {leader}: {roles}")
        self.fed.kill(leader, signal.SIGKILL)
        return leader

    async def restart_hub(self, hub: str) -> None:
        self.fed.restart(hub)

    async def kill_etcd(self) -> None:
        self.fed.kill("etcd", signal.SIGKILL)

    async def restart_etcd(self) -> None:
        """Start etcd again on its data and ports; return once it is healthy (it writes its
        endpoints file then)."""
        self.fed.etcd_endpoints_file.unlink(missing_ok=True)
        self.fed.restart("etcd")
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self.fed.etcd_endpoints_file.exists():
            if self.fed.exited("etcd") or time.monotonic() > deadline:
                raise HaFaultError(f"etcd did not come back; see {self.fed.state_dir / 'logs'}")
            await asyncio.sleep(0.1)


async def _role(http: aiohttp.ClientSession, url: str) -> str:
    try:
        async with http.get(url + "/readyz") as reply:
            body = await reply.json()
            return str(body["role"]) if reply.status == 200 else DOWN
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
        return DOWN


@dataclass
class ChaosFederation(DevFederation):
    timings: ChaosTimings = field(default_factory=ChaosTimings)
    links: dict[str, AgentLinks] = field(default_factory=dict)
    """Each cluster's agent's links, one per hub."""
    cluster_urls: dict[str, str] = field(default_factory=dict)
    ha_control: HaControl | None = None
    """Set once started with hubs on etcd (`ha` ≥ 1); None for one hub on SQLite."""

    @property
    def etcd_endpoints_file(self) -> Path:
        """Written by the local etcd once healthy (DevFederation._spawn_hubs_on_etcd)."""
        return self.state_dir / "etcd.endpoints"

    # --- start and stop ---------------------------------------------------------------------

    async def start_async(self) -> None:
        """Start kubesim, the hub (or etcd and `ha` hubs), the links and one agent per
        cluster; return once every agent is connected and has reported capacity."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        if self.ha:
            self.election_ttl = self.timings.election_ttl_seconds
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
        hub_ports = self.hub_ports if self.ha else [self.port]
        for name in self.names:
            links = AgentLinks(f"agent-{name}", [("127.0.0.1", port) for port in hub_ports])
            await links.start()
            self.links[name] = links
            self._spawn(f"agent-{name}", self._agent_argv(name, ",".join(links.urls)), detach=False)
        await self._wait_connected()
        if self.ha:
            self.ha_control = HaControl(self)

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

    def exited(self, name: str) -> bool:
        """True when the process is not running (it exited, or was killed and not restarted)."""
        return not any(n == name and p.poll() is None for n, p in self.processes)

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
