"""PURE dispatch cycle of the hub: `dispatch(snapshot, now) -> DispatchPlan`.

One cycle, as numbered steps of named helpers (Kueue's scheduler and Armada's scheduling
round are the models), over a `HubSnapshot` the shell (`hub.dispatch`) keeps current:

1. `_expire_offers`   offers unanswered for the offer timeout end: a reservation request
                      simply fails; a bound offer is withdrawn, its binding kept until the
                      agent answers (it may be creating the Job);
2. `_let_go_of_lost`  a disconnected cluster's reservation requests end at once; its bound
                      work is queued again only once the fencing rules say it has stopped
                      (docs/exactly-once.md: loss timeout passed and lease expired + grace);
3. `_recheck_parked`  workloads held back alike (fit nowhere, or over their fleet quota)
                      are parked by shape: one check per group says whether they may go now,
                      so a deep queue held back costs a cycle next to nothing; a group that
                      may go is opened, not dissolved: its members are candidates in order
                      until the first that still cannot go, and the rest stay parked
                      untouched, so freeing room for a few costs a few, not the group;
4. `_candidates`      the other workloads waiting at the hub, by priority, then fair-share
                      factor (hub.placement.fairshare), then age (FIFO); one requeued because
                      its pods were not ready waits out its backoff first;
5. route              each one's cluster queue, global queue and cluster set (routing);
6. fleet quota        the global queue's fleet-wide quota must hold it;
7. `place`            pure placement over the clusters' room (hub.placement.core);
8. offer              BestFit binds to its one cluster before offering (one round trip);
                      AllAtOnce and Incremental ask several clusters to reserve.

Before step 5, a Slurm-mode workload (`snapshot.slurm`) that is held — by the user, a begin
time, a dependency or its array's throttle — is skipped with a Waiting condition that says
why (hub.placement.holds); one whose dependency can never be satisfied is cancelled
(`plan.cancels`). An array's live tasks are counted once per cycle and grow with its offers.

Within a cycle room only shrinks and fleet usage only grows (each offer books its room), so a
shape that fit nowhere fits nowhere for the rest of the cycle: failures are remembered per
shape. The plan is data: what to write, what to send, how the offer book changes. Reading the
snapshot never changes it; no I/O, no clock (`now` is an argument).

Called by: hub.dispatch (every cycle), tests, bench.hub_replay.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

from api.quantity import Quantity
from api.slurm.work import SlurmFacts
from api.v1alpha1.conversions import Keys
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.placement import holds
from hub.placement.book import (
    Assumed,
    DispatchBook,
    GroupRanking,
    ParkedGroup,
    Shape,
    WaitingNote,
)
from hub.placement.core import headroom_score, place, preempt_score, reclaim_score
from hub.placement.fairshare import FairShareOrder
from hub.placement.routing import Route, Routing, workload_requests
from hub.placement.snapshot import (
    ClusterName,
    ClusterView,
    DispatchMode,
    Offer,
    PlacementRequest,
    QueueView,
)
from hub.placement.topology import TopologyNeed, take_offered, topology_needs

__all__ = [
    "ClusterFacts",
    "CycleSettings",
    "DependencyCancel",
    "DispatchPlan",
    "Expiry",
    "HubSnapshot",
    "LetGo",
    "OfferDecision",
    "Park",
    "Wait",
    "candidate_keys",
    "dispatch",
    "fleet_quota_reason",
    "let_go_time",
    "record_plan",
    "runs_as_bare_pods",
    "status_change",
    "waiting_due",
]


class Candidate(Protocol):
    """A mirrored workload (hub.state.WorkloadEntry is one)."""

    @property
    def workload(self) -> Workload: ...

    @property
    def order(self) -> tuple[int, float]: ...


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the fencing rules need to know of one cluster."""

    name: str
    connected: bool
    member: bool = True
    """False: the MemberCluster was deleted (`let_go_at` says when its work may go)."""
    lost_since: datetime | None = None
    loss_timeout_seconds: float = 900.0
    lease_expires: datetime | None = None
    """The latest its agent may believe it holds a lease (hub clock)."""
    grace_seconds: float = 30.0
    fencing: bool = True
    let_go_at: datetime | None = None


SOURCE_KIND_ANNOTATION = Keys.SOURCE_KIND


def runs_as_bare_pods(wl: Workload) -> bool:
    """A plain Pod's or a pod group's workload: the agent runs it as bare pods, not Jobs."""
    return wl.metadata.annotations.get(SOURCE_KIND_ANNOTATION) == "Pod"


def let_go_time(facts: ClusterFacts) -> datetime | None:
    """From when the bound work of a cluster may run elsewhere; None: not now, not by itself.

    A connected cluster keeps its work. A lost one keeps it for its loss timeout and until its
    agent's lease has been expired for the grace (by then the agent fenced it and its Jobs'
    deadlines passed). With fencing off the hub never decides alone."""
    if not facts.member:
        return facts.let_go_at
    if facts.connected or not facts.fencing or facts.lost_since is None:
        return None
    at = facts.lost_since + timedelta(seconds=facts.loss_timeout_seconds)
    if facts.lease_expires is not None:
        at = max(at, facts.lease_expires + timedelta(seconds=facts.grace_seconds))
    return at


