"""`qctl dev up|down|demo`: a whole federation on this machine — N kubesim clusters, the hub
and one agent per cluster — for trying MultiQ, developing it and demonstrating it.

    qctl dev up [--clusters 2] [--nodes 4] [--runtime process|simulated] [--port 8470]
                [--ha N]
    qctl dev down
    qctl dev demo        up, submit examples/demo, stream their logs, then down

`up` starts the processes in the background, registers the clusters in cluster set `default`
with a `default` flavor, cluster queue (sized to each cluster) and local queue, writes a qctl
context `dev`, and prints how to use it. The hubs listen on 127.0.0.1 over plain HTTP (no
TLS: nothing leaves the machine), and the users file holds the admin token's scrypt hash.
`down` stops every process it started. `demo` runs in the foreground and stops everything
when the demo ends or on Ctrl-C. Logs of every process are in `<state-dir>/logs/`.

`--ha N` runs N hubs instead of one, on a local etcd (hub.store.localetcd, started as a
command) rather than SQLite: one leads, the others follow, and agents and the `dev` context
get every hub's URL, so killing the leader (`kill` the process `hub-<i>`) shows a failover.

qctl never imports the hub, agent or kubesim: it starts their commands and talks HTTP.
Called by: qctl.main (through qctl.cli, which declares its flags); the README's first
command (`./dev demo`); e2e tests and benches (DevFederation).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from localports import NoFreePortError, free_ports
from qctl import config as qconfig
from qctl.cli import DEV_PORT
from qctl.client import HubClient
from qctl.commands.common import use_color
from qctl.commands.streams import follow_workloads
from qctl.commands.submit import read_documents
from qctl.config import ResolvedContext
from qctl.errors import QctlError, UsageError
from qctl.kinds import WORKLOAD, resolve_kind

__all__ = ["DevFederation", "free_port", "run_demo", "run_down", "run_up"]

ADMIN_GROUP = "multiq:admins"
DEV_QUEUE = "default"
"""The ClusterQueue (and LocalQueue) the dev fleet gives every cluster."""
DEFAULT_PORT = DEV_PORT
NODE_CPU, NODE_MEMORY_GI = 8, 32  # kubesim's default node
STARTUP_SECONDS = 60.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM us when the parent exits."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port(preferred: int = 0, *, avoid: Collection[int] = ()) -> int:
    """`preferred` if it is free, else a free port outside the kernel's ephemeral range and
    not in `avoid` (`localports`: why outside, and why `avoid`)."""
    try:
        return free_ports(1, preferred=preferred, avoid=avoid)[0]
    except NoFreePortError as exc:
        raise QctlError(str(exc)) from None


def _tool(name: str) -> str:
    """A sibling console script of this qctl (same virtualenv), else one on PATH."""
    # (An executable file, not any path: when this runs inside `python -c` — a pytest-xdist
    # worker — argv[0] is "-c", and the directory beside it is the working directory,
    # where `kubesim/` is the package.)
    for candidate in (
        Path(sys.argv[0]).resolve().parent / name,
        Path(sys.executable).parent / name,
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if not found:
        raise QctlError(f"cannot find the {name} command; is MultiQ installed?")
    return found


@dataclass
class DevFederation:
    state_dir: Path
    clusters: int = 2
    nodes: int = 4
    runtime: str = "process"
    port: int = DEFAULT_PORT
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # A kubesim node profile (node sizes, labels, taints); None: kubesim's 8-CPU nodes.
    profile: Path | None = None
    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    _argv: dict[str, list[str]] = field(default_factory=dict)
    # How many hubs share a local etcd (named hub-0, hub-1, …); 0: one hub ("hub") on SQLite.
    ha: int = 0
    hub_ports: list[int] = field(default_factory=list)
    # With `ha`, the hubs' --election-ttl (seconds); None: the hub's default.
    election_ttl: int | None = None

    @property
    def names(self) -> list[str]:
        return [f"sim-{i}" for i in range(self.clusters)]

    @property
    def url(self) -> str:
        """The hub's URL; with --ha, every hub's, comma-separated (as agents and qctl take)."""
        if self.ha:
            return ",".join(self.hub_urls)
        return f"http://127.0.0.1:{self.port}"

    @property
    def hub_names(self) -> list[str]:
        return [f"hub-{i}" for i in range(self.ha)] if self.ha else ["hub"]

    @property
    def hub_urls(self) -> list[str]:
        if not self.ha:
            return [self.url]
        return [f"http://127.0.0.1:{port}" for port in self.hub_ports]

    @property
    def context(self) -> ResolvedContext:
        return ResolvedContext(self.url, self.admin_token, "default", "dev federation")

    # --- processes ------------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process (and its group) of the federation, as a crash would."""
        for i, (proc_name, proc) in enumerate(self.processes):
            if proc_name == name:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
                del self.processes[i]
                return
        raise KeyError(name)

    def restart(self, name: str) -> None:
        """Start a killed process again with the arguments it first had."""
        self._spawn(name, self._argv[name], detach=False)

    def _spawn(self, name: str, argv: list[str], *, detach: bool) -> None:
        self._argv[name] = argv
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as log_file:
            proc = subprocess.Popen(
                argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: we stop it and its children
                # A foreground federation must not outlive its qctl, however qctl ends. Only
                # prctl runs between fork and exec, and we spawn from the main thread (the
                # death signal follows the forking thread).
                preexec_fn=None if detach else _die_with_parent,  # noqa: PLW1509
                cwd=self.state_dir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.processes.append((name, proc))

    def _write_secrets(self) -> None:
        tokens = {name: secrets.token_urlsafe(24) for name in self.names}
        for name, token in tokens.items():
            secret = self.state_dir / "secrets" / f"agent-token-{name}"
            secret.mkdir(parents=True, exist_ok=True)
            (secret / "token").write_text(token)
            (secret / "token").chmod(0o600)
        # The hub keeps only a salted hash of the admin token; the token is in the qctl context.
        from api.tokens import hash_token  # noqa: PLC0415 - only `dev up` writes one

        admin_hash = hash_token(self.admin_token)
        users = {"users": [{"name": "admin", "tokenHash": admin_hash, "groups": [ADMIN_GROUP]}]}
        users_file = self.state_dir / "users.yaml"
        users_file.write_text(yaml.safe_dump(users))
        users_file.chmod(0o600)

    def start(self, *, detach: bool) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(self.port)
        self._write_secrets()
        kube_dir = self.state_dir / "kubeconfigs"
        shutil.rmtree(kube_dir, ignore_errors=True)
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
                self.runtime,
                "--dir",
                str(kube_dir),
                "--name-prefix",
                "sim",
                *(["--profile", str(self.profile)] if self.profile else []),
            ],
            detach=detach,
        )
        self._spawn_hub(detach=detach)
        self._wait_for(
            lambda: all((kube_dir / f"{n}.kubeconfig").exists() for n in self.names),
            "kubesim clusters",
        )
        asyncio.run(self._bootstrap())
        for name in self.names:
            token_file = self.state_dir / "secrets" / f"agent-token-{name}" / "token"
            self._spawn(
                f"agent-{name}",
                [
                    _tool("multiq-agent"),
                    "--kubeconfig",
                    str(kube_dir / f"{name}.kubeconfig"),
                    "--hub",
                    self.url,
                    "--token-file",
                    str(token_file),
                    "--cluster",
                    name,
                    "--state-dir",
                    str(self.state_dir / "agents" / name),
                ],
                detach=detach,
            )
        asyncio.run(self._wait_connected())

    def start_hub_only(self) -> None:
        """The hub alone with the fleet registered, for peers that speak the agent protocol
        themselves (bench.hub_dispatch); the agents' tokens are in `agent_token()`."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(self.port)
        self._write_secrets()
        self._spawn_hub(detach=False)
        asyncio.run(self._bootstrap())

    def agent_token(self, name: str) -> str:
        return (self.state_dir / "secrets" / f"agent-token-{name}" / "token").read_text()

    def _spawn_hub(self, *, detach: bool) -> None:
        if self.ha:
            self._spawn_hubs_on_etcd(detach=detach)
            return
        db = self.state_dir / "hub.db"
        self._spawn(
            "hub",
            [
                _tool("multiq-hub"),
                "--port",
                str(self.port),
                "--store",
                f"sqlite:{db}",
                "--users-file",
                str(self.state_dir / "users.yaml"),
                "--secrets-dir",
                str(self.state_dir / "secrets"),
            ],
            detach=detach,
        )

    def _spawn_hubs_on_etcd(self, *, detach: bool) -> None:
        """A local etcd (fixed ports, so it can be restarted where it was) and `ha` hubs."""
        endpoints_file = self.state_dir / "etcd.endpoints"
        endpoints_file.unlink(missing_ok=True)
        client, peer = free_ports(2, avoid={self.port})
        self._spawn(
            "etcd",
            [
                sys.executable,
                "-m",
                "hub.store.localetcd",
                "--data-dir",
                str(self.state_dir / "etcd"),
                "--ports",
                f"{client}:{peer}",
                "--endpoints-file",
                str(endpoints_file),
            ],
            detach=detach,
        )
        self._wait_for(endpoints_file.exists, "etcd")
        self.hub_ports = [self.port, *free_ports(self.ha - 1, avoid={self.port, client, peer})]
        for name, port in zip(self.hub_names, self.hub_ports, strict=True):
            self._spawn(
                name,
                [
                    _tool("multiq-hub"),
                    "--port",
                    str(port),
                    "--store",
                    f"etcd://{endpoints_file.read_text().strip()}",
                    "--advertise-url",
                    f"http://127.0.0.1:{port}",
                    *(["--election-ttl", str(self.election_ttl)] if self.election_ttl else []),
                    "--users-file",
                    str(self.state_dir / "users.yaml"),
                    "--secrets-dir",
                    str(self.state_dir / "secrets"),
                ],
                detach=detach,
            )

    def _wait_for(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise QctlError(
                    f"{what} did not start in {STARTUP_SECONDS:.0f}s; see {self.state_dir / 'logs'}"
                )
            time.sleep(0.1)

    def _check_alive(self) -> None:
        for name, proc in self.processes:
            if proc.poll() is not None:
                log = self.state_dir / "logs" / f"{name}.log"
                tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
                raise QctlError(
                    f"{name} exited with code {proc.returncode}:\n  " + "\n  ".join(tail)
                )

    async def _bootstrap(self) -> None:
        """Register the clusters and the default queues at the hub."""
        async with HubClient(self.context, timeout=5) as client:
            deadline = time.monotonic() + STARTUP_SECONDS
            while True:
                self._check_alive()
                try:
                    await client.request("GET", "/readyz")
                    break
                except QctlError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            for body in self.fleet_objects():
                kind = resolve_kind(body["kind"])
                await client.create(kind, body)

    def fleet_objects(self) -> list[dict[str, Any]]:
        api = "multiq.dev/v1alpha1"
        cpu, memory = self.nodes * NODE_CPU, self.nodes * NODE_MEMORY_GI
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": api,
                "kind": "MemberCluster",
                "metadata": {"name": name, "labels": {"multiq.dev/dev": "true"}},
                "spec": {
                    "tokenRef": {"secretName": f"agent-token-{name}"},
                    "fencing": {"lossTimeoutSeconds": 60, "leaseSeconds": 30, "graceSeconds": 15},
                },
            }
            for name in self.names
        ]
        objects += [
            {
                "apiVersion": api,
                "kind": "ClusterSet",
                "metadata": {"name": "default"},
                "spec": {"clusters": self.names},
            },
            {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": {"name": DEV_QUEUE},
                "spec": {
                    # The tenant's namespaces, by the label the hub gives them on every
                    # member cluster (ConfigSync.namespaces): every dev federation, demo and
                    # e2e run admits through it.
                    "namespaceSelector": {"matchLabels": {"multiq.dev/tenant": "default"}},
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
                "metadata": {"name": DEV_QUEUE, "namespace": "default"},
                "spec": {"clusterQueue": DEV_QUEUE},
            },
            {
                "apiVersion": api,
                "kind": "Tenant",
                "metadata": {"name": "default"},
                "spec": {"namespaces": ["default"], "groups": [ADMIN_GROUP]},
            },
            {
                "apiVersion": api,
                "kind": "GlobalQueue",
                "metadata": {"name": "default"},
                "spec": {"clusterSet": "default"},
            },
        ]
        return objects

    async def _wait_connected(self) -> None:
        fleet = self.fleet_objects()
        queues = {o["metadata"]["name"] for o in fleet if o["kind"] == "ClusterQueue"}
        async with HubClient(self.context, timeout=5) as client:
            deadline = time.monotonic() + STARTUP_SECONDS
            while True:
                self._check_alive()
                members = await client.list(resolve_kind("clusters"), None)
                ready = [m for m in members if _ready_for_work(m.get("status") or {}, queues)]
                if len(ready) == self.clusters:
                    return
                if time.monotonic() > deadline:
                    raise QctlError(
                        f"the agents did not connect in time; see {self.state_dir / 'logs'}"
                    )
                await asyncio.sleep(0.2)

    def stop(self) -> None:
        stop_processes([proc.pid for _, proc in self.processes])
        for _, proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        self.processes.clear()

    def save(self) -> None:
        state = {"port": self.port, "pids": {n: p.pid for n, p in self.processes}, "url": self.url}
        if self.ha:
            state["hubs"] = dict(zip(self.hub_names, self.hub_urls, strict=True))
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=2))


def _ready_for_work(status: dict[str, Any], queues: set[str]) -> bool:
    """Connected, with the room of one of the fleet's cluster queues reported (any capacity,
    when the fleet has none): the agent applied the configuration. Its first report, sent as it
    connects, may come before that, with no queue in it; work submitted then finds no room."""
    capacity = status.get("capacity")
    if not status.get("connected") or not capacity:
        return False
    return not queues or any(f.get("clusterQueue") in queues for f in capacity.get("flavors") or [])


def stop_processes(pids: list[int], *, grace: float = 10.0) -> None:
    """SIGTERM each process group (agents first, kubesim last), then SIGKILL what remains."""
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)  # reap our own children so they stop counting
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _plan(args: argparse.Namespace, state_dir: Path) -> DevFederation:
    if args.clusters < 1 or args.nodes < 1:
        raise UsageError("--clusters and --nodes must be at least 1")
    if args.ha < 0:
        raise UsageError("--ha must be at least 1 (or 0 for one hub on SQLite)")
    return DevFederation(state_dir, args.clusters, args.nodes, args.runtime, args.port, ha=args.ha)


def run_up(args: argparse.Namespace, out: TextIO) -> int:
    state_file = args.state_dir / "state.json"
    if state_file.exists():
        raise QctlError(f"a dev federation is already up ({state_file}); run `qctl dev down`")
    fed = _plan(args, args.state_dir)
    try:
        fed.start(detach=True)
    except BaseException:
        fed.stop()
        raise
    fed.save()
    config = qconfig.load()
    config.upsert(qconfig.Context(name="dev", server=fed.url, token=fed.admin_token))
    path = qconfig.save(config)
    hubs = f"hubs {', '.join(fed.hub_urls)} on a local etcd" if fed.ha else f"hub {fed.url}"
    out.write(
        f"MultiQ dev federation is up: {hubs}, clusters {', '.join(fed.names)} "
        f"({fed.nodes} nodes each, {fed.runtime} runtime).\n"
        "Plain HTTP on 127.0.0.1, for this machine only; a hub others reach serves TLS "
        "(multiq-hub --tls-cert/--tls-key).\n"
        f"qctl context 'dev' written to {path}.\n"
        f"Dashboard: {fed.hub_urls[0]}/ui/ (sign in with the token of context 'dev').\n\n"
        "Try:\n"
        "  qctl get clusters\n"
        "  qctl submit -f examples/demo/train.yaml --follow\n"
        "  qctl get workloads -o wide\n"
        "  qctl dev down\n"
        f"Logs: {args.state_dir / 'logs'}\n"
    )
    return 0


def run_down(args: argparse.Namespace, out: TextIO) -> int:
    state_file = args.state_dir / "state.json"
    if not state_file.exists():
        out.write("no dev federation is up\n")
        return 0
    state = json.loads(state_file.read_text())
    pids = list(state["pids"].values())
    stop_processes(pids)
    state_file.unlink()
    out.write(f"stopped {len(pids)} process(es)\n")
    return 0


def _demo_files(args: argparse.Namespace) -> list[str]:
    if args.filenames:
        return list(args.filenames)
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = base / "examples" / "demo"
        if candidate.is_dir():
            return [str(candidate)]
    raise UsageError("no demo jobs found; pass -f FILE")


@contextlib.contextmanager
def _federation(fed: DevFederation, *, keep: bool) -> Iterator[DevFederation]:
    try:
        fed.start(detach=False)
        yield fed
    finally:
        if not keep:
            fed.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    files = _demo_files(args)
    docs = read_documents(files)
    with tempfile.TemporaryDirectory(prefix="multiq-demo-") as scratch:
        fed = _plan(args, Path(scratch))
        out.write(
            f"Starting a federation of {fed.clusters} kubesim clusters "
            f"({fed.nodes} nodes of {NODE_CPU} CPU each), the hub and "
            f"{fed.clusters} agents…\n"
        )
        out.flush()
        with _federation(fed, keep=args.keep):
            out.write(f"Hub at {fed.url}; clusters {', '.join(fed.names)} connected.\n\n")
            out.flush()

            async def demo() -> int:
                async with HubClient(fed.context) as client:
                    keys = []
                    for body in docs:
                        wl = await client.submit(body, namespace="default")
                        keys.append(f"default/{wl['metadata']['name']}")
                        out.write(f"submitted workload/{wl['metadata']['name']}\n")
                    out.flush()
                    code = await follow_workloads(
                        client, keys, out, color=use_color(args.color, out)
                    )
                    out.write("\nWhere they ran:\n")
                    for key in keys:
                        ns, name = key.split("/")
                        wl = await client.get(WORKLOAD, name, ns)
                        cluster = (wl.get("status") or {}).get("clusterName")
                        out.write(f"  workload/{name:<20} cluster {cluster}\n")
                    return code

            try:
                code: int = asyncio.run(demo())
            except KeyboardInterrupt:
                out.write("\ninterrupted; stopping the federation\n")
                return 130
        if args.keep:
            out.write(f"\nThe federation keeps running (state in {scratch}).\n")
        else:
            out.write("\nFederation stopped; nothing left running.\n")
        return code
