"""Quota accounting over the cohort tree: who may use how much of each flavor-resource.

Owns `QuotaTree`, the cycle's mutable working copy of quota and usage, built once per cycle
from a `Snapshot` and then updated incrementally (admissions add usage, preemption
simulation removes and restores it) — never copied per decision. `cycle`, `flavors` and
`preemption` call it.

The formulas are Kueue's hierarchical-cohort ones (kueue.md §1.4), per flavor-resource fr:

- a cluster queue's SubtreeQuota is its nominal quota; a cohort's is its own nominal plus,
  for each child, the child's SubtreeQuota minus what the child keeps for itself;
- what a node keeps for itself ("guaranteed", Kueue's localQuota) is
  max(0, SubtreeQuota − lendingLimit) when a lending limit is set, else 0;
- usage bubbles to the parent only past the guaranteed part:
  parent.usage += max(0, child.usage − child.guaranteed);
- available(node) = max(0, guaranteed − usage)
  + min(available(parent), SubtreeQuota − guaranteed − usedInParent + borrowingLimit),
  and at a root, SubtreeQuota − usage.

A cohort cycle (a parent chain that loops) disables every cohort on or under the loop and
every cluster queue below them; `disabled` says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from agent.engine.snapshot import (
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FlavorResource,
    ResourceGroup,
    Snapshot,
    Workload,
)

__all__ = ["QuotaNode", "QuotaTree", "Usage", "add_signed", "admitted_usage", "count_usage"]


class QuotaNode:
    """One cluster queue or cohort with its quota cells and current usage."""

    __slots__ = (
        "borrowing_limit",
        "children",
        "guaranteed",
        "is_cq",
        "lendable",
        "lending_limit",
        "name",
        "nominal",
        "parent",
        "potential",
        "subtree",
        "usage",
        "weight",
    )

    def __init__(self, name: str, *, is_cq: bool) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.nominal: dict[FlavorResource, int] = {}
        self.borrowing_limit: dict[FlavorResource, int] = {}
        self.lending_limit: dict[FlavorResource, int] = {}
        self.subtree: dict[FlavorResource, int] = {}
        self.guaranteed: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.potential: dict[FlavorResource, int] = {}
        """`QuotaTree.potential_available` per cell, as worked out (it never changes)."""
        self.weight = 1000
        self.lendable: dict[str, int] | None = None
        """Per resource, what this cohort could lend its children at most (summed over
        flavors; fair sharing's denominator): fixed once the tree is built, so computed
        once, on first use (`fair_sharing.dominant_resource_share`)."""
        """`fairSharing.weight` in milli-units (fair sharing divides its share by it)."""

    def load_groups(self, groups: Iterable[ResourceGroup]) -> None:
        for group in groups:
            for fq in group.flavors:
                for res, quota in fq.resources.items():
                    fr = (fq.flavor, res)
                    self.nominal[fr] = quota.nominal
                    if quota.borrowing_limit is not None:
                        self.borrowing_limit[fr] = quota.borrowing_limit
                    if quota.lending_limit is not None:
                        self.lending_limit[fr] = quota.lending_limit

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def __repr__(self) -> str:
        kind = "cq" if self.is_cq else "cohort"
        return f"QuotaNode({kind} {self.name!r})"


class QuotaTree:
    """Cluster queues and cohorts as a forest, with usage from the snapshot's admissions."""

    __slots__ = ("cohorts", "cqs", "disabled", "disabled_cohorts")

    def __init__(
        self,
        cluster_queues: Mapping[ClusterQueueName, ClusterQueue],
        cohorts: Mapping[CohortName, Cohort],
    ) -> None:
        self.cqs: dict[ClusterQueueName, QuotaNode] = {}
        self.cohorts: dict[CohortName, QuotaNode] = {}
        self.disabled: dict[str, str] = {}
        """Cluster queue name → why it cannot admit (it sits under a cohort cycle)."""
        self.disabled_cohorts: set[str] = set()
        for name, spec in cohorts.items():
            node = self._cohort(name)
            node.load_groups(spec.resource_groups)
            node.weight = spec.fair_sharing_weight
        # Parents after all cohorts exist; a parent that is not an object is implicit.
        for name, spec in cohorts.items():
            if spec.parent is not None:
                self._link(self.cohorts[name], self._cohort(spec.parent))
        for cq_name, cq in cluster_queues.items():
            cq_node = QuotaNode(cq_name, is_cq=True)
            cq_node.load_groups(cq.resource_groups)
            cq_node.weight = cq.fair_sharing_weight
            self.cqs[cq_name] = cq_node
            if cq.cohort is not None:
                self._link(cq_node, self._cohort(cq.cohort))
        self._break_cycles()
        for node in self.cohorts.values():
            if node.parent is None:
                self._compute_subtree(node)
        for node in self.cqs.values():
            if node.parent is None:
                self._compute_subtree(node)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> QuotaTree:
        return cls.from_usage(snapshot, admitted_usage(snapshot.workloads.values()))

    @classmethod
    def from_usage(
        cls, snapshot: Snapshot, usage: Mapping[ClusterQueueName, Mapping[FlavorResource, int]]
    ) -> QuotaTree:
        """The tree of `snapshot`'s queues holding `usage` (`admitted_usage` of its admitted
        workloads, or the same kept as they change): put on once per queue, as what a node
        passes up to its parent depends only on its total. Queues not in the snapshot are
        left out."""
        tree = cls(snapshot.cluster_queues, snapshot.cohorts)
        for name, total in usage.items():
            node = tree.cqs.get(name)
            if node is not None and total:
                tree.add_usage(node, total)
        return tree

    # construction ---------------------------------------------------------------------------

    def _cohort(self, name: CohortName) -> QuotaNode:
        node = self.cohorts.get(name)
        if node is None:
            node = self.cohorts[name] = QuotaNode(name, is_cq=False)
        return node

    @staticmethod
    def _link(child: QuotaNode, parent: QuotaNode) -> None:
        child.parent = parent
        parent.children.append(child)

    def _break_cycles(self) -> None:
        """Detach every cohort loop, disabling the loop and everything under it."""
        state: dict[str, int] = {}  # 1 = on the current path, 2 = known acyclic
        for start in list(self.cohorts.values()):
            path: list[QuotaNode] = []
            node: QuotaNode | None = start
            while node is not None and state.get(node.name, 0) == 0:
                state[node.name] = 1
                path.append(node)
                node = node.parent
            if node is not None and state.get(node.name) == 1:
                loop = path[path.index(node) :]
                names = " → ".join(n.name for n in [*loop, loop[0]])
                for member in loop:
                    self._disable_subtree(member, f"cohort cycle {names}")
                for member in loop:
                    if member.parent is not None:
                        member.parent.children.remove(member)
                        member.parent = None
            for n in path:
                state[n.name] = 2

    def _disable_subtree(self, node: QuotaNode, reason: str) -> None:
        if node.name in self.disabled_cohorts:
            return
        self.disabled_cohorts.add(node.name)
        for child in node.children:
            if child.is_cq:
                self.disabled[child.name] = reason
            else:
                self._disable_subtree(child, reason)

    def _compute_subtree(self, node: QuotaNode) -> None:
        subtree = dict(node.nominal)
        for child in node.children:
            self._compute_subtree(child)
            for fr, quota in child.subtree.items():
                subtree[fr] = subtree.get(fr, 0) + quota - child.guaranteed.get(fr, 0)
        node.subtree = subtree
        node.guaranteed = {
            fr: max(0, subtree.get(fr, 0) - limit) for fr, limit in node.lending_limit.items()
        }

    # usage ----------------------------------------------------------------------------------

    @staticmethod
    def add_usage(node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        for fr, amount in usage.items():
            n: QuotaNode | None = node
            val = amount
            while n is not None and val > 0:
                used = n.usage.get(fr, 0)
                local_free = n.guaranteed.get(fr, 0) - used
                n.usage[fr] = used + val
                if local_free >= val:
                    break
                val -= max(0, local_free)
                n = n.parent

    @staticmethod
    def remove_usage(node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        for fr, amount in usage.items():
            n: QuotaNode | None = node
            val = amount
            while n is not None and val > 0:
                used = n.usage.get(fr, 0)
                stored_in_parent = used - n.guaranteed.get(fr, 0)
                n.usage[fr] = used - val
                if stored_in_parent <= 0:
                    break
                val = min(val, stored_in_parent)
                n = n.parent

    # queries --------------------------------------------------------------------------------

    @staticmethod
    def available(node: QuotaNode, fr: FlavorResource) -> int:
        """How much more of fr the node could use now, honouring every limit up the tree."""
        # Asked for every cell of every pending workload a cycle evaluates: a cluster queue
        # under a root cohort (the common tree) is answered without recursing.
        used = node.usage.get(fr, 0)
        parent = node.parent
        if parent is None:
            return node.subtree.get(fr, 0) - used
        if parent.parent is None:
            from_parent = parent.subtree.get(fr, 0) - parent.usage.get(fr, 0)
        else:
            from_parent = QuotaTree.available(parent, fr)
        guaranteed = node.guaranteed.get(fr, 0)
        limit = node.borrowing_limit.get(fr)
        if limit is not None:
            stored = node.subtree.get(fr, 0) - guaranteed
            used_in_parent = used - guaranteed if used > guaranteed else 0
            room = stored - used_in_parent + limit
            from_parent = room if room < from_parent else from_parent  # (`min`, without a call)
        return (guaranteed - used if guaranteed > used else 0) + from_parent

    @staticmethod
    def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
        """`available` if nothing anywhere were in use: the most the node could ever get.
        Usage does not enter it, so it is worked out once per node and cell."""
        found = node.potential.get(fr)
        if found is not None:
            return found
        parent = node.parent
        if parent is None:
            found = node.subtree.get(fr, 0)
        else:
            guaranteed = node.guaranteed.get(fr, 0)
            from_parent = QuotaTree.potential_available(parent, fr)
            limit = node.borrowing_limit.get(fr)
            if limit is not None:
                from_parent = min(from_parent, node.subtree.get(fr, 0) - guaranteed + limit)
            found = guaranteed + from_parent
        node.potential[fr] = found
        return found

    @staticmethod
    def is_borrowing(node: QuotaNode, fr: FlavorResource, extra: int = 0) -> bool:
        """Whether the node uses (or, with `extra`, would use) more than its own quota."""
        return node.usage.get(fr, 0) + extra > node.subtree.get(fr, 0)

    def usage_of(self, cq: ClusterQueueName) -> dict[FlavorResource, int]:
        return {fr: v for fr, v in self.cqs[cq].usage.items() if v}


# --- admitted usage per cluster queue --------------------------------------------------------

K = TypeVar("K")

Usage = dict[ClusterQueueName, dict[FlavorResource, int]]
"""What the admitted workloads hold, per cluster queue: the sums of their admissions' totals,
without zero entries."""


def admitted_usage(workloads: Iterable[Workload]) -> Usage:
    """The usage of the admitted ones among `workloads`."""
    usage: Usage = {}
    for wl in workloads:
        count_usage(usage, wl, 1)
    return usage


def count_usage(usage: Usage, wl: Workload, sign: int) -> None:
    """Add (`sign` 1) or take away (-1) what `wl` holds, if it is admitted, in `usage`."""
    adm = wl.admission
    if adm is None:
        return
    total = usage.get(adm.cluster_queue)
    if total is None:
        total = usage[adm.cluster_queue] = {}
    add_signed(total, adm.total, sign)
    if not total:
        del usage[adm.cluster_queue]


def add_signed(into: dict[K, int], amounts: Mapping[K, int], sign: int) -> None:
    """`into` += `sign` × `amounts`, per key, leaving out the keys that come to zero."""
    for key, amount in amounts.items():
        left = into.get(key, 0) + sign * amount
        if left:
            into[key] = left
        else:
            del into[key]
