"""Services: ClusterIPs, Endpoints and EndpointSlices, and a Service that pods really reach.

Process-runtime pods are local processes: a client pod reaches a server pod through the
Service's variables (`<NAME>_SERVICE_HOST/_PORT`, a loopback address with a proxy behind it)
and through its DNS names, which the runtime writes into the container's /etc/hosts.
"""

from __future__ import annotations

import ipaddress

from kubesim.cluster import Cluster
from tests.kubesim.conftest import Kubectl, eventually

SERVER = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: main
        image: python:3.11
        command: [python3, -m, http.server, "{port}", --bind, 127.0.0.1]
        ports: [{{name: http, containerPort: {port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: http}}]
"""

CLIENT = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python:3.11
    command: [python3, -c]
    args:
    - |
      import os, urllib.request
      host, port = os.environ.get("WEB_SERVICE_HOST"), os.environ.get("WEB_SERVICE_PORT")
      print("host", host, "port", port)
      for url in ([f"http://{{host}}:{{port}}/"] if host else []) + {names}:
          print(url, urllib.request.urlopen(url, timeout=5).status)
"""


async def test_services_get_distinct_cluster_ips_and_the_api_has_its_own(
    kubectl: Kubectl,
) -> None:
    for name in ("a", "b"):
        manifest = (
            await kubectl("create", "service", "clusterip", name, "--tcp=80:8080",
                          "--dry-run=client", "-o", "yaml")
        ).stdout  # fmt: skip
        await kubectl("apply", "-f", "-", stdin=manifest)
    listed = (await kubectl("get", "svc", "-o", "json")).json()["items"]
    ips = {svc["metadata"]["name"]: svc["spec"]["clusterIP"] for svc in listed}
    assert ips["kubernetes"] == "10.96.0.1"
    assert len(set(ips.values())) == 3
    assert all(
        ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12") for ip in ips.values()
    )


async def test_endpoints_and_slices_follow_the_ready_pods_a_service_selects(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl(
        "apply", "-f", "-", stdin=SERVER.format(port=8080).replace("replicas: 1", "replicas: 2")
    )
    await kubectl("rollout", "status", "deploy/web", "--timeout=30s")

    async def two_endpoints() -> str:
        shown = (await kubectl("describe", "svc", "web")).stdout
        line = next(line for line in shown.splitlines() if line.startswith("Endpoints:"))
        return line if line.count(":8080") == 2 else ""

    assert await eventually(two_endpoints)
    slices = (
        await kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "json")
    ).json()["items"]
    assert len(slices) == 1 and len(slices[0]["endpoints"]) == 2
    assert slices[0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    await kubectl("scale", "deploy/web", "--replicas=0")

    async def none_left() -> bool:
        endpoints = (await kubectl("get", "endpoints", "web", "-o", "json")).json()
        return "subsets" not in endpoints

    await eventually(none_left)


async def test_a_pod_reaches_a_service_by_its_variables_and_its_dns_names(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    await process_kubectl("apply", "-f", "-", stdin=SERVER.format(port=18931))
    await process_kubectl("rollout", "status", "deploy/web", "--timeout=30s")
    names = ["http://web/", "http://web.default.svc.cluster.local/"]
    client = CLIENT.format(name="client", names=repr(names))
    await process_kubectl("apply", "-f", "-", stdin=client)

    async def finished() -> str:
        pod = process_cluster.get("pods", "default", "client")
        phase = (pod or {}).get("status", {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return str(phase)
        return ""

    phase = await eventually(finished, within=20)
    logs = (await process_kubectl("logs", "client")).stdout
    assert phase == "Succeeded", logs
    address = process_cluster.services.address("default", "web")
    assert f"host {address} port 80" in logs
    assert f"http://{address}:80/ 200" in logs
    assert "http://web/ 200" in logs
    assert "http://web.default.svc.cluster.local/ 200" in logs


async def test_a_pod_started_before_a_service_has_no_variables_for_it(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    early = CLIENT.format(name="early", names="[]")
    await process_kubectl("apply", "-f", "-", stdin=early)

    async def done() -> bool:
        pod = process_cluster.get("pods", "default", "early")
        return bool((pod or {}).get("status", {}).get("phase") == "Succeeded")

    await eventually(done, within=20)
    await process_kubectl("apply", "-f", "-", stdin=SERVER.format(port=18932))
    logs = (await process_kubectl("logs", "early")).stdout
    assert "host None port None" in logs
    assert "WEB_SERVICE_HOST" in process_cluster.services.environment("default")


async def test_a_service_has_its_address_as_soon_as_it_is_stored(cluster: Cluster) -> None:
    services = cluster.types.core("services")
    cluster.registry.create(
        services,
        {"metadata": {"name": "api"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 81}]}},
        namespace="default",
    )
    env = cluster.services.environment("default")  # no await: a pod applied with it sees it
    address = cluster.services.address("default", "api")
    assert address is not None and address.startswith("127.")
    assert (env["API_SERVICE_HOST"], env["API_SERVICE_PORT"]) == (address, "81")
    assert env["API_PORT_81_TCP"] == f"tcp://{address}:81"
    assert "KUBERNETES_SERVICE_HOST" not in env  # the kubelet sets the API's itself
    assert f"{address}\tapi.default.svc.cluster.local api.default.svc api.default api\n" in (
        cluster.services.hosts_file("default", "me")
    )
    cluster.registry.delete(services, "default", "api")
    assert cluster.services.address("default", "api") is None
