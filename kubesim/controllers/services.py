"""Services: Endpoints, a reachable address for each Service, and the env vars pods see.

A Service's ClusterIP (allocated from 10.96.0.0/12 at create, `kubesim.apiserver.defaults`)
is what kubectl shows, but nothing on this machine routes it, and kubesim may not touch the
host's network. So each Service with a ClusterIP also gets a *loopback address* of its own,
127.N.x.y (all of 127/8 is loopback on Linux; N is picked by process id), given as soon as
the Service is stored, on which a small asyncio TCP proxy listens on every TCP service port
and forwards each connection to a ready endpoint. Pods are local
processes sharing the host's network, so an endpoint is 127.0.0.1:<targetPort> (a named
targetPort is looked up in the pod's container ports). Pods reach a Service through:

* the variables the kubelet sets for the Services of the pod's namespace that exist when the
  container starts (`enableServiceLinks`, on by default): `<NAME>_SERVICE_HOST` (the loopback
  address, where a real kubelet puts the ClusterIP), `<NAME>_SERVICE_PORT`,
  `<NAME>_SERVICE_PORT_<PORTNAME>` and the Docker-link `<NAME>_PORT*` set;
* the names `<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`, `<svc>.<ns>` (and `<svc>` in the
  pod's own namespace), which the process runtime writes into the /etc/hosts it mounts for
  the container (`hosts_file`).

The `kubernetes` Service in `default` (10.96.0.1:443) stands for the API; pods reach the API
over KUBERNETES_SERVICE_HOST/PORT, which point at the cluster's HTTPS port, not a proxy.
`EndpointsController` keeps a core/v1 Endpoints object (ready pods under addresses, others
under notReadyAddresses) and a discovery.k8s.io/v1 EndpointSlice (`<svc>-<hash>`, labelled
`kubernetes.io/service-name`, which `kubectl describe svc` lists) per selector Service.
Started by `kubesim.cluster`; asked by `kubesim.kubelet.process` for env and hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.selectors import selector_from_object
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.errors import KubeSimError
from kubesim.objects import JsonObject

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = [
    "KUBERNETES_SERVICE_IP",
    "EndpointsController",
    "ServiceProxies",
    "service_env",
]

KUBERNETES_SERVICE_IP = "10.96.0.1"
# One process-wide sequence (clusters of a process share the host's 127/8), in a /16 chosen
# by the process id so that several kubesim processes on one host rarely meet.
_LOOPBACK = itertools.count(1)
_LOOPBACK_NET = 64 + os.getpid() % 128
_log = logging.getLogger(__name__)
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
Key = tuple[str, str]


def _next_loopback() -> str:
    number = next(_LOOPBACK)
    return f"127.{_LOOPBACK_NET}.{number // 250 % 250}.{number % 250 + 1}"


def _proxied(service: JsonObject) -> bool:
    """A Service with a ClusterIP gets a proxy; headless ones and the API's do not."""
    meta = service["metadata"]
    cluster_ip = service.get("spec", {}).get("clusterIP")
    api = (meta.get("namespace"), meta.get("name")) == ("default", "kubernetes")
    return bool(cluster_ip) and cluster_ip != "None" and not api


def _is_ready(pod: JsonObject) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or ()
    )


def _selects(service: JsonObject, pod: JsonObject) -> bool:
    selector = service.get("spec", {}).get("selector")
    if not selector:
        return False
    return selector_from_object({"matchLabels": selector}).matches(
        pod["metadata"].get("labels") or {}
    )


