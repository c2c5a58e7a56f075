"""The dispatch loop: which pending workload goes to which member cluster, and the follow-up
of every offer until a cluster admits it.

One cycle, as numbered steps of named helpers:
1. `_expire_offers`     offers unanswered for `offer_timeout` fail (the cluster is skipped);
2. `_handle_lost`       workloads on a cluster lost for longer than its loss timeout are
                        requeued at the hub (never earlier: the cluster may still run them);
3. `_recheck_parked`    workloads held back alike (fit nowhere, or over their fleet quota)
                        are parked by shape: one check per shape says whether its workloads
                        may go now, so a deep queue held back costs a cycle next to nothing;
4. `_pending`           the other workloads waiting at the hub, by priority then age (FIFO);
5. `_route`             each one's cluster queue, global queue and cluster set;
6. `_fleet_quota`       the global queue's fleet-wide quota must hold it;
7. `place`              pure placement over the clusters' capacity (hub.placement);
8. `_offer`             the offer is made durable (status), then sent over the session.

Everything that changes a workload goes through `hub.transitions` and a compare-and-swap
write, so a cycle that lost a race simply decides again next time.

Called by: hub.app (runs the loop), hub.sessions (agent reports: `on_status`, `on_rejected`,
`on_capacity`, `reconcile_hello`), hub.state listeners (`wake`, deletions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from api.k8s.core import LabelSelectorRequirement
from api.k8s.pod import add_resources
from api.quantity import Quantity
from api.v1alpha1.federation import ClusterSet, GlobalQueue, MemberCluster, Tenant
from api.v1alpha1.messages import (
    Cancel,
    CapacityReport,
    DispatchOffer,
    HeldWorkload,
    Hello,
    OfferRejected,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.queues import LocalQueue
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.fleet import Fleet
from hub.lanes import LaneClosedError
from hub.placement.core import headroom_score, place
from hub.placement.snapshot import (
    ClusterName,
    ClusterView,
    DispatchMode,
    Offer,
    PlacementRequest,
    PreferredTerm,
)
from hub.state import HubState, WorkloadEntry
from hub.store import base as store_base
from hub.store.base import Revision

__all__ = ["CLUSTER_SET_ANNOTATION", "Dispatcher", "Route", "workload_requests"]

log = logging.getLogger(__name__)

CLUSTER_SET_ANNOTATION = "multiq.dev/cluster-set"
SOURCE_PREFIX = "/workloadsources/"
COALESCE_SECONDS = 0.01
WAITING_REFRESH_SECONDS = 10.0
ROUTES_KEPT = 10_000
"""At most this many queues' routes are cached; past it the cache starts over."""


def _now() -> datetime:
    return datetime.now(UTC)


def _requests_of(wl: Workload, minimum: bool) -> dict[str, int]:
    total: dict[str, Quantity] = {}
    for ps in wl.spec.pod_sets:
        count = ps.min_count if minimum and ps.min_count is not None else ps.count
        add_resources(total, ps.total_requests(count))
    return {name: q.milli() for name, q in total.items()}


_REQUESTS_CACHE: dict[tuple[str, bool], dict[str, int]] = {}


def workload_requests(wl: Workload, *, minimum: bool = False) -> dict[str, int]:
    """Total requests of all pod sets in milli-units (at minCount when `minimum`).

    Pod sets are immutable, so the answer is cached per workload uid."""
    uid = wl.metadata.uid
    if uid is None:
        return _requests_of(wl, minimum)
    found = _REQUESTS_CACHE.get((uid, minimum))
    if found is None:
        if len(_REQUESTS_CACHE) > 100_000:
            _REQUESTS_CACHE.clear()
        found = _REQUESTS_CACHE[(uid, minimum)] = _requests_of(wl, minimum)
    return found


