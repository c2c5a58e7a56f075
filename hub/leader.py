"""Leader-only work, in one place: what a hub does only while it leads, started together when
a leadership term begins and stopped together, at once, when it ends.

Several hubs may share one etcd; one leads (hub.election). Only the leader dispatches,
pushes configuration to agents, writes queue statuses and serves agent sessions; the others
mirror the store and serve reads (hub.http.leader). `LeaderWork.start(term)` and
`LeaderWork.stop()` are the only places where that work begins and ends; anything else that
only a leader may do belongs here too.

A term starts from nothing it did not read in the store. The objects that remember things
between events (the dispatcher with its offer book, the agents' answers, the configuration
pusher, the queue status writer) are built afresh for every term, and every cluster starts the term
disconnected and lost since the term began: a newly elected leader knows nothing of what
its predecessor promised agents (leases, offers in flight), so it takes nothing for granted
(docs/exactly-once.md, "Hub high availability"). `LeaderTerm.began_at` is that moment.

At a term's start, in order:
0. a fresh dispatcher, answers, pusher and status writer are built, and the agents' routes
   pointed at them (between terms the last ones stay reachable, but no longer listen to the mirror);
1. the fleet forgets every session, capacity report and departed cluster: each cluster is
   lost since the term began and its agent's lease assumed granted then, and MemberCluster
   statuses that still say connected are corrected;
2. the term is recorded in the store (`TERM_KEY`, a fenced write) and the mirror is brought
   up to that write, so the term starts from everything its predecessor wrote;
3. the leader-only loops start: dispatch, configuration push, queue statuses.
At a term's end, in order: the loops stop; every agent session is closed (agents redial and
find the new leader); the term's dispatcher stops listening to the mirror.

Called by: hub.election (start and stop), hub.app (builds it; its routes and listeners reach
the current dispatcher and pusher through it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.v1alpha1.federation import MemberCluster
from hub.answers import AgentAnswers
from hub.config_push import ConfigPusher
from hub.dispatch import Dispatcher
from hub.fairshare import FairShareLedger
from hub.fleet import Fleet
from hub.loghub import LogHub
from hub.metrics import UNCOUNTED, HubMetrics
from hub.objects import ObjectRepository
from hub.placement.holds import SlurmJobs
from hub.queue_status import QueueStatusWriter
from hub.sessions import SessionRoutes
from hub.settings import HubSettings
from hub.state import HubState
from hub.store import base as store_base
from hub.tasks import cancel_all, start_guarded

__all__ = ["TERM_KEY", "LeaderTerm", "LeaderWork"]

log = logging.getLogger(__name__)

TERM_KEY = "/hub/leader"
"""Where the current leader records its term: {"url", "fencingToken", "since"}."""
MIRROR_CATCH_UP_SECONDS = 10.0
"""How long a new leader waits for its mirror to reach its own term record before it gives
the term up (its watch of the store is not working)."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class LeaderTerm:
    """One period during which this hub leads."""

    url: str
    """This hub's advertised URL: where agents and the other hubs reach the leader."""
    fencing_token: int
    """Grows with every term, whichever hub holds it (with etcd, the create revision of the
    election key; 0 for a hub alone on SQLite)."""
    began_at: datetime
    """When this hub learnt that it leads (UTC). Nothing an agent was granted by a former
    leader is known: lease deadlines and loss timers count from here."""
    began_monotonic: float
    """The event loop's clock at `began_at`."""
    ended: asyncio.Event
    """Set when the term is over (lost, resigned, or the hub shuts down)."""


