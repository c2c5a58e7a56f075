"""Wiring: one `Agent` per member cluster — inventory mirrors, the admission shell, the hub
session, capacity reports and log streams — run as guarded tasks until cancelled.

Start-up order: restore state (last config, held workloads) → list nodes, pods and jobs →
bring held workloads up to date (`AdmissionShell.prime`) → dial the hub (Hello carries the
inventory and the held workloads) → admission loop and capacity loop. A crash of any eternal
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
from agent.errors import HubUnreachableError, K8sError
from agent.hubclient import HubSession
from agent.inventory import Inventory
from agent.k8s.client import Kube, Resource
from agent.logs import LogStreams
from agent.materialize import Materializer
from agent.settings import AGENT_VERSION, AgentSettings
from agent.state import StateStore
from api.v1alpha1.messages import (
    Cancel,
    ConfigSync,
    DispatchOffer,
    Hello,
    Payload,
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
        self, settings: AgentSettings, kube: Kube, *, clock: Callable[[], float] = time.time
    ) -> None:
        timings = settings.timings
        self.settings = settings
        self.kube = kube
        self.clock = clock
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
        self.materializer = Materializer(kube)
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
            clock=clock,
            on_change=self.pacer.changed,
            cycle_min_interval=timings.cycle_min_interval,
            status_interval=timings.status_interval,
            pending_refresh=timings.pending_refresh,
            finished_ttl=timings.finished_ttl,
        )
        self.logs = LogStreams(
            cluster=settings.cluster,
            kube=kube,
            inventory=self.inventory,
            send=self.session.send_log,
            buffer_lines=settings.log_buffer_lines,
            batch_lines=settings.log_batch_lines,
            batch_interval=timings.log_batch_interval,
            finished=self._workload_done,
        )
        self.ready = asyncio.Event()

    # callbacks -------------------------------------------------------------------------------

    def _workload_done(self, key: str) -> bool:
        held = self.admission.held.get(key)
        return held is None or held.finished

    def _on_cluster_change(self, _resource: Resource) -> None:
        self.admission.wake()
        self.pacer.changed()

    def hello(self) -> Hello:
        cfg = self.admission.config
        return Hello(
            cluster=self.settings.cluster,
            agent_version=AGENT_VERSION,
            config_revision=cfg.revision if cfg else None,
            inventory=self.inventory.summary(self.admission.flavors()),
            workloads=self.admission.held_summary(),
        )

    async def _on_connect(self) -> None:
        log.info("connected to the hub %s as %s", self.settings.hub, self.settings.cluster)
        await self.send_capacity()
        # The latest report of every held workload again, acknowledged or not: a hub that
        # crashed after acking (before storing) a report would otherwise never learn it.
        # Reports are idempotent, so this costs one message per held workload.
        for report in list(self.admission.last_reports.values()):
            self.session.report(report)

    async def _on_disconnect(self) -> None:
        await self.logs.close_all()

    async def _on_message(self, payload: Payload) -> None:
        if isinstance(payload, ConfigSync | DispatchOffer | Withdraw | Cancel):
            self.admission.submit(payload)
        else:
            log.error("unexpected %s from the hub; ignored", payload.type)

    async def _on_log_message(self, payload: Any) -> None:
        await self.logs.handle(payload)

    # capacity --------------------------------------------------------------------------------

    async def send_capacity(self) -> None:
        cfg = self.admission.config
        report = capacity_report(
            cluster=self.settings.cluster,
            snapshot=self.admission.snapshot(),
            nodes=self.inventory.node_summary(),
            observed_at=datetime.fromtimestamp(self.clock(), UTC),
            config_revision=cfg.revision if cfg else None,
        )
        # When disconnected, the next connect sends a fresh one after Hello.
        with contextlib.suppress(HubUnreachableError):
            await self.session.send(report)

    async def _fence_loop(self, after: float) -> None:
        """Self-fencing: stop everything once the hub has been gone for `after` seconds
        (never before the first connection)."""
        session = self.session
        while True:
            await session.connected.wait()
            await session.disconnected.wait()
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
                async with asyncio.timeout(after):
                    await session.connected.wait()
            except TimeoutError:
                message = f"fenced: no contact with the hub for {after:g}s"
                log.warning("%s; stopping every running workload", message)
                self.admission.submit(Fence(message))

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

    async def _capacity_loop(self) -> None:
        while True:
            await self.pacer.wait()
            await self.send_capacity()

    # running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        self.admission.load()
        try:
            self.inventory.kubernetes_version = await self.kube.server_version()
        except K8sError as exc:
            log.warning("cannot read the server version: %s", exc)
        try:
            async with asyncio.TaskGroup() as tasks:
                for mirror in self.inventory.mirrors:
                    tasks.create_task(guard(f"watch {mirror.resource}", mirror.run()))
                await self.inventory.wait_listed()
                await self.admission.prime()
                tasks.create_task(guard("admission", self.admission.run()))
                tasks.create_task(guard("hub session", self.session.run()))
                tasks.create_task(guard("capacity", self._capacity_loop()))
                tasks.create_task(
                    guard("orphans", self._orphan_loop(self.settings.timings.orphan_grace))
                )
                if self.settings.fence_after is not None:
                    tasks.create_task(guard("fencing", self._fence_loop(self.settings.fence_after)))
                self.ready.set()
        finally:
            await self.logs.close_all()
            await self.admission.close()
            self.store.close()
