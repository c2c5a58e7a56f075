"""One simulated cluster (API server + controllers + kubelet) and the multi-cluster simulator.

`Cluster` owns everything of one member cluster: the store, the object registry, the
aiohttp site on its own 127.0.0.1 port (plain HTTP, and HTTPS on a second port), the
in-process controllers (garbage collector, namespaces, CRDs, Job, ReplicaSet, Deployment,
Endpoints and claim-binding controllers, Service proxies, scheduler, node leases, kubelet),
the ServiceAccount admission plugin and the pod history.
`Simulator` runs several clusters in one event loop and writes their kubeconfigs. Used by
`kubesim.cli` (`kubesim up`) and `kubesim.testing` (in-process start for tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiohttp import web

from kubesim.admin import add_admin_routes
from kubesim.apiserver.admission import ServiceAccountAdmission
from kubesim.apiserver.app import build_app
from kubesim.apiserver.authn import TokenIssuer
from kubesim.apiserver.context import ApiContext
from kubesim.apiserver.faults import FaultInjector
from kubesim.apiserver.rbac import BOOTSTRAP_POLICY, RbacAuthorizer
from kubesim.apiserver.registry import ObjectRegistry
from kubesim.apiserver.store import Store
from kubesim.controllers.claims import ClaimBinder
from kubesim.controllers.crds import CrdController
from kubesim.controllers.gc import GarbageCollector, NamespaceController
from kubesim.controllers.jobs import JobController
from kubesim.controllers.nodes import NodeController
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.services import (
    KUBERNETES_SERVICE_IP,
    EndpointsController,
    ServiceProxies,
)
from kubesim.controllers.workloads import DeploymentController, ReplicaSetController
from kubesim.history import DEFAULT_LIMIT, PodHistory
from kubesim.kubeconfig import write_kubeconfig, write_merged_kubeconfig
from kubesim.kubelet.agent import Kubelet
from kubesim.logs import LogBook
from kubesim.objects import JsonObject
from kubesim.profile import NodeProfile, build_nodes
from kubesim.resources import ResourceRegistry
from kubesim.tls import TlsMaterial, serving_material

__all__ = ["Cluster", "ClusterConfig", "Simulator"]

_log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True)
class ClusterConfig:
    """How one simulated cluster behaves; every field has a test-friendly default."""

    name: str = "kubesim"
    port: int = 0
    """TCP port on 127.0.0.1; 0 picks a free one."""
    runtime: str = "simulated"
    """Default pod runtime: "simulated" (stages) or "process" (real subprocesses)."""
    profile: NodeProfile = field(default_factory=NodeProfile)
    bookmark_interval: float = 5.0
    """Seconds between watch BOOKMARK events (real servers: about a minute)."""
    watch_max_seconds: float = 1800.0
    """Watches without timeoutSeconds end after this times a random factor in [1, 2)."""
    history_limit: int = 10000
    """Watch history kept per resource type; older resourceVersions get 410 Expired."""
    lease_interval: float = 10.0
    """Seconds between node Lease renewals (kubelet default 10 s)."""
    node_status_interval: float = 300.0
    """Seconds between node status reports (condition lastHeartbeatTime), as a kubelet's."""
    access_log: bool = False
    """Log every API request (logger kubesim.access.<name>, INFO)."""
    record_events: bool = True
    """Emit core/v1 Events (scheduling, job pods); scale runs may turn them off."""
    job_pod_duration: float = 0.0
    """Simulated runtime: seconds a Job-owned pod runs when it carries no duration annotation."""
    job_backoff_seconds: float = 0.0
    """Base delay before a Job replaces a failed pod (doubling per failure; real: 10 s)."""
    work_dir: Path | None = None
    """Process runtime: parent of per-pod working directories (default: a temp dir)."""
    pod_history_limit: int = DEFAULT_LIMIT
    """Pod runs kept after their pods are gone (`kubesim.history`); 0 keeps none."""
    namespace_deletion_delay: float = 2.0
    """Seconds a Terminating namespace keeps its contents before they are deleted (a real
    namespace controller first discovers every resource type)."""
    anonymous_is_admin: bool = True
    """A request with no Authorization header is the admin (kube-apiserver: anonymous)."""