@dataclass(frozen=True, slots=True)
class CycleSettings:
    offer_timeout_seconds: float = 30.0
    waiting_refresh_seconds: float = 10.0
    """A Waiting message with the same reason is rewritten at most this often."""
    parking: bool = True
    """Off only to test that parking changes no decision."""


@dataclass(frozen=True, slots=True)
class HubSnapshot:
    workloads: Mapping[str, Candidate]
    pending: Set[str]
    """Keys of workloads waiting for a cluster (not bound, not finished, active)."""
    by_cluster: Mapping[str, Set[str]]
    """Unfinished workloads bound or offered to each cluster."""
    book: DispatchBook
    routing: Routing
    clusters: Mapping[str, ClusterFacts]
    views: Sequence[ClusterView]
    """The clusters' room as reported, minus the room booked by open offers."""
    usage: Mapping[str, Mapping[str, int]]
    """Per global queue with a fleet quota: what its offered and bound workloads request."""
    config_generation: int
    settings: CycleSettings = field(default_factory=CycleSettings)
    expiry_checked_at: datetime | None = None
    slurm: holds.SlurmJobs | None = None
    """The Slurm-mode workloads, for their holds (None: no Slurm mode)."""
    fair_share: FairShareOrder | None = None
    """The fleet's fair-share factors (None: not computed yet; order by priority and age)."""


@dataclass(frozen=True, slots=True)
class Expiry:
    key: str
    cluster: str
    bound: bool


@dataclass(frozen=True, slots=True)
class LetGo:
    key: str
    cluster: str
    bound: bool
    """True: queue it again (it was bound there); False: the cluster is no longer nominated."""
    message: str


@dataclass(frozen=True, slots=True)
class OfferDecision:
    key: str
    workload: Workload
    clusters: tuple[ClusterName, ...]
    generation: int
    bound: bool
    mode: str
    booked: Mapping[str, Assumed]
    verdicts: tuple[tuple[ClusterName, str, str], ...] = ()
    """The placement's verdict on every cluster it looked at: (cluster, verdict, why), for
    the shell to describe the decision (a trace's attributes)."""


@dataclass(frozen=True, slots=True)
class Wait:
    key: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class DependencyCancel:
    """A Slurm job whose dependency can never be satisfied: cancelled, kept for sacct."""

    key: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Park:
    key: str
    workload: Workload
    shape: Shape


@dataclass
class DispatchPlan:
    expired: list[Expiry] = field(default_factory=list)
    let_go: list[LetGo] = field(default_factory=list)
    dissolved: list[Shape] = field(default_factory=list)
    released: list[tuple[str, Shape]] = field(default_factory=list)
    """Members of opened groups that this cycle looked at, with their group: no longer
    parked, unless `parks` parks them in it again (the others stay parked as they are)."""
    rankings: dict[Shape, GroupRanking] = field(default_factory=dict)
    """The order of the opened groups' members, as this cycle made or read it."""
    groups: dict[Shape, ParkedGroup] = field(default_factory=dict)
    """Parked groups made or changed this cycle (their whole new value)."""
    parks: list[Park] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    offers: list[OfferDecision] = field(default_factory=list)
    cancels: list[DependencyCancel] = field(default_factory=list)
    expiry_checked_at: datetime | None = None
    placed: list[tuple[tuple[str, int], ...]] = field(default_factory=list)
    """The requests of every placement made (a deep queue must cost few)."""
    visited: list[str] = field(default_factory=list)
    """The candidates looked at (a parked deep queue must cost none)."""


def candidate_keys(snapshot: HubSnapshot, now: datetime) -> list[str]:
    """Step 4 alone: the keys a cycle would look at now, in order."""
    cycle = _Cycle(snapshot, now, DispatchPlan())
    return [key for key, _ in cycle.candidates(set())]


def dispatch(snapshot: HubSnapshot, now: datetime) -> DispatchPlan:
    """The whole cycle; see the module docstring. Pure: same snapshot and time, same plan."""
    plan = DispatchPlan(expiry_checked_at=snapshot.expiry_checked_at)
    touched: set[str] = set()
    if _expiry_due(snapshot, now):
        plan.expiry_checked_at = now
        _expire_offers(snapshot, now, plan, touched)  # 1
        _let_go_of_lost(snapshot, now, plan, touched)  # 2
    cycle = _Cycle(snapshot, now, plan)
    cycle.recheck_parked()  # 3
    for key, entry in cycle.candidates(touched):  # 4
        cycle.dispatch_one(key, entry)  # 5-8
    return plan


# --- steps 1 and 2: offers that time out, clusters that are lost ------------------------------


def _expiry_due(snapshot: HubSnapshot, now: datetime) -> bool:
    # Walking every open offer on every cycle costs more than a burst of submissions is
    # worth; a tenth of the timeout (at most a second) is precision enough.
    step = min(1.0, snapshot.settings.offer_timeout_seconds / 10)
    last = snapshot.expiry_checked_at
    return last is None or (now - last).total_seconds() >= step


