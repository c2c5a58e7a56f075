"""Pods see their volumes: the service-account token, Secrets, ConfigMaps, claims, /etc/hosts.

The process runtime runs each container in its own mount namespace with its volumes bound at
their mountPaths, so the unmodified in-cluster loader of kubernetes_asyncio works inside a
kubesim pod and gets exactly its service account's rights; `kubectl apply -k` of a small
kustomization (Deployment, ServiceAccount, ClusterRole and binding, Secret, ConfigMap,
Service, PersistentVolumeClaim) brings up a pod that reads all of them.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from kubesim.apiserver.admission import SERVICE_ACCOUNT_MOUNT
from kubesim.cluster import Cluster
from kubesim.kubelet.volumes import Mount, contained_command, mount_namespaces_available
from tests.kubesim.conftest import Kubectl, eventually

pytestmark = pytest.mark.skipif(
    not mount_namespaces_available(), reason="needs root and unshare (mount namespaces)"
)

LISTER = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: team}}
spec:
  serviceAccountName: {account}
  restartPolicy: Never
  containers:
  - name: main
    image: python:3.11
    command: [{python}, -c]
    args:
    - |
      import asyncio
      from kubernetes_asyncio import client, config
      from kubernetes_asyncio.client.exceptions import ApiException

      async def main():
          config.load_incluster_config()
          async with client.ApiClient() as api:
              try:
                  pods = await client.CoreV1Api(api).list_namespaced_pod("team")
                  print("listed", sorted(p.metadata.name for p in pods.items))
              except ApiException as error:
                  print("refused", error.status)

      asyncio.run(main())
"""

SETUP = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: lister, namespace: team}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-lister, namespace: team}
rules:
- {apiGroups: [""], resources: [pods], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lister-lists, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-lister}
subjects:
- {kind: ServiceAccount, name: lister, namespace: team}
"""


async def _finished(cluster: Cluster, namespace: str, name: str) -> str:
    async def phase() -> str:
        pod = cluster.get("pods", namespace, name) or {}
        value = str(pod.get("status", {}).get("phase", ""))
        return value if value in ("Succeeded", "Failed") else ""

    result: str = await eventually(phase, within=30)
    return result


async def test_the_in_cluster_loader_lists_pods_with_its_service_accounts_rights(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    await process_kubectl("create", "namespace", "team")
    await process_kubectl("apply", "-f", "-", stdin=SETUP)
    for name, account in (("allowed", "lister"), ("denied", "nobody")):
        pod = LISTER.format(name=name, account=account, python=sys.executable)
        await process_kubectl("apply", "-f", "-", stdin=pod)
    for name, expected in (("allowed", "listed ['allowed', 'denied']"), ("denied", "refused 403")):
        assert await _finished(process_cluster, "team", name) == "Succeeded"
        logs = (await process_kubectl("logs", name, "-n", "team")).stdout
        assert logs.strip() == expected


async def test_the_token_volume_holds_token_ca_and_namespace_and_nothing_leaks_to_the_host(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    script = f"cat {SERVICE_ACCOUNT_MOUNT}/namespace; echo; ls {SERVICE_ACCOUNT_MOUNT}"
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: peek}\nspec:\n  restartPolicy: Never\n"
        f"  containers:\n  - {{name: main, image: busybox, command: [sh, -c, '{script}']}}\n"
    )
    await process_kubectl("apply", "-f", "-", stdin=pod)
    assert await _finished(process_cluster, "default", "peek") == "Succeeded"
    logs = (await process_kubectl("logs", "peek")).stdout.split()
    assert logs == ["default", "ca.crt", "namespace", "token"]
    assert not (Path(SERVICE_ACCOUNT_MOUNT) / "token").exists()
    spec = (await process_kubectl("get", "pod", "peek", "-o", "json")).json()["spec"]
    volume = next(v for v in spec["volumes"] if v["name"].startswith("kube-api-access-"))
    assert [next(iter(s)) for s in volume["projected"]["sources"]] == [
        "serviceAccountToken",
        "configMap",
        "downwardAPI",
    ]


KUSTOMIZATION = """
namespace: app
resources: [namespace.yaml, rbac.yaml, config.yaml, claim.yaml, deployment.yaml, service.yaml]
"""

RESOURCES = {
    "namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n",
    "rbac.yaml": """
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: app-node-reader}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: app-node-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: app-node-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: app}
""",
    "config.yaml": """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello, app.ini: "[main]\\nlevel = 3\\n"}
---
apiVersion: v1
kind: Secret
metadata: {name: credentials}
stringData: {password: s3cret}
""",
    "claim.yaml": """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
""",
    "deployment.yaml": """
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      serviceAccountName: reader
      containers:
      - name: main
        image: example/app:1
        command: [sh, -c]
        args:
        - |
          echo "greeting=$GREETING password=$(cat /etc/app/secret/password) level=$(grep level /etc/app/config/app.ini)"
          echo "runs-before=$(cat /data/runs 2>/dev/null || echo 0)"
          echo run >> /data/runs.log; wc -l < /data/runs.log > /data/runs
          echo "can-write-config=$(touch /etc/app/config/x 2>/dev/null && echo yes || echo no)"
          exec sleep 300
        env:
        - name: GREETING
          valueFrom: {configMapKeyRef: {name: settings, key: greeting}}
        envFrom:
        - secretRef: {name: credentials}
          prefix: SECRET_
        volumeMounts:
        - {name: config, mountPath: /etc/app/config, readOnly: true}
        - {name: secret, mountPath: /etc/app/secret, readOnly: true}
        - {name: data, mountPath: /data}
      volumes:
      - name: config
        configMap: {name: settings}
      - name: secret
        secret: {secretName: credentials}
      - name: data
        persistentVolumeClaim: {claimName: data}