class Controller(Protocol):
    name: str

    async def run(self) -> None: ...


class Cluster:
    """One simulated Kubernetes cluster, serving on 127.0.0.1."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        self.types = ResourceRegistry()
        self.store = Store(history_limit=self.config.history_limit)
        self.registry = ObjectRegistry(self.store, self.types)
        self.registry.events_enabled = self.config.record_events
        self.registry.admission[("", "pods")] = [
            ServiceAccountAdmission(self.store, self.types.core("serviceaccounts"))
        ]
        self.logs = LogBook()
        self.faults = FaultInjector()
        self.history = PodHistory(self.config.name, limit=self.config.pod_history_limit)
        if self.config.pod_history_limit > 0:
            self.store.subscribe(self.types.core("pods"), self.history.observe)
        self.api = ApiContext(
            cluster_name=self.config.name,
            types=self.types,
            store=self.store,
            registry=self.registry,
            logs=self.logs,
            tokens=TokenIssuer(self._service_account, pod_lookup=self._pod),
            authorizer=RbacAuthorizer(self.store, self.types),
            anonymous_is_admin=self.config.anonymous_is_admin,
            bookmark_interval=self.config.bookmark_interval,
            watch_max_seconds=self.config.watch_max_seconds,
        )
        self.controllers: list[Controller] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.tls_port = 0
        self.tls: TlsMaterial | None = None
        self._build_controllers()

    def _build_controllers(self) -> None:
        self.crds = CrdController(self)
        self.gc = GarbageCollector(self)
        self.namespace_controller = NamespaceController(self)
        self.jobs = JobController(self)
        self.replica_sets = ReplicaSetController(self)
        self.deployments = DeploymentController(self, self.replica_sets)
        self.endpoints = EndpointsController(self)
        self.services = ServiceProxies(self)
        self.scheduler = Scheduler(self)
        self.nodes = NodeController(self)
        self.kubelet = Kubelet(self)
        self.claims = ClaimBinder(self, self.kubelet.claims_root)
        self.controllers = [
            self.crds,
            self.gc,
            self.namespace_controller,
            self.jobs,
            self.replica_sets,
            self.deployments,
            self.endpoints,
            self.services,
            self.scheduler,
            self.nodes,
            self.kubelet,
            self.claims,
        ]

    def _service_account(self, namespace: str, name: str) -> JsonObject | None:
        return self.store.get(self.types.core("serviceaccounts"), namespace, name)

    def _pod(self, namespace: str, name: str) -> JsonObject | None:
        return self.store.get(self.types.core("pods"), namespace, name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def https_url(self) -> str:
        """The same API over TLS (what pods and token-carrying kubectl use)."""
        return f"https://127.0.0.1:{self.tls_port}"

    def _bootstrap(self) -> None:
        namespaces = self.types.core("namespaces")
        for name in SYSTEM_NAMESPACES:
            self.registry.create(namespaces, {"metadata": {"name": name}})
        self._bootstrap_api_service()
        for plural, obj in BOOTSTRAP_POLICY.objects():
            rbac = self.types.lookup("rbac.authorization.k8s.io", "v1", plural)
            assert rbac is not None
            self.registry.create(rbac, obj)
        nodes = self.types.core("nodes")
        for node in build_nodes(self.config.profile):
            # Like a kubelet: register the node, then post its status (create drops status).
            status = node.pop("status")
            created = self.registry.create(nodes, node, validate=False)

            def post_status(new: JsonObject, status: JsonObject = status) -> None:
                new["status"] = status

            self.registry.mutate(nodes, "", created["metadata"]["name"], post_status)

    def _bootstrap_api_service(self) -> None:
        """The `kubernetes` Service and its Endpoints: the API, at the HTTPS port."""
        self.registry.create(
            self.types.core("services"),
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "clusterIP": KUBERNETES_SERVICE_IP,
                    "ports": [
                        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}
                    ],
                },
            },
            namespace="default",
        )
        self.registry.create(
            self.types.core("endpoints"),
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                },
                "subsets": [
                    {
                        "addresses": [{"ip": "127.0.0.1"}],
                        "ports": [{"name": "https", "port": self.tls_port, "protocol": "TCP"}],
                    }
                ],
            },
            namespace="default",
            validate=False,
        )

    async def start(self) -> None:
        app = build_app(self.api, self.faults, add_admin_routes=lambda a: add_admin_routes(a, self))
        access_log = logging.getLogger(f"kubesim.access.{self.config.name}")
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=access_log if self.config.access_log else None,
            shutdown_timeout=1,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.config.port, reuse_address=True)
        await site.start()
        self.port = _bound_port(site)
        self.tls = serving_material()
        tls_site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls.server_context())
        await tls_site.start()
        self.tls_port = _bound_port(tls_site)
        self.api.server_address = f"127.0.0.1:{self.port}"
        for controller in self.controllers:
            self._tasks.append(asyncio.create_task(controller.run(), name=controller.name))
        self._bootstrap()

    async def stop(self) -> None:
        self.api.watches.drop_all()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.kubelet.shutdown()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- admin and fault hooks for in-process tests (the same as the /_kubesim/ HTTP paths) ---

    def fail_node(self, name: str) -> None:
        """Stop the node's heartbeats, mark it NotReady/unreachable and fail its pods."""
        self.nodes.fail(name)

    def recover_node(self, name: str) -> None:
        self.nodes.recover(name)

    def cordon_node(self, name: str, *, unschedulable: bool = True) -> None:
        self.nodes.cordon(name, unschedulable=unschedulable)

    def drop_watches(self) -> int:
        """End every open watch stream; returns how many there were."""
        return self.api.watches.drop_all()

    def compact(self) -> None:
        """Forget watch history: watches and continue tokens from before now get 410."""
        self.store.compact()

    def fail_next_requests(self, count: int, code: int) -> None:
        """Answer the next `count` API requests with 429, 500 or 504."""
        self.faults.fail_next(count, code)

    def get(self, plural: str, namespace: str, name: str) -> JsonObject | None:
        """Convenience read for tests and the admin API."""
        resource = self.types.core(plural)
        return self.store.get(resource, namespace if resource.namespaced else "", name)


