"""`qctl apply -f FILE|DIR`: create or update queues, flavors, clusters, tenants, kubectl style.

Kueue's own queue setups apply too (`kueue.x-k8s.io` ResourceFlavor, ClusterQueue, LocalQueue,
Cohort, Topology, WorkloadPriorityClass, and MultiKueue's kinds), converted by api.kueue; what
each became is printed first.

Every object is decoded and checked here first with the hub's own decoder (api.codec), so a
broken file applies nothing; then each is created, or replaced if it exists and differs.
Called by: qctl.main (through qctl.cli).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from api.meta import Object
from api.v1alpha1.federation import MemberCluster
from qctl.commands.common import connect
from qctl.commands.manifests import decode_files
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.rest import HubSession

__all__ = ["run_apply"]


def _decode_all(filenames: list[str]) -> tuple[list[Object], list[str], list[str]]:
    """The objects to apply, the notes on converted Kueue documents, and the member clusters
    that must have joined; or nothing, if any document is wrong."""
    objects: list[Object] = []
    notes: list[str] = []
    members: list[str] = []
    problems: list[str] = []
    for item in decode_files(filenames):
        if not item.ok:
            sep = " " if item.problems[0].startswith("(") else ": "
            problems += [f"{item.where}{sep}{p}" for p in item.problems]
            continue
        objects += item.objects
        if item.note:
            notes.append(f"{item.where}: {item.note}")
        if item.member_cluster:
            members.append(item.member_cluster)
    if problems:
        raise QctlError("nothing applied; fix these first:\n  " + "\n  ".join(problems))
    return objects, notes, members


def run_apply(args: argparse.Namespace, out: TextIO) -> int:
    objects, notes, members = _decode_all(args.filenames)
    for obj in objects:
        kind = type(obj)
        if not kind.API_VERSION.startswith("multiq.dev/") or kind.KIND == "Workload":
            raise UsageError(
                f"{kind.KIND} {obj.name!r}: apply manages queues, flavors and clusters; "
                "submit jobs with `qctl submit -f`"
            )
    ctx = connect(args)
    client = HubSession(ctx)
    for note in notes:
        out.write(f"{note}\n")
    _check_joined(client, members)
    for obj in objects:
        kind = type(obj)
        body = obj.to_wire()
        if kind.NAMESPACED:
            body.setdefault("metadata", {}).setdefault("namespace", ctx.namespace)
        label = f"{kind.KIND.lower()}/{obj.name}"
        try:
            client.create(kind, body)
            out.write(f"{label} created\n")
            continue
        except HubRequestError as exc:
            if exc.reason != "AlreadyExists":
                raise
        current = client.get(kind, obj.name, body["metadata"].get("namespace"))
        if _same(current, body):
            out.write(f"{label} unchanged\n")
            continue
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        client.replace(kind, body)
        out.write(f"{label} configured\n")
    return 0


def _check_joined(client: HubSession, members: list[str]) -> None:
    """A MultiKueueCluster applies as a check that its MemberCluster has joined: the hub
    cannot dial a cluster; the cluster's agent dials the hub with its own token."""
    missing = []
    for name in members:
        try:
            client.get(MemberCluster, name, None)
        except HubRequestError as exc:
            if exc.reason != "NotFound":
                raise
            missing.append(name)
    if missing:
        joins = "\n  ".join(
            f"qctl cluster join {name} --kubeconfig FILE --context CONTEXT" for name in missing
        )
        raise QctlError(
            f"nothing applied: MultiKueueCluster {', '.join(missing)} has not joined the hub; "
            f"join it first:\n  {joins}"
        )


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    meta_keys = ("labels", "annotations")
    cur_meta, want_meta = current.get("metadata", {}), wanted.get("metadata", {})
    return all(cur_meta.get(k) == want_meta.get(k) for k in meta_keys) and all(
        current.get(k) == wanted.get(k) for k in wanted if k not in ("metadata", "status")
    )