def _expire_offers(
    snapshot: HubSnapshot, now: datetime, plan: DispatchPlan, touched: set[str]
) -> None:
    cutoff = now - timedelta(seconds=snapshot.settings.offer_timeout_seconds)
    records = snapshot.book.records
    for key in sorted(snapshot.book.awaiting):
        record = records[key]
        for cluster, offered_at in sorted(record.offers.items()):
            # (a queued offer was answered: the agent holds the workload in its queue)
            if offered_at > cutoff or cluster in record.queued:
                continue
            facts = snapshot.clusters.get(cluster)
            if facts is not None and not facts.connected:
                continue  # a lost cluster is handled by the fencing rules
            plan.expired.append(Expiry(key, cluster, record.bound))
            touched.add(key)


def _let_go_of_lost(
    snapshot: HubSnapshot, now: datetime, plan: DispatchPlan, touched: set[str]
) -> None:
    # Only the clusters that hold unfinished work are looked at, and only their work (the
    # mirror indexes it by cluster): a cluster down for hours must not make every cycle walk
    # every workload of the fleet.
    for cluster in sorted(snapshot.by_cluster):
        facts = snapshot.clusters.get(cluster)
        if facts is None or facts.connected:
            continue
        at = let_go_time(facts)
        bound_work_goes = at is not None and now >= at
        message = (
            f"cluster {cluster} was lost {int((now - facts.lost_since).total_seconds())}s ago"
            if facts.member and facts.lost_since is not None
            else f"cluster {cluster} is no longer a member"
        )
        for key in sorted(snapshot.by_cluster[cluster]):
            entry = snapshot.workloads.get(key)
            st = entry.workload.status if entry is not None else None
            if st is None:
                continue
            bound_here = st.cluster_name == cluster
            if bound_here and not bound_work_goes:
                continue  # it may still be running there
            if bound_here and facts.member and entry and runs_as_bare_pods(entry.workload):
                # Its pods carry no fencing deadline (a pod's can only be shortened): a frozen
                # agent's pods would run on. Kept, as with fencing off, until the cluster is
                # back or an admin deletes the MemberCluster.
                continue
            plan.let_go.append(LetGo(key, cluster, bound_here, message))
            touched.add(key)


# --- steps 3 to 8 --------------------------------------------------------------------------


def _shape(
    route: Route,
    requests: Mapping[str, int],
    min_requests: Mapping[str, int] | None,
    topology: tuple[TopologyNeed, ...] = (),
    priority: int | None = None,
) -> Shape | None:
    """What placement decides on for a workload with no offer history, when that is all it
    decides on: two workloads of one shape get the same answer from the same clusters, and
    as a cycle's offers only take room, one that fits nowhere means the next fits nowhere.
    None where the policy also looks at time or labels (incremental dispatch, affinity).
    Pod sets that require a topology domain are part of the shape (only when there are), and
    so is the priority when the queue preempts lower priorities (`priority` given)."""
    if route.mode == DispatchMode.INCREMENTAL or route.required_terms or route.preferred_terms:
        return None
    shape: Shape = (
        route.cluster_queue,
        route.cluster_set,
        tuple(sorted(requests.items())),
        tuple(sorted(min_requests.items())) if min_requests is not None else None,
    )
    if topology:
        shape = (*shape, topology)
    return shape if priority is None else (*shape, ("priority", priority))


def _admitted_ladder(
    workloads: Mapping[str, Candidate], keys: Iterable[str], cluster: str, cluster_queue: str
) -> list[tuple[int, str, dict[str, int]]]:
    """(priority, flavor, requests in milli-units) of every workload admitted in
    `cluster_queue` on `cluster`, one row per flavor it uses, lowest priority first."""
    rows: list[tuple[int, str, dict[str, int]]] = []
    for key in keys:
        entry = workloads.get(key)
        if entry is None:
            continue
        wl = entry.workload
        st = wl.status
        if st is None or st.cluster_name != cluster or st.admission is None:
            continue
        if st.admission.cluster_queue != cluster_queue or not wl.is_condition_true("Admitted"):
            continue
        if wl.is_condition_true("Finished") or wl.is_condition_true("Evicted"):
            continue
        by_flavor: dict[str, dict[str, int]] = {}
        for assignment in st.admission.pod_set_assignments:
            for resource, flavor in assignment.flavors.items():
                amount = assignment.resource_usage.get(resource)
                if amount is not None:
                    cell = by_flavor.setdefault(flavor, {})
                    cell[resource] = cell.get(resource, 0) + amount.milli()
        priority = wl.spec.priority or 0
        rows += [(priority, flavor, amounts) for flavor, amounts in by_flavor.items()]
    rows.sort(key=lambda row: row[0])
    return rows


