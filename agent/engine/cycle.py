"""The admission cycle: one pure pass from a snapshot and `now` to a `CycleResult`.

Owns `schedule`, the engine's entry point, called by the agent's loop on every event
(arrival, completion, eviction, configuration change) and by the benchmarks' simulated
clock. The cycle is a list of numbered steps, each a named helper:

1. build the quota tree and the preemption candidates from the admitted workloads (and,
   when a flavor has a topology, the nodes' free room: `topology.Placer`);
2. time- and policy-driven evictions (pods-ready timeouts, drains, max execution time);
3. route pending workloads to their cluster queues, in queue order, and gate those that
   cannot be considered now (missing or stopped queues, namespace selectors, backoff,
   inactive cluster queues) with a reason;
4. rounds: take the next head of every cluster queue, assign flavors, order the heads
   (non-borrowing first, then priority, then FIFO) and process each against the tree as it
   changes — admit, preempt (then wait, sticky), or keep pending with a reason; a pod set
   whose flavor has a topology is placed after its flavor is chosen, and when it does not
   fit, victims that free one domain may be chosen (within the queue's policies). Unlike
   Kueue, which pops one head per cluster queue per cycle, rounds repeat until every queue
   is exhausted or blocked, so a deep queue drains in one cycle; and so that "non-borrowing
   first" still holds across those rounds, the rounds run in two phases: heads that fit
   their queue's own nominal quota first, then everyone;
5. collect pending reasons and the next time-based wakeup; queue positions are computed from
   the routed queues only when the result is asked for them.

Within a cycle usage only grows (admissions and reservations add; preemption simulation
restores; the same holds for the nodes' room), so a workload shape that failed in a cluster
queue fails again for the rest of the cycle: failures are memoised per (cluster queue, shape,
priority), and a victim search that found nothing spares the search for any larger request
of the same queue and priority.
This keeps a cycle over tens of thousands of pending workloads near linear. The memo is a
per-cycle verdict, like Kueue evaluating each head once per cycle: an admission later in
the same cycle can make another queue borrow and so offer new victims; the workload sees
them in the next cycle (every event runs one).

A workload that must preempt reserves its quota for the rest of the cycle while its victims
still hold theirs (the tree is briefly overbooked), so nothing admitted later in the cycle
can take what the victims release, and no two preemptors count on the same victim.

A workload that could preempt but for its victims' minAdmitSeconds protection stays pending
(PreemptionProtected, naming them and when they are free) and sets the cycle's next wakeup to
the earliest end of protection among the candidates set aside. In its own queue protection
never applies to workloads admitted after the preemptor was queued there, so one queued
later meets at least as much protection: the memos stay exact because a verdict that
depended on protection is only reused for workloads queued here no earlier than the one it
was found for.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import attrgetter, itemgetter
from typing import Any

from agent.engine.carry import INACTIVE, Carry, QueueIndex, no_cluster_queue
from agent.engine.fair_sharing import tournament_key
from agent.engine.flavors import Assignment, Mode, QueueFlavors, assign_flavors
from agent.engine.gang import largest_admissible, reducible_pod_set
from agent.engine.ordering import EntryKey, entry_key, namespace_selected
from agent.engine.podsready import blocking_workload, evictions
from agent.engine.preemption import Preemptor, Protected, Target
from agent.engine.quota import QuotaTree
from agent.engine.result import (
    Admit,
    CycleResult,
    Eviction,
    PendingCode,
    PendingReason,
    Preemption,
    ProtectedVictim,
    Unblock,
    describe_shortfalls,
    template,
)
from agent.engine.snapshot import (
    Admission,
    ClusterQueue,
    ClusterQueueName,
    FairSharingStrategy,
    FlavorName,
    FlavorResource,
    LocalQueueKey,
    Namespace,
    OrderKey,
    PodSetAssignment,
    PreemptionPolicy,
    QueueingStrategy,
    Snapshot,
    StopPolicy,
    Workload,
    WorkloadId,
)
from agent.engine.topology import Ask, Placed, Placer, Unplaced

__all__ = ["schedule", "schedule_incremental"]

_ORDER = attrgetter("order_key")
_ENTRY = itemgetter(0)
"""A round's heads sort by their entry key (a C-level key: every pending workload is a head)."""
# Enum members read for every pending workload, as module constants: in Python 3.11 reading
# a member off its Enum class costs about ten times a global lookup.
_FIT, _PREEMPT, _NO_FIT = Mode.FIT, Mode.PREEMPT, Mode.NO_FIT
_STRICT_FIFO = QueueingStrategy.STRICT_FIFO
_LOWER_OR_NEWER_EQUAL = PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
_NO_MATCHING_FLAVOR = PendingCode.NO_MATCHING_FLAVOR
_EXCEEDS_MAX_QUOTA = PendingCode.EXCEEDS_MAX_QUOTA
_NO_PREEMPTION_CANDIDATES = PendingCode.NO_PREEMPTION_CANDIDATES
_WAITING_FOR_QUOTA = PendingCode.WAITING_FOR_QUOTA
_QUOTA_CHANGED, _QUOTA_RELEASED = Unblock.QUOTA_CHANGED, Unblock.QUOTA_RELEASED


def schedule(snapshot: Snapshot, now: float) -> CycleResult:
    """Run one admission cycle over `snapshot` at time `now`. Pure: reads only its arguments."""
    return _Cycle(snapshot, now).run()


def schedule_incremental(
    snapshot: Snapshot,
    now: float,
    carry: Carry | None = None,
    changed: Iterable[WorkloadId] | None = None,
) -> tuple[CycleResult, Carry]:
    """The same cycle as `schedule`, with the same decisions, at the cost of what changed:
    `carry` is what the last call returned (None: the first cycle), and `changed` the ids
    whose workload object may differ since that call's snapshot — added, replaced or gone
    (None: unknown; the carry is then rebuilt from the whole snapshot).

    The carry is handed over: the returned one is the one to pass next time (the one passed
    in is updated, not copied). The result's `pending` is a read-only view over the queues;
    its `pending_changed` holds the workloads whose reason may differ from the last cycle's,
    with their reasons (None after a rebuild: any)."""
    ids = None if changed is None else set(changed)
    if carry is None:
        carry = Carry()
    incremental = carry.refresh(snapshot, ids)
    result = _Cycle(snapshot, now, carry, ids if incremental else None).run()
    carry.previous = result.pending
    return result, carry


