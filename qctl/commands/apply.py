"""`qctl apply -f FILE|DIR`: create or update queues, flavors, clusters, tenants, kubectl style.

Every object is decoded and checked here first with the hub's own decoder (api.codec), so a
broken file applies nothing; then each is created, or replaced if it exists and differs.
Called by: qctl.main (through qctl.cli).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from api.codec import decode, load_documents
from api.errors import ApiError, ObjectInvalidError
from api.kinds import REGISTRY
from api.meta import Object
from qctl.commands.common import connect
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.files import read_manifests
from qctl.rest import HubSession

__all__ = ["run_apply"]


def _decode_all(filenames: list[str]) -> list[Object]:
    objects: list[Object] = []
    problems: list[str] = []
    for source, text in read_manifests(filenames):
        try:
            docs = load_documents(text)
        except ApiError as exc:
            problems.append(f"{source}: {exc}")
            continue
        for doc in docs:
            try:
                objects.append(decode(doc.body, REGISTRY))
            except ObjectInvalidError as exc:
                problems += [f"{source}: document {doc.index}: {e}" for e in exc.errors]
            except ApiError as exc:
                problems.append(f"{source}: document {doc.index}: {exc}")
    if problems:
        raise QctlError("nothing applied; fix these first:\n  " + "\n  ".join(problems))
    return objects


def run_apply(args: argparse.Namespace, out: TextIO) -> int:
    objects = _decode_all(args.filenames)
    ctx = connect(args)
    client = HubSession(ctx)
    for obj in objects:
        kind = type(obj)
        if not kind.API_VERSION.startswith("multiq.dev/") or kind.KIND == "Workload":
            raise UsageError(
                f"{kind.KIND} {obj.name!r}: apply manages queues, flavors and clusters; "
                "submit jobs with `qctl submit -f`"
            )
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


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    meta_keys = ("labels", "annotations")
    cur_meta, want_meta = current.get("metadata", {}), wanted.get("metadata", {})
    return all(cur_meta.get(k) == want_meta.get(k) for k in meta_keys) and all(
        current.get(k) == wanted.get(k) for k in wanted if k not in ("metadata", "status")
    )
