"""Wiring: one `Agent` per member cluster — inventory mirrors, the admission shell, the hub
session, the lease, capacity reports and log streams — run as guarded tasks until cancelled.

Start-up order: restore state (last config, lease terms, held workloads) → list nodes, pods
and jobs → bring held workloads up to date (`AdmissionShell.prime`) → dial the hub (Hello
carries the inventory and the held workloads) → admission, capacity, lease and deadline
loops. The lease loop renews the lease over the session and fences the agent when it runs
out (`agent.lease`); the deadline loop pushes the fencing deadline of running Jobs forward
while the lease is held (`agent.deadlines`). A crash of any eternal
task is logged and ends the agent (its supervisor restarts it; state and adoption make that
safe). Cancellation (SIGTERM/SIGINT in `agent.main`) closes both lanes and leaves every Job
running.

Called by: agent.main; tests construct `Agent` directly with a `KubeClient` on kubesim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from agent.admission import AdmissionShell, Fence, ReapOrphans
from agent.capacity import CapacityPacer, capacity_report
from agent.deadlines import deadline_change
from agent.errors import HubUnreachableError, K8sError, K8sNotFoundError
from agent.hubclient import HubSession
from agent.inventory import Inventory
from agent.k8s.client import JsonObject, Kube, Resource
from agent.labels import Labels
from agent.lease import Lease, LeaseTerms
from agent.logs import LogStreams
from agent.materialize import Materializer
from agent.metrics import AgentMetrics, AgentView, MetricsServer, serve_metrics
from agent.records import Cadence
from agent.settings import AGENT_VERSION, AgentSettings
from agent.state import StateStore
from agent.tracing import AgentTracing
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    CapacityReport,
    ConfigSync,
    DispatchOffer,
    Hello,
    LeaseGrant,
    Payload,
    TraceContext,
    Withdraw,
)

__all__ = ["Agent", "guard"]

log = logging.getLogger(__name__)


async def guard(name: str, coro: Coroutine[Any, Any, None]) -> None:
    """Run an eternal task; log how it ended (crash, unexpected exit, cancellation)."""
    try:
        await coro
    except asyncio.CancelledError:
        log.debug("%s: cancelled", name)
        raise
    except Exception:
        log.exception("%s: crashed", name)
        raise
    else:
        log.error("%s: exited unexpectedly", name)


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        kube: Kube,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        timings = settings.timings
        self.settings = settings
        self.kube = kube
        self.clock = clock
        self.monotonic = monotonic
        self.pacer = CapacityPacer(
            debounce=timings.capacity_debounce, heartbeat=timings.capacity_heartbeat
        )
        self.inventory = Inventory(
            kube,
            on_change=self._on_cluster_change,
            watch_timeout=timings.watch_timeout,
            retry_delay=timings.watch_retry,
        )
        self.store = StateStore(settings.state_dir)
        self.lease = Lease(
            self._last_terms(), started=monotonic(), unleased_interval=timings.unleased_renewal
        )
        self._next_renewal = 0.0
        self._lease_wake = asyncio.Event()
        self._terms_changed = asyncio.Event()
        self.deadline_writes = 0
        """Job deadline PATCHes sent (what fencing costs in API writes)."""
        self.materializer = Materializer(kube, settings.cluster)
        self.metrics = AgentMetrics()
        self.metrics_server: MetricsServer | None = None
        """Serving `/metrics` while running, when the settings give a metrics port."""
        self.session = HubSession(
            settings,
            hello=self.hello,
            on_connect=self._on_connect,
            on_message=self._on_message,
            on_log_message=self._on_log_message,
            on_disconnect=self._on_disconnect,
            on_logs_lost=self._on_disconnect,
        )
        self.admission = AdmissionShell(
            store=self.store,
            materializer=self.materializer,
            inventory=self.inventory,
            reporter=self.session,
            lease=self.lease,
            cadence=Cadence(
                status_interval=timings.status_interval,
                pending_refresh=timings.pending_refresh,
                finished_ttl=timings.finished_ttl,
            ),
            clock=clock,
            monotonic=monotonic,
            on_change=self.pacer.changed,
            cycle_min_interval=timings.cycle_min_interval,
            materialize_retry=timings.materialize_retry,
            tracing=AgentTracing(cluster=settings.cluster),
            wait_for_pods_ready=settings.wait_for_pods_ready,
            admission_fair_sharing=settings.admission_fair_sharing,
            fair_sharing=settings.fair_sharing,
            metrics=self.metrics,
        )
        self.logs = LogStreams(
            cluster=settings.cluster,
            kube=kube,
            inventory=self.inventory,
            send=self.metrics.counting_sender(self.session.send_log),
            buffer_lines=settings.log_buffer_lines,
            batch_lines=settings.log_batch_lines,
            batch_interval=timings.log_batch_interval,
            finished=self._workload_done,
            ship_limit_bytes=settings.log_ship_limit_bytes,
            lane_up=lambda: self.session.logs is not None,
        )
        stop_wait = settings.log_ship_stop_wait_seconds

        async def ship_before_stop(
            workload: str, generation: int, hurry: asyncio.Event, jobs_gone: bool
        ) -> None:
            await self.logs.ship_before_stop(
                workload, generation, stop_wait, hurry, jobs_gone=jobs_gone
            )

        self.admission.stopper.before_stop = ship_before_stop
        open_wait = settings.log_ship_open_wait_seconds

        async def open_before_stop(workload: str, generation: int) -> bool:
            if open_wait <= 0:
                return False
            return await self.logs.open_before_stop(workload, generation, open_wait)

        self.admission.stopper.open_logs = open_before_stop
        self.ready = asyncio.Event()
        self.metrics.watch(
            AgentView(
                snapshot=self.admission.snapshot,
                records=lambda: self.admission.held,
                last_result=lambda: self.admission.last_result,
                connected=self.session.connected.is_set,
                lease_held=lambda: self.lease.held(self.monotonic()),
                cycles=lambda: self.admission.cycles,
                deadline_writes=lambda: self.deadline_writes,
                fair_usage=self.admission.usage.scores,
            )
        )

    # callbacks -------------------------------------------------------------------------------

    def _workload_done(self, key: str) -> bool:
        held = self.admission.held.get(key)
        return held is None or held.settled

    def _on_cluster_change(self, resource: Resource) -> None:
        if resource is Resource.NAMESPACES:
            self.admission.namespaces_changed()
            return
        if resource is Resource.NODES:
            self.admission.nodes_changed()
        self.admission.wake()
        self.pacer.changed()

    def hello(self) -> Hello:
        cfg = self.admission.config
        return Hello(
            cluster=self.settings.cluster,
            agent_version=AGENT_VERSION,
            config_revision=cfg.revision if cfg else None,
            inventory=self.inventory.summary(self.admission.flavors()),
            workloads=self.admission.book.held_summary(),
        )

    async def _on_connect(self) -> None:
        log.info("connected to the hub %s as %s", self.settings.hub, self.settings.cluster)
        # The renewal first: nothing is admitted here until its grant comes back.
        self.lease.session_started()
        await self._renew()
        await self.send_capacity()
        # The latest report of every held workload again, acknowledged or not: a hub that
        # crashed after acking (before storing) a report would otherwise never learn it.
        # Reports are idempotent, so this costs one message per held workload.
        for report in self.admission.book.latest_reports():
            self.session.report(report)

    async def _on_disconnect(self) -> None:
        await self.logs.close_all()

    async def _on_message(
        self, payload: Payload, trace_context: TraceContext | None, text: str
    ) -> None:
        if isinstance(payload, LeaseGrant):
            self._on_grant(payload)
        elif isinstance(payload, DispatchOffer):
            self.admission.submit(payload, trace_context, received=text)
        elif isinstance(payload, ConfigSync | Bind | Withdraw | Cancel):
            self.admission.submit(payload, trace_context)
        else:
            log.error("unexpected %s from the hub; ignored", payload.type)

    async def _on_log_message(self, payload: Any) -> None:
        await self.logs.handle(payload)

    # capacity --------------------------------------------------------------------------------

    def capacity(self) -> CapacityReport:
        """A capacity report of what is admitted and free here now."""
        cfg = self.admission.config
        snapshot = self.admission.snapshot(admitted_only=True)
        return capacity_report(
            cluster=self.settings.cluster,
            snapshot=snapshot,
            nodes=self.inventory.node_summary(),
            observed_at=datetime.fromtimestamp(self.clock(), UTC),
            config_revision=cfg.revision if cfg else None,
            local_queues=self.admission.usage.report(),
            admitted=self.admission.book.admitted_unreported(),
            usage=self.admission.admitted_usage(),  # (that snapshot's)
        )

    async def send_capacity(self) -> None:
        # Made when the lane is free, not before waiting for it: a status report sent ahead
        # of a report made earlier would have the hub count that workload's answer as shown
        # in room the report does not show yet (hub.answers gives back what the offer
        # booked), and offer the same room twice. When disconnected, the next connect sends
        # a fresh one after Hello.
        with contextlib.suppress(HubUnreachableError):
            await self.session.send(self.capacity)

    # the lease -------------------------------------------------------------------------------

    def _last_terms(self) -> LeaseTerms:
        text = self.store.load_lease_terms()
        if text is not None:
            try:
                return LeaseTerms.from_json(text)
            except (ValueError, KeyError, TypeError) as exc:
                log.error("ignoring unreadable lease terms: %s", exc)
        return LeaseTerms()

    async def _renew(self) -> None:
        now = self.monotonic()
        self._next_renewal = now + self.lease.renew_interval()
        self._lease_wake.set()
        with contextlib.suppress(HubUnreachableError):
            await self.session.send(self.lease.renewal(now))

    def _on_grant(self, grant: LeaseGrant) -> None:
        now = self.monotonic()
        was_held = self.lease.held(now)
        if self.lease.grant(grant, now):
            self.store.save_lease_terms(self.lease.terms.to_json())
            self._terms_changed.set()
        if self.lease.held(now) and not was_held:
            log.info(
                "lease granted (%gs, grace %gs, fencing %s)",
                self.lease.terms.lease_seconds,
                self.lease.terms.grace_seconds,
                "on" if self.lease.terms.enabled else "off",
            )
            self.admission.lease_granted()
        self._lease_wake.set()

    async def _lease_loop(self) -> None:
        """Renew the lease while connected (`Lease.renew_interval`); when it runs out, fence:
        the admission loop stops every held workload."""
        lease = self.lease
        while True:
            now = self.monotonic()
            if lease.expired(now) and not lease.fenced:
                lease.fenced = True
                if lease.deadline is None:
                    message = (
                        f"fenced: no lease from the hub within {lease.terms.lease_seconds:g}s "
                        "of starting"
                    )
                else:
                    message = (
                        f"fenced: the lease from the hub ran out {now - lease.deadline:.1f}s ago"
                    )
                self.admission.submit(Fence(message))
            connected = self.session.connected.is_set()
            if connected and now >= self._next_renewal:
                await self._renew()
                continue
            times = [self._next_renewal] if connected else []
            fence_at = lease.fence_at()
            if fence_at is not None and not lease.fenced:
                times.append(fence_at)
            timeout = max(0.0, min(times) - now) if times else None
            self._lease_wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._lease_wake.wait()

    def _fenced_jobs(self) -> list[JsonObject]:
        """The Jobs whose fencing deadline the agent keeps: those of the current generation
        of every bound workload that runs here."""
        out = []
        held = self.admission.held
        for key in list(self.admission.book.running):
            record = held[key]
            if not record.bound:
                continue
            namespace, name = record.key.split("/", 1)
            generation = str(record.generation)
            out += [
                job
                for job in self.inventory.workload_jobs(namespace, name)
                if ((job.get("metadata") or {}).get("labels") or {}).get(Labels.GENERATION)
                == generation
            ]
        return out

    async def _deadline_loop(self) -> None:
        """While the lease is held, every sixth of a lease: push the fencing deadline of the
        running Jobs forward where less than half a lease of it is left (or take it off when
        fencing is off). One PATCH of one field per Job per half lease at most."""
        while True:
            # (A grant with new terms wakes it: the pace follows the lease granted.)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.lease.terms.lease_seconds / 6):
                    await self._terms_changed.wait()
            self._terms_changed.clear()
            now = self.monotonic()
            if not self.lease.held(now):
                continue
            stop_by = self.lease.stop_by(now, self.clock())
            half_lease = self.lease.terms.lease_seconds / 2
            for job in self._fenced_jobs():
                change = deadline_change(
                    job, stop_by=stop_by, half_lease=half_lease, now=self.clock()
                )
                if change is None or not self.lease.held(self.monotonic()):
                    continue
                meta = job["metadata"]
                try:
                    await self.kube.patch(
                        Resource.JOBS, meta["namespace"], meta["name"], change.patch()
                    )
                except K8sNotFoundError:
                    continue  # deleted meanwhile
                except K8sError as exc:
                    log.warning("cannot move the deadline of job %s: %s", meta["name"], exc)
                    continue
                self.deadline_writes += 1

    async def _orphan_loop(self, grace: float) -> None:
        """After each Hello, once the hub has had `grace` seconds to re-offer what it wants
        here (without the session dropping), reap Jobs of workloads nobody holds."""
        session = self.session
        while True:
            await session.connected.wait()
            try:
                async with asyncio.timeout(grace):
                    await session.disconnected.wait()
            except TimeoutError:
                self.admission.submit(ReapOrphans())
                await session.disconnected.wait()

    async def _read_server_version(self) -> None:
        try:
            self.inventory.kubernetes_version = await self.kube.server_version()
        except K8sError as exc:
            log.warning("cannot read the server version: %s", exc)

    async def _capacity_loop(self) -> None:
        while True:
            await self.pacer.wait()
            await self.send_capacity()

    # running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        settings = self.settings
        if settings.metrics_port is not None:
            self.metrics_server = await serve_metrics(
                self.metrics, settings.metrics_address, settings.metrics_port
            )
        self.admission.load()
        try:
            async with asyncio.TaskGroup() as tasks:
                # Read beside the first listing, not before it: while the API server fails,
                # both wait out their retries, and the Hello (which carries the version)
                # waits for the longer of the two instead of their sum.
                version = tasks.create_task(self._read_server_version())
                for mirror in self.inventory.mirrors:
                    tasks.create_task(guard(f"watch {mirror.resource}", mirror.run()))
                await self.inventory.wait_listed()
                await version
                await self.admission.prime()
                tasks.create_task(guard("admission", self.admission.run()))
                tasks.create_task(guard("hub session", self.session.run()))
                tasks.create_task(guard("capacity", self._capacity_loop()))
                tasks.create_task(
                    guard("orphans", self._orphan_loop(self.settings.timings.orphan_grace))
                )
                tasks.create_task(guard("lease", self._lease_loop()))
                tasks.create_task(guard("deadlines", self._deadline_loop()))
                shipper = self.logs.watch_finished(
                    lambda: self.admission.held, self.admission.book.take_finished
                )
                tasks.create_task(guard("log shipping", shipper))
                self.ready.set()
        finally:
            await self.logs.close_all()
            await self.admission.close()
            self.store.close()
            if self.metrics_server is not None:
                await self.metrics_server.close()