class _Outcome:
    """The evaluation of one workload: an assignment, victims if it must preempt, and where
    its pods go when a flavor has a topology."""

    __slots__ = ("assignment", "counts", "freed", "placed", "targets")

    def __init__(
        self,
        assignment: Assignment,
        targets: list[Target] | None,
        counts: tuple[int, ...] | None,
        placed: list[Placed] | None = None,
        freed: str | None = None,
    ) -> None:
        self.assignment = assignment
        self.targets = targets
        self.counts = counts
        self.placed = placed
        """The pod sets' topology placements (not holding capacity until applied)."""
        self.freed = freed
        """The domain the victims free, when they are chosen for the topology."""

    @property
    def admissible(self) -> bool:
        a = self.assignment
        return a.mode is Mode.FIT or (a.mode is Mode.PREEMPT and bool(self.targets))


class _Cycle:
    def __init__(
        self,
        snapshot: Snapshot,
        now: float,
        carry: Carry | None = None,
        changed: set[WorkloadId] | None = None,
    ) -> None:
        self.snap = snapshot
        self.now = now
        self.tree = QuotaTree(snapshot.cluster_queues, snapshot.cohorts)
        self.admitted: list[Admit] = []
        self.preempted: list[Preemption] = []
        self.evicted: list[Eviction] = []
        self.pending: dict[WorkloadId, PendingReason] = {}
        self.buckets: dict[ClusterQueueName, list[Workload]] = {}
        self.new_preemptors: set[WorkloadId] = set()
        self.wakeup: float | None = None
        self.failed: dict[tuple[str, int], tuple[tuple[object, ...], float, PendingReason]] = {}
        """(cluster queue, shape hash) → (shape, age, reason) of a failure; see `_age`."""
        self.blocker: Workload | None = None
        self.preemptor: Preemptor
        self.nominated: dict[WorkloadId, Admission] = {}
        self.queue_flavors: dict[ClusterQueueName, QueueFlavors] = {}
        self.hopeless: dict[tuple[str, int], list[tuple[dict[FlavorResource, int], float]]] = {}
        self.protected: list[Protected] = []
        """What protection kept the workload being processed from preempting (any flavor,
        any count tried)."""
        self.lq_gates: dict[LocalQueueKey, PendingReason | None] = {}
        self.ns_gates: dict[tuple[ClusterQueueName, str], PendingReason | None] = {}
        self.queue_gates: dict[LocalQueueKey, PendingReason | None] = {}
        """Per local queue, the first of its gate and its namespace's (`_workload_gate`)."""
        self.templates: dict[tuple[ClusterQueueName, PendingCode], str] = {}
        """The message templates of `_failure`, per queue and code."""
        self.carry = carry
        self.changed = changed
        self.tails: dict[ClusterQueueName, int] = {}
        """Incremental only: where each queue's memoised tail starts (see `_tail_memoised`)."""
        self.memo_version: dict[ClusterQueueName, int] = {}
        self.tail_tried: dict[ClusterQueueName, int] = {}
        self.running: list[Workload] = []
        self.running_from_carry = False
        """Whether `running` is the carry's (its eviction index then names the due ones)."""
        self.waiting: list[Workload] = []
        self.placer: Placer | None = None
        """Node capacity for flavors with a topology (None when no flavor has one)."""
        if any(f.topology_name is not None for f in snapshot.flavors.values()):
            if carry is None:
                self.placer = Placer()
            else:
                if carry.placer is None:
                    carry.placer = Placer()
                self.placer = carry.placer
        ready = snapshot.config.wait_for_pods_ready
        if carry is not None and not (ready.enabled and ready.block_admission):
            self.running = list(carry.running.values())
            self.running_from_carry = True
            return
        # One pass over the workloads; every later step walks only the part it needs. (With
        # blockAdmission the first unready admitted workload in the snapshot's order blocks,
        # so the incremental cycle walks them in that order too.)
        for wl in snapshot.workloads.values():
            if wl.admission is None:
                if carry is None:
                    self.waiting.append(wl)
            else:
                self.running.append(wl)

    # step 1 -----------------------------------------------------------------------------------

    def _load_admitted(self) -> None:
        # Usage is summed per queue and put on the tree once per queue (the same usage as
        # adding workload by workload: what a node passes up to its parent depends only on
        # its total), and preemption candidates are built only for the queues a search looks
        # at. The carry keeps both sums and groups as workloads change; without one, every
        # cycle walks every admitted workload, so that loop stays lean.
        tree = self.tree
        by_cq: dict[str, Iterable[Workload]] = {}
        evicting: set[str] = set()
        carry = self.carry
        if carry is not None:
            for name, group in carry.admitted.items():
                node = tree.cqs.get(name)
                if node is not None:
                    by_cq[name] = group.values()
                    tree.add_usage(node, carry.usage[name])
            evicting.update(name for name in carry.evicting if name in tree.cqs)
            self._preemptor(by_cq, evicting)
            return
        lists: dict[str, list[Workload]] = {}
        totals: dict[ClusterQueueName, dict[FlavorResource, int]] = {}
        for wl in self.running:
            adm = wl.admission
            assert adm is not None
            name = adm.cluster_queue
            members = lists.get(name)
            if members is None:
                if name not in tree.cqs:
                    continue
                members = lists[name] = []
                totals[name] = {}
            members.append(wl)
            total = totals[name]
            for fr, amount in adm.total.items():
                total[fr] = total.get(fr, 0) + amount
            if wl.evicting:
                evicting.add(name)
        for name, total in totals.items():
            tree.add_usage(tree.cqs[name], total)
        by_cq.update(lists)
        self._preemptor(by_cq, evicting)

    def _preemptor(self, by_cq: Mapping[str, Iterable[Workload]], evicting: set[str]) -> None:
        if self.placer is not None:
            self.placer.begin(self.snap, self.running)
        self.preemptor = Preemptor(
            tree=self.tree,
            cq_specs=self.snap.cluster_queues,
            admitted=by_cq,
            evicting_cqs=evicting,
            now=self.now,
            fair=self.snap.config.fair_sharing,
            queue_usage=self.snap.queue_usage,
        )

    # step 2 -----------------------------------------------------------------------------------

    def _evict(self) -> None:
        looked_at: list[Workload] = self.running
        if self.running_from_carry:
            # Only those whose eviction time has come: the same evictions and wake-up as
            # looking at every running workload, at the cost of what is due.
            assert self.carry is not None
            looked_at, next_due = self.carry.eviction_due(self.now)
            self._later(next_due)
        found, wakeup = evictions(self.snap, looked_at, self.now)
        self.evicted = found
        self._later(wakeup)
        # Evicted workloads keep their quota until their pods are gone (the next snapshot);
        # nobody may count on them as preemption victims in the meantime.
        self.preemptor.taken.update(e.workload for e in found)
        self.blocker = blocking_workload(self.snap, self.running, {e.workload for e in found})

    def _later(self, t: float | None) -> None:
        if t is not None and t > self.now and (self.wakeup is None or t < self.wakeup):
            self.wakeup = t

    # step 3 -----------------------------------------------------------------------------------

    def _cq_gate(self, cq: ClusterQueue) -> PendingReason | None:
        """A reason that holds every workload of the cluster queue, or None."""
        if cq.name in self.tree.disabled:
            return PendingReason(
                PendingCode.CLUSTER_QUEUE_INACTIVE,
                f"cluster queue {cq.name} is inactive: {self.tree.disabled[cq.name]}",
                Unblock.QUOTA_CHANGED,
            )
        if cq.stop_policy is not StopPolicy.NONE:
            return PendingReason(
                PendingCode.CLUSTER_QUEUE_STOPPED,
                f"cluster queue {cq.name} is stopped ({cq.stop_policy})",
                Unblock.USER_ACTION,
            )
        problem = _misconfiguration(cq)
        if problem is not None:
            return PendingReason(
                PendingCode.MISCONFIGURED,
                f"cluster queue {cq.name} is misconfigured: {problem}",
                Unblock.QUOTA_CHANGED,
            )
        missing = sorted(
            {
                fq.flavor
                for g in cq.resource_groups
                for fq in g.flavors
                if fq.flavor not in self.snap.flavors
            }
        )
        if missing:
            return PendingReason(
                PendingCode.CLUSTER_QUEUE_INACTIVE,
                f"cluster queue {cq.name} is inactive: flavor(s) {', '.join(missing)} not found",
                Unblock.QUOTA_CHANGED,
            )
        return None

    def _route(self) -> dict[ClusterQueueName, list[Workload]]:
        snap = self.snap
        lqs = snap.local_queues
        cqs = snap.cluster_queues
        queues: dict[ClusterQueueName, list[Workload]] = {}
        lq_missing: dict[LocalQueueKey, PendingReason] = {}
        for wl in self.waiting:
            if not wl.active:
                self.pending[wl.id] = _INACTIVE
                continue
            key = wl.local_queue
            lq = lqs.get(key)
            if lq is None or lq.cluster_queue not in cqs:
                reason = lq_missing.get(key)
                if reason is None:
                    cq = lq.cluster_queue if lq is not None else None
                    reason = lq_missing[key] = no_cluster_queue(key, cq)
                self.pending[wl.id] = reason
                continue
            bucket = queues.get(lq.cluster_queue)
            if bucket is None:
                bucket = queues[lq.cluster_queue] = []
            bucket.append(wl)
        for bucket in queues.values():
            bucket.sort(key=_ORDER)
        return queues

    def _workload_gate(self, wl: Workload, cq: ClusterQueue) -> PendingReason | None:
        """A reason that keeps this workload out of consideration without blocking others."""
        # Asked for every pending workload a cycle looks at: one lookup by its local queue,
        # which names the namespace and (routing) the cluster queue too.
        key = wl.local_queue
        try:
            gate = self.queue_gates[key]
        except KeyError:
            gate = self.queue_gates[key] = self._queue_gate(key, cq, wl.namespace)
        if gate is not None:
            return gate
        if wl.requeue_after is not None and wl.requeue_after > self.now:
            self._later(wl.requeue_after)
            return PendingReason(
                PendingCode.BACKOFF,
                f"requeued after eviction; back-off until t={wl.requeue_after:g}",
                Unblock.TIME,
                retry_at=wl.requeue_after,
            )
        return None

    def _queue_gate(
        self, key: LocalQueueKey, cq: ClusterQueue, namespace: str
    ) -> PendingReason | None:
        """The local queue's gate, else its namespace's in `cq` (memoised for `_memoised`)."""
        try:
            gate = self.lq_gates[key]
        except KeyError:
            gate = self.lq_gates[key] = self._lq_gate(key)
        if gate is not None:
            return gate
        ns_key = (cq.name, namespace)
        try:
            return self.ns_gates[ns_key]
        except KeyError:
            gate = self.ns_gates[ns_key] = self._namespace_gate(cq, namespace)
            return gate

    def _lq_gate(self, key: LocalQueueKey) -> PendingReason | None:
        lq = self.snap.local_queues[key]
        if lq.stop_policy is StopPolicy.NONE:
            return None
        return PendingReason(
            PendingCode.LOCAL_QUEUE_STOPPED,
            f"local queue {lq.key} is stopped ({lq.stop_policy})",
            Unblock.USER_ACTION,
        )

    def _namespace_gate(self, cq: ClusterQueue, namespace: str) -> PendingReason | None:
        if namespace_selected(cq, self.snap.namespaces.get(Namespace(namespace))):
            return None
        return PendingReason(
            PendingCode.NAMESPACE_NOT_SELECTED,
            f"namespace {namespace} is not selected by cluster queue {cq.name}",
            Unblock.QUOTA_CHANGED,
        )

    # step 4 -----------------------------------------------------------------------------------

    def _evaluate(self, wl: Workload, cq: ClusterQueue, counts: tuple[int, ...] | None) -> _Outcome:
        a, targets = self._assign(wl, cq, counts, None)
        placer = self.placer
        if placer is None or a.mode is _NO_FIT:
            return _Outcome(a, targets, counts)
        excluded: dict[int, dict[FlavorName, str]] = {}
        first: tuple[Assignment, list[Ask], list[Target] | None] | None = None
        while True:
            if excluded:
                a, targets = self._assign(wl, cq, counts, excluded)
                if a.mode is _NO_FIT:
                    break
            asks = placer.asks(
                wl, cq, [p.flavors for p in a.pod_sets], [p.count for p in a.pod_sets]
            )
            if not asks or not (a.mode is _FIT or targets):
                break
            placed = self._try_place(asks, targets)
            if not isinstance(placed, Unplaced):
                return _Outcome(a, targets, counts, placed)
            # As Kueue: a flavor whose topology cannot take the pods is passed over for the
            # next one; if none can, the first is where victims may make room.
            if first is None:
                first = (a, asks, targets)
            flavor = next(ask.flavor for ask in asks if ask.index == placed.index)
            excluded.setdefault(placed.index, {})[flavor] = f"topology: {placed.reason}"
        if first is not None:
            return self._place(wl, cq, *first, counts)
        return _Outcome(a, targets, counts)

    def _assign(
        self,
        wl: Workload,
        cq: ClusterQueue,
        counts: tuple[int, ...] | None,
        excluded: Mapping[int, Mapping[FlavorName, str]] | None,
    ) -> tuple[Assignment, list[Target] | None]:
        """Flavor assignment, and the victims of a quota preemption."""
        shielded = self.preemptor.shielded
        queue = self.queue_flavors.get(cq.name) or self._queue_flavors(cq)
        a = assign_flavors(
            tree=self.tree,
            queue=queue,
            wl=wl,
            undeclared=self.snap.config.undeclared_resources,
            counts=counts,
            oracle=(
                (lambda request, needs: self._search(wl, cq, request, needs) is not None)
                if queue.fallbacks
                else None
            ),
            topologies=self.snap.topologies,
            excluded=excluded,
        )
        targets = None
        if a.mode is _PREEMPT and not self._known_hopeless(wl, cq, a):
            targets = self._search(wl, cq, a.usage, a.needs_preemption)
            if (
                targets is None
                and not self.protected
                and (cq.preemption.within_cluster_queue is not _LOWER_OR_NEWER_EQUAL)
            ):
                memo = self.hopeless.setdefault((cq.name, wl.priority), [])
                memo.append((dict(a.usage), self._age(wl, shielded)))
                del memo[:-4]
        return a, targets

    def _try_place(self, asks: list[Ask], targets: list[Target] | None) -> list[Placed] | Unplaced:
        """The placement with the quota victims' room given back; capacity unchanged."""
        placer = self.placer
        assert placer is not None
        victims = [t.candidate.wl.id for t in targets or ()]
        placer.release(victims)
        try:
            placed = placer.place(asks)
            if not isinstance(placed, Unplaced):
                placer.undo(placed)
            return placed
        finally:
            placer.restore(victims)

    def _place(
        self,
        wl: Workload,
        cq: ClusterQueue,
        a: Assignment,
        asks: list[Ask],
        targets: list[Target] | None,
        counts: tuple[int, ...] | None,
    ) -> _Outcome:
        """Where the pods of the pod sets with a topology go (the quota victims' capacity
        given back first). If they do not fit, victims chosen to free one domain (within the
        queue's preemption policies) may make room; else the workload waits with the
        placement's reason. The capacity is unchanged on return."""
        placer = self.placer
        assert placer is not None
        victims = [t.candidate.wl.id for t in targets or ()]
        placer.release(victims)
        try:
            placed = placer.place(asks)
            if not isinstance(placed, Unplaced):
                placer.undo(placed)
                return _Outcome(a, targets, counts, placed)
            why = placed.reason
            if cq.preemption.within_cluster_queue is not PreemptionPolicy.NEVER or (
                cq.preemption.reclaim_within_cohort is not PreemptionPolicy.NEVER
            ):
                more = self._topology_victims(wl, cq, a, asks, targets)
                if more is not None:
                    extra, where = more
                    ids = [t.candidate.wl.id for t in extra]
                    placer.release(ids)
                    placed = placer.place(asks)
                    placer.restore(ids)
                    if not isinstance(placed, Unplaced):
                        placer.undo(placed)
                        a.mode = _PREEMPT
                        return _Outcome(a, [*(targets or ()), *extra], counts, placed, where)
                a.mode = _PREEMPT  # (its victims were looked for: no quota memo by age)
            else:
                a.mode = _NO_FIT
            a.topology_reason = why
            return _Outcome(a, None, counts)
        finally:
            placer.restore(victims)

    def _topology_victims(
        self,
        wl: Workload,
        cq: ClusterQueue,
        a: Assignment,
        asks: list[Ask],
        targets: list[Target] | None,
    ) -> tuple[list[Target], str] | None:
        """Victims among the policies' candidates whose nodes, given back, let the pods be
        placed in one domain; and which domain."""
        placer = self.placer
        assert placer is not None
        frs = {(f, r) for ask in asks for r, f in a.pod_sets[ask.index].flavors.items()}
        cands = self.preemptor.candidates(wl, cq, frs, [])
        chosen = {t.candidate.wl.id for t in targets or ()}
        by_id = {c.wl.id: c for c in cands if c.wl.id not in chosen}
        found = placer.find_room(asks, list(by_id))
        if found is None:
            return None
        ids, where = found
        return [
            Target(by_id[i], Preemptor.reason_for(by_id[i], cq.name, borrows=False)) for i in ids
        ], where

    def _age(self, wl: Workload, shielded: int) -> float:
        """The queueing time a failure verdict holds from: if protection set candidates aside
        since the count was `shielded`, only for workloads queued here no earlier than `wl`
        (they meet at least the same protection); otherwise for every one."""
        return wl.queued_here_at if self.preemptor.shielded != shielded else -math.inf

    def _search(
        self,
        wl: Workload,
        cq: ClusterQueue,
        request: dict[FlavorResource, int],
        needs: set[FlavorResource],
    ) -> list[Target] | None:
        """The victim search; what protection blocked is kept in `self.protected`."""
        found = self.preemptor.find_targets(wl, cq, request, needs)
        if isinstance(found, Protected):
            self.protected.append(found)
            return None
        return found

    def _queue_flavors(self, cq: ClusterQueue) -> QueueFlavors:
        found = self.queue_flavors.get(cq.name)
        if found is None:
            found = self.queue_flavors[cq.name] = QueueFlavors(
                cq,
                self.tree.cqs[cq.name],
                self.snap.flavors,
                fair_sharing=self.snap.config.fair_sharing is not None,
            )
        return found

    def _known_hopeless(self, wl: Workload, cq: ClusterQueue, a: Assignment) -> bool:
        """Whether a request at least as large already found no victims this cycle.

        Usage and chosen victims only grow within a cycle, so a request that dominates a
        failed one (same queue and priority, at least as much of every cell) fails too; the
        memo skips the victim search, the expensive part, and keeps the reason exact.
        """
        usage = a.usage
        for failed, queued in self.hopeless.get((cq.name, wl.priority), ()):
            if wl.queued_here_at < queued:
                continue
            for fr, amount in failed.items():
                if usage.get(fr, 0) < amount:
                    break
            else:
                return True
        return False

    def _evaluate_with_partial(self, wl: Workload, cq: ClusterQueue) -> _Outcome:
        full = self._evaluate(wl, cq, None)
        a = full.assignment
        if a.mode is _FIT or (a.mode is _PREEMPT and full.targets):  # admissible
            return full
        idx = reducible_pod_set(wl)
        if idx is None:
            return full
        best = largest_admissible(
            wl, idx, lambda counts: self._evaluate(wl, cq, counts), lambda o: o.admissible
        )
        return best or full

    def _rounds(self, queues: dict[ClusterQueueName, list[Workload]]) -> None:
        cqs = self.snap.cluster_queues
        limit = self.snap.config.max_admissions_per_queue
        cursors: dict[ClusterQueueName, int] = {}
        admitted_in: dict[ClusterQueueName, int] = {}
        active: list[ClusterQueueName] = []
        for name in sorted(queues):
            gate = self._cq_gate(cqs[name])
            if gate is not None:
                for wl in queues[name]:
                    self.pending[wl.id] = gate
                continue
            cursors[name] = 0
            active.append(name)
        # MultiQTowardFairShare shares each cohort among the queues that wait for more.
        sharing = self.snap.config.fair_sharing
        if sharing is not None and FairSharingStrategy.TOWARD_FAIR_SHARE in sharing.strategies:
            self.preemptor.wait_for_more(name for name in active if queues[name])
        # Two phases: first only heads that fit their queue's own unused nominal quota (or
        # already preempt), then everyone, borrowing included. Kueue orders the heads of one
        # cycle non-borrowing first; rounds drain whole queues, so the same rule must hold
        # across rounds, or a lender's own work would get one head per round while every
        # borrower takes one too, and would then have to reclaim what they borrowed.
        own_phase = True
        all_queues = list(active)
        while active or own_phase:
            if not active:
                own_phase = False
                active = [n for n in all_queues if cursors[n] < len(queues[n])]
                if not active:
                    break
            heads: list[tuple[EntryKey, Workload, ClusterQueue]] = []
            fair = self.snap.config.fair_sharing is not None
            still: list[ClusterQueueName] = []
            # (Every pending workload passes here once per cycle: what the loop reads of the
            # cycle is read once per round.)
            failed, pending, workload_gate = self.failed, self.pending, self._workload_gate
            for name in active:
                bucket = queues[name]
                cq = cqs[name]
                strict = cq.queueing_strategy is _STRICT_FIFO
                i = cursors[name]
                head = None
                while i < len(bucket):
                    wl = bucket[i]
                    i += 1
                    gate = workload_gate(wl, cq)
                    if gate is not None:
                        pending[wl.id] = gate
                        continue
                    cached = failed.get((name, wl.shape_hash))
                    if (
                        cached is not None
                        and (cached[0] is wl.shape or cached[0] == wl.shape)
                        and wl.queued_here_at >= cached[1]
                        and not strict
                    ):
                        pending[wl.id] = cached[2]
                        if self.carry is not None and self._tail_memoised(name, bucket, i):
                            # Every workload left in this queue would get the memo's
                            # reason one by one: say so once (see `_Pending`).
                            self.tails[name] = i
                            i = len(bucket)
                            break
                        continue
                    head = wl
                    break
                cursors[name] = i
                if head is None:
                    continue
                borrowing = self._would_borrow(head, cq)
                if own_phase and borrowing and not head.preempting:
                    cursors[name] = i - 1  # the head waits for the borrowing phase
                    continue
                still.append(name)
                fair_key = tournament_key(self.tree.cqs[name]) if fair else ()
                heads.append((entry_key(head, borrowing, fair_key), head, cq))
            heads.sort(key=_ENTRY)
            for _, wl, cq in heads:
                if not self._process(wl, cq):
                    # Strict FIFO: the head blocks everything behind it.
                    blocked = PendingReason(
                        PendingCode.BLOCKED_BY_HEAD,
                        f"StrictFIFO: waiting behind {wl.id}, the head of {cq.name}",
                        Unblock.HEAD_ADMITTED,
                        blocking_workload=wl.id,
                    )
                    bucket = queues[cq.name]
                    for other in bucket[cursors[cq.name] :]:
                        gate = self._workload_gate(other, cq)
                        self.pending[other.id] = gate if gate is not None else blocked
                    cursors[cq.name] = len(bucket)
                elif wl.id not in pending:
                    admitted_in[cq.name] = admitted_in.get(cq.name, 0) + 1
                    if limit is not None and admitted_in[cq.name] >= limit:
                        capped = PendingReason(
                            PendingCode.QUEUE_ADMISSION_LIMIT,
                            f"{cq.name} admitted {limit} workload(s) this cycle; next cycle",
                            Unblock.NEXT_CYCLE,
                        )
                        bucket = queues[cq.name]
                        for other in bucket[cursors[cq.name] :]:
                            self.pending[other.id] = capped
                        cursors[cq.name] = len(bucket)
            active = [n for n in still if cursors[n] < len(queues[n])]

    def _tail_memoised(self, name: ClusterQueueName, bucket: list[Workload], start: int) -> bool:
        """Incremental only: whether the walk from `start` to the end of the queue would give
        every workload its shape's failure from the memo, without a gate or a head on the
        way — then the walk is skipped and the queue is done for this cycle, as the walk
        would leave it. The queue's index tells without walking: every shape with a workload
        at or after `start` has a memoised failure that holds for any queueing time, and no
        local queue, namespace or backoff present gates. Tried again only after the queue's
        memo changed."""
        if start >= len(bucket):
            return False
        version = self.memo_version.get(name, 0)
        if self.tail_tried.get(name) == version:
            return False
        assert self.carry is not None
        if not self._memoised(name, self.carry.queues[name], bucket[start].order_key):
            self.tail_tried[name] = version
            return False
        return True

    def _memoised(self, name: ClusterQueueName, queue: QueueIndex, first: OrderKey) -> bool:
        if queue.collided:
            return False
        failed = self.failed
        for shape_hash, run in queue.shapes.items():
            if run.keys[-1] < first:
                continue  # none of this shape in the tail
            cached = failed.get((name, shape_hash))
            if (
                cached is None
                or cached[1] != -math.inf
                or not (cached[0] is run.shape or cached[0] == run.shape)
            ):
                return False
        cq = self.snap.cluster_queues[name]
        for key in queue.local_queues:
            lq_key = LocalQueueKey(key)
            try:
                gate = self.lq_gates[lq_key]
            except KeyError:
                gate = self.lq_gates[lq_key] = self._lq_gate(lq_key)
            if gate is not None:
                return False
        for namespace in queue.namespaces:
            ns_key = (name, namespace)
            try:
                gate = self.ns_gates[ns_key]
            except KeyError:
                gate = self.ns_gates[ns_key] = self._namespace_gate(cq, namespace)
            if gate is not None:
                return False
        now = self.now
        return not any(
            wl.requeue_after is not None and wl.requeue_after > now for wl in queue.backoff.values()
        )

    def _would_borrow(self, wl: Workload, cq: ClusterQueue) -> bool:
        """A cheap estimate for ordering: would the full request exceed unused nominal?"""
        queue = self.queue_flavors.get(cq.name) or self._queue_flavors(cq)
        node = queue.node
        if node.parent is None:
            return False
        totals = wl.total_requests
        used, nominal = node.usage, node.subtree
        # Only the first flavor of each group: the preferred one decides the order, as in Kueue.
        for res, fr in queue.preferred:
            want = totals.get(res, 0)
            if want > 0 and used.get(fr, 0) + want > nominal.get(fr, 0):
                return True
        return False

    def _process(self, wl: Workload, cq: ClusterQueue) -> bool:
        """Admit, preempt for, or park `wl`; False when a StrictFIFO head blocks its queue."""
        if self.blocker is not None:
            self.pending[wl.id] = PendingReason(
                PendingCode.WAITING_FOR_PODS_READY,
                f"blockAdmission: waiting for the pods of {self.blocker.id} to be ready",
                Unblock.PODS_READY,
                blocking_workload=self.blocker.id,
            )
            return True
        if self.protected:
            self.protected = []
        shielded = self.preemptor.shielded
        out = self._evaluate_with_partial(wl, cq)
        a = out.assignment
        if a.mode is _FIT:
            node = self.tree.cqs[cq.name]
            self.tree.add_usage(node, a.usage)
            self.preemptor.changed()
            if out.placed and self.placer is not None:
                self.placer.commit(out.placed)
            self._admit(wl, cq, out)
            ready = self.snap.config.wait_for_pods_ready
            if ready.enabled and ready.block_admission:
                # Its pods are not ready yet: it blocks the rest (sequential admission).
                self.blocker = wl
            return True
        if a.mode is _PREEMPT and out.targets:
            fresh = [t for t in out.targets if not t.candidate.evicting]
            for t in out.targets:
                self.preemptor.take(t.candidate)
            for t in fresh:
                self.preempted.append(
                    Preemption(
                        t.candidate.wl.id,
                        t.candidate.cq,
                        wl.id,
                        t.reason,
                        f"preempted to accommodate {wl.id} ({t.reason}) in {cq.name}"
                        + (f", freeing {out.freed}" if out.freed else ""),
                    )
                )
            if fresh:
                self.new_preemptors.add(wl.id)
            # Reserve the preemptor's quota for this cycle so nothing else takes what the
            # victims are about to release (the tree is briefly overbooked: conservative);
            # the same for the nodes its pods will take.
            self.tree.add_usage(self.tree.cqs[cq.name], a.usage)
            self.preemptor.changed()
            if out.placed and self.placer is not None:
                self.placer.commit(out.placed)
            self.nominated[wl.id] = self._admission(cq, a, out.placed)
            victims = ", ".join(t.candidate.wl.id for t in out.targets)
            freeing = f" (to free {out.freed})" if out.freed else ""
            self.pending[wl.id] = PendingReason(
                PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS,
                f"waiting for {len(out.targets)} preempted workload(s) to finish{freeing}: "
                f"{victims}",
                Unblock.PREEMPTIONS_COMPLETE,
                shortfalls=tuple(a.shortfalls),
                flavors_tried=tuple(a.attempts),
            )
            # StrictFIFO: nothing younger passes a head that is still waiting for room.
            return cq.queueing_strategy is not _STRICT_FIFO
        if self.protected:
            reason = self._protected(cq, out, self.protected)
            self._later(reason.retry_at)
        else:
            reason = self._failure(wl, cq, out)
        self.pending[wl.id] = reason
        if a.mode is _NO_FIT or (cq.preemption.within_cluster_queue is not _LOWER_OR_NEWER_EQUAL):
            # Usage only grows within a cycle: the same shape, queued no earlier, fails again.
            # (Not for LowerOrNewerEqualPriority, whose candidates depend on the age.)
            self.failed[(cq.name, wl.shape_hash)] = (wl.shape, self._age(wl, shielded), reason)
            if self.carry is not None:
                self.memo_version[cq.name] = self.memo_version.get(cq.name, 0) + 1
        return cq.queueing_strategy is not _STRICT_FIFO

    @staticmethod
    def _admission(
        cq: ClusterQueue, a: Assignment, placed: list[Placed] | None = None
    ) -> Admission:
        where = {p.index: p.assignment for p in placed or ()}
        return Admission(
            cq.name,
            tuple(
                PodSetAssignment(ps.name, ps.count, dict(ps.flavors), dict(ps.usage), where.get(i))
                for i, ps in enumerate(a.pod_sets)
            ),
        )

    def _admit(self, wl: Workload, cq: ClusterQueue, out: _Outcome) -> None:
        admission = self._admission(cq, out.assignment, out.placed)
        a = out.assignment
        self.admitted.append(
            Admit(wl.id, admission, borrowing=a.borrowing, partial=out.counts is not None)
        )
        ready = self.snap.config.wait_for_pods_ready
        if ready.enabled:
            # Its pods-ready deadline: a cycle must run then even if no event comes.
            self._later(self.now + ready.timeout_seconds)

    def _protected(self, cq: ClusterQueue, out: _Outcome, found: list[Protected]) -> PendingReason:
        a = out.assignment
        retry_at = min(p.retry_at for p in found)
        victims: dict[str, ProtectedVictim] = {}
        for p in found:
            for v in p.victims:
                victims.setdefault(v.workload, v)
        named = ", ".join(
            f"{v.workload} (for {_seconds(v.until - self.now)} s more)" for v in victims.values()
        )
        return PendingReason(
            PendingCode.PREEMPTION_PROTECTED,
            f"{describe_shortfalls(a.shortfalls) or 'no room'}; preempting would make room in "
            f"{cq.name}, but {named or 'workloads it needs'} "
            f"{'is' if len(victims) == 1 else 'are'} protected by minAdmitSeconds; "
            f"tries again in {_seconds(retry_at - self.now)} s",
            Unblock.TIME,
            tuple(a.shortfalls),
            tuple(a.attempts),
            retry_at=retry_at,
            protected=tuple(victims.values()),
        )

    def _failure(self, wl: Workload, cq: ClusterQueue, out: _Outcome) -> PendingReason:
        a = out.assignment
        tried = tuple(a.attempts)
        shortfalls = tuple(a.shortfalls)
        if a.topology_reason is not None:
            return PendingReason(
                PendingCode.TOPOLOGY_PLACEMENT_FAILED,
                f"{a.topology_reason}; waits for room in the topology of {cq.name}'s flavor",
                Unblock.QUOTA_RELEASED,
                shortfalls,
                tried,
            )
        # Most pending workloads of a cycle end here, each with a reason of its own: its
        # message is written only when read, from a template kept per queue and code.
        if a.no_flavor:
            code = _NO_MATCHING_FLAVOR
            unblock = _QUOTA_CHANGED
            describe: Callable[[PendingReason], str] | None = _flavors_detail
        elif a.exceeds_max:
            code, unblock, describe = _EXCEEDS_MAX_QUOTA, _QUOTA_CHANGED, None
        elif a.mode is _PREEMPT or a.no_candidates:
            code, unblock, describe = _NO_PREEMPTION_CANDIDATES, _QUOTA_RELEASED, None
        else:
            code, unblock, describe = _WAITING_FOR_QUOTA, _QUOTA_RELEASED, None
        key = (cq.name, code)
        text = self.templates.get(key)
        if text is None:
            text = self.templates[key] = _failure_template(code, cq)
        return PendingReason.about_shortfalls(code, text, unblock, shortfalls, tried, describe)

    def run(self) -> CycleResult:
        self._load_admitted()  # 1
        self._evict()  # 2
        carry = self.carry
        if carry is None:
            self.buckets = self._route()  # 3
        else:
            # Routed and sorted already; copied (one memcpy per queue) because the carry
            # changes before the next cycle and the result must not.
            self.buckets = {name: list(queue.items) for name, queue in carry.queues.items()}
        self._rounds(self.buckets)  # 4
        if self.placer is not None:
            self.placer.end()
        pending: Mapping[WorkloadId, PendingReason] = self.pending
        changed: Mapping[WorkloadId, PendingReason] | None = None
        if carry is not None:
            view = _Pending(
                self.pending,
                dict(carry.unrouted),
                {name: (self.buckets[name], start) for name, start in self.tails.items()},
                self.failed,
                self.snap,
            )
            pending = view
            if self.changed is not None and isinstance(carry.previous, _Pending):
                changed = view.changed_since(carry.previous, self.changed)
        return CycleResult(
            now=self.now,
            admitted=tuple(self.admitted),
            preempted=tuple(self.preempted),
            evicted=tuple(self.evicted),
            pending=pending,
            routed=self.buckets,  # 5: positions, when asked
            new_preemptors=frozenset(self.new_preemptors),
            nominated=self.nominated,
            next_wakeup=self.wakeup,
            pending_changed=changed,
        )