def _bound_port(site: web.TCPSite) -> int:
    server = site._server
    assert server is not None
    sockets = getattr(server, "sockets", None) or []
    return int(sockets[0].getsockname()[1])


class Simulator:
    """Several clusters in one process, each on its own port, with kubeconfigs on disk."""

    def __init__(self, configs: list[ClusterConfig], kubeconfig_dir: Path) -> None:
        self.clusters = [Cluster(config) for config in configs]
        self.kubeconfig_dir = kubeconfig_dir
        self.kubeconfigs: dict[str, Path] = {}
        self.merged_kubeconfig = kubeconfig_dir / "kubeconfig"

    async def start(self) -> None:
        self.kubeconfig_dir.mkdir(parents=True, exist_ok=True)
        try:
            for cluster in self.clusters:
                await cluster.start()
                path = self.kubeconfig_dir / f"{cluster.config.name}.kubeconfig"
                write_kubeconfig(path, cluster.config.name, cluster.url)
                self.kubeconfigs[cluster.config.name] = path
            write_merged_kubeconfig(
                self.merged_kubeconfig, [(c.config.name, c.url) for c in self.clusters]
            )
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        await asyncio.gather(*(cluster.stop() for cluster in self.clusters))

    def cluster(self, name: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.config.name == name:
                return cluster
        raise KeyError(name)
