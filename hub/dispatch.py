"""The dispatch shell: keeps the snapshot of `hub.placement.cycle` current from events, runs
the pure cycle, and applies its plan — durable writes first (compare-and-swap through
hub.transitions), then the messages to the agents (docs/exactly-once.md).

What it keeps: the offer book (one record per workload, hub.placement.book), the fleet usage
of every global queue (kept as workloads change, not summed each cycle), the routes of the
current configuration, and when offer timeouts were last looked at. What it applies:
- the cycle's plan: offers (BestFit binds, then offers; other modes ask for reservations),
  Waiting conditions, parked groups, offers that timed out, lost clusters let go of;
- agents' answers (hub.sessions calls `on_status`, `on_rejected`, `on_capacity`,
  `on_disconnect`, `reconcile_hello`): each report is accepted only from the cluster that
  holds the workload's reservation or binding (hub.transitions.apply_report), a reservation
  binds through one compare-and-swap, and the clusters are told Bind or Withdraw.

A write that loses a race changes nothing: the next cycle decides again from what won.

Called by: hub.app (runs the loop), hub.sessions (agent reports), hub.state listeners (`wake`,
deletions), hub.queue_status (`queue_tallies`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from api.v1alpha1.federation import ClusterSet, Fencing, GlobalQueue, MemberCluster, Tenant
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    DispatchOffer,
    TraceContext,
    Withdraw,
)
from api.v1alpha1.queues import ClusterQueue, LocalQueue
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.fleet import Fleet
from hub.lanes import LaneClosedError
from hub.metrics import UNCOUNTED, HubMetrics, OfferOutcome
from hub.placement.book import DispatchBook
from hub.placement.cycle import (
    OFFER_TIMED_OUT,
    ClusterFacts,
    CycleSettings,
    DispatchPlan,
    Expiry,
    HubSnapshot,
    OfferDecision,
    dispatch,
    record_plan,
    status_change,
)
from hub.placement.fairshare import FairShareOrder
from hub.placement.holds import SlurmJobs
from hub.placement.routing import Routing
from hub.placement.snapshot import ClusterName
from hub.placement.tally import QueueCounts, QueueTally, Tallies
from hub.state import SOURCE_PREFIX, HubState
from hub.store import base as store_base
from hub.tracing import HubTracing
from hub.writes import WorkloadWriter

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

COALESCE_SECONDS = 0.01
WAITING_REFRESH_SECONDS = 10.0
_DEFAULT_FENCING = Fencing()
UNKNOWN_CLUSTER_LET_GO = timedelta(
    seconds=_DEFAULT_FENCING.lease_seconds + _DEFAULT_FENCING.grace_seconds
)
"""A cluster the hub never knew holds work: let go once a default lease and grace passed."""


def _now() -> datetime:
    return datetime.now(UTC)


class Dispatcher:
    def __init__(
        self,
        state: HubState,
        fleet: Fleet,
        *,
        offer_timeout_seconds: float = 30.0,
        interval_seconds: float = 1.0,
        reservation_timeout_seconds: int = 30,
        clock: Callable[[], datetime] = _now,
        settings: CycleSettings | None = None,
        tracing: HubTracing | None = None,
        metrics: HubMetrics = UNCOUNTED,
        slurm: SlurmJobs | None = None,
    ) -> None:
        self.state = state
        self.tracing = tracing or HubTracing()
        self.metrics = metrics
        self.fleet = fleet
        self.interval_seconds = interval_seconds
        self.reservation_timeout_seconds = reservation_timeout_seconds
        self.clock = clock
        self.settings = settings or CycleSettings(
            offer_timeout_seconds=offer_timeout_seconds,
            waiting_refresh_seconds=WAITING_REFRESH_SECONDS,
        )
        self.slurm = slurm
        """The Slurm-mode workloads' facts, for their holds (hub.slurm_index)."""
        self.fair_share: FairShareOrder | None = None
        """The fleet's fair-share factors, set by hub.fairshare every calc period."""
        self.book = DispatchBook()
        self.writer = WorkloadWriter(state)
        self.tallies = Tallies()
        self.cycles = 0
        self.last_plan: DispatchPlan | None = None
        self.observers: list[Callable[[DispatchPlan], None]] = []
        """Called with every cycle's plan (statistics, tests)."""
        self._expiry_checked_at: datetime | None = None
        self._routing: Routing | None = None
        self._routing_generation = -1
        self._wake = asyncio.Event()
        self.took_over_at = clock()
        """When this hub began dispatching (started, or elected leader)."""
        self.state.on_indexed.append(self._workload_changed)

    # --- the loop -----------------------------------------------------------------------

    def wake(self, *_: object) -> None:
        self._wake.set()

    async def run(self) -> None:
        await self.state.synced.wait()
        self.took_over_at = self.clock()
        self.fleet.took_over(self.took_over_at)
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
            if st is None or transitions.is_finished(entry.workload):
                continue
            if st.nominated_cluster_names and not st.cluster_name:
                offers = dict.fromkeys(st.nominated_cluster_names, now)
                self.book.update(key, offers=offers, mode="AllAtOnce")
            elif st.cluster_name and not transitions.is_admitted(entry.workload):
                self.book.update(key, offers={st.cluster_name: now}, bound=True)

    async def cycle(self) -> DispatchPlan:
        now = self.clock()
        self.cycles += 1
        self.metrics.dispatch_cycles.inc()
        self._close_overdue_sessions(now)
        plan = dispatch(self.snapshot(), now)
        self.last_plan = plan
        for observer in self.observers:
            observer(plan)
        self._expiry_checked_at = plan.expiry_checked_at
        await self._apply(plan, now)
        return plan

    def routing(self) -> Routing:
        generation = self.state.config_generation
        if self._routing is None or self._routing_generation != generation:
            self._routing_generation = generation
            objects = self.state.objects
            self._routing = Routing.of(
                local_queues=[o for o in objects(LocalQueue) if isinstance(o, LocalQueue)],
                global_queues=[o for o in objects(GlobalQueue) if isinstance(o, GlobalQueue)],
                tenants=[o for o in objects(Tenant) if isinstance(o, Tenant)],
                cluster_sets=[o for o in objects(ClusterSet) if isinstance(o, ClusterSet)],
                members=[o for o in objects(MemberCluster) if isinstance(o, MemberCluster)],
                cluster_queues=[o for o in objects(ClusterQueue) if isinstance(o, ClusterQueue)],
            )
        return self._routing

    def snapshot(self) -> HubSnapshot:
        routing = self.routing()
        return HubSnapshot(
            workloads=self.state.workloads,
            pending=self.state.pending,
            by_cluster=self.state.by_cluster,
            book=self.book,
            routing=routing,
            clusters=self._cluster_facts(),
            views=self.fleet.views(self.book.room, self.book.domains, routing.reclaiming),
            usage=self.fleet_usage(),
            config_generation=self.state.config_generation,
            settings=self.settings,
            expiry_checked_at=self._expiry_checked_at,
            slurm=self.slurm,
            fair_share=self.fair_share,
        )

    def _cluster_facts(self) -> dict[str, ClusterFacts]:
        facts = self.fleet.facts()
        for name in self.state.by_cluster:
            if name not in facts:
                # Gone before this hub took over: it cannot know what lease the cluster was
                # last granted, so it waits the longest the default fencing allows.
                at = self.took_over_at + UNKNOWN_CLUSTER_LET_GO
                facts[name] = ClusterFacts(name, connected=False, member=False, let_go_at=at)
        return facts

    # --- applying a plan --------------------------------------------------------------------

    async def _apply(self, plan: DispatchPlan, now: datetime) -> None:
        record_plan(self.book, plan, now)
        # Decisions were made in order; their writes go out together (one group commit).
        work: list[Coroutine[Any, Any, object]] = [
            self._expire(e.key, e.cluster, e.bound, now) for e in plan.expired
        ]
        work += [self.writer.update(g.key, status_change(g, now)) for g in plan.let_go]
        work += [self.writer.change(w.key, status_change(w, now)) for w in plan.waits]
        if self.tracing.enabled:
            for wait in plan.waits:
                entry = self.state.workloads.get(wait.key)
                self.tracing.waiting(wait, entry.workload if entry is not None else None)
        work += [self._commit_offer(offer, now) for offer in plan.offers]
        work += [self.writer.change(c.key, status_change(c, now)) for c in plan.cancels]
        await asyncio.gather(*work)

    async def _expire(self, key: str, cluster: str, bound: bool, now: datetime) -> None:
        written = await self.writer.update(key, status_change(Expiry(key, cluster, bound), now))
        self.metrics.offer_outcome(cluster, OfferOutcome.EXPIRED)
        if bound and written is not None and written.status is not None:
            generation = written.status.dispatch_generation or 1
            withdraw = Withdraw(
                workload=key, generation=generation, reason="OfferTimedOut", message=OFFER_TIMED_OUT
            )
            self.send(cluster, withdraw)

    async def _commit_offer(self, offer: OfferDecision, now: datetime) -> None:
        """Make the offer durable in the workload's status, then send it."""
        key = offer.key
        with self.tracing.dispatching(offer) as traced:
            entry = self.state.workloads.get(key)
            if entry is not None and entry.workload is not offer.workload:
                # Changed since the cycle decided (a report bound a reservation while the
                # plan's other writes were awaited, say): the decision is stale, and written
                # on what is there now it would offer a bound workload a new round.
                entry = None
            change = status_change(offer, now)
            written = await self.writer.update_cached(key, entry, change) if entry else None
            if written is None:  # lost a race (or deleted, or changed): decided again next cycle
                traced.lost_race()
                for cluster in offer.clusters:
                    self.book.close_offer(key, cluster)
                    self.book.give_back_room(key, cluster)
                return
            self.metrics.offered(offer.clusters, bound=offer.bound)
            source = await self.source(written)
            encoded = self._encoded_offer(key, written, source)
            for cluster in offer.clusters:
                offered = traced.offered(written)
                message = self.offer_message(offered, offer.generation, offer.bound, source)
                self.send(
                    cluster,
                    message,
                    trace_context=traced.offer(cluster),
                    encoded=encoded if offered is written else None,
                )

    def offer_message(
        self, wl: Workload, generation: int, bound: bool, source: dict[str, Any] | None
    ) -> DispatchOffer:
        """The offer of `wl`, without its status: the agent makes its own (records.on_offer),
        so the hub's would be encoded, sent, parsed and checked for nothing."""
        return DispatchOffer(
            workload=wl.model_copy(update={"status": None}),
            generation=generation,
            source=source,
            bound=bound,
            reservation_timeout_seconds=self.reservation_timeout_seconds,
        )

    def _encoded_offer(
        self, key: str, written: Workload, source: dict[str, Any] | None
    ) -> dict[str, str] | None:
        """The JSON of an offer's workload (without its status, as `offer_message`) and
        source, from their stored forms: the store's writes encoded their pod templates
        already (store_base.encode_json keeps a spec's JSON), so an offer is written without
        encoding them again. None when the mirror holds another version of the workload than
        the one offered."""
        entry = self.state.workloads.get(key)
        if entry is None or entry.workload is not written:
            return None
        stored = store_base.with_resource_version(entry.raw, entry.revision)
        stored.pop("status", None)
        encoded = {"workload": store_base.encode_json(stored)}
        if source is not None:
            encoded["source"] = store_base.encode_json(source)
        return encoded

    async def source(self, wl: Workload) -> dict[str, Any] | None:
        fresh = self.state.take_fresh_source(f"{wl.metadata.namespace}/{wl.metadata.name}")
        if fresh is not None:
            return fresh
        key = f"{SOURCE_PREFIX}{wl.metadata.namespace}/{wl.metadata.name}"
        try:
            return (await self.state.store.get(key)).value
        except store_base.NotFound:
            return None

    # --- the book -------------------------------------------------------------------------

    def _workload_changed(self, key: str) -> None:
        self.tallies.stale(key)  # counted again before the next placement or status
        if key in self.book.records:
            entry = self.state.workloads.get(key)
            self.book.workload_changed(key, entry.workload if entry is not None else None)

    # --- fleet usage ------------------------------------------------------------------------

    def fleet_usage(self) -> dict[str, dict[str, int]]:
        """Per global queue with a fleet quota: what its offered and bound workloads request
        (a copy)."""
        capped = [gq.name for gq in self.routing().capped_queues()]
        if not capped:
            return {}  # (the tallies are brought up to date when the status writer asks)
        tallies = self.queue_tallies()
        return {name: dict(tallies[name].usage) if name in tallies else {} for name in capped}

    def queue_tallies(self) -> Mapping[str, QueueTally]:
        """Per global queue: workloads pending at the hub, offered, and bound to a cluster,
        and the fleet usage of the offered and bound (read-only)."""
        routing = self.routing()
        return self.tallies.count(
            self.state.workloads, self.state.pending, routing, self._routing_generation
        )

    def queue_counts(self) -> tuple[Mapping[str, QueueCounts], Mapping[str, QueueCounts]]:
        """Per local queue (`namespace/name`) and per cluster queue: workloads waiting for
        admission and admitted (read-only)."""
        self.queue_tallies()
        return self.tallies.local_queues(), self.tallies.cluster_queues()

    def cluster_set_members(self, name: str | None) -> frozenset[ClusterName] | str:
        return self.routing().cluster_set_members(name)

    # --- agents ---------------------------------------------------------------------------

    def send(
        self,
        cluster: str,
        payload: Cancel | Withdraw | DispatchOffer | Bind,
        *,
        trace_context: TraceContext | None = None,
        encoded: Mapping[str, str] | None = None,
    ) -> None:
        state = self.fleet.get(cluster)
        if state is None or state.control is None:
            return
        with contextlib.suppress(LaneClosedError):
            state.control.send(payload, trace_context=trace_context, encoded=encoded)

    def _close_overdue_sessions(self, now: datetime) -> None:
        for state in self.fleet.clusters.values():
            if state.lease_overdue(now) and state.control is not None:
                log.warning(
                    "cluster %s: no lease renewal for %.0fs; its session is closed",
                    state.name,
                    state.lease_seconds,
                )
                state.control.close_soon()