def target_port(service_port: JsonObject, pod: JsonObject) -> int | None:
    """The pod port a service port forwards to (a number, or a container port's name)."""
    wanted = service_port.get("targetPort", service_port.get("port"))
    if isinstance(wanted, int):
        return wanted
    if isinstance(wanted, str) and wanted.isdigit():
        return int(wanted)
    for container in pod.get("spec", {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == wanted:
                return int(port["containerPort"])
    return None


def _env_name(service_name: str) -> str:
    return re.sub(r"[^A-Z0-9_]", "_", service_name.upper().replace("-", "_"))


def service_env(services: list[tuple[JsonObject, str]]) -> dict[str, str]:
    """The kubelet's service variables for (service, reachable host) pairs."""
    env: dict[str, str] = {}
    for service, host in services:
        ports = service.get("spec", {}).get("ports") or []
        if not ports:
            continue
        prefix = _env_name(service["metadata"]["name"])
        first = ports[0]
        env[f"{prefix}_SERVICE_HOST"] = host
        env[f"{prefix}_SERVICE_PORT"] = str(first["port"])
        for port in ports:
            if port.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_env_name(port['name'])}"] = str(port["port"])
        protocol = str(first.get("protocol", "TCP"))
        env[f"{prefix}_PORT"] = f"{protocol.lower()}://{host}:{first['port']}"
        for port in ports:
            proto = str(port.get("protocol", "TCP"))
            base = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
            env[base] = f"{proto.lower()}://{host}:{port['port']}"
            env[f"{base}_PROTO"] = proto.lower()
            env[f"{base}_PORT"] = str(port["port"])
            env[f"{base}_ADDR"] = host
    return env


@dataclass(eq=False)
class _Proxy:
    """The loopback address and listening sockets of one Service."""

    address: str
    servers: dict[int, asyncio.Server] = field(default_factory=dict)
    next_endpoint: int = 0


class ServiceProxies:
    """One loopback address per Service, a TCP proxy per port; the pods' view of Services."""

    name = "service-proxy"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.services = cluster.types.core("services")
        self.pods = cluster.types.core("pods")
        self._proxies: dict[Key, _Proxy] = {}
        self._changed: asyncio.Queue[Key] = asyncio.Queue()
        self._retired: list[_Proxy] = []
        self.store.subscribe(self.services, self._on_service)

    def _on_service(self, event: StoreEvent) -> None:
        """Give the Service its address at once (a pod applied together with it must see it
        in its variables and hosts file); the proxy starts listening just after."""
        meta = event.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if _proxied(event.obj) and event.type is not EventType.DELETED:
            if key not in self._proxies:
                self._proxies[key] = _Proxy(_next_loopback())
        elif key in self._proxies:
            self._retired.append(self._proxies.pop(key))
        self._changed.put_nowait(key)

    def address(self, namespace: str, name: str) -> str | None:
        proxy = self._proxies.get((namespace, name))
        return proxy.address if proxy else None

    def environment(self, namespace: str) -> dict[str, str]:
        """Service variables for a container starting now in `namespace`."""
        pairs = []
        for service in self.store.list(self.services, namespace):
            address = self.address(namespace, service["metadata"]["name"])
            if address is not None and not (
                namespace == "default" and service["metadata"]["name"] == "kubernetes"
            ):
                pairs.append((service, address))
        return service_env(pairs)

    def hosts_file(self, namespace: str, hostname: str) -> str:
        """/etc/hosts for a container of `namespace`: localhost, itself, every Service."""
        lines = [
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
            f"127.0.0.1\t{hostname}",
        ]
        for (service_namespace, name), proxy in sorted(self._proxies.items()):
            names = [
                f"{name}.{service_namespace}.svc.cluster.local",
                f"{name}.{service_namespace}.svc",
                f"{name}.{service_namespace}",
            ]
            if service_namespace == namespace:
                names.append(name)
            lines.append(f"{proxy.address}\t{' '.join(names)}")
        return "\n".join(lines) + "\n"

    async def run(self) -> None:
        try:
            while True:
                key = await self._changed.get()
                try:
                    await self._sync(key)
                except Exception:  # one bad Service must not stop every other's proxy
                    _log.exception("service proxy failed to sync %s/%s", *key)
        finally:
            for proxy in self._proxies.values():
                self._close(proxy)
            self._proxies.clear()

    @staticmethod
    def _close(proxy: _Proxy) -> None:
        for server in proxy.servers.values():
            server.close()
        proxy.servers.clear()

    async def _sync(self, key: Key) -> None:
        while self._retired:
            self._close(self._retired.pop())
        service = self.store.get(self.services, *key)
        proxy = self._proxies.get(key)
        if service is None or proxy is None:
            return
        wanted = {
            int(port["port"]): port
            for port in service.get("spec", {}).get("ports") or ()
            if port.get("protocol", "TCP") == "TCP"
        }
        for number in set(proxy.servers) - set(wanted):
            proxy.servers.pop(number).close()
        for number in set(wanted) - set(proxy.servers):
            handler = self._handler(key, number)
            try:
                proxy.servers[number] = await asyncio.start_server(
                    handler, proxy.address, number, reuse_address=True
                )
            except OSError as error:
                _log.warning("service %s/%s: cannot listen on %s:%s: %s", *key, proxy.address,
                             number, error)  # fmt: skip

    def _handler(
        self, key: Key, number: int
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            upstream = self._pick_endpoint(key, number)
            if upstream is None:
                writer.close()  # no ready endpoint: a refused connection, as kube-proxy's REJECT
                return
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
            except OSError:
                writer.close()
                return
            await asyncio.gather(
                _pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True
            )

        return forward

    def _pick_endpoint(self, key: Key, number: int) -> int | None:
        service = self.store.get(self.services, *key)
        proxy = self._proxies.get(key)
        if service is None or proxy is None:
            return None
        port = next(
            (p for p in service.get("spec", {}).get("ports") or () if p.get("port") == number),
            None,
        )
        if port is None:
            return None
        targets = [
            target
            for pod in self.store.list(self.pods, key[0])
            if _selects(service, pod)
            and _is_ready(pod)
            and (target := target_port(port, pod)) is not None
        ]
        if not targets:
            return None
        proxy.next_endpoint += 1
        return targets[proxy.next_endpoint % len(targets)]


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    finally:
        with contextlib.suppress(Exception):
            sink.close()


class EndpointsController(QueueController[Key]):
    """One core/v1 Endpoints per Service with a selector, from the pods it selects."""

    name = "endpoints-controller"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.services = cluster.types.core("services")
        self.pods = cluster.types.core("pods")
        self.endpoints = cluster.types.core("endpoints")
        self.slices = cluster.types.core("endpointslices")
        self._selecting: dict[str, set[str]] = {}  # namespace -> Services with a selector
        self.store.subscribe(self.services, self._on_service)
        self.store.subscribe(self.pods, self._on_pod)

    def _on_service(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        selecting = self._selecting.setdefault(meta["namespace"], set())
        if event.type is not EventType.DELETED and event.obj.get("spec", {}).get("selector"):
            selecting.add(meta["name"])
        else:
            selecting.discard(meta["name"])
        self.enqueue((meta["namespace"], meta["name"]))

    def _on_pod(self, event: StoreEvent) -> None:
        namespace = event.obj["metadata"]["namespace"]
        if not self._selecting.get(namespace):
            return  # most pods live where no Service selects anything: skip the lookup
        for service in self.store.list(self.services, namespace):
            if _selects(service, event.obj) or (
                event.old is not None and _selects(service, event.old)
            ):
                self.enqueue((namespace, service["metadata"]["name"]))

    @staticmethod
    def _slice_name(name: str) -> str:
        suffix = "".join(_SAFE[b % len(_SAFE)] for b in hashlib.sha256(name.encode()).digest()[:5])
        return f"{name}-{suffix}"

    def reconcile(self, key: Key) -> None:
        service = self.store.get(self.services, *key)
        current = self.store.get(self.endpoints, *key)
        if service is None or not service.get("spec", {}).get("selector"):
            if service is None:
                for resource, name in (
                    (self.endpoints, key[1]),
                    (self.slices, self._slice_name(key[1])),
                ):
                    with contextlib.suppress(KubeSimError):
                        self.registry.delete(resource, key[0], name)
            return
        ready: list[JsonObject] = []
        not_ready: list[JsonObject] = []
        pods = [
            pod
            for pod in self.store.list(self.pods, key[0])
            if _selects(service, pod)
            and pod.get("status", {}).get("podIP")
            and not pod["metadata"].get("deletionTimestamp")
        ]
        self._write_slice(service, pods)
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            address = {
                "ip": pod["status"]["podIP"],
                "nodeName": pod.get("spec", {}).get("nodeName"),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": key[0],
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            }
            (ready if _is_ready(pod) else not_ready).append(address)
        subsets: list[JsonObject] = []
        ports = service.get("spec", {}).get("ports") or []
        if ready or not_ready:
            subset: JsonObject = {
                "ports": [
                    {
                        **({"name": p["name"]} if p.get("name") else {}),
                        "port": (target_port(p, pods[0]) if pods else None) or p["port"],
                        "protocol": p.get("protocol", "TCP"),
                    }
                    for p in ports
                ]
            }
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            subsets.append(subset)
        body: JsonObject = {
            "metadata": {"name": key[1], "namespace": key[0], "labels": dict(
                service["metadata"].get("labels") or {})},
        }  # fmt: skip
        if subsets:
            body["subsets"] = subsets
        if current is None:
            self.registry.create(self.endpoints, body, namespace=key[0], validate=False)
            return
        if current.get("subsets") == body.get("subsets"):
            return

        def write(obj: JsonObject) -> None:
            if subsets:
                obj["subsets"] = subsets
            else:
                obj.pop("subsets", None)

        self.registry.mutate(self.endpoints, key[0], key[1], write, touches=())

    def _write_slice(self, service: JsonObject, pods: list[JsonObject]) -> None:
        namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
        slice_name = self._slice_name(name)
        ports = service.get("spec", {}).get("ports") or []
        endpoints = [
            {
                "addresses": [pod["status"]["podIP"]],
                "conditions": {"ready": _is_ready(pod), "serving": _is_ready(pod),
                               "terminating": False},
                "nodeName": pod.get("spec", {}).get("nodeName"),
                "targetRef": {"kind": "Pod", "namespace": namespace,
                              "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
            }
            for pod in sorted(pods, key=lambda p: p["metadata"]["name"])
        ]  # fmt: skip
        slice_ports = [
            {
                **({"name": p["name"]} if p.get("name") else {"name": ""}),
                "port": (target_port(p, pods[0]) if pods else None) or p["port"],
                "protocol": p.get("protocol", "TCP"),
            }
            for p in ports
        ]
        current = self.store.get(self.slices, namespace, slice_name)
        if current is None:
            body: JsonObject = {
                "metadata": {
                    "name": slice_name,
                    "labels": {
                        "kubernetes.io/service-name": name,
                        "endpointslice.kubernetes.io/managed-by": (
                            "endpointslice-controller.k8s.io"
                        ),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Service",
                            "name": name,
                            "uid": service["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": slice_ports,
            }
            self.registry.create(self.slices, body, namespace=namespace, validate=False)
            return
        if (current.get("endpoints"), current.get("ports")) == (endpoints, slice_ports):
            return

        def write(obj: JsonObject) -> None:
            obj["endpoints"] = endpoints
            obj["ports"] = slice_ports

        self.registry.mutate(self.slices, namespace, slice_name, write, touches=())
