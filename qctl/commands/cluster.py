"""`qctl cluster join` and `qctl cluster leave`: bring a Kubernetes cluster into the fleet, or
take it out, in one command each.

    qctl cluster join NAME --kubeconfig K [--context C] [--hub-url URL] [--image IMAGE]
    qctl cluster leave NAME --kubeconfig K [--context C]

join: mints the agent's token, registers the MemberCluster at the hub with only the token's
salted hash, applies the agent's objects (qctl.install: manifests/agent plus the Secret with
cluster, hub URL, token and the hub's CA) to the member cluster with kubectl, and waits until
that agent is connected. If a step fails, the MemberCluster it registered is taken back, so a
failed join can simply be run again.
leave: deletes the MemberCluster at the hub (the hub then stops sending it work, and gives its
work to other clusters once its lease is over) and removes the agent's objects from the cluster
(the namespace stays: the hub may live in it too).

The member cluster is reached with the real kubectl (qctl is also `kubectl qctl`): its own
messages for an unreachable cluster or missing rights are the clearest there are. Every failure
is one line. Called by: qctl.main (through qctl.cli).
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, TextIO

from api.tokens import hash_token
from qctl.commands.common import connect, parse_duration, write
from qctl.errors import HubRequestError, QctlError
from qctl.install import agent_objects, agent_secret
from qctl.kinds import resolve_kind
from qctl.rest import HubSession

__all__ = ["run_join", "run_leave"]


class ClusterCommandError(QctlError):
    """Joining or leaving failed; the message says where and why, in one line."""


def run_join(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind("MemberCluster")
    context = connect(args)
    hub = HubSession(context)
    name: str = args.name
    try:
        hub.get(kind, name, None)
    except HubRequestError as exc:
        if exc.status != 404:
            raise
    else:
        raise ClusterCommandError(
            f"name taken: {name} is already a member cluster (qctl cluster leave {name} first)"
        )
    kubectl = _Kubectl(args.kubeconfig, args.kube_context)
    kubectl.check_reachable()
    # The token is made here and goes only into the member cluster; the hub keeps its salted
    # hash (MemberCluster.spec.tokenHash), as its users file does for people.
    token = secrets.token_urlsafe(32)
    member = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name},
        "spec": {"tokenHash": hash_token(token)},
    }
    hub.create(kind, member)
    try:
        ca = _read_ca(args.hub_certificate_authority or context.certificate_authority)
        secret = agent_secret(name, args.hub_url or hub.server, token, certificate_authority=ca)
        kubectl.apply([*agent_objects(args.image, metrics_port=args.metrics_port), secret])
    except BaseException:
        _quietly(lambda: hub.delete(kind, name, None))
        raise
    write(out, f"membercluster/{name} created; agent installed in {kubectl.where}\n")
    if args.timeout == "0":
        return 0
    status = _wait_connected(hub, name, parse_duration(args.timeout))
    capacity = status.get("capacity") or {}
    write(
        out,
        f"cluster {name} joined: connected (agent {status.get('agentVersion') or '?'}, "
        f"Kubernetes {status.get('kubernetesVersion') or '?'}, "
        f"{capacity.get('readyNodes', 0)}/{capacity.get('nodes', 0)} nodes ready)\n",
    )
    return 0


def run_leave(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind("MemberCluster")
    hub = HubSession(connect(args))
    name: str = args.name
    kubectl = _Kubectl(args.kubeconfig, args.kube_context)
    try:
        hub.delete(kind, name, None)
        write(out, f"membercluster/{name} deleted\n")
    except HubRequestError as exc:
        if exc.status != 404:
            raise
        write(out, f"membercluster/{name} was not a member\n")
    # The namespace stays (the hub may run in it); everything else of the agent goes.
    objects = [o for o in agent_objects() if o["kind"] != "Namespace"]
    kubectl.delete([*objects, agent_secret(name, "", "")])
    write(out, f"agent removed from {kubectl.where}\n")
    return 0


def _read_ca(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ClusterCommandError(f"cannot read the hub's CA certificate {path}: {exc}") from exc


def _wait_connected(hub: HubSession, name: str, timeout: float) -> dict[str, Any]:
    kind = resolve_kind("MemberCluster")
    deadline = time.monotonic() + timeout
    while True:
        status = hub.get(kind, name, None).get("status") or {}
        if status.get("connected"):
            return dict(status)
        if time.monotonic() > deadline:
            raise ClusterCommandError(
                f"the agent of {name} did not connect to the hub within {timeout:g}s: check "
                f"that the cluster reaches the hub at its hub URL, and the agent's log "
                f"(kubectl -n multiq-system logs deploy/multiq-agent)"
            )
        time.sleep(0.5)


def _quietly(action: Any) -> None:
    with contextlib.suppress(QctlError):
        action()


class _Kubectl:
    """The member cluster, through the real kubectl."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        binary = shutil.which("kubectl")
        if binary is None:
            raise ClusterCommandError("kubectl is needed to install the agent and is not on PATH")
        self._base = [binary]
        if kubeconfig:
            self._base += ["--kubeconfig", kubeconfig]
        if context:
            self._base += ["--context", context]
        self.where = f"context {context}" if context else "the current context"
        if kubeconfig:
            self.where += f" of {kubeconfig}"

    def _run(self, words: list[str], stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                [*self._base, *words],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ClusterCommandError(f"kubectl {words[0]} on {self.where} timed out") from exc
        if done.returncode != 0:
            raise ClusterCommandError(self._explain(done.stderr))
        return done.stdout

    def _explain(self, stderr: str) -> str:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        text = lines[0] if lines else "kubectl failed"
        lowered = stderr.lower()
        unreachable = (
            "unable to connect",
            "connection refused",
            "was refused",
            "no such host",
            "i/o timeout",
            "no route to host",
        )
        if any(marker in lowered for marker in unreachable):
            return f"cluster unreachable ({self.where}): {text}"
        if "forbidden" in lowered:
            denied = next((line for line in lines if "forbidden" in line.lower()), text)
            return f"RBAC denied in {self.where}: {denied}"
        return f"kubectl failed on {self.where}: {text}"

    def check_reachable(self) -> None:
        self._run(["version", "-o", "json"])

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self._run(["apply", "-f", "-"], stdin=_documents(objects))

    def delete(self, objects: list[dict[str, Any]]) -> None:
        words = ["delete", "--ignore-not-found", "--wait=false", "-f", "-"]
        self._run(words, stdin=_documents(list(reversed(objects))))


def _documents(objects: list[dict[str, Any]]) -> str:
    """A YAML stream, one object a document (as a file of manifests is; a v1 List is not a
    kind every server describes, so kubectl could not validate one against it)."""
    import yaml  # noqa: PLC0415 - only join and leave write manifests

    return yaml.safe_dump_all(objects, sort_keys=False)