class LeaderWork:
    def __init__(
        self,
        *,
        settings: HubSettings,
        state: HubState,
        fleet: Fleet,
        repo: ObjectRepository,
        logs: LogHub,
        clock: Callable[[], datetime] = _now,
        metrics: HubMetrics = UNCOUNTED,
        slurm: SlurmJobs | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.state = state
        self.fleet = fleet
        self.repo = repo
        self.logs = logs
        self.clock = clock
        self.slurm = slurm
        self.term: LeaderTerm | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._listeners: list[tuple[list[Any], Any]] = []  # (listener list, listener)
        # Outside a term the last term's parts (or, before any, unused ones) stay reachable
        # but deaf to the mirror: nothing accumulates in them while this hub follows.
        self.dispatcher, self.answers, self.config, self.statuses, self.fair_share = (
            self._fresh_parts()
        )
        self._deafen()
        # The agents' routes are registered once; they reach the current term's parts.
        self.sessions = SessionRoutes(fleet, self.answers, self.config, logs, metrics=metrics)

    @property
    def leading(self) -> bool:
        return self.term is not None

    # --- the term's beginning and end --------------------------------------------------------

    async def start(self, term: LeaderTerm) -> None:
        if self.term is not None:
            raise RuntimeError("a leadership term is already running")
        self.term = term
        log.info("leading from %s (fencing token %d)", term.began_at, term.fencing_token)
        self.dispatcher, self.answers, self.config, self.statuses, self.fair_share = (
            self._fresh_parts()
        )
        self.sessions.answers = self.answers
        self.sessions.config = self.config
        await self._forget_sessions(term)
        await self._record(term)
        self._tasks = [
            start_guarded("dispatch", self.dispatcher.run),
            start_guarded("config-push", self.config.run),
            start_guarded("queue-status", self.statuses.run),
            start_guarded("fair-share", self.fair_share.run),
        ]

    async def stop(self) -> None:
        """End the term's work: at once, and whatever state it is in."""
        tasks, self._tasks = self._tasks, []
        await cancel_all(tasks)
        lanes = [
            lane
            for cluster in self.fleet.clusters.values()
            for lane in (cluster.control, cluster.logs)
            if lane is not None
        ]
        await asyncio.gather(*(lane.close() for lane in lanes), return_exceptions=True)
        if self.term is not None:
            log.warning("no longer leading; agent sessions closed")
        self.term = None
        self._deafen()

    # --- steps ----------------------------------------------------------------------------

    async def _forget_sessions(self, term: LeaderTerm) -> None:
        """Step 1: every cluster starts the term disconnected, lost since it began, with the
        lease its agent may hold assumed granted then (the dispatcher assumes it again when
        its loop starts: `Fleet.took_over`); clusters that left the fleet under an earlier
        term are forgotten too, so their work waits as that of a cluster never known."""
        members = [m for m in self.state.objects(MemberCluster) if isinstance(m, MemberCluster)]
        self.fleet.clusters.clear()
        self.fleet.departed.clear()
        self.fleet.load(members)
        self.fleet.took_over(term.began_at)
        for member in members:
            if member.status is not None and member.status.connected:
                cluster_state = self.fleet.get(member.name)
                if cluster_state is not None:
                    await self.fleet.write_status(cluster_state)

    async def _record(self, term: LeaderTerm) -> None:
        """Step 2: record the term (a fenced write) and wait for the mirror to see it."""
        value: dict[str, Any] = {
            "url": term.url,
            "fencingToken": term.fencing_token,
            "since": term.began_at.isoformat(),
        }
        store = self.state.store
        try:
            written = await store.update(TERM_KEY, value, expected=None)
        except store_base.NotFound:
            written = await store.create(TERM_KEY, value)
        async with asyncio.timeout(MIRROR_CATCH_UP_SECONDS):
            # (the mirror tells no one of its revision; this runs once per term)
            while self.state.revision < written.revision:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    # --- the parts remade for every term ---------------------------------------------------

    def _fresh_parts(
        self,
    ) -> tuple[Dispatcher, AgentAnswers, ConfigPusher, QueueStatusWriter, FairShareLedger]:
        state, fleet = self.state, self.fleet
        lists: list[list[Any]] = [state.on_indexed, state.on_workload, state.on_config]
        before = [list(listeners) for listeners in lists]
        dispatcher = Dispatcher(
            state,
            fleet,
            offer_timeout_seconds=self.settings.offer_timeout_seconds,
            interval_seconds=self.settings.dispatch_interval_seconds,
            metrics=self.metrics,
            slurm=self.slurm,
        )
        answers = AgentAnswers(dispatcher)
        config = ConfigPusher(state, fleet)
        statuses = QueueStatusWriter(
            state,
            fleet,
            dispatcher,
            self.repo,
            interval_seconds=self.settings.queue_status_interval_seconds,
        )
        fair_share = FairShareLedger(state, dispatcher, self.repo, self.settings, clock=self.clock)
        # Parts that listen to the mirror (the dispatcher does) must stop when retired.
        self._listeners = [
            (listeners, f)
            for listeners, old in zip(lists, before, strict=True)
            for f in listeners
            if f not in old
        ]
        return dispatcher, answers, config, statuses, fair_share

    def _deafen(self) -> None:
        for listeners, listener in self._listeners:
            listeners.remove(listener)
        self._listeners = []