_Memo = dict[tuple[str, int], tuple[tuple[object, ...], float, PendingReason]]


class _Pending(Mapping[WorkloadId, PendingReason]):
    """An incremental cycle's pending reasons: the workloads it looked at one by one, the
    unroutable ones, and each skipped tail — a queue from a position to its end, where every
    workload has its shape's failure from the cycle's memo (`_Cycle._tail_memoised`). A
    read-only mapping equal to the look-at-everything cycle's dict; reading one reason costs
    a lookup (a bisection for a tail), iterating costs what is pending."""

    __slots__ = ("explicit", "memo", "snapshot", "tails", "unrouted")

    def __init__(
        self,
        explicit: dict[WorkloadId, PendingReason],
        unrouted: dict[WorkloadId, PendingReason],
        tails: dict[ClusterQueueName, tuple[list[Workload], int]],
        memo: _Memo,
        snapshot: Snapshot,
    ) -> None:
        self.explicit = explicit
        self.unrouted = unrouted
        self.tails = tails
        self.memo = memo
        self.snapshot = snapshot

    def _tail_reason(self, key: object) -> PendingReason | None:
        if not self.tails:
            return None
        wl = self.snapshot.workloads.get(key)  # type: ignore[call-overload]
        if wl is None or wl.admission is not None:
            return None
        lq = self.snapshot.local_queues.get(wl.local_queue)
        if lq is None:
            return None
        tail = self.tails.get(lq.cluster_queue)
        if tail is None:
            return None
        bucket, start = tail
        at = bisect_left(bucket, wl.order_key, lo=start, key=_ORDER)
        if at == len(bucket) or bucket[at] is not wl:
            return None
        return self.memo[(lq.cluster_queue, wl.shape_hash)][2]

    def __getitem__(self, key: WorkloadId) -> PendingReason:
        found = self.explicit.get(key) or self.unrouted.get(key) or self._tail_reason(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return key in self.explicit or key in self.unrouted or self._tail_reason(key) is not None

    def get(self, key: WorkloadId, default: Any = None) -> Any:
        # (Mapping's own `get` goes through __getitem__, and a KeyError for every miss.)
        found = self.explicit.get(key) or self.unrouted.get(key) or self._tail_reason(key)
        return default if found is None else found

    def __iter__(self) -> Iterator[WorkloadId]:
        yield from self.explicit
        yield from self.unrouted
        for bucket, start in self.tails.values():
            for wl in bucket[start:]:
                yield wl.id

    def __len__(self) -> int:
        tails = sum(len(bucket) - start for bucket, start in self.tails.values())
        return len(self.explicit) + len(self.unrouted) + tails

    def changed_since(
        self, previous: _Pending, changed: set[WorkloadId]
    ) -> dict[WorkloadId, PendingReason]:
        """The pending workloads whose reason may differ from `previous` (the last cycle's,
        over the same configuration), with their reasons: those either cycle looked at one by
        one, those that changed, and those in a tail of both whose shape's reason changed.
        The rest sat in a tail of both, reason unchanged: a workload before the last cycle's
        tail was looked at then, and one that arrived is among `changed`. (With the reasons,
        so that the agent's pending pass need not look each up again: over a deep queue
        whose amounts moved, that is every workload of the tail.)"""
        candidates = set(changed)
        candidates.update(self.explicit)
        candidates.update(previous.explicit)
        moved_by_queue: dict[str, set[int]] = {}
        for (queue, shape_hash), (_, _, reason) in self.memo.items():
            if queue in self.tails:
                old = previous.memo.get((queue, shape_hash))
                if old is None or old[2] != reason:
                    moved_by_queue.setdefault(queue, set()).add(shape_hash)
        out: dict[WorkloadId, PendingReason] = {}
        looked_at = (self.explicit, self.unrouted, previous.explicit, previous.unrouted)
        for name, (bucket, start) in self.tails.items():
            before = previous.tails.get(name)
            if before is None:
                continue  # every workload here was looked at last time, or changed since
            old_bucket, old_start = before
            cut = old_bucket[old_start].order_key
            moved = moved_by_queue.get(name)
            if not moved:
                continue
            for wl in bucket[start:]:
                if wl.shape_hash not in moved or wl.order_key < cut:
                    continue
                if any(wl.id in reasons for reasons in looked_at):
                    candidates.add(wl.id)
                else:
                    # In this tail and the last one's (or arrived since), and its shape's
                    # reason moved: it differs, and it is the memo's. Known without looking
                    # it up in either cycle — over a deep queue whose amounts moved, the
                    # whole tail.
                    out[wl.id] = self.memo[(name, wl.shape_hash)][2]
        for key in candidates:
            if key not in out:
                current = self.get(key)
                if current is not None and (key in changed or previous.get(key) != current):
                    out[key] = current
        return out


def _failure_template(code: PendingCode, cq: ClusterQueue) -> str:
    """The message of a `_failure` of this code in this queue, as a template for the
    shortfalls' description (or, for no matching flavor, the flavors' details)."""
    name = template(cq.name)
    if code is _NO_MATCHING_FLAVOR:
        return f"no flavor of {name} matches: {{}}"
    if code is _EXCEEDS_MAX_QUOTA:
        return f"request exceeds what {name} can ever use: {{}}"
    if code is _NO_PREEMPTION_CANDIDATES:
        return f"{{}}; no workload may be preempted for it under {name}'s policy"
    cohort = f" or cohort {template(cq.cohort)}" if cq.cohort else ""
    return f"{{}}; waits for running workloads in {name}{cohort} to finish"


def _flavors_detail(reason: PendingReason) -> str:
    return "; ".join(f"{t.flavor or '-'}: {t.reason}" for t in reason.flavors_tried)


def _seconds(t: float) -> str:
    """A duration for messages: at most millisecond precision, no trailing zeros."""
    return f"{t:.3f}".rstrip("0").rstrip(".")


def _misconfiguration(cq: ClusterQueue) -> str | None:
    """Resource-group rules the api validates too; checked again so a bad snapshot cannot
    produce a wrong admission."""
    seen_res: set[str] = set()
    seen_flavors: set[str] = set()
    for g in cq.resource_groups:
        covered = set(g.covered_resources)
        if covered & seen_res:
            return f"resource(s) {', '.join(sorted(covered & seen_res))} in two resource groups"
        seen_res |= covered
        for fq in g.flavors:
            if fq.flavor in seen_flavors:
                return f"flavor {fq.flavor} in two resource groups"
            seen_flavors.add(fq.flavor)
            if set(fq.resources) != covered:
                return f"flavor {fq.flavor} must list exactly the covered resources"
            if cq.cohort is None and any(
                q.borrowing_limit is not None for q in fq.resources.values()
            ):
                return "borrowingLimit requires a cohort"
    return None


_INACTIVE = INACTIVE
