"""`qctl submit`: what researchers type most, often hundreds of times in a shell loop.

    qctl submit -f job.yaml [--cluster-set gpu] [--queue q] [--wait] [--follow]

Each document (batch/v1 Job, JobSet, Pod, Workload) goes to the hub as it is written, except
the Pods of a pod group (label `kueue.x-k8s.io/pod-group-name`, or `multiq.dev/…`): those of
one group and namespace go together, as one v1 List, wherever they are in the files — the hub
takes a group whole (`group_pods`). The hub validates each submission (its field errors come
back one per line) and answers once the workload is durable. `--wait` returns when every
submitted workload is admitted on a cluster; `--follow` streams their logs from wherever
they run, in one terminal, until they finish, and exits non-zero if any failed
(qctl.commands.streams, loaded only then).

Called by: qctl.main (through qctl.cli); qctl dev demo (read_documents).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, TextIO

from api.documents import load_documents
from qctl import render
from qctl.cli import load_runner
from qctl.commands.common import connect
from qctl.errors import InputError
from qctl.files import read_manifests
from qctl.kinds import WORKLOAD
from qctl.rest import HubSession

__all__ = [
    "POLL_SECONDS",
    "group_pods",
    "read_documents",
    "run_submit",
    "submit_files",
    "wait_admitted",
]

POLL_SECONDS = 0.5
_GROUP_LABELS = ("multiq.dev/pod-group-name", "kueue.x-k8s.io/pod-group-name")


def group_pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`docs` with the Pods of each pod group (same group label and namespace) gathered
    into one v1 List, where the group's first pod was; everything else as it is."""
    out: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        meta = doc.get("metadata") or {}
        labels = meta.get("labels") or {}
        group = next((labels[k] for k in _GROUP_LABELS if k in labels), None)
        if (doc.get("apiVersion"), doc.get("kind")) != ("v1", "Pod") or group is None:
            out.append(doc)
            continue
        key = (str(meta.get("namespace") or ""), str(group))
        if key not in groups:
            groups[key] = {"apiVersion": "v1", "kind": "List", "items": []}
            out.append(groups[key])
        groups[key]["items"].append(doc)
    return out


def read_documents(filenames: list[str]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for source, text in read_manifests(filenames):
        try:
            docs += [d.body for d in load_documents(text)]
        except Exception as exc:
            # api.errors is imported only now: it brings dataclasses, which costs a submit
            # more start-up time than reading its manifest.
            from api.errors import ApiError  # noqa: PLC0415

            if not isinstance(exc, ApiError):
                raise
            raise InputError(f"{source}: {exc}") from exc
    if not docs:
        raise InputError("nothing to submit: the files hold no documents")
    return docs


def run_submit(args: argparse.Namespace, out: TextIO) -> int:
    if args.follow:
        return load_runner("qctl.commands.streams:run_submit_follow")(args, out)
    hub, names = submit_files(args, out)
    if args.wait:
        wait_admitted(hub, names, out, sleep=time.sleep)
    return 0


def submit_files(args: argparse.Namespace, out: TextIO) -> tuple[HubSession, list[str]]:
    """Send every document of `args.filenames`; the session used and `namespace/name` of
    each workload the hub made of them."""
    docs = group_pods(read_documents(args.filenames))
    context = connect(args)
    hub = HubSession(context)
    names: list[str] = []
    for body in docs:
        first = body["items"][0] if body.get("kind") == "List" else body
        ns = (first.get("metadata") or {}).get("namespace") or context.namespace
        created = hub.submit(body, namespace=ns, cluster_set=args.cluster_set, queue=args.queue)
        meta, spec = created["metadata"], created["spec"]
        names.append(f"{meta['namespace']}/{meta['name']}")
        waiting = (meta.get("annotations") or {}).get("multiq.dev/pod-group-waiting")
        out.write(
            f"workload/{meta['name']} submitted to queue {spec['queueName']}"
            f" in namespace {meta['namespace']}"
            + (f" (pod group: {waiting} pods in, it waits for the rest)" if waiting else "")
            + "\n"
        )
        out.flush()
    return hub, names


def wait_admitted(
    hub: HubSession, keys: list[str], out: TextIO, *, sleep: Callable[[float], None]
) -> None:
    """Poll each workload until the hub says it is admitted somewhere, printing where."""
    waiting = set(keys)
    while waiting:
        for key in sorted(waiting):
            ns, name = key.split("/", 1)
            wl = hub.get(WORKLOAD, name, ns)
            state = render.workload_state(wl)
            if state not in ("Pending", "Dispatched"):
                cluster = (wl.get("status") or {}).get("clusterName")
                out.write(f"workload/{name} {state.lower()} on cluster {cluster}\n")
                out.flush()
                waiting.discard(key)
        if waiting:
            sleep(POLL_SECONDS)
