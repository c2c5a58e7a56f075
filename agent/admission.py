"""The admission shell: keeps one `agent.records.Record` per held workload, feeds it every
fact — hub messages, the engine's decisions, what the cluster shows, timers — through the
pure transitions of agent.records, and applies the effects they return: report, reject,
materialise, stop the Jobs, persist, forget (delete the record).

Everything that changes the records happens in one task (`run`), in order: hub messages
(offers, binds, withdrawals, config) are queued by the hub session and handled here, then one
status pass (timers, then what changed in the cluster: it frees the quota of finished
workloads) and one admission cycle (`agent.engine.cycle.schedule` over the snapshot of the
records), so no two handlers ever race. Materialisation runs in its own tasks (it does I/O);
they apply their outcome only if the record is still the one they were started for.

The cycle runs only while the agent holds its lease (`agent.lease`): without one it reserves
nothing and creates nothing; offers wait. Besides the hub's messages the loop takes two of the
agent's own: `Fence` (the lease ran out: every unfinished workload is stopped and reported
Evicted, ClusterLost) and `ReapOrphans` (after a Hello and a grace period: running Jobs of
workloads the agent does not hold — its state was lost and the hub did not offer them again —
are deleted).

Called by: agent.app (constructs it, feeds `submit`, runs `run`); agent.capacity reads
`snapshot()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from agent import outcomes, records
from agent.book import Book
from agent.engine.result import CycleResult
from agent.engine.snapshot import Snapshot
from agent.errors import K8sClientError, K8sForbiddenError, MaterializeError
from agent.fair_usage import UsageBook
from agent.inventory import Inventory
from agent.jobset_driver import JobSetDriver, jobset_policy, started_roles
from agent.k8s.client import JsonObject
from agent.lease import Lease
from agent.materialize import Materializer, plan_jobs
from agent.metrics import AgentMetrics
from agent.records import (
    Effect,
    LogShip,
    Materialize,
    Persist,
    Record,
    Reject,
    Report,
    Step,
    StopJobs,
)
from agent.retry import K8S_TRANSIENT
from agent.snapshots import SnapshotCache
from agent.state import StateStore
from agent.status import observe
from agent.topology_landing import NODE_FAILURES, TopologyLander, workload_lost_domains
from agent.tracing import AgentTracing
from api.v1alpha1.federation import AdmissionFairSharing, FairSharing, WaitForPodsReady
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    ConfigSync,
    DispatchOffer,
    OfferRejected,
    TraceContext,
    Withdraw,
    WorkloadStatusReport,
)

__all__ = ["AdmissionShell", "Fence", "HubMessage", "ReapOrphans", "Reporter", "pause_after_pass"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    """Not from the hub: the agent's lease ran out, so it stops what it runs."""

    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReapOrphans:
    """Not from the hub: the hub has had its chance to re-offer after a Hello; Jobs made for
    workloads this agent does not hold (its state was lost, and the hub did not re-offer
    them, so they were withdrawn, cancelled or moved while it was away) are deleted."""


HubMessage = ConfigSync | DispatchOffer | Bind | Withdraw | Cancel | Fence | ReapOrphans


def pause_after_pass(started: float, finished: float, min_interval: float) -> float:
    """How long the loop waits after a pass before it may start the next: passes start at
    most every `min_interval` (events meanwhile are coalesced into one pass), counted from
    the start of a pass, so a pass that took longer is followed at once. Counting from its
    end would leave quota released during a long pass idle for one more interval."""
    return max(0.0, started + min_interval - finished)


class Reporter(Protocol):
    def report(self, payload: WorkloadStatusReport | OfferRejected) -> None: ...


