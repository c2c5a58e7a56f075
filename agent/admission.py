"""The admission shell: keeps one `agent.records.Record` per held workload, feeds it every
fact — hub messages, the engine's decisions, what the cluster shows, timers — through the
pure transitions of agent.records, and applies the effects they return: report, reject,
materialise, stop the Jobs, persist, forget (delete the record).

Everything that changes the records happens in one task (`run`), in order: hub messages
(offers, binds, withdrawals, config) are queued by the hub session and handled here, then one
status pass (timers, then what changed in the cluster: it frees the quota of finished
workloads) and one admission cycle (`agent.engine.cycle.schedule` over the snapshot of the
records), so no two handlers ever race. The shell only coordinates; the pieces it drives
each own one thing: agent.status_pass (the status pass), agent.job_making (materialisation,
in tasks of its own, applied only if the record still awaits those Jobs), agent.stopper
(stopping Jobs, logs first for a cancel), agent.node_checks (evictions for lost nodes),
agent.pacing (when the loop runs next), agent.outcomes (the cycle's results as steps).

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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from agent import outcomes, records
from agent.book import Book
from agent.engine.quota import Usage
from agent.engine.result import CycleResult
from agent.engine.snapshot import Snapshot
from agent.fair_usage import UsageBook
from agent.inventory import Inventory
from agent.job_making import JobMaker
from agent.lease import Lease
from agent.loop_messages import Fence, HubMessage, ReapOrphans, Reporter, transition, workload_of
from agent.materialize import Materializer
from agent.metrics import AgentMetrics
from agent.node_checks import lost_node_evictions
from agent.pacing import next_cycle_wakeup, pause_after_pass, runs_in_loop, wait_timeout
from agent.records import Effect, Materialize, Persist, Record, Reject, Report, Step, StopJobs
from agent.snapshots import SnapshotCache
from agent.state import StateStore
from agent.status_pass import StatusPass
from agent.stopper import Stopper, reap_spared
from agent.topology_landing import TopologyLander
from agent.tracing import AgentTracing
from api.v1alpha1.federation import AdmissionFairSharing, FairSharing, WaitForPodsReady
from api.v1alpha1.messages import ConfigSync, TraceContext, Withdraw

__all__ = ["AdmissionShell", "Fence", "HubMessage", "ReapOrphans", "Reporter", "pause_after_pass"]

log = logging.getLogger(__name__)


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
        self.tracing = tracing or AgentTracing()
        self.metrics = metrics or AgentMetrics()
        self.materializer = materializer
        self.inventory = inventory
        self.reporter = reporter
        self.lease = lease
        self.cadence = cadence
        self.clock = clock
        self.monotonic = monotonic
        self.on_change = on_change
        self.cycle_min_interval = cycle_min_interval
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
        self._last_cycle_cpu = 0.0
        """The CPU seconds the last cycle took (a light one runs in the loop: `cycle`)."""
        self.last_result: CycleResult | None = None
        """The last cycle's decisions (the metrics read its pending reasons)."""
        self._inbox: asyncio.Queue[tuple[HubMessage, TraceContext | None, str | None]] = (
            asyncio.Queue()
        )
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cycle_due = True
        """Admission may have changed since the last cycle (offers, config, freed quota)."""
        self._cycle_wakeup: float | None = None
        """When a cycle is due on time alone (agent.pacing `next_cycle_wakeup`)."""
        self.lander = TopologyLander(materializer.kube)
        """Lands gated pods in their topology domains (agent.topology_landing)."""
        self._nodes_changed = True
        """A node changed since the last check of topology assignments for lost nodes."""
        self._put_off: dict[str, float] = {}
        """Pending workloads whose new reason the cadence held back (`outcomes.still_put_off`),
        each with when its report is due: the first pending pass from then looks at it again."""
        self.maker = JobMaker(
            held=self.held,
            materializer=materializer,
            inventory=inventory,
            lease=lease,
            flavors=lambda: self.config.resource_flavors if self.config else [],
            tracing=self.tracing,
            apply=self._apply,
            spawn=self._spawn,
            wake=self._wake.set,
            clock=clock,
            monotonic=monotonic,
            retry_after=materialize_retry,
        )
        self.jobsets = self.maker.jobsets
        self.stopper = Stopper(
            materializer,
            inventory,
            self.jobsets,
            spawn=self._spawn,
            follow_up=self._effects,
            wake=self._wake.set,
        )
        """Stops Jobs; agent.app gives it the hook that ships a cancel's logs first."""
        self.status_pass = StatusPass(
            book=self.book,
            inventory=inventory,
            jobsets=self.jobsets,
            lander=self.lander,
            cadence=cadence,
            apply=self._apply,
            spawn=self._spawn,
            take_made=self.maker.take_made,
            given_up=self.maker.given_up,
        )

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
            if isinstance(effect, Report) and self.stopper.repeats(key, effect.payload.generation):
                continue  # (a repeat: the stop reports once its Jobs are gone)
            if isinstance(effect, Report | Reject):
                self.reporter.report(effect.payload)
            elif isinstance(effect, Persist):
                self.book.persist(key, with_offer=effect.with_offer, offer_text=effect.offer_text)
            elif isinstance(effect, Materialize):
                assert record is not None
                self._spawn(self.maker.make(record), f"materialize {key}")
            elif isinstance(effect, StopJobs) and await self.stopper.stop(
                key, record, effect, effects[done:]
            ):
                return  # (the rest follows the stop, in the background, once the Jobs are gone)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def flavors(self) -> list[str]:
        return [f.metadata.name for f in (self.config.resource_flavors if self.config else [])]

    def snapshot(self, now: float | None = None, *, admitted_only: bool = False) -> Snapshot:
        """The engine's snapshot of the config and every unfinished held workload; `now`:
        the time of the cycle it is for (local queues' usage is sampled then);
        `admitted_only`: of the admitted ones only (what a capacity report reads)."""
        return self._snapshots.build(
            self.config,
            self.held,
            self.book.take_changed(),
            self.inventory.namespace_labels(),
            cluster=(self.inventory.nodes.objects, self.inventory.pods.objects),
            now=now,
            admitted_only=admitted_only,
        )

    def admitted_usage(self) -> Usage:
        """What the admitted workloads of the last `snapshot` hold, per cluster queue."""
        return self._snapshots.admitted_usage()

    # input -----------------------------------------------------------------------------------

    def submit(
        self,
        message: HubMessage,
        trace_context: TraceContext | None = None,
        *,
        received: str | None = None,
    ) -> None:
        """Queue a hub message for the loop (called by the hub session's reader), with the
        context of the hub's span that sent it; `received`: the text of the envelope an offer
        came in (saved as it is: records.Persist)."""
        self._inbox.put_nowait((message, trace_context, received))
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
            timeout = wait_timeout((self._cycle_wakeup, self.book.next_wakeup()), self.clock())
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

    async def handle(
        self,
        message: HubMessage,
        trace_context: TraceContext | None = None,
        received: str | None = None,
    ) -> None:
        now = self.clock()
        if not isinstance(message, Fence | ReapOrphans):
            self._cycle_due = True  # (those two free quota by forgetting, if at all)
        if isinstance(message, ConfigSync):
            self._configure(message)
            self.store.save_config(message)
        elif isinstance(message, Fence):
            log.warning("%s; stopping every held workload", message.message)
            self.stopper.hurry_all()
            for key, record in list(self.held.items()):
                await self._apply(key, records.on_fence(record, message.message, now))
        elif isinstance(message, ReapOrphans):
            spared = reap_spared(self.held, self.stopper.stopping)
            await self.materializer.reap(self.inventory.managed_jobs(), spared)
        else:
            key = workload_of(message)
            if isinstance(message, Withdraw):
                self.stopper.hurry(key)  # (a withdrawn workload's logs are not shipped first)
            held = self.held.get(key)
            with self.tracing.message(key, message, held, trace_context):
                await self._apply(key, transition(held, message, now, received))
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # the cycle -------------------------------------------------------------------------------

    async def cycle(self) -> CycleResult:
        now = self.clock()
        # The engine is pure and the snapshot immutable, so a cycle that is not light
        # (agent.pacing `runs_in_loop`) runs in a worker thread: nothing it reads changes,
        # because only this task changes the records.
        snapshot, started = self.snapshot(now), self.monotonic()
        light = runs_in_loop(self._last_cycle_cpu, self._snapshots.next_cycle_is_small())
        run = self._snapshots.cycle(snapshot)
        result = self._timed(run, now) if light else await asyncio.to_thread(self._timed, run, now)
        self._snapshots.admitted(snapshot, result)
        self.usage.flush()
        self.metrics.cycle_done(snapshot, result, self.monotonic() - started)
        self.cycles += 1
        self.last_result = result
        self._cycle_wakeup = next_cycle_wakeup(result.next_wakeup, self.usage.next_sample_at())
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
        looked = outcomes.to_look_at(result, put_off, now)
        for key, step in outcomes.waiting_steps(self.held, result, now, self.cadence, looked):
            await self._apply(key, step)
        self._put_off = outcomes.still_put_off(self.held, looked, put_off, now, self.cadence)
        if result.admitted or result.preempted or result.evicted:
            self._changed()
        if result.preempted or result.evicted:
            self._wake.set()  # released quota: the next cycle may admit the preemptor
        return result

    def _timed(self, run: Callable[[float], CycleResult], now: float) -> CycleResult:
        """`run(now)`, keeping the CPU time it took (in whichever thread it runs)."""
        started = time.thread_time()
        result = run(now)
        self._last_cycle_cpu = time.thread_time() - started
        return result

    # status pass -----------------------------------------------------------------------------

    async def observe(self, *, priming: bool = False) -> None:
        """The status pass (agent.status_pass). `priming`: the mirrors were just listed, so a
        missing Job is really missing."""
        await self.status_pass.run(self.clock(), priming=priming)

    async def check_nodes(self) -> None:
        """Evict (reason NodeFailures) every running workload a domain of whose topology
        assignment lost its node: the hub queues it again (agent.node_checks)."""
        nodes, pods_of = self.inventory.nodes.objects, self.inventory.workload_pods
        running = {key: self.held[key] for key in self.book.running}
        for eviction in lost_node_evictions(running, nodes, pods_of, self.clock()):
            log.warning("evicting %s: %s", eviction.key, eviction.message)
            await self._apply(eviction.key, eviction.step)

    # persistence and the rest ----------------------------------------------------------------

    async def _flush(self) -> None:
        """Encode here; the store writes without the loop waiting for the disk."""
        saves, deletes = self.book.take_writes()
        if saves or deletes:
            await self.store.write(saves, deletes)

    async def close(self) -> None:
        await self.lander.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._flush()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