def fleet_quota_reason(
    routing: Routing,
    global_queue: str | None,
    requests: Mapping[str, int],
    usage: Mapping[str, Mapping[str, int]],
) -> str | None:
    """Why the workload would exceed its global queue's fleet quota, or None."""
    gq = routing.global_queue(global_queue) if global_queue else None
    if gq is None or not gq.spec.fleet_quota:
        return None
    used = usage.get(gq.name, {})
    for resource, quota in sorted(gq.spec.fleet_quota.items()):
        need = requests.get(resource, 0)
        if need and used.get(resource, 0) + need > quota.milli():
            # No usage figure here: it moves with every workload the queue starts or ends,
            # and a deep queue would be rewritten for it (the GlobalQueue's status shows it,
            # `qctl get queues -o wide`).
            return (
                f"fleet quota of GlobalQueue {gq.name} for {resource} is "
                f"{quota.canonical()} and too little of it is free: the workload needs "
                f"{Quantity.from_milli(need).canonical()}"
            )
    return None


_Ranked = tuple[tuple[object, ...], str, Candidate]
"""A candidate with its sort key first (see `_Cycle.candidates`)."""


class _Cycle:
    """What one cycle learns as it goes: room its offers booked, fleet usage they add,
    shapes found to fit nowhere. Reads the snapshot, writes only the plan."""

    def __init__(self, snapshot: HubSnapshot, now: datetime, plan: DispatchPlan) -> None:
        self.snap = snapshot
        self.now = now
        self.plan = plan
        self.book = snapshot.book
        self.usage = {name: dict(used) for name, used in snapshot.usage.items()}
        self.taken: dict[str, dict[tuple[str, str], dict[str, int]]] = {}
        self.taken_domains: dict[str, list[tuple[str, tuple[TopologyNeed, ...]]]] = {}
        """Per cluster: the pod sets this cycle's offers placed in a topology domain."""
        self._views: list[ClusterView] = list(snapshot.views)
        self._stale: set[str] = set()
        """Clusters this cycle's offers took room on since their view was last made: only
        theirs are made again (a cycle offers one workload at a time, to one cluster or few)."""
        self.failed: dict[Shape, tuple[str, PlacementRequest]] = {}
        self.over_quota: dict[Shape, str] = {}
        """Over-quota shapes found this cycle, with their reason: a queue's fleet usage only
        grows within a cycle, so such a shape stays over, and its reason names no usage."""
        self.told: dict[str, str] = {}
        """Waiting messages this plan writes, by key."""
        self.dissolved: set[Shape] = set()
        self.opened: list[Shape] = []
        """Groups that may go now: their members are candidates until one of them parks."""
        self.stopped: set[Shape] = set()
        """Opened groups a member of which was parked again this cycle."""
        self.ladders: dict[tuple[str, str], list[tuple[int, str, dict[str, int]]]] = {}
        """Per (cluster, cluster queue): its admitted workloads' priority, flavor and
        requests, lowest priority first (`_lower_priority_room`)."""
        self.array_live: dict[int, int] = {}
        """Live tasks per throttled array: counted at first need, grown by this cycle's
        offers."""

    # --- room -------------------------------------------------------------------------

    def views(self) -> Sequence[ClusterView]:
        """The snapshot's cluster views less the room this cycle's offers took."""
        if self._stale:
            stale = self._stale
            self._views = [
                _minus_domains(_minus(v, self.taken.get(v.name)), self.taken_domains.get(v.name))
                if v.name in stale
                else made
                for v, made in zip(self.snap.views, self._views, strict=True)
            ]
            self._stale = set()
        return self._views

    def _lower_priority_room(
        self, cluster: str, cluster_queue: str, priority: int
    ) -> dict[str, dict[str, int]]:
        """Per flavor, what the workloads admitted in `cluster_queue` on `cluster` with a
        priority below `priority` hold (milli-units): the hub placed them all, so its mirror
        knows them (read once per cycle per cluster and queue)."""
        ladder = self.ladders.get((cluster, cluster_queue))
        if ladder is None:
            ladder = self.ladders[(cluster, cluster_queue)] = _admitted_ladder(
                self.snap.workloads, self.snap.by_cluster.get(cluster, ()), cluster, cluster_queue
            )
        held: dict[str, dict[str, int]] = {}
        for below, flavor, amounts in ladder:
            if below >= priority:
                break
            cell = held.setdefault(flavor, {})
            for resource, amount in amounts.items():
                cell[resource] = cell.get(resource, 0) + amount
        return held

    def _book(self, cluster: str, item: Assumed) -> None:
        cell = self.taken.setdefault(cluster, {}).setdefault((item.cluster_queue, item.flavor), {})
        for resource, amount in item.requests.items():
            cell[resource] = cell.get(resource, 0) + amount
        if item.topology:
            self.taken_domains.setdefault(cluster, []).append((item.cluster_queue, item.topology))
        self._stale.add(cluster)

    # --- step 3: parked groups ---------------------------------------------------------

    def recheck_parked(self) -> None:
        """Open the groups whose shape may fit now, dissolve those whose routes may have
        moved or whose members are due to be told a new reason; keep the rest parked as
        they are.

        Exact because a shape's placement does not depend on which workload has it, and
        because the memo of this cycle's failures takes in each shape found still not to
        fit, so a workload of that shape that is a candidate gets the same answer. Over a
        fleet quota, a workload's verdict depends only on its global queue, its requests and
        the queue's usage, which within a cycle only grows. For the same reasons, once one
        member of an opened group is parked again, every later member would be too: they
        are not looked at (`candidates`)."""
        snap, now = self.snap, self.now
        for shape, group in sorted(self.book.groups.items(), key=lambda item: repr(item[0])):
            if group.generation != snap.config_generation:
                self._dissolve(shape)  # routes may have moved
                continue
            latest = group.latest
            epoch = group.epoch
            if group.over_quota is not None:
                name, requests = group.over_quota
                reason = fleet_quota_reason(snap.routing, name, requests, self.usage)
                if reason is None:
                    self.opened.append(shape)  # the queue's usage fell: one may fit now
                    continue
                latest = reason
            elif group.epoch != self.book.room_epoch:
                assert group.request is not None
                self.plan.placed.append(tuple(sorted(group.request.requests.items())))
                placement = place(self.views(), group.request, now)
                if placement.offer_to:
                    self.opened.append(shape)
                    continue
                epoch = self.book.room_epoch
                latest = placement.waiting_reason
                self.failed[shape] = (latest, group.request)
            if (
                group.told != latest
                and (now - group.since).total_seconds() >= snap.settings.waiting_refresh_seconds
            ):
                self._dissolve(shape)  # to be told the new reason
                continue
            if latest != group.latest or epoch != group.epoch:
                self.plan.groups[shape] = replace(group, latest=latest, epoch=epoch)

    def _dissolve(self, shape: Shape) -> None:
        self.plan.dissolved.append(shape)
        self.dissolved.add(shape)

    # --- step 4 -----------------------------------------------------------------------

    def candidates(self, touched: Set[str]) -> Iterator[tuple[str, Candidate]]:
        """Workloads waiting for a cluster and not waiting on an open offer (but those of an
        Incremental round), not parked (but the members of opened groups), not changed by
        this plan already; highest priority first, then the highest fair-share factor, then
        oldest first. Set operations keep this cheap when thousands are queued on clusters
        (offered and pending there) or parked.

        Lazy: the members of each opened group are merged into that order as the cycle
        takes them, and no more are taken from a group once one of its members is parked
        again (`stopped`), so freeing room for a few of a deep group costs a few of them,
        whatever the group's size; those taken are `released` in the plan."""
        snap, book = self.snap, self.book
        keys = set(snap.pending)
        keys.difference_update(book.offered)
        keys.difference_update(book.parked)
        for shape in self.dissolved:
            keys |= (book.members.get(shape, set()) & snap.pending) - book.offered
        if book.incremental:
            keys |= snap.pending & book.incremental
        keys.difference_update(touched)
        order = self._order()
        # (sort key, key, entry): sort keys end with the key, so no two are equal.
        waiting = sorted([(order(item), *item) for item in self._waiting(keys)])
        if not self.opened:
            for _, key, entry in waiting:
                yield key, entry
            return
        # One source per opened group, merged by one head per source in `heads`: each step
        # costs a logarithm, and a group is read only as far as the cycle takes it.
        shapes: list[Shape | None] = [None, *self.opened]
        sources: list[Iterator[_Ranked]] = [iter(waiting)]
        sources += [self._ranked_members(shape, touched) for shape in self.opened]
        heads: list[tuple[tuple[object, ...], int, str, Candidate]] = []
        for source, items in enumerate(sources):
            if (head := next(items, None)) is not None:
                heads.append((head[0], source, head[1], head[2]))
        heapq.heapify(heads)
        while heads:
            _, source, key, entry = heads[0]
            opened = shapes[source]
            if opened is not None and opened in self.stopped:
                heapq.heappop(heads)  # the group's remaining members stay parked
                continue
            if opened is not None:
                self.plan.released.append((key, opened))
            yield key, entry
            if (after := next(sources[source], None)) is None:
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (after[0], source, after[1], after[2]))

    def _ranked_members(self, shape: Shape, touched: Set[str]) -> Iterator[_Ranked]:
        """An opened group's members that are candidates now, in dispatch order.

        The order is kept with the group (`GroupRanking`, through the plan) while nothing
        that orders its members changed, and read from where its first member still in the
        group stands: members taken by earlier cycles are skipped once, so a deep group that
        gives a few members per cycle costs a few per cycle, not a sort of the group."""
        snap, book = self.snap, self.book
        members = book.members.get(shape, set())
        joined = book.joined.get(shape, 0)
        ranking = book.rankings.get(shape)
        if ranking is None or not ranking.current(snap.fair_share, snap.routing, joined):
            order = self._order()
            ranked = sorted((order(item), item[0]) for item in self._waiting(members))
            ranking = GroupRanking(snap.fair_share, snap.routing, joined, tuple(ranked))
        self.plan.rankings[shape] = ranking
        workloads, pending, offered, now = snap.workloads, snap.pending, book.offered, self.now
        leading = True
        for index in range(ranking.start, len(ranking.ranked)):
            sort_key, key = ranking.ranked[index]
            if key not in members:
                if leading:  # gone for good: a member that joins again changes `joined`
                    self.plan.rankings[shape] = replace(ranking, start=index + 1)
                continue
            leading = False
            entry = workloads.get(key)
            if (
                entry is not None
                and key in pending
                and key not in offered
                and key not in touched
                and not _backing_off(entry.workload, now)
            ):
                yield sort_key, key, entry

    def _waiting(self, keys: Iterable[str]) -> list[tuple[str, Candidate]]:
        """The candidates among `keys`: known, and not backing off."""
        workloads, now = self.snap.workloads, self.now
        return [
            (key, workloads[key])
            for key in keys
            if key in workloads and not _backing_off(workloads[key].workload, now)
        ]

    def _order(self) -> Callable[[tuple[str, Candidate]], tuple[object, ...]]:
        """The sort key of a candidate (see `candidates`)."""
        snap = self.snap
        fair_share = snap.fair_share
        if fair_share is None:
            return lambda item: (item[1].order, item[0])

        # Among equal priorities, the association (tenant, global queue, user) furthest
        # below its fair share first.
        def by_fair_share(item: tuple[str, Candidate]) -> tuple[object, ...]:
            priority, age = item[1].order
            factor = fair_share.factor(item[1].workload, snap.routing)
            return (priority, -factor, age, item[0])

        return by_fair_share

    # --- steps 5 to 8 ------------------------------------------------------------------

    def dispatch_one(self, key: str, entry: Candidate) -> None:
        snap, now, plan = self.snap, self.now, self.plan
        plan.visited.append(key)
        wl = entry.workload
        record = self.book.get(key)
        if record.offers and record.mode != DispatchMode.INCREMENTAL:
            return  # offered, waiting for the answer (or the offer timeout)
        slurm = snap.slurm.facts.get(key) if snap.slurm is not None else None
        if slurm is not None and self.slurm_holds(key, slurm):
            return
        route = snap.routing.route_of(wl)
        if isinstance(route, str):
            self.wait(key, "Misconfigured", route)
            return
        requests = workload_requests(wl)
        queue = route.global_queue
        gq = queue.name if queue is not None else None
        if queue is not None and queue.spec.fleet_quota:
            over: Shape = ("over quota", queue.name, tuple(sorted(requests.items())))
            quota_reason = self.over_quota.get(over)
            if quota_reason is None:
                quota_reason = fleet_quota_reason(snap.routing, gq, requests, self.usage)
            if quota_reason is not None:
                self.over_quota[over] = quota_reason
                self.wait(key, "FleetQuotaExceeded", quota_reason)
                self.park(key, wl, over, quota_reason, over_quota=(queue.name, requests))
                return
        st = wl.status
        history = [Offer(ClusterName(c), when) for c, when in record.offers.items()] + [
            Offer(
                ClusterName(r.cluster),
                r.last_transition_time or now,
                "timeout" if r.reason == "OfferTimedOut" else "rejected",
                r.message,
            )
            for r in (st.cluster_pending_reasons if st else [])
            if r.reason.startswith("Rejected") or r.reason == "OfferTimedOut"
        ]
        has_min = any(ps.min_count is not None for ps in wl.spec.pod_sets)
        min_requests = workload_requests(wl, minimum=True) if has_min else None
        topology = topology_needs(wl)
        preempts = route.cluster_queue in snap.routing.preempting
        priority = (wl.spec.priority or 0) if preempts else None
        shape = None if history else _shape(route, requests, min_requests, topology, priority)
        if shape is not None and (failed := self.failed.get(shape)) is not None:
            self.wait(key, "Waiting", failed[0])
            self.park(key, wl, shape, failed[0], request=failed[1])
            return
        request = PlacementRequest(
            workload=key,
            cluster_queue=route.cluster_queue,
            requests=requests,
            cluster_set=route.cluster_set,
            min_requests=min_requests,
            required_terms=route.required_terms,
            preferred_terms=route.preferred_terms,
            mode=route.mode,
            step_size=route.step_size,
            interval_seconds=route.interval_seconds,
            offers=tuple(history),
            topology=topology,
        )
        views = self.views()
        plan.placed.append(tuple(sorted(requests.items())))
        placement = place(views, request, now)
        if not placement.offer_to and priority is not None and not record.offers:
            # Nothing fits now: where lower priorities of its queue hold the room, the
            # cluster's engine can preempt them for it (looked at only now: it costs a walk
            # over the queue's admitted workloads on each cluster of the set).
            lower = {}
            for cluster in route.cluster_set:
                room_held = self._lower_priority_room(cluster, route.cluster_queue, priority)
                if room_held:
                    lower[cluster] = room_held
            if lower:
                request = replace(request, preemptible=lower)
                placement = place(views, request, now)
        if not placement.offer_to:
            reason = placement.waiting_reason
            if not record.offers:
                self.wait(key, "Waiting", reason)
            if shape is not None:
                self.failed[shape] = (reason, request)
                self.park(key, wl, shape, reason, request=request)
            return
        generation = (st.dispatch_generation or 0) if st else 0
        if not record.offers:
            generation += 1  # a new round of offers fences off replies to older rounds
        by_name = {v.name: v for v in views}
        booked: dict[str, Assumed] = {}
        for cluster in placement.offer_to:
            room = by_name[cluster].queues[route.cluster_queue]
            fit = headroom_score(room, requests)
            taken_back = reclaim_score(room, requests) if fit is None else None
            held = request.preemptible.get(cluster)
            freed = (
                preempt_score(room, requests, held)
                if fit is None and taken_back is None and held
                else None
            )
            by_preemption = taken_back or freed
            flavor = fit[1] if fit else by_preemption[1] if by_preemption else ""
            item = Assumed(
                route.cluster_queue,
                flavor,
                requests,
                topology=topology,
                reclaim=by_preemption is not None,
            )
            booked[cluster] = item
            self._book(cluster, item)
        if gq is not None and gq in self.usage:
            bucket = self.usage[gq]
            for resource, amount in requests.items():
                bucket[resource] = bucket.get(resource, 0) + amount
        # BestFit offers one cluster at a time, and binds before it offers: only that
        # cluster may run the generation, so its agent may create the Job at once.
        bound = route.mode == DispatchMode.BEST_FIT and len(placement.offer_to) == 1
        verdicts = tuple((v.cluster, v.verdict.value, v.message) for v in placement.verdicts)
        plan.offers.append(
            OfferDecision(
                key, wl, tuple(placement.offer_to), generation, bound, route.mode, booked, verdicts
            )
        )
        if slurm is not None and slurm.throttle is not None and not record.offers:
            array = slurm.ids.array_job_id or slurm.ids.job_id
            self.array_live[array] = self.array_live.get(array, 0) + 1

    def slurm_holds(self, key: str, facts: SlurmFacts) -> bool:
        """Whether a Slurm job is held back this cycle (told why, or cancelled)."""
        snap = self.snap
        assert snap.slurm is not None
        hold = holds.hold_of(key, facts, snap.slurm, snap.workloads, self.now)
        if hold is None and facts.throttle is not None:
            hold = holds.throttle_hold(facts, self.live_tasks(facts))
        if hold is None:
            return False
        if hold.never:
            self.plan.cancels.append(DependencyCancel(key, hold.reason, hold.message))
        else:
            self.wait(key, hold.reason, hold.message)
        return True

    def live_tasks(self, facts: SlurmFacts) -> int:
        array = facts.ids.array_job_id or facts.ids.job_id
        live = self.array_live.get(array)
        if live is None:
            snap = self.snap
            assert snap.slurm is not None
            offered = self.book.offered
            live = sum(
                1
                for k in snap.slurm.tasks_of_array(array)
                if (entry := snap.workloads.get(k)) is not None
                and holds.is_live(entry.workload, k in offered)
            )
            self.array_live[array] = live
        return live

    def wait(self, key: str, reason: str, message: str) -> None:
        """Write a Waiting condition if there is something new to say. The reason is written
        when it changes; a changed message (numbers move as capacity does) at most every
        refresh interval, or a deep queue would rewrite every pending workload on every
        cycle."""
        last = self.book.get(key).waiting
        refresh = self.snap.settings.waiting_refresh_seconds
        if not waiting_due(last, reason, message, self.now, refresh):
            return
        self.plan.waits.append(Wait(key, reason, message))
        self.told[key] = message

    def park(
        self,
        key: str,
        wl: Workload,
        shape: Shape,
        reason: str,
        *,
        request: PlacementRequest | None = None,
        over_quota: tuple[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Park `wl` with the others of its shape. Called after its Waiting condition was
        decided on, so the group knows what its members were told."""
        if not self.snap.settings.parking:
            return
        told = self.told.get(key)
        if told is None:
            last = self.book.get(key).waiting
            told = last.message if last is not None else None
        group = self.plan.groups.get(shape)
        if group is None and shape not in self.dissolved:
            group = self.book.groups.get(shape)
        if group is None:
            group = ParkedGroup(
                request=request,
                over_quota=over_quota,
                epoch=self.book.room_epoch,
                generation=self.snap.config_generation,
                since=self.now,
                latest=reason,
                told=told,
            )
        elif group.latest != reason or group.told not in (None, told):
            group = replace(group, latest=reason, told=group.told if group.told == told else None)
        if shape in self.opened and shape not in self.stopped:
            # Checked against this cycle's room, as a group formed now would be.
            self.stopped.add(shape)
            group = replace(group, epoch=self.book.room_epoch)
        self.plan.groups[shape] = group
        self.plan.parks.append(Park(key, wl, shape))


def _backing_off(wl: Workload, now: datetime) -> bool:
    """Requeued because its pods were not ready, and its backoff is not over yet."""
    st = wl.status
    if st is None or st.requeue_state is None:
        return False
    until = transitions.held_back_until(wl)
    return until is not None and until > now


def _minus(
    view: ClusterView, taken: Mapping[tuple[str, str], Mapping[str, int]] | None
) -> ClusterView:
    if not taken:
        return view
    # Only the queues the offers took from are made again: a cluster may have dozens, and
    # this runs after every offer to it.
    queues = dict(view.queues)
    for name in {name for name, _ in taken}:
        queue = view.queues.get(name)
        if queue is None:
            continue
        flavors = []
        for cell in queue.flavors:
            used = taken.get((name, cell.flavor))
            if used:
                cell = cell.minus(used)  # noqa: PLW2901
            flavors.append(cell)
        queues[name] = QueueView(name, tuple(flavors), queue.pending_workloads)
    return replace(view, queues=queues)


def _minus_domains(
    view: ClusterView, taken: Sequence[tuple[str, tuple[TopologyNeed, ...]]] | None
) -> ClusterView:
    if not taken or view.topologies is None:
        return view
    topologies = view.topologies
    for cluster_queue, needs in taken:
        queue = view.queues.get(cluster_queue)
        flavors = [cell.flavor for cell in queue.flavors] if queue is not None else []
        topologies = take_offered(topologies, flavors, needs)
    return replace(view, topologies=topologies)


def record_plan(book: DispatchBook, plan: DispatchPlan, now: datetime) -> None:
    """Keep the offer book in step with a plan about to be applied: offers that ended or
    were let go are closed, parked groups formed or dissolved, Waiting messages noted, new
    offers opened with the room they book. The shell calls it before its writes, so a
    write that loses its race closes its offer again (hub.dispatch)."""
    for expiry in plan.expired:
        book.close_offer(expiry.key, expiry.cluster)
    for gone in plan.let_go:
        book.close_offer(gone.key, gone.cluster)
    for shape in plan.dissolved:
        book.dissolve(shape)
    parked_again = {(park.key, park.shape) for park in plan.parks}
    for key, shape in plan.released:
        if (key, shape) not in parked_again:  # parked again: it stays where it was
            book.update(key, parked=None, parked_as=None)
    for wait in plan.waits:
        book.update(wait.key, waiting=WaitingNote(wait.reason, wait.message, now))
    book.groups.update(plan.groups)
    for park in plan.parks:
        book.update(park.key, parked=park.shape, parked_as=park.workload)
    for shape, ranking in plan.rankings.items():
        if shape in book.groups:
            book.rankings[shape] = ranking
    for offer in plan.offers:
        record = book.get(offer.key)
        book.put(
            offer.key,
            replace(
                record,
                offers={**record.offers, **{str(c): now for c in offer.clusters}},
                assumed={**record.assumed, **offer.booked},
                mode=offer.mode,
                bound=offer.bound,
                waiting=None,
                parked=None,
                parked_as=None,
            ),
        )


Change = Callable[[Workload], Workload]
OFFER_TIMED_OUT = "the agent did not answer the offer in time"


def status_change(
    decision: Expiry | LetGo | Wait | OfferDecision | DependencyCancel, now: datetime
) -> Change:
    """How a decision of the plan changes the workload's stored status (hub.transitions):
    written with compare-and-swap by the shell. A bound offer that timed out keeps its
    binding: the agent is asked to give it back (it may be creating the Job right now)."""
    match decision:
        case OfferDecision(bound=True):
            cluster = str(decision.clusters[0])
            return partial(
                transitions.mark_bound_offer,
                cluster=cluster,
                generation=decision.generation,
                now=now,
            )
        case OfferDecision():
            clusters = [str(c) for c in decision.clusters]
            return partial(
                transitions.mark_offered, clusters=clusters, generation=decision.generation, now=now
            )
        case Expiry(bound=True):
            message = f"{OFFER_TIMED_OUT}; asked to give it back"
            return partial(
                transitions.mark_withdrawing,
                cluster=decision.cluster,
                reason="OfferTimedOut",
                message=message,
                now=now,
            )
        case Expiry():
            return partial(
                transitions.mark_offer_failed,
                cluster=decision.cluster,
                reason="OfferTimedOut",
                message=OFFER_TIMED_OUT,
                now=now,
            )
        case LetGo(bound=True):
            return partial(
                transitions.requeue, reason="ClusterLost", message=decision.message, now=now
            )
        case LetGo():
            return partial(
                transitions.mark_offer_failed,
                cluster=decision.cluster,
                reason="ClusterLost",
                message=decision.message,
                now=now,
            )
        case Wait():
            return partial(_waiting, reason=decision.reason, message=decision.message, now=now)
        case DependencyCancel():
            return partial(
                transitions.mark_cancelled,
                reason=decision.reason,
                message=decision.message,
                now=now,
            )


def _waiting(wl: Workload, reason: str, message: str, now: datetime) -> Workload:
    """Why it waits, on a workload still unbound: one a reservation bound after the cycle
    decided (the shell writes on what the mirror holds then) is not waiting any more."""
    if wl.status is not None and wl.status.cluster_name:
        return wl
    transitions.set_condition(wl, transitions.QUOTA_RESERVED, False, reason, message, now)
    return wl


def waiting_due(
    last: WaitingNote | None, reason: str, message: str, now: datetime, refresh_seconds: float
) -> bool:
    """Whether a Waiting condition must be written: a new reason at once, a new message for
    the same reason at most every `refresh_seconds`, the same one never."""
    if last is None or last.reason != reason:
        return True
    if last.message == message:
        return False
    return (now - last.at).total_seconds() >= refresh_seconds
