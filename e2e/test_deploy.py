"""MultiQ deployed the way a platform team deploys it, onto three kubesim clusters with the
process runtime: `kubectl apply -k` brings the hub up as a pod (Deployment → ReplicaSet → pod →
process, over TLS, its SQLite on a PersistentVolumeClaim), `qctl cluster join` installs an
agent as a pod in each member cluster, running with only its ClusterRole (its in-cluster
service-account token against kubesim's RBAC), the demo's jobs run through them with their
logs streaming, and `qctl cluster leave` and `kubectl delete -k` leave no process behind.
Least privilege: with one rule taken from the agent's ClusterRole the agent says which
permission it lacks (kubesim's 403), and recovers when the rule is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.tokens import hash_token
from e2e.conftest import QCTL, ROOT
from qctl.commands.dev import free_port

BIN = str(Path(sys.executable).parent)
HUB = "kubesim-0"
MEMBERS = ("kubesim-1", "kubesim-2")
ADMIN_TOKEN = "deploy-e2e-admin-token-0123456789"


def eventually(check: Callable[[], Any], *, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within:g}s")
        time.sleep(0.5)


@dataclass
class Deployment:
    """Three kubesim clusters in one process, and what the test installed on them."""

    dir: Path
    kubeconfig: Path
    hub_port: int
    ca: Path
    env: dict[str, str]
    hub_ready_seconds: float = 0.0
    """From `kubectl apply -k` to the hub's rollout being complete."""

    def kubectl(self, context: str, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "--context", context, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def qctl(self, *args: str, check: bool = True, timeout: float = 180) -> str:
        done = subprocess.run(
            [QCTL, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
            cwd=ROOT,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"qctl {' '.join(args)}: {done.stdout}\n{done.stderr}")
        return done.stdout + done.stderr

    @property
    def hub_url(self) -> str:
        return f"https://127.0.0.1:{self.hub_port}"


def make_tls(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for the hub at 127.0.0.1 signed by it (openssl)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.crt",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=multiq-hub",
        "-keyout", "hub.key", "-out", "hub.csr",
    )  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509", "-req", "-in", "hub.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "hub.crt",
    )  # fmt: skip
    return directory / "ca.crt", directory / "hub.crt", directory / "hub.key"


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    sim = subprocess.Popen(
        [f"{BIN}/kubesim", "up", "--clusters", "3", "--nodes", "2", "--runtime", "process",
         "--dir", str(tmp_path / "kubesim")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        text = ""
        while True:
            line = sim.stdout.readline()
            assert line, "kubesim up ended before it was up"
            text += line
            if line.startswith("}"):
                break
        summary = json.loads(text)
        ca, cert, key = make_tls(tmp_path)
        port = free_port()
        deployed = Deployment(
            dir=tmp_path,
            kubeconfig=Path(summary["kubeconfig"]),
            hub_port=port,
            ca=ca,
            env={
                **env,
                "MULTIQ_SERVER": f"https://127.0.0.1:{port}",
                "MULTIQ_TOKEN": ADMIN_TOKEN,
                "MULTIQ_CERTIFICATE_AUTHORITY": str(ca),
                "MULTIQ_CONFIG": str(tmp_path / "qctl-config.yaml"),
                "KUBECONFIG": summary["kubeconfig"],
            },
        )
        install_hub(deployed, cert, key)
        yield deployed
    finally:
        sim.terminate()
        try:
            sim.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sim.kill()
        if sim.stdout is not None:
            sim.stdout.close()  # (left to the collector, it is a ResourceWarning in a later test)


def hub_overlay(deployed: Deployment) -> Path:
    """manifests/overlays/kubesim, on a port of the test's own (the pods of every kubesim
    cluster share this machine's network)."""
    overlay = deployed.dir / "overlay"
    overlay.mkdir()
    port = str(deployed.hub_port)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # (kustomize takes only relative paths to other kustomizations)
        "resources": [os.path.relpath(ROOT / "manifests" / "overlays" / "kubesim", overlay)],
        "patches": [
            {
                "target": {"kind": "ConfigMap", "name": "multiq-hub-settings"},
                "patch": yaml.safe_dump(
                    [{"op": "replace", "path": "/data/MULTIQ_HUB_PORT", "value": port}]
                ),
            },
            {
                "target": {"kind": "Deployment", "name": "multiq-hub"},
                "patch": yaml.safe_dump(
                    [
                        {
                            "op": "replace",
                            "path": "/spec/template/spec/containers/0/ports/0/containerPort",
                            "value": deployed.hub_port,
                        }
                    ]
                ),
            },
        ],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return overlay


def install_hub(deployed: Deployment, cert: Path, key: Path) -> None:
    users = {
        "users": [
            {"name": "admin", "groups": ["multiq:admins"], "tokenHash": hash_token(ADMIN_TOKEN)}
        ]
    }
    (deployed.dir / "users.yaml").write_text(yaml.safe_dump(users))
    k = deployed.kubectl
    k(HUB, "apply", "-f", str(ROOT / "manifests" / "hub" / "namespace.yaml"))
    k(HUB, "-n", "multiq-system", "create", "secret", "generic", "multiq-hub-users",
      f"--from-file=users.yaml={deployed.dir / 'users.yaml'}")  # fmt: skip
    k(HUB, "-n", "multiq-system", "create", "secret", "tls", "multiq-hub-tls",
      f"--cert={cert}", f"--key={key}")  # fmt: skip
    started = time.monotonic()
    k(HUB, "apply", "-k", str(hub_overlay(deployed)))
    k(HUB, "-n", "multiq-system", "rollout", "status", "deploy/multiq-hub", "--timeout=120s")
    deployed.hub_ready_seconds = time.monotonic() - started


def fleet(deployed: Deployment) -> None:
    objects = list(yaml.safe_load_all((ROOT / "examples" / "kind" / "fleet.yaml").read_text()))
    for obj in objects:
        if obj["kind"] == "ClusterSet":
            obj["spec"]["clusters"] = list(MEMBERS)
        if obj["kind"] == "ClusterQueue":
            # What two of kubesim's default nodes hold (8 CPU, 32Gi each): the demo's jobs.
            (flavor,) = obj["spec"]["resourceGroups"][0]["flavors"]
            flavor["resources"] = [
                {"name": "cpu", "nominalQuota": "16"},
                {"name": "memory", "nominalQuota": "64Gi"},
            ]
    only_first = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "ClusterSet",
        "metadata": {"name": "only-first"},
        "spec": {"clusters": [MEMBERS[0]]},
    }
    objects.append(only_first)
    path = deployed.dir / "fleet.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    deployed.qctl("apply", "-f", str(path))


def processes_of(directory: Path) -> list[str]:
    """Command lines of the hub and agent processes kubesim started for this test."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if ("multiq-hub" in line or "multiq-agent" in line) and str(directory).encode() in environ:
            found.append(line)
    return found


def test_the_hub_and_agents_run_as_pods_with_only_their_rights_and_run_the_demo(
    deployment: Deployment,
) -> None:
    d = deployment
    # The hub runs as a pod of its Deployment, from its ReplicaSet.
    pods = json.loads(d.kubectl(HUB, "-n", "multiq-system", "get", "pods", "-o", "json"))
    (hub_pod,) = pods["items"]
    assert hub_pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert hub_pod["status"]["phase"] == "Running"
    assert "multiq-hub" in d.kubectl(HUB, "-n", "multiq-system", "logs", "deploy/multiq-hub")

    fleet(d)
    join_started = time.monotonic()
    for member in MEMBERS:
        out = d.qctl(
            "cluster", "join", member, "--kubeconfig", str(d.kubeconfig), "--context", member,
            "--hub-url", d.hub_url, "--metrics-port", str(free_port()),
        )  # fmt: skip
        assert f"cluster {member} joined: connected" in out, out
    join_seconds = time.monotonic() - join_started
    for member in MEMBERS:
        agent_pod = json.loads(
            d.kubectl(member, "-n", "multiq-system", "get", "pods", "-o", "json")
        )["items"][0]
        assert agent_pod["spec"]["serviceAccountName"] == "multiq-agent"
        # It runs with its service account's rights only: the ClusterRole allows Jobs, not
        # Secrets.
        sa = "system:serviceaccount:multiq-system:multiq-agent"
        assert d.kubectl(member, "auth", "can-i", "create", "jobs.batch", "--as", sa).strip() == (
            "yes"
        )
        denied = subprocess.run(
            ["kubectl", "--kubeconfig", str(d.kubeconfig), "--context", member, "auth", "can-i",
             "list", "secrets", "--as", sa],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert denied.stdout.strip() == "no"
    # The hub keeps only the tokens' hashes.
    member_cluster = json.loads(d.qctl("get", "clusters", MEMBERS[0], "-o", "json"))
    assert member_cluster["spec"]["tokenHash"].startswith("scrypt$")

    try:
        out = d.qctl("submit", "-f", str(ROOT / "examples" / "demo"), "--follow", timeout=240)
    except subprocess.TimeoutExpired:
        diagnosis = [d.qctl("get", "workloads", "-o", "yaml", check=False)]
        for member in MEMBERS:
            diagnosis.append(
                d.kubectl(member, "-n", "multiq-system", "logs", "deploy/multiq-agent")[-5000:]
            )
        raise AssertionError("the demo did not finish:\n" + "\n".join(diagnosis)) from None
    assert "train" in out and "evaluate" in out
    workloads = json.loads(d.qctl("get", "workloads", "-o", "json"))["items"]
    assert {w["status"]["clusterName"] for w in workloads} <= set(MEMBERS)
    assert all(
        any(
            c["type"] == "Finished" and c["reason"] == "Succeeded"
            for c in w["status"]["conditions"]
        )
        for w in workloads
    ), workloads
    figures = {
        "apply_to_hub_ready_seconds": round(d.hub_ready_seconds, 2),
        "join_to_connected_seconds": round(join_seconds / len(MEMBERS), 2),
    }
    print(json.dumps(figures))

    # Least privilege: without its rule to create Jobs, the agent says what it may not do.
    role = yaml.safe_load(d.kubectl(MEMBERS[0], "get", "clusterrole", "multiq-agent", "-o", "yaml"))
    full_rules = json.loads(json.dumps(role["rules"]))
    for rule in role["rules"]:
        if "jobs" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "annotations"):
        role["metadata"].pop(key, None)
    d.kubectl(MEMBERS[0], "apply", "-f", "-", stdin=yaml.safe_dump(role))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "needs-a-rule", "namespace": "default",
                     "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["sh", "-c", "echo ran"],
             "resources": {"requests": {"cpu": "100m"}}}]}}},
    }  # fmt: skip
    (d.dir / "job.yaml").write_text(yaml.safe_dump(job))
    d.qctl("submit", "-f", str(d.dir / "job.yaml"), "--cluster-set", "only-first")
    # (the ClusterSet only-first holds the member whose role lost the rule)

    def refused() -> str | None:
        out = d.qctl("describe", "workload", "job-needs-a-rule", check=False)
        return out if "JobsForbidden" in out else None

    described = eventually(refused, within=60, what="the agent reports the missing permission")
    assert 'cannot create resource "jobs" in API group "batch"' in described
    role["rules"] = full_rules
    d.kubectl(MEMBERS[0], "apply", "-f", "-", stdin=yaml.safe_dump(role))

    def finished() -> bool:
        wl = json.loads(d.qctl("get", "workloads", "job-needs-a-rule", "-o", "json"))
        return any(c["type"] == "Finished" for c in wl["status"].get("conditions", []))

    eventually(finished, within=90, what="the workload runs once the rule is back")

    # Taking it all away leaves no process behind.
    for member in MEMBERS:
        d.qctl("cluster", "leave", member, "--kubeconfig", str(d.kubeconfig), "--context", member)
    d.kubectl(HUB, "delete", "-k", str(d.dir / "overlay"), "--wait=true", "--timeout=60s")
    eventually(lambda: processes_of(d.dir) == [], within=60, what="every process gone")
