"""Resolving the resource names users type (`workloads`, `wl`, `clusters`, `cq`, …) to kinds.

Called by: qctl get / describe / delete.
"""

from __future__ import annotations

from api.kinds import ALL_KINDS
from api.meta import Object
from qctl.errors import UsageError

__all__ = ["SERVED_KINDS", "resolve_kind"]

# The kinds the hub serves through its REST API (upstream Job/Pod/JobSet are only submitted).
SERVED_KINDS: tuple[type[Object], ...] = tuple(
    k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")
)

# Friendly words for the federation's most used kinds.
_ALIASES = {
    "queues": "GlobalQueue",
    "queue": "GlobalQueue",
    "globalqueue": "GlobalQueue",
    "clusters": "MemberCluster",
    "cluster": "MemberCluster",
    "workload": "Workload",
}


def resolve_kind(word: str) -> type[Object]:
    lowered = word.lower()
    target = _ALIASES.get(lowered)
    for kind in SERVED_KINDS:
        names = {kind.KIND.lower(), kind.plural(), *kind.SHORT_NAMES}
        if (target and target == kind.KIND) or (not target and lowered in names):
            return kind
    known = ", ".join(sorted(k.plural() for k in SERVED_KINDS))
    raise UsageError(f'the hub has no resource type "{word}"; known: {known}')
