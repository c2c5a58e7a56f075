"""kueuectl's verbs for queues and workloads: stop, resume and create from flags.

    qctl stop clusterqueue|localqueue NAME [--keep-already-running]   stopPolicy HoldAndDrain
                                                                       (Hold with the flag)
    qctl resume clusterqueue|localqueue NAME                           stopPolicy None
    qctl stop|resume workload NAME [-n NS]                             spec.active false|true
    qctl create clusterqueue NAME [--cohort C] [--queuing-strategy S] [--namespace-selector
        k=v,…] [--reclaim-within-cohort P] [--preemption-within-cluster-queue P]
        [--nominal-quota Q] [--borrowing-limit Q] [--lending-limit Q]
    qctl create localqueue NAME -c CLUSTERQUEUE [-n NS] [-i]
    (all: --dry-run none|client|server; create: -o json|yaml|name)

A stop or resume is a read and a compare-and-swap replace of the object, tried again when
another writer got in between. What a stop does happens at the hub and the agents: a stopped
cluster or local queue admits nothing more (HoldAndDrain also evicts what it admitted, on every
cluster); a stopped workload is taken back from its cluster, its Jobs deleted, and is dispatched
again as a new generation when resumed (hub.placement.reconcile).

Quota flags (kueuectl's syntax): `FLAVOR:RESOURCE=VALUE;RESOURCE=VALUE`, flavors separated by
commas or given in repeated flags. Flavors covering the same resources share a resource group;
a resource in two different groups, or a limit for a flavor or resource without its nominal
quota, is an error naming the flag.

Called by: qctl.main (through qctl.cli's STOP_KINDS, RESUME_KINDS and CREATE_KINDS).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from qctl.commands.common import connect
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.kinds import API_PREFIX, ServedKind, resolve_kind
from qctl.rest import HubSession

__all__ = [
    "parse_namespace_selector",
    "parse_quotas",
    "resource_groups",
    "run_create_cluster_queue",
    "run_create_local_queue",
    "run_resume",
    "run_stop",
]

CONFLICT_RETRIES = 5
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i?|[mkun])?$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class QueueFlagError(UsageError):
    """A flag of `qctl create` whose value is not what kueuectl accepts (names the flag)."""


# --- stop and resume --------------------------------------------------------------------------


def _kind_of(args: argparse.Namespace) -> ServedKind:
    return resolve_kind(
        {"cq": "clusterqueue", "lq": "localqueue", "wl": "workload"}.get(args.kind, args.kind)
    )


def _stop_change(kind: ServedKind, keep_running: bool) -> Callable[[dict[str, Any]], bool]:
    def change(obj: dict[str, Any]) -> bool:
        spec = obj.setdefault("spec", {})
        if kind.KIND == "Workload":
            before, spec["active"] = spec.get("active", True), False
            return before is not False
        policy = "Hold" if keep_running else "HoldAndDrain"
        before, spec["stopPolicy"] = spec.get("stopPolicy", "None"), policy
        return bool(before != policy)

    return change


def _resume_change(kind: ServedKind) -> Callable[[dict[str, Any]], bool]:
    def change(obj: dict[str, Any]) -> bool:
        spec = obj.setdefault("spec", {})
        if kind.KIND == "Workload":
            before, spec["active"] = spec.get("active", True), True
            return before is not True
        before, spec["stopPolicy"] = spec.get("stopPolicy", "None"), "None"
        return bool(before != "None")

    return change


def run_stop(args: argparse.Namespace, out: TextIO) -> int:
    kind = _kind_of(args)
    keep = bool(getattr(args, "keep_already_running", False))
    return _toggle(args, out, kind, _stop_change(kind, keep), "stopped")


def run_resume(args: argparse.Namespace, out: TextIO) -> int:
    kind = _kind_of(args)
    return _toggle(args, out, kind, _resume_change(kind), "resumed")


def _toggle(
    args: argparse.Namespace,
    out: TextIO,
    kind: ServedKind,
    change: Callable[[dict[str, Any]], bool],
    done: str,
) -> int:
    context = connect(args)
    hub = HubSession(context)
    namespace = context.namespace if kind.NAMESPACED else None
    suffix = {"client": " (dry run)", "server": " (server dry run)"}.get(args.dry_run, "")
    for _ in range(CONFLICT_RETRIES):
        obj = hub.get(kind, args.name, namespace)
        changed = change(obj)
        if args.dry_run == "client" or not changed:
            break
        try:
            hub.replace(kind, obj, dry_run=args.dry_run == "server")
            break
        except HubRequestError as exc:
            if exc.status != 409:
                raise
    else:
        raise QctlError(
            f"{kind.KIND.lower()}/{args.name} kept changing under us: "
            f"{CONFLICT_RETRIES} tries, each lost a race with another writer"
        )
    out.write(f"{kind.KIND.lower()}/{args.name} {done if changed else 'unchanged'}{suffix}\n")
    return 0


# --- create ------------------------------------------------------------------------------------


def parse_namespace_selector(text: str | None) -> dict[str, Any]:
    """`k=v,k2=v2` → a label selector's matchLabels; none given → {} (every namespace)."""
    if not text:
        return {}
    labels: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = (p.strip() for p in part.partition("="))
        if not sep or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise QueueFlagError(
                f"--namespace-selector: {part!r} is not KEY=VALUE (a label key and value)"
            )
        labels[key] = value
    return {"matchLabels": labels}


