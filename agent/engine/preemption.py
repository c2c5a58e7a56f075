"""Classic preemption: which admitted workloads to evict so that a pending one fits.

Owns `Preemptor.find_targets`, called by `cycle` when flavor assignment says a workload
fits only by preempting. It follows kueue.md §2.5 and Kueue's preemption concept page:

- candidates are admitted workloads of the preemptor's cluster queue allowed by
  `withinClusterQueue`, plus workloads of other cluster queues in the same cohort tree that
  are borrowing on a contested flavor-resource, allowed by `reclaimWithinCohort`; workloads
  already being evicted come first, as they free their quota anyway;
- candidates are ordered: evicting first, other queues before the own queue, lower priority
  first, most recently admitted first, then id;
- targets are chosen greedily in four steps — (1) if every candidate is in the own queue,
  allowing borrowing; (2) with borrowWithinCohort, under its maxPriorityThreshold, allowing
  borrowing; (3) if the own queue is under nominal, any candidates, not borrowing; (4) own
  queue only, allowing borrowing — and then minimised by adding targets back in reverse
  order while the preemptor still fits.

Removal is simulated on the cycle's `QuotaTree` and always restored, so the tree is
unchanged on return. A returned plan always lets the preemptor fit: that is checked before
the plan leaves this module, not assumed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.engine.quota import QuotaNode, QuotaTree
from agent.engine.result import PreemptionReason
from agent.engine.snapshot import (
    ClusterQueue,
    ClusterQueueName,
    FlavorResource,
    PreemptionPolicy,
    Workload,
)

__all__ = ["Candidate", "Preemptor", "fits"]


class Candidate:
    """An admitted workload as a possible victim, with its usage precomputed once per cycle."""

    __slots__ = ("cq", "evicting", "node", "usage", "wl")

    def __init__(
        self,
        wl: Workload,
        cq: ClusterQueueName,
        node: QuotaNode,
        usage: Mapping[FlavorResource, int],
    ) -> None:
        self.wl = wl
        self.cq = cq
        self.node = node
        self.usage = usage
        self.evicting = wl.evicting

    def __repr__(self) -> str:
        return f"Candidate({self.wl.id!r} in {self.cq!r})"


@dataclass(frozen=True, slots=True)
class Target:
    candidate: Candidate
    reason: PreemptionReason


def fits(
    tree: QuotaTree, node: QuotaNode, request: Mapping[FlavorResource, int], *, borrowing: bool
) -> bool:
    """Whether `request` fits the queue now; without `borrowing`, also within nominal."""
    for fr, amount in request.items():
        if amount > tree.available(node, fr):
            return False
        if not borrowing and node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0):
            return False
    return True


class Preemptor:
    """Victim search over the admitted workloads of one cycle."""

    __slots__ = ("by_cq", "cq_specs", "taken", "tree")

    def __init__(
        self,
        *,
        tree: QuotaTree,
        cq_specs: Mapping[ClusterQueueName, ClusterQueue],
        by_cq: Mapping[ClusterQueueName, list[Candidate]],
    ) -> None:
        self.tree = tree
        self.cq_specs = cq_specs
        self.by_cq = by_cq
        self.taken: set[str] = set()
        """Victims already chosen this cycle: nobody else may count on them."""

    # candidates -----------------------------------------------------------------------------

    def _cohort_members(self, node: QuotaNode) -> Iterable[QuotaNode]:
        if node.parent is None:
            return ()
        stack = [node.root()]
        out: list[QuotaNode] = []
        while stack:
            n = stack.pop()
            for child in n.children:
                if child.is_cq:
                    if child is not node:
                        out.append(child)
                else:
                    stack.append(child)
        return out

    def candidates(
        self, wl: Workload, cq: ClusterQueue, frs: set[FlavorResource]
    ) -> list[Candidate]:
        tree = self.tree
        node = tree.cqs[cq.name]
        policy = cq.preemption
        out: list[Candidate] = []
        prio = wl.priority
        within = policy.within_cluster_queue
        for c in self.by_cq.get(cq.name, ()):
            if c.wl.id in self.taken or not any(fr in c.usage for fr in frs):
                continue
            if c.evicting:
                out.append(c)
                continue
            if within is PreemptionPolicy.NEVER:
                continue
            cp = c.wl.priority
            if cp < prio or (
                cp == prio
                and within is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                and wl.queue_timestamp < c.wl.queue_timestamp
            ):
                out.append(c)
        reclaim = policy.reclaim_within_cohort
        for member in self._cohort_members(node):
            borrowing = any(tree.is_borrowing(member, fr) for fr in frs)
            for c in self.by_cq.get(member.name, ()):  # type: ignore[call-overload]
                if c.wl.id in self.taken or not any(fr in c.usage for fr in frs):
                    continue
                if c.evicting:
                    out.append(c)
                    continue
                if reclaim is PreemptionPolicy.NEVER or not borrowing:
                    continue
                if reclaim is PreemptionPolicy.LOWER_PRIORITY and c.wl.priority >= prio:
                    continue
                out.append(c)
        own = cq.name
        out.sort(
            key=lambda c: (
                not c.evicting,
                c.cq == own,
                c.wl.priority,
                -(c.wl.admitted_at or 0.0),
                c.wl.id,
            )
        )
        return out

    # selection ------------------------------------------------------------------------------

    def find_targets(
        self,
        wl: Workload,
        cq: ClusterQueue,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
    ) -> list[Target] | None:
        """Victims that let `wl` fit with `request` in `cq`, or None if there are none."""
        node = self.tree.cqs[cq.name]
        cands = self.candidates(wl, cq, frs)
        if not cands:
            return None
        same = [c for c in cands if c.cq == cq.name or c.evicting]
        chosen: list[Candidate] | None
        bwc = cq.preemption.borrow_within_cohort
        if len(same) == len(cands):
            chosen = self._minimal(node, request, frs, cands, borrowing=True, threshold=None)
        elif bwc.policy is not PreemptionPolicy.NEVER:
            threshold = wl.priority
            if bwc.max_priority_threshold is not None and bwc.max_priority_threshold < threshold:
                threshold = bwc.max_priority_threshold + 1
            pool = cands
            if not self._under_nominal(node, frs):
                pool = [
                    c for c in cands if c.cq == cq.name or c.evicting or c.wl.priority < threshold
                ]
            chosen = self._minimal(node, request, frs, pool, borrowing=True, threshold=threshold)
        else:
            chosen = None
            if self._under_nominal(node, frs):
                chosen = self._minimal(node, request, frs, cands, borrowing=False, threshold=None)
            if not chosen:
                chosen = self._minimal(node, request, frs, same, borrowing=True, threshold=None)
        if not chosen:
            return None
        borrows = self._check_fits(node, request, chosen)
        return [Target(c, self._reason(c, cq.name, borrows)) for c in chosen]

    def _under_nominal(self, node: QuotaNode, frs: set[FlavorResource]) -> bool:
        return all(node.usage.get(fr, 0) < node.subtree.get(fr, 0) for fr in frs)

    def _minimal(
        self,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
        cands: list[Candidate],
        *,
        borrowing: bool,
        threshold: int | None,
    ) -> list[Candidate] | None:
        tree = self.tree
        targets: list[Candidate] = []
        ok = False
        for c in cands:
            if c.node is not node and not c.evicting:
                if not any(tree.is_borrowing(c.node, fr) for fr in frs):
                    continue
                if threshold is not None and c.wl.priority >= threshold:
                    # Preempting at or above the threshold is allowed only without borrowing;
                    # candidates are in priority order, so this target survives minimisation.
                    borrowing = False
            tree.remove_usage(c.node, c.usage)
            targets.append(c)
            if fits(tree, node, request, borrowing=borrowing):
                ok = True
                break
        if not ok:
            for c in targets:
                tree.add_usage(c.node, c.usage)
            return None
        # Minimise: put targets back, newest decision first, while the preemptor still fits.
        kept = [targets[-1]]
        for c in reversed(targets[:-1]):
            tree.add_usage(c.node, c.usage)
            if fits(tree, node, request, borrowing=borrowing):
                continue
            tree.remove_usage(c.node, c.usage)
            kept.append(c)
        for c in kept:
            tree.add_usage(c.node, c.usage)
        kept.reverse()
        return kept

    def _check_fits(
        self, node: QuotaNode, request: Mapping[FlavorResource, int], chosen: list[Candidate]
    ) -> bool:
        """Verify the plan lets the preemptor fit; return whether it will then borrow."""
        tree = self.tree
        for c in chosen:
            tree.remove_usage(c.node, c.usage)
        ok = fits(tree, node, request, borrowing=True)
        borrows = any(tree.is_borrowing(node, fr, amount) for fr, amount in request.items())
        for c in chosen:
            tree.add_usage(c.node, c.usage)
        if not ok:  # pragma: no cover - a bug, never a policy outcome
            raise AssertionError("preemption plan does not let the preemptor fit")
        return borrows

    @staticmethod
    def _reason(c: Candidate, own: ClusterQueueName, borrows: bool) -> PreemptionReason:
        if c.cq == own:
            return PreemptionReason.IN_CLUSTER_QUEUE
        if borrows:
            return PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        return PreemptionReason.IN_COHORT_RECLAMATION
