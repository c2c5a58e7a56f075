"""The real kubectl 1.32 against kubesim: get, create, apply, label, patch, delete, wait."""

from __future__ import annotations

import asyncio

import yaml

from kubesim.cluster import Cluster
from tests.kubesim.conftest import Kubectl, eventually

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: nginx:1.27
"""

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: batch-1
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: [sh, -c, "true"]
"""

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  level: "{level}"
"""


def _header(output: str) -> list[str]:
    return output.splitlines()[0].split()


async def test_version_reports_a_1_32_server(kubectl: Kubectl) -> None:
    result = await kubectl("version", "-o", "json")
    assert result.json()["serverVersion"]["minor"] == "32"


async def test_api_resources_lists_the_served_kinds_with_short_names(kubectl: Kubectl) -> None:
    result = await kubectl("api-resources")
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert {"pods", "jobs", "nodes", "leases", "customresourcedefinitions"} <= set(rows)
    assert " po " in rows["pods"]
    assert "batch/v1" in rows["jobs"]


async def test_get_nodes_shows_the_real_columns(kubectl: Kubectl) -> None:
    result = await kubectl("get", "nodes")
    assert _header(result.stdout) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert result.stdout.splitlines()[1].split()[1] == "Ready"


async def test_get_pods_plain_and_wide_show_the_real_columns(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=POD)
    plain = await kubectl("get", "pods")
    assert _header(plain.stdout) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    wide = await kubectl("get", "pods", "-o", "wide")
    assert wide.stdout.splitlines()[0].split() == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
        "READINESS", "GATES",
    ]  # fmt: skip


async def test_get_pod_as_yaml_returns_the_full_object(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=POD)
    result = await kubectl("get", "pod", "web", "-o", "yaml")
    pod = yaml.safe_load(result.stdout)
    assert pod["kind"] == "Pod"
    assert pod["metadata"]["labels"] == {"app": "web"}
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_get_watch_prints_new_objects_as_rows(kubectl: Kubectl) -> None:
    watcher = await kubectl.start("get", "configmaps", "-w")
    try:
        await asyncio.sleep(1.0)  # let kubectl list and start watching
        await kubectl("create", "-f", "-", stdin=CONFIGMAP.format(level=1))
        assert watcher.stdout is not None
        lines: list[bytes] = []
        while not any(line.startswith(b"settings") for line in lines):
            lines.append(await asyncio.wait_for(watcher.stdout.readline(), 20))
        assert lines[0].split() == [b"NAME", b"DATA", b"AGE"]
        assert lines[-1].split()[:2] == [b"settings", b"1"]
    finally:
        watcher.kill()
        await watcher.wait()


async def test_apply_twice_creates_then_patches(kubectl: Kubectl, cluster: Cluster) -> None:
    first = await kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(level=1))
    assert "configmap/settings created" in first.stdout
    second = await kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(level=2))
    assert "configmap/settings configured" in second.stdout
    stored = cluster.get("configmaps", "default", "settings")
    assert stored is not None
    assert stored["data"] == {"level": "2"}
    annotations = stored["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in annotations


async def test_label_and_patch_merge_and_json(kubectl: Kubectl, cluster: Cluster) -> None:
    await kubectl("create", "-f", "-", stdin=CONFIGMAP.format(level=1))
    await kubectl("label", "configmap", "settings", "tier=batch")
    await kubectl("patch", "configmap", "settings", "--type=merge", "-p", '{"data":{"a":"1"}}')
    await kubectl(
        "patch",
        "configmap",
        "settings",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/data/level","value":"9"}]',
    )
    stored = cluster.get("configmaps", "default", "settings")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"tier": "batch"}
    assert stored["data"] == {"level": "9", "a": "1"}


async def test_strategic_patch_merges_containers_by_name(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("create", "-f", "-", stdin=POD)
    await kubectl(
        "patch",
        "pod",
        "web",
        "-p",
        '{"spec":{"containers":[{"name":"main","image":"nginx:1.28"}]}}',
    )
    stored = cluster.get("pods", "default", "web")
    assert stored is not None
    assert [c["image"] for c in stored["spec"]["containers"]] == ["nginx:1.28"]


async def test_delete_waits_until_the_pod_is_gone(kubectl: Kubectl, cluster: Cluster) -> None:
    await kubectl("create", "-f", "-", stdin=POD)
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "web") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    result = await kubectl("delete", "pod", "web")
    assert 'pod "web" deleted' in result.stdout
    assert cluster.get("pods", "default", "web") is None


async def test_wait_for_job_completion(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=JOB)
    result = await kubectl("wait", "--for=condition=complete", "job/batch-1", "--timeout=30s")
    assert "condition met" in result.stdout
    jobs = await kubectl("get", "jobs")
    assert _header(jobs.stdout) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs.stdout.splitlines()[1].split()[1:3] == ["Complete", "2/2"]


async def test_errors_render_as_kubectl_error_from_server(kubectl: Kubectl) -> None:
    result = await kubectl("get", "pod", "missing", check=False)
    assert result.returncode == 1
    assert 'Error from server (NotFound): pods "missing" not found' in result.stderr


async def test_create_with_an_unknown_field_is_rejected_by_server_validation(
    kubectl: Kubectl,
) -> None:
    bad = POD.replace("image: nginx:1.27", "image: nginx:1.27\n    imagee: typo")
    result = await kubectl("create", "-f", "-", stdin=bad, check=False)
    assert result.returncode == 1
    assert 'unknown field "spec.containers[0].imagee"' in result.stderr


async def test_typed_client_generators_get_the_protobuf_415_kubectl_prints(
    kubectl: Kubectl,
) -> None:
    result = await kubectl("create", "job", "x", "--image=busybox", "--", "true", check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: failed to create job: the body of the request was in an unknown format - "
        "accepted media types include: application/json, application/yaml"
    )
    piped = await kubectl("create", "job", "x", "--image=busybox", "--dry-run=client", "-o", "yaml")
    created = await kubectl("create", "-f", "-", stdin=piped.stdout)
    assert "job.batch/x created" in created.stdout


async def test_get_events_and_describe_show_the_job_history(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin=JOB)
    await kubectl("wait", "--for=condition=complete", "job/batch-1", "--timeout=30s")
    events = await kubectl("get", "events")
    assert _header(events.stdout) == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "SuccessfulCreate" in events.stdout
    described = await kubectl("describe", "job", "batch-1")
    assert "Pods Statuses:    0 Active (0 Ready) / 2 Succeeded / 0 Failed" in described.stdout
    assert "Completed" in described.stdout


async def test_wait_for_delete_returns_once_the_object_is_gone(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("create", "-f", "-", stdin=CONFIGMAP.format(level=1))
    waiter = asyncio.create_task(
        kubectl("wait", "--for=delete", "configmap/settings", "--timeout=30s")
    )
    await asyncio.sleep(1.0)
    cluster.registry.delete(cluster.types.core("configmaps"), "default", "settings")
    result = await waiter
    assert "condition met" in result.stdout or "deleted" in result.stdout


async def test_drain_evicts_pods_and_cordons_the_node(kubectl: Kubectl, cluster: Cluster) -> None:
    await kubectl("create", "-f", "-", stdin=POD.replace("spec:", "spec:\n  nodeName: node-1"))
    await eventually(
        lambda: (
            (cluster.get("pods", "default", "web") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )
    result = await kubectl("drain", "node-1", "--force", "--timeout=30s")
    assert "node/node-1 drained" in result.stdout
    assert cluster.get("pods", "default", "web") is None
    node = cluster.get("nodes", "", "node-1")
    assert node is not None and node["spec"]["unschedulable"] is True
