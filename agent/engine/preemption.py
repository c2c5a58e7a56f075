"""Classic preemption: which admitted workloads to evict so that a pending one fits.

Owns `Preemptor.find_targets`, called by `cycle` when flavor assignment says a workload
fits only by preempting. It follows kueue.md §2.5 and Kueue's preemption concept page:

- candidates are admitted workloads of the preemptor's cluster queue allowed by
  `withinClusterQueue`, plus workloads of other cluster queues in the same cohort tree that
  are borrowing on a contested flavor-resource, allowed by `reclaimWithinCohort`; workloads
  already being evicted come first, as they free their quota anyway;
- candidates are ordered: evicting first, other queues before the own queue, lower priority
  first, most recently admitted first, then id;
- candidates protected by their queue's `minAdmitSeconds` are set aside (after the policy
  checks, so protection is only ever the last reason): admitted less than that long ago and
  not being evicted. In the preemptor's own queue a workload admitted after the preemptor
  was queued passed it in that queue's order (it took room the preemptor could not use yet)
  and gets no protection from it, so protection within a queue holds a preemptor back at
  most `minAdmitSeconds` past its queueing time. Reclaim candidates in other queues are
  protected whenever they are young: their admission followed the cohort's order;
- targets are chosen greedily in four steps — (1) if every candidate is in the own queue,
  allowing borrowing; (2) with borrowWithinCohort, under its maxPriorityThreshold, allowing
  borrowing; (3) if the own queue is under nominal, any candidates, not borrowing; (4) own
  queue only, allowing borrowing — and then minimised by adding targets back in reverse
  order while the preemptor still fits.

Removal is simulated on the cycle's `QuotaTree` and always restored, so the tree is
unchanged on return. A returned plan always lets the preemptor fit: that is checked before
the plan leaves this module, not assumed. When no plan exists but one would without
protection, the search says so (`Protected`: which victims, and when the first protection
ends), so the cycle can keep the preemptor pending with that reason and wake up then.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter

from agent.engine.fair_sharing import fair_level, tournament_key, weighted_share
from agent.engine.quota import QuotaNode, QuotaTree
from agent.engine.result import PreemptionReason, ProtectedVictim
from agent.engine.snapshot import (
    ClusterQueue,
    ClusterQueueName,
    FairSharing,
    FairSharingStrategy,
    FlavorResource,
    LocalQueueKey,
    PreemptionPolicy,
    Workload,
)

__all__ = ["Candidate", "Preemptor", "Protected", "Target", "fits"]

_KEY = attrgetter("key")
_SHARE_SLACK = 1e-9
"""Relative slack when a share is compared with a fair level: both are sums and quotients
of floats, and a share exactly at the level (the common case: a job's worth) must count."""


class Candidate:
    """An admitted workload as a possible victim, with its usage precomputed once per cycle."""

    __slots__ = ("cq", "evicting", "key", "node", "protected_until", "usage", "wl")

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
        # Evicting first, then lower priority, the most recently admitted, id (kueue.md §2.5).
        self.key = (not wl.evicting, wl.priority, -(wl.admitted_at or 0.0), wl.id)
        self.protected_until: float | None = None
        """End of its minAdmitSeconds protection, if that is still in the future."""

    def shielded_from(self, preemptor: Workload, *, same_queue: bool) -> bool:
        """Whether protection keeps it from `preemptor`. In the preemptor's own queue only if
        it was admitted before the preemptor was queued there: admitted later, it passed the
        preemptor in their queue's order, taking room the preemptor could not use yet."""
        if self.protected_until is None:
            return False
        admitted = self.wl.admitted_at
        return not same_queue or (admitted is not None and admitted < preemptor.queued_here_at)

    def uses(self, frs: tuple[FlavorResource, ...]) -> bool:
        # A set operation in C: called for every candidate of every victim search.
        return not self.usage.keys().isdisjoint(frs)

    def __repr__(self) -> str:
        return f"Candidate({self.wl.id!r} in {self.cq!r})"


@dataclass(frozen=True, slots=True)
class Target:
    candidate: Candidate
    reason: PreemptionReason


@dataclass(frozen=True, slots=True)
class Protected:
    """No plan, only because of protection: preempting `victims` (protected) would make room."""

    victims: tuple[ProtectedVictim, ...]
    retry_at: float
    """The earliest end of protection among the candidates set aside: the search may find a
    plan from then on (not necessarily with `victims`, whose protection may last longer)."""


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

    __slots__ = (
        "admitted",
        "borrowing",
        "by_cq",
        "cq_specs",
        "evicting_cqs",
        "fair",
        "leaving",
        "members",
        "now",
        "protecting",
        "queue_usage",
        "shielded",
        "taken",
        "tree",
        "waiting",
    )

    def __init__(
        self,
        *,
        tree: QuotaTree,
        cq_specs: Mapping[ClusterQueueName, ClusterQueue],
        admitted: Mapping[str, Iterable[Workload]],
        evicting_cqs: set[str],
        now: float,
        fair: FairSharing | None = None,
        queue_usage: Mapping[LocalQueueKey, float] | None = None,
    ) -> None:
        self.tree = tree
        self.queue_usage = queue_usage or {}
        """Local queues' usage scores under admission fair sharing: in a cluster queue that
        orders by it, victims of the heaviest local queue go first (Kueue)."""
        self.fair = fair
        """Fair sharing: victims in other queues are chosen by its strategies (`_select_fair`)."""
        self.leaving: dict[QuotaNode, dict[FlavorResource, int]] = {}
        """Under fair sharing, the usage of the victims taken this cycle by queue. They still
        hold their quota on the tree (and their preemptors hold a reservation too), but a
        fair-sharing search runs without them: otherwise every later preemptor of the cycle
        would see their queue's share as if nothing had been taken from it, and would have
        to free the earlier preemptors' reservations as well as its own request."""
        self.cq_specs = cq_specs
        self.admitted = admitted
        """The admitted workloads by cluster queue (their usage is on `tree` already)."""
        self.by_cq: dict[str, list[Candidate]] = {}
        """The candidates of the queues a search looked at, in preemption order: built the
        first time, so a cycle that preempts nothing never builds or sorts any."""
        self.evicting_cqs = evicting_cqs
        """Queues with a workload being evicted."""
        self.protecting = any(spec.preemption.min_admit_seconds > 0 for spec in cq_specs.values())
        """Whether any queue protects its workloads (minAdmitSeconds): only then may a
        search set candidates aside."""
        self.now = now
        self.taken: set[str] = set()
        """Victims already chosen this cycle: nobody else may count on them."""
        self.shielded = 0
        """How many times a candidate was set aside for protection (this cycle): a search that
        set none aside did not depend on the preemptor's queueing time."""
        self.members: dict[int, list[QuotaNode]] = {}
        self.borrowing: dict[tuple[int, tuple[FlavorResource, ...]], set[QuotaNode]] = {}
        self.waiting: set[int] = set()
        """Ids of the cluster queues with pending work this cycle and of every cohort above
        them (`wait_for_more`): the fair level shares the cohort among these."""

    def wait_for_more(self, queues: Iterable[ClusterQueueName]) -> None:
        """The cluster queues with pending work this cycle (set once, before any search)."""
        waiting = self.waiting
        for name in queues:
            n: QuotaNode | None = self.tree.cqs.get(name)
            while n is not None and id(n) not in waiting:
                waiting.add(id(n))
                n = n.parent

    def _queue(self, name: str) -> list[Candidate]:
        """The admitted workloads of one cluster queue as candidates, in preemption order."""
        cands = self.by_cq.get(name)
        if cands is not None:
            return cands
        cq = ClusterQueueName(name)
        node = self.tree.cqs[cq]
        cands = []
        for wl in self.admitted.get(name, ()):
            assert wl.admission is not None
            cands.append(Candidate(wl, cq, node, wl.admission.total))
        spec = self.cq_specs.get(cq)
        usage = self.queue_usage
        if usage and spec is not None and spec.admission_fair_sharing:
            # Kueue: in one cluster queue, the local queue with more usage gives first, then
            # priority and time as always (evicting ones stay first).
            cands.sort(key=lambda c: (c.key[0], -usage.get(c.wl.local_queue, 0.0), *c.key[1:]))
        else:
            cands.sort(key=_KEY)
        min_admit = spec.preemption.min_admit_seconds if spec is not None else 0.0
        if min_admit > 0:
            now = self.now
            for c in cands:
                admitted = c.wl.admitted_at
                # Being evicted, it runs no more: nothing left to protect.
                if not c.evicting and admitted is not None and admitted + min_admit > now:
                    c.protected_until = admitted + min_admit
        self.by_cq[name] = cands
        return cands

    # candidates -----------------------------------------------------------------------------

    def _cohort_members(self, node: QuotaNode) -> list[QuotaNode]:
        """Every cluster queue in the node's cohort tree (cached per root for the cycle)."""
        if node.parent is None:
            return []
        root = node.root()
        members = self.members.get(id(root))
        if members is None:
            members = []
            stack = [root]
            while stack:
                n = stack.pop()
                for child in n.children:
                    (members if child.is_cq else stack).append(child)
            self.members[id(root)] = members
        return members

    def _borrowers(
        self, node: QuotaNode, needed: tuple[FlavorResource, ...]
    ) -> set[QuotaNode] | frozenset[QuotaNode]:
        """Queues the node may reclaim from: borrowing on a needed cell (cached until `changed`).

        With hierarchical cohorts the queue's whole subtree below the common ancestor must be
        borrowing too: a queue borrowing from a sibling inside a sub-cohort that stays within
        its own quota takes nothing from the preemptor's side of the tree.
        """
        key = (id(node), needed)
        found = self.borrowing.get(key)
        if found is None:
            tree = self.tree
            ancestors: set[int] = set()
            n: QuotaNode | None = node.parent
            while n is not None:
                ancestors.add(id(n))
                n = n.parent
            found = set()
            for m in self._cohort_members(node):
                # (`QuotaTree.is_borrowing`, inlined: every member of the cohort, for every
                # search after the tree changed.)
                used, nominal = m.usage, m.subtree
                if not any(used.get(fr, 0) > nominal.get(fr, 0) for fr in needed):
                    continue
                # Climb to the child of the lowest common ancestor on m's side.
                top = m
                while top.parent is not None and id(top.parent) not in ancestors:
                    top = top.parent
                if top is m or any(tree.is_borrowing(top, fr) for fr in needed):
                    found.add(m)
            self.borrowing[key] = found
        return found

    def take(self, c: Candidate) -> None:
        """A victim chosen by the cycle: nobody else may count on it."""
        self.taken.add(c.wl.id)
        queue = self.by_cq.get(c.cq)
        if queue is not None and c in queue:
            # Out of its queue's list, so later searches of the cycle do not walk past it.
            queue.remove(c)
        if self.fair is not None:
            leaving = self.leaving.setdefault(c.node, {})
            for fr, amount in c.usage.items():
                leaving[fr] = leaving.get(fr, 0) + amount

    def _no_fair_victim(
        self,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
    ) -> bool:
        """Whether no strategy could allow any victim, known without listing candidates:
        nothing is being evicted, the own queue offers none (withinClusterQueue Never), and
        no borrowing queue's side holds a share at least the preemptor's side would have
        with the request admitted. Every strategy needs that (a victim's queue's share only
        falls when it is taken; `MultiQTowardFairShare` needs the preemptor's side at most
        the level and the victim's at least it), so the full search would find nothing
        either; in a cohort at its fair shares this spares every head's search of every
        cycle."""
        if self.evicting_cqs or cq.preemption.within_cluster_queue is not PreemptionPolicy.NEVER:
            return False
        if cq.preemption.reclaim_within_cohort is PreemptionPolicy.NEVER:
            return True
        tree = self.tree
        borrowers = self._borrowers(node, tuple(frs))
        # The preemptor's side's share with the request, once per side (one side in a
        # flat cohort, whatever the number of borrowers).
        shares: dict[QuotaNode, float] = {}
        for member in borrowers:
            if member is node:
                continue
            mine, theirs = self._sides(node, member)
            preemptor_share = shares.get(mine)
            if preemptor_share is None:
                tree.add_usage(node, request)
                preemptor_share = shares[mine] = weighted_share(mine)
                tree.remove_usage(node, request)
            if weighted_share(theirs) >= preemptor_share:
                return False
        return True

    @staticmethod
    def _sides(preemptor: QuotaNode, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The children of the two queues' lowest common cohort on either side (the queues
        themselves when they share their cohort): hierarchical fair sharing compares these."""
        ancestors: list[QuotaNode] = []
        n: QuotaNode | None = preemptor
        while n is not None:
            ancestors.append(n)
            n = n.parent
        index = {id(a): i for i, a in enumerate(ancestors)}
        t = target
        while t.parent is not None and id(t.parent) not in index:
            t = t.parent
        if t.parent is None:  # different trees: never candidates of each other
            return preemptor, target
        return ancestors[index[id(t.parent)] - 1], t

    def changed(self) -> None:
        """The cycle committed usage (an admission or a reservation): borrowing may differ."""
        self.borrowing.clear()

    def candidates(
        self,
        wl: Workload,
        cq: ClusterQueue,
        frs: set[FlavorResource],
        shielded: list[Candidate] | None,
    ) -> list[Candidate]:
        """The policies' candidates in preemption order; those protected from `wl` go to
        `shielded` instead (None: protection ignored, to see whether it is what blocks)."""
        tree = self.tree
        node = tree.cqs[cq.name]
        policy = cq.preemption
        taken = self.taken
        needed = tuple(frs)
        prio = wl.priority
        evicting, own = self._own_candidates(wl, cq, needed, shielded)
        others: list[Candidate] = []
        reclaim = policy.reclaim_within_cohort
        borrowers = self._borrowers(node, needed) if reclaim is not PreemptionPolicy.NEVER else ()
        # Only borrowing queues and queues with workloads already being evicted can offer
        # victims; the rest of a large cohort is never looked at.
        members = set(borrowers)
        if self.evicting_cqs:
            members.update(m for m in self._cohort_members(node) if m.name in self.evicting_cqs)
        members.discard(node)
        anyone = reclaim is PreemptionPolicy.ANY
        for member in members:
            borrowing = member in borrowers
            for c in self._queue(member.name):
                if not (c.evicting or borrowing):
                    # Only evicting workloads of a queue that is not borrowing count; they
                    # are sorted first, so the rest of this queue can be skipped.
                    break
                # (`Candidate.uses`, inlined: this loop runs for every candidate of every
                # victim search of a cycle.)
                if c.usage.keys().isdisjoint(needed) or c.wl.id in taken:
                    continue
                if c.evicting:
                    evicting.append(c)
                elif anyone or c.wl.priority < prio:
                    if shielded is not None and c.shielded_from(wl, same_queue=False):
                        shielded.append(c)
                        self.shielded += 1
                    else:
                        others.append(c)
        evicting.sort(key=_KEY)
        others.sort(key=_KEY)
        return evicting + others + own

    def _own_candidates(
        self,
        wl: Workload,
        cq: ClusterQueue,
        needed: tuple[FlavorResource, ...],
        shielded: list[Candidate] | None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """The candidates of the preemptor's own queue: those being evicted, and those
        `withinClusterQueue` allows (in preemption order); protected ones go to `shielded`
        as in `candidates`."""
        taken = self.taken
        prio = wl.priority
        evicting: list[Candidate] = []
        own: list[Candidate] = []
        within = cq.preemption.within_cluster_queue
        for c in self._queue(cq.name):
            if c.wl.id in taken or not c.uses(needed):
                continue
            if c.evicting:
                evicting.append(c)
                continue
            if within is PreemptionPolicy.NEVER:
                continue
            cp = c.wl.priority
            if cp < prio or (
                cp == prio
                and within is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                and wl.queue_timestamp < c.wl.queue_timestamp
            ):
                if shielded is not None and c.shielded_from(wl, same_queue=True):
                    shielded.append(c)
                    self.shielded += 1
                else:
                    own.append(c)
        return evicting, own

    # selection ------------------------------------------------------------------------------

    def find_targets(
        self,
        wl: Workload,
        cq: ClusterQueue,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
    ) -> list[Target] | Protected | None:
        """Victims that let `wl` fit with `request` in `cq`; `Protected` if only protection
        stands in the way; None if preempting cannot make room."""
        if self.fair is None or not self.leaving:
            return self._find_targets(wl, cq, request, frs)
        tree = self.tree
        for n, usage in self.leaving.items():
            tree.remove_usage(n, usage)
        self.borrowing.clear()
        try:
            return self._find_targets(wl, cq, request, frs)
        finally:
            for n, usage in self.leaving.items():
                tree.add_usage(n, usage)
            self.borrowing.clear()

    def _find_targets(
        self,
        wl: Workload,
        cq: ClusterQueue,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
    ) -> list[Target] | Protected | None:
        node = self.tree.cqs[cq.name]
        if self.fair is not None and self._no_fair_victim(cq, node, request, frs):
            return None
        if self._plain(cq):
            _, own = self._own_candidates(wl, cq, tuple(frs), None)
            if self._own_queue_decides(node, request, frs, own):
                found = self._minimal(node, request, frs, own, borrowing=True, threshold=None)
                if not found:
                    return None
                borrows = self._check_fits(node, request, found)
                return [Target(c, self.reason_for(c, cq.name, borrows=borrows)) for c in found]
        shielded: list[Candidate] = []
        cands = self.candidates(wl, cq, frs, shielded)
        chosen = self._select(wl, cq, node, request, frs, cands) if cands else None
        if chosen:
            borrows = self._check_fits(node, request, chosen)
            fair = self.fair is not None
            return [
                Target(c, self.reason_for(c, cq.name, borrows=borrows, fair=fair)) for c in chosen
            ]
        if not shielded:
            return None
        plan = self._select(wl, cq, node, request, frs, self.candidates(wl, cq, frs, None))
        if not plan:
            return None
        ids = {id(c) for c in shielded}
        return Protected(
            tuple(
                ProtectedVictim(c.wl.id, c.cq, c.protected_until)
                for c in plan
                if id(c) in ids and c.protected_until is not None
            ),
            min(c.protected_until for c in shielded if c.protected_until is not None),
        )

    def _select(
        self,
        wl: Workload,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
        cands: list[Candidate],
    ) -> list[Candidate] | None:
        """The greedy four-step selection, then minimisation (kueue.md §2.5)."""
        same = [c for c in cands if c.cq == cq.name or c.evicting]
        chosen: list[Candidate] | None
        if self.fair is not None and len(same) != len(cands):
            return self._select_fair(self.fair, node, request, cands)
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
        return chosen

    def _select_fair(
        self,
        fair: FairSharing,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        cands: list[Candidate],
    ) -> list[Candidate] | None:
        """Fair-sharing selection (kueue.md §3.1, §3.2): candidates being evicted first; then,
        repeatedly, the next candidate of the queue that wins the tournament from the top
        (highest weighted share, compared at the lowest common cohort). One of the
        preemptor's own queue is taken as the policies allowed it; one of another queue only
        if the strategy allows it, comparing the two sides' nodes below their lowest common
        cohort (else that queue is set aside for the next strategy). Stops as soon as the
        preemptor fits, then minimises as `_minimal` does."""
        tree = self.tree
        targets: list[Candidate] = []
        pools: dict[QuotaNode, list[Candidate]] = {}
        for c in cands:
            if c.evicting:
                targets.append(c)
            else:
                pools.setdefault(c.node, []).append(c)
        for c in targets:
            tree.remove_usage(c.node, c.usage)
        ok = fits(tree, node, request, borrowing=True)
        for strategy in fair.strategies:
            if ok:
                break
            ok = self._fair_pass(strategy, node, request, pools, targets)
        if not ok or not targets:
            # Fitting with no victim at all: room the victims taken earlier this cycle free
            # beyond their preemptors' requests. No plan now; the next cycle admits it.
            for c in targets:
                tree.add_usage(c.node, c.usage)
            return None
        return _minimised(tree, node, request, targets, borrowing=True)

    def _fair_pass(
        self,
        strategy: FairSharingStrategy,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        pools: dict[QuotaNode, list[Candidate]],
        targets: list[Candidate],
    ) -> bool:
        """One strategy over the remaining candidates (`pools`, consumed as taken; queues the
        strategy refuses keep theirs for the next strategy). Appends to `targets` with their
        usage removed from the tree; returns whether the preemptor fits."""
        tree = self.tree
        open_queues = {n for n, cs in pools.items() if cs}
        while open_queues:
            target_q = max(open_queues, key=tournament_key)
            pool = pools[target_q]
            c = pool[0]
            if target_q is not node:
                mine, theirs = self._sides(node, target_q)
                tree.add_usage(node, request)
                preemptor_share = weighted_share(mine)
                tree.remove_usage(node, request)
                before = weighted_share(theirs)
                tree.remove_usage(c.node, c.usage)
                after = weighted_share(theirs)
                if strategy is FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                    allowed = preemptor_share <= after
                elif strategy is FairSharingStrategy.LESS_THAN_INITIAL_SHARE:
                    allowed = preemptor_share < before
                else:
                    allowed = self._toward_fair_share(node, request, mine, theirs, after)
                if not allowed:
                    tree.add_usage(c.node, c.usage)
                    open_queues.discard(target_q)
                    continue
            else:
                tree.remove_usage(c.node, c.usage)
            pool.pop(0)
            if not pool:
                open_queues.discard(target_q)
            targets.append(c)
            if fits(tree, node, request, borrowing=True):
                return True
        return False

    def _toward_fair_share(
        self,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        mine: QuotaNode,
        theirs: QuotaNode,
        theirs_after: float,
    ) -> bool:
        """`MultiQTowardFairShare`, judged with the victim already removed from the tree:
        with the request admitted, the preemptor's side ends at most at the fair level of
        the cohort the two sides meet in, and the victim's side stays at least at it (at
        least at 0 for weight 0, whose target is nothing). So neither moves past its target,
        whoever else is waiting."""
        cohort = mine.parent
        if cohort is None:  # pragma: no cover - candidates of other queues share a cohort
            return False
        tree = self.tree
        tree.add_usage(node, request)
        try:
            mine_after = weighted_share(mine)
            # The preemptor's queue is one of the cycle's waiting queues, so its side waits.
            level = fair_level(cohort, self.waiting)
        finally:
            tree.remove_usage(node, request)
        if math.isinf(level):  # nothing bounds it: the two sides alone decide
            return mine_after <= theirs_after
        slack = _SHARE_SLACK * max(level, 1.0)
        if mine.weight <= 0:
            preemptor_ok = mine_after <= 0.0
        else:
            preemptor_ok = mine_after <= level + slack
        victim_ok = theirs.weight <= 0 or theirs_after + slack >= level
        return preemptor_ok and victim_ok

    def _plain(self, cq: ClusterQueue) -> bool:
        """Classic rules without borrowWithinCohort, nothing being evicted, no queue that
        protects its workloads: no candidate is set aside, and the own queue's candidates
        are all of `_select`'s `same`."""
        return (
            self.fair is None
            and not self.evicting_cqs
            and not self.protecting
            and cq.preemption.borrow_within_cohort.policy is PreemptionPolicy.NEVER
        )

    def _own_queue_decides(
        self,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        frs: set[FlavorResource],
        own: list[Candidate],
    ) -> bool:
        """Under `_plain` rules, whether `_select` ends in its last step (victims from the
        own queue only, `own`) whatever other queues offer — known without listing their
        candidates (in a large cohort, hundreds per search): the step before it, which may
        take others' workloads without borrowing, is tried only below nominal on every
        contested cell, and fails when even without all of `own` the request exceeds the
        nominal quota of a cell."""
        if not self._under_nominal(node, frs):
            return True
        used, nominal = node.usage, node.subtree
        for fr, amount in request.items():
            freed = sum(c.usage.get(fr, 0) for c in own)
            if used.get(fr, 0) - freed + amount > nominal.get(fr, 0):
                return True
        return False

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
        # Removing victims raises availability by at most what they use: if even all of
        # them together are not enough, skip the simulation.
        for fr, amount in request.items():
            if amount > tree.available(node, fr) + sum(c.usage.get(fr, 0) for c in cands):
                return None
            if not borrowing:
                own = sum(c.usage.get(fr, 0) for c in cands if c.node is node)
                if node.usage.get(fr, 0) - own + amount > node.subtree.get(fr, 0):
                    return None
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
        return _minimised(tree, node, request, targets, borrowing=borrowing)

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
    def reason_for(
        c: Candidate, own: ClusterQueueName, *, borrows: bool, fair: bool = False
    ) -> PreemptionReason:
        """Kueue's reasons; under fair sharing (`fair`) every victim in another queue was
        taken by share, whatever the preemptor borrows (Kueue's fairPreemptions)."""
        if c.cq == own:
            return PreemptionReason.IN_CLUSTER_QUEUE
        if fair:
            return PreemptionReason.IN_COHORT_FAIR_SHARING
        if borrows:
            return PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        return PreemptionReason.IN_COHORT_RECLAMATION


def _minimised(
    tree: QuotaTree,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    targets: list[Candidate],
    *,
    borrowing: bool,
) -> list[Candidate]:
    """The targets the preemptor needs out of `targets`, whose usage is removed from `tree`
    on entry: put back one by one, newest decision first, those it fits without. On return
    every target's usage is back in `tree` (removal is only ever simulated)."""
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
