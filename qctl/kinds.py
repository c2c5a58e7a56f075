"""The hub's resource types as qctl names them, and where each lives in the REST API.

A plain table rather than the api package's models, so that resolving `workloads`, `wl`,
`clusters`, `cq` … and building a URL costs no pydantic import: `qctl get` and `qctl submit`
start in a few milliseconds. tests/qctl/test_kinds.py holds it equal to api.kinds, the one table
of every kind, so the two cannot drift apart.

Called by: qctl get / describe / delete / apply, qctl.client and qctl.rest (paths), qctl dev.
"""

from typing import NamedTuple, Protocol

from qctl.errors import UsageError

__all__ = [
    "API_PREFIX",
    "SERVED_KINDS",
    "WORKLOAD",
    "KindLike",
    "ServedKind",
    "collection_path",
    "resolve_kind",
    "resource_path",
]

API_PREFIX = "/apis/multiq.dev/v1alpha1"


class KindLike(Protocol):
    """What a path needs of a kind; a ServedKind, or an api model class (Workload, …)."""

    @property
    def NAMESPACED(self) -> bool: ...  # noqa: N802 - the api models' class attribute

    def plural(self) -> str: ...


class ServedKind(NamedTuple):
    """One kind the hub serves under multiq.dev/v1alpha1. (A NamedTuple, not a dataclass:
    importing dataclasses costs qctl's start-up more than all of this module.)"""

    KIND: str
    NAMESPACED: bool
    SHORT_NAMES: tuple[str, ...] = ()

    def plural(self) -> str:
        """The resource name in URLs, formed as api.meta.Object.plural forms it."""
        lower = self.KIND.lower()
        if lower.endswith("y") and lower[-2:-1] not in "aeiou":
            return lower[:-1] + "ies"
        if lower.endswith(("s", "x", "ch", "sh")):
            return lower + "es"
        return lower + "s"


# The kinds the hub serves through its REST API (upstream Job/Pod/JobSet are only submitted),
# in api.kinds.ALL_KINDS order.
SERVED_KINDS: tuple[ServedKind, ...] = (
    ServedKind("ResourceFlavor", False, ("rf", "flavor", "flavors")),
    ServedKind("ClusterQueue", False, ("cq", "clusterqueues")),
    ServedKind("LocalQueue", True, ("lq", "queue", "localqueues")),
    ServedKind("Cohort", False, ("co", "cohorts")),
    ServedKind("WorkloadPriorityClass", False, ("wpc", "priorityclass")),
    ServedKind("Topology", False, ("topo", "topologies")),
    ServedKind("MemberCluster", False, ("mc", "cluster", "clusters", "memberclusters")),
    ServedKind("ClusterSet", False, ("cs", "clustersets")),
    ServedKind("GlobalQueue", False, ("gq", "globalqueues")),
    ServedKind("Tenant", False, ("tenants",)),
    ServedKind("ApplicationProfile", True, ("ap", "profile", "profiles", "applicationprofiles")),
    ServedKind("JobTemplate", True, ("jt", "jobtemplates")),
    ServedKind("VolumeBundle", True, ("vb", "volumebundles")),
    ServedKind("Workload", True, ("wl", "kwl", "workloads")),
    ServedKind("JobSet", True, ("mjs", "jobsets")),
)

WORKLOAD = next(k for k in SERVED_KINDS if k.KIND == "Workload")

# Friendly words for the federation's most used kinds.
_ALIASES = {
    "queues": "GlobalQueue",
    "queue": "GlobalQueue",
    "globalqueue": "GlobalQueue",
    "clusters": "MemberCluster",
    "cluster": "MemberCluster",
    "workload": "Workload",
}


def resolve_kind(word: str) -> ServedKind:
    lowered = word.lower()
    target = _ALIASES.get(lowered)
    for kind in SERVED_KINDS:
        names = {kind.KIND.lower(), kind.plural(), *kind.SHORT_NAMES}
        if (target and target == kind.KIND) or (not target and lowered in names):
            return kind
    known = ", ".join(sorted(k.plural() for k in SERVED_KINDS))
    raise UsageError(f'the hub has no resource type "{word}"; known: {known}')


def resource_path(kind: KindLike, namespace: str | None, name: str | None = None) -> str:
    path = API_PREFIX
    if kind.NAMESPACED:
        path += f"/namespaces/{namespace or 'default'}"
    path += f"/{kind.plural()}"
    if name:
        path += f"/{name}"
    return path


def collection_path(kind: KindLike, namespace: str | None, *, all_namespaces: bool) -> str:
    """Where to list (or watch) a kind: one namespace's, or every namespace's objects."""
    if all_namespaces or not kind.NAMESPACED:
        return f"{API_PREFIX}/{kind.plural()}"
    return resource_path(kind, namespace)