""",
    "service.yaml": """
apiVersion: v1
kind: Service
metadata: {name: app}
spec:
  selector: {app: app}
  ports: [{port: 80, targetPort: 8080}]
""",
}


async def test_apply_k_of_a_kustomization_brings_up_a_pod_that_sees_every_volume(
    process_kubectl: Kubectl, process_cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION)
    for name, text in RESOURCES.items():
        (tmp_path / name).write_text(text)
    await process_kubectl("apply", "-k", str(tmp_path))
    await process_kubectl("rollout", "status", "deploy/app", "-n", "app", "--timeout=30s")
    claim = (await process_kubectl("get", "pvc", "data", "-n", "app", "--no-headers")).stdout
    assert claim.split()[:4] == ["data", "Bound", claim.split()[2], "1Gi"]

    async def logged(want: str) -> str:
        logs = (await process_kubectl("logs", "deploy/app", "-n", "app", check=False)).stdout
        return logs if want in logs else ""

    logs = await eventually(lambda: logged("can-write-config"), within=20)
    assert "greeting=hello password=s3cret level=level = 3" in logs
    assert "runs-before=0" in logs
    assert "can-write-config=no" in logs
    await process_kubectl("rollout", "restart", "deploy/app", "-n", "app")
    await process_kubectl("rollout", "status", "deploy/app", "-n", "app", "--timeout=60s")
    assert "runs-before=1" in await eventually(lambda: logged("runs-before=1"), within=40)
    can_i = await process_kubectl(
        "auth", "can-i", "list", "nodes", "--as", "system:serviceaccount:app:reader"
    )
    assert can_i.stdout.strip() == "yes"
    await process_kubectl("delete", "-k", str(tmp_path), "--timeout=60s", within=90)
    assert process_cluster.get("namespaces", "", "app") is None


def test_the_mount_script_leaves_out_the_steps_the_host_already_satisfies(tmp_path: Path) -> None:
    volume, hosts = tmp_path / "volume", tmp_path / "hosts"
    volume.mkdir()
    hosts.write_text("127.0.0.1 localhost\n")
    there, new = tmp_path / "there", tmp_path / "new"
    there.mkdir()
    mounts = [
        Mount(volume, str(there), read_only=True),  # the host has the mount point
        Mount(volume, str(new), read_only=False),  # it does not
        Mount(volume, f"{there}/inner", read_only=False),  # under a mount made just before
    ]
    argv = contained_command(["true"], mounts, hosts, working_dir=str(new))
    # unshare by its path, found once: not looked for along PATH at every container start
    assert argv[0] == shutil.which("unshare") and os.path.isabs(argv[0])
    assert argv[1:7] == ["--mount", "--propagation", "private", "--", "/bin/sh", "-c"]
    assert argv[8:] == ["kubesim-mount", "true"]
    assert argv[7].split(" && ") == [
        f"mount -o bind,ro {volume} {there}",
        f"mkdir -p {new}",
        f"mount -o bind {volume} {new}",
        f"mkdir -p {there}/inner",  # made inside the volume, whatever the host has there
        f"mount -o bind {volume} {there}/inner",
        f"mount -o bind,ro {hosts} /etc/hosts",
        f"mkdir -p {new}",
        f"cd {new}",
        'exec "$@"',
    ]


def test_mounts_that_allow_it_are_one_mount_of_an_fstab(tmp_path: Path) -> None:
    volume, hosts, fstab = tmp_path / "volume", tmp_path / "hosts", tmp_path / "fstab-main"
    volume.mkdir()
    hosts.write_text("127.0.0.1 localhost\n")
    mounts = [
        Mount(volume, "/data/my files", read_only=False),
        Mount(volume, "/data/my files/inner", read_only=True),  # made inside the first
    ]
    argv = contained_command(["true"], mounts, hosts, working_dir="/data/my files", fstab=fstab)
    assert argv[7] == f"mount -a -T {fstab} && mkdir -p '/data/my files' && cd '/data/my files'" \
        ' && exec "$@"'  # fmt: skip
    assert fstab.read_text().splitlines() == [
        f"{volume} /data/my\\040files none bind,X-mount.mkdir 0 0",
        f"{volume} /data/my\\040files/inner none bind,ro,X-mount.mkdir 0 0",
        f"{hosts} /etc/hosts none bind,ro 0 0",
    ]


def test_a_file_mounted_where_none_exists_takes_the_step_by_step_script(tmp_path: Path) -> None:
    volume, config, fstab = tmp_path / "volume", tmp_path / "app.ini", tmp_path / "fstab-main"
    volume.mkdir()
    config.write_text("level = 3\n")
    mounts = [
        Mount(volume, str(tmp_path / "etc"), read_only=False),
        Mount(config, str(tmp_path / "etc" / "app.ini"), read_only=True),  # subPath-like
    ]
    argv = contained_command(["true"], mounts, None, fstab=fstab)
    assert argv[7].split(" && ")[-3:] == [
        f"{{ [ -e {tmp_path}/etc/app.ini ] || : > {tmp_path}/etc/app.ini; }}",
        f"mount -o bind,ro {config} {tmp_path}/etc/app.ini",
        'exec "$@"',
    ]
    assert not fstab.exists()