@dataclass(frozen=True, slots=True)
class Route:
    cluster_queue: str
    cluster_set: frozenset[ClusterName]
    global_queue: GlobalQueue | None
    mode: str = DispatchMode.BEST_FIT
    step_size: int = 1
    interval_seconds: int = 300
    required_terms: tuple[tuple[LabelSelectorRequirement, ...], ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()


def _shape(
    route: Route, requests: Mapping[str, int], min_requests: Mapping[str, int] | None
) -> tuple[object, ...] | None:
    """What placement decides on for a workload with no offer history, when that is all it
    decides on: two workloads of one shape get the same answer from the same clusters, and
    as a cycle's offers only take room, one that fits nowhere means the next fits nowhere.
    None where the policy also looks at time or labels (incremental dispatch, affinity)."""
    if route.mode == DispatchMode.INCREMENTAL or route.required_terms or route.preferred_terms:
        return None
    return (
        route.cluster_queue,
        route.cluster_set,
        tuple(sorted(requests.items())),
        tuple(sorted(min_requests.items())) if min_requests is not None else None,
    )


@dataclass(frozen=True, slots=True)
class _Share:
    """What one workload adds to its global queue's tally."""

    global_queue: str
    state: str  # "pending" (at the hub), "dispatched" (offered), "running" (bound)
    requests: Mapping[str, int]


@dataclass
class QueueTally:
    """A global queue's workloads by state, and the fleet usage of the offered and bound."""

    pending: int = 0
    dispatched: int = 0
    running: int = 0
    usage: dict[str, int] = field(default_factory=dict)

    def add(self, share: _Share, sign: int = 1) -> None:
        setattr(self, share.state, getattr(self, share.state) + sign)
        for resource, amount in share.requests.items():
            self.usage[resource] = self.usage.get(resource, 0) + sign * amount

    def remove(self, share: _Share) -> None:
        self.add(share, -1)


@dataclass
class _ParkedShape:
    """Workloads held back for one reason that only a known change can lift, parked together.

    Either they fit nowhere (`request`: their shape, see `_shape`): placement's answer
    depends only on the shape and the clusters, so while the room on the clusters has not
    grown (`epoch`) no member needs looking at, and once it may have, one placement of the
    shape answers for all of them. Or they would exceed their global queue's fleet quota
    (`over_quota`: their route and requests, alike for all): one check against the queue's
    usage answers for all of them. Either way until the configuration moves (`generation`).
    Members are looked at again only to be told a reason that changed (`latest` against
    `told`), at most once per WAITING_REFRESH_SECONDS. See `Dispatcher._recheck_parked`."""

    request: PlacementRequest | None
    over_quota: tuple[Route, Mapping[str, int]] | None
    epoch: int
    generation: int
    since: datetime
    latest: str
    """The reason as last found."""
    told: str | None
    """The Waiting message every member was last written with; None when they differ."""
    keys: set[str] = field(default_factory=set)


@dataclass
class _Assumed:
    """Requests offered to a cluster and not yet reflected in its capacity reports."""

    cluster_queue: str
    flavor: str
    requests: dict[str, int]
    answered: bool = False


@dataclass
class Dispatcher:
    state: HubState
    fleet: Fleet
    offer_timeout_seconds: float = 30.0
    interval_seconds: float = 1.0
    clock: Callable[[], datetime] = _now
    # key → cluster → when offered (open offers only)
    offers: dict[str, dict[str, datetime]] = field(default_factory=dict)
    assumed: dict[str, dict[str, _Assumed]] = field(default_factory=dict)
    # Per cluster and (cluster queue, flavor): the sum of `assumed`, kept as offers come and go.
    _assumed_totals: dict[str, dict[tuple[str, str], dict[str, int]]] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    cycles: int = 0
    _offer_modes: dict[str, str] = field(default_factory=dict)
    _expiry_checked: datetime | None = None
    # key → clusters that answered an open offer with Pending: queued there, not timed out.
    _queued: dict[str, set[str]] = field(default_factory=dict)
    # Keys dispatched in Incremental mode: looked at every cycle even with offers open.
    _incremental: set[str] = field(default_factory=set)
    # The clusters as placement sees them; rebuilt each cycle and whenever an offer books or
    # frees room, not for every workload looked at.
    _views: list[ClusterView] | None = None
    # key → (reason, message, when) of the last Waiting condition written.
    _waiting_written: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)
    # Per global queue, its workloads counted by state and the fleet usage of those bound or
    # offered, kept up to date as workloads change instead of summed over every workload
    # each cycle: the totals, each workload's share of them, the keys to count again, and the
    # configuration generation the counts were made under (None: never counted).
    _tallies: dict[str, QueueTally] = field(default_factory=dict)
    _share_of: dict[str, _Share] = field(default_factory=dict)
    _stale: set[str] = field(default_factory=set)
    _tallies_generation: int | None = None

    # (namespace, queue name, cluster set asked for) → route: all a route depends on besides
    # the configuration, which has not moved since `_routes_generation`.
    _routes: dict[tuple[str, str, str | None], Route | str] = field(default_factory=dict)
    _routes_generation: int = -1
    # This cycle's placement failures by workload shape (see `_shape`): the workloads after
    # the first of a shape that fits nowhere fit nowhere either, and are not placed again.
    _failed_shapes: dict[tuple[object, ...], tuple[str, PlacementRequest]] = field(
        default_factory=dict
    )
    # Room on the clusters can only have grown since this moved: a capacity report, an
    # offer's room given back, a cluster connecting or leaving.
    _room_epoch: int = 0
    # Workloads that fit nowhere or would exceed their fleet quota, grouped by shape (see
    # `_ParkedShape`): key → (the workload as parked, its shape), and shape → its group. A
    # parked workload is no candidate of a cycle until it changes, leaves the queue, or its
    # group is dissolved (it may fit now, the configuration moved, or its members are due a
    # new Waiting message): a deep queue held back costs a cycle one check per shape, not
    # one per workload.
    _parked: dict[str, tuple[Workload, tuple[object, ...]]] = field(default_factory=dict)
    _parked_shapes: dict[tuple[object, ...], _ParkedShape] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state.on_indexed.append(self._workload_changed)

    def _workload_changed(self, key: str) -> None:
        self._stale.add(key)  # counted again before the next placement or status
        parked = self._parked.get(key)
        if parked is not None:
            entry = self.state.workloads.get(key)
            if entry is None or entry.workload is not parked[0]:
                self._unpark(key)

    # --- loop -------------------------------------------------------------------------------

    def wake(self, *_: object) -> None:
        self._wake.set()

    async def run(self) -> None:
        await self.state.synced.wait()
        self._adopt_open_offers()
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_seconds):
                    await self._wake.wait()
            # Let a burst of events (submissions, reports) land before deciding on all of it.
            await asyncio.sleep(COALESCE_SECONDS)
            self._wake.clear()
            try:
                await self.cycle()
            except Exception:
                log.exception("dispatch: cycle failed; retrying")
                await asyncio.sleep(self.interval_seconds)

    def _adopt_open_offers(self) -> None:
        """After a restart, offers recorded in status are open again from now."""
        now = self.clock()
        for key, entry in self.state.workloads.items():
            st = entry.workload.status
            if st and st.nominated_cluster_names and not st.cluster_name:
                self.offers[key] = dict.fromkeys(st.nominated_cluster_names, now)

    async def cycle(self) -> None:
        now = self.clock()
        self.cycles += 1
        await self._expire_offers(now)
        await self._handle_lost(now)
        usage = self._fleet_usage()
        self._views = None  # capacity reports and connections may have changed since
        self._failed_shapes = {}
        self._recheck_parked(now, usage)
        work = [self._dispatch_one(key, entry, usage, now) for key, entry in self._pending()]
        # Decisions were made in order; their writes go out together (one group commit).
        await asyncio.gather(*(w for w in work if w is not None))

    # --- step 1: offer timeouts -----------------------------------------------------------

    async def _expire_offers(self, now: datetime) -> None:
        # Walking every open offer on every cycle costs more than a burst of submissions is
        # worth; a tenth of the timeout (at most a second) is precision enough.
        step = min(1.0, self.offer_timeout_seconds / 10)
        if self._expiry_checked is not None and (
            (now - self._expiry_checked).total_seconds() < step
        ):
            return
        self._expiry_checked = now
        # Tens of thousands of offers may be open (queued at their cluster): compare times
        # against one cutoff and look at anything else only for the few that expired.
        cutoff = now - timedelta(seconds=self.offer_timeout_seconds)
        queued_at_cluster = self._queued
        expired = [
            (key, cluster)
            for key, clusters in self.offers.items()
            for cluster, offered_at in clusters.items()
            # (a queued offer was answered: the agent holds the workload in its queue)
            if offered_at <= cutoff and cluster not in queued_at_cluster.get(key, ())
        ]
        for key, cluster in expired:
            state = self.fleet.get(cluster)
            if state is not None and not state.connected:
                continue  # a lost cluster is handled by its loss timeout
            if cluster in self.offers.get(key, {}):
                self._close_offer(key, cluster)
                await self._update(
                    key,
                    partial(
                        transitions.mark_offer_failed,
                        cluster=cluster,
                        reason="OfferTimedOut",
                        message="the agent did not answer the offer in time",
                        now=now,
                    ),
                )

    # --- step 2: lost clusters ----------------------------------------------------------------

    async def _handle_lost(self, now: datetime) -> None:
        # Only the clusters that hold unfinished work are looked at, and only their work
        # (the mirror indexes it by cluster): a cluster down for hours must not make every
        # cycle walk every workload of the fleet.
        for cluster in [c for c in self.state.by_cluster if self._let_go_of(c, now)]:
            state = self.fleet.get(cluster)
            message = (
                f"cluster {cluster} was lost {int(state.lost_for(now))}s ago"
                if state is not None
                else f"cluster {cluster} is no longer a member"
            )
            for key in list(self.state.by_cluster.get(cluster, ())):
                entry = self.state.workloads.get(key)
                if entry is None or entry.workload.status is None:
                    continue
                self._close_offer(key, cluster)
                if entry.workload.status.cluster_name == cluster:
                    await self._update(
                        key,
                        partial(
                            transitions.requeue, reason="ClusterLost", message=message, now=now
                        ),
                    )
                else:
                    await self._update(
                        key,
                        partial(
                            transitions.mark_offer_failed,
                            cluster=cluster,
                            reason="ClusterLost",
                            message=message,
                            now=now,
                        ),
                    )

    def _let_go_of(self, cluster: str, now: datetime) -> bool:
        """The cluster left the fleet, or has been lost for its whole loss timeout: its
        workloads may now run elsewhere."""
        state = self.fleet.get(cluster)
        if state is None:
            return True
        return not state.connected and state.lost_for(now) >= state.loss_timeout_seconds

    # --- steps 3-7 ----------------------------------------------------------------------------

    def _pending(self) -> list[tuple[str, WorkloadEntry]]:
        """Workloads waiting for a cluster and not waiting on an open offer, highest priority
        first, then oldest first. Set operations keep this cheap when thousands are queued
        on clusters (offered and pending there)."""
        workloads = self.state.workloads
        pending = self.state.pending
        keys = pending.difference(self.offers)
        keys.difference_update(self._parked)
        if self._incremental:
            keys |= pending & self._incremental
        waiting = [(key, workloads[key]) for key in keys if key in workloads]
        waiting.sort(key=lambda item: (item[1].order, item[0]))
        return waiting

    def _route_of(self, wl: Workload) -> Route | str:
        """`route(wl)`, computed once per queue and configuration: every workload of a local
        queue (asking for the same cluster set) goes the same way."""
        generation = self.state.config_generation
        if generation != self._routes_generation or len(self._routes) > ROUTES_KEPT:
            self._routes.clear()
            self._routes_generation = generation
        meta = wl.metadata
        inputs = (
            meta.namespace or "default",
            wl.spec.queue_name,
            meta.annotations.get(CLUSTER_SET_ANNOTATION),
        )
        route = self._routes.get(inputs)
        if route is None:
            route = self._routes[inputs] = self.route(wl)
        return route

    def route(self, wl: Workload) -> Route | str:
        """Where a workload may go, or why it cannot go anywhere."""
        namespace = wl.metadata.namespace or "default"
        lq = self.state.find(LocalQueue, wl.spec.queue_name, namespace)
        if not isinstance(lq, LocalQueue):
            return f"LocalQueue {namespace}/{wl.spec.queue_name} does not exist at the hub"
        cq = lq.spec.cluster_queue
        tenants = {
            t.name
            for t in self.state.objects(Tenant)
            if isinstance(t, Tenant) and namespace in t.spec.namespaces
        }
        gq: GlobalQueue | None = None
        for candidate in sorted(self.state.objects(GlobalQueue), key=lambda o: o.name):
            assert isinstance(candidate, GlobalQueue)
            spec = candidate.spec
            if spec.cluster_queues and cq not in spec.cluster_queues:
                continue
            if spec.tenants and not tenants & set(spec.tenants):
                continue
            gq = candidate
            break
        set_name = wl.metadata.annotations.get(CLUSTER_SET_ANNOTATION) or (
            gq.spec.cluster_set if gq else None
        )
        members = self.cluster_set_members(set_name)
        if isinstance(members, str):
            return members
        if gq is None:
            return Route(cq, members, None)
        policy = gq.spec.dispatch_policy
        inc = policy.incremental
        affinity = gq.spec.cluster_affinity
        return Route(
            cq,
            members,
            gq,
            mode=policy.type,
            step_size=inc.step_size if inc else 1,
            interval_seconds=inc.interval_seconds if inc else 300,
            required_terms=tuple(tuple(t.match_expressions) for t in affinity.required)
            if affinity
            else (),
            preferred_terms=tuple(
                PreferredTerm(p.weight, tuple(p.preference.match_expressions))
                for p in affinity.preferred
            )
            if affinity
            else (),
        )

    def cluster_set_members(self, name: str | None) -> frozenset[ClusterName] | str:
        all_clusters = {
            m.name: m for m in self.state.objects(MemberCluster) if isinstance(m, MemberCluster)
        }
        if name is None:
            default = self.state.find(ClusterSet, "default")
            if default is None:
                return frozenset(ClusterName(n) for n in all_clusters)
            name = "default"
        cs = self.state.find(ClusterSet, name)
        if not isinstance(cs, ClusterSet):
            return f"ClusterSet {name!r} does not exist"
        if cs.spec.clusters is not None:
            return frozenset(ClusterName(n) for n in cs.spec.clusters)
        selector = cs.spec.cluster_selector
        return frozenset(
            ClusterName(n)
            for n, m in all_clusters.items()
            if selector is not None and selector.matches(dict(m.metadata.labels))
        )

    def _fleet_usage(self) -> dict[str, dict[str, int]]:
        """Per global queue with a fleet quota, what its bound and offered workloads request
        (a copy the cycle adds its own offers to)."""
        capped = [
            gq.name
            for gq in self.state.objects(GlobalQueue)
            if isinstance(gq, GlobalQueue) and gq.spec.fleet_quota
        ]
        if not capped:
            return {}  # (the tallies are brought up to date when the status writer asks)
        tallies = self.queue_tallies()
        return {name: dict(tallies[name].usage) if name in tallies else {} for name in capped}

    def queue_tallies(self) -> Mapping[str, QueueTally]:
        """Per global queue: workloads pending at the hub, offered, and bound to a cluster,
        and the fleet usage of the offered and bound (read-only)."""
        if self._tallies_generation != self.state.config_generation:
            # Queues, tenants or cluster sets changed, so routes may have: count afresh.
            self._tallies_generation = self.state.config_generation
            self._tallies, self._share_of = {}, {}
            self._stale = set(self.state.workloads)
        stale, self._stale = self._stale, set()
        for key in stale:
            self._count(key)
        return self._tallies

    def _count(self, key: str) -> None:
        """Take the workload's old share out of its queue's tally and put its current one in."""
        old = self._share_of.pop(key, None)
        if old is not None:
            self._tallies[old.global_queue].remove(old)
        entry = self.state.workloads.get(key)
        if entry is None:
            return
        wl = entry.workload
        st = wl.status
        if transitions.is_finished(wl):
            return
        if st is not None and st.cluster_name:
            state = "running"
        elif st is not None and st.nominated_cluster_names:
            state = "dispatched"
        elif key in self.state.pending:
            state = "pending"
        else:
            return  # inactive
        route = self._route_of(wl)
        if not isinstance(route, Route) or route.global_queue is None:
            return
        share = _Share(
            route.global_queue.name,
            state,
            workload_requests(wl) if state != "pending" else {},
        )
        self._share_of[key] = share
        self._tallies.setdefault(share.global_queue, QueueTally()).add(share)

    def _fleet_quota_reason(
        self, route: Route, requests: Mapping[str, int], usage: dict[str, dict[str, int]]
    ) -> str | None:
        gq = route.global_queue
        if gq is None or not gq.spec.fleet_quota:
            return None
        used = usage.get(gq.name, {})
        for resource, quota in sorted(gq.spec.fleet_quota.items()):
            need = requests.get(resource, 0)
            if need and used.get(resource, 0) + need > quota.milli():
                # No usage figure here: it moves with every workload the queue starts or
                # ends, and a deep queue would be rewritten for it (the GlobalQueue's status
                # shows it, `qctl get queues -o wide`).
                return (
                    f"fleet quota of GlobalQueue {gq.name} for {resource} is "
                    f"{quota.canonical()} and too little of it is free: the workload needs "
                    f"{Quantity.from_milli(need).canonical()}"
                )
        return None

    def _close_offer(self, key: str, cluster: str) -> None:
        """The offer to `cluster` is answered or void; a key with no open offer leaves
        `offers`, so `offers` alone says which workloads wait on an answer."""
        clusters = self.offers.get(key)
        if clusters is None:
            return
        clusters.pop(cluster, None)
        if not clusters:
            del self.offers[key]
        queued = self._queued.get(key)
        if queued is not None:
            queued.discard(cluster)
            if not queued:
                del self._queued[key]

    def _assume(self, cluster: str, key: str, item: _Assumed) -> None:
        self._views = None
        self._unassume(cluster, key)
        self.assumed.setdefault(cluster, {})[key] = item
        cell = self._assumed_totals.setdefault(cluster, {}).setdefault(
            (item.cluster_queue, item.flavor), {}
        )
        for resource, amount in item.requests.items():
            cell[resource] = cell.get(resource, 0) + amount

    def _park(
        self,
        key: str,
        wl: Workload,
        shape: tuple[object, ...],
        reason: str,
        now: datetime,
        request: PlacementRequest | None = None,
        over_quota: tuple[Route, Mapping[str, int]] | None = None,
    ) -> None:
        """Park `wl` with the others of its shape: it fit nowhere in this cycle (`request`),
        or it would exceed its global queue's fleet quota (`over_quota`). Called after its
        Waiting condition was decided on, so the group knows what its members were told."""
        self._unpark(key)
        written = self._waiting_written.get(key)
        told = written[1] if written is not None else None
        group = self._parked_shapes.get(shape)
        if group is None:
            group = self._parked_shapes[shape] = _ParkedShape(
                request=request,
                over_quota=over_quota,
                epoch=self._room_epoch,
                generation=self.state.config_generation,
                since=now,
                latest=reason,
                told=told,
            )
        else:
            group.latest = reason
            if group.told != told:
                group.told = None
        group.keys.add(key)
        self._parked[key] = (wl, shape)

    def _unpark(self, key: str) -> None:
        parked = self._parked.pop(key, None)
        if parked is None:
            return
        group = self._parked_shapes.get(parked[1])
        if group is not None:
            group.keys.discard(key)
            if not group.keys:
                del self._parked_shapes[parked[1]]

    def _dissolve(self, shape: tuple[object, ...]) -> None:
        """Its members are candidates again, from this cycle on."""
        group = self._parked_shapes.pop(shape)
        for key in group.keys:
            self._parked.pop(key, None)

    def _recheck_parked(self, now: datetime, usage: dict[str, dict[str, int]]) -> None:
        """Dissolve the groups whose shape may fit now, or whose members are due to be told
        a new reason; keep the rest parked as they are.

        Exact because a shape's placement does not depend on which workload has it, and
        because the memo of this cycle's failures takes in each shape found still not to
        fit, so a workload of that shape that is a candidate gets the same answer. Over a
        fleet quota, a workload's verdict depends only on its route, its requests and its
        queue's usage, which within a cycle only grows."""
        generation = self.state.config_generation
        for shape, group in list(self._parked_shapes.items()):
            if group.generation != generation:
                self._dissolve(shape)  # routes may have moved
                continue
            if group.over_quota is not None:
                route, requests = group.over_quota
                reason = self._fleet_quota_reason(route, requests, usage)
                if reason is None:
                    self._dissolve(shape)  # the queue's usage fell: one may fit now
                    continue
                group.latest = reason
            elif group.epoch != self._room_epoch:
                if self._views is None:
                    self._views = self.fleet.views(self._assumed_totals)
                assert group.request is not None
                placement = place(self._views, group.request, now)
                if placement.offer_to:
                    self._dissolve(shape)
                    continue
                group.epoch = self._room_epoch
                group.latest = placement.waiting_reason
                self._failed_shapes[shape] = (placement.waiting_reason, group.request)
            if (
                group.told != group.latest
                and (now - group.since).total_seconds() >= WAITING_REFRESH_SECONDS
            ):
                self._dissolve(shape)  # to be told the new reason

    def _room_may_have_grown(self) -> None:
        self._room_epoch += 1

    def _unassume(self, cluster: str, key: str) -> None:
        item = self.assumed.get(cluster, {}).pop(key, None)
        if item is None:
            return
        self._room_may_have_grown()
        self._views = None
        cell = self._assumed_totals[cluster][(item.cluster_queue, item.flavor)]
        for resource, amount in item.requests.items():
            cell[resource] -= amount

    def _dispatch_one(
        self, key: str, entry: WorkloadEntry, usage: dict[str, dict[str, int]], now: datetime
    ) -> Coroutine[Any, Any, None] | None:
        """Decide now (in memory); return the write-and-send to run, or None."""
        wl = entry.workload
        if self.offers.get(key) and self._offer_modes.get(key) != DispatchMode.INCREMENTAL:
            return None  # offered, waiting for the answer (or the offer timeout)
        route = self._route_of(wl)
        if isinstance(route, str):
            return self._write_waiting(key, "Misconfigured", route, now)
        requests = workload_requests(wl)
        quota_reason = self._fleet_quota_reason(route, requests, usage)
        if quota_reason is not None:
            assert route.global_queue is not None
            write = self._write_waiting(key, "FleetQuotaExceeded", quota_reason, now)
            self._park(
                key,
                wl,
                ("over quota", route.global_queue.name, tuple(sorted(requests.items()))),
                quota_reason,
                now,
                over_quota=(route, requests),
            )
            return write
        st = wl.status
        open_offers = self.offers.get(key, {})
        history = [Offer(ClusterName(c), when) for c, when in open_offers.items()] + [
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
        shape = None if history else _shape(route, requests, min_requests)
        if shape is not None and (failed := self._failed_shapes.get(shape)) is not None:
            write = self._write_waiting(key, "Waiting", failed[0], now)
            self._park(key, wl, shape, failed[0], now, request=failed[1])
            return write
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
        )
        if self._views is None:
            self._views = self.fleet.views(self._assumed_totals)
        views = self._views
        placement = place(views, request, now)
        if not placement.offer_to:
            reason = placement.waiting_reason
            write = None if open_offers else self._write_waiting(key, "Waiting", reason, now)
            if shape is not None:
                self._failed_shapes[shape] = (reason, request)
                self._park(key, wl, shape, reason, now, request=request)
            return write
        generation = (st.dispatch_generation or 0) if st else 0
        if not open_offers:
            generation += 1  # a new round of offers fences off replies to older rounds
        # Book the offer in memory first, so the next decision of this cycle sees the room
        # taken; `_commit_offer` undoes it if the write loses a race.
        by_name = {v.name: v for v in views}
        for cluster in placement.offer_to:
            fit = headroom_score(by_name[cluster].queues[route.cluster_queue], requests)
            self._assume(
                cluster, key, _Assumed(route.cluster_queue, fit[1] if fit else "", requests)
            )
            self.offers.setdefault(key, {})[cluster] = now
        if route.global_queue is not None:
            bucket = usage.setdefault(route.global_queue.name, {})
            for resource, amount in requests.items():
                bucket[resource] = bucket.get(resource, 0) + amount
        self._offer_modes[key] = route.mode
        if route.mode == DispatchMode.INCREMENTAL:
            self._incremental.add(key)
        self._waiting_written.pop(key, None)  # it is offered now, not waiting
        self._unpark(key)
        return self._commit_offer(key, entry, list(placement.offer_to), generation, now)

    async def _commit_offer(
        self,
        key: str,
        entry: WorkloadEntry,
        clusters: list[ClusterName],
        generation: int,
        now: datetime,
    ) -> None:
        """Make the offer durable in the workload's status, then send it."""
        written = await self._update_cached(
            key,
            entry,
            partial(
                transitions.mark_offered,
                clusters=[str(c) for c in clusters],
                generation=generation,
                now=now,
            ),
        )
        if written is None:
            for cluster in clusters:
                self._unassume(cluster, key)
                self._close_offer(key, cluster)
            return
        source = await self._source(written)
        for cluster in clusters:
            self._send(
                cluster, DispatchOffer(workload=written, generation=generation, source=source)
            )

    async def _send_offer(self, cluster: str, wl: Workload, generation: int) -> None:
        state = self.fleet.get(cluster)
        if state is None or state.control is None:
            return
        source = await self._source(wl)
        try:
            state.control.send(DispatchOffer(workload=wl, generation=generation, source=source))
        except LaneClosedError:
            log.info("dispatch: %s disconnected before the offer could be sent", cluster)

    async def _source(self, wl: Workload) -> dict[str, Any] | None:
        fresh = self.state.take_fresh_source(f"{wl.metadata.namespace}/{wl.metadata.name}")
        if fresh is not None:
            return fresh
        key = f"{SOURCE_PREFIX}{wl.metadata.namespace}/{wl.metadata.name}"
        try:
            return (await self.state.store.get(key)).value
        except store_base.NotFound:
            return None

    def _write_waiting(
        self, key: str, reason: str, message: str, now: datetime
    ) -> Coroutine[Any, Any, None] | None:
        """The write of a Waiting condition, or None when there is nothing new to say."""
        # The reason is written when it changes; a changed message (numbers move as capacity
        # does) at most every WAITING_REFRESH_SECONDS, or a deep queue would rewrite every
        # pending workload on every cycle. Decided here, not in the write, so a cycle over a
        # deep queue makes no coroutine for the workloads it leaves as they are.
        last = self._waiting_written.get(key)
        if last is not None and last[0] == reason:
            if last[1] == message:
                return None
            if (now - last[2]).total_seconds() < WAITING_REFRESH_SECONDS:
                return None
        self._waiting_written[key] = (reason, message, now)
        return self._write_condition(key, reason, message, now)

    async def _write_condition(self, key: str, reason: str, message: str, now: datetime) -> None:
        def change(wl: Workload) -> Workload:
            transitions.set_condition(wl, transitions.QUOTA_RESERVED, False, reason, message, now)
            return wl

        entry = self.state.workloads.get(key)
        if entry is None or await self._update_cached(key, entry, change) is None:
            await self._update(key, change)

    # --- writes -------------------------------------------------------------------------------

    async def _update_cached(
        self, key: str, entry: WorkloadEntry, change: Callable[[Workload], Workload]
    ) -> Workload | None:
        """Write `change` of the mirrored workload, CAS on the mirrored revision (no read).

        Changes touch only the status (hub.transitions), so only the status is copied and
        serialized; the stored spec is reused as it is."""
        current = entry.workload
        new = change(transitions.for_change(current))
        if new.status == current.status:
            return current  # nothing to write (e.g. a report repeating what is known)
        wire = dict(entry.raw)
        if new.status is not None:
            wire["status"] = new.status.to_wire()
        else:
            wire.pop("status", None)
        self.state.expect(key, new, wire)
        try:
            stored = await self.state.store.update(
                f"/{Workload.plural()}/{key}", wire, expected=entry.revision
            )
        except (store_base.NotFound, store_base.Conflict):
            self.state.unexpect(key, new)
            return None
        return self.state.remember(key, new, stored.revision, wire)

    async def _update(
        self,
        key: str,
        change: Callable[[Workload], Workload],
        *,
        expected: Revision | None = None,
    ) -> Workload | None:
        """Apply `change` to the stored workload with CAS; None if it is gone or raced."""
        store_key = f"/{Workload.plural()}/{key}"
        result: Workload | None = None

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            nonlocal result
            wl = Workload.model_validate(value)
            result = change(wl)
            wire = result.to_wire()
            wire.get("metadata", {}).pop("resourceVersion", None)
            return wire

        try:
            if expected is None:
                await store_base.modify(self.state.store, store_key, mutate)
            else:
                current = await self.state.store.get(store_key)
                if current.revision != expected:
                    return None
                await self.state.store.update(
                    store_key, mutate(dict(current.value)), expected=expected
                )
        except (store_base.NotFound, store_base.Conflict):
            return None
        return result

    # --- agent reports ------------------------------------------------------------------------

    async def on_status(self, cluster: str, report: WorkloadStatusReport) -> None:
        key = report.workload
        now = self.clock()
        entry = self.state.workloads.get(key)
        current = (
            entry is not None
            and entry.workload.status is not None
            and entry.workload.status.dispatch_generation == report.generation
        )
        queued_there = (
            report.phase is WorkloadPhase.PENDING
            and current
            and cluster in self.offers.get(key, {})
        )
        if queued_there:
            # Answered, and queued there: the offer stays open (no timeout, no re-offer)
            # until the cluster admits, rejects or loses it; it holds no quota meanwhile.
            self._queued.setdefault(key, set()).add(cluster)
            self._unassume(cluster, key)
        if report.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
            self._drop_assumed(key)
            # Done with dispatching: forget its bookkeeping (a long-lived hub must not grow).
            self._incremental.discard(key)
            self._offer_modes.pop(key, None)
            self._waiting_written.pop(key, None)
            self._unpark(key)
        if key in self.assumed.get(cluster, {}):
            self.assumed[cluster][key].answered = True
        withdraw: list[str] = []

        def change(wl: Workload) -> Workload:
            nonlocal withdraw
            wl, withdraw = transitions.apply_report(wl, cluster, report, now)
            return wl

        try:
            written = await self._update_cached(key, entry, change) if entry else None
            if written is None:
                written = await self._update(key, change)
        finally:
            if not queued_there:
                # Closed once the answer is written, not before: until then the mirror
                # still shows the workload unbound, and a dispatch cycle in between would
                # offer it again (and lose the write race to this answer).
                self._close_offer(key, cluster)
        if written is None and key not in self.state.workloads:
            # The user deleted it meanwhile: the cluster must let it go.
            self._send(
                cluster,
                Cancel(workload=key, generation=report.generation, reason="WorkloadDeleted"),
            )
            return
        for other in withdraw:
            self._close_offer(key, other)
            self._send(
                other,
                Withdraw(
                    workload=key,
                    generation=report.generation,
                    reason="AdmittedElsewhere",
                    message=f"admitted on cluster {cluster}",
                ),
            )
        self.wake()

    async def on_rejected(self, cluster: str, message: OfferRejected) -> None:
        key = message.workload
        now = self.clock()
        self._unassume(cluster, key)
        entry = self.state.workloads.get(key)
        if (
            entry
            and entry.workload.status
            and (entry.workload.status.dispatch_generation != message.generation)
        ):
            self._close_offer(key, cluster)
            return

        def change(wl: Workload) -> Workload:
            reason = f"Rejected:{message.reason.value}"
            return transitions.mark_offer_failed(wl, cluster, reason, message.message, now)

        try:
            written = await self._update_cached(key, entry, change) if entry else None
            if written is None:
                await self._update(key, change)
        finally:
            self._close_offer(key, cluster)  # after the write, as in on_status
        self.wake()

    def on_capacity(self, cluster: str, report: CapacityReport) -> None:
        self._room_may_have_grown()
        entries = self.assumed.get(cluster, {})
        for key in [k for k, v in entries.items() if v.answered]:
            self._unassume(cluster, key)
        self.wake()

    def on_disconnect(self, cluster: str) -> None:
        self._room_may_have_grown()  # (not room, but what the waiting are told changes)
        for key in list(self.assumed.get(cluster, {})):
            self._unassume(cluster, key)
        self.wake()

    def _drop_assumed(self, key: str) -> None:
        for cluster in list(self.assumed):
            self._unassume(cluster, key)

    def _send(self, cluster: str, payload: Cancel | Withdraw | DispatchOffer) -> None:
        state = self.fleet.get(cluster)
        if state is None or state.control is None:
            return
        with contextlib.suppress(LaneClosedError):
            state.control.send(payload)

    def on_workload_deleted(self, key: str, last: Workload) -> None:
        """A user deleted a workload: every cluster holding or offered it must drop it."""
        st = last.status
        self.offers.pop(key, None)
        self._queued.pop(key, None)
        self._incremental.discard(key)
        self._waiting_written.pop(key, None)
        self._unpark(key)
        self._offer_modes.pop(key, None)
        self.state.take_fresh_source(key)
        self._drop_assumed(key)
        if st is None:
            return
        for cluster in {c for c in [st.cluster_name, *st.nominated_cluster_names] if c}:
            self._send(
                cluster,
                Cancel(
                    workload=key,
                    generation=st.dispatch_generation or 1,
                    reason="WorkloadDeleted",
                    message="deleted by the user",
                ),
            )

    async def _catch_up(self, cluster: str, wl: Workload, held: HeldWorkload) -> None:
        """A report may have been lost with the old session: take the phase from Hello."""
        st = wl.status
        bound = st is not None and st.cluster_name == cluster
        catch_up = (
            held.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED)
            and not transitions.is_finished(wl)
        ) or (held.phase in (WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING) and not bound)
        if catch_up:
            await self.on_status(
                cluster,
                WorkloadStatusReport(
                    workload=held.workload, generation=held.generation, phase=held.phase
                ),
            )

    async def reconcile_hello(self, cluster: str, hello: Hello) -> None:
        """After (re)connect: stop what the hub no longer wants there, re-send open offers."""
        self._room_may_have_grown()
        held = {h.workload: h for h in hello.workloads}
        for key, item in held.items():
            entry = self.state.workloads.get(key)
            if entry is None:
                self._send(
                    cluster,
                    Cancel(workload=key, generation=item.generation, reason="WorkloadDeleted"),
                )
                continue
            st = entry.workload.status
            bound_here = st is not None and st.cluster_name == cluster
            nominated_here = st is not None and cluster in st.nominated_cluster_names
            same_generation = st is not None and st.dispatch_generation == item.generation
            settled = item.phase in (
                WorkloadPhase.SUCCEEDED,
                WorkloadPhase.FAILED,
                WorkloadPhase.WITHDRAWN,
            )
            if same_generation and (bound_here or nominated_here):
                await self._catch_up(cluster, entry.workload, item)
                continue
            if (not same_generation or not (bound_here or nominated_here)) and not settled:
                self._send(
                    cluster,
                    Withdraw(
                        workload=key,
                        generation=item.generation,
                        reason="NotDispatchedHere",
                        message="the hub dispatched it elsewhere",
                    ),
                )
        # The workloads bound or offered here, by the mirror's index (sorted, a copy: sending
        # awaits, and the mirror keeps changing meanwhile).
        for key in sorted(self.state.by_cluster.get(cluster, ())):
            entry = self.state.workloads.get(key)
            if entry is None or key in held:
                continue
            st = entry.workload.status
            if st is None or transitions.is_finished(entry.workload):
                continue
            if st.cluster_name == cluster or (
                not st.cluster_name and cluster in st.nominated_cluster_names
            ):
                self.offers.setdefault(key, {})[cluster] = self.clock()
                await self._send_offer(cluster, entry.workload, st.dispatch_generation or 1)
        self.wake()