class AdmissionShell:
    def __init__(
        self,
        *,
        store: StateStore,
        materializer: Materializer,
        inventory: Inventory,
        reporter: Reporter,
        lease: Lease,
        cadence: records.Cadence,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[], None] | None = None,
        cycle_min_interval: float = 0.05,
        materialize_retry: float = 10.0,
        tracing: AgentTracing | None = None,
        metrics: AgentMetrics | None = None,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        admission_fair_sharing: AdmissionFairSharing | None = None,
        fair_sharing: FairSharing | None = None,
    ) -> None:
        self.store = store
        self.before_stop: Callable[[str, int, asyncio.Event, bool], Awaitable[None]] | None = None
        """Awaited (in a background task) before a cancelled workload's Jobs are deleted, and
        after an evicted one's, with its key, generation, an event set to cut it short and
        whether the Jobs are gone already (agent.app: the logs are shipped, bounded)."""
        self.open_logs: Callable[[str, int], Awaitable[bool]] | None = None
        """Awaited in this loop before an evicted workload's Jobs are deleted, with its key
        and generation: starts shipping its logs and returns once the ship's reads hold them
        (agent.app: tightly bounded); whether a ship is on."""
        self.stopping: dict[str, tuple[int, asyncio.Event]] = {}
        """Workloads (→ generation) whose Jobs a background stop ships the logs of and then
        deletes: the reaper leaves their Jobs alone, and a withdrawal or a fence sets the
        event (stop now)."""
        self.tracing = tracing or AgentTracing()
        self.metrics = metrics or AgentMetrics()
        self.materializer = materializer
        self.jobsets = JobSetDriver(materializer, self._plan_for)
        self.inventory = inventory
        self.reporter = reporter
        self.lease = lease
        self.cadence = cadence
        self.clock = clock
        self.monotonic = monotonic
        self.on_change = on_change
        self.cycle_min_interval = cycle_min_interval
        self.materialize_retry = materialize_retry
        self.config: ConfigSync | None = None
        self.book = Book(cadence)
        """The records — everything the agent keeps per workload — and their indexes."""
        self.held = self.book.records
        self.usage = UsageBook(save=store.save_fair_usage)
        """Admission fair sharing: local queues' decayed usage, kept in the state dir."""
        self._snapshots = SnapshotCache(
            wait_for_pods_ready, admission_fair_sharing, self.usage, fair_sharing
        )
        self.cycles = 0
        self.last_result: CycleResult | None = None
        """The last cycle's decisions (the metrics read its pending reasons)."""
        self._inbox: asyncio.Queue[tuple[HubMessage, TraceContext | None]] = asyncio.Queue()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cycle_due = True
        """Admission may have changed since the last cycle (offers, config, freed quota)."""
        self._cycle_wakeup: float | None = None
        """The engine's next time-based decision (backoffs, timeouts)."""
        self.lander = TopologyLander(materializer.kube)
        """Lands gated pods in their topology domains (agent.topology_landing)."""
        self._nodes_changed = True
        """A node changed since the last check of topology assignments for lost nodes."""
        self._put_off: set[str] = set()
        """Pending workloads whose new reason the cadence held back (`outcomes.still_put_off`):
        the next pending pass looks at them again."""

    # records ---------------------------------------------------------------------------------

    def load(self) -> None:
        """Restore the last config and the held workloads from the state directory."""
        self._configure(self.store.load_config())
        self.usage.load(self.store.load_fair_usage())
        now = self.clock()
        for stored in self.store.load_all(Record.from_json):
            # A settled one (finished, given back) is kept for its TTL from now (when it
            # settled is not stored).
            record = dataclasses.replace(stored, finished_at=now) if stored.settled else stored
            self._set(record.key, record)
        log.info(
            "restored config revision %s and %d held workloads",
            self.config.revision if self.config else None,
            len(self.held),
        )

    def _configure(self, config: ConfigSync | None) -> None:
        self.config = config
        pushed = config.namespaces if config is not None else []
        self.materializer.namespace_labels = {n.name: n.labels for n in pushed}

    def _set(self, key: str, record: Record | None) -> None:
        """The one place a record changes; forgetting is deleting it."""
        self.tracing.changed(self.held.get(key), record)
        self.metrics.record_changed(self.held.get(key), record, self.clock())
        put = self.book.put(key, record)
        if put.arrived or put.freed:
            self._cycle_due = True  # (freed: whatever it held is free, admit who waits)
        if put.freed:
            self._changed()
            self._wake.set()

    async def _apply(self, key: str, step: Step) -> None:
        """Apply a transition: the record first, then its effects in order."""
        self._set(key, step.record)
        await self._effects(key, step.record, step.effects)

    async def _effects(self, key: str, record: Record | None, effects: Sequence[Effect]) -> None:
        for done, effect in enumerate(effects, start=1):
            if isinstance(effect, Report) and self._stopping(key, effect.payload.generation):
                continue  # (a repeat: the stop reports once its Jobs are gone)
            if isinstance(effect, Report | Reject):
                self.reporter.report(effect.payload)
            elif isinstance(effect, Persist):
                self.book.persist(key, with_offer=effect.with_offer)
            elif isinstance(effect, Materialize):
                assert record is not None
                self._spawn(self._materialize(record), f"materialize {key}")
            elif isinstance(effect, StopJobs):
                if effect.logs is LogShip.BEFORE and record is not None and self.before_stop:
                    # Never in this loop: the stop and what follows it go on in the background.
                    self.stopping[key] = (record.generation, asyncio.Event())
                    work = self._stop_after_shipping(key, record, effect, effects[done:])
                    self._spawn(work, f"stop {key}")
                    return
                shipping = (
                    effect.logs is LogShip.ALONGSIDE
                    and record is not None
                    and self.open_logs is not None
                    and self.before_stop is not None
                    and await self.open_logs(key, record.generation)
                )
                namespace, name = key.split("/", 1)
                jobs = self.inventory.workload_objects(namespace, name)
                try:
                    await self.materializer.stop(namespace, name, jobs, effect.job_names)
                except K8S_TRANSIENT as exc:
                    # The cluster's API is failing beyond the client's retries. What follows
                    # a stop is the report that the Jobs are gone (the hub may then run the
                    # workload elsewhere): it waits until they really are.
                    log.warning("stopping %s: %s; retrying in the background", key, exc)
                    rest = effects[done:]
                    self._spawn(self._keep_stopping(key, record, effect, rest), f"stop {key}")
                    return
                if record is not None and jobset_policy(record) is not None:
                    self._spawn(self.jobsets.delete_service(record), f"jobset service {key}")
                if shipping and record is not None:
                    # The Jobs are gone; the reports wait for the ship (bounded), since the
                    # hub takes a generation's lines only while it is bound here. What else
                    # follows (the record persisted) goes on now.
                    self.stopping[key] = (record.generation, asyncio.Event())
                    rest = effects[done:]
                    self._spawn(self._report_after_shipping(key, record, rest), f"ship {key}")

    async def _keep_stopping(
        self, key: str, record: Record | None, stop: StopJobs, after: Sequence[Effect]
    ) -> None:
        namespace, name = key.split("/", 1)
        await self.materializer.stop_for_good(namespace, name, stop.job_names)
        await self._effects(key, record, after)
        self._wake.set()

    async def _stop_after_shipping(
        self, key: str, record: Record, stop: StopJobs, after: Sequence[Effect]
    ) -> None:
        """A cancel's stop: the logs first (bounded), then the Jobs, then what follows (the
        report: only once the Jobs are gone)."""
        namespace, name = key.split("/", 1)
        try:
            assert self.before_stop is not None
            try:
                await self.before_stop(key, record.generation, self.stopping[key][1], False)
            except Exception:  # the logs must never keep the Jobs
                log.exception("shipping the logs of %s before its stop", key)
            jobs = self.inventory.workload_objects(namespace, name)
            try:
                await self.materializer.stop(namespace, name, jobs, stop.job_names)
            except K8S_TRANSIENT as exc:
                log.warning("stopping %s: %s; retrying in the background", key, exc)
                await self.materializer.stop_for_good(namespace, name, stop.job_names)
        finally:
            self.stopping.pop(key, None)
        if jobset_policy(record) is not None:
            self._spawn(self.jobsets.delete_service(record), f"jobset service {key}")
        await self._effects(key, record, after)
        self._wake.set()

    async def _report_after_shipping(
        self, key: str, record: Record, after: Sequence[Effect]
    ) -> None:
        """An eviction's ship, its Jobs deleted meanwhile: once it ends (bounded), the
        reports that followed the stop (held back while `stopping`; the rest went on)."""
        try:
            assert self.before_stop is not None
            try:
                await self.before_stop(key, record.generation, self.stopping[key][1], True)
            except Exception:  # the logs must never keep the report
                log.exception("shipping the logs of %s after its eviction", key)
        finally:
            if self.stopping.get(key, (None,))[0] == record.generation:
                del self.stopping[key]
        for effect in after:
            if isinstance(effect, Report):
                self.reporter.report(effect.payload)

    def _hurry(self, key: str) -> None:
        """A withdrawal or a fence must stop at once: a stop shipping logs stops waiting."""
        if (stopping := self.stopping.get(key)) is not None:
            stopping[1].set()

    def _stopping(self, key: str, generation: int) -> bool:
        """A background stop of this generation (or a later one) of the workload is on."""
        stopping = self.stopping.get(key)
        return stopping is not None and stopping[0] >= generation

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def flavors(self) -> list[str]:
        return (
            [] if self.config is None else [f.metadata.name for f in self.config.resource_flavors]
        )

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The engine's snapshot of the config and every unfinished held workload; `now`:
        the time of the cycle it is for (local queues' usage is sampled then)."""
        return self._snapshots.build(
            self.config,
            self.held,
            self.book.take_changed(),
            self.inventory.namespace_labels(),
            cluster=(self.inventory.nodes.objects, self.inventory.pods.objects),
            now=now,
        )

    # input -----------------------------------------------------------------------------------

    def submit(self, message: HubMessage, trace_context: TraceContext | None = None) -> None:
        """Queue a hub message for the loop (called by the hub session's reader), with the
        context of the hub's span that sent it."""
        self._inbox.put_nowait((message, trace_context))
        self._wake.set()

    def wake(self) -> None:
        """Something in the cluster changed: run a pass soon."""
        self._wake.set()

    def namespaces_changed(self) -> None:
        """A namespace's labels changed: a cluster queue's namespaceSelector may match now."""
        self._cycle_due = True
        self._wake.set()

    def nodes_changed(self) -> None:
        """A node changed: an assigned topology domain may have lost its node."""
        self._nodes_changed = True
        self._wake.set()

    def lease_granted(self) -> None:
        """The lease is held again: what waited for it may be admitted now."""
        self._cycle_due = True
        self._wake.set()

    async def prime(self) -> None:
        """After a restart, once the inventory is listed and before the hub hears from us:
        bring every held workload's phase up to date, so the Hello reports what the cluster
        runs now."""
        await self.observe(priming=True)

    async def run(self) -> None:
        """Handle messages, run a status pass and a cycle if one is due, wait for the next
        event or timer — forever."""
        loop = asyncio.get_running_loop()
        while True:
            timers = [t for t in (self._cycle_wakeup, self.book.next_wakeup()) if t is not None]
            timeout = max(0.0, min(timers) - self.clock()) if timers else None
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            started = loop.time()
            await self.step()
            await asyncio.sleep(pause_after_pass(started, loop.time(), self.cycle_min_interval))

    async def step(self) -> None:
        """One pass. A cycle runs only when admission can have changed — a hub message,
        released quota, the engine's own next wake-up — and the lease is held; not on every
        pod event: with thousands of pending workloads a cycle is the expensive part."""
        while not self._inbox.empty():
            await self.handle(*self._inbox.get_nowait())
        # The status pass first: quota that finished workloads release is free for this
        # very cycle, not the next one (with short Jobs the difference is a sizeable part
        # of the quota's time).
        await self.observe()
        if self._nodes_changed:
            self._nodes_changed = False
            await self.check_nodes()
        wakeup_at = self._cycle_wakeup
        due = self._cycle_due or (wakeup_at is not None and self.clock() >= wakeup_at)
        if due and self.lease.held(self.monotonic()):
            self._cycle_due = False
            await self.cycle()
        await self._flush()

    async def handle(self, message: HubMessage, trace_context: TraceContext | None = None) -> None:
        now = self.clock()
        if not isinstance(message, Fence | ReapOrphans):
            self._cycle_due = True  # (those two free quota by forgetting, if at all)
        if isinstance(message, ConfigSync):
            self._configure(message)
            self.store.save_config(message)
        elif isinstance(message, DispatchOffer):
            meta = message.workload.metadata
            key = f"{meta.namespace or 'default'}/{meta.name}"
            held = self.held.get(key)
            with self.tracing.message(key, message, held, trace_context):
                await self._apply(key, records.on_offer(held, message, now))
        elif isinstance(message, Bind):
            held = self.held.get(message.workload)
            with self.tracing.message(message.workload, message, held, trace_context):
                await self._apply(message.workload, records.on_bind(held, message, now))
        elif isinstance(message, Withdraw | Cancel):
            if isinstance(message, Withdraw):
                self._hurry(message.workload)
            held = self.held.get(message.workload)
            with self.tracing.message(message.workload, message, held, trace_context):
                step = records.on_withdraw(held, message, now)
                await self._apply(message.workload, step)
        elif isinstance(message, Fence):
            log.warning("%s; stopping every held workload", message.message)
            for key in list(self.stopping):
                self._hurry(key)
            for key, record in list(self.held.items()):
                await self._apply(key, records.on_fence(record, message.message, now))
        else:
            # A generation given back must not keep running either (its stop may have failed).
            # Nor do the Jobs of a stop in progress go here: it ships their logs first.
            running = {k for k, r in self.held.items() if not r.given_back} | set(self.stopping)
            await self.materializer.reap(self.inventory.managed_jobs(), running)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # the cycle -------------------------------------------------------------------------------

    async def cycle(self) -> CycleResult:
        now = self.clock()
        # The engine is pure and the snapshot immutable, so the cycle runs in a worker
        # thread: with thousands pending it takes tens of milliseconds, and in the loop it
        # would hold up every Job create, watch event and hub message for that long. The GIL
        # still hands the loop a turn every few milliseconds meanwhile; nothing the cycle
        # reads changes, because only this task changes the records.
        snapshot, started = self.snapshot(now), self.monotonic()
        result = await asyncio.to_thread(self._snapshots.cycle(snapshot), now)
        self._snapshots.admitted(snapshot, result)
        self.usage.flush()
        self.metrics.cycle_done(snapshot, result, self.monotonic() - started)
        self.cycles += 1
        self.last_result = result
        self._cycle_wakeup = result.next_wakeup
        sample_at = self.usage.next_sample_at()
        if sample_at is not None and (self._cycle_wakeup is None or sample_at < self._cycle_wakeup):
            self._cycle_wakeup = sample_at
        for key, step in outcomes.quota_steps(self.held, result, now):
            await self._apply(key, step)
        for admit in result.admitted:
            if (admitted := self.held.get(admit.workload)) is not None:
                self.tracing.admitted(admitted, admit, self.cycles, now)
        if result.admitted:
            # Let the materialisations send their creates before the pending pass: the
            # quota is held from now, so every moment until the Jobs run is quota unused.
            await asyncio.sleep(0)
        put_off = self._put_off
        for key, step in outcomes.waiting_steps(self.held, result, now, self.cadence, put_off):
            await self._apply(key, step)
        self._put_off = outcomes.still_put_off(self.held, result, put_off)
        if result.admitted or result.preempted or result.evicted:
            self._changed()
        if result.preempted or result.evicted:
            self._wake.set()  # released quota: the next cycle may admit the preemptor
        return result

    # materialisation -------------------------------------------------------------------------

    def _current(self, started: Record) -> Record | None:
        record = self.held.get(started.key)
        return record if records.awaits_jobs(record, started) else None

    async def _materialize_later(self, started: Record) -> None:
        await asyncio.sleep(self.materialize_retry)
        if self._current(started) is not None:
            await self._materialize(started)

    def _plan_for(
        self, record: Record, roles: frozenset[str] | None = None
    ) -> list[JsonObject] | None:
        """The Jobs of an admitted record (of these JobSet roles; None: as its start order
        allows now), or None when no Job may be made now: no Job without a lease (a fence
        forgets the record)."""
        now = self.monotonic()
        if not self.lease.held(now):
            return None
        status = record.workload.status
        assert status is not None and status.admission is not None
        flavors = {
            f.metadata.name: f for f in (self.config.resource_flavors if self.config else [])
        }
        namespace, name = record.key.split("/", 1)
        if roles is None and jobset_policy(record) is not None:
            roles = started_roles(record, self.inventory.workload_jobs(namespace, name))
        return plan_jobs(
            record.workload,
            record.offer.generation,
            record.offer.source,
            status.admission,
            flavors,
            self.lease.job_deadline(now),
            cluster=self.materializer.cluster,
            roles=roles,
            attempts=dict(record.jobset_attempts),
        )

    async def _materialize(self, started: Record) -> None:
        def plan() -> list[JsonObject] | None:
            return self._plan_for(started)

        key = started.key
        try:
            with self.tracing.materializing(started) as span:
                names = await self.materializer.make(
                    plan, lambda: self._current(started) is not None, what=key
                )
                if span is not None:
                    span.set_attribute("multiq.jobs", list(names or ()))
        except K8sForbiddenError as exc:
            if (record := self._current(started)) is not None:
                log.error("cannot materialise %s, and will try again: %s", key, exc)
                await self._apply(
                    key, records.on_materialize_denied(record, str(exc), self.clock())
                )
                self._spawn(self._materialize_later(started), f"materialize {key} again")
            return
        except (MaterializeError, K8sClientError) as exc:
            if (record := self._current(started)) is not None:
                log.error("cannot materialise %s: %s", key, exc)
                await self._apply(key, records.on_materialize_failed(record, str(exc)))
                self._wake.set()
            return
        if names is not None and (record := self._current(started)) is not None:
            policy = jobset_policy(record)
            if policy is not None:  # every Job it will have, started or not
                names = [n for role in policy.roles for n in policy.job_names(role)]
                await self.jobsets.ensure_service(record)
            made = records.on_materialized(record, tuple(names), self.clock())
            await self._apply(key, made)
            self._wake.set()
            return
        # Given up meanwhile: delete what this attempt may have made (this generation only).
        namespace, name = key.split("/", 1)
        uid = started.workload.metadata.uid
        await self.materializer.delete_all(namespace, name, uid, generation=started.generation)

    # status pass -----------------------------------------------------------------------------

    async def observe(self, *, priming: bool = False) -> None:
        """The status pass: the records' timers that are due, then what changed in the held
        workloads' Jobs and pods. `priming`: the mirrors were just listed, so a missing Job
        is really missing."""
        now = self.clock()
        looks = set()
        for due in list(self.book.due(now)):
            step = records.on_timer(due, now, self.cadence)
            await self._apply(due.key, step)
            if step.record is not None:
                looks.add(due.key)
        # Only workloads whose Jobs or pods changed (all of them after a relist), and those
        # whose time to be looked at again has come. Looked up by key, so a pass costs what
        # changed, not what is held.
        relisted, owners = self.inventory.take_changes()
        if priming or relisted:
            keys = list(self.held)
        else:
            keys = sorted(looks | self.book.owned_by(owners))
        for key in keys:
            record = self.held.get(key)
            if record is None or not records.observable(record):
                continue
            namespace, name = key.split("/", 1)
            jobs = self.inventory.workload_jobs(namespace, name)
            observation = observe(
                uid=record.workload.metadata.uid or "",
                generation=record.generation,
                job_names=record.job_names,
                jobs=jobs,
                pods=self.inventory.workload_pods(namespace, name),
            )
            observation, restart, work = self.jobsets.look(record, jobs, observation)
            if work is not None:
                self._spawn(work, f"jobset {key}")
            if restart is not None and restart.record is not None:
                await self._apply(key, restart)
                record = restart.record
            exist = self.jobsets.busy(key) or self.inventory.made(namespace, record.job_names)
            step = records.next_report(
                record, records.Sighting(observation, exist, priming), now, self.cadence
            )
            if step.record is not record or step.effects:
                await self._apply(key, step)
            if (now_held := self.held.get(key)) is not None and records.observable(now_held):
                status = now_held.workload.status
                self.lander.land_workload(
                    status.admission if status else None,
                    now_held.generation,
                    self.inventory.workload_pods(namespace, name),
                )

    async def check_nodes(self) -> None:
        """Evict (reason NodeFailures) every running workload a domain of whose topology
        assignment lost its node: the hub queues it again (agent.topology_landing)."""
        now = self.clock()
        nodes = self.inventory.nodes.objects
        for key, record in list(self.held.items()):
            status = record.workload.status
            if not records.observable(record) or status is None or status.admission is None:
                continue
            namespace, name = key.split("/", 1)
            lost = workload_lost_domains(
                status.admission,
                record.generation,
                nodes,
                self.inventory.workload_pods(namespace, name),
            )
            if lost:
                message = f"{'; '.join(lost)}: its pods there cannot run; placed again"
                log.warning("evicting %s: %s", key, message)
                await self._apply(key, records.on_evict(record, NODE_FAILURES, message, now))

    # persistence and the rest ----------------------------------------------------------------

    async def _flush(self) -> None:
        """Encode here, write in a worker thread: the loop never waits for the disk."""
        saves, deletes = self.book.take_writes()
        if saves or deletes:
            await asyncio.to_thread(self.store.save_many, saves, deletes)

    async def close(self) -> None:
        await self.lander.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._flush()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