def parse_quotas(flag: str, values: list[str] | None) -> dict[str, dict[str, str]]:
    """`--nominal-quota "alpha:cpu=9;memory=36Gi,beta:cpu=18"` (repeatable) → per flavor, in
    order, its resources' quantities in order."""
    flavors: dict[str, dict[str, str]] = {}
    for value in values or []:
        for spec in value.split(","):
            flavor, sep, resources = (p.strip() for p in spec.partition(":"))
            if not sep or not flavor or not resources:
                raise QueueFlagError(
                    f"--{flag}: {spec!r} is not FLAVOR:RESOURCE=VALUE;RESOURCE=VALUE"
                )
            if flavor in flavors:
                raise QueueFlagError(f"--{flag}: flavor {flavor!r} is given twice")
            quantities: dict[str, str] = {}
            for item in resources.split(";"):
                name, eq, quantity = (p.strip() for p in item.partition("="))
                if not eq or not name or not _QUANTITY.match(quantity):
                    raise QueueFlagError(
                        f"--{flag}: {item!r} in flavor {flavor!r} is not RESOURCE=QUANTITY "
                        "(e.g. cpu=9, memory=36Gi)"
                    )
                if name in quantities:
                    raise QueueFlagError(
                        f"--{flag}: resource {name!r} is given twice in flavor {flavor!r}"
                    )
                quantities[name] = quantity
            flavors[flavor] = quantities
    return flavors


def resource_groups(
    nominal: dict[str, dict[str, str]],
    borrowing: dict[str, dict[str, str]],
    lending: dict[str, dict[str, str]],
) -> list[dict[str, Any]]:
    """The cluster queue's resourceGroups: flavors covering the same resources share a group
    (in the order first named); each limit must name a flavor and resources of the nominal
    quota."""
    for flag, limits in (("borrowing-limit", borrowing), ("lending-limit", lending)):
        for flavor, quantities in limits.items():
            if flavor not in nominal:
                raise QueueFlagError(
                    f"--{flag}: flavor {flavor!r} has no --nominal-quota (give its quota first)"
                )
            extra = [r for r in quantities if r not in nominal[flavor]]
            if extra:
                raise QueueFlagError(
                    f"--{flag}: flavor {flavor!r} has no nominal quota of {', '.join(extra)}"
                )
    groups: list[dict[str, Any]] = []
    by_resources: dict[frozenset[str], dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for flavor, quantities in nominal.items():
        covered = frozenset(quantities)
        group = by_resources.get(covered)
        if group is None:
            for resource in quantities:
                if resource in owner:
                    raise QueueFlagError(
                        f"--nominal-quota: flavor {flavor!r} covers {resource} with other "
                        f"resources than flavor {owner[resource]!r} does; flavors sharing a "
                        "resource must cover the same resources"
                    )
            group = {"coveredResources": list(quantities), "flavors": []}
            by_resources[covered] = group
            groups.append(group)
        for resource in quantities:
            owner[resource] = flavor
        resources = []
        for resource in group["coveredResources"]:
            quota: dict[str, Any] = {"name": resource, "nominalQuota": quantities[resource]}
            if resource in borrowing.get(flavor, {}):
                quota["borrowingLimit"] = borrowing[flavor][resource]
            if resource in lending.get(flavor, {}):
                quota["lendingLimit"] = lending[flavor][resource]
            resources.append(quota)
        group["flavors"].append({"name": flavor, "resources": resources})
    return groups


def cluster_queue_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": parse_namespace_selector(args.namespace_selector),
        "queueingStrategy": args.queuing_strategy or "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": args.reclaim_within_cohort or "Never",
            "withinClusterQueue": args.preemption_within_cluster_queue or "Never",
        },
        "resourceGroups": resource_groups(
            parse_quotas("nominal-quota", args.nominal_quota),
            parse_quotas("borrowing-limit", args.borrowing_limit),
            parse_quotas("lending-limit", args.lending_limit),
        ),
    }
    if args.cohort:
        spec["cohortName"] = args.cohort
    return {
        "apiVersion": API_PREFIX.removeprefix("/apis/"),
        "kind": "ClusterQueue",
        "metadata": {"name": args.name},
        "spec": spec,
    }


def run_create_cluster_queue(args: argparse.Namespace, out: TextIO) -> int:
    body = cluster_queue_from_flags(args)
    return _create(args, out, resolve_kind("ClusterQueue"), body)


def run_create_local_queue(args: argparse.Namespace, out: TextIO) -> int:
    context = connect(args)
    body = {
        "apiVersion": API_PREFIX.removeprefix("/apis/"),
        "kind": "LocalQueue",
        "metadata": {"name": args.name, "namespace": context.namespace},
        "spec": {"clusterQueue": args.clusterqueue},
    }
    if not args.ignore_unknown_cq and args.dry_run != "client":
        try:
            HubSession(context).get(resolve_kind("ClusterQueue"), args.clusterqueue, None)
        except HubRequestError as exc:
            if exc.status != 404:
                raise
            raise UsageError(
                f"--clusterqueue: no cluster queue named {args.clusterqueue!r} "
                "(create it first, or pass -i/--ignore-unknown-cq)"
            ) from exc
    return _create(args, out, resolve_kind("LocalQueue"), body)


def _create(args: argparse.Namespace, out: TextIO, kind: ServedKind, body: dict[str, Any]) -> int:
    if args.dry_run == "client":
        created = body
    else:
        created = HubSession(connect(args)).create(kind, body, dry_run=args.dry_run == "server")
    suffix = {"client": " (dry run)", "server": " (server dry run)"}.get(args.dry_run, "")
    if args.output == "json":
        out.write(json.dumps(created, indent=2) + "\n")
    elif args.output == "yaml":
        import yaml  # noqa: PLC0415 - only -o yaml needs it

        out.write(yaml.safe_dump(created, sort_keys=False))
    elif args.output == "name":
        out.write(f"{kind.KIND.lower()}/{args.name}\n")
    else:
        out.write(f"{kind.KIND.lower()}/{args.name} created{suffix}\n")
    return 0
